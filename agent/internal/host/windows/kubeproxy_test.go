package windows

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"winpool.dev/agent/internal/host"
)

// kube-proxy is restarted under the name the node image gave its service
// (AKS's kubeproxy, EKS's and sig-windows-tools' kube-proxy): stopped and
// waited for, started and waited for, nothing else controlled. A host with
// no such service (rke2, kube-proxy in a pod) is told apart, and a restart
// that dies names its exit code.
func TestKubeProxyIsRestartedUnderTheNameTheImageGaveIt(t *testing.T) {
	ctx := context.Background()
	running := func() *fakeService {
		return &fakeService{imagePath: `C:\k\nssm.exe`, states: []ServiceStatus{status(ServiceRunning)},
			onStop:  []ServiceStatus{status(ServiceStopPending), status(ServiceStopped)},
			onStart: []ServiceStatus{status(ServiceStartPending), status(ServiceRunning)}}
	}
	for _, name := range []string{"kubeproxy", "kube-proxy"} {
		sys := newFakeSystem()
		sys.services[name] = running()
		sys.services["kubelet"] = &fakeService{imagePath: `C:\k\kubelet.exe`, states: []ServiceStatus{status(ServiceRunning)}}
		h := &Host{m: Machine{System: sys}}
		got, err := h.RestartKubeProxy(ctx)
		if err != nil || got != name {
			t.Fatalf("%s: restarted %q, %v", name, got, err)
		}
		controls := slices.DeleteFunc(slices.Clone(sys.calls), func(c string) bool {
			return !strings.HasPrefix(c, "stop ") && !strings.HasPrefix(c, "start ")
		})
		if !slices.Equal(controls, []string{"stop " + name, "start " + name}) {
			t.Errorf("%s: controls %q, want a stop and a start of %s alone", name, controls, name)
		}
		if st, _ := sys.QueryService(name); st.State != ServiceRunning {
			t.Errorf("%s: %v after the restart", name, st.State)
		}
	}

	sys := newFakeSystem()
	sys.services["rke2"] = running()
	h := &Host{m: Machine{System: sys}}
	if _, err := h.RestartKubeProxy(ctx); !errors.Is(err, host.ErrNoKubeProxyService) {
		t.Errorf("no kube-proxy service: %v", err)
	}
	if slices.ContainsFunc(sys.calls, func(c string) bool { return strings.HasPrefix(c, "stop ") }) {
		t.Errorf("nothing is stopped on a host without a kube-proxy service: %q", sys.calls)
	}

	sys = newFakeSystem()
	dies := running()
	dies.onStart = []ServiceStatus{status(ServiceStartPending), {State: ServiceStopped, Win32ExitCode: 1067}}
	sys.services["kube-proxy"] = dies
	h = &Host{m: Machine{System: sys}}
	if _, err := h.RestartKubeProxy(ctx); err == nil || !strings.Contains(err.Error(), "exit code 1067") {
		t.Errorf("a kube-proxy that dies on start: %v", err)
	}
}
