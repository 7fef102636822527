package decide

import (
	"fmt"
	"strings"

	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"
)

// ReasonUndo is why the agent reboots after taking a cumulative update off.
const ReasonUndo = "removing the cumulative update asked for it"

// UndoLogs is where a failed removal is explained.
const UndoLogs = `C:\Windows\Logs\DISM\dism.log and C:\Windows\Logs\CBS\CBS.log`

// undo takes the cumulative update the node runs off, once, and reboots the
// node onto the build below it: the operator asked (Input.Undo) because a
// health gate held the node in its soak after the update. It runs in the
// servicing task like an install (a removal is a CBS transaction too), is
// never retried (the operator fails the node either way: a person decides
// what follows), and it succeeds once the node runs below the build it
// took off.
func (d decision) undo() Step {
	in := d.in
	if in.ObserveError != "" {
		return d.unreadable()
	}
	obs := in.Observed
	if d.state.UndoOf != "" {
		of, err := host.ParseBuild(d.state.UndoOf)
		if err == nil && !obs.Build.AtLeast(of) {
			if why := RebootReasons(obs.Reboot); len(why) > 0 && d.state.Reboots < d.maxReboots() {
				return d.undoReboot(of, strings.Join(why, ", "))
			}
			msg := fmt.Sprintf("took the cumulative update of build %s off (health gate %s held the node in its soak): the node runs build %s", of, in.Undo, obs.Build)
			return Step{Action: Report, Report: d.report(names.StatusSucceeded, msg), State: d.state}
		}
	}
	if step, decided := d.undoTask(); decided {
		return step
	}
	if d.state.Attempts > 0 {
		return d.fail(fmt.Sprintf("the removal of the cumulative update of build %s ended and the node rebooted, but it still runs build %s; see %s",
			d.state.UndoOf, obs.Build, UndoLogs))
	}
	d.state.Attempts = 1
	d.state.UndoOf = obs.Build.String()
	req := host.UpdateRequest{Revision: in.Revision, Attempt: 1, StartedAt: d.state.StartedAt, Target: obs.Build, Limit: d.updateTaskTimeout(), Undo: true}
	return Step{Action: InstallUpdate, Report: d.report(names.StatusApplying, d.undoMessage()), State: d.state, Target: obs.Build, Update: req}
}

// undoMessage says what the removal does; the same words while it runs.
func (d decision) undoMessage() string {
	return fmt.Sprintf("taking the cumulative update of build %s off, then rebooting (health gate %s held the node in its soak after revision %s)",
		d.state.UndoOf, d.in.Undo, d.in.Revision)
}

// undoTask judges the removal's task, as updateTask does an install's.
func (d decision) undoTask() (Step, bool) {
	u := d.in.Observed.UpdateTask
	if u == nil {
		return Step{}, false
	}
	ours := u.Undo && d.state.Attempts > 0 && u.Revision == d.in.Revision && u.Attempt == d.state.Attempts && u.StartedAt == d.state.StartedAt
	where := u.ResultFile
	if where == "" {
		where = ServicingResultFile
	}
	of, _ := host.ParseBuild(d.state.UndoOf)
	if u.Phase == host.UpdateRunning {
		step := d.runningTask(u, of, ours, where)
		if ours && step.Action == Wait {
			step.Report.Message = d.undoMessage()
		}
		return step, true
	}
	if !ours || d.state.RebootedAfter == u.Attempt || u.Interrupted {
		return Step{}, false
	}
	if u.Error != "" {
		return d.fail(fmt.Sprintf("cannot take the cumulative update of build %s off: %s; see %s", of, u.Error, where)), true
	}
	switch code := uint32(u.Result.ExitCode); code {
	case ExitSuccess, ExitRebootRequired:
		// Not marked acted on in service: the reboot follows the drain.
		if !d.inService() {
			d.state.RebootedAfter = u.Attempt
		}
		return d.undoReboot(of, ReasonUndo), true
	default:
		return d.fail(fmt.Sprintf("%s exited 0x%08X (%d): the cumulative update of build %s stays on (a package made permanent, or the "+
			"component store cleaned with /ResetBase, cannot be removed: 0x800F0825); see %s", u.Result.Detail, code, code, of, UndoLogs)), true
	}
}

// undoReboot reboots onto the build below of, within the cap on reboots;
// never a node in service (the operator cordoned it for the undo).
func (d decision) undoReboot(of host.Build, reason string) Step {
	if d.inService() {
		msg := fmt.Sprintf("the cumulative update of build %s is removed and Windows asks for a reboot (%s); the node is in service: waiting for the operator to drain it", of, reason)
		return Step{Action: Wait, Report: d.report(names.StatusRebootRequired, msg), State: d.state, Target: of}
	}
	if d.state.Reboots >= d.maxReboots() {
		return d.fail(fmt.Sprintf("a reboot is still pending after %d reboots taking the cumulative update of build %s off (%s); see %s", d.state.Reboots, of, reason, UndoLogs))
	}
	d.state.Reboots++
	msg := fmt.Sprintf("rebooting to take the cumulative update of build %s off (reboot %d of at most %d): %s", of, d.state.Reboots, d.maxReboots(), reason)
	return Step{Action: Reboot, Report: d.report(names.StatusRebooting, msg), State: d.state, Target: of, RebootReason: reason}
}
