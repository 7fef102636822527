package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"winpool.dev/agent/fleet/hnsmodel"
	"winpool.dev/agent/internal/agent"
	"winpool.dev/agent/internal/host"
)

// journal is what happened, in order: the agent starting and stopping, the
// kubelet's Ready reports, token requests.
type journal struct {
	mu     sync.Mutex
	events []string
}

func (j *journal) add(format string, a ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, fmt.Sprintf(format, a...))
}

func (j *journal) all() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.events)
}

func (j *journal) count(prefix string) int {
	n := 0
	for _, e := range j.all() {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testFleet is a fleet of one node, win-0, on a fake API whose token
// requests and Ready reports go to the journal, with agent.Run replaced by a
// stand-in that records its life.
func testFleet(t *testing.T, args ...string) (*Fleet, *kfake.Clientset, *journal) {
	t.Helper()
	s := settings(t, append([]string{"--apply-time", "0s", "--reboot-time", "0.05s"}, args...)...)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	node := newNode(s, 0)
	node.Status.Conditions[0].Status = corev1.ConditionTrue
	cs := kfake.NewClientset(node)
	j := &journal{}
	tokens := 0
	cs.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		req := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest)
		ref := req.Spec.BoundObjectRef
		j.add("token for %s/%s %s %s %s uid=%s %ds", a.GetNamespace(), a.(k8stesting.CreateActionImpl).Name, a.GetSubresource(),
			ref.Kind, ref.Name, ref.UID, *req.Spec.ExpirationSeconds)
		tokens++
		return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{
			Token: fmt.Sprintf("token-%d", tokens), ExpirationTimestamp: metav1.NewTime(time.Now().Add(time.Hour)),
		}}, nil
	})
	cs.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		var body struct {
			Metadata struct{ Annotations map[string]*string }    `json:"metadata"`
			Status   struct{ Conditions []corev1.NodeCondition } `json:"status"`
		}
		_ = json.Unmarshal(a.(k8stesting.PatchAction).GetPatch(), &body)
		for _, c := range body.Status.Conditions {
			j.add("kubelet Ready=%s %s", c.Status, c.Reason)
		}
		if len(body.Metadata.Annotations) > 0 {
			j.add("kubelet annotations %v", body.Metadata.Annotations)
		}
		return false, nil, nil
	})
	f := &Fleet{
		s: s, log: slog.New(slog.NewTextHandler(io.Discard, nil)), ctx: ctx, admin: cs,
		kubelet: &kubelet{client: cs}, failures: newFailures(s), clients: &agentClients{host: "https://unused"},
		model: hnsmodel.New(nil), programming: hnsmodel.NewProgramming(1, nil), dir: t.TempDir(), started: time.Now(),
		runAgent: func(ctx context.Context, o agent.Options) error {
			j.add("agent start %s", o.NodeName)
			<-ctx.Done()
			j.add("agent stop %s", o.NodeName)
			return nil
		},
	}
	m, _ := machineOf(node, s, "")
	n, err := newSimNode(f, "win-0", m)
	if err != nil {
		t.Fatal(err)
	}
	f.nodes.add(n)
	return f, cs, j
}

func getNode(t *testing.T, cs *kfake.Clientset) *corev1.Node {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), "win-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func ready(n *corev1.Node) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	return corev1.NodeCondition{}
}

// The agent follows its pod: it starts with a token bound to the pod, and a
// new pod (new UID) is a new agent with a new token.
func TestAgentsFollowTheirPods(t *testing.T) {
	f, _, j := testFleet(t)
	n := f.nodes.get("win-0")
	n.podRunning("agent-a", "uid-a", nil)
	eventually(t, "the agent to start", func() bool { return j.count("agent start") == 1 })
	n.mu.Lock()
	token, run := n.pod.token, n.run
	n.mu.Unlock()
	n.podRunning("agent-a", "uid-a", nil) // a status update of the same pod
	n.mu.Lock()
	if n.pod.token != token || n.run != run {
		t.Error("an update of the running pod restarted its agent")
	}
	n.mu.Unlock()
	n.podRunning("agent-b", "uid-b", nil) // the DaemonSet replaced the pod
	eventually(t, "the agent to restart", func() bool { return j.count("agent start") == 2 })
	n.noPod() // no pod runs any more
	eventually(t, "the agent to stop", func() bool { return j.count("agent stop") == 2 })
	want := []string{
		"token for winpool-agents/winpool-agent token Pod agent-a uid=uid-a 3600s",
		"agent start win-0",
		"agent stop win-0",
		"token for winpool-agents/winpool-agent token Pod agent-b uid=uid-b 3600s",
		"agent start win-0",
		"agent stop win-0",
	}
	got := j.all()
	// The old agent's stop and the new pod's token request race.
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A reboot stops the agent, shows the node NotReady, boots the staged update
// with a new boot ID, shows it Ready again, sets its pods Ready and starts the
// agent again under the same pod and token.
func TestRebootIsPlayedLikeAKubelet(t *testing.T) {
	f, cs, j := testFleet(t, "--hns-sync-time", "100s")
	n := f.nodes.get("win-0")
	serviceWithTwoEndpoints(f.model)
	if got, _ := n.hns(); got.LoadBalancers != 1 {
		t.Fatalf("before the reboot HNS holds everything: %+v", got)
	}
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-1"},
		Spec:       corev1.PodSpec{NodeName: "win-0"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionFalse}, // the node lifecycle controller's doing
		}},
	}
	if _, err := cs.CoreV1().Pods("apps").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bootBefore := getNode(t, cs).Status.NodeInfo.BootID
	n.podRunning("agent-a", "uid-a", nil)
	eventually(t, "the agent to start", func() bool { return j.count("agent start") == 1 })

	target := host.Build{Major: 10, Build: 20348, UBR: 2762}
	if err := n.agentHost.StartUpdate(ctx, host.UpdateRequest{Revision: "r1", Attempt: 1, Target: target}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the servicing task to end", func() bool {
		obs, _ := n.agentHost.Observe(ctx)
		return obs.UpdateTask != nil && obs.UpdateTask.Phase == host.UpdateDone
	})
	if obs, _ := n.agentHost.Observe(ctx); obs.UpdateTask.Result.ExitCode != 3010 {
		t.Fatalf("install: %+v", obs.UpdateTask)
	}
	if err := n.agentHost.Reboot(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the agent to start after the reboot", func() bool { return j.count("agent start") == 2 })

	want := []string{
		"token for winpool-agents/winpool-agent token Pod agent-a uid=uid-a 3600s",
		"agent start win-0",
		"agent stop win-0",
		"kubelet Ready=False KubeletNotReady",
		"kubelet Ready=True KubeletReady",
		"agent start win-0",
	}
	if got := j.all(); !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	node := getNode(t, cs)
	if node.Status.NodeInfo.KernelVersion != target.String() || node.Status.NodeInfo.BootID == bootBefore ||
		node.Status.NodeInfo.BootID == "" || ready(node).Status != corev1.ConditionTrue || shuttingDown(node) {
		t.Errorf("after the reboot: nodeInfo %+v, Ready %+v, annotations %v", node.Status.NodeInfo, ready(node), node.Annotations)
	}
	if got, _ := n.hns(); got.LoadBalancers != 0 {
		t.Errorf("HNS starts empty after a boot: %+v", got)
	}
	eventually(t, "the node's pods Ready again", func() bool {
		p, _ := cs.CoreV1().Pods("apps").Get(ctx, "web-1", metav1.GetOptions{})
		return podReady(p)
	})
}

// Containerd upgraded in place: the kubelet reports the new runtime, with the
// vendor's suffix the node had.
func TestInPlaceChangesAreReported(t *testing.T) {
	f, cs, _ := testFleet(t, "--containerd", "1.7.20+azure")
	n := f.nodes.get("win-0")
	if err := n.agentHost.UpgradeContainerd(context.Background(), host.RuntimeRequest{Version: "1.7.22"}); err != nil {
		t.Fatal(err)
	}
	// The swap task runs on its own (and proves the runtime for a while);
	// the kubelet notices the change when the fleet next looks, as it polls.
	eventually(t, "the new runtime reported", func() bool {
		n.reportChanges()
		return getNode(t, cs).Status.NodeInfo.ContainerRuntimeVersion == "containerd://1.7.22+azure"
	})
	// The task goes on proving the runtime, then writes its result: the test
	// ends after it, or the write lands in a removed temporary folder.
	eventually(t, "the swap task's end", func() bool {
		obs, err := n.agentHost.Observe(context.Background())
		return err == nil && obs.RuntimeUpgrade != nil && obs.RuntimeUpgrade.Phase == host.RuntimeSucceeded
	})
}

func TestHNSCatchesUpAfterABoot(t *testing.T) {
	full := host.HNSCounts{LoadBalancers: 100, RemoteEndpoints: 1000}
	for _, tc := range []struct {
		since time.Duration
		want  host.HNSCounts
	}{
		{0, host.HNSCounts{}},
		{time.Second, host.HNSCounts{LoadBalancers: 25, RemoteEndpoints: 250}},
		{4 * time.Second, full},
		{time.Hour, full},
	} {
		if got := catchUp(full, tc.since, 4*time.Second); got != tc.want {
			t.Errorf("%v after boot: got %+v, want %+v", tc.since, got, tc.want)
		}
	}
	// A node of a release catches up in that release's time: ltsc2019 takes
	// three times --hns-sync-time.
	f, _, _ := testFleet(t, "--os", "ltsc2019", "--build", "10.0.17763.6293", "--hns-sync-time", "100s")
	n := f.nodes.get("win-0")
	serviceWithTwoEndpoints(f.model)
	// Overlay: the two endpoints and the ClusterIP's own.
	want := host.HNSCounts{LoadBalancers: 1, RemoteEndpoints: 3}
	if got, _ := n.hns(); got != want {
		t.Errorf("a node up since before the fleet started holds everything: got %+v, want %+v", got, want)
	}
	for _, tc := range []struct {
		since time.Duration
		want  host.HNSCounts
	}{
		{150 * time.Second, host.HNSCounts{LoadBalancers: 0, RemoteEndpoints: 1}},
		{301 * time.Second, host.HNSCounts{LoadBalancers: 1, RemoteEndpoints: 3}},
	} {
		n.mu.Lock()
		n.bootedAt = time.Now().Add(-tc.since)
		n.mu.Unlock()
		if got, _ := n.hns(); got != tc.want {
			t.Errorf("ltsc2019, %v after boot: got %+v, want %+v", tc.since, got, tc.want)
		}
	}
}

// serviceWithTwoEndpoints: 1 load balancer; 2 remote endpoints, 3 on overlay.
func serviceWithTwoEndpoints(m *hnsmodel.Model) {
	m.SetService(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports:      []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	})
	port, name, proto := int32(8080), "http", corev1.ProtocolTCP
	m.SetSlice(&discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{discovery.LabelServiceName: "web"}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
		Endpoints:   []discovery.Endpoint{{Addresses: []string{"10.244.1.1"}}, {Addresses: []string{"10.244.1.2"}}},
	})
}

// kubelet-stale-kernel: the kubelet reads the build once per boot, as the
// Windows kubelet's winstats does when it starts. A hotpatch moves the
// host's build with no reboot; kernelVersion stays until the next boot.
func TestAStaleKernelKubeletReportsTheBuildOfItsBootUntilTheNext(t *testing.T) {
	for _, stale := range []bool{false, true} {
		args := []string{"--hotpatch", "enrolled", "--containerd", "1.7.20"}
		if stale {
			args = append(args, "--host-faults", "kubelet-stale-kernel")
		}
		f, cs, _ := testFleet(t, args...)
		n := f.nodes.get("win-0")
		ctx := context.Background()
		install := func(ubr int) {
			t.Helper()
			req := host.UpdateRequest{Revision: fmt.Sprint("r", ubr), Attempt: 1, Target: host.Build{Major: 10, Build: 20348, UBR: ubr}}
			if err := n.agentHost.StartUpdate(ctx, req); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the servicing task to end", func() bool {
				obs, _ := n.agentHost.Observe(ctx)
				return obs.UpdateTask != nil && obs.UpdateTask.Phase == host.UpdateDone && obs.UpdateTask.Revision == req.Revision
			})
		}
		install(2762) // the baseline: a reboot
		if err := n.agentHost.Reboot(ctx, "test"); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the baseline's build reported after the boot", func() bool {
			return getNode(t, cs).Status.NodeInfo.KernelVersion == "10.0.20348.2762"
		})
		install(2800) // a hotpatch: no reboot
		if b := n.host.Stats().Build.String(); b != "10.0.20348.2800" {
			t.Fatalf("stale %v: the hotpatch left the host at %s", stale, b)
		}
		// An in-place containerd upgrade makes the kubelet write: the write
		// that carries the new runtime carries the build it read too.
		if err := n.agentHost.UpgradeContainerd(ctx, host.RuntimeRequest{Version: "1.7.22"}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the new runtime reported", func() bool {
			n.reportChanges()
			return strings.HasPrefix(getNode(t, cs).Status.NodeInfo.ContainerRuntimeVersion, "containerd://1.7.22")
		})
		want := map[bool]string{false: "10.0.20348.2800", true: "10.0.20348.2762"}[stale]
		if got := getNode(t, cs).Status.NodeInfo.KernelVersion; got != want {
			t.Errorf("stale %v: kernelVersion %s after the hotpatch, want %s", stale, got, want)
		}
		eventually(t, "the swap task's end", func() bool {
			obs, err := n.agentHost.Observe(ctx)
			return err == nil && obs.RuntimeUpgrade != nil && obs.RuntimeUpgrade.Phase == host.RuntimeSucceeded
		})
	}
}
