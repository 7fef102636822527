package windows

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

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
	h := &Host{m: Machine{System: sys, Processes: &fakeProcesses{table: rke2Tree()}}}
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

// fakeProcesses is a process table; a kube-proxy.exe ended comes back
// under a new PID after restartAfter more lists (the kubelet starting its
// container again), unless restartAfter is negative.
type fakeProcesses struct {
	table        []Process
	restartAfter int
	listErr      error
	ended        []uint32
	lists        int
	gone         *Process
}

func (f *fakeProcesses) List() ([]Process, error) {
	f.lists++
	if f.gone != nil && f.restartAfter >= 0 {
		if f.restartAfter == 0 {
			back := *f.gone
			back.PID += 1000
			f.table, f.gone = append(f.table, back), nil
		}
		f.restartAfter--
	}
	return slices.Clone(f.table), f.listErr
}

func (f *fakeProcesses) Terminate(pid uint32) error {
	f.ended = append(f.ended, pid)
	i := slices.IndexFunc(f.table, func(p Process) bool { return p.PID == pid })
	if i < 0 {
		return errors.New("The parameter is incorrect.")
	}
	p := f.table[i]
	f.gone, f.table = &p, slices.Delete(f.table, i, i+1)
	return nil
}

// podTree: sig-windows-tools' kube-proxy DaemonSet, whose HostProcess
// container runs a script that starts kube-proxy.exe.
func podTree() []Process {
	return []Process{{PID: 4, Image: "System"}, {PID: 700, ParentPID: 4, Image: "services.exe"},
		{PID: 1200, ParentPID: 700, Image: "containerd.exe"}, {PID: 3100, ParentPID: 1200, Image: "containerd-shim-runhcs-v1.exe"},
		{PID: 3150, ParentPID: 3100, Image: "powershell.exe"}, {PID: 3180, ParentPID: 3150, Image: "kube-proxy.exe"}}
}

// rke2Tree: rke2's service runs containerd, the kubelet and kube-proxy as
// its children.
func rke2Tree() []Process {
	return []Process{{PID: 4, Image: "System"}, {PID: 700, ParentPID: 4, Image: "services.exe"}, {PID: 900, ParentPID: 700, Image: "rke2.exe"},
		{PID: 910, ParentPID: 900, Image: "containerd.exe"}, {PID: 920, ParentPID: 900, Image: "kubelet.exe"}, {PID: 930, ParentPID: 900, Image: "kube-proxy.exe"}}
}

// With no kube-proxy service, a kube-proxy.exe a HostProcess pod runs (under
// the shim, through its script) is ended, and the restart is done once the
// kubelet has started it again under a new PID; one under rke2.exe, or none
// at all, is left alone and told apart; a container never started again
// ends with the context, pointing at the pod's events.
func TestKubeProxyInAPodIsEndedAndSeenStartedAgain(t *testing.T) {
	ctx := context.Background()
	procs := &fakeProcesses{table: podTree(), restartAfter: 2}
	h := &Host{m: Machine{System: newFakeSystem(), Processes: procs}}
	got, err := h.RestartKubeProxy(ctx)
	if err != nil || !strings.Contains(got, "pid 3180, then 4180") || !slices.Equal(procs.ended, []uint32{3180}) {
		t.Fatalf("restarted %q, %v, ended %v; want kube-proxy.exe 3180 ended, seen again as 4180", got, err, procs.ended)
	}

	procs = &fakeProcesses{table: rke2Tree()}
	h = &Host{m: Machine{System: newFakeSystem(), Processes: procs}}
	if _, err := h.RestartKubeProxy(ctx); !errors.Is(err, host.ErrNoKubeProxyService) || !strings.Contains(err.Error(), "under rke2.exe under services.exe") || len(procs.ended) != 0 {
		t.Errorf("kube-proxy under rke2: %v, ended %v; want it left alone, its parents named", err, procs.ended)
	}
	procs = &fakeProcesses{table: podTree()[:5]}
	h = &Host{m: Machine{System: newFakeSystem(), Processes: procs}}
	if _, err := h.RestartKubeProxy(ctx); !errors.Is(err, host.ErrNoKubeProxyService) || len(procs.ended) != 0 {
		t.Errorf("no kube-proxy at all: %v, ended %v", err, procs.ended)
	}

	procs = &fakeProcesses{table: podTree(), restartAfter: -1}
	h = &Host{m: Machine{System: newFakeSystem(), Processes: procs}}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := h.RestartKubeProxy(short); err == nil || !strings.Contains(err.Error(), "has not started it again") || !strings.Contains(err.Error(), "describe pod") {
		t.Errorf("a container never started again: %v", err)
	}
}
