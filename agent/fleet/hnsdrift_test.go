package fleet

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"winpool.dev/agent/fleet/hnsmodel"
	"winpool.dev/agent/internal/host"
)

// services gives the model k Services of one port with one endpoint each:
// k load balancers, k remote endpoints (plus k ClusterIPs on overlay).
func services(m *hnsmodel.Model, k int) {
	port, name, proto := int32(8080), "http", corev1.ProtocolTCP
	for i := range k {
		svc := fmt.Sprintf("s%d", i)
		ip := fmt.Sprintf("10.96.1.%d", i+1)
		m.SetService(&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: svc},
			Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
		})
		m.SetSlice(&discovery.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: svc + "-1", Labels: map[string]string{discovery.LabelServiceName: svc}},
			AddressType: discovery.AddressTypeIPv4,
			Ports:       []discovery.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
			Endpoints:   []discovery.Endpoint{{Addresses: []string{fmt.Sprintf("10.244.2.%d", i+1)}}},
		})
	}
}

// Each HNS fault strikes once the node's HNS caught up and --hns-fault-after
// passed, records when, and lasts until the node boots again: a collapse keeps
// a handful, a restart starts the catch-up over, a deletion loses a tenth of
// the load balancers. Before its time, and on a node without it, HNS holds
// everything.
func TestHNSFaultsStrikeOnceCaughtUpAndLastUntilABoot(t *testing.T) {
	full := host.HNSCounts{LoadBalancers: 20, RemoteEndpoints: 40} // overlay: 20 endpoints, 20 ClusterIPs
	for _, tc := range []struct {
		fault string
		want  host.HNSCounts
	}{
		{"hns-collapse", host.HNSCounts{LoadBalancers: 3, RemoteEndpoints: 3}},
		{"hns-restart", host.HNSCounts{}},
		{"lb-deleted", host.HNSCounts{LoadBalancers: 18, RemoteEndpoints: 40}},
		{"read-errors", full},
	} {
		f, _, _ := testFleet(t, "--host-faults", tc.fault, "--hns-fault-after", "0s", "--hns-sync-time", "100s")
		n := f.nodes.get("win-0")
		services(f.model, 20)
		if got, _ := n.hns(); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.fault, got, tc.want)
		}
		n.mu.Lock()
		if n.hnsFaultAt.IsZero() != (tc.want == full) {
			t.Errorf("%s: struck at %v", tc.fault, n.hnsFaultAt)
		}
		// Struck two hours ago, rebooted one hour ago: long caught up again.
		n.hnsFaultAt, n.bootedAt = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
		n.mu.Unlock()
		if got, _ := n.hns(); got != full {
			t.Errorf("%s: a boot after the fault rebuilds HNS: got %+v, want %+v", tc.fault, got, full)
		}
	}
	f, _, _ := testFleet(t, "--host-faults", "hns-collapse", "--hns-fault-after", "1h")
	services(f.model, 20)
	if got, _ := f.nodes.get("win-0").hns(); got != full {
		t.Errorf("before --hns-fault-after: got %+v, want %+v", got, full)
	}
}

// A restart of kube-proxy's service (what the agent does when the operator
// asks for hns.repair) ends the fault: HNS climbs back to full over a full
// sync. A node without a kube-proxy service (the kind image) keeps it.
func TestAKubeProxyRestartRecoversADriftedHNS(t *testing.T) {
	full := host.HNSCounts{LoadBalancers: 20, RemoteEndpoints: 40}
	f, _, _ := testFleet(t, "--host-profile", "onprem", "--host-faults", "hns-collapse", "--hns-fault-after", "0s",
		"--hns-sync-time", "1ms", "--hns-cost-scale", "0")
	n := f.nodes.get("win-0")
	services(f.model, 20)
	if got, _ := n.hns(); got == full {
		t.Fatalf("the collapse struck: got %+v", got)
	}
	sys := n.host.OS().System
	if err := sys.StopService("kube-proxy"); err != nil {
		t.Fatal(err)
	}
	if err := sys.StartService("kube-proxy"); err != nil {
		t.Fatal(err)
	}
	if got, _ := n.hns(); got.LoadBalancers >= full.LoadBalancers {
		t.Errorf("at once after kube-proxy's restart, before its full sync: got %+v", got)
	}
	m := n.host.Stats()
	time.Sleep(n.fullSync(m.Build, full) + 20*time.Millisecond)
	if got, _ := n.hns(); got != full {
		t.Errorf("after kube-proxy's restart: got %+v, want %+v", got, full)
	}
	n.mu.Lock()
	if n.hnsFaultAt.IsZero() {
		t.Error("the fault is still on record")
	}
	n.mu.Unlock()
}
