package agent

import (
	"strings"
	"testing"
	"time"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"

	corev1 "k8s.io/api/core/v1"
)

// undoingR1 is a node the operator started again, cordoned and drained, to
// take r1's cumulative update off (a health gate held it in its soak).
func undoingR1() *corev1.Node {
	n := requestedR1()
	n.Annotations[names.AnnUndo] = "win-pods"
	return n
}

// An undo start takes the cumulative update the node runs off with DISM in
// the servicing task, reboots, and reports success once the node runs the
// build below it; nothing is installed.
func TestAnUndoTakesTheCumulativeUpdateOffAndRebootsOntoTheBuildBelow(t *testing.T) {
	rebooted := make(chan string, 1)
	o := compliantHost()
	o.EarlierRollups = []host.Build{mustBuild("10.0.20348.2700")}
	o.OnReboot = func(reason string) { rebooted <- reason }
	machine := newMachine(o)
	h := newHarness(t, machine, undoingR1(), revisionConfigMap(revisionR1()))
	first := h.start(h.options())
	select {
	case reason := <-rebooted:
		if reason != decide.ReasonUndo {
			t.Errorf("rebooted for %q, want %q", reason, decide.ReasonUndo)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no reboot; node says %q", h.value(keyApplyMessage))
	}
	first.stop(t)
	if got := machine.CompleteReboot(); got != mustBuild("10.0.20348.2700") {
		t.Fatalf("the machine booted %s, want the build below the one taken off", got)
	}
	h.start(h.options())
	n := h.waitStatus(names.StatusSucceeded)
	if msg := n[keyApplyMessage]; !strings.Contains(msg, "took the cumulative update of build 10.0.20348.2762 off") || !strings.Contains(msg, "10.0.20348.2700") {
		t.Errorf("report says %q", msg)
	}
	if got := machine.Updates(); len(got) != 1 || !got[0].Undo || got[0].Target != mustBuild("10.0.20348.2762") {
		t.Errorf("the host was asked %+v, want one removal of 2762", got)
	}
	if m := machine.Machine(); m.Undos != 1 || m.Reboots != 1 {
		t.Errorf("machine = %+v, want one removal, one reboot", m)
	}
}

// A cumulative update that cannot be removed (the component store was
// cleaned with /ResetBase) fails the node naming DISM's code and its log;
// the node is not rebooted.
func TestAnUpdateThatCannotBeTakenOffFailsNamingTheCodeAndTheLog(t *testing.T) {
	o := compliantHost()
	o.EarlierRollups = []host.Build{mustBuild("10.0.20348.2700")}
	o.Catalogue.Permanent = true
	machine := newMachine(o)
	h := newHarness(t, machine, undoingR1(), revisionConfigMap(revisionR1()))
	h.start(h.options())
	n := h.waitStatus(names.StatusFailed)
	if msg := n[keyApplyMessage]; !strings.Contains(msg, "0x800F0825") || !strings.Contains(msg, `C:\Windows\Logs\DISM\dism.log`) {
		t.Errorf("report says %q, want the code and the log", msg)
	}
	if m := machine.Machine(); m.Undos != 0 || m.Reboots != 0 || m.Build != mustBuild("10.0.20348.2762") {
		t.Errorf("machine = %+v, want nothing removed and no reboot", m)
	}
}
