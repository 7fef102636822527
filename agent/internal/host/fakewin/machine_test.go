package fakewin_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/hns"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/host/fakewin"
	"winpool.dev/agent/internal/host/windows"
)

var (
	start  = host.Build{Major: 10, Build: 20348, UBR: 2762}
	target = host.Build{Major: 10, Build: 20348, UBR: 2849}
)

// aks is an AKS node as its image installs it (fleet's profiles hold the
// sources).
func aks(c fakewin.Catalogue) fakewin.Options {
	return fakewin.Options{Build: start, Containerd: "1.7.20",
		Services: []fakewin.Service{
			{Name: "containerd", Program: `Program Files\containerd\containerd.exe`, NSSM: true},
			{Name: "kubelet", Program: `k\kubelet.exe`, NSSM: true, DependsOn: []string{"containerd"}},
			{Name: "kubeproxy", Program: `k\kube-proxy.exe`, NSSM: true, DependsOn: []string{"kubelet"}},
			{Name: "csi-proxy", Program: `k\csi-proxy.exe`, NSSM: true},
		},
		Network:   hns.Network{Name: "azure", Type: "L2Bridge"},
		HNS:       func() (host.HNSCounts, error) { return host.HNSCounts{LoadBalancers: 40, RemoteEndpoints: 12}, nil },
		Catalogue: c,
	}
}

func boot(t *testing.T, o fakewin.Options) (*fakewin.Machine, *windows.Host) {
	t.Helper()
	m, err := fakewin.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	h, err := windows.NewOn(m.OS(), windows.Options{SwapProof: windows.SwapProof{StartWithin: 2 * time.Second, SettleFor: 200 * time.Millisecond, CheckEvery: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	return m, h
}

func observe(t *testing.T, h *windows.Host) host.Observed {
	t.Helper()
	obs, err := h.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return obs
}

// until observes the host until done says so (within 10 s).
func until(t *testing.T, h *windows.Host, what string, done func(host.Observed) bool) host.Observed {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		obs := observe(t, h)
		if done(obs) {
			return obs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s; last observed %+v", what, obs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The real host reads an AKS machine as a node's agent would: the build from
// the registry, containerd from the program NSSM runs, CSI Proxy as the
// image's host service, kube-proxy's L2Bridge network.
func TestTheHostReadsAnAKSMachine(t *testing.T) {
	_, h := boot(t, aks(fakewin.Catalogue{}))
	obs := observe(t, h)
	if obs.Build != start || obs.ContainerdVersion != "1.7.20" || obs.CNIMode != "l2bridge" {
		t.Errorf("observed build %s, containerd %q, CNI %q; want %s, 1.7.20, l2bridge", obs.Build, obs.ContainerdVersion, obs.CNIMode, start)
	}
	if obs.RuntimeService.Wrapper != host.WrapperNSSM || !obs.RuntimeService.Running {
		t.Errorf("containerd's service = %+v, want running under NSSM", obs.RuntimeService)
	}
	if obs.CSIProxyHost == nil || obs.CSIProxyHost.Name != "csi-proxy" || !obs.CSIProxyHost.PipesAnswer || obs.CSIProxyHost.Version != "unknown" {
		t.Errorf("CSI Proxy host = %+v, want csi-proxy, pipes answering, version unknown", obs.CSIProxyHost)
	}
	if c, err := h.HNS(context.Background()); err != nil || c.LoadBalancers != 40 || c.RemoteEndpoints != 12 {
		t.Errorf("HNS = %+v, %v; want 40 load balancers, 12 remote endpoints", c, err)
	}
}

// An update goes through the servicing task, Windows Update's selection
// (the removal tool and Defender's definitions are left alone) and a
// reboot, and the machine boots the cumulative update.
func TestAnUpdateRunsThroughTheServicingTaskAndTheReboot(t *testing.T) {
	m, h := boot(t, aks(fakewin.Catalogue{InstallTime: 20 * time.Millisecond}))
	req := host.UpdateRequest{Revision: "r1", Attempt: 1, StartedAt: "2026-12-03T10:00:00Z", Target: target}
	if err := h.StartUpdate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	until(t, h, "the servicing task ends", func(o host.Observed) bool { return o.UpdateTask != nil && o.UpdateTask.Phase == host.UpdateDone })
	// One Observe reads the reboot keys before the task's result: the task
	// may end between the two reads. The next one sees both.
	obs := observe(t, h)
	if obs.UpdateTask.Result.ExitCode != 3010 || !obs.Reboot.CBSRebootPending {
		t.Fatalf("servicing ended %+v (error %q), CBS RebootPending %v; want 3010 and a pending reboot", obs.UpdateTask.Result, obs.UpdateTask.Error, obs.Reboot.CBSRebootPending)
	}
	if c := decide.ClassifyUpdate(obs.UpdateTask.Result.ExitCode); c != decide.RebootRequired {
		t.Errorf("3010 classified %v", c)
	}
	if got := obs.UpdateTask.Result.Installed; len(got) != 1 || got[0].KB != "KB5050002" || len(got[0].CveIDs) == 0 {
		t.Errorf("the task's result records %+v as installed, want the cumulative update with its CVE IDs", got)
	}
	if err := h.Reboot(context.Background(), "update to "+target.String()); err != nil {
		t.Fatal(err)
	}
	obs = observe(t, h)
	if obs.Build != target || obs.Reboot.CBSRebootPending {
		t.Errorf("after the reboot: build %s, RebootPending %v; want %s and none", obs.Build, obs.Reboot.CBSRebootPending, target)
	}
	if s := m.Stats(); s.Installs != 1 || s.Reboots != 1 || s.RebootReasons[0] != "update to "+target.String() {
		t.Errorf("stats %+v, want one install and one reboot with its reason", s)
	}
}

// An install that fails with ERROR_FAIL_REBOOT_REQUIRED leaves a reboot
// pending to roll it back, and the reboot does, landing nothing.
func TestAnInstallThatFailsForARebootLeavesOnePending(t *testing.T) {
	_, h := boot(t, aks(fakewin.Catalogue{InstallTime: 20 * time.Millisecond,
		Fails: func(host.Build) uint32 { return decide.ExitWUFailRebootRequired }}))
	req := host.UpdateRequest{Revision: "r1", Attempt: 1, StartedAt: "2026-12-03T10:00:00Z", Target: target}
	if err := h.StartUpdate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	until(t, h, "the servicing task ends", func(o host.Observed) bool { return o.UpdateTask != nil && o.UpdateTask.Phase == host.UpdateDone })
	obs := observe(t, h)
	if uint32(obs.UpdateTask.Result.ExitCode) != decide.ExitWUFailRebootRequired || !obs.Reboot.CBSRebootPending || len(obs.UpdateTask.Result.Installed) != 0 {
		t.Fatalf("servicing ended %+v, CBS RebootPending %v; want 0x80070BC9, nothing installed and a pending reboot", obs.UpdateTask.Result, obs.Reboot.CBSRebootPending)
	}
	if err := h.Reboot(context.Background(), "roll back"); err != nil {
		t.Fatal(err)
	}
	if obs = observe(t, h); obs.Build != start || obs.Reboot.CBSRebootPending {
		t.Errorf("after the reboot: build %s, RebootPending %v; want %s and none", obs.Build, obs.Reboot.CBSRebootPending, start)
	}
}

// A containerd upgrade downloads the release, checks its sha256sum, and the
// task swaps it in under the services and proves it over CRI. On AKS,
// kubeproxy depends on kubelet: the service control manager refuses to stop
// kubelet while it runs, so the task stops it first and starts it last.
func TestAContainerdUpgradeSwapsTheBinariesAndProvesThem(t *testing.T) {
	m, h := boot(t, aks(fakewin.Catalogue{}))
	obs := upgradeTo1722(t, h)
	if obs.RuntimeUpgrade.Phase != host.RuntimeSucceeded || obs.ContainerdVersion != "1.7.22" {
		t.Errorf("upgrade %+v, containerd %q; want Succeeded and 1.7.22", obs.RuntimeUpgrade, obs.ContainerdVersion)
	}
	if s := m.Stats(); s.RuntimeSwaps != 1 || s.Containerd != "1.7.22" {
		t.Errorf("stats %+v", s)
	}
	for _, svc := range []string{"containerd", "kubelet", "kubeproxy"} {
		if !m.Running(svc) {
			t.Errorf("%s does not run after the swap", svc)
		}
	}
}

// A new containerd that crash-loops under NSSM is rolled back by the task.
func TestACrashLoopingContainerdIsRolledBack(t *testing.T) {
	o := aks(fakewin.Catalogue{})
	o.RuntimeCrashLoops = true
	m, h := boot(t, o)
	obs := upgradeTo1722(t, h)
	if obs.RuntimeUpgrade.Phase != host.RuntimeRolledBack || obs.ContainerdVersion != "1.7.20" {
		t.Errorf("upgrade %+v, containerd %q; want RolledBack and 1.7.20", obs.RuntimeUpgrade, obs.ContainerdVersion)
	}
	// The machine counts the task's end once its process is gone, just after
	// it wrote its result.
	until(t, h, "the task's end counted", func(host.Observed) bool { return m.Stats().Rollbacks == 1 })
}

// A major jump (1.7 to 2.0) in place, over the real swap task: a version 2
// config.toml, as AKS, EKS and containerd 1.x write it, is the admin's and
// containerd 2.x migrates it in memory: it stays byte for byte. A version 1
// file (a node set up years ago) is migrated by the new containerd's
// `config migrate`, its original kept; a rollback puts the original back.
func TestAMajorContainerdJumpMigratesOnlyAVersion1Config(t *testing.T) {
	const v2 = "version = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"mcr.microsoft.com/oss/kubernetes/pause:3.9\"\n"
	const v1 = "[plugins.cri]\n  sandbox_image = \"mcr.microsoft.com/oss/kubernetes/pause:3.6\"\n"
	jump := func(t *testing.T, config string, crashLoops bool) (fakewin.Stats, host.Observed) {
		o := aks(fakewin.Catalogue{})
		o.ContainerdConfig, o.RuntimeCrashLoops = config, crashLoops
		m, h := boot(t, o)
		if err := h.UpgradeContainerd(context.Background(), host.RuntimeRequest{Revision: "r1", Attempt: 1, Version: "2.0.4", From: "1.7.20"}); err != nil {
			t.Fatal(err)
		}
		obs := until(t, h, "the upgrade task ends", func(o host.Observed) bool {
			return o.RuntimeUpgrade != nil && o.RuntimeUpgrade.Phase != host.RuntimeScheduled && o.RuntimeUpgrade.Phase != host.RuntimeRunning
		})
		return m.Stats(), obs
	}
	s, obs := jump(t, v2, false)
	if obs.RuntimeUpgrade.Phase != host.RuntimeSucceeded || s.Containerd != "2.0.4" || s.ContainerdConfig != v2 {
		t.Errorf("version 2: upgrade %+v, containerd %q, config %q; want Succeeded, 2.0.4 and the config as it was", obs.RuntimeUpgrade, s.Containerd, s.ContainerdConfig)
	}
	s, obs = jump(t, v1, false)
	want := "version = 3\n" + v1
	if obs.RuntimeUpgrade.Phase != host.RuntimeSucceeded || s.Containerd != "2.0.4" || s.ContainerdConfig != want {
		t.Errorf("version 1: upgrade %+v, containerd %q, config %q; want Succeeded, 2.0.4 and %q", obs.RuntimeUpgrade, s.Containerd, s.ContainerdConfig, want)
	}
	s, obs = jump(t, v1, true)
	if obs.RuntimeUpgrade.Phase != host.RuntimeRolledBack || s.Containerd != "1.7.20" || s.ContainerdConfig != v1 {
		t.Errorf("version 1, rolled back: upgrade %+v, containerd %q, config %q; want RolledBack, 1.7.20 and the original config", obs.RuntimeUpgrade, s.Containerd, s.ContainerdConfig)
	}
}

// A node behind WSUS whose update titles come back in German: preflight
// dials the WSUS server its policy names, and servicing still picks the
// cumulative update (by classification and size, never by an English title).
func TestAWSUSNodeWithGermanTitlesInstallsItsCumulativeUpdate(t *testing.T) {
	o := aks(fakewin.Catalogue{InstallTime: 10 * time.Millisecond, Localized: true})
	o.Registry = []fakewin.Value{
		{Key: `SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate`, Name: "WUServer", String: "http://wsus.corp.example:8530"},
		{Key: `SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate\AU`, Name: "UseWUServer", DWORD: 1},
	}
	m, h := boot(t, o)
	req := host.UpdateRequest{Revision: "r1", Attempt: 1, Target: target}
	f := h.Preflight(context.Background(), req)
	if len(f.Sources) != 1 || f.Sources[0].Name != "WSUS http://wsus.corp.example:8530" || f.Sources[0].Err != "" {
		t.Errorf("preflight sources %+v, want the WSUS server, answering", f.Sources)
	}
	if err := h.StartUpdate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	obs := until(t, h, "the servicing task ends", func(o host.Observed) bool { return o.UpdateTask != nil && o.UpdateTask.Phase == host.UpdateDone })
	if obs.UpdateTask.Result.ExitCode != 3010 || !strings.Contains(obs.UpdateTask.Result.Detail, "Kumulatives Update") {
		t.Fatalf("servicing %+v (error %q), want the cumulative update installed, reboot required", obs.UpdateTask.Result, obs.UpdateTask.Error)
	}
	if err := h.Reboot(context.Background(), "update"); err != nil {
		t.Fatal(err)
	}
	if b := m.Stats().Build; b != target {
		t.Errorf("booted %s, want %s", b, target)
	}
}

// A source that does not answer: preflight names each Windows Update host
// and where its payloads come from, and a search ends the install with the
// HRESULT Windows gives.
func TestAnUnreachableSourceFailsPreflightAndTheSearch(t *testing.T) {
	o := aks(fakewin.Catalogue{})
	o.Unreachable = "a proxy in the way"
	_, h := boot(t, o)
	req := host.UpdateRequest{Revision: "r1", Attempt: 1, Target: target}
	f := h.Preflight(context.Background(), req)
	if len(f.Sources) != 3 || f.Sources[0].Err == "" || f.Sources[1].Err == "" || f.Sources[2].Err == "" {
		t.Errorf("preflight %+v, want both Windows Update hosts and its payloads' unreachable", f.Sources)
	}
	if err := h.StartUpdate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	obs := until(t, h, "the servicing task ends", func(o host.Observed) bool { return o.UpdateTask != nil && o.UpdateTask.Phase == host.UpdateDone })
	// The search's HRESULT is the result, judged as an install's would be
	// (ERROR_INTERNET_TIMEOUT: transient, tried again within the attempts).
	if r := obs.UpdateTask.Result; uint32(r.ExitCode) != 0x80072EE2 || !strings.Contains(r.Detail, "Windows Update search") || obs.UpdateTask.Error != "" {
		t.Errorf("servicing %+v, error %q; want the search's 0x80072EE2 as its result", r, obs.UpdateTask.Error)
	}
	if got := decide.ClassifyUpdate(obs.UpdateTask.Result.ExitCode); got != decide.Transient {
		t.Errorf("0x80072EE2 classified %v, want Transient", got)
	}
}

// An AKS node's boot removes kube-proxy's network; the agent sees none,
// and HNS holds nothing, until a pod sandbox is set up on the node.
func TestABootRemovesTheAKSNetworkUntilAPodSandboxIsSetUp(t *testing.T) {
	o := aks(fakewin.Catalogue{})
	o.NetworkResetAtBoot = true
	m, h := boot(t, o)
	if obs, lbs := observe(t, h), lbs(t, h); obs.CNIMode != "l2bridge" || lbs != 40 {
		t.Fatalf("before any reboot: CNI mode %q, %d load balancers; want l2bridge, 40", obs.CNIMode, lbs)
	}
	m.Boot()
	until(t, h, "the boot removes the network", func(o host.Observed) bool { return o.CNIMode == "" && o.CNIProblem == "" })
	if lbs := lbs(t, h); lbs != 0 {
		t.Fatalf("after the boot: %d load balancers; want nothing programmed without the network", lbs)
	}
	m.SandboxStarted()
	until(t, h, "a pod sandbox brings the network back", func(o host.Observed) bool { return o.CNIMode == "l2bridge" })
	if lbs := lbs(t, h); lbs != 40 {
		t.Fatalf("after a pod sandbox: %d load balancers; want 40", lbs)
	}
}

func lbs(t *testing.T, h *windows.Host) int {
	t.Helper()
	c, err := h.HNS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c.LoadBalancers
}

// A firewall that drops Windows Update's payloads alone, and a WinHTTP proxy
// that asks for authentication: each named by preflight, where the service
// hosts' checks alone passed.
func TestPayloadsFirewalledAndAProxyThatWantsCredentialsFailPreflight(t *testing.T) {
	req := host.UpdateRequest{Revision: "r1", Attempt: 1, Target: target}
	o := aks(fakewin.Catalogue{})
	o.Firewalled = []string{"download.windowsupdate.com"}
	_, h := boot(t, o)
	f := h.Preflight(context.Background(), req)
	if len(f.Sources) != 3 || f.Sources[0].Err != "" || f.Sources[1].Err != "" || !strings.Contains(f.Sources[2].Err, "a firewall drops it") {
		t.Errorf("firewalled payloads: preflight %+v", f.Sources)
	}

	o = aks(fakewin.Catalogue{})
	o.WinHTTPProxy, o.ProxyAnswer = "proxy.corp:3128", func(string) int { return 407 }
	_, h = boot(t, o)
	f = h.Preflight(context.Background(), req)
	for _, s := range f.Sources {
		if !strings.Contains(s.Name, "via WinHTTP proxy proxy.corp:3128") || !strings.Contains(s.Err, "HTTP 407") {
			t.Errorf("a proxy that wants credentials: %+v", s)
		}
	}
}

// A containerd release download cut mid-body (a proxy resetting the
// transfer) is picked up where it stopped: one Range request for the rest,
// the archive's digest holds, the upgrade succeeds.
func TestACutDownloadIsResumedFromWhereItStopped(t *testing.T) {
	o := aks(fakewin.Catalogue{})
	o.CutDownloads = 1
	m, h := boot(t, o)
	obs := upgradeTo1722(t, h)
	if obs.RuntimeUpgrade.Phase != host.RuntimeSucceeded || obs.ContainerdVersion != "1.7.22" {
		t.Errorf("upgrade %+v, containerd %q; want Succeeded and 1.7.22", obs.RuntimeUpgrade, obs.ContainerdVersion)
	}
	if s := m.Stats(); s.DownloadsCut != 1 || s.DownloadsResumed != 1 {
		t.Errorf("cut %d, resumed %d: want the one cut download resumed once", s.DownloadsCut, s.DownloadsResumed)
	}
}

// upgradeTo1722 has the host upgrade containerd 1.7.20 to 1.7.22 and waits
// for the upgrade task's end.
func upgradeTo1722(t *testing.T, h *windows.Host) host.Observed {
	t.Helper()
	if err := h.UpgradeContainerd(context.Background(), host.RuntimeRequest{Revision: "r1", Attempt: 1, Version: "1.7.22", From: "1.7.20"}); err != nil {
		t.Fatal(err)
	}
	return until(t, h, "the upgrade task ends", func(o host.Observed) bool {
		return o.RuntimeUpgrade != nil && o.RuntimeUpgrade.Phase != host.RuntimeScheduled && o.RuntimeUpgrade.Phase != host.RuntimeRunning
	})
}

// The process table: kube-proxy in a HostProcess pod runs under its
// container's script under containerd's shim; ended, it is gone until the
// kubelet starts it again under a new PID, which counts as a kube-proxy
// start; only it can be ended. A service restarted runs under a new PID.
func TestTheProcessTableEndsAPodsKubeProxyAndTheKubeletStartsItAgain(t *testing.T) {
	o := aks(fakewin.Catalogue{})
	o.Services = o.Services[:2] // containerd and the kubelet: kube-proxy in a pod
	o.KubeProxyInPod, o.KubeProxyPodRestart = true, 20*time.Millisecond
	m, _ := boot(t, o)
	procs := m.OS().Processes
	find := func(image string) (windows.Process, []string) {
		list, err := procs.List()
		if err != nil {
			t.Fatal(err)
		}
		byPID := map[uint32]windows.Process{}
		for _, p := range list {
			byPID[p.PID] = p
		}
		for _, p := range list {
			if p.Image == image {
				var chain []string
				for q, ok := byPID[p.ParentPID]; ok && len(chain) < 8; q, ok = byPID[q.ParentPID] {
					chain = append(chain, q.Image)
				}
				return p, chain
			}
		}
		return windows.Process{}, nil
	}
	proxy, chain := find("kube-proxy.exe")
	want := []string{"powershell.exe", "containerd-shim-runhcs-v1.exe", "containerd.exe", "nssm.exe", "services.exe", "System"}
	if proxy.PID == 0 || !slices.Equal(chain, want) {
		t.Fatalf("kube-proxy.exe %+v under %q, want under %q", proxy, chain, want)
	}
	kubelet, _ := find("kubelet.exe")
	if err := procs.Terminate(kubelet.PID); err == nil {
		t.Error("the kubelet's process was ended")
	}
	if err := procs.Terminate(proxy.PID); err != nil {
		t.Fatal(err)
	}
	if gone, _ := find("kube-proxy.exe"); gone.PID != 0 {
		t.Errorf("kube-proxy.exe %+v still runs", gone)
	}
	deadline := time.Now().Add(5 * time.Second)
	for back, _ := find("kube-proxy.exe"); back.PID == 0 || m.Stats().KubeProxyStarted.IsZero(); back, _ = find("kube-proxy.exe") {
		if time.Now().After(deadline) {
			t.Fatal("kube-proxy.exe was not started again")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if back, _ := find("kube-proxy.exe"); back.PID == proxy.PID {
		t.Errorf("started again under its old PID %d", back.PID)
	}
	sys := m.OS().System
	if err := sys.StopService("kubelet"); err != nil {
		t.Fatal(err)
	}
	if err := sys.StartService("kubelet"); err != nil {
		t.Fatal(err)
	}
	if again, _ := find("kubelet.exe"); again.PID == 0 || again.PID == kubelet.PID {
		t.Errorf("the restarted kubelet runs as %+v, before as pid %d", again, kubelet.PID)
	}
}
