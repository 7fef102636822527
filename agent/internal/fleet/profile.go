package fleet

import (
	"fmt"

	"winpool.dev/agent/internal/hns"
	"winpool.dev/agent/internal/host/fakewin"
)

// Profile is how the simulated machines were built (--host-profile): the
// node image a real pool runs, with the services named, placed and wrapped
// the way that image installs them, and kube-proxy's HNS network named as
// that image's CNI names it.
type Profile string

const (
	// ProfileKind is a node built by sig-windows-tools' PrepareNode.ps1
	// with flannel: containerd and kubelet as native services (containerd
	// --register-service, the kubelet via nssm-less sc.exe), no CSI Proxy
	// on the host (winpool's DaemonSet runs it); flannel's network is
	// "vxlan0" (overlay) or "cbr0" (host-gw, l2bridge).
	ProfileKind Profile = "kind"
	// ProfileAKS is an AKS Windows node (Azure AgentBaker's
	// windowscsehelper.ps1 and kubeletstart.ps1): containerd, kubelet,
	// kubeproxy and csi-proxy under NSSM (C:\k\nssm.exe), kubeproxy
	// depending on kubelet, containerd a vendor build (1.7.x+azure) in
	// C:\Program Files\containerd, a csi-proxy.exe without a version
	// resource, and Azure CNI's "azure" network.
	ProfileAKS Profile = "aks"
	// ProfileOnPrem is a node built by the upstream instructions: upstream
	// containerd registered with `containerd --register-service` under
	// C:\Program Files\containerd\bin, and CSI Proxy as the service
	// "csiproxy" created with sc.exe (kubernetes-csi/csi-proxy's README),
	// on flannel.
	ProfileOnPrem Profile = "onprem"
)

var knownProfiles = []Profile{ProfileKind, ProfileAKS, ProfileOnPrem}

func parseProfile(s string) (Profile, error) {
	for _, p := range knownProfiles {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("want kind, aks or onprem, got %q", s)
}

// containerdSuffix is the vendor metadata the profile's kubelets report
// after the version ("" keeps what --containerd says).
func (p Profile) containerdSuffix(given string) (string, error) {
	switch {
	case p == ProfileAKS && given == "":
		return "+azure", nil
	case p == ProfileOnPrem && given != "":
		return "", fmt.Errorf("--host-profile onprem runs upstream containerd: drop %q from --containerd", given)
	}
	return given, nil
}

// shape installs the profile's services on a machine, and names the HNS
// network of cni ("overlay" or "l2bridge"; "": none yet).
func (p Profile) shape(o *fakewin.Options, cni string) {
	kubelet := []string{"containerd"}
	switch p {
	case ProfileAKS:
		o.Services = []fakewin.Service{
			{Name: "containerd", Program: `Program Files\containerd\containerd.exe`, NSSM: true},
			{Name: "kubelet", Program: `k\kubelet.exe`, NSSM: true, DependsOn: kubelet},
			{Name: "kubeproxy", Program: `k\kube-proxy.exe`, NSSM: true, DependsOn: []string{"kubelet"}},
			{Name: "csi-proxy", Program: `k\csi-proxy.exe`, NSSM: true},
		}
		o.Network = network("azure", cni)
	case ProfileOnPrem:
		o.Services = []fakewin.Service{
			{Name: "containerd", Program: `Program Files\containerd\bin\containerd.exe`},
			{Name: "kubelet", Program: `k\kubelet.exe`, DependsOn: kubelet},
			{Name: "kube-proxy", Program: `k\kube-proxy.exe`, DependsOn: []string{"kubelet"}},
			{Name: "csiproxy", Program: `etc\kubernetes\node\bin\csi-proxy.exe`},
		}
		o.Network = flannel(cni)
	default:
		o.Services = []fakewin.Service{
			{Name: "containerd", Program: `Program Files\containerd\bin\containerd.exe`},
			{Name: "kubelet", Program: `k\kubelet.exe`, DependsOn: kubelet},
		}
		o.Network = flannel(cni)
	}
}

// flannel names its network by backend: vxlan0 for vxlan (overlay), cbr0
// for host-gw (l2bridge).
func flannel(cni string) hns.Network {
	if cni == "l2bridge" {
		return network("cbr0", cni)
	}
	return network("vxlan0", cni)
}

// network is an HNS network of that name in the mode cni, as hcn types it.
func network(name, cni string) hns.Network {
	switch cni {
	case "overlay":
		return hns.Network{Name: name, Type: "Overlay"}
	case "l2bridge":
		return hns.Network{Name: name, Type: "L2Bridge"}
	}
	return hns.Network{}
}
