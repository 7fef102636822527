package agent

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/names"
	"winpool.dev/agent/internal/report"
)

// targetConfigMap is c's revision ConfigMap as the operator marks its pool's
// target.
func targetConfigMap(c config.Revision) *corev1.ConfigMap {
	cm := revisionConfigMap(c)
	cm.Labels = map[string]string{names.LabelPool: c.Pool, names.LabelRevision: c.Revision, names.LabelTarget: "true"}
	return cm
}

// idleNode is a node of the pool that the operator has not started.
func idleNode() *corev1.Node {
	return testNodeObject(map[string]string{names.LabelPool: testPool, "kubernetes.io/os": "windows"}, nil)
}

func TestThePreflightOfThePoolsTargetRidesTheAgentsFirstReport(t *testing.T) {
	h := newHarness(t, newMachine(behindHost()), idleNode(), targetConfigMap(revisionR1()))
	h.start(h.options())
	eventually(t, "a preflight", func() bool { return h.value(keyPreflightRevision) == "r1" })

	if got := h.value(keyPreflight); got != "Ready" {
		t.Errorf("preflight %q, want Ready", got)
	}
	patches := h.reportChanges()
	if len(patches) != 1 {
		t.Fatalf("%d report writes, want the first report alone to carry the preflight: %v", len(patches), patches)
	}
	if v := patches[0][keyAgentVersion]; v == nil || *v != testVersion {
		t.Errorf("the preflight's write does not carry the agent's first report: %v", patches[0])
	}
	if h.value(keyApplyStatus) != "" {
		t.Errorf("a preflight touched the apply status: %q", h.value(keyApplyStatus))
	}
	h.assertOnlyAgentWrites()
}

// An update source the node cannot reach, or a WSUS that has not approved
// this month's cumulative update for the node (the preflight's search finds
// nothing the install would take), blocks the node, saying which source and
// why, or what is offered and what to approve, before anyone cordons it.
func TestAnUpdateSourceThatCannotServeTheUpdateBlocksThePreflight(t *testing.T) {
	for _, c := range []struct {
		name    string
		machine func(o *machineOptions)
		says    []string
	}{
		{"unreachable", func(o *machineOptions) { o.Unreachable = "dial tcp 10.1.2.3:8530: i/o timeout" },
			[]string{"Windows Update", "i/o timeout"}},
		{"not offered", func(o *machineOptions) { o.Catalogue.Unapproved = true },
			[]string{"Windows Update offers no servicing stack or cumulative update for this host", "KB890830", "approve the cumulative update that reaches 10.0.20348.2762"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := behindHost()
			c.machine(&o)
			fh := newMachine(o)
			h := newHarness(t, fh, idleNode(), targetConfigMap(revisionR1()))
			h.start(h.options())
			eventually(t, "a preflight", func() bool { return h.value(keyPreflightRevision) == "r1" })
			got := h.value(keyPreflight)
			if !strings.HasPrefix(got, "Blocked: ") {
				t.Errorf("preflight %q, want Blocked", got)
			}
			for _, want := range c.says {
				if !strings.Contains(got, want) {
					t.Errorf("preflight %q does not say %q", got, want)
				}
			}
			if m := fh.Machine(); m.Installs != 0 || m.Reboots != 0 {
				t.Errorf("a preflight changed the host: %d installs, %d reboots", m.Installs, m.Reboots)
			}
		})
	}
}

// A search slower than the agent waits for: no verdict until it answers
// (the operator holds the node meanwhile), then Ready, naming the KB the
// install will take; one search for the revision, however often it looks.
func TestThePreflightWaitsForTheWindowsUpdateSearch(t *testing.T) {
	o := behindHost()
	o.Catalogue.SearchTime = 3 * time.Second
	machine := newMachine(o)
	h := newHarness(t, machine, idleNode(), targetConfigMap(revisionR1()))
	h.start(h.options())
	eventually(t, "the agent's first report", func() bool { return h.value(keyAgentVersion) != "" })
	if got := h.value(keyPreflight); got != "" {
		t.Fatalf("a verdict %q before the search answered", got)
	}
	eventually(t, "a preflight", func() bool { return h.value(keyPreflightRevision) == "r1" })
	r := h.storedReport()
	if got := h.value(keyPreflight); got != "Ready" || r.Status.Preflight == nil || !strings.Contains(strings.Join(r.Status.Preflight.Notes, "\n"), "KB5050002") {
		t.Errorf("preflight %q, notes %v; want Ready naming KB5050002", got, r.Status.Preflight)
	}
	if n := machine.m.Stats().Searches; n != 1 {
		t.Errorf("%d Windows Update searches, want 1 for the revision", n)
	}
}

// A new target is judged at a moment of the agent's own (its delay), not
// the moment the mark moved, when every agent of the pool sees it.
func TestThePreflightFollowsThePoolsTarget(t *testing.T) {
	const delay = 300 * time.Millisecond
	r2 := revisionR1()
	r2.Revision, r2.PatchLevel = "r2", "10.0.20348.2800"
	h := newHarness(t, newMachine(behindHost()), idleNode(), targetConfigMap(revisionR1()))
	h.preflightDelay = func() time.Duration { return delay }
	var judged atomic.Int64
	record := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if s, ok := writtenSpec(h, a); ok && s.Preflight != nil && s.Preflight.Revision == "r2" {
			judged.CompareAndSwap(0, time.Now().UnixNano())
		}
		return false, nil, nil
	}
	h.dyn.PrependReactor("patch", "windowsnodereports", record)
	h.start(h.options())
	eventually(t, "a preflight of r1", func() bool { return h.value(keyPreflightRevision) == "r1" })

	// The operator moves the mark: r1 loses it, r2 is created with it.
	cms := h.client.CoreV1().ConfigMaps(testNamespace)
	old, err := cms.Get(context.Background(), names.ConfigMapName(testPool, "r1"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(old.Labels, names.LabelTarget)
	moved := time.Now()
	if _, err := cms.Update(context.Background(), old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(context.Background(), targetConfigMap(r2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a preflight of r2", func() bool { return h.value(keyPreflightRevision) == "r2" })
	if got := h.value(keyPreflight); got != "Ready" {
		t.Errorf("preflight %q, want Ready", got)
	}
	if after := time.Unix(0, judged.Load()).Sub(moved); after < delay {
		t.Errorf("r2's preflight was written %s after the mark moved, before the agent's delay of %s", after, delay)
	}
}

func TestANodeStartedWithTheTargetIsNotPreflighted(t *testing.T) {
	h := newHarness(t, newMachine(compliantHost()), requestedR1(), targetConfigMap(revisionR1()))
	h.start(h.options())
	h.waitStatus(names.StatusSucceeded)
	// A pass that starts after the report (a kubelet label moves) has run
	// any preflight there was to run and written it.
	before := h.passes.Load()
	h.operatorEdit(func(n *corev1.Node) { n.Labels["kubelet.example/seen"] = "1" })
	eventually(t, "a pass after the report", func() bool { return h.passes.Load() > before })
	for _, p := range h.reportChanges() {
		if _, ok := p[keyPreflight]; ok {
			t.Errorf("a node already asked for r1 was preflighted for it: %v", p)
		}
	}
}

func TestANodeTheOperatorFailedIsJudgedAgainAtOnce(t *testing.T) {
	fh := newMachine(behindHost())
	h := newHarness(t, fh, idleNode(), targetConfigMap(revisionR1()))
	h.start(h.options())
	eventually(t, "a preflight", func() bool { return h.value(keyPreflight) == "Ready" })
	// The host has changed since (well within preflightEvery), and the
	// operator failed the node: a retry must start on a fresh verdict.
	fh.SetSourceUnreachable("dial tcp: i/o timeout")
	h.operatorEdit(func(n *corev1.Node) {
		n.Annotations = map[string]string{names.AnnState: names.StateFailed, names.AnnStateSince: time.Now().Add(time.Second).UTC().Format(time.RFC3339)}
	})
	eventually(t, "the preflight judged again", func() bool {
		return strings.HasPrefix(h.value(keyPreflight), "Blocked: ")
	})
}

// An agent that restarts (a new pod, a reboot) judges the pending revision
// again at once, and an unchanged verdict is not written anew: it resumes the
// verdict its report holds, with the time it was first reached.
func TestARestartedAgentKeepsAnUnchangedVerdict(t *testing.T) {
	h := newHarness(t, newMachine(behindHost()), idleNode(), targetConfigMap(revisionR1()))
	reachedAt := metav1.NewTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	h.seedReportSpec(report.Status{AgentVersion: testVersion, Preflight: &report.Preflight{Revision: "r1", Verdict: report.VerdictReady, Since: &reachedAt}})
	// Ticks keep the passes coming.
	opts := h.options()
	opts.HNSInterval = 10 * time.Millisecond
	h.start(opts)
	h.waitPasses(5)
	for i, s := range h.reportWrites() {
		if p := s.Preflight; p == nil || p.Verdict != report.VerdictReady || p.Since == nil || !p.Since.Equal(&reachedAt) {
			t.Errorf("write %d carries the verdict %+v, want Ready since %s as it was", i, p, reachedAt)
		}
	}
}

// A node started with its pool's target needs no read of the revision
// ConfigMap: the agent already watches it, and a GET per start (and another
// after each reboot, by the restarted agent) is a read of etcd per node.
func TestTheTargetsConfigurationIsReadFromTheWatchNotWithAGet(t *testing.T) {
	o := behindHost()
	o.OnReboot = func(string) {}
	machine := newMachine(o)
	node := requestedR1()
	node.Status.NodeInfo.BootID = "boot-1"
	h := newHarness(t, machine, node, targetConfigMap(revisionR1()))
	first := h.start(h.options())
	h.waitReboots(1)
	first.stop(t)
	machine.CompleteReboot()
	h.operatorEdit(func(n *corev1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	h.addCSIProxyPod("csi-proxy-r1", "ghcr.io/kubernetes-sigs/sig-windows/csi-proxy:v1.1.3", true)
	h.start(h.options())
	h.waitStatus(names.StatusSucceeded)
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "configmaps" {
			t.Errorf("the agent read a ConfigMap with GET: %v", a)
		}
	}
}
