package windows

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"winpool.dev/agent/internal/hns"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/versions"
)

const (
	// A hung containerd.exe must not hold the agent's loop.
	commandTimeout = 30 * time.Second
	// shutdown /c takes at most 512 characters.
	maxShutdownComment = 512
)

// Host is the Windows node the agent runs on, on its Machine.
type Host struct {
	m          Machine
	o          Options
	state      stateFile
	containerd string
	// hns reads HNS once per agent tick: Observe lists the networks, HNS
	// (called right after it) counts on that listing (hns.Reader).
	hns *hns.Reader
	// offers are preflight's Windows Update searches (offer.go).
	offers offerSearches
	// stagings is the download before the drain (stagehost.go).
	stagings stagings
	// newest is the search for the newest cumulative update (newest.go).
	newest newestSearch
}

var _ host.Host = (*Host)(nil)

// NewOn returns the host the agent runs on m, once its state folder is
// secured (secureStateDir): a state folder someone else owns is an error.
func NewOn(m Machine, o Options) (*Host, error) {
	dir := o.StateDir
	if dir == "" {
		dir = defaultStateDir(m.Box.Getenv)
	}
	o.StateDir = dir
	// Before anything is read from or written to it: the state folder holds
	// what a SYSTEM task runs (statedir.go).
	if err := secureStateDir(m.System, dir); err != nil {
		return nil, err
	}
	return &Host{m: m, o: o, state: stateFile{path: filepath.Join(dir, "state.json")}, containerd: o.Containerd,
		hns: hns.NewReader(m.HCN, o.KubeNetwork, hns.ReuseFor)}, nil
}

// Observe reads the build, the reboot-pending signals, containerd's version,
// the last containerd upgrade task's and servicing task's results,
// kube-proxy's HNS network type, the CSI Proxy host service and containerd's
// service, each from the machine. An error names the read that failed (the
// agent waits it out and says so).
func (h *Host) Observe(ctx context.Context) (host.Observed, error) {
	var obs host.Observed
	var err error
	if obs.Build, err = readBuild(h.m.System); err != nil {
		return obs, fmt.Errorf("reading the build from the registry: %w", err)
	}
	signals, err := rebootSignals(h.m.System)
	if err != nil {
		return obs, fmt.Errorf("reading the reboot-pending keys from the registry: %w", err)
	}
	obs.Reboot = signals
	if obs.RuntimeUpgrade, err = h.runtimeResult(); err != nil {
		return obs, err
	}
	// While the upgrade task swaps the binaries, containerd.exe may be half
	// copied or stopped: its version would be a failed read or a wrong one,
	// and the decision waits for the task anyway.
	if readsContainerdVersion(obs.RuntimeUpgrade, h.m.Box.Now()) {
		if obs.ContainerdVersion, err = h.containerdVersion(ctx); err != nil {
			return obs, err
		}
	}
	if obs.UpdateTask, err = h.servicingResult(); err != nil {
		return obs, err
	}
	obs.CNIMode, obs.CNIProblem, obs.CNIReadError = h.hns.Network().CNI()
	if obs.CSIProxyHost, err = h.csiProxyHost(ctx); err != nil {
		return obs, fmt.Errorf("reading the CSI Proxy service (%s): %w", strings.Join(csiProxyServices, " or "), err)
	}
	if obs.CSIProxyHost != nil && obs.CSIProxyHost.Running {
		obs.CSIProxyVersion = obs.CSIProxyHost.Version
	}
	if obs.RuntimeService, err = h.runtimeService(); err != nil {
		return obs, fmt.Errorf("reading the %s service: %w", containerdService, err)
	}
	return obs, nil
}

// csiProxyHost is the CSI Proxy host service as installed (pickCSIProxy),
// with the version of the program it runs and whether its pipes answer; nil
// when neither service name is installed.
func (h *Host) csiProxyHost(ctx context.Context) (*host.CSIProxyHost, error) {
	installed, err := readServices(h.m.System, csiProxyServices...)
	if err != nil {
		return nil, err
	}
	s, ok := pickCSIProxy(installed)
	if !ok {
		return nil, nil
	}
	// A stopped service holds no pipe: no dial (it would wait out its timeout).
	return &host.CSIProxyHost{
		Service:     s,
		Version:     csiProxyVersion(h.m.Box.ProductVersion(s.Program), s.Program),
		PipesAnswer: s.Running && csiProxyPipesAnswer(ctx, h.m.Net),
	}, nil
}

// runtimeService is containerd's service as installed, or the service
// that runs it as its child (WrapperParent); the zero Service when there is
// neither.
func (h *Host) runtimeService() (host.Service, error) {
	found, err := readServices(h.m.System, append([]string{containerdService}, runtimeParents...)...)
	if err != nil || len(found) == 0 {
		return host.Service{}, err
	}
	if found[0].Name != containerdService {
		found[0].Wrapper = host.WrapperParent
	}
	return found[0], nil
}

// containerdVersion runs `containerd --version`; with no containerd.exe
// where a containerd service or Program Files puts it (RKE2 keeps its own
// under its data folder), it asks the runtime over CRI, as the kubelet does;
// "" when nothing answers there either.
func (h *Host) containerdVersion(ctx context.Context) (string, error) {
	bin := h.containerdBinary()
	if bin == "" {
		v, err := criVersion(ctx, h.m.Net, containerdPipe)
		if err != nil {
			return "", nil
		}
		return strings.TrimPrefix(v, "v"), nil
	}
	out, err := runVersion(ctx, h.m.Programs, bin)
	if err != nil {
		return "", err
	}
	return versions.FromContainerd(out)
}

// containerdBinary is the containerd the host runs (containerdProgram).
func (h *Host) containerdBinary() string {
	return containerdProgram(h.m.System, h.containerd, h.m.Box.Getenv("ProgramFiles"), func(p string) bool {
		_, err := h.m.Box.Stat(p)
		return err == nil
	})
}

// HNS counts the load balancers and kube-proxy's remote endpoints, on the
// networks Observe listed just before (within hns.ReuseFor), so one agent
// tick lists each of HNS's networks, load balancers and endpoints once.
func (h *Host) HNS(ctx context.Context) (host.HNSCounts, error) {
	return h.hns.Counts()
}

// Reboot asks Windows for a planned restart with reason "Operating System:
// Hot fix (Planned)" (p:2:17), which is how the event log will record it.
func (h *Host) Reboot(ctx context.Context, reason string) error {
	comment := "winpool: " + reason
	if len(comment) > maxShutdownComment {
		cut := maxShutdownComment
		for cut > 0 && !utf8.RuneStart(comment[cut]) {
			cut--
		}
		comment = comment[:cut]
	}
	shutdown := filepath.Join(systemRoot(h.m.Box.Getenv), "System32", "shutdown.exe")
	out, err := h.m.Programs.Run(ctx, shutdown, "/r", "/t", "0", "/d", "p:2:17", "/c", comment)
	if err == nil && out.ExitCode != 0 {
		err = fmt.Errorf("exit code %d", out.ExitCode)
	}
	if err != nil {
		return fmt.Errorf("shutdown /r: %w (output %q)", err, strings.TrimSpace(string(out.Stdout)+string(out.Stderr)))
	}
	return nil
}

// runVersion is `<containerd> --version`'s output.
func runVersion(ctx context.Context, p Programs, containerd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	out, err := p.Run(ctx, containerd, "--version")
	if err == nil && out.ExitCode != 0 {
		err = fmt.Errorf("exit code %d", out.ExitCode)
	}
	if err != nil {
		return "", fmt.Errorf("%s --version: %w (output %q)", containerd, err, strings.TrimSpace(string(out.Stdout)+string(out.Stderr)))
	}
	return string(out.Stdout), nil
}

func systemRoot(getenv func(string) string) string {
	if r := getenv("SystemRoot"); r != "" {
		return r
	}
	return `C:\Windows`
}

func (h *Host) LoadState() (host.State, error) { return h.state.load() }

func (h *Host) SaveState(s host.State) error { return h.state.save(s) }
