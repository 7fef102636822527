// Package decide is the agent's decision: from what the operator asks (the
// Node's revision label), what the agent last reported on the Node, the
// revision's configuration, what the host says about itself and the state the
// agent keeps on the host, it picks the one next step. It never touches the
// machine or the API, so every branch is a table test.
package decide

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"
	"winpool.dev/agent/internal/versions"
)

// Action is what the agent does next.
type Action int

const (
	// Idle: nothing is asked of this host, or the Node already holds the final
	// report for the requested revision. The agent only keeps its observations
	// current.
	Idle Action = iota
	// Report: write Step.Report (Succeeded or Failed); nothing to do on the host.
	Report
	// Wait: write Step.Report (Applying) and decide again a little later; the
	// host is not ready to be judged yet.
	Wait
	// InstallUpdate: write Step.Report, save Step.State, then start the
	// servicing task that installs Step.Update, and look again later: its
	// outcome comes back in Observed.UpdateTask.
	InstallUpdate
	// Reboot: save Step.State, write Step.Report until it is on the API
	// (Rebooting; or nothing new after the agent's own install asked for the
	// reboot, which its Applying report announced), reboot, and wait to be
	// stopped.
	Reboot
	// UpgradeContainerd: write Step.Report, save Step.State, install
	// containerd Step.Version, then observe again and call Next.
	UpgradeContainerd
)

func (a Action) String() string {
	switch a {
	case Idle:
		return "Idle"
	case Report:
		return "Report"
	case Wait:
		return "Wait"
	case InstallUpdate:
		return "InstallUpdate"
	case Reboot:
		return "Reboot"
	case UpgradeContainerd:
		return "UpgradeContainerd"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// NodeReport is the agent's apply result for the Node's current start: its
// WindowsNodeReport's apply (revision, status, message).
type NodeReport struct {
	AppliedRevision string
	Status          names.ApplyStatus
	Message         string
	// Heartbeat: the servicing task was alive at this time (RFC 3339,
	// moved at most every HeartbeatReportEvery); "" when no task runs.
	Heartbeat string
	// ResultCode is the HRESULT the update's install failed with
	// ("0x800F0922"), on a Failed report the servicing result decided: the
	// operator counts the same code on the same target across pools to stop
	// a bad update everywhere (its bad-update breaker).
	ResultCode string
	// NoReboot: Succeeded after installing the update with no reboot, as
	// Windows asked none (a hotpatch): the operator waits for no new boot.
	NoReboot bool
	// Installed: what the servicing tasks installed for this start, in
	// order, on the reports that come once it is known (Rebooting,
	// Succeeded): the operator keeps it as the node's record.
	Installed []host.InstalledUpdate
	// HostBuild, with NoReboot: the build the host runs after the install,
	// as the agent read it from the registry (CurrentBuildNumber, UBR). The
	// Windows kubelet reads the same values once, when its stats client
	// starts (winstats), so with no reboot its kernelVersion keeps the build
	// before the install: the operator verifies a reboot-free start by this.
	HostBuild string
}

// HeartbeatReportEvery is how often a running servicing task's heartbeat
// reaches the report: one write per node in flight per interval, and the
// operator waits past rollout.nodeTimeout for a node that beats.
const HeartbeatReportEvery = 5 * time.Minute

// ConfigStatus says whether the revision ConfigMap could be read.
type ConfigStatus int

const (
	ConfigFound ConfigStatus = iota
	ConfigNotFound
	ConfigUnreadable
)

// RevisionConfig is the revision ConfigMap as the agent found it.
type RevisionConfig struct {
	Status ConfigStatus
	// Config is set when Status is ConfigFound.
	Config config.Revision
	// Problem says what is wrong when Status is ConfigUnreadable
	// (e.g. "has no key config.json").
	Problem string
}

// Defaults for the Input fields that may be left zero.
const (
	DefaultMaxAttempts = 3
	// DefaultNetworkGrace is how long a missing HNS network is waited for:
	// right after a reboot the CNI (flanneld, or the l2bridge setup) creates
	// it only once its own pod runs, which may be after the agent's.
	DefaultNetworkGrace = 5 * time.Minute
	// DefaultReadGrace is how long a host that cannot be read is waited for:
	// under TiWorker's load `containerd --version` can time out, a swap can
	// leave a binary half copied for a moment, the registry or the SCM can
	// refuse a call; none of those is the node failing.
	DefaultReadGrace = 5 * time.Minute
	// DefaultRuntimeTaskTimeout bounds a containerd upgrade task: stopping
	// and starting kubelet and containerd takes seconds to a minute; a task
	// still not done after this never started or hangs.
	DefaultRuntimeTaskTimeout = 15 * time.Minute
	// DefaultUpdateTaskTimeout bounds a servicing task: a cumulative update
	// on Windows Server 2019 can take an hour; one still running after this
	// never started or hangs.
	DefaultUpdateTaskTimeout = 3 * time.Hour
	// MaxUpdateTaskTimeout is the longest budget a start may give a
	// servicing task: Task Scheduler's own default limit.
	MaxUpdateTaskTimeout = 72 * time.Hour
	// DefaultTaskStartGrace is how long a servicing task that was run may
	// take to mark that its program started: Task Scheduler starts a task
	// within seconds, and a program that was blocked (antivirus, App
	// Control) or a task held by a condition (battery power) never does.
	DefaultTaskStartGrace = 2 * time.Minute
)

// Input is everything the decision depends on.
type Input struct {
	// Namespace holds the revision ConfigMaps; it and Pool only name the
	// ConfigMap in messages.
	Namespace string
	// Pool is the Node's winpool.dev/pool label.
	Pool string
	// Revision is the Node's winpool.dev/revision label: what the operator
	// asks this node to run. "" when it asks nothing.
	Revision string
	// Reported is the agent's last report as the Node has it now.
	Reported NodeReport
	// StartedAt is the operator's winpool.dev/started-at on the Node: which
	// start (a retry is a new one) the request belongs to; "" when none.
	StartedAt string
	// NodeState is the operator's winpool.dev/state on the Node ("" none).
	NodeState string
	// Standalone: the agent runs without the operator (see MayTouch).
	Standalone bool
	// InService: the Node is not cordoned (the operator started it without
	// a drain: a hotpatch). The agent never reboots a node in service: it
	// reports RebootRequired and waits for the operator's drain.
	InService bool
	Config    RevisionConfig
	Observed  host.Observed
	// State is what the agent last saved on the host.
	State host.State
	// MaxAttempts caps update installs and containerd upgrades per
	// revision; below 1 means DefaultMaxAttempts.
	MaxAttempts int
	// MaxReboots caps the reboots per revision, so a reboot-pending flag that
	// never clears cannot reboot the node forever; below 1 means 2*MaxAttempts
	// (a cumulative update may need a second reboot for its servicing stack).
	MaxReboots int
	// ObserveError is why the last read of the host failed ("" when it
	// worked; Observed is then the zero value); ObserveFailingFor is since
	// how long reads have been failing.
	ObserveError      string
	ObserveFailingFor time.Duration
	// ReadGrace: how long failing reads are retried before the node fails;
	// below or equal to 0 means DefaultReadGrace.
	ReadGrace time.Duration
	// NetworkMissingFor is how long the agent has observed no HNS network.
	NetworkMissingFor time.Duration
	// HNS: what HNS holds now; nil: not read.
	HNS *host.HNSCounts
	// CSIProxyWrongFor is how long the agent has observed CSI Proxy not at
	// the version this revision asks for (waited for like the HNS network).
	CSIProxyWrongFor time.Duration
	// NetworkGrace: below or equal to 0 means DefaultNetworkGrace.
	NetworkGrace time.Duration
	// Now is when the decision is made; only a running containerd upgrade
	// task is judged by it.
	Now time.Time
	// RuntimeTaskTimeout: how long a containerd upgrade task may run before
	// the node fails; below or equal to 0 means DefaultRuntimeTaskTimeout.
	RuntimeTaskTimeout time.Duration
	// UpdateTaskTimeout: how long a servicing task may run before the node
	// fails (the start's InstallBudget); below or equal to 0 means
	// DefaultUpdateTaskTimeout.
	UpdateTaskTimeout time.Duration
	// TaskStartGrace: how long a servicing task may take to mark its start;
	// below or equal to 0 means DefaultTaskStartGrace.
	TaskStartGrace time.Duration
	// TransientRetryAfter: the wait after a first transient failure,
	// doubled for each attempt after it; below or equal to 0 means
	// TransientRetryAfter.
	TransientRetryAfter time.Duration
	// Undo is the operator's winpool.dev/undo on the Node: this start takes
	// the cumulative update the node runs off (the health gate it names held
	// the node in its soak); "" installs.
	Undo string
}

// Step is the decision: one action, the report to write before it, and the
// state to save before it.
type Step struct {
	Action Action
	// Report is written before the action; zero for Idle and Observe.
	Report NodeReport
	// State is what to keep on the host (saved before the action when it
	// differs from Input.State).
	State host.State
	// Target is the build InstallUpdate brings the host to.
	Target host.Build
	// Update is what InstallUpdate installs (Target and where it comes from).
	Update host.UpdateRequest
	// Version is what UpgradeContainerd installs.
	Version string
	// Runtime is what UpgradeContainerd installs.
	Runtime host.RuntimeRequest
	// RebootReason is why Reboot reboots (RebootReasons, ReasonInstallAsked).
	RebootReason string
}

// Next decides the next step.
func Next(in Input) Step {
	if Requested(in.Revision, in.Reported) && Finishing(in.NodeState, in.StartedAt, in.Revision, in.Reported) {
		return decision{in: in, state: in.State}.afterTimeout()
	}
	if !Requested(in.Revision, in.Reported) || !MayTouch(in.NodeState, in.StartedAt, in.Standalone) {
		return Step{Action: Idle, State: in.State}
	}
	d := decision{in: in, state: in.State}
	if !continuing(in) {
		d.state = host.State{Revision: in.Revision, StartedAt: in.StartedAt}
	}
	if in.Undo != "" {
		return keepBeat(in, d.undo())
	}
	return keepBeat(in, d.next())
}

// keepBeat carries the servicing task's last beat into the reports of this
// revision that follow it (a failed read, the reboot, the success the
// operator then verifies): the operator counts nodeTimeout for those steps
// from that beat, so an install that outlasted nodeTimeout is not timed out
// the moment it ends.
func keepBeat(in Input, step Step) Step {
	r := &step.Report
	if r.AppliedRevision != in.Revision || r.Heartbeat != "" {
		return step
	}
	if in.Reported.AppliedRevision == in.Revision {
		r.Heartbeat = in.Reported.Heartbeat
	}
	// The task's own last beat, its end, when it is of this revision and
	// later: it costs no write of its own (it rides the report that says
	// what the end brought).
	if u := in.Observed.UpdateTask; u != nil && u.Revision == in.Revision && !u.Heartbeat.IsZero() {
		end := u.Heartbeat.UTC().Truncate(time.Second)
		if prev, err := time.Parse(time.RFC3339, r.Heartbeat); err != nil || end.After(prev) {
			r.Heartbeat = end.Format(time.RFC3339)
		}
	}
	return step
}

// Requested: the Node asks the agent for work. It asks nothing without a
// revision label, nor once the agent's final report for that revision is on
// it (the operator asks again with a new start, winpool.dev/started-at, which
// an earlier result does not answer).
func Requested(revision string, reported NodeReport) bool {
	if revision == "" {
		return false
	}
	return reported.AppliedRevision != revision || !IsFinal(reported.Status)
}

// MayTouch: the operator lets the agent work on the host: it recorded a
// start of this node (winpool.dev/started-at) and the node is Applying
// (cordoned and drained, the label moved) or Verifying. A revision label
// alone is no start: anyone who may patch Nodes can set one (a person, a
// label-syncing controller, a node template that copied the labels), and
// acting on it would install and reboot under the node's workloads. Every
// other state is a node being drained (a retry's start lands in Draining
// before the report is cleared) or back in service (Failed by nodeTimeout
// while an install still ran, Pending after kubectl winpool retry or a
// budget's put-back, Updated). The agent looks again when the state moves.
//
// standalone (WINPOOL_STANDALONE, an agent run without the operator) also
// lets a node no operator ever started (no state, no start) be worked on by
// its label alone: whoever sets that has taken the drain on themselves.
func MayTouch(nodeState, startedAt string, standalone bool) bool {
	switch nodeState {
	case names.StateApplying, names.StateVerifying:
		return startedAt != ""
	case "":
		return standalone && startedAt == ""
	}
	return false
}

// Finishing: the operator failed the node (its nodeTimeout) while this
// agent's report says an install of the start it names is in flight. The
// operator keeps such a node cordoned until the report is final, so the
// agent still reads its tasks and reports how the install ended; it starts
// nothing, swaps nothing and reboots nothing on a Failed node.
func Finishing(nodeState, startedAt, revision string, reported NodeReport) bool {
	inProgress := InProgress(reported.Status)
	return nodeState == names.StateFailed && startedAt != "" && inProgress && reported.AppliedRevision == revision
}

// afterTimeout: on a Failed node, wait for the tasks of this start to end,
// then give the final result the operator waits for.
func (d decision) afterTimeout() Step {
	in := d.in
	const why = "the operator failed this node at its nodeTimeout while its install ran"
	if t := in.Observed.UpdateTask; t != nil && t.Revision == in.Revision && t.Phase == host.UpdateRunning && (t.StartedAt == "" || t.StartedAt == in.StartedAt) {
		msg := fmt.Sprintf("%s; the servicing task still runs (started %s): the node stays cordoned until it ends", why, t.Started.UTC().Format(time.RFC3339))
		return Step{Action: Wait, Report: d.report(in.Reported.Status, msg), State: d.state}
	}
	if u := in.Observed.RuntimeUpgrade; u != nil && u.Revision == in.Revision && (u.Phase == host.RuntimeScheduled || u.Phase == host.RuntimeRunning) {
		msg := fmt.Sprintf("%s; the containerd %s upgrade task still runs: the node stays cordoned until it ends", why, u.Version)
		return Step{Action: Wait, Report: d.report(in.Reported.Status, msg), State: d.state}
	}
	msg := fmt.Sprintf("%s; it has ended (build %s, containerd %s)", why, in.Observed.Build, orNone(in.Observed.ContainerdVersion))
	if t := in.Observed.UpdateTask; t != nil && t.Revision == in.Revision && t.Phase == host.UpdateDone {
		msg += fmt.Sprintf(", the servicing task with exit code %d", t.Result.ExitCode)
	}
	if reasons := RebootReasons(in.Observed.Reboot); len(reasons) > 0 {
		msg += fmt.Sprintf("; Windows asks for a reboot to finish it (%s): kubectl winpool retry rolls the node again, drained", strings.Join(reasons, ", "))
	}
	return d.fail(msg + "; see " + AgentLog)
}

// IsFinal: after this status the agent does nothing more for the revision
// until the operator clears it.
func IsFinal(s names.ApplyStatus) bool {
	return s == names.StatusSucceeded || s == names.StatusFailed
}

// continuing: the Node says this revision is in progress and the host's
// counters are about it, for the same start of the operator's, so they carry
// on across reboots and restarts. Anything else is a fresh request and starts
// the counters again: a retry must not inherit the attempts, nor the
// servicing task, of the start it retries. (Counters saved by an agent that
// did not record the start carry on.)
func continuing(in Input) bool {
	inProgress := InProgress(in.Reported.Status)
	sameStart := in.State.StartedAt == in.StartedAt || in.State.StartedAt == ""
	return inProgress && in.Reported.AppliedRevision == in.Revision && in.State.Revision == in.Revision && sameStart
}

type decision struct {
	in    Input
	state host.State
}

func (d decision) next() Step {
	in := d.in
	if in.Pool == "" {
		return d.fail(fmt.Sprintf("the Node has %s=%s but no %s label, so the agent cannot tell which pool's revision ConfigMap to read",
			names.LabelRevision, in.Revision, names.LabelPool))
	}
	cm := d.configMap()
	switch in.Config.Status {
	case ConfigNotFound:
		return d.fail(fmt.Sprintf("revision %s: ConfigMap %s does not exist (the operator writes it before it labels a node; was it deleted?)", in.Revision, cm))
	case ConfigUnreadable:
		return d.fail(fmt.Sprintf("revision %s: ConfigMap %s is unreadable: %s", in.Revision, cm, in.Config.Problem))
	}
	if in.ObserveError != "" {
		return d.unreadable()
	}
	d.state.Installed = d.installed()
	cfg := in.Config.Config
	target, err := host.ParseBuild(cfg.PatchLevel)
	if err != nil {
		return d.fail(fmt.Sprintf("revision %s: ConfigMap %s: patchLevel: %v", in.Revision, cm, err))
	}

	// Before anything is installed: nothing the agent does gives kube-proxy DSR.
	if why := dsrMissing(cfg.EnableDSR, d.in.HNS); why != "" {
		return d.fail(why)
	}
	if step, ok := d.patch(target); !ok {
		return step
	}
	if cfg.RuntimeVersion != nil {
		if step, ok := d.runtime(*cfg.RuntimeVersion); !ok {
			return step
		}
	}
	if step, ok := d.network(cfg.CNIMode); !ok {
		return step
	}
	if cfg.CSIProxyVersion != nil {
		if step, ok := d.csiProxy(*cfg.CSIProxyVersion); !ok {
			return step
		}
	}
	return d.succeed()
}

// patch returns ok when the host is at or past target; otherwise the step
// that brings it there.
func (d decision) patch(target host.Build) (Step, bool) {
	obs := d.in.Observed
	if !obs.Build.SameRelease(target) {
		return d.fail(fmt.Sprintf("node runs %s, revision wants %s: an update never changes the Windows release; reimage the node",
			obs.Build, target)), false
	}
	if obs.Build.AtLeast(target) {
		// A two-phase update can leave CBS asking for a second reboot once the
		// build moved: Windows would make it later, outside the pool's window,
		// with the node back in service. The node is drained now.
		if why := RebootReasons(obs.Reboot); len(why) > 0 && d.state.Reboots > 0 {
			return d.reboot(target, strings.Join(why, ", ")), false
		}
		return Step{}, true
	}
	if step, decided := d.updateTask(target); decided {
		return step, false
	}
	if why := RebootReasons(obs.Reboot); len(why) > 0 {
		return d.reboot(target, strings.Join(why, ", ")), false
	}
	if d.state.Attempts >= d.maxAttempts() {
		return d.fail(fmt.Sprintf("still at build %s after %d update attempts (target %s); %s",
			obs.Build, d.state.Attempts, target, servicingLogs)), false
	}
	d.state.Attempts++
	req := d.updateRequest(target)
	return Step{Action: InstallUpdate, Report: d.report(names.StatusApplying, d.installMessage(target)), State: d.state, Target: target, Update: req}, false
}

// updateRequest is what the current attempt installs.
func (d decision) updateRequest(target host.Build) host.UpdateRequest {
	upd := d.in.Config.Config
	req := host.UpdateRequest{Revision: d.in.Revision, Attempt: d.state.Attempts, StartedAt: d.state.StartedAt, Target: target, Source: upd.UpdateSource(),
		Limit: d.updateTaskTimeout()}
	if upd.Updates != nil {
		req.Packages, req.KBs = upd.Updates.Packages, upd.Updates.KBs
	}
	return req
}

// installMessage says what the current attempt installs. The same words
// while its task runs, so that waiting for it writes nothing to the API.
func (d decision) installMessage(target host.Build) string {
	return fmt.Sprintf("installing the update to %s from %s, then rebooting if it asks (attempt %d of %d; host at %s)",
		target, sourceOf(d.updateRequest(target)), d.state.Attempts, d.maxAttempts(), d.in.Observed.Build)
}

// inService: the operator runs this node and has not cordoned it.
func (d decision) inService() bool { return d.in.InService && !d.in.Standalone }

// awaitDrain is the report that asks the operator to drain a node in
// service before the reboot reason asks for.
func (d decision) awaitDrain(target host.Build, reason string) Step {
	msg := fmt.Sprintf("the update to %s is installed and Windows asks for a reboot (%s); the node is in service: waiting for the operator to drain it", target, reason)
	return Step{Action: Wait, Report: d.report(names.StatusRebootRequired, msg), State: d.state, Target: target}
}

// InProgress: a report of an update not yet ended.
func InProgress(s names.ApplyStatus) bool {
	return s == names.StatusApplying || s == names.StatusRebooting || s == names.StatusRebootRequired
}

// reboot is the step that reboots the node for reason (RebootReasons, or
// ReasonInstallAsked), within the cap on reboots per revision; on a node in
// service, the report that asks the operator to drain it first.
func (d decision) reboot(target host.Build, reason string) Step {
	if d.inService() {
		return d.awaitDrain(target, reason)
	}
	if d.state.Reboots >= d.maxReboots() {
		return d.fail(fmt.Sprintf("a reboot is still pending after %d reboots (host at %s, target %s): Windows keeps asking for one (%s); %s",
			d.state.Reboots, d.in.Observed.Build, target, reason, servicingLogs))
	}
	d.state.Reboots++
	msg := fmt.Sprintf("rebooting to finish the update to %s (reboot %d of at most %d): %s", target, d.state.Reboots, d.maxReboots(), reason)
	r := d.report(names.StatusRebooting, msg)
	r.Installed = d.state.Installed
	return Step{Action: Reboot, Report: r, State: d.state, Target: target, RebootReason: reason}
}

// installed is what this start installed so far: what the earlier
// attempts' tasks installed (State.Installed) and then what the current
// attempt's task did, once it is Done. A result of another start or
// attempt, an undo's, or one a boot cut short is none of it.
func (d decision) installed() []host.InstalledUpdate {
	u, st := d.in.Observed.UpdateTask, d.state
	if u == nil || u.Phase != host.UpdateDone || u.Interrupted || u.Undo || st.Attempts == 0 ||
		u.Revision != d.in.Revision || u.Attempt != st.Attempts || u.StartedAt != st.StartedAt {
		return st.Installed
	}
	out := st.Installed
	for _, add := range u.Result.Installed {
		// Read again at every look (and after the reboot): once is enough.
		if !slices.ContainsFunc(out, func(have host.InstalledUpdate) bool { return have.KB == add.KB }) {
			out = append(slices.Clip(out), add)
		}
	}
	return out
}

func (d decision) runtime(want string) (Step, bool) {
	have := d.in.Observed.ContainerdVersion
	cmp, err := versions.Compare(have, want)
	if err == nil && cmp == 0 {
		return Step{}, true
	}
	if _, werr := versions.Parse(want); werr != nil {
		return d.fail(fmt.Sprintf("revision %s: ConfigMap %s: runtimeVersion: %v", d.in.Revision, d.configMap(), werr)), false
	}
	if step, decided := d.runtimeTask(); decided {
		return step, false
	}
	if why := ImageOwnsRuntime(d.in.Config.Config.RuntimeUpgrade, d.in.Observed); why != "" {
		return d.fail(fmt.Sprintf("containerd %s is not replaced with %s: %s; %s", orNone(have), want, why, runtimeRemedy(d.in.Observed))), false
	}
	if d.state.RuntimeUpgrades >= d.maxAttempts() {
		return d.fail(fmt.Sprintf("containerd still reports %s after %d attempts to install %s; see %s and the containerd service's log",
			orNone(have), d.state.RuntimeUpgrades, want, AgentLog)), false
	}
	d.state.RuntimeUpgrades++
	var msg string
	switch {
	case have == "":
		msg = fmt.Sprintf("installing containerd %s (none installed)", want)
	case err == nil && cmp > 0:
		msg = fmt.Sprintf("downgrading containerd %s → %s", have, want)
	default:
		msg = fmt.Sprintf("upgrading containerd %s → %s", have, want)
	}
	req := host.RuntimeRequest{Revision: d.in.Revision, Attempt: d.state.RuntimeUpgrades, Version: want, From: d.in.Observed.ContainerdVersion, Archive: d.in.Config.Config.RuntimeArchive}
	return Step{Action: UpgradeContainerd, Report: d.report(names.StatusApplying, msg), State: d.state, Version: want, Runtime: req}, false
}

func (d decision) network(want string) (Step, bool) {
	have := d.in.Observed.CNIMode
	if want == "" || have == want {
		return Step{}, true
	}
	if have == "" && d.in.Observed.CNIProblem != "" {
		// Waiting does not make an ambiguous choice clear.
		return d.fail(fmt.Sprintf("the pool asks for CNI mode %s, but the agent cannot tell kube-proxy's HNS network: %s", want, d.in.Observed.CNIProblem)), false
	}
	if have == "" && d.in.Observed.CNIReadError != "" && d.in.NetworkMissingFor >= d.networkGrace() {
		return d.fail(fmt.Sprintf("the pool asks for CNI mode %s, but HNS could not be read for %s: %s; is the hns service running?",
			want, d.networkGrace(), d.in.Observed.CNIReadError)), false
	}
	if have == "" {
		// A missing network is waited for, never a failure by itself: some
		// CNIs create it only when a pod sandbox is set up (Azure CNI after
		// AKS's boot-time HNS clean-up), which on a drained node only the
		// pool's pod-network DaemonSet does. The operator's nodeTimeout
		// bounds the wait.
		msg := fmt.Sprintf("waiting for the HNS network (the pool asks for %s): none exists yet; the CNI creates it once its pod runs", want)
		if d.in.NetworkMissingFor >= d.networkGrace() {
			msg = fmt.Sprintf("no HNS network for %s (the pool asks for %s): the CNI creates it when a pod sandbox is set up on the node; "+
				"is the pod of DaemonSet %s running here (kubectl -n %s get pods -l %s -o wide)? Get-HnsNetwork lists what HNS has",
				d.networkGrace(), want, PodNetworkDaemonSet(d.in.Pool), d.in.Namespace, names.LabelPodNetworkApp)
		}
		return Step{Action: Wait, Report: d.report(names.StatusApplying, msg), State: d.state}, false
	}
	return d.fail(fmt.Sprintf("HNS network is %s, the pool asks for %s: switching the CNI mode in place is not something the agent does; "+
		"change spec.networking.cniMode or reimage the node with the other CNI", orMissing(have), want)), false
}

// csiProxy: CSI Proxy is not the agent's to install. winpool's CSI Proxy
// DaemonSet of the revision's version starts it when the node's revision
// label moves (or the node image runs it as the csiproxy service); the agent
// waits for it like for the HNS network, then says where to look.
func (d decision) csiProxy(want string) (Step, bool) {
	have := d.in.Observed.CSIProxyVersion
	if cmp, err := versions.Compare(have, want); err == nil && cmp == 0 {
		return Step{}, true
	}
	// A CSI Proxy the node image runs as a host service (AKS: csi-proxy under
	// NSSM; often no version on its binary) and whose pipes answer is the one
	// the node's CSI plugins use: winpool neither replaces it nor runs another.
	if h := d.in.Observed.CSIProxyHost; h != nil && h.Running && h.PipesAnswer {
		return Step{}, true
	}
	if _, err := versions.Parse(want); err != nil {
		return d.fail(fmt.Sprintf("revision %s: ConfigMap %s: csiProxyVersion: %v", d.in.Revision, d.configMap(), err)), false
	}
	if d.in.CSIProxyWrongFor < d.networkGrace() {
		msg := fmt.Sprintf("waiting for CSI Proxy %s (running: %s); winpool's CSI Proxy DaemonSet starts it on this node", want, orNone(have))
		return Step{Action: Wait, Report: d.report(names.StatusApplying, msg), State: d.state}, false
	}
	return d.fail(fmt.Sprintf("CSI Proxy %s is not running after %s (running: %s): see the pod of DaemonSet %s on this node "+
		"(kubectl -n %s get pods -l %s -o wide), or, with storage.csiProxy.deploy HostService, the node's CSI Proxy service (Get-Service csi-proxy, csiproxy)",
		want, d.networkGrace(), orNone(have), CSIProxyDaemonSet(d.in.Pool, want), d.in.Namespace, names.LabelCSIProxyApp)), false
}

// PodNetworkDaemonSet is the operator's name for the DaemonSet that runs
// one pod on the pod network on each of a pool's nodes (src/pod_network.rs).
func PodNetworkDaemonSet(pool string) string { return "winpool-" + pool + "-pod-network" }

// CSIProxyDaemonSet is the operator's name for the DaemonSet that runs CSI
// Proxy `version` on a pool's nodes (src/csi_proxy.rs daemonset_name).
func CSIProxyDaemonSet(pool, version string) string {
	tag := "v" + strings.TrimPrefix(version, "v")
	slug := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(tag))
	return "winpool-" + pool + "-csi-proxy-" + slug
}

// unreadable: the host could not be read. Waited out for ReadGrace (the next
// look comes with the agent's next tick), then the node fails naming the read.
func (d decision) unreadable() Step {
	in := d.in
	if in.ObserveFailingFor < d.readGrace() {
		// No running duration in the words: every look would rewrite them.
		msg := fmt.Sprintf("cannot read the host (%s); trying again (the node fails after %s of this)", in.ObserveError, d.readGrace())
		// The beat last reported stands (keepBeat): a failed read says
		// nothing of the servicing task.
		return Step{Action: Wait, Report: d.report(names.StatusApplying, msg), State: d.state}
	}
	return d.fail(fmt.Sprintf("cannot read the host for %s: %s; see %s", d.readGrace(), in.ObserveError, AgentLog))
}

func (d decision) succeed() Step {
	obs := d.in.Observed
	msg := fmt.Sprintf("revision %s applied: build %s, containerd %s, cni %s", d.in.Revision, obs.Build, orNone(obs.ContainerdVersion), orMissing(obs.CNIMode))
	if d.in.Config.Config.CSIProxyVersion != nil {
		msg += ", csi-proxy " + obs.CSIProxyVersion
	}
	r := d.report(names.StatusSucceeded, msg)
	r.NoReboot = d.state.Attempts > 0 && d.state.Reboots == 0
	r.Installed = d.state.Installed
	if r.NoReboot {
		r.HostBuild = obs.Build.String()
	}
	return Step{Action: Report, Report: r, State: d.state}
}

func (d decision) fail(msg string) Step {
	return Step{Action: Report, Report: d.report(names.StatusFailed, msg), State: d.state}
}

// failInstall fails the node on the update's own result: the report names
// the code for the operator's count of bad updates.
func (d decision) failInstall(code uint32, msg string) Step {
	step := d.fail(msg)
	step.Report.ResultCode = ResultCode(code)
	return step
}

// ResultCode is how a report writes an HRESULT.
func ResultCode(code uint32) string { return fmt.Sprintf("0x%08X", code) }

func (d decision) report(s names.ApplyStatus, msg string) NodeReport {
	return NodeReport{AppliedRevision: d.in.Revision, Status: s, Message: msg}
}

func (d decision) configMap() string {
	return d.in.Namespace + "/" + names.ConfigMapName(d.in.Pool, d.in.Revision)
}

func (d decision) maxAttempts() int {
	if d.in.MaxAttempts < 1 {
		return DefaultMaxAttempts
	}
	return d.in.MaxAttempts
}

func (d decision) maxReboots() int {
	if d.in.MaxReboots < 1 {
		return 2 * d.maxAttempts()
	}
	return d.in.MaxReboots
}

func (d decision) taskStartGrace() time.Duration {
	if d.in.TaskStartGrace <= 0 {
		return DefaultTaskStartGrace
	}
	return d.in.TaskStartGrace
}

// InstallBudget reads the operator's winpool.dev/install-budget: 0 (the
// default cap) when absent, unreadable, not positive or past
// MaxUpdateTaskTimeout, so a bad value never leaves a task unbounded.
func InstallBudget(annotation string) time.Duration {
	d, err := time.ParseDuration(annotation)
	if err != nil || d <= 0 || d > MaxUpdateTaskTimeout {
		return 0
	}
	return d
}

func (d decision) updateTaskTimeout() time.Duration {
	if d.in.UpdateTaskTimeout <= 0 {
		return DefaultUpdateTaskTimeout
	}
	return d.in.UpdateTaskTimeout
}

func (d decision) runtimeTaskTimeout() time.Duration {
	if d.in.RuntimeTaskTimeout <= 0 {
		return DefaultRuntimeTaskTimeout
	}
	return d.in.RuntimeTaskTimeout
}

func (d decision) readGrace() time.Duration {
	if d.in.ReadGrace <= 0 {
		return DefaultReadGrace
	}
	return d.in.ReadGrace
}

func (d decision) networkGrace() time.Duration {
	if d.in.NetworkGrace <= 0 {
		return DefaultNetworkGrace
	}
	return d.in.NetworkGrace
}

func sourceOf(req host.UpdateRequest) string {
	switch {
	case req.Source == config.SourcePackages:
		return fmt.Sprintf("%d package(s)", len(req.Packages))
	case len(req.KBs) > 0:
		return "Windows Update (" + strings.Join(req.KBs, ", ") + ")"
	}
	return "Windows Update"
}

func orNone(v string) string {
	if v == "" {
		return "none"
	}
	return v
}

func orMissing(v string) string {
	if v == "" {
		return "missing"
	}
	return v
}
