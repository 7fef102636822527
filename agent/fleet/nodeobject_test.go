package fleet

import (
	"io"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"winpool.dev/agent/internal/host"
)

func settings(t *testing.T, args ...string) *Settings {
	t.Helper()
	s, err := ParseSettings(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return &s
}

func TestNodesLookLikeWindowsServerNodes(t *testing.T) {
	s := settings(t, "--labels", "pool=a", "--containerd", "1.7.20+azure")
	n := newNode(s, 4)
	for k, v := range map[string]string{
		"kubernetes.io/os": "windows", "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": "win-4",
		LabelWindowsBuild: "10.0.20348", "node.kubernetes.io/instance-type": "Standard_D4s_v5",
		"topology.kubernetes.io/region": "westeurope", "topology.kubernetes.io/zone": "westeurope-2", "pool": "a",
	} {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if n.Annotations[AnnKwokNode] != "fake" {
		t.Error("kwok would not manage the node")
	}
	info := n.Status.NodeInfo
	if info.OperatingSystem != "windows" || info.Architecture != "amd64" || info.OSImage != "Windows Server 2022 Datacenter" ||
		info.KernelVersion != "10.0.20348.2700" || info.ContainerRuntimeVersion != "containerd://1.7.20+azure" ||
		info.KubeletVersion != "v1.36.3" || info.KubeProxyVersion != "" {
		t.Errorf("nodeInfo: %+v", info)
	}
	if info.BootID == "" || info.MachineID == "" || info.SystemUUID == "" || newNode(s, 4).Status.NodeInfo.BootID == info.BootID {
		t.Errorf("machine identity missing or not random: %+v", info)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		c, a := n.Status.Capacity[r], n.Status.Allocatable[r]
		if a.Cmp(c) >= 0 {
			t.Errorf("%s: allocatable %s not below capacity %s", r, a.String(), c.String())
		}
	}
	var ip, hostname string
	for _, a := range n.Status.Addresses {
		switch a.Type {
		case corev1.NodeInternalIP:
			ip = a.Address
		case corev1.NodeHostName:
			hostname = a.Address
		}
	}
	if ip == "" || hostname != "win-4" {
		t.Errorf("addresses: %+v", n.Status.Addresses)
	}
	// Registered NotReady: becoming Ready is the kubelet's (kwok's) first act.
	if len(n.Status.Conditions) != 1 || n.Status.Conditions[0].Status != corev1.ConditionFalse {
		t.Errorf("conditions: %+v", n.Status.Conditions)
	}
}

func TestInternalIPsAreDistinctInAFleet(t *testing.T) {
	seen := map[string]int{}
	for i := range 5000 {
		ip := internalIP("win-", i)
		if j, dup := seen[ip]; dup {
			t.Fatalf("nodes %d and %d share %s", j, i, ip)
		}
		seen[ip] = i
		if !strings.HasPrefix(ip, "10.") {
			t.Fatalf("%s is outside 10.240.0.0/12", ip)
		}
	}
}

// A restarted fleet continues with the machines its nodes describe.
func TestAdoptedNodesSeedTheMachine(t *testing.T) {
	s := settings(t)
	n := newNode(s, 0)
	n.Status.NodeInfo.KernelVersion = "10.0.20348.2762"
	n.Status.NodeInfo.ContainerRuntimeVersion = "containerd://1.7.22+azure"
	n.Status.Conditions = []corev1.NodeCondition{readyCondition(false, ShuttingDown)}
	m, notes := machineOf(n, s, "l2bridge")
	want := machine{
		build: host.Build{Major: 10, Build: 20348, UBR: 2762}, containerd: "1.7.22", suffix: "+azure",
		cni: "l2bridge", bootID: n.Status.NodeInfo.BootID, rebooting: true,
	}
	if m != want || len(notes) != 0 {
		t.Errorf("got %+v %v, want %+v", m, notes, want)
	}

	n.Status.NodeInfo.KernelVersion = "5.15.0"
	n.Status.NodeInfo.ContainerRuntimeVersion = "docker://20.10"
	m, notes = machineOf(n, s, "")
	if m.build != s.Build || m.containerd != s.Containerd || len(notes) != 2 {
		t.Errorf("a node that is no Windows machine falls back to the flags and says so: %+v %v", m, notes)
	}
}

// A fleet restarted mid-reboot finds the reboot in the node's Ready
// condition, as its informer keeps it.
func TestAdoptionSeesAReboot(t *testing.T) {
	s := settings(t)
	n := newNode(s, 0)
	n.Status.Conditions = []corev1.NodeCondition{readyCondition(false, ShuttingDown)}
	slim, _ := slimNode(s.NamePrefix)(n)
	if m, _ := machineOf(slim.(*corev1.Node), s, ""); !m.rebooting {
		t.Errorf("a node shutting down is adopted as rebooting: %+v", slim)
	}
	n.Status.Conditions = []corev1.NodeCondition{readyCondition(false, "container runtime status check may not have completed yet")}
	slim, _ = slimNode(s.NamePrefix)(n)
	if m, _ := machineOf(slim.(*corev1.Node), s, ""); m.rebooting {
		t.Errorf("a node not Ready for another reason is not rebooting: %+v", slim)
	}
}
