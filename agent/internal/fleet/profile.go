package fleet

import (
	"fmt"

	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/host/fake"
)

// Profile is how the simulated machines were built (--host-profile): the
// node image a real pool runs, with the services named and wrapped the way
// that image installs them.
type Profile string

const (
	// ProfileKind is the plain fake: containerd as a native service, no CSI
	// Proxy on the host (winpool's DaemonSet runs it).
	ProfileKind Profile = "kind"
	// ProfileAKS is an AKS Windows node: containerd and kubelet under NSSM,
	// containerd a vendor build (1.7.x+azure), and CSI Proxy installed as
	// the host service "csi-proxy", also under NSSM, whose binary carries no
	// version.
	ProfileAKS Profile = "aks"
	// ProfileOnPrem is a node built by the upstream instructions: upstream
	// containerd registered with `containerd --register-service`, and CSI
	// Proxy as the service "csiproxy" created with sc.exe.
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

// shape installs the profile's services on a machine.
func (p Profile) shape(o *fake.Options) {
	switch p {
	case ProfileAKS:
		o.RuntimeService = host.Service{Name: "containerd", Wrapper: host.WrapperNSSM, Program: `C:\Program Files\containerd\containerd.exe`, Running: true}
		o.CSIProxyHost = &host.CSIProxyHost{
			Service: host.Service{Name: "csi-proxy", Wrapper: host.WrapperNSSM, Program: `C:\k\csi-proxy.exe`, Running: true},
			Version: "unknown", PipesAnswer: true,
		}
		o.CSIProxyVersion = "unknown"
	case ProfileOnPrem:
		o.RuntimeService = host.Service{Name: "containerd", Program: `C:\Program Files\containerd\bin\containerd.exe`, Running: true}
		o.CSIProxyHost = &host.CSIProxyHost{
			Service: host.Service{Name: "csiproxy", Program: `C:\etc\kubernetes\node\bin\csi-proxy.exe`, Running: true},
			Version: "unknown", PipesAnswer: true,
		}
		o.CSIProxyVersion = "unknown"
	default:
		o.RuntimeService = host.Service{Name: "containerd", Program: `C:\Program Files\containerd\bin\containerd.exe`, Running: true}
	}
}
