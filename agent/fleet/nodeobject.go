package fleet

import (
	"context"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"winpool.dev/agent/internal/host"
)

const (
	// AnnKwokNode makes kwok manage a node (hack/cluster.sh runs kwok for
	// nodes carrying it only).
	AnnKwokNode = "kwok.x-k8s.io/node"
	// ShuttingDown is the Ready condition's message a kubelet posts when its
	// machine shuts down (graceful node shutdown); the fleet posts it when a
	// simulated machine goes down for a reboot, and kwok's stages leave a
	// node that shows it alone until the kubelet is back
	// (hack/kwok-stages.yaml). A status write, as on a real node: no
	// annotation only the simulator would write.
	ShuttingDown = "node is shutting down"
	// LabelSimFail: a node labelled "true" fails every update install.
	LabelSimFail = "winpool.dev/sim-fail"
	// LabelWindowsBuild is set by the kubelet on Windows nodes: 10.0.<build>.
	LabelWindowsBuild = "node.kubernetes.io/windows-build"

	kubeletVersion = "v1.36.3"
	instanceType   = "Standard_D4s_v5"
	region         = "westeurope"
)

var osImages = map[int]string{
	17763: "Windows Server 2019 Datacenter",
	20348: "Windows Server 2022 Datacenter",
	26100: "Windows Server 2025 Datacenter",
}

// newNode is the fleet's i-th node as a Windows Server kubelet on an Azure
// D4s_v5 VM registers it: not Ready yet (kwok's node-initialize plays the
// kubelet becoming Ready), the machine's identity in nodeInfo.
func newNode(s *Settings, i int) *corev1.Node {
	name := s.NodeName(i)
	labels := map[string]string{}
	for k, v := range s.Labels {
		labels[k] = v
	}
	zone := fmt.Sprintf("%s-%d", region, i%3+1)
	for k, v := range map[string]string{
		"kubernetes.io/os":                 "windows",
		"kubernetes.io/arch":               "amd64",
		"kubernetes.io/hostname":           name,
		LabelWindowsBuild:                  fmt.Sprintf("%d.%d.%d", s.Build.Major, s.Build.Minor, s.Build.Build),
		"node.kubernetes.io/instance-type": instanceType,
		"topology.kubernetes.io/region":    region,
		"topology.kubernetes.io/zone":      zone,
	} {
		labels[k] = v
	}
	machineID := uuid.New()
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: labels,
			Annotations: map[string]string{
				AnnKwokNode:                    "fake",
				"node.alpha.kubernetes.io/ttl": "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			},
		},
		Status: corev1.NodeStatus{
			// The system reserve (kube-reserved, system-reserved, eviction
			// threshold) is what makes allocatable smaller than capacity.
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:              resource.MustParse("4"),
				corev1.ResourceMemory:           resource.MustParse("16776692Ki"),
				corev1.ResourceEphemeralStorage: resource.MustParse("133703676Ki"),
				corev1.ResourcePods:             resource.MustParse("110"),
			},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:              resource.MustParse("3860m"),
				corev1.ResourceMemory:           resource.MustParse("12787188Ki"),
				corev1.ResourceEphemeralStorage: resource.MustParse("123220852076"),
				corev1.ResourcePods:             resource.MustParse("110"),
			},
			Conditions: []corev1.NodeCondition{{
				Type:               corev1.NodeReady,
				Status:             corev1.ConditionFalse,
				Reason:             "KubeletNotReady",
				Message:            "container runtime status check may not have completed yet",
				LastHeartbeatTime:  metav1.Now(),
				LastTransitionTime: metav1.Now(),
			}},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: internalIP(s.NamePrefix, i)},
				{Type: corev1.NodeHostName, Address: name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               hex.EncodeToString(machineID[:]),
				SystemUUID:              strings.ToUpper(uuid.NewString()),
				BootID:                  uuid.NewString(),
				KernelVersion:           s.Build.String(),
				OSImage:                 osImages[s.Build.Build],
				ContainerRuntimeVersion: runtimeVersion(s.Containerd, s.ContainerdSuffix),
				KubeletVersion:          kubeletVersion,
				// Left empty, as kubelets do since 1.33.
				KubeProxyVersion: "",
				OperatingSystem:  "windows",
				Architecture:     "amd64",
			},
		},
	}
}

// internalIP gives each node its own address in 10.240.0.0/12: 13 bits of
// index under 7 bits of the name prefix, so that fleets running side by side
// (tests do) rarely share one.
func internalIP(prefix string, i int) string {
	h := fnv.New32a()
	h.Write([]byte(prefix))
	n := (h.Sum32()%128)<<13 | uint32(i%8192)
	return fmt.Sprintf("10.%d.%d.%d", 240+n>>16, n>>8&0xff, n&0xff)
}

func runtimeVersion(containerd, suffix string) string {
	return "containerd://" + containerd + suffix
}

// machine is what a node tells of the machine behind it, to boot a simulated
// one that continues where the last left off (the fleet restarted).
type machine struct {
	uid        types.UID // the Node's
	build      host.Build
	containerd string
	suffix     string
	cni        string
	csiProxy   string
	bootID     string
	rebooting  bool
	// booted is when the machine last booted, as far as the fleet knows:
	// now for a node it just registered, zero (long ago) for one it adopts.
	booted time.Time
}

// machineOf reads a node the fleet finds existing, and the CNI mode its
// agent reported ("" none). What they do not say comes from the command line.
func machineOf(n *corev1.Node, s *Settings, reportedCNI string) (machine, []string) {
	m := machine{
		uid:        n.UID,
		build:      s.Build,
		containerd: s.Containerd,
		suffix:     s.ContainerdSuffix,
		cni:        s.CNIMode,
		bootID:     n.Status.NodeInfo.BootID,
	}
	var notes []string
	if b, err := host.ParseBuild(n.Status.NodeInfo.KernelVersion); err == nil {
		m.build = b
	} else {
		notes = append(notes, fmt.Sprintf("kernelVersion %q is no Windows build, using %s", n.Status.NodeInfo.KernelVersion, s.Build))
	}
	if v, ok := strings.CutPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "containerd://"); ok {
		if c, suffix, err := splitContainerd(v); err == nil {
			m.containerd, m.suffix = c, suffix
		}
	} else {
		notes = append(notes, fmt.Sprintf("containerRuntimeVersion %q is no containerd, using %s", n.Status.NodeInfo.ContainerRuntimeVersion, s.Containerd))
	}
	// The agent's report is what it observed on the machine.
	if reportedCNI != "" {
		m.cni = reportedCNI
	}
	// No csiproxy host service: CSI Proxy runs as winpool's DaemonSet pod on
	// the node (kwok runs it), which the agent finds itself, so the version it
	// reported is not the machine's.
	m.rebooting = shuttingDown(n)
	return m, notes
}

// shuttingDown: the node's kubelet went down for a reboot and is not back.
func shuttingDown(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status != corev1.ConditionTrue && c.Message == ShuttingDown
		}
	}
	return false
}

// reportedCNIs is the CNI mode each node's agent last reported, for the
// machines of a restarted fleet (none when the reports cannot be read).
func (f *Fleet) reportedCNIs(ctx context.Context) map[string]string {
	out := map[string]string{}
	if f.reports == nil {
		return out
	}
	rs, err := f.reports.List(ctx)
	if err != nil {
		f.log.Warn("cannot read the agents' reports; machines take the --cni mode", "err", err)
		return out
	}
	for _, r := range rs {
		if o := r.Status.Observed; o != nil {
			out[r.Name] = o.CNIMode
		}
	}
	return out
}

// reportedCNI is the CNI mode node's agent last reported ("" none).
func (f *Fleet) reportedCNI(node string) string {
	if f.reports == nil {
		return ""
	}
	r, err := f.reports.Get(f.ctx, node)
	if err != nil || r.Status.Observed == nil {
		return ""
	}
	return r.Status.Observed.CNIMode
}
