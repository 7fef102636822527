// Package fakewin is a Windows Server machine in memory, under the seam the
// agent's Windows logic runs on (windows.Machine): a registry, a service
// control manager whose services start, stop and crash, Task Scheduler
// running the agent's tasks, a Windows Update Agent with a catalogue, DISM,
// HNS networks, a boot sequence, and files in a real folder standing for C:.
// It knows nothing of winpool's decisions: the simulated fleet and the
// tests run windows.Host over it, so the code a Windows node runs is the
// code they run; a fault is a way this machine behaves (faults.go in
// package fleet), never a second implementation of servicing.
package fakewin

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"winpool.dev/agent/internal/hns"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/host/windows"
)

// Registry keys and values the machine keeps as Windows does.
const (
	currentVersionKey = `SOFTWARE\Microsoft\Windows NT\CurrentVersion`
	cbsRebootPending  = `SOFTWARE\Microsoft\Windows\CurrentVersion\Component Based Servicing\RebootPending`
	wuRebootRequired  = `SOFTWARE\Microsoft\Windows\CurrentVersion\WindowsUpdate\Auto Update\RebootRequired`
	sessionManagerKey = `SYSTEM\CurrentControlSet\Control\Session Manager`
	servicesKey       = `SYSTEM\CurrentControlSet\Services\`
)

// Service is a host service as the node image installs it.
type Service struct {
	Name string `json:"name"`
	// Program is the file the service runs, under the machine's C:
	// (`Program Files\containerd\containerd.exe`).
	Program string `json:"program"`
	// NSSM: the service's ImagePath is nssm.exe, and Program is NSSM's
	// Parameters\Application (AKS).
	NSSM bool `json:"nssm,omitempty"`
	// Host, when set, is the program the service's ImagePath runs with
	// Program as its first argument (EKS's EKS-WindowsServiceHost.exe).
	Host string `json:"host,omitempty"`
	// DependsOn: services that must run for this one to (kubeproxy on
	// kubelet on AKS); a stop of one of them stops this one first.
	DependsOn []string `json:"dependsOn,omitempty"`
	// ProductVersion is the program's version resource ("": none, as the
	// csi-proxy binaries AKS ships have none).
	ProductVersion string `json:"productVersion,omitempty"`
	// Children are the programs the service starts as child processes,
	// by name (RKE2's rke2 runs containerd and kubelet): each runs while the
	// service does.
	Children map[string]string `json:"children,omitempty"`
}

// Value is a registry value the image sets under HKLM.
type Value struct {
	Key  string `json:"key"`
	Name string `json:"name"`
	// String, or DWORD when String is "".
	String string `json:"string,omitempty"`
	DWORD  uint32 `json:"dword,omitempty"`
}

// Options is the machine as its image built it, and how it behaves.
type Options struct {
	// Root is the folder standing for C:; "" makes a temporary one, removed
	// by Close.
	Root  string
	Build host.Build
	// EarlierRollups: the cumulative updates installed before the one of
	// Build, oldest first, whose packages the component store keeps
	// (superseded): the build a removal of Build's goes back to. None: Build
	// is the image's own.
	EarlierRollups []host.Build
	// Containerd is the version of the containerd.exe installed.
	Containerd string
	// ContainerdConfig is the config.toml the image lays down beside it
	// ("": "version = 2", as AKS, EKS and containerd 1.x's `config default`
	// write it).
	ContainerdConfig string
	// Services the image installs; the containerd service's Program is
	// where Containerd is installed. Every service runs at boot.
	Services []Service
	// Registry values the image sets (WSUS policy, …).
	Registry []Value
	// Network is kube-proxy's HNS network (its name and hcn type); a zero
	// Network: none.
	Network hns.Network
	// NetworkResetAtBoot: every boot removes the Network (AKS's boot-time
	// HNS clean-up); the CNI creates it again when a pod sandbox is set up
	// on the node (SandboxStarted), never on its own.
	NetworkResetAtBoot bool
	// KubeProxyInPod: kube-proxy runs in a HostProcess pod
	// (sig-windows-tools' and Calico's DaemonSets): kube-proxy.exe under
	// the script its container runs, under containerd's shim
	// (processes.go). Ended, it is started again after KubeProxyPodRestart
	// (0: a second), as the kubelet restarts an exited container.
	KubeProxyInPod      bool
	KubeProxyPodRestart time.Duration
	// HNS is what HNS holds now (the fleet's model of kube-proxy); nil:
	// nothing. An error is HNS not answering.
	HNS func() (host.HNSCounts, error)
	// Catalogue is what Windows Update (or WSUS) offers this machine.
	Catalogue Catalogue
	// FileRenames, when set, are PendingFileRenameOperations entries that
	// are there at first boot and put back at every boot (Defender, an
	// installer's leftovers).
	FileRenames []string
	// ReadFails, when set, decides whether the n-th read of the build from
	// the registry (from 1) fails, and how.
	ReadFails func(n int) error
	// RuntimeCrashLoops: a containerd installed by an upgrade answers CRI
	// once, then crash-loops while its service (NSSM) still says Running.
	RuntimeCrashLoops bool
	// Unreachable, when set, is why no update source answers the machine
	// (a proxy or firewall in the way, WSUS down).
	Unreachable string
	// RebootPending: CBS RebootPending at first boot (an update installed
	// outside winpool, by hand or by WSUS, not rebooted for yet).
	RebootPending bool
	// TasksNeverRun: Task Scheduler accepts every run and the task's
	// program never starts (antivirus or App Control blocking it): Run's
	// S_OK only means accepted.
	TasksNeverRun bool
	// OnBattery: a UPS reports battery power, so a task whose conditions
	// forbid starting on batteries (the schema's default) does not start.
	OnBattery bool
	// FreeBytes on C: (0: 64 GiB).
	FreeBytes int64
	// OnReboot is called, on its own goroutine, when shutdown /r is run;
	// the caller plays the reboot and calls Boot. Nil: Boot at once.
	OnReboot func(reason string)
	// OnTaskStarted is called, on its own goroutine, when Task Scheduler
	// starts a task (its name).
	OnTaskStarted func(name string)
	// CutDownloads: the first this many downloads of each file the machine's
	// network serves (containerd's release archive) are cut mid-body, as a
	// proxy resetting a long transfer does; a Range request for the rest of
	// the same file (If-Range: its ETag) is answered with it.
	CutDownloads int
	// Firewalled are hosts the machine's network drops (a firewall whose
	// allow-list misses them).
	Firewalled []string
	// WinHTTPProxy is the machine's WinHTTP proxy (host:port; "": none), and
	// ProxyAnswer the status it answers a CONNECT to a host:port with (nil:
	// 200, a tunnel).
	WinHTTPProxy string
	ProxyAnswer  func(target string) int
	// Environment is the machine's environment variables (names are
	// case-insensitive, as on Windows), besides the folders it always has.
	Environment map[string]string
}

// Machine is a simulated Windows machine. Safe for concurrent use.
type Machine struct {
	o    Options
	root string
	temp bool

	mu       sync.Mutex
	strs     map[string]string // `key\value`
	ints     map[string]uint64
	multi    map[string][]string
	keys     map[string]bool
	services map[string]*service
	// staged is the build the next boot lands on (a cumulative update's
	// pending operations); nil: none.
	staged *host.Build
	booted time.Time
	// netGone: the boot removed the Network and no pod sandbox has been
	// set up since (Options.NetworkResetAtBoot).
	netGone bool
	builds  int // reads of the build
	unreach string
	wu      wuState
	tasks   map[string]*taskRun
	// cri is containerd's CRI server on its pipe (pipes.go), criStop
	// stops it; nil until first dialled.
	cri     *pipeListener
	criStop func()
	// defs are the registered tasks, by name.
	defs map[string]taskDefinition
	// results are the tasks' Last Run Results, by name.
	results map[string]uint32
	reboots []string
	// kubeProxyStarted: when kube-proxy (its service, or its pod's
	// process) was last started other than by a boot (zero: never).
	kubeProxyStarted time.Time
	// pids: the PIDs of the processes that run, by what they are
	// (processes.go); nextPID hands them out; podProxyDown: the pod's
	// kube-proxy was ended and is not started again yet.
	pids         map[string]uint32
	nextPID      uint32
	podProxyDown bool
	// cuts: downloads cut, by path; resumed: Range requests answered.
	cuts     map[string]int
	resumed  int
	hnsNow   host.HNSCounts
	hnsErr   error
	installs int
	searches int
	// hotpatched: hotpatches landed in memory (no reboot).
	hotpatched int
	// rollups: the cumulative update packages in the component store,
	// oldest first, the last one the build's (packages.go); undos: the
	// removals of one.
	rollups  []host.Build
	undos    int
	swaps    int
	rollback int
	// bootContainerd is the containerd version the machine booted with.
	bootContainerd string
	bootCtx        context.Context
	bootEnd        context.CancelFunc
}

type service struct {
	Service
	running bool
	// upgraded: its program was replaced since boot (a crash loop plays
	// on a new containerd only).
	crashes bool
	answers int
}

// New builds the machine and boots it.
func New(o Options) (*Machine, error) {
	m := &Machine{o: o, root: o.Root, unreach: o.Unreachable, strs: map[string]string{}, ints: map[string]uint64{}, multi: map[string][]string{},
		keys: map[string]bool{}, services: map[string]*service{}, tasks: map[string]*taskRun{}, defs: map[string]taskDefinition{}, results: map[string]uint32{}, pids: map[string]uint32{}, nextPID: 1000}
	if m.root == "" {
		dir, err := os.MkdirTemp("", "winpool-machine-")
		if err != nil {
			return nil, err
		}
		m.root, m.temp = dir, true
	}
	m.setBuild(o.Build)
	for _, s := range o.Services {
		m.services[strings.ToLower(s.Name)] = &service{Service: s}
		if s.NSSM {
			m.strs[strings.ToLower(servicesKey+s.Name+`\Parameters\Application`)] = m.Path(s.Program)
		}
	}
	for _, v := range o.Registry {
		k := strings.ToLower(v.Key + `\` + v.Name)
		if v.String != "" {
			m.strs[k] = v.String
		} else {
			m.ints[k] = uint64(v.DWORD)
		}
	}
	if err := m.layDown(); err != nil {
		return nil, err
	}
	m.Boot()
	// The machine stands for a node that has run its pods since that boot.
	m.netGone = false
	if o.RebootPending {
		m.keys[strings.ToLower(cbsRebootPending)] = true
	}
	return m, nil
}

// layDown lays down the image's files: each service's program, containerd
// with its config, and the agent's own program for its tasks to copy.
func (m *Machine) layDown() error {
	for _, s := range m.o.Services {
		body := "program " + s.Name
		if strings.EqualFold(s.Name, "containerd") {
			body = containerdLine(m.o.Containerd)
			if err := writeFile(m.containerdConfig(s.Program), cmp.Or(m.o.ContainerdConfig, "version = 2\n")); err != nil {
				return err
			}
		}
		if err := writeFile(m.Path(s.Program), body); err != nil {
			return err
		}
		for child, program := range s.Children {
			body := "program " + child
			if child == "containerd" {
				body = containerdLine(m.o.Containerd)
			}
			if err := writeFile(m.Path(program), body); err != nil {
				return err
			}
		}
	}
	return writeFile(m.agentProgram(), "winpool-agent")
}

// runtime is the service containerd runs as, or the one that runs it as
// its child, and containerd's program; nil when there is neither. m.mu held.
func (m *Machine) runtime() (*service, string) {
	if s, ok := m.services["containerd"]; ok {
		return s, s.Program
	}
	for _, s := range m.services {
		if p, ok := s.Children["containerd"]; ok {
			return s, p
		}
	}
	return nil, ""
}

// runs: the program name runs, as a service or a service's child; ok is
// false when the machine has neither. m.mu held.
func (m *Machine) runs(name string) (running, ok bool) {
	if s, ok := m.services[name]; ok {
		return s.running, true
	}
	for _, s := range m.services {
		if _, ok := s.Children[name]; ok {
			return s.running, true
		}
	}
	return false, false
}

func writeFile(p, body string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(body), 0o644)
}

// containerdLine is what `containerd --version` prints.
func containerdLine(v string) string {
	return "containerd github.com/containerd/containerd v" + v + " 0123456789abcdef\n"
}

// Path is a path on the machine's C: (`Program Files\x`) as a file here.
func (m *Machine) Path(winPath string) string {
	p := strings.TrimPrefix(strings.TrimPrefix(winPath, `C:`), `\`)
	return filepath.Join(m.root, filepath.FromSlash(strings.ReplaceAll(p, `\`, "/")))
}

func (m *Machine) agentProgram() string { return m.Path(`winpool\winpool-agent.exe`) }

// Close removes a temporary C:.
func (m *Machine) Close() error {
	m.mu.Lock()
	for _, t := range m.tasks {
		t.cancel()
	}
	stop := m.criStop
	m.mu.Unlock()
	if stop != nil {
		stop()
	}
	if m.temp {
		return os.RemoveAll(m.root)
	}
	return nil
}

func (m *Machine) setBuild(b host.Build) {
	k := strings.ToLower(currentVersionKey + `\`)
	m.ints[k+"currentmajorversionnumber"] = uint64(b.Major)
	m.ints[k+"currentminorversionnumber"] = uint64(b.Minor)
	m.ints[k+"ubr"] = uint64(b.UBR)
	m.strs[k+"currentbuildnumber"] = fmt.Sprint(b.Build)
}

func (m *Machine) buildLocked() host.Build {
	k := strings.ToLower(currentVersionKey + `\`)
	var b host.Build
	fmt.Sscan(m.strs[k+"currentbuildnumber"], &b.Build)
	b.Major, b.Minor, b.UBR = int(m.ints[k+"currentmajorversionnumber"]), int(m.ints[k+"currentminorversionnumber"]), int(m.ints[k+"ubr"])
	return b
}

// Boot is the machine starting: a staged update becomes the build, the
// pending-reboot keys go (the boot's servicing consumed them; the file
// renames an image puts back come back), tasks that ran died with the old
// boot, and every service starts.
func (m *Machine) Boot() host.Build {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bootEnd != nil {
		m.bootEnd()
	}
	m.bootCtx, m.bootEnd = context.WithCancel(context.Background())
	secondPhase := false
	if m.staged != nil {
		m.landRollupLocked(*m.staged)
		m.setBuild(*m.staged)
		m.staged = nil
		secondPhase = m.o.Catalogue.TwoPhase
	}
	delete(m.keys, strings.ToLower(cbsRebootPending))
	if secondPhase {
		m.keys[strings.ToLower(cbsRebootPending)] = true
	}
	delete(m.keys, strings.ToLower(wuRebootRequired))
	if len(m.o.FileRenames) > 0 {
		m.multi[strings.ToLower(sessionManagerKey+`\PendingFileRenameOperations`)] = append([]string(nil), m.o.FileRenames...)
	} else {
		delete(m.multi, strings.ToLower(sessionManagerKey+`\PendingFileRenameOperations`))
	}
	for _, s := range m.services {
		s.running = true
		s.answers = 0
	}
	m.tasks = map[string]*taskRun{}
	m.pids, m.podProxyDown = map[string]uint32{}, false
	m.netGone = m.o.NetworkResetAtBoot && m.o.Network.Name != ""
	m.booted = time.Now()
	m.bootContainerd = m.containerdVersion()
	return m.buildLocked()
}

// SandboxStarted is the kubelet setting up the sandbox of a pod that is not
// on the host network: the CNI's ADD creates kube-proxy's network if the
// boot removed it (Azure CNI does; nothing else on the node would).
func (m *Machine) SandboxStarted() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.netGone = false
}

// SetSourceUnreachable makes the update sources answer again ("") or stop
// answering (why), as a proxy or WSUS going away does.
func (m *Machine) SetSourceUnreachable(why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unreach = why
}

// Stats is what happened to the machine, as its logs would tell.
type Stats struct {
	Build      host.Build
	Containerd string
	// Installs: servicing tasks run; RuntimeSwaps: containerd upgrade
	// tasks run; Rollbacks: those that put the old containerd back.
	Installs, RuntimeSwaps, Rollbacks int
	// Reboots: shutdown /r runs, and the comment each gave (winpool's
	// reason, its "winpool: " prefix cut).
	Reboots       int
	RebootReasons []string
	// CNIMode is kube-proxy's network's type as the machine has it.
	CNIMode string
	// NetworkUp: kube-proxy's network exists (a boot may have removed it).
	NetworkUp bool
	// Searches: Windows Update searches made (each a scan on the source).
	Searches int
	// KubeProxyStarted: when kube-proxy's service was last started other
	// than by a boot (a restart programs every Service again); zero: never.
	KubeProxyStarted time.Time
	// ContainerdConfig: config.toml beside the containerd service's
	// program, as it is now.
	ContainerdConfig string
	// DownloadsCut: downloads the network cut mid-body (CutDownloads);
	// DownloadsResumed: Range requests it answered with the rest of a file.
	DownloadsCut, DownloadsResumed int
	// UpdateDownloads: Windows Update downloads made (an update whose
	// content was on the machine is not downloaded again);
	// BackgroundDownloads: those at background priority (staging).
	UpdateDownloads, BackgroundDownloads int
	// Hotpatches: updates landed in memory, without a reboot.
	Hotpatches int
	// Undos: cumulative updates taken off (DISM /Remove-Package).
	Undos int
}

// Stats reads the machine's state as the simulation sees it (never a read
// the agent makes: it neither fails nor counts).
func (m *Machine) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Stats{Build: m.buildLocked(), Containerd: m.containerdVersion(), Installs: m.installs, RuntimeSwaps: m.swaps, Rollbacks: m.rollback,
		Reboots: len(m.reboots), RebootReasons: append([]string(nil), m.reboots...), CNIMode: hns.Mode(m.o.Network), Searches: m.searches,
		NetworkUp: m.o.Network.Name != "" && !m.netGone, KubeProxyStarted: m.kubeProxyStarted,
		DownloadsCut: sum(m.cuts), DownloadsResumed: m.resumed, ContainerdConfig: m.containerdConfigText(),
		UpdateDownloads: m.wu.downloads, BackgroundDownloads: m.wu.background, Hotpatches: m.hotpatched, Undos: m.undos}
}

// containerdConfig is the config.toml beside the containerd program.
func (m *Machine) containerdConfig(program string) string {
	return filepath.Join(filepath.Dir(m.Path(program)), "config.toml")
}

func (m *Machine) containerdConfigText() string {
	s, program := m.runtime()
	if s == nil {
		return ""
	}
	b, _ := os.ReadFile(m.containerdConfig(program))
	return string(b)
}

// containerdVersion is the version the installed containerd.exe prints.
func (m *Machine) containerdVersion() string {
	s, program := m.runtime()
	if s == nil {
		return ""
	}
	b, err := os.ReadFile(m.Path(program))
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.TrimPrefix(f[2], "v")
}

// OS is the machine under the seam.
func (m *Machine) OS() windows.Machine {
	return windows.Machine{System: system{m}, Tasks: tasks{m}, Programs: programs{m}, HCN: hcn{m},
		WindowsUpdate: m.openWindowsUpdate, Net: network{m}, Box: box{m}, Processes: processes{m}}
}

// readJSON reads a file the agent wrote for a task (its plan).
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Running says whether the service runs, as the simulation sees it.
func (m *Machine) Running(service string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.services[strings.ToLower(service)]
	return ok && s.running
}
