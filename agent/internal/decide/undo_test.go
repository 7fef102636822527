package decide

import (
	"testing"

	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"
)

// undoRequest is an operator's start that takes r1's update off a node
// that runs it (drained and cordoned: not in service).
func undoRequest() Input {
	in := patched()
	in.Standalone, in.NodeState, in.StartedAt, in.Undo = false, names.StateApplying, "2026-12-05T10:00:00Z", "win-pods"
	return in
}

// removed is in once the removal's task ended with code.
func removed(in Input, start Step, code int) Input {
	in = installed(in, start, code)
	in.Observed.UpdateTask.Undo, in.Observed.UpdateTask.StartedAt = true, start.Update.StartedAt
	return in
}

// An undo removes the cumulative update of the running build once, in the
// servicing task, reboots when it ends, and succeeds once the node runs
// below that build; a removal DISM refuses, or a reboot that lands the same
// build, fails the node with where to look. Nothing is retried.
func TestAnUndoRemovesTheUpdateOnceRebootsAndSucceedsBelowIt(t *testing.T) {
	start := Next(undoRequest())
	check(t, start, want{action: InstallUpdate, status: names.StatusApplying, target: "10.0.20348.2762",
		message: []string{"taking the cumulative update of build 10.0.20348.2762 off", "win-pods"},
		state:   host.State{Revision: "r1", StartedAt: "2026-12-05T10:00:00Z", Attempts: 1, UndoOf: "10.0.20348.2762"}})
	if !start.Update.Undo || start.Update.Target != build("10.0.20348.2762") {
		t.Fatalf("request %+v, want the removal of 2762", start.Update)
	}

	ended := removed(undoRequest(), start, ExitRebootRequired)
	reboot := Next(ended)
	check(t, reboot, want{action: Reboot, status: names.StatusRebooting, message: []string{"take the cumulative update of build 10.0.20348.2762 off"},
		state: host.State{Revision: "r1", StartedAt: "2026-12-05T10:00:00Z", Attempts: 1, Reboots: 1, RebootedAfter: 1, UndoOf: "10.0.20348.2762"}})
	if reboot.RebootReason != ReasonUndo {
		t.Errorf("reboot reason %q", reboot.RebootReason)
	}

	inService := ended
	inService.InService = true
	check(t, Next(inService), want{action: Wait, status: names.StatusRebootRequired, message: []string{"waiting for the operator to drain it"},
		state: start.State})

	back := ended
	back.Reported, back.State = reboot.Report, reboot.State
	back.Observed.Build = build("10.0.20348.2700")
	check(t, Next(back), want{action: Report, status: names.StatusSucceeded,
		message: []string{"took the cumulative update of build 10.0.20348.2762 off", "runs build 10.0.20348.2700"}, state: reboot.State})

	same := back
	same.Observed.Build = build("10.0.20348.2762")
	check(t, Next(same), want{action: Report, status: names.StatusFailed, message: []string{"still runs build 10.0.20348.2762", UndoLogs},
		state: reboot.State})

	refused := Next(removed(undoRequest(), start, 0x800F0825))
	check(t, refused, want{action: Report, status: names.StatusFailed, message: []string{"0x800F0825", UndoLogs}, state: start.State})
	if refused.Report.ResultCode != "" {
		t.Errorf("a refused removal carries code %q: it would count as the update's own failure", refused.Report.ResultCode)
	}
}
