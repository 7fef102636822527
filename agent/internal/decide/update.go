package decide

import (
	"fmt"
	"time"

	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"
)

// UpdateOutcome is what a servicing exit code means for the agent.
type UpdateOutcome int

const (
	UpdateFailed UpdateOutcome = iota
	Installed
	RebootRequired
	NotApplicable
	AlreadyInstalled
	// ServicingStackRequired: the update needs a newer servicing stack
	// update installed first.
	ServicingStackRequired
	// Transient: Windows Update says the failure passes by itself (another
	// install in progress, the update server busy or slow): the install is
	// tried again, within the attempts, after TransientRetryAfter.
	Transient
	// RebootFirst: servicing cannot go on until the node reboots (a reboot
	// is pending from an earlier install, or a failed one must be rolled
	// back at boot): reboot, then the next attempt installs.
	RebootFirst
)

func (o UpdateOutcome) String() string {
	switch o {
	case Installed:
		return "Installed"
	case RebootRequired:
		return "RebootRequired"
	case NotApplicable:
		return "NotApplicable"
	case AlreadyInstalled:
		return "AlreadyInstalled"
	case ServicingStackRequired:
		return "ServicingStackRequired"
	case Transient:
		return "Transient"
	case RebootFirst:
		return "RebootFirst"
	}
	return "Failed"
}

// Servicing exit codes (DISM, wusa) the agent tells apart.
const (
	ExitSuccess = 0
	// ExitRebootRequired is ERROR_SUCCESS_REBOOT_REQUIRED.
	ExitRebootRequired = 3010
	// ExitNotApplicable is CBS_E_NOT_APPLICABLE (DISM): the package does not
	// apply to this image.
	ExitNotApplicable = 0x800F081E
	// ExitWUNotApplicable is WU_E_NOT_APPLICABLE, wusa's way of saying the same.
	ExitWUNotApplicable = 0x80240017
	// ExitAlreadyInstalled is WU_S_ALREADY_INSTALLED (wusa).
	ExitAlreadyInstalled = 0x240006
	// ExitServicingStackRequired is CBS_E_NEW_SERVICING_STACK_REQUIRED: the
	// package needs a newer servicing stack update than the host has.
	ExitServicingStackRequired = 0x800F0823
	// ExitCBSPending is CBS_E_PENDING: a reboot is pending from an earlier
	// servicing operation, and nothing more installs until it happens.
	ExitCBSPending = 0x800F082F
	// ExitFailRebootRequired is ERROR_FAIL_REBOOT_REQUIRED: the install
	// failed and a reboot rolls its changes back.
	ExitFailRebootRequired = 3017
	// ExitWUFailRebootRequired is the same as an HRESULT
	// (HRESULT_FROM_WIN32), the form Windows Update's results carry.
	ExitWUFailRebootRequired = 0x80070BC9
)

// transientCodes are the Windows Update Agent results that mean "not now"
// rather than "this update fails here" (Windows Update error code reference,
// Microsoft Learn): another install or scan holds the agent, or the update
// server (WSUS behind a load balancer, a proxy) answered busy or timed out.
// Each fails a node for good no more than any other failure would once the
// attempts run out; it only is not the end of the first one.
var transientCodes = map[uint32]string{
	0x80240009: "WU_E_OPERATIONINPROGRESS: another Windows Update operation is in progress",
	0x80240016: "WU_E_INSTALL_NOT_ALLOWED: another installation is in progress or a reboot is pending",
	0x80244022: "WU_E_PT_HTTP_STATUS_SERVICE_UNAVAIL: the update server answered 503",
	0x8024401C: "WU_E_PT_HTTP_STATUS_REQUEST_TIMEOUT: the update server timed out",
	0x80244010: "WU_E_PT_EXCEEDED_MAX_SERVER_TRIPS: the update server needed too many round trips",
	// The network between the node and its source, as WinHTTP/WinINet says
	// (a proxy that resets a long download, a flapping link).
	0x80072EE2: "ERROR_INTERNET_TIMEOUT: the connection to the update server timed out",
	0x80072EFD: "ERROR_INTERNET_CANNOT_CONNECT: the update server could not be reached",
	0x80072EFE: "ERROR_INTERNET_CONNECTION_ABORTED: the connection to the update server was reset",
	0x80246008: "WU_E_DM_BITSTRANSFERERROR: the download (BITS) failed",
}

// TransientRetryAfter is how long after a transiently failed install started
// the next attempt waits, doubled for each attempt made before it: an
// install in progress or a busy server is seldom over in seconds, and a
// source that stays busy is asked less and less often.
const TransientRetryAfter = 5 * time.Minute

// transientWait is the wait after the attempt-th transient failure.
func (d decision) transientWait(attempt int) time.Duration {
	base := d.in.TransientRetryAfter
	if base <= 0 {
		base = TransientRetryAfter
	}
	return base << min(max(attempt-1, 0), 6)
}

// ClassifyUpdate maps a servicing exit code. Windows exit codes are 32-bit
// unsigned; a caller that got the signed form (-2146498530 for 0x800F081E)
// is classified the same.
func ClassifyUpdate(exitCode int) UpdateOutcome {
	switch uint32(exitCode) {
	case ExitSuccess:
		return Installed
	case ExitRebootRequired:
		return RebootRequired
	case ExitNotApplicable, ExitWUNotApplicable:
		return NotApplicable
	case ExitAlreadyInstalled:
		return AlreadyInstalled
	case ExitServicingStackRequired:
		return ServicingStackRequired
	case ExitCBSPending, ExitFailRebootRequired, ExitWUFailRebootRequired:
		return RebootFirst
	}
	if _, ok := transientCodes[uint32(exitCode)]; ok {
		return Transient
	}
	return UpdateFailed
}

// updateTask judges the servicing task of this request, if its result is on
// the host. decided: the step is the answer (wait for a task that runs, reboot
// for one that asked, fail with what it found); otherwise the caller goes on
// as if no task had run (none did for this attempt, or its result has been
// acted on: an install that changed nothing counts against the attempts).
//
// The task runs outside the agent's pod, so it survives the agent: this is
// read back, possibly by a later agent process than the one that started it,
// and an install is never started twice for one attempt, nor while another
// runs.
func (d decision) updateTask(target host.Build) (Step, bool) {
	u := d.in.Observed.UpdateTask
	if u == nil {
		return Step{}, false
	}
	ours := d.state.Attempts > 0 && u.Revision == d.in.Revision && u.Attempt == d.state.Attempts && u.StartedAt == d.state.StartedAt
	where := u.ResultFile
	if where == "" {
		where = ServicingResultFile
	}
	if u.Phase == host.UpdateRunning {
		return d.runningTask(u, target, ours, where), true
	}
	// A boot ended the task (Interrupted): CBS finished or rolled back its
	// transaction at boot, and the build says which; the next attempt, if
	// one is needed, installs again within the caps.
	if !ours || d.state.RebootedAfter == u.Attempt || u.Interrupted {
		return Step{}, false
	}
	if u.Error != "" {
		return d.fail(fmt.Sprintf("cannot run servicing to install the update to %s: %s; see %s", target, u.Error, where)), true
	}
	code := uint32(u.Result.ExitCode)
	switch class := ClassifyUpdate(u.Result.ExitCode); {
	case (class == RebootRequired || class == RebootFirst) && d.inService():
		// Not marked acted on: the reboot follows the operator's drain.
		return d.awaitDrain(target, ReasonInstallAsked), true
	case class == RebootRequired:
		d.state.RebootedAfter = u.Attempt
		step := d.reboot(target, ReasonInstallAsked)
		// The install's report already says a reboot follows when the
		// install asks for one, and the kubelet shows the reboot itself (a
		// new bootID, its Rebooted Event): a report written only to say so
		// would be one more API write per node updated, for nothing the
		// operator decides on.
		if step.Action == Reboot && d.in.Reported.Status == names.StatusApplying && d.in.Reported.AppliedRevision == d.in.Revision {
			step.Report = d.in.Reported
		}
		return step, true
	case class == Installed || class == AlreadyInstalled:
		return Step{}, false
	case class == RebootFirst:
		// Not the update's failure: Windows finishes (or rolls back) what is
		// pending at boot, and the next attempt installs, within the caps.
		d.state.RebootedAfter = u.Attempt
		return d.reboot(target, ReasonInstallAsked), true
	case class == Transient:
		wait := d.transientWait(d.state.Attempts)
		if d.state.Attempts >= d.maxAttempts() {
			return d.failInstall(code, fmt.Sprintf("Windows Update could not install the update to %s in %d attempts; the last said 0x%08X (%s): "+
				"look at the update source and %s", target, d.state.Attempts, code, transientCodes[code], servicingLogs)), true
		}
		if d.in.Now.Sub(u.Started) < wait && !u.Started.IsZero() && !d.in.Now.IsZero() {
			msg := fmt.Sprintf("Windows Update could not install the update to %s now (0x%08X, %s); trying again %s after the last attempt started (attempt %d of %d)",
				target, code, transientCodes[code], wait, d.state.Attempts, d.maxAttempts())
			return Step{Action: Wait, Report: d.report(names.StatusApplying, msg), State: d.state}, true
		}
		return Step{}, false
	case class == ServicingStackRequired:
		// Never retried as is: the same package fails the same way until the
		// servicing stack update it needs is installed before it.
		return d.failInstall(code, fmt.Sprintf("the update needs a newer servicing stack first (0x%08X, CBS_E_NEW_SERVICING_STACK_REQUIRED) installing %s on build %s: "+
			"list the servicing stack update (SSU) that it requires before it in spec.os.updates, or approve that SSU in WSUS; %s",
			code, u.Result.Detail, d.in.Observed.Build, servicingLogs)), true
	case class == NotApplicable:
		// Never a reboot: nothing was staged, and rebooting would only loop.
		return d.failInstall(code, fmt.Sprintf("update not applicable to this host (0x%08X): %s does not apply to build %s (target %s); "+
			"the package is for another Windows release, or this host needs a newer servicing stack update first; %s",
			code, u.Result.Detail, d.in.Observed.Build, target, servicingLogs)), true
	}
	return d.failInstall(code, fmt.Sprintf("servicing exited 0x%08X (%d) installing %s; %s", code, code, u.Result.Detail, servicingLogs)), true
}

// runningTask waits for a servicing task that runs, or fails the node when
// its program never started or it runs past its cap. Its words stay the
// install's, so waiting writes nothing but the heartbeat every
// HeartbeatReportEvery.
func (d decision) runningTask(u *host.UpdateTask, target host.Build, ours bool, where string) Step {
	if u.MarksStart && u.TaskStarted.IsZero() && !u.Started.IsZero() && !d.in.Now.IsZero() && d.in.Now.Sub(u.Started) > d.taskStartGrace() {
		return d.fail(fmt.Sprintf("the servicing task (%s) was run at %s and its program has not started within %s (Task Scheduler's last result: %s): "+
			"nothing was installed. Antivirus or App Control blocking %s, or a task condition such as battery power, stop it; "+
			"see the task's history in Task Scheduler and docs/agent.md (the allow rule the agent needs)", ServicingTaskName,
			u.Started.UTC().Format("15:04:05Z"), d.taskStartGrace(), TaskResult(u.LastTaskResult), ServicingTaskProgram))
	}
	if !u.Started.IsZero() && !d.in.Now.IsZero() && d.in.Now.Sub(u.Started) > d.updateTaskTimeout() {
		return d.fail(fmt.Sprintf("the servicing task (%s) installing %s since %s is still running after %s: it never ran or it hangs; "+
			"see %s, the task's history in Task Scheduler, and %s", ServicingTaskName, u.Target, u.Started.UTC().Format("15:04:05Z"),
			d.updateTaskTimeout(), where, servicingLogs))
	}
	msg := d.installMessage(target)
	var beat string
	if ours && !u.Heartbeat.IsZero() {
		beat = d.reportedBeat(u.Heartbeat)
	}
	if !ours {
		// A second servicing run on top of a running one fails with
		// CBS_E_PENDING at best: the earlier request's task ends first.
		msg = fmt.Sprintf("waiting for the servicing task of an earlier request (revision %s, attempt %d, installing %s) to end before installing %s",
			u.Revision, u.Attempt, u.Target, target)
	}
	report := d.report(names.StatusApplying, msg)
	report.Heartbeat = beat
	return Step{Action: Wait, Report: report, State: d.state}
}

// reportedBeat is the beat the report carries: the task's, to the second,
// once HeartbeatReportEvery has passed since the one reported (one report
// write per node in flight per interval, not one per beat); else that one.
func (d decision) reportedBeat(beat time.Time) string {
	prev, err := time.Parse(time.RFC3339, d.in.Reported.Heartbeat)
	if err == nil && d.in.Reported.AppliedRevision == d.in.Revision && beat.Sub(prev) < HeartbeatReportEvery && !beat.Before(prev) {
		return d.in.Reported.Heartbeat
	}
	return beat.UTC().Truncate(time.Second).Format(time.RFC3339)
}

// ServicingTaskProgram is the program the servicing task runs, under the
// agent's state folder (what an allow rule names).
const ServicingTaskProgram = `C:\ProgramData\winpool\servicing\winpool-agent.exe`

// taskResults are the Task Scheduler results that say why a task that was
// run did not start its program (Task Scheduler error and success
// constants, Microsoft Learn).
var taskResults = map[uint32]string{
	0x41303:    "SCHED_S_TASK_HAS_NOT_RUN: the task has not run",
	0x41301:    "SCHED_S_TASK_RUNNING",
	0x41306:    "SCHED_S_TASK_TERMINATED: the task was stopped",
	0x800710E0: "the operator or administrator has refused the request (a task condition, such as battery power, or the task disabled)",
	0x80070005: "access denied",
	0x800700C1: "not a valid application (the program was blocked or damaged)",
	0x800704DD: "the service is not available (Task Scheduler)",
	0x8004131F: "SCHED_E_ALREADY_RUNNING: an instance of the task is already running",
}

// TaskResult says a Task Scheduler result as a person looks it up: its
// code and, when known, its meaning; "unread" when there is none.
func TaskResult(code *uint32) string {
	if code == nil {
		return "unread"
	}
	if what, ok := taskResults[*code]; ok {
		return fmt.Sprintf("0x%X, %s", *code, what)
	}
	return fmt.Sprintf("0x%X", *code)
}
