package decide

import (
	"fmt"

	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"
)

// runtimeTask judges the containerd upgrade task this request started, if
// its result is on the host. decided: the step is the answer (wait for the
// task, or fail with what it found); otherwise the caller goes on as if no
// task had run (none did for this attempt, or it succeeded).
//
// The task runs outside containerd because stopping containerd from inside a
// HostProcess container stops the agent too: the agent reads its outcome back
// here, possibly from a later process than the one that started it.
func (d decision) runtimeTask() (Step, bool) {
	u := d.in.Observed.RuntimeUpgrade
	// A result of another revision, or of an attempt of an earlier request
	// (the counters restarted), says nothing about this one.
	if u == nil || d.state.RuntimeUpgrades == 0 || u.Revision != d.in.Revision || u.Attempt != d.state.RuntimeUpgrades {
		return Step{}, false
	}
	where := u.ResultFile
	if where == "" {
		where = RuntimeResultFile
	}
	switch u.Phase {
	case host.RuntimeScheduled, host.RuntimeRunning:
		if !u.Started.IsZero() && !d.in.Now.IsZero() && d.in.Now.Sub(u.Started) > d.runtimeTaskTimeout() {
			return d.fail(fmt.Sprintf("the containerd %s upgrade task (%s) started at %s is still %s after %s: it never ran or it hangs; "+
				"see %s, the task's history in Task Scheduler, and %s",
				u.Version, RuntimeTaskName, u.Started.UTC().Format("15:04:05Z"), u.Phase, d.runtimeTaskTimeout(), where, AgentLog)), true
		}
		msg := fmt.Sprintf("containerd %s is being installed by scheduled task %s (%s): it stops kubelet and containerd, swaps the binaries and starts them again",
			u.Version, RuntimeTaskName, u.Phase)
		return Step{Action: Wait, Report: d.report(names.StatusApplying, msg), State: d.state}, true
	case host.RuntimeRolledBack:
		return d.fail(fmt.Sprintf("containerd %s did not come up and was rolled back: %s; see %s and the containerd service's log",
			u.Version, u.Message, where)), true
	case host.RuntimeFailed:
		return d.fail(fmt.Sprintf("containerd %s upgrade failed and so did its rollback, the runtime may be down: %s; see %s; "+
			"the old binaries are kept under C:\\ProgramData\\winpool\\runtime", u.Version, u.Message, where)), true
	}
	// Succeeded: the version check is Next's, on the version containerd reports.
	return Step{}, false
}
