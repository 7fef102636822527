package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/host/fakewin"
	"winpool.dev/agent/internal/names"
	"winpool.dev/agent/internal/operation"
	"winpool.dev/agent/internal/report"
)

const (
	testNamespace = "winpool-agents"
	testNode      = "win-0"
	testPool      = "win22"
	testVersion   = "v0.3.0"
	// testStart is the operator's winpool.dev/started-at on a started node.
	testStart = "2026-12-01T10:00:00Z"
)

var nodesResource = corev1.SchemeGroupVersion.WithResource("nodes")

func strp(s string) *string { return &s }

func mustBuild(s string) host.Build {
	b, err := host.ParseBuild(s)
	if err != nil {
		panic(err)
	}
	return b
}

// revision r1: patch 2762, containerd 1.7.22, overlay, CSI Proxy v1.1.3.
func revisionR1() config.Revision {
	return config.Revision{
		Revision:        "r1",
		Pool:            testPool,
		OSBuild:         20348,
		PatchLevel:      "10.0.20348.2762",
		RuntimeName:     "containerd",
		RuntimeVersion:  strp("1.7.22"),
		CNIMode:         "overlay",
		KubeProxyMode:   "winkernel",
		CSIProxyVersion: strp("v1.1.3"),
	}
}

func revisionConfigMap(c config.Revision) *corev1.ConfigMap {
	raw, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: names.ConfigMapName(c.Pool, c.Revision), Namespace: testNamespace},
		Data:       map[string]string{names.ConfigMapKey: string(raw)},
		Immutable:  ptr.To(true),
	}
}

func testNodeObject(labels, annotations map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: labels, Annotations: annotations}}
}

// requestedR1 is a node the operator started for r1: cordoned, drained, labelled,
// Applying, with the start it recorded.
func requestedR1() *corev1.Node {
	n := testNodeObject(map[string]string{names.LabelPool: testPool, names.LabelRevision: "r1", "kubernetes.io/os": "windows"},
		map[string]string{names.AnnState: names.StateApplying, names.AnnStartedAt: testStart})
	n.Spec.Unschedulable = true
	return n
}

// updatedR1 is a node the operator rolled to r1 and put back in service.
func updatedR1() *corev1.Node {
	return testNodeObject(map[string]string{names.LabelPool: testPool, names.LabelRevision: "r1", "kubernetes.io/os": "windows"},
		map[string]string{names.AnnState: "Updated"})
}

// behindHost is a machine one cumulative update behind r1, with an older
// containerd and no CSI Proxy.
func behindHost() machineOptions {
	return machineOptions{
		Options: fakewin.Options{Build: mustBuild("10.0.20348.2700"), Containerd: "1.7.20"},
		CNIMode: "overlay",
		HNS:     func() host.HNSCounts { return host.HNSCounts{LoadBalancers: 10, RemoteEndpoints: 20} },
	}
}

// compliantHost already runs r1.
func compliantHost() machineOptions {
	o := behindHost()
	o.Build = mustBuild("10.0.20348.2762")
	o.Containerd = "1.7.22"
	o.CSIProxyVersion = "v1.1.3"
	return o
}

type harness struct {
	t      *testing.T
	client *k8sfake.Clientset
	// dyn holds the agent's report.
	dyn  *dynamicfake.FakeDynamicClient
	host host.Host
	// seeded is the report stored before the agent ran (seedReport).
	seeded map[string]string
	passes atomic.Int64
	// rv is the last resourceVersion given to a Node write.
	rv atomic.Uint64
	// nodeWrites makes each of the test's Node edits one step, as etcd does.
	nodeWrites sync.Mutex
	// preflightDelay is the agent's wait before it judges a new target (nil: none).
	preflightDelay func() time.Duration
}

func newHarness(t *testing.T, h host.Host, objects ...runtime.Object) *harness {
	// Every stored Node has a resourceVersion, as on a real API server.
	for _, o := range objects {
		if n, ok := o.(*corev1.Node); ok && n.ResourceVersion == "" {
			n.ResourceVersion = "100"
		}
	}
	hs := &harness{t: t, client: k8sfake.NewClientset(objects...), dyn: newReportClient(), host: h}
	hs.rv.Store(100)
	for _, o := range objects {
		if n, ok := o.(*corev1.Node); ok {
			hs.writeOperation(n)
		}
	}
	return hs
}

func (h *harness) options() Options {
	return Options{
		NodeName:    testNode,
		Namespace:   testNamespace,
		Client:      h.client,
		Reports:     report.NewClient(h.dyn, testNamespace),
		Operations:  operation.NewClient(h.dyn, testNamespace),
		Host:        h.host,
		HNSInterval: time.Hour,
		MaxAttempts: 3,
		Version:     testVersion,
		Log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// running is an agent started by a test.
type running struct {
	cancel  context.CancelFunc
	done    chan error
	stopped sync.Once
}

func (h *harness) start(o Options) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	t := tuning{retryInitial: 2 * time.Millisecond, retryMax: 20 * time.Millisecond, recheck: 5 * time.Millisecond, passDone: func() { h.passes.Add(1) },
		preflightDelay: h.preflightDelay}
	go func() { r.done <- run(ctx, o, t) }()
	h.t.Cleanup(func() { r.stop(h.t) })
	return r
}

// stop cancels the agent and waits for Run to return.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.stopped.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("Run returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
	})
}

// returned: Run has returned (its result is then lost; call only to check
// that it has not).
func (r *running) returned() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// eventually polls cond until it holds or a generous deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitPasses waits until the agent has finished n more passes than now.
func (h *harness) waitPasses(n int64) {
	h.t.Helper()
	target := h.passes.Load() + n
	eventually(h.t, "the agent's passes", func() bool { return h.passes.Load() >= target })
}

func (h *harness) node() *corev1.Node {
	h.t.Helper()
	n, err := h.client.Tracker().Get(nodesResource, "", testNode)
	if err != nil {
		h.t.Fatalf("get node: %v", err)
	}
	return n.(*corev1.Node)
}

// waitStatus waits for the report's apply status, and returns the report's values.
func (h *harness) waitStatus(status names.ApplyStatus) map[string]string {
	h.t.Helper()
	eventually(h.t, "apply status "+string(status), func() bool {
		return h.value(keyApplyStatus) == string(status)
	})
	return h.reported()
}

// waitReboots waits until the agent has rebooted its (fake) host n times.
func (h *harness) waitReboots(n int) {
	h.t.Helper()
	eventually(h.t, fmt.Sprintf("%d reboot(s)", n), func() bool { return h.host.(*testMachine).Machine().Reboots >= n })
}

// operatorEdit changes the Node as the operator would, outside the agent's
// client actions: a read, then an update with that read's resourceVersion as
// its precondition, read and edited again after a conflict (client-go's
// RetryOnConflict), so an edit can neither undo nor be undone by a write that
// landed in between.
func (h *harness) operatorEdit(edit func(n *corev1.Node)) {
	h.t.Helper()
	for {
		n := h.node().DeepCopy()
		edit(n)
		if h.updateIfUnchanged(n) {
			return
		}
	}
}

// updateIfUnchanged writes n if the stored Node still has n's
// resourceVersion; false on a conflict.
func (h *harness) updateIfUnchanged(n *corev1.Node) bool {
	h.t.Helper()
	h.nodeWrites.Lock()
	defer h.nodeWrites.Unlock()
	if h.node().ResourceVersion != n.ResourceVersion {
		return false
	}
	n.ResourceVersion = strconv.FormatUint(h.rv.Add(1), 10)
	// The operation first, as the operator writes it before the Node patch.
	h.writeOperation(n)
	if err := h.client.Tracker().Update(nodesResource, n, "", metav1.UpdateOptions{FieldManager: "winpool-operator"}); err != nil {
		h.t.Fatalf("operator edit: %v", err)
	}
	return true
}

// forgeNode writes n as someone who may patch Nodes but no operation: a
// person, a label syncer, the node's own kubelet credential.
func (h *harness) forgeNode(edit func(n *corev1.Node)) {
	h.t.Helper()
	h.nodeWrites.Lock()
	defer h.nodeWrites.Unlock()
	n := h.node().DeepCopy()
	edit(n)
	n.ResourceVersion = strconv.FormatUint(h.rv.Add(1), 10)
	if err := h.client.Tracker().Update(nodesResource, n, "", metav1.UpdateOptions{FieldManager: "someone"}); err != nil {
		h.t.Fatalf("forged edit: %v", err)
	}
}

// writeOperation plays the operator's WindowsNodeOperation for the start
// the Node's winpool annotations record (the operator writes both): the
// tests speak of starts in the Node's terms, the agent reads the operation.
// A node cordoned for the start counts as drained by winpool.
func (h *harness) writeOperation(n *corev1.Node) {
	h.t.Helper()
	started := n.Annotations[names.AnnStartedAt]
	if started == "" || n.Labels[names.LabelRevision] == "" {
		return
	}
	status := map[string]any{"phase": n.Annotations[names.AnnState]}
	if n.Spec.Unschedulable {
		status["drainedAt"] = started
	}
	spec := map[string]any{"nodeName": n.Name, "nodeUid": string(n.UID), "pool": n.Labels[names.LabelPool], "poolGeneration": int64(1),
		"revision": n.Labels[names.LabelRevision], "action": "Update", "startedAt": started,
		"installBudget": n.Annotations[names.AnnInstallBudget], "undoGate": n.Annotations[names.AnnUndo]}
	name := n.Name + "." + strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, started)
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "winpool.dev/v1alpha1", "kind": "WindowsNodeOperation",
		"metadata": map[string]any{"name": name, "namespace": testNamespace}, "spec": spec, "status": status}}
	err := h.dyn.Tracker().Update(operation.Resource, obj, testNamespace)
	if apierrors.IsNotFound(err) {
		err = h.dyn.Tracker().Create(operation.Resource, obj, testNamespace)
	}
	if err != nil {
		h.t.Fatalf("operation: %v", err)
	}
}

// assertEvent checks a create the agent made is an Event about its own Node
// in "default", where a Node's Events live.
func (h *harness) assertEvent(a k8stesting.Action) {
	h.t.Helper()
	c, ok := a.(k8stesting.CreateActionImpl)
	ev, isEvent := c.GetObject().(*corev1.Event)
	if !ok || !isEvent || a.GetNamespace() != metav1.NamespaceDefault {
		h.t.Errorf("the agent created %s in %q", a.GetResource().Resource, a.GetNamespace())
		return
	}
	if ev.InvolvedObject.Kind != "Node" || ev.InvolvedObject.Name != testNode {
		h.t.Errorf("the agent recorded an Event about %s %s", ev.InvolvedObject.Kind, ev.InvolvedObject.Name)
	}
}

// events are the reasons of the Events the agent recorded, in order.
func (h *harness) events() []string {
	var out []string
	for _, a := range h.client.Actions() {
		if c, ok := a.(k8stesting.CreateActionImpl); ok {
			if ev, ok := c.GetObject().(*corev1.Event); ok {
				// The API server refuses an Event about a cluster-scoped
				// object anywhere but in "default" (422: involvedObject.namespace
				// does not match event.namespace); this fake clientset does not.
				if c.GetNamespace() != metav1.NamespaceDefault || ev.Namespace != metav1.NamespaceDefault {
					out = append(out, "in namespace "+c.GetNamespace()+": "+ev.Reason)
					continue
				}
				out = append(out, ev.Reason+" "+ev.Type)
			}
		}
	}
	return out
}

// addCSIProxyPod creates (or replaces) a pod of winpool's CSI Proxy
// DaemonSet on the node, Running, its container ready or not yet.
func (h *harness) addCSIProxyPod(name, image string, ready bool) {
	h.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, Labels: map[string]string{"app.kubernetes.io/name": "winpool-csi-proxy"}},
		Spec:       corev1.PodSpec{NodeName: testNode, Containers: []corev1.Container{{Name: "csi-proxy", Image: image}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "csi-proxy", Image: image, Ready: ready, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		}}},
	}
	// Through the tracker: the test plays the DaemonSet controller and the
	// kubelet, and those writes are not the agent's.
	podsResource := corev1.SchemeGroupVersion.WithResource("pods")
	if _, err := h.client.Tracker().Get(podsResource, testNamespace, name); err == nil {
		if err := h.client.Tracker().Update(podsResource, pod, testNamespace); err != nil {
			h.t.Fatal(err)
		}
		return
	}
	if err := h.client.Tracker().Add(pod); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) deletePod(name string) {
	h.t.Helper()
	if err := h.client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), testNamespace, name); err != nil {
		h.t.Fatal(err)
	}
}
