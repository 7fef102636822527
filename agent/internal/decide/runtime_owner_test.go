package decide

import (
	"testing"

	"winpool.dev/agent/internal/host"
)

func TestANodeImageOwnsVendorBuildsAndWrappedRuntimesUnlessThePoolSaysInPlace(t *testing.T) {
	nssm := host.Service{Name: "containerd", Wrapper: host.WrapperNSSM, Running: true}
	plain := host.Service{Name: "containerd", Running: true}
	rke2 := host.Service{Name: "rke2", Wrapper: host.WrapperParent, Running: true}
	for _, c := range []struct {
		mode, version string
		service       host.Service
		owned         bool
	}{
		{"", "1.7.20+azure", nssm, true},
		{"", "1.7.20+azure", plain, true},
		{"", "1.7.20-eks.1", plain, true},
		{"", "1.7.20", nssm, true},
		{"", "1.7.20", plain, false},
		{"", "1.7.22-rc.1", plain, false},
		{"", "", host.Service{}, false},
		{RuntimeInPlace, "1.7.20+azure", nssm, false},
		{RuntimeVerifyOnly, "1.7.20", plain, true},
		{"", "1.7.27-k3s1", rke2, true},
		// InPlace does not make RKE2's containerd the agent's to replace.
		{RuntimeInPlace, "1.7.27-k3s1", rke2, true},
		{RuntimeInPlace, "1.7.27", rke2, true},
	} {
		got := ImageOwnsRuntime(c.mode, host.Observed{ContainerdVersion: c.version, RuntimeService: c.service})
		if (got != "") != c.owned {
			t.Errorf("mode %q, containerd %q, service %+v: %q, want owned %v", c.mode, c.version, c.service, got, c.owned)
		}
	}
}

func TestAWrappedRuntimeIsNotReplacedButFailsNamingTheSetting(t *testing.T) {
	in := patched()
	in.Observed.ContainerdVersion = "1.7.20"
	in.Observed.RuntimeService = host.Service{Name: "containerd", Wrapper: host.WrapperNSSM, Running: true}
	check(t, Next(in), want{action: Report, status: "Failed", state: host.State{Revision: "r1"},
		message: []string{"containerd 1.7.20 is not replaced with 1.7.22", "containerd (nssm)", "runtime.upgrade: InPlace"}})
	in.Config.Config.RuntimeUpgrade = RuntimeInPlace
	if s := Next(in); s.Action != UpgradeContainerd {
		t.Errorf("with InPlace: %v, want UpgradeContainerd", s.Action)
	}
}

func TestAContainerdRKE2RunsIsNeverReplacedEvenInPlace(t *testing.T) {
	in := patched()
	in.Observed.ContainerdVersion = "1.7.27-k3s1"
	in.Observed.RuntimeService = host.Service{Name: "rke2", Wrapper: host.WrapperParent, Running: true}
	in.Config.Config.RuntimeUpgrade = RuntimeInPlace
	check(t, Next(in), want{action: Report, status: "Failed", state: host.State{Revision: "r1"},
		message: []string{"containerd 1.7.27-k3s1 is not replaced with 1.7.22", "child of the rke2 service", "upgrade RKE2", "runtime.version"}})
}
