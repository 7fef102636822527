// Package fake is a simulated Windows host: a machine with a build, a pending
// reboot, containerd, an HNS network and a CSI Proxy, that the agent drives
// exactly like the real one. The simulated fleet owns one per node and plays
// the reboot; unit tests drive it directly.
package fake

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"winpool.dev/agent/internal/host"
)

// Servicing exit codes the fake can return (the real ones, see decide).
const (
	ExitSuccess        = 0
	ExitRebootRequired = 3010
	// ExitInstallFailed is a generic servicing failure (0x800F0922).
	ExitInstallFailed = 0x800F0922
	// ExitSourceUnreachable: the update could not be downloaded
	// (0x80072EE2, ERROR_INTERNET_TIMEOUT).
	ExitSourceUnreachable = 0x80072EE2
)

// Options is the machine at first boot and how it behaves.
type Options struct {
	Build           host.Build
	Containerd      string
	CNIMode         string
	CSIProxyVersion string
	// InstallDuration is how long an update install takes.
	InstallDuration time.Duration
	// InstallExitCode, when set, decides the servicing exit code of an install
	// at its end (default: ExitRebootRequired, with the target build staged
	// for the reboot); it may block, and the task runs on meanwhile.
	InstallExitCode func(target host.Build) int
	// OnInstallStarted, when set, is called (on its own goroutine) when a
	// servicing task starts.
	OnInstallStarted func()
	// OnReboot is called (on its own goroutine) when the agent reboots the
	// host; the fleet stops the agent, plays the reboot and calls
	// CompleteReboot. Nil: the reboot completes at once.
	OnReboot func(reason string)
	// HNS returns what HNS holds now (the fleet's model of kube-proxy).
	HNS func() host.HNSCounts
	// FileRenames, when set, are PendingFileRenameOperations entries that
	// are there at first boot and put back at every boot (Defender, an
	// installer's leftovers): they never clear.
	FileRenames []string
	// RebootPending: CBS RebootPending at first boot (an update installed
	// outside winpool, by hand or by WSUS, and not rebooted for yet).
	RebootPending bool
	// ObserveError, when set, decides whether the n-th read of the host
	// (from 1) fails, and how: a read of the registry, SCM or
	// `containerd --version` that fails for a moment.
	ObserveError func(n int) error
	// Lands, when set, is the build an install of target stages for the next
	// boot (default: target): a cumulative update can land past the build a
	// pool asked for, or short of it.
	Lands func(target host.Build) host.Build
	// RuntimeService is how containerd's service is installed (a host
	// profile: NSSM on AKS).
	RuntimeService host.Service
	// CSIProxyHost, when set, is a CSI Proxy the machine's image runs as a
	// host service (AKS, on-prem installs).
	CSIProxyHost *host.CSIProxyHost
	// RuntimeCrashLoops: a new containerd answers once over CRI, then
	// crash-loops while its service still says Running.
	RuntimeCrashLoops bool
	// RuntimeUpgrade, when set, decides how a containerd upgrade task ends
	// (default: RuntimeSucceeded, the version installed at once). With
	// RuntimeRunning the task never finishes; with RuntimeRolledBack or
	// RuntimeFailed containerd keeps its version.
	RuntimeUpgrade func(req host.RuntimeRequest) host.RuntimePhase
	// SourceUnreachable, when set, is why no update source answers this
	// machine (a proxy or firewall in the way, WSUS down).
	SourceUnreachable string
	// FreeBytes on C: (0: 64 GiB).
	FreeBytes int64
}

// Host is a simulated machine. Safe for concurrent use.
type Host struct {
	mu            sync.Mutex
	o             Options
	build         host.Build
	staged        *host.Build
	containerd    string
	cni           string
	csi           string
	rebootPending bool
	state         host.State
	installs      int
	reboots       int
	rebootReasons []string
	reads         int
	runtimeSwaps  int
	rollbacks     int
	updates       []host.UpdateRequest
	runtimeTask   *host.RuntimeUpgrade
	updateTask    *host.UpdateTask
}

var _ host.Host = (*Host)(nil)

func New(o Options) *Host {
	return &Host{o: o, build: o.Build, containerd: o.Containerd, cni: o.CNIMode, csi: o.CSIProxyVersion, rebootPending: o.RebootPending}
}

func (h *Host) Observe(ctx context.Context) (host.Observed, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reads++
	if h.o.ObserveError != nil {
		if err := h.o.ObserveError(h.reads); err != nil {
			return host.Observed{}, err
		}
	}
	obs := host.Observed{Build: h.build, ContainerdVersion: h.containerd, CNIMode: h.cni, CSIProxyVersion: h.csi,
		Reboot: host.RebootSignals{CBSRebootPending: h.rebootPending, FileRenames: h.o.FileRenames}, RuntimeService: h.o.RuntimeService}
	if h.o.CSIProxyHost != nil {
		c := *h.o.CSIProxyHost
		obs.CSIProxyHost = &c
	}
	if h.runtimeTask != nil {
		u := *h.runtimeTask
		obs.RuntimeUpgrade = &u
	}
	if h.updateTask != nil {
		u := *h.updateTask
		obs.UpdateTask = &u
	}
	return obs, nil
}

// Machine's view of the network: the HNS network's type as it is, read by the
// simulation itself (never failing, never counted as the agent's read).
func (h *Host) CNIMode() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cni
}

func (h *Host) HNS(ctx context.Context) (host.HNSCounts, error) {
	if h.o.HNS == nil {
		return host.HNSCounts{}, nil
	}
	return h.o.HNS(), nil
}

// StartUpdate starts the machine's servicing task: it runs on its own for
// InstallDuration, whatever becomes of the agent that started it, then
// leaves its result where Observe reads it.
func (h *Host) StartUpdate(ctx context.Context, req host.UpdateRequest) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.updateTask != nil && h.updateTask.Phase == host.UpdateRunning {
		return fmt.Errorf("a servicing task is running already (revision %s, attempt %d)", h.updateTask.Revision, h.updateTask.Attempt)
	}
	h.installs++
	h.updates = append(h.updates, req)
	h.updateTask = &host.UpdateTask{Revision: req.Revision, Attempt: req.Attempt, StartedAt: req.StartedAt, Target: req.Target.String(),
		Phase: host.UpdateRunning, Started: time.Now()}
	task := h.updateTask
	if h.o.OnInstallStarted != nil {
		go h.o.OnInstallStarted()
	}
	go h.service(task, req.Target)
	return nil
}

// service is the servicing task's run: the install, then its result.
func (h *Host) service(task *host.UpdateTask, target host.Build) {
	time.Sleep(h.o.InstallDuration)
	code := ExitRebootRequired
	switch {
	case h.o.SourceUnreachable != "":
		// The download cannot start: WinHTTP's timeout, as servicing returns it.
		code = ExitSourceUnreachable
	case h.o.InstallExitCode != nil:
		code = h.o.InstallExitCode(target)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch code {
	case ExitRebootRequired:
		t := target
		if h.o.Lands != nil {
			t = h.o.Lands(target)
		}
		h.staged = &t
		h.rebootPending = true
	case ExitSuccess:
		h.build = target
	}
	task.Phase = host.UpdateDone
	task.Result = host.UpdateResult{ExitCode: code, Detail: fmt.Sprintf("simulated cumulative update to %s", target)}
}

func (h *Host) UpgradeContainerd(ctx context.Context, req host.RuntimeRequest) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.runtimeTask != nil && (h.runtimeTask.Phase == host.RuntimeScheduled || h.runtimeTask.Phase == host.RuntimeRunning) {
		return fmt.Errorf("a containerd upgrade task is running already (revision %s, attempt %d)", h.runtimeTask.Revision, h.runtimeTask.Attempt)
	}
	h.runtimeSwaps++
	h.runtimeTask = &host.RuntimeUpgrade{Revision: req.Revision, Attempt: req.Attempt, Version: req.Version, Phase: host.RuntimeScheduled, Started: time.Now()}
	if h.o.RuntimeUpgrade != nil {
		h.decideSwap(req, h.o.RuntimeUpgrade(req))
		return nil
	}
	// The real task's steps and proof, on its own goroutine: it outlives the
	// agent's request, as the scheduled task outlives the agent's pod.
	dir, err := os.MkdirTemp("", "winpool-fake-swap-")
	if err != nil {
		return err
	}
	task, from, crash := h.runtimeTask, h.containerd, h.o.RuntimeCrashLoops
	go func() {
		r, runs := swapTask(context.Background(), dir, from, req, crash)
		h.mu.Lock()
		defer h.mu.Unlock()
		*task = r
		h.containerd = runs
		if task.Phase == host.RuntimeRolledBack {
			h.rollbacks++
		}
	}()
	return nil
}

// decideSwap ends a swap as Options.RuntimeUpgrade says, at once.
func (h *Host) decideSwap(req host.RuntimeRequest, phase host.RuntimePhase) {
	h.runtimeTask.Phase = phase
	switch phase {
	case host.RuntimeSucceeded:
		h.containerd = req.Version
	case host.RuntimeRolledBack, host.RuntimeFailed:
		if phase == host.RuntimeRolledBack {
			h.rollbacks++
		}
		h.runtimeTask.Message = "simulated: containerd " + req.Version + " did not start"
	}
}

// SetSourceUnreachable makes the update sources answer again ("") or stop
// answering (why), as a proxy or WSUS going away does.
func (h *Host) SetSourceUnreachable(why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.o.SourceUnreachable = why
}

// defaultFreeBytes is the room on a simulated C: with nothing else said.
const defaultFreeBytes = 64 << 30

// Preflight finds each source of req reachable unless Options.SourceUnreachable
// says otherwise, and the room Options.FreeBytes gives.
func (h *Host) Preflight(ctx context.Context, req host.UpdateRequest) host.PreflightFindings {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := host.PreflightFindings{SystemDrive: "C:", FreeBytes: h.o.FreeBytes}
	if f.FreeBytes == 0 {
		f.FreeBytes = defaultFreeBytes
	}
	names := []string{"Windows Update"}
	if len(req.Packages) > 0 {
		names = names[:0]
		for _, p := range req.Packages {
			names = append(names, p.Name())
		}
	}
	for _, n := range names {
		f.Sources = append(f.Sources, host.SourceCheck{Name: n, Err: h.o.SourceUnreachable})
	}
	return f
}

func (h *Host) Reboot(ctx context.Context, reason string) error {
	h.mu.Lock()
	h.reboots++
	h.rebootReasons = append(h.rebootReasons, reason)
	cb := h.o.OnReboot
	h.mu.Unlock()
	if cb == nil {
		h.CompleteReboot()
		return nil
	}
	go cb(reason)
	return nil
}

// CompleteReboot is the machine coming back: a staged update is now the
// running build, and nothing is pending. Returns the build it booted.
func (h *Host) CompleteReboot() host.Build {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.staged != nil {
		h.build = *h.staged
		h.staged = nil
	}
	h.rebootPending = false
	return h.build
}

func (h *Host) LoadState() (host.State, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state, nil
}

func (h *Host) SaveState(s host.State) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.state = s
	return nil
}

// Machine is what the kubelet of this host would report, for the fleet.
type Machine struct {
	Build      host.Build
	Containerd string
	Installs   int
	Reboots    int
	// RebootReasons are the reasons the agent gave for each reboot, in order.
	RebootReasons []string
	// RuntimeSwaps are the containerd upgrades started; Rollbacks those that
	// ended with the old containerd put back.
	RuntimeSwaps, Rollbacks int
	// Updates are the install requests the host received, in order.
	Updates []host.UpdateRequest
}

func (h *Host) Machine() Machine {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Machine{Build: h.build, Containerd: h.containerd, Installs: h.installs, Reboots: h.reboots,
		RebootReasons: append([]string(nil), h.rebootReasons...), RuntimeSwaps: h.runtimeSwaps, Rollbacks: h.rollbacks,
		Updates: append([]host.UpdateRequest(nil), h.updates...)}
}
