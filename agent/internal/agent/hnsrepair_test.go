package agent

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"winpool.dev/agent/internal/names"
	"winpool.dev/agent/internal/report"
)

// askedToRepair is a member in service, in boot, that the operator asked to
// restart kube-proxy in boot ask.
func askedToRepair(boot, ask string) *corev1.Node {
	n := updatedR1()
	n.Status.NodeInfo.BootID = boot
	if ask != "" {
		n.Annotations[names.AnnHNSRepair] = ask
	}
	return n
}

// The operator's ask for the node's current boot restarts kube-proxy's
// service once, reported with the boot and an Event; the ask standing, an
// agent restart or an ask for another boot restarts nothing more, and an ask
// for the next boot restarts it again.
func TestKubeProxyIsRestartedOncePerBootTheOperatorAsksFor(t *testing.T) {
	o := compliantHost()
	o.KubeProxy = "kubeproxy"
	machine := newMachine(o)
	h := newHarness(t, machine, askedToRepair("boot-1", "boot-1"), revisionConfigMap(revisionR1()))
	opts := h.options()
	opts.Events, opts.HNSInterval = true, 20*time.Millisecond // ticks keep passes coming
	restarted := func() time.Time { return machine.Machine().KubeProxyStarted }
	repair := func() *report.HNSRepair {
		if r := h.storedReport(); r != nil {
			return r.Status.HNSRepair
		}
		return nil
	}
	first := h.start(opts)
	eventually(t, "the restart reported", func() bool { return repair() != nil })
	r := repair()
	if r.BootID != "boot-1" || r.Result != report.RepairRestarted || r.Service != "kubeproxy" || restarted().IsZero() {
		t.Fatalf("reported %+v, kube-proxy started at %v", r, restarted())
	}
	if !machine.m.Running("kubeproxy") {
		t.Error("kube-proxy runs after its restart")
	}
	if ev := h.events(); !slices.Contains(ev, ReasonKubeProxyRestarted+" Normal") {
		t.Errorf("events %q", ev)
	}
	at := restarted()

	// The ask stands while the operator writes the node: no second restart.
	h.operatorEdit(func(n *corev1.Node) { n.Annotations[names.AnnStateSince] = "2026-12-05T00:00:00Z" })
	h.waitPasses(2)
	first.stop(t)
	second := h.start(opts)
	h.waitPasses(2)
	if !restarted().Equal(at) {
		t.Errorf("restarted again in the same boot (at %v, then %v)", at, restarted())
	}

	// Rebooted: an ask for the boot before is no ask.
	h.operatorEdit(func(n *corev1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	h.waitPasses(2)
	if !restarted().Equal(at) {
		t.Errorf("restarted for an ask of another boot")
	}
	h.operatorEdit(func(n *corev1.Node) { n.Annotations[names.AnnHNSRepair] = "boot-2" })
	eventually(t, "a restart in the new boot", func() bool { r := repair(); return r != nil && r.BootID == "boot-2" })
	if !restarted().After(at) {
		t.Errorf("kube-proxy restarted at %v, before at %v", restarted(), at)
	}
	second.stop(t)
}

// Where kube-proxy runs in a HostProcess pod, the ask ends its process; the
// kubelet starts the container again and the restart is reported, once. A
// host where kube-proxy is no service of its own nor a pod's reports the ask
// Unsupported, with a Warning, and stops nothing.
func TestKubeProxyInAPodIsRestartedAndElsewhereUnsupported(t *testing.T) {
	for _, c := range []struct {
		inPod   bool
		result  report.RepairResult
		service string
		event   string
	}{
		{true, report.RepairRestarted, "kube-proxy.exe in its pod", ReasonKubeProxyRestarted + " Normal"},
		{false, report.RepairUnsupported, "", ReasonKubeProxyRestartFailed + " Warning"},
	} {
		o := compliantHost()
		o.KubeProxyInPod = c.inPod
		machine := newMachine(o)
		h := newHarness(t, machine, askedToRepair("boot-1", "boot-1"), revisionConfigMap(revisionR1()))
		opts := h.options()
		opts.Events = true
		h.start(opts)
		eventually(t, "the ask answered", func() bool { r := h.storedReport(); return r != nil && r.Status.HNSRepair != nil })
		r := h.storedReport().Status.HNSRepair
		if r.Result != c.result || (!c.inPod && r.Message == "") || !strings.Contains(r.Service, c.service) || machine.Machine().KubeProxyStarted.IsZero() == c.inPod {
			t.Errorf("in a pod %v: reported %+v, kube-proxy started at %v; want %s", c.inPod, r, machine.Machine().KubeProxyStarted, c.result)
		}
		if ev := h.events(); !slices.Contains(ev, c.event) {
			t.Errorf("in a pod %v: events %q", c.inPod, ev)
		}
		if !machine.m.Running("kubelet") || !machine.m.Running("containerd") {
			t.Errorf("in a pod %v: something else was stopped", c.inPod)
		}
	}
}
