package decide

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"
)

func TestClassifyUpdate(t *testing.T) {
	cases := []struct {
		code int
		want UpdateOutcome
	}{
		{0, Installed},
		{3010, RebootRequired},
		{0x800F081E, NotApplicable},
		{2148468766, NotApplicable},
		{-2146498530, NotApplicable}, // 0x800F081E as a signed 32-bit exit code
		// 0x800F0C1E, a decimal once quoted for 0x800F081E by mistake: not the same code.
		{2148469790, UpdateFailed},
		{0x80240017, NotApplicable},
		{2359302, AlreadyInstalled},
		{0x240006, AlreadyInstalled},
		{0x800F0823, ServicingStackRequired},
		{-2146498525, ServicingStackRequired}, // 0x800F0823 as a signed 32-bit exit code
		{1, UpdateFailed},
		{0x800F0922, UpdateFailed},
		{1641, UpdateFailed},
		{-1, UpdateFailed},
	}
	for _, c := range cases {
		if got := ClassifyUpdate(c.code); got != c.want {
			t.Errorf("ClassifyUpdate(%d / 0x%08X) = %v, want %v", c.code, uint32(c.code), got, c.want)
		}
	}
}

// installed runs Next on in once the servicing task it started has ended
// with exit code (its result read back by Observe).
func installed(in Input, install Step, code int) Input {
	in.Reported, in.State = install.Report, install.State
	in.Observed.UpdateTask = &host.UpdateTask{Revision: install.Update.Revision, Attempt: install.Update.Attempt, Target: install.Target.String(),
		Phase: host.UpdateDone, Result: host.UpdateResult{ExitCode: code, Detail: "kb5044281.msu"}}
	return in
}

func TestServicingTaskResult(t *testing.T) {
	in := applying(request(), names.StatusApplying, host.State{Revision: "r1", Attempts: 1})
	install := Next(in)
	if install.Action != InstallUpdate || install.Update.Attempt != 2 {
		t.Fatalf("setup: %v %+v, want InstallUpdate of attempt 2", install.Action, install.Update)
	}
	afterInstall := host.State{Revision: "r1", Attempts: 2}
	cases := []struct {
		name string
		code int
		want want
	}{
		{
			// The install's own report announced the reboot: nothing new to write.
			name: "3010 reboots, keeping the install's report",
			code: 3010,
			want: want{action: Reboot, status: names.StatusApplying, state: host.State{Revision: "r1", Attempts: 2, Reboots: 1, RebootedAfter: 2},
				message: []string{"installing the update to 10.0.20348.2762", "then rebooting if it asks", "attempt 2 of 3"}},
		},
		{name: "0 and still short: the next attempt", code: 0, want: want{action: InstallUpdate, status: names.StatusApplying,
			state: host.State{Revision: "r1", Attempts: 3}, message: []string{"attempt 3 of 3"}}},
		{name: "already installed and still short: the next attempt", code: 2359302, want: want{action: InstallUpdate, status: names.StatusApplying,
			state: host.State{Revision: "r1", Attempts: 3}}},
		{
			name: "not applicable fails and never reboots",
			code: 2148468766,
			want: want{action: Report, status: names.StatusFailed, state: afterInstall,
				message: []string{"update not applicable to this host (0x800F081E)", "kb5044281.msu", "10.0.20348.2700"}},
		},
		{
			name: "a newer servicing stack required fails saying which update to add first",
			code: 0x800F0823,
			want: want{action: Report, status: names.StatusFailed, state: afterInstall,
				message: []string{"needs a newer servicing stack first (0x800F0823, CBS_E_NEW_SERVICING_STACK_REQUIRED)", "kb5044281.msu", "spec.os.updates"}},
		},
		{
			name: "any other code fails with hex and decimal",
			code: 0x800F0922,
			want: want{action: Report, status: names.StatusFailed, state: afterInstall,
				message: []string{"servicing exited 0x800F0922 (2148469026) installing kb5044281.msu", `C:\Windows\Logs\CBS\CBS.log`, `C:\Windows\Logs\DISM\dism.log`}},
		},
		{
			name: "a small failure code is zero-padded",
			code: 5,
			want: want{action: Report, status: names.StatusFailed, state: afterInstall,
				message: []string{"servicing exited 0x00000005 (5)"}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check(t, Next(installed(in, install, c.code)), c.want)
		})
	}
}

// A node failed by its update's own result names the HRESULT in a field of
// its report, which the operator counts across pools; a failure that is not
// the update's (its task could not run) names none.
func TestAFailedInstallReportsItsResultCode(t *testing.T) {
	in := applying(request(), names.StatusApplying, host.State{Revision: "r1", Attempts: 1})
	install := Next(in)
	for code, want := range map[int]string{0x800F0922: "0x800F0922", 0x800F081E: "0x800F081E", 5: "0x00000005"} {
		if got := Next(installed(in, install, code)).Report.ResultCode; got != want {
			t.Errorf("exit %#x: resultCode %q, want %q", code, got, want)
		}
	}
	if got := Next(installed(in, install, 3010)).Report.ResultCode; got != "" {
		t.Errorf("a reboot asked for: resultCode %q, want none", got)
	}
	noTask := installed(in, install, 0)
	noTask.Observed.UpdateTask.Error = "kb5044281.msu: sha256 mismatch"
	if s := Next(noTask); s.Report.Status != names.StatusFailed || s.Report.ResultCode != "" {
		t.Errorf("a task that could not run: %s %q, want Failed without a code", s.Report.Status, s.Report.ResultCode)
	}
}

// ExitInstallFailedForTest is a servicing failure (0x800F0922).
const ExitInstallFailedForTest = 0x800F0922

// The task outlives the agent: whatever agent process looks next waits for
// it, with the words of the install (nothing new to write), never starts a
// second one, and acts on its result once.
func TestServicingTaskIsWaitedForAndReadOnce(t *testing.T) {
	in := request()
	install := Next(in)
	running := installed(in, install, 0)
	running.Observed.UpdateTask.Phase, running.Observed.UpdateTask.Result = host.UpdateRunning, host.UpdateResult{}
	running.Now = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	running.Observed.UpdateTask.Started = running.Now.Add(-time.Hour)
	check(t, Next(running), want{action: Wait, status: names.StatusApplying, state: install.State, message: []string{install.Report.Message}})
	if got := Next(running).Report.Message; got != install.Report.Message {
		t.Errorf("waiting says %q, the install said %q: a write per look", got, install.Report.Message)
	}

	hung := running
	hung.Observed.UpdateTask.Started = running.Now.Add(-4 * time.Hour)
	check(t, Next(hung), want{action: Report, status: names.StatusFailed, state: install.State,
		message: []string{`servicing task (\winpool\servicing)`, "still running after 3h0m0s", "Task Scheduler"}})

	// A pool whose timeouts.install is 5h: the same task is waited for, and
	// cut at the pool's budget, not at the agent's default.
	budget := hung
	budget.UpdateTaskTimeout = InstallBudget("5h0m0s")
	check(t, Next(budget), want{action: Wait, status: names.StatusApplying, state: install.State, message: []string{install.Report.Message}})
	budget.Observed.UpdateTask.Started = running.Now.Add(-5*time.Hour - time.Minute)
	check(t, Next(budget), want{action: Report, status: names.StatusFailed, state: install.State, message: []string{"still running after 5h0m0s"}})
	if got := Next(in); got.Update.Limit != DefaultUpdateTaskTimeout {
		t.Errorf("an install with no budget from the start asks Task Scheduler for %s, want the default %s", got.Update.Limit, DefaultUpdateTaskTimeout)
	}
	in5 := in
	in5.UpdateTaskTimeout = 5 * time.Hour
	if got := Next(in5); got.Action != InstallUpdate || got.Update.Limit != 5*time.Hour {
		t.Errorf("an install under a 5h budget: %s with limit %s, want InstallUpdate with 5h", got.Action, got.Update.Limit)
	}

	// A task of an earlier request (the operator retried the node): wait for it, start nothing.
	earlier := running
	earlier.Reported, earlier.State = NodeReport{}, host.State{}
	earlier.Observed.UpdateTask = &host.UpdateTask{Revision: "r1", Attempt: 2, Target: "10.0.20348.2762", Phase: host.UpdateRunning, Started: running.Now}
	check(t, Next(earlier), want{action: Wait, status: names.StatusApplying, state: host.State{Revision: "r1"},
		message: []string{"waiting for the servicing task of an earlier request (revision r1, attempt 2"}})
	// Once it ended, its result is not this request's: this one installs.
	earlier.Observed.UpdateTask.Phase = host.UpdateDone
	check(t, Next(earlier), want{action: InstallUpdate, status: names.StatusApplying, state: host.State{Revision: "r1", Attempts: 1}})

	// 3010, then the reboot (the build did not move): the result was acted on; the next attempt installs.
	asked := installed(in, install, 3010)
	reboot := Next(asked)
	asked.Reported, asked.State = reboot.Report, reboot.State
	check(t, Next(asked), want{action: InstallUpdate, status: names.StatusApplying,
		state: host.State{Revision: "r1", Attempts: 2, Reboots: 1, RebootedAfter: 1}, message: []string{"attempt 2 of 3"}})

	// The same revision and attempt number of an earlier operator start (a
	// retry counts from 1 again; the agent died before its task started): not ours.
	earlierStart := installed(in, install, ExitInstallFailedForTest)
	earlierStart.Observed.UpdateTask.StartedAt = "an earlier start"
	check(t, Next(earlierStart), want{action: InstallUpdate, status: names.StatusApplying, state: host.State{Revision: "r1", Attempts: 2}})

	// A boot ended the task: the build says what CBS made of it; still short, the next attempt installs.
	interrupted := installed(in, install, 0)
	interrupted.Observed.UpdateTask.Result, interrupted.Observed.UpdateTask.Interrupted = host.UpdateResult{}, true
	check(t, Next(interrupted), want{action: InstallUpdate, status: names.StatusApplying, state: host.State{Revision: "r1", Attempts: 2}})

	failed := installed(in, install, 0)
	failed.Observed.UpdateTask.Result, failed.Observed.UpdateTask.Error = host.UpdateResult{}, "kb5044281.msu: sha256 mismatch"
	check(t, Next(failed), want{action: Report, status: names.StatusFailed, state: install.State,
		message: []string{"cannot run servicing to install the update to 10.0.20348.2762: kb5044281.msu: sha256 mismatch", ServicingResultFile}})
}

// Not-applicable must never turn into a reboot or another install: the
// package will not apply however often it is tried.
func TestNotApplicableNeverLoops(t *testing.T) {
	in := request()
	install := Next(in)
	in = installed(in, install, ExitNotApplicable)
	s := Next(in)
	if s.Action != Report || s.Report.Status != names.StatusFailed {
		t.Fatalf("not applicable: %v %s, want a Failed report", s.Action, s.Report.Status)
	}
	// The Node now says Failed for r1: the agent is done until the operator retries.
	in.Reported = s.Report
	in.State = s.State
	if next := Next(in); next.Action != Idle {
		t.Errorf("after a not-applicable failure: %v, want Idle", next.Action)
	}
	if !strings.Contains(s.Report.Message, "0x800F081E") {
		t.Errorf("message %q lacks the exit code", s.Report.Message)
	}
}

// A reboot asked for by servicing counts against the reboot cap too.
func TestServicingRebootIsCapped(t *testing.T) {
	in := applying(request(), names.StatusApplying, host.State{Revision: "r1", Attempts: 2, Reboots: 6})
	install := Next(in)
	s := Next(installed(in, install, ExitRebootRequired))
	if s.Action != Report || s.Report.Status != names.StatusFailed || !strings.Contains(s.Report.Message, "after 6 reboots") {
		t.Fatalf("got %v %s %q, want Failed after 6 reboots", s.Action, s.Report.Status, s.Report.Message)
	}
}

// A failure Windows Update calls transient is tried again, after a wait,
// within the attempts; the last attempt's transient failure fails the node
// naming the code and where to look.
func TestTransientWindowsUpdateFailuresAreTriedAgain(t *testing.T) {
	started := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	in := applying(request(), names.StatusApplying, host.State{Revision: "r1", Attempts: 1})
	install := Next(in)
	busy := installed(in, install, 0x80244022)
	busy.Observed.UpdateTask.Started = started

	busy.Now = started.Add(time.Minute)
	check(t, Next(busy), want{action: Wait, status: names.StatusApplying, state: host.State{Revision: "r1", Attempts: 2},
		message: []string{"0x80244022", "WU_E_PT_HTTP_STATUS_SERVICE_UNAVAIL", "trying again 10m0s after"}})
	// The wait doubles with each attempt: the second waits twice the first's.
	busy.Now = started.Add(TransientRetryAfter)
	check(t, Next(busy), want{action: Wait, status: names.StatusApplying, state: host.State{Revision: "r1", Attempts: 2},
		message: []string{"trying again 10m0s after"}})

	busy.Now = started.Add(2 * TransientRetryAfter)
	check(t, Next(busy), want{action: InstallUpdate, status: names.StatusApplying, state: host.State{Revision: "r1", Attempts: 3},
		message: []string{"attempt 3 of 3"}})

	last := applying(request(), names.StatusApplying, host.State{Revision: "r1", Attempts: 2})
	lastInstall := Next(last)
	inProgress := installed(last, lastInstall, 0x80240009)
	inProgress.Observed.UpdateTask.Started = started
	inProgress.Now = started.Add(TransientRetryAfter + time.Second)
	check(t, Next(inProgress), want{action: Report, status: names.StatusFailed, state: host.State{Revision: "r1", Attempts: 3},
		message: []string{"in 3 attempts", "0x80240009", "WU_E_OPERATIONINPROGRESS", `C:\Windows\Logs\CBS\CBS.log`}})

	for code, want := range map[int]UpdateOutcome{0x80240009: Transient, -2145107934: Transient, 0x8024401C: Transient, 0x800F0922: UpdateFailed,
		0x80072EFE: Transient, 0x80072EE2: Transient, 0x80246008: Transient, 0x80072F8F: UpdateFailed} {
		if got := ClassifyUpdate(code); got != want {
			t.Errorf("0x%08X: %v, want %v", uint32(code), got, want)
		}
	}
}

// A servicing task that was run but whose program never started (blocked by
// antivirus or App Control, held by a battery condition) fails the node
// within TaskStartGrace, naming Task Scheduler's last result; one that
// marked its start, or one an agent started before tasks marked it, is
// waited for.
func TestAServicingTaskThatNeverStartsFailsNamingItsLastResult(t *testing.T) {
	in := request()
	install := Next(in)
	at := func(since time.Duration, marks bool, started bool) Input {
		i := installed(in, install, 0)
		task := *i.Observed.UpdateTask
		task.Phase, task.Result = host.UpdateRunning, host.UpdateResult{}
		i.Now = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
		task.Started = i.Now.Add(-since)
		task.MarksStart = marks
		if started {
			task.TaskStarted = task.Started.Add(time.Second)
		}
		code := uint32(0x41303)
		task.LastTaskResult = &code
		i.Observed.UpdateTask = &task
		return i
	}
	waiting := want{action: Wait, status: names.StatusApplying, state: install.State, message: []string{install.Report.Message}}
	check(t, Next(at(time.Minute, true, false)), waiting)
	check(t, Next(at(3*time.Minute, true, false)), want{action: Report, status: names.StatusFailed, state: install.State,
		message: []string{`servicing task (\winpool\servicing)`, "has not started within 2m0s", "0x41303, SCHED_S_TASK_HAS_NOT_RUN", "nothing was installed", "App Control"}})
	check(t, Next(at(3*time.Minute, true, true)), waiting)
	check(t, Next(at(3*time.Minute, false, false)), waiting)
}

// CBS_E_PENDING and ERROR_FAIL_REBOOT_REQUIRED (as DISM exits with it, and
// as Windows Update's HRESULT) are not the update's failure:
// the node reboots (Windows finishes or rolls back what is pending at boot),
// then the next attempt installs, within the caps.
func TestServicingThatNeedsARebootFirstRebootsThenInstallsAgain(t *testing.T) {
	for _, code := range []int{ExitCBSPending, ExitFailRebootRequired, ExitWUFailRebootRequired} {
		if got := ClassifyUpdate(code); got != RebootFirst {
			t.Errorf("0x%08X classified %v, want RebootFirst", code, got)
		}
		in := request()
		install := Next(in)
		after := installed(in, install, code)
		reboot := Next(after)
		check(t, reboot, want{action: Reboot, status: names.StatusRebooting,
			state: host.State{Revision: "r1", Attempts: 1, Reboots: 1, RebootedAfter: 1}, message: []string{ReasonInstallAsked}})
		after.Reported, after.State = reboot.Report, reboot.State
		check(t, Next(after), want{action: InstallUpdate, status: names.StatusApplying,
			state: host.State{Revision: "r1", Attempts: 2, Reboots: 1, RebootedAfter: 1}, message: []string{"attempt 2 of 3"}})
	}
}

// A two-phase update: the build reached the target, and CBS asks for a
// second reboot. The agent makes it while the node is drained (Windows would
// make it later, in service); a node that needed no reboot of this revision
// is not rebooted for a pending state someone else left.
func TestAPendingRebootAfterTheTargetIsMadeBeforeSuccess(t *testing.T) {
	in := applying(patched(), names.StatusApplying, host.State{Revision: "r1", Attempts: 1, Reboots: 1, RebootedAfter: 1})
	in.Observed.Reboot.CBSRebootPending = true
	check(t, Next(in), want{action: Reboot, status: names.StatusRebooting,
		state: host.State{Revision: "r1", Attempts: 1, Reboots: 2, RebootedAfter: 1}, message: []string{ReasonCBS}})

	untouched := applying(patched(), names.StatusApplying, host.State{Revision: "r1"})
	untouched.Observed.Reboot.CBSRebootPending = true
	if got := Next(untouched); got.Action == Reboot {
		t.Errorf("a node at the target that this revision never rebooted was rebooted: %+v", got)
	}
}

// A running task's heartbeat reaches the report, to the second, moved only
// once HeartbeatReportEvery has passed since the beat reported (one write per
// node per interval, not per minute).
func TestARunningTasksHeartbeatIsReportedEveryFiveMinutes(t *testing.T) {
	in := request()
	install := Next(in)
	i := installed(in, install, 0)
	task := *i.Observed.UpdateTask
	task.Phase, task.Result = host.UpdateRunning, host.UpdateResult{}
	i.Now = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	task.Started, task.MarksStart, task.TaskStarted = i.Now.Add(-40*time.Minute), true, i.Now.Add(-39*time.Minute)
	for _, c := range []struct {
		beat     time.Time
		reported string
		want     string
	}{
		{time.Time{}, "", ""},
		{time.Date(2026, 12, 2, 9, 58, 30, 0, time.UTC), "", "2026-12-02T09:58:30Z"},
		{time.Date(2026, 12, 2, 9, 59, 30, 0, time.UTC), "2026-12-02T09:58:30Z", "2026-12-02T09:58:30Z"},
		{time.Date(2026, 12, 2, 10, 3, 29, 0, time.UTC), "2026-12-02T09:58:30Z", "2026-12-02T09:58:30Z"},
		{time.Date(2026, 12, 2, 10, 3, 30, 0, time.UTC), "2026-12-02T09:58:30Z", "2026-12-02T10:03:30Z"},
		// A reported beat of another revision is no measure.
		{time.Date(2026, 12, 2, 9, 59, 30, 0, time.UTC), "other", "2026-12-02T09:59:30Z"},
	} {
		task.Heartbeat = c.beat
		i.Reported.Heartbeat = c.reported
		i.Reported.AppliedRevision = i.Revision
		if c.reported == "other" {
			i.Reported.AppliedRevision, i.Reported.Heartbeat = "r0", "2026-12-02T09:58:30Z"
		}
		i.Observed.UpdateTask = &task
		step := Next(i)
		if step.Action != Wait || step.Report.Heartbeat != c.want {
			t.Errorf("beat %v: %v, heartbeat %q; want Wait, %q", c.beat, step.Action, step.Report.Heartbeat, c.want)
		}
	}
}

// A host read that fails while the servicing task runs keeps the beat the
// report carried: it says nothing of the task, and a report without the
// beat would have the operator time out an install that runs.
func TestAFailedReadKeepsTheReportedHeartbeat(t *testing.T) {
	in := applying(request(), names.StatusApplying, host.State{Revision: "r1", Attempts: 1})
	in.Reported.Heartbeat = "2026-12-02T09:55:00Z"
	in.Observed = host.Observed{}
	in.ObserveError, in.ObserveFailingFor = "reading HKLM\\...\\CurrentBuildNumber: Insufficient system resources", 10*time.Second
	step := Next(in)
	if step.Action != Wait || step.Report.Heartbeat != "2026-12-02T09:55:00Z" || !strings.Contains(step.Report.Message, "cannot read the host") {
		t.Errorf("%v, report %+v; want Wait keeping the heartbeat", step.Action, step.Report)
	}
	// A report about another revision carries no beat of this one.
	in.Reported.AppliedRevision = "r0"
	if step := Next(in); step.Report.Heartbeat != "" {
		t.Errorf("heartbeat %q carried over from revision r0", step.Report.Heartbeat)
	}
}

// The report that says what the install brought carries the task's end as
// its beat: the operator times the checks that follow from it, not from the
// start of an install that outlasted nodeTimeout. It costs no write of its own.
func TestTheSuccessCarriesTheTasksEndAsItsBeat(t *testing.T) {
	end := time.Date(2026, 12, 2, 10, 7, 12, 500, time.UTC)
	in := applying(patched(), names.StatusApplying, host.State{Revision: "r1", Attempts: 1, Reboots: 1, RebootedAfter: 1})
	in.Reported.Heartbeat = "2026-12-02T10:01:00Z"
	in.Observed.UpdateTask = &host.UpdateTask{Revision: "r1", Attempt: 1, Phase: host.UpdateDone, Heartbeat: end, Result: host.UpdateResult{ExitCode: 3010}}
	step := Next(in)
	if step.Report.Status != names.StatusSucceeded || step.Report.Heartbeat != "2026-12-02T10:07:12Z" {
		t.Errorf("report %+v; want Succeeded with the task's end as its beat", step.Report)
	}
	// A task of another revision lends no beat.
	in.Observed.UpdateTask.Revision = "r0"
	if step := Next(in); step.Report.Heartbeat != "2026-12-02T10:01:00Z" {
		t.Errorf("heartbeat %q; want the reported one, not r0's task's", step.Report.Heartbeat)
	}
}

// Only a positive budget no longer than Task Scheduler's own default is
// taken from the Node: anything else leaves the agent's default cap, so a
// bad annotation never leaves a task unbounded.
func TestInstallBudgetReadsOnlyABoundedDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"14400s": 4 * time.Hour, "90m0s": 90 * time.Minute, "72h": 72 * time.Hour,
		"": 0, "4 hours": 0, "-1h": 0, "0s": 0, "73h": 0, "9999999h": 0,
	} {
		if got := InstallBudget(in); got != want {
			t.Errorf("InstallBudget(%q) = %s, want %s", in, got, want)
		}
	}
}

// A node the operator started in service (a hotpatch: not cordoned) whose
// install asks for a reboot after all is not rebooted: the agent reports
// RebootRequired and waits; once the operator cordoned and drained it, the
// same start goes on to the reboot, its attempt kept.
func TestANodeInServiceIsNeverRebootedItAsksForTheDrain(t *testing.T) {
	in := request()
	in.Standalone, in.NodeState, in.StartedAt, in.InService = false, names.StateApplying, "2026-12-02T10:00:00Z", true
	install := Next(in)
	after := installed(in, install, 3010)
	after.Observed.UpdateTask.StartedAt = in.StartedAt
	wait := Next(after)
	check(t, wait, want{action: Wait, status: names.StatusRebootRequired,
		state: host.State{Revision: "r1", StartedAt: in.StartedAt, Attempts: 1}, message: []string{"in service", "drain"}})
	after.Reported, after.State = wait.Report, wait.State
	after.InService = false
	check(t, Next(after), want{action: Reboot, status: names.StatusRebooting,
		state: host.State{Revision: "r1", StartedAt: in.StartedAt, Attempts: 1, Reboots: 1, RebootedAfter: 1}, message: []string{ReasonInstallAsked}})
}

// The success of an install that needed no reboot (a hotpatch) says so: the
// operator then waits for no new boot. One after a reboot, or with nothing
// installed, does not.
func TestASuccessWithoutARebootSaysSo(t *testing.T) {
	for _, c := range []struct {
		state host.State
		want  bool
	}{
		{host.State{Revision: "r1", Attempts: 1}, true},
		{host.State{Revision: "r1", Attempts: 1, Reboots: 1, RebootedAfter: 1}, false},
		{host.State{Revision: "r1"}, false},
	} {
		got := Next(applying(patched(), names.StatusApplying, c.state))
		if got.Report.Status != names.StatusSucceeded || got.Report.NoReboot != c.want {
			t.Errorf("state %+v: %s, NoReboot %v; want Succeeded, NoReboot %v", c.state, got.Report.Status, got.Report.NoReboot, c.want)
		}
		// With no reboot the kubelet's kernelVersion is the build before
		// the install (winstats reads it once): the report carries the host's.
		if want := map[bool]string{true: patched().Observed.Build.String()}[c.want]; got.Report.HostBuild != want {
			t.Errorf("state %+v: host build %q, want %q", c.state, got.Report.HostBuild, want)
		}
	}
}

// The record a Succeeded report carries is this start's: the earlier
// attempts' (kept in the state) and then the current attempt's task's,
// never a result of another start or one a boot cut short.
func TestTheRecordIsThisStartsOwn(t *testing.T) {
	ssu, cu := host.InstalledUpdate{KB: "KB5050001"}, host.InstalledUpdate{KB: "KB5050002", CveIDs: []string{"CVE-2026-00021"}}
	at := func(startedAt string, interrupted bool) Input {
		in := applying(patched(), names.StatusApplying, host.State{Revision: "r1", StartedAt: "s2", Attempts: 2, Reboots: 2, RebootedAfter: 2,
			Installed: []host.InstalledUpdate{ssu}})
		in.NodeState, in.StartedAt = names.StateApplying, "s2"
		in.Observed.UpdateTask = &host.UpdateTask{Revision: "r1", Attempt: 2, StartedAt: startedAt, Phase: host.UpdateDone, Interrupted: interrupted,
			Result: host.UpdateResult{ExitCode: ExitRebootRequired, Installed: []host.InstalledUpdate{cu}}}
		return in
	}
	for name, c := range map[string]struct {
		in   Input
		want []host.InstalledUpdate
	}{
		"this attempt's task":     {at("s2", false), []host.InstalledUpdate{ssu, cu}},
		"another start's task":    {at("s1", false), []host.InstalledUpdate{ssu}},
		"a task a boot cut short": {at("s2", true), []host.InstalledUpdate{ssu}},
	} {
		got := Next(c.in)
		if got.Report.Status != names.StatusSucceeded || !reflect.DeepEqual(got.Report.Installed, c.want) {
			t.Errorf("%s: %s with %+v installed, want Succeeded with %+v", name, got.Report.Status, got.Report.Installed, c.want)
		}
	}
}
