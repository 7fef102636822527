package fleet

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"winpool.dev/agent/fleet/hnsmodel"
	"winpool.dev/agent/internal/host"
)

// windowsNode is a Windows node someone else registers with the fleet's
// prefix, as tests/support windows_node does.
func windowsNode(s *Settings, name string, uid types.UID) *corev1.Node {
	n := newNode(s, 0)
	n.Name, n.UID = name, uid
	n.Labels["kubernetes.io/hostname"] = name
	n.Status.NodeInfo.KernelVersion = "10.0.20348.2582"
	n.Status.NodeInfo.ContainerRuntimeVersion = "containerd://1.7.22+azure"
	n.Status.NodeInfo.BootID = "boot-" + name
	return n
}

func runningAgentPod(name, node string, uid types.UID) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "winpool-agents", Name: name, UID: uid,
			Labels: map[string]string{"app.kubernetes.io/name": "winpool-agent"}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// trackNodes gives the test fleet's HNS model the fleet's own tracking.
func trackNodes(f *Fleet) {
	f.model = hnsmodel.New(func(node string) bool { return f.nodes.get(node) != nil })
	f.retrack = newRetracker(f.model)
	go f.retrack.run(f.ctx)
}

// A Windows node with the fleet's prefix added while the fleet runs is
// adopted as one found at start (the machine its nodeInfo describes, HNS
// tracking its own endpoints) and its agent runs while its agent pod does,
// whether the pod was seen before the node or after. Deleted, it is
// forgotten: its agent stops, HNS no longer tracks it, and its pod's events
// start nothing.
func TestNodesAddedAndDeletedWhileRunning(t *testing.T) {
	f, cs, j := testFleet(t)
	trackNodes(f)
	ctx := context.Background()
	// A Service with one endpoint on win-extra-0 and one elsewhere.
	f.model.SetService(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports:      []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	})
	port, pname, proto, on := int32(8080), "http", corev1.ProtocolTCP, "win-extra-0"
	f.model.SetSlice(&discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{discovery.LabelServiceName: "web"}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: &pname, Port: &port, Protocol: &proto}},
		Endpoints:   []discovery.Endpoint{{Addresses: []string{"10.244.1.1"}, NodeName: &on}, {Addresses: []string{"10.244.1.2"}}},
	})
	untracked := host.HNSCounts{LoadBalancers: 1, RemoteEndpoints: 3} // both endpoints and the VIP
	tracked := host.HNSCounts{LoadBalancers: 1, RemoteEndpoints: 2}   // its own endpoint is local
	if got := f.model.Counts("win-extra-0", true); got != untracked {
		t.Fatalf("before adoption: %+v", got)
	}

	// win-extra-0's pod is there before the node; win-extra-1's comes after.
	for _, p := range []*corev1.Pod{runningAgentPod("agent-0", "win-0", "uid-0"), runningAgentPod("agent-x0", "win-extra-0", "uid-x0")} {
		if _, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.watchAgentPods(f.ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.watchNodes(f.ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "win-0's agent to start", func() bool { return j.count("agent start win-0") == 1 })

	other := newNode(f.s, 0)
	other.Name, other.UID = "linux-like-0", "uid-other" // not the fleet's prefix
	for _, n := range []*corev1.Node{windowsNode(f.s, "win-extra-0", "node-x0"), windowsNode(f.s, "win-extra-1", "node-x1"), other} {
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "win-extra-0 adopted and its agent started", func() bool {
		return f.nodes.get("win-extra-0") != nil && j.count("agent start win-extra-0") == 1
	})
	eventually(t, "win-extra-1 adopted", func() bool { return f.nodes.get("win-extra-1") != nil })
	if _, err := cs.CoreV1().Pods("winpool-agents").Create(ctx, runningAgentPod("agent-x1", "win-extra-1", "uid-x1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "win-extra-1's agent to start", func() bool { return j.count("agent start win-extra-1") == 1 })
	if f.nodes.get("linux-like-0") != nil || f.nodes.len() != 3 {
		t.Errorf("the fleet plays %d nodes, linux-like-0 among them: %v", f.nodes.len(), f.nodes.get("linux-like-0") != nil)
	}

	n := f.nodes.get("win-extra-0")
	m := n.host.Stats()
	n.mu.Lock()
	reported := n.reported
	n.mu.Unlock()
	if want := (host.Build{Major: 10, Build: 20348, UBR: 2582}); m.Build != want || m.Containerd != "1.7.22" || n.uid != "node-x0" ||
		reported != (nodeInfo{KernelVersion: "10.0.20348.2582", ContainerRuntimeVersion: "containerd://1.7.22+azure", BootID: "boot-win-extra-0"}) {
		t.Errorf("machine not seeded from the node: build %s containerd %s uid %s, reported %+v", m.Build, m.Containerd, n.uid, reported)
	}
	eventually(t, "HNS to track win-extra-0", func() bool { c, _ := n.hns(); return c == tracked })
	tokens := slices.ContainsFunc(j.all(), func(e string) bool {
		return e == "token for winpool-agents/winpool-agent token Pod agent-x0 uid=uid-x0 3600s"
	})
	if !tokens {
		t.Errorf("no token bound to win-extra-0's agent pod: %v", j.all())
	}

	if err := cs.CoreV1().Nodes().Delete(ctx, "win-extra-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "win-extra-0 forgotten and its agent stopped", func() bool {
		return f.nodes.get("win-extra-0") == nil && j.count("agent stop win-extra-0") == 1
	})
	eventually(t, "HNS to forget win-extra-0", func() bool { return f.model.Counts("win-extra-0", true) == untracked })
	if n.ctx.Err() == nil {
		t.Error("the forgotten node's context is still live")
	}
	// Its pod, replaced by the DaemonSet before the deletion reached it,
	// starts nothing.
	f.podChanged(runningAgentPod("agent-x0b", "win-extra-0", "uid-x0b"))
	n.podRunning("agent-x0b", "uid-x0b", nil)
	if got := j.count("agent start win-extra-0"); got != 1 {
		t.Errorf("a forgotten node's agent started again (%d starts)", got)
	}
	if j.count("agent stop win-0") != 0 || j.count("agent stop win-extra-1") != 0 {
		t.Errorf("other nodes' agents stopped: %v", j.all())
	}
}

// A node the fleet played at start that is gone once the node watch has
// synced (deleted meanwhile) is forgotten.
func TestNodesGoneAtStartAreForgotten(t *testing.T) {
	f, _, _ := testFleet(t)
	m, _ := machineOf(newNode(f.s, 1), f.s, "")
	n, err := newSimNode(f, "win-1", m)
	if err != nil {
		t.Fatal(err)
	}
	f.nodes.add(n)
	if err := f.watchNodes(f.ctx); err != nil {
		t.Fatal(err)
	}
	if f.nodes.get("win-1") != nil || f.nodes.get("win-0") == nil {
		t.Errorf("win-1 (gone) kept: %v, win-0 (there) kept: %v", f.nodes.get("win-1") != nil, f.nodes.get("win-0") != nil)
	}
}

// A node deleted and created again under the same name while the watch was
// away (seen as an update with a new UID) is a new machine.
func TestAReplacedNodeIsANewMachine(t *testing.T) {
	f, _, j := testFleet(t)
	old := f.nodes.get("win-0")
	old.uid = "uid-a"
	old.podRunning("agent-a", "pod-a", nil)
	eventually(t, "the agent to start", func() bool { return j.count("agent start win-0") == 1 })

	f.nodeChanged(windowsNode(f.s, "win-0", "uid-a")) // an update of the same node
	if f.nodes.get("win-0") != old {
		t.Fatal("an update of a known node replaced its machine")
	}
	f.nodeChanged(windowsNode(f.s, "win-0", "uid-b"))
	eventually(t, "the old machine's agent to stop", func() bool { return j.count("agent stop win-0") == 1 })
	n := f.nodes.get("win-0")
	if n == nil || n == old || n.uid != "uid-b" || n.host.Stats().Build.UBR != 2582 {
		t.Errorf("win-0 not adopted anew: %+v", n)
	}
	f.nodeDeleted(windowsNode(f.s, "win-0", "uid-a")) // the old node's deletion, seen late
	if f.nodes.get("win-0") != n {
		t.Error("the old node's deletion forgot the new one")
	}
}

// Two agent pods on one node (the DaemonSet controller created a second
// after two deletions in a row, and an API server restart): the node runs
// the agent of the oldest, which the controller keeps, whichever it sees
// first, and deleting the newer one stops nothing. The chaos soak (seed 12,
// 1 run in 6) saw the node follow the newer pod, stop its agent when the
// controller deleted it, and stand Applying with no agent until nodeTimeout.
func TestANodeRunsTheAgentOfItsOldestPod(t *testing.T) {
	f, cs, j := testFleet(t)
	ctx := context.Background()
	if err := f.watchAgentPods(f.ctx); err != nil {
		t.Fatal(err)
	}
	pods := cs.CoreV1().Pods("winpool-agents")
	at := func(p *corev1.Pod, sec int) *corev1.Pod {
		p.CreationTimestamp = metav1.NewTime(time.Date(2026, 12, 5, 17, 37, sec, 0, time.UTC))
		return p
	}
	kept := at(runningAgentPod("agent-kept", "win-0", "uid-kept"), 43)
	extra := at(runningAgentPod("agent-extra", "win-0", "uid-extra"), 44)
	if _, err := pods.Create(ctx, kept, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the kept pod's agent to start", func() bool { return j.count("agent start win-0") == 1 })
	if _, err := pods.Create(ctx, extra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the extra pod seen", func() bool { _, ok, _ := f.pods.GetByKey("winpool-agents/agent-extra"); return ok })
	if err := pods.Delete(ctx, "agent-extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the extra pod's deletion seen", func() bool { _, ok, _ := f.pods.GetByKey("winpool-agents/agent-extra"); return !ok })
	n := f.nodes.get("win-0")
	n.mu.Lock()
	following := n.pod
	n.mu.Unlock()
	if following == nil || following.uid != "uid-kept" || j.count("agent start win-0") != 1 || j.count("agent stop win-0") != 0 {
		t.Fatalf("following %+v after the extra pod came and went; journal %v", following, j.all())
	}
	// The kept pod deleted while a newer one runs: the newer one's agent runs.
	if _, err := pods.Create(ctx, at(runningAgentPod("agent-newer", "win-0", "uid-newer"), 50), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "agent-kept", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the newer pod's agent to start", func() bool { return j.count("agent start win-0") == 2 })
	if err := pods.Delete(ctx, "agent-newer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "no pod, no agent", func() bool { return j.count("agent stop win-0") == 2 })
}
