package agent

import (
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"
)

// The reboot the install asked for has no Event of the agent's (the
// kubelet records the node's Rebooted); one for a pending reboot has.
func TestEventsOnApplyStartedAndRebooting(t *testing.T) {
	for _, c := range []struct {
		name    string
		pending bool
		want    []string
	}{
		{"the install's reboot", false, []string{ReasonApplyStarted + " Normal"}},
		{"a pending reboot", true, []string{ReasonRebooting + " Normal"}},
	} {
		t.Run(c.name, func(t *testing.T) { eventsUntilTheReboot(t, c.pending, c.want) })
	}
}

func eventsUntilTheReboot(t *testing.T, pending bool, want []string) {
	rebooted := make(chan string, 1)
	o := behindHost()
	o.RebootPending = pending
	o.OnReboot = func(reason string) { rebooted <- reason }
	h := newHarness(t, newMachine(o), requestedR1(), revisionConfigMap(revisionR1()))
	opts := h.options()
	opts.Events = true
	h.start(opts)
	select {
	case <-rebooted:
	case <-time.After(10 * time.Second):
		t.Fatalf("no reboot; node says %q", h.value(keyApplyMessage))
	}
	eventually(t, "the Events", func() bool { return len(h.events()) == len(want) })
	if got := h.events(); !reflect.DeepEqual(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	h.assertOnlyAgentWrites()
}

// A failure has its Warning Event; no Event is recorded unless asked.
func TestEventOnFailure(t *testing.T) {
	for _, c := range []struct {
		events bool
		want   []string
	}{
		{true, []string{ReasonApplyStarted + " Normal", ReasonApplyFailed + " Warning"}},
		{false, nil},
	} {
		o := behindHost()
		o.InstallExitCode = func(host.Build) int { return exitInstallFailed }
		h := newHarness(t, newMachine(o), requestedR1(), revisionConfigMap(revisionR1()))
		opts := h.options()
		opts.Events = c.events
		h.start(opts)
		h.waitStatus(names.StatusFailed)
		eventually(t, "the failure's Events", func() bool { return len(h.events()) == len(c.want) })
		if got := h.events(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Events %v: events %v, want %v", c.events, got, c.want)
		}
		h.assertOnlyAgentWrites()
	}
}

// The containerd upgrade runs in a task outside the agent: the agent waits
// for its result, and reports a rollback as the failure it is.
func TestContainerdTaskRolledBack(t *testing.T) {
	o := compliantHost()
	o.Containerd = "1.7.20"
	o.RuntimeCrashLoops = true
	machine := newMachine(o)
	h := newHarness(t, machine, requestedR1(), revisionConfigMap(revisionR1()))
	h.start(h.options())
	n := h.waitStatus(names.StatusFailed)
	if msg := n[keyApplyMessage]; !strings.Contains(msg, "rolled back") {
		t.Errorf("message %q, want the rollback", msg)
	}
	if st, _ := machine.LoadState(); st.RuntimeUpgrades != 1 {
		t.Errorf("containerd upgrades started = %d, want 1 (a rollback is not retried)", st.RuntimeUpgrades)
	}
}

func TestContainerdTaskRunningIsWaitedFor(t *testing.T) {
	o := compliantHost()
	o.Containerd = "1.7.20"
	o.TasksNeverRun = true
	machine := newMachine(o)
	h := newHarness(t, machine, requestedR1(), revisionConfigMap(revisionR1()))
	opts := h.options()
	opts.HNSInterval = 2 * time.Millisecond // the wait's next look
	h.start(opts)
	eventually(t, "the agent to wait for the task", func() bool {
		return strings.Contains(h.value(keyApplyMessage), "being installed by scheduled task")
	})
	before := h.passes.Load()
	h.waitPasses(before + 5)
	if st, _ := machine.LoadState(); st.RuntimeUpgrades != 1 {
		t.Errorf("containerd upgrades started = %d while the task runs, want 1", st.RuntimeUpgrades)
	}
	if got := h.value(keyApplyStatus); got != string(names.StatusApplying) {
		t.Errorf("status %q while the task runs, want Applying", got)
	}
}

// A servicing task Task Scheduler accepts but whose program never starts
// (antivirus, App Control, a battery condition) fails the node within the
// grace, with Task Scheduler's last result, not at the install's 3-hour cap.
func TestAServicingTaskThatNeverStartsFailsTheNode(t *testing.T) {
	o := behindHost()
	o.TasksNeverRun = true
	machine := newMachine(o)
	h := newHarness(t, machine, requestedR1(), revisionConfigMap(revisionR1()))
	opts := h.options()
	opts.TaskStartGrace = 300 * time.Millisecond
	opts.HNSInterval = 20 * time.Millisecond // the wait's next look
	h.start(opts)
	n := h.waitStatus(names.StatusFailed)
	if msg := n[keyApplyMessage]; !strings.Contains(msg, "has not started within") || !strings.Contains(msg, "0x41303") {
		t.Errorf("message %q, want the task not started and its last result", msg)
	}
	if m := machine.Machine(); m.Reboots != 0 || m.Build != behindHost().Build {
		t.Errorf("machine %+v: nothing may have happened", m)
	}
}

// On a host whose UPS reports battery power, Task Scheduler starts no task
// whose conditions forbid it (the schema's default): the agent's servicing
// task is defined to start anyway, and installs.
func TestTheServicingTaskStartsOnBatteryPower(t *testing.T) {
	o := behindHost()
	o.OnBattery = true
	machine := installUntilReboot(t, o, func(opts *Options) { opts.TaskStartGrace = 2 * time.Second })
	if m := machine.Machine(); m.Installs != 1 {
		t.Errorf("machine %+v, want one install", m)
	}
}

// WSUS answering 503 to the first download, then Windows Update busy at the
// next install: each costs an attempt and a wait that doubles, and the
// third attempt installs; the node is never failed for either.
func TestTransientWindowsUpdateFailuresAreWaitedOutWithinTheAttempts(t *testing.T) {
	o := behindHost()
	o.Catalogue.Busy, o.Catalogue.Unavailable = true, true
	waits := twoTransientWaits(t, o)
	if !strings.Contains(waits[0], "0x80244022") || !strings.Contains(waits[0], "trying again 100ms") ||
		!strings.Contains(waits[1], "0x80240009") || !strings.Contains(waits[1], "trying again 200ms") {
		t.Errorf("waits reported %q, want 0x80244022 after 100ms, then 0x80240009 after 200ms", waits)
	}
}

// Windows Update's methods throw as COM does (0x80020009, the HRESULT in
// EXCEPINFO): a WSUS timeout in the install's search, then the installer
// taken by Automatic Updates, are each waited out like a result code.
func TestThrownWindowsUpdateFailuresAreJudgedByTheirOwnCode(t *testing.T) {
	o := behindHost()
	o.Catalogue.Throws = true
	if waits := twoTransientWaits(t, o); !strings.Contains(waits[0], "0x8024401C") || !strings.Contains(waits[1], "0x80240016") {
		t.Errorf("waits reported %q, want 0x8024401C, then 0x80240016", waits)
	}
}

// twoTransientWaits installs on a machine of o whose first two attempts
// fail transiently, and returns the two waits the agent reported (the
// test fails unless the third attempt installs).
func twoTransientWaits(t *testing.T, o machineOptions) []string {
	t.Helper()
	var h *harness
	machine := installUntilReboot(t, o, func(opts *Options) {
		opts.MaxAttempts = 3
		opts.TransientRetryAfter = 100 * time.Millisecond
		opts.HNSInterval = 20 * time.Millisecond // the wait's next look
	}, &h)
	if m := machine.Machine(); m.Installs != 3 {
		t.Errorf("machine %+v, want three installs (two transient failures, then the update)", m)
	}
	var waits []string
	for _, r := range h.reportsWritten() {
		if strings.Contains(r, "trying again") {
			waits = append(waits, r)
		}
	}
	if len(waits) != 2 {
		t.Fatalf("waits reported %q, want two", waits)
	}
	return waits
}

// installUntilReboot runs the agent on a machine of o, r1 requested, with
// the options tune sets, until the machine reboots for the install (it
// fails the test if it does not, or for another reason); h, when given,
// receives the harness.
func installUntilReboot(t *testing.T, o machineOptions, tune func(*Options), h ...**harness) *testMachine {
	t.Helper()
	rebooted := make(chan string, 1)
	o.OnReboot = func(reason string) { rebooted <- reason }
	machine := newMachine(o)
	hs := newHarness(t, machine, requestedR1(), revisionConfigMap(revisionR1()))
	for _, p := range h {
		*p = hs
	}
	opts := hs.options()
	tune(&opts)
	hs.start(opts)
	select {
	case reason := <-rebooted:
		if reason != decide.ReasonInstallAsked {
			t.Errorf("rebooted for %q, want the install's reboot", reason)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no reboot; node says %s: %q", hs.value(keyApplyStatus), hs.value(keyApplyMessage))
	}
	return machine
}

// A message past the API server's limit would lose the Event: it is cut,
// at a character, and says so.
func TestAnEventMessagePastTheLimitIsCutAtACharacter(t *testing.T) {
	if got := eventNote("short"); got != "short" {
		t.Errorf("short: %q", got)
	}
	long := strings.Repeat("é", 700) // 1,400 bytes
	got := eventNote(long)
	if len(got) > eventNoteLimit || !utf8.ValidString(got) || !strings.HasSuffix(got, " …") {
		t.Errorf("cut to %d bytes, valid %v: %q", len(got), utf8.ValidString(got), got[len(got)-10:])
	}
}
