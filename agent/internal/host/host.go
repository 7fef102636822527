// Package host is the one door between the agent and the machine it runs on.
// Everything that touches Windows (registry, servicing, services, HNS, reboot)
// sits behind Host; the decision (package decide) never calls the machine.
// windows.Host is the only implementation: on a node it runs on the real
// Windows Machine, in the tests and the simulated fleet (cmd/winpool-fleet)
// on fakewin's simulated one.
package host

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"winpool.dev/agent/internal/config"
)

// Build is a Windows build as the registry and the kubelet report it:
// 10.0.<Build>.<UBR> (CurrentBuildNumber and UBR under
// HKLM\SOFTWARE\Microsoft\Windows NT\CurrentVersion).
type Build struct{ Major, Minor, Build, UBR int }

// ParseBuild reads "10.0.20348.2762".
func ParseBuild(s string) (Build, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) != 4 {
		return Build{}, fmt.Errorf("%q is not a Windows build: expected 10.0.<build>.<revision>", s)
	}
	var n [4]int
	for i, p := range parts {
		// Digits only, as the operator reads a patch level: Atoi alone takes
		// a sign ("+2762", "-0").
		v, err := strconv.Atoi(p)
		if err != nil || strings.Trim(p, "0123456789") != "" {
			return Build{}, fmt.Errorf("%q is not a Windows build: expected 10.0.<build>.<revision>", s)
		}
		n[i] = v
	}
	return Build{n[0], n[1], n[2], n[3]}, nil
}

func (b Build) String() string { return fmt.Sprintf("%d.%d.%d.%d", b.Major, b.Minor, b.Build, b.UBR) }

// SameRelease: same 10.0.<build> (an update never moves a node to another release).
func (b Build) SameRelease(t Build) bool {
	return b.Major == t.Major && b.Minor == t.Minor && b.Build == t.Build
}

// AtLeast: same release and a revision at or past t's (a patch level is a minimum).
func (b Build) AtLeast(t Build) bool { return b.SameRelease(t) && b.UBR >= t.UBR }

// Observed is what the host says about itself right now. Never the requested
// value echoed back: each field is read from the machine.
type Observed struct {
	Build Build
	// ContainerdVersion as `containerd --version` prints it, without the leading
	// "v" (e.g. "1.7.22"); "" when containerd is not installed.
	ContainerdVersion string
	// CNIMode is the type of kube-proxy's HNS network: "overlay" or "l2bridge";
	// "" when no such network exists (yet).
	CNIMode string
	// CNIProblem says why kube-proxy's network could not be told apart from
	// the others (CNIMode is then ""); "" otherwise.
	CNIProblem string
	// CNIReadError: HNS could not be asked (CNIMode is then ""); like a
	// missing network it is waited out for a while, since HNS comes up with
	// the node.
	CNIReadError string
	// CSIProxyVersion of the CSI Proxy running on the host; "" when none runs.
	CSIProxyVersion string
	// CSIProxyHost is a CSI Proxy the node image installed as a host service
	// (AKS: "csi-proxy" under NSSM; the csi-proxy project's instructions:
	// "csiproxy" via sc.exe); nil when there is none. winpool neither
	// installs nor replaces it, and runs no CSI Proxy pod beside it.
	CSIProxyHost *CSIProxyHost
	// RuntimeService is how containerd's service is installed (a service
	// wrapper such as NSSM reports Running while its child crash-loops).
	RuntimeService Service
	// Reboot is what Windows left behind that asks for a reboot; which of
	// these justify one is decide's (decide.RebootReasons).
	Reboot RebootSignals
	// RuntimeUpgrade is the last containerd upgrade as the task that ran it
	// left it (it runs outside containerd, so the agent may have been
	// restarted meanwhile); nil when there is none.
	RuntimeUpgrade *RuntimeUpgrade
	// UpdateTask is the last update install as the servicing task that ran
	// it left it (it runs outside the agent pod's job object, so the agent
	// may have been restarted meanwhile); nil when there is none.
	UpdateTask *UpdateTask
}

// UpdatePhase is where a servicing task is.
type UpdatePhase string

const (
	// UpdateRunning: the task was started and has not written its result.
	UpdateRunning UpdatePhase = "Running"
	// UpdateDone: servicing ran to its end; Result (or Error) says how.
	UpdateDone UpdatePhase = "Done"
)

// UpdateTask is the result file of a servicing task: DISM or the Windows
// Update client run as a one-shot SYSTEM scheduled task, so that no restart
// of the agent's pod (its job object's processes are killed with it) can stop
// servicing in the middle of a CBS transaction, and the pod's memory limit
// does not cover TiWorker's.
type UpdateTask struct {
	Revision string `json:"revision"`
	// Attempt is State.Attempts when the install was started; with Revision
	// and StartedAt it ties the result to one attempt of one operator start
	// (a retry counts its attempts from 1 again).
	Attempt   int    `json:"attempt"`
	StartedAt string `json:"startedAt,omitempty"`
	Target    string `json:"target"`
	// Undo: the task takes the cumulative update of build Target off.
	Undo  bool        `json:"undo,omitempty"`
	Phase UpdatePhase `json:"phase"`
	// Result is servicing's answer once Done.
	Result UpdateResult `json:"result"`
	// Error: servicing could not be run at all (e.g. a package's digest is
	// wrong); Result is then empty.
	Error   string    `json:"error,omitempty"`
	Started time.Time `json:"started"`
	// StartedUptime is how long the machine had been up when the task
	// started: an uptime below it now means a boot ended the task (told
	// without the wall clock, which a boot's time sync may move).
	StartedUptime time.Duration `json:"startedUptime,omitempty"`
	// MarksStart: the task writes TaskStarted when its program starts (an
	// agent that started it before tasks did has no mark to wait for).
	MarksStart bool `json:"marksStart,omitempty"`
	// TaskStarted is when the task's program started (written by the task,
	// before it installs anything); zero: it has not.
	TaskStarted time.Time `json:"taskStarted,omitempty"`
	// Heartbeat is the last time the running task said it is alive (every
	// minute while it installs); zero: it never did.
	Heartbeat time.Time `json:"heartbeat,omitempty"`
	// LastTaskResult is Task Scheduler's last result for the task, read
	// while a task that marks its start has not (not serialized): why a
	// task that was run never started.
	LastTaskResult *uint32 `json:"-"`
	// Interrupted: a boot ended the task before it wrote its result
	// (Phase Done, nothing known of the install).
	Interrupted bool `json:"interrupted,omitempty"`
	// ResultFile is where this was read from (not serialized), for messages.
	ResultFile string `json:"-"`
}

// Wrapper is the service wrapper a host service runs under.
type Wrapper string

const (
	// WrapperNone: the service's ImagePath is the program itself.
	WrapperNone Wrapper = ""
	// WrapperNSSM: the ImagePath is nssm.exe (AKS runs containerd, kubelet
	// and csi-proxy this way); the program is its Parameters\Application.
	WrapperNSSM Wrapper = "nssm"
	// WrapperParent: the service is not containerd's own but the one that
	// starts containerd as its child process (RKE2's rke2 service); it puts
	// its own containerd back at its next start.
	WrapperParent Wrapper = "parent"
)

// Service is a Windows service as the agent found it.
type Service struct {
	// Name as the service manager knows it ("" when not found).
	Name    string  `json:"name,omitempty"`
	Wrapper Wrapper `json:"wrapper,omitempty"`
	// Program the service runs: the ImagePath's executable, or for NSSM its
	// Parameters\Application.
	Program string `json:"program,omitempty"`
	Running bool   `json:"running,omitempty"`
}

// Describe is the service for a report: `csi-proxy (nssm)`, `rke2 (parent)`.
func (s Service) Describe() string {
	if s.Wrapper == WrapperNone {
		return s.Name
	}
	return s.Name + " (" + string(s.Wrapper) + ")"
}

// CSIProxyHost is a CSI Proxy host service.
type CSIProxyHost struct {
	Service
	// Version of its program ("unknown" when neither its version resource
	// nor its path says).
	Version string
	// PipesAnswer: its named pipes (\\.\pipe\csi-proxy-*) accept a
	// connection, which is what kubelet's CSI node plugins need of it.
	PipesAnswer bool
}

// RebootSignals is what Windows leaves behind when something needs a reboot
// to finish, as read from the registry.
type RebootSignals struct {
	// CBSRebootPending: the key HKLM\SOFTWARE\Microsoft\Windows\CurrentVersion\
	// Component Based Servicing\RebootPending exists (DISM, .msu, .cab).
	CBSRebootPending bool
	// WURebootRequired: the key …\WindowsUpdate\Auto Update\RebootRequired
	// exists (Windows Update agent).
	WURebootRequired bool
	// FileRenames: the values PendingFileRenameOperations and
	// PendingFileRenameOperations2 under HKLM\SYSTEM\CurrentControlSet\Control\
	// Session Manager (REG_MULTI_SZ pairs of source and destination; an empty
	// destination is a delete at boot).
	FileRenames []string
}

// RuntimePhase is where a containerd upgrade task is.
type RuntimePhase string

const (
	// RuntimeScheduled: the agent created the task; it has not reported yet.
	RuntimeScheduled RuntimePhase = "Scheduled"
	// RuntimeRunning: the task is stopping, swapping or starting services.
	RuntimeRunning RuntimePhase = "Running"
	// RuntimeSucceeded: the new containerd runs and reports the version.
	RuntimeSucceeded RuntimePhase = "Succeeded"
	// RuntimeRolledBack: the new containerd did not come up; the old
	// binaries are back and running.
	RuntimeRolledBack RuntimePhase = "RolledBack"
	// RuntimeFailed: the rollback failed too; the runtime may be down.
	RuntimeFailed RuntimePhase = "Failed"
)

// RuntimeUpgrade is the result file of a containerd upgrade task.
type RuntimeUpgrade struct {
	Revision string `json:"revision"`
	// Attempt is State.RuntimeUpgrades when the upgrade was started; with
	// Revision it ties the result to one attempt, so a stale file from an
	// earlier request is never read as this one's.
	Attempt int          `json:"attempt"`
	Version string       `json:"version"`
	Phase   RuntimePhase `json:"phase"`
	// Message says what happened, for the Node's apply-message.
	Message string    `json:"message,omitempty"`
	Started time.Time `json:"started"`
	// ResultFile is where this was read from (not serialized), for messages.
	ResultFile string `json:"-"`
}

// UpdateRequest is what StartUpdate installs.
type UpdateRequest struct {
	Revision string
	// Attempt is the attempt number saved in State.Attempts, of the
	// operator's start StartedAt (State.StartedAt).
	Attempt   int
	StartedAt string
	Target    Build
	Source    config.UpdateSource
	// Packages, in install order, for config.SourcePackages.
	Packages []config.Package
	// KBs pin what config.SourceWindowsUpdate installs, in install order
	// (none: the servicing stack and newest cumulative update offered).
	KBs []string
	// Limit is how long the agent lets the task run before it fails the
	// node (0: decide.DefaultUpdateTaskTimeout); Task Scheduler's limit
	// follows it.
	Limit time.Duration
	// Undo: instead of installing, take off the cumulative update of build
	// Target, the build the node runs (never a servicing stack update).
	Undo bool
	// Bandwidth bounds a staging's package downloads, in bytes a second (0:
	// none; the install, after the drain, takes what the link gives).
	Bandwidth int64
}

// RuntimeRequest is what UpgradeContainerd installs.
type RuntimeRequest struct {
	Revision string
	// Attempt is the attempt number saved in State.RuntimeUpgrades.
	Attempt int
	Version string
	// From is the version the node runs now ("" unknown): a major jump
	// migrates containerd's config.
	From string
	// Archive to install; nil means the official release of Version,
	// checked against its published .sha256sum.
	Archive *config.Archive
}

// PreflightFindings is what the host's read-only checks for an update
// found: facts, judged by decide.Preflight. Nothing is changed on the host.
type PreflightFindings struct {
	// Sources: each place the update would be fetched from (a package's URL
	// or path, the WSUS server the node's policy names, or Windows Update),
	// in install order, and whether it answered.
	Sources []SourceCheck
	// SystemDrive is where servicing stages and installs ("C:").
	SystemDrive string
	// FreeBytes on SystemDrive; -1 when it could not be read.
	FreeBytes int64
	// Offer is what a read-only search of the node's Windows Update source
	// offers for the update; nil when none was made (packages, or a source
	// that did not answer).
	Offer *UpdateOffer
	// AutomaticUpdates is the node's Automatic Updates policy, read with
	// its WSUS policy (not for packages).
	AutomaticUpdates AutomaticUpdates
	// WUServiceDisabled: the Windows Update service (wuauserv) is set
	// Disabled (its Start value 4), read with the policy.
	WUServiceDisabled bool
}

// AutomaticUpdates is what Group Policy's "Configure Automatic Updates"
// writes under HKLM\SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate\AU:
// NoAutoUpdate 1 turns Automatic Updates off; AUOptions (0: not set) is
// what it does (2 notify before download, 3 download and notify to
// install, 4 download and install on a schedule, 5 the local administrator
// chooses, 7 notify to install and to restart).
type AutomaticUpdates struct {
	NoAutoUpdate bool
	AUOptions    uint64
}

// UpdateOffer is what the install's own selection would take from what the
// node's Windows Update source (or WSUS) offers it now.
type UpdateOffer struct {
	// Searching: the search has not answered yet.
	Searching bool
	// Err: the search failed (Windows Update's words and HRESULT).
	Err string
	// Takes is what the install would take, in order ("KB5050002: <title>");
	// none: nothing it would take is offered.
	Takes []string
	// Refusal says why nothing is taken, naming what is offered.
	Refusal string
}

// NewestOffer is the newest OS cumulative update the host's update source
// offers it (Windows Update, or WSUS where a policy names one: there, what
// its administrator approved for the node's group), for a pool whose patch
// level follows its update source (os.patchPolicy).
type NewestOffer struct {
	// KB ("KB5050002"), Title and Published (IUpdate.LastDeploymentChangeTime)
	// of the update; KB "": nothing newer than the running build is offered.
	KB, Title string
	Published time.Time
	// PassedOver: updates offered in the OS's classification that the
	// selection does not take for the OS's cumulative update (.NET
	// Framework's), "KB: title".
	PassedOver []string
	// SearchedAt is when the search that found it ended (zero: none has yet).
	SearchedAt time.Time
	// Err: the last search failed (Windows Update's words and HRESULT); the
	// fields above keep the search before it.
	Err string
}

// StagePhase is where the staging of a revision's update is.
type StagePhase string

const (
	// StageRunning: the download runs.
	StageRunning StagePhase = "Staging"
	// StageDone: everything the install will take is on the node.
	StageDone StagePhase = "Staged"
	// StageFailed: the download failed (Err says how); it is tried again.
	StageFailed StagePhase = "Failed"
)

// Staging is a revision's update as downloaded before the node's drain.
type Staging struct {
	Revision string
	Phase    StagePhase
	// Items are what the install will take, in its order.
	Items []StagedItem
	// Err says why staging failed, naming the update and its code.
	Err string
	// Done is closed when a running staging ends (nil otherwise): the
	// agent then asks again at once rather than at its next recheck.
	Done <-chan struct{} `json:"-"`
}

// StagedItem is one update or package on the node, ready to install.
type StagedItem struct {
	// Name: "KB5050002: <title>" for Windows Update, the file name for a
	// package.
	Name  string
	Bytes int64
	// SHA256 of a package as verified on disk; "" for Windows Update's
	// content, which its agent verifies by its own signatures.
	SHA256 string
	// RebootFree: Windows Update says it installs without a reboot (a
	// hotpatch); never for a package.
	RebootFree bool
}

// RebootFree: what is staged installs without a reboot (every item a
// hotpatch).
func (s Staging) RebootFree() bool {
	if len(s.Items) == 0 {
		return false
	}
	for _, it := range s.Items {
		if !it.RebootFree {
			return false
		}
	}
	return true
}

// SourceCheck is one update source as the host reached it.
type SourceCheck struct {
	// Name: the URL, path or server, as a person would look it up.
	Name string
	// Err says why it could not be reached; "" when it answered.
	Err string
}

// HNSCounts is what HNS has programmed, counted as kube-proxy winkernel does.
type HNSCounts struct {
	LoadBalancers   int
	RemoteEndpoints int
	// DSRLoadBalancers: those of LoadBalancers with Direct Server Return
	// (kube-proxy winkernel runs with --enable-dsr).
	DSRLoadBalancers int
}

// UpdateResult is what servicing (DISM / wusa / Windows Update) returned.
// The decision maps the exit code (decide.ClassifyUpdate); Detail is the
// package and command, for the message a person reads.
type UpdateResult struct {
	ExitCode int    `json:"exitCode"`
	Detail   string `json:"detail"`
	// Installed is what this run installed, in order: what an auditor asks
	// which KB a node ran, kept in the result file so it outlives the
	// agent's restart across the reboot.
	Installed []InstalledUpdate `json:"installed,omitempty"`
}

// InstalledUpdate is one update or package servicing installed.
type InstalledUpdate struct {
	// KB is "KB5050002" for Windows Update (IUpdate.KBArticleIDs), a
	// package's file name.
	KB    string `json:"kb"`
	Title string `json:"title,omitempty"`
	// CveIDs: IUpdate.CveIDs, the vulnerabilities Windows Update says the
	// update fixes (none for a package: DISM knows no CVE).
	CveIDs []string `json:"cveIds,omitempty"`
}

// State is what the agent keeps on the host across reboots and restarts
// (C:\ProgramData\winpool\state.json on Windows).
type State struct {
	// Revision the counters below are about.
	Revision string `json:"revision"`
	// StartedAt is the operator's start (winpool.dev/started-at) of that
	// revision they are about: a retry starts them over.
	StartedAt string `json:"startedAt,omitempty"`
	// Attempts: update installs started for Revision.
	Attempts int `json:"attempts"`
	// Reboots the agent asked for while applying Revision.
	Reboots int `json:"reboots"`
	// RebootedAfter is the install attempt whose reboot the agent made: its
	// task's result has been acted on, and must not reboot the node again.
	RebootedAfter int `json:"rebootedAfter,omitempty"`
	// RuntimeUpgrades: containerd installs started for Revision.
	RuntimeUpgrades int `json:"runtimeUpgrades,omitempty"`
	// UndoOf is the build whose cumulative update an undo (Input.Undo)
	// takes off: the node is back below it once the removal's reboot is done.
	UndoOf string `json:"undoOf,omitempty"`
	// Installed: what the servicing tasks of the attempts before the
	// current one installed for this start (the next attempt's task
	// replaces the result file that says so).
	Installed []InstalledUpdate `json:"installed,omitempty"`
}

// Same: s and o hold the same values (State holds a list, so == does not do).
func (s State) Same(o State) bool { return reflect.DeepEqual(s, o) }

// ErrNoKubeProxyService: kube-proxy is neither a Windows service of its own
// on the host nor a pod's process the kubelet starts again: it runs inside
// another service (rke2's, whose restart would stop the kubelet and
// containerd too), or not at all.
var ErrNoKubeProxyService = errors.New("kube-proxy is not a Windows service on this host (kubeproxy, kube-proxy) nor a pod's process: restart it where it runs")

// Host is everything the agent does to or reads from the machine.
type Host interface {
	Observe(ctx context.Context) (Observed, error)
	HNS(ctx context.Context) (HNSCounts, error)
	// StartUpdate starts bringing the host towards req.Target from
	// req.Source (servicing stack, then the cumulative update) in a task of
	// its own, and returns once it runs; the outcome shows in
	// Observed.UpdateTask. err: the task could not be started.
	StartUpdate(ctx context.Context, req UpdateRequest) error
	// UpgradeContainerd starts installing that containerd version, keeping
	// its config. It may return before the new containerd runs: the outcome
	// then shows in Observed.RuntimeUpgrade.
	UpgradeContainerd(ctx context.Context, req RuntimeRequest) error
	// Reboot starts a reboot and returns; the caller then waits to be stopped.
	Reboot(ctx context.Context, reason string) error
	// Preflight checks, without changing anything, what installing req
	// would need of the host: its sources answer, room on the system drive.
	Preflight(ctx context.Context, req UpdateRequest) PreflightFindings
	// Stage downloads what installing req will take, while the node still
	// serves (at Windows Update's background priority), and returns at once:
	// the first ask starts it, later asks read how far it is. An ask for
	// another revision stops the one before.
	Stage(ctx context.Context, req UpdateRequest) Staging
	// NewestOffer is what the last search for the newest OS cumulative update
	// found, and starts another (on a goroutine: a search has no deadline)
	// when that one is older than every. Read-only: nothing is downloaded.
	NewestOffer(ctx context.Context, every time.Duration) NewestOffer
	// RestartKubeProxy stops and starts the host's kube-proxy service, waiting
	// for each, and returns the service's name; ErrNoKubeProxyService when
	// kube-proxy is not a service of its own on this host.
	RestartKubeProxy(ctx context.Context) (string, error)
	LoadState() (State, error)
	SaveState(State) error
}
