package agent

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"winpool.dev/agent/internal/hns"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/host/fakewin"
	"winpool.dev/agent/internal/host/windows"
)

// The loop's tests run the agent over its real Windows host (windows.Host)
// on a simulated machine (fakewin): a kind node (containerd and the kubelet
// as native services, flannel's network), changed as each test says.

// Servicing exit codes a test's catalogue decides between.
const (
	exitRebootRequired = 3010
	exitInstallFailed  = 0x800F0922
)

// machineOptions is what a test changes of the machine: fakewin's options,
// and these, which newMachine turns into them.
type machineOptions struct {
	fakewin.Options
	// CNIMode: the type of flannel's network ("overlay", "l2bridge"; "": none).
	CNIMode string
	// CSIProxyVersion: CSI Proxy runs as the host service "csiproxy", its
	// program of that version ("": none).
	CSIProxyVersion string
	HNS             func() host.HNSCounts
	// InstallExitCode: what the install of target fails with (a HRESULT),
	// or exitRebootRequired: it installs.
	InstallExitCode func(target host.Build) int
	// KubeProxy: kube-proxy runs as a host service of this name; else, with
	// KubeProxyInPod, in a HostProcess pod; else nowhere the agent can see.
	KubeProxy string
}

// testMachine is the machine and the agent's host on it.
type testMachine struct {
	host.Host
	m *fakewin.Machine

	mu      sync.Mutex
	updates []host.UpdateRequest
}

var (
	machinesMu sync.Mutex
	machines   []*fakewin.Machine
)

// TestMain removes the machines' C: folders.
func TestMain(m *testing.M) {
	code := m.Run()
	machinesMu.Lock()
	for _, mc := range machines {
		mc.Close()
	}
	machinesMu.Unlock()
	os.Exit(code)
}

func newMachine(o machineOptions) *testMachine {
	fo := o.Options
	fo.Services = []fakewin.Service{
		{Name: "containerd", Program: `Program Files\containerd\bin\containerd.exe`},
		{Name: "kubelet", Program: `k\kubelet.exe`, DependsOn: []string{"containerd"}},
	}
	fo.KubeProxyPodRestart = 50 * time.Millisecond
	if o.KubeProxy != "" {
		fo.Services = append(fo.Services, fakewin.Service{Name: o.KubeProxy, Program: `k\kube-proxy.exe`, DependsOn: []string{"kubelet"}})
	}
	if o.CSIProxyVersion != "" {
		fo.Services = append(fo.Services, fakewin.Service{Name: "csiproxy", Program: `etc\kubernetes\node\bin\csi-proxy.exe`,
			ProductVersion: strings.TrimPrefix(o.CSIProxyVersion, "v")})
	}
	switch o.CNIMode {
	case "overlay":
		fo.Network = hns.Network{Name: "vxlan0", Type: "Overlay"}
	case "l2bridge":
		fo.Network = hns.Network{Name: "cbr0", Type: "L2Bridge"}
	}
	if o.HNS != nil {
		fo.HNS = func() (host.HNSCounts, error) { return o.HNS(), nil }
	}
	if o.InstallExitCode != nil {
		fo.Catalogue.Fails = func(t host.Build) uint32 {
			if code := o.InstallExitCode(t); code != exitRebootRequired {
				return uint32(code)
			}
			return 0
		}
	}
	m, err := fakewin.New(fo)
	if err != nil {
		panic(err)
	}
	machinesMu.Lock()
	machines = append(machines, m)
	machinesMu.Unlock()
	h, err := windows.NewOn(m.OS(), windows.Options{SwapProof: windows.SwapProof{StartWithin: 2 * time.Second, SettleFor: 200 * time.Millisecond, CheckEvery: 20 * time.Millisecond}})
	if err != nil {
		panic(err)
	}
	return &testMachine{Host: h, m: m}
}

// StartUpdate records what the agent asked its host to install.
func (t *testMachine) StartUpdate(ctx context.Context, req host.UpdateRequest) error {
	t.mu.Lock()
	t.updates = append(t.updates, req)
	t.mu.Unlock()
	return t.Host.StartUpdate(ctx, req)
}

// Updates are the install requests the host received, in order.
func (t *testMachine) Updates() []host.UpdateRequest {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]host.UpdateRequest(nil), t.updates...)
}

// CompleteReboot is the machine coming back; it returns the build it booted.
func (t *testMachine) CompleteReboot() host.Build { return t.m.Boot() }

// Machine is what happened to the machine.
func (t *testMachine) Machine() fakewin.Stats { return t.m.Stats() }

// SetSourceUnreachable makes the update sources answer again ("") or not.
func (t *testMachine) SetSourceUnreachable(why string) { t.m.SetSourceUnreachable(why) }
