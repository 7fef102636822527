package fleet

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/host/fakewin"
	"winpool.dev/agent/internal/host/windows"
)

func TestHostFaults(t *testing.T) {
	for _, tc := range []struct {
		flag      string
		on, notOn []string // node names
		canonical string
	}{
		{"", nil, []string{"win-0"}, ""},
		{"hns-churn", []string{"win-0", "win-9"}, nil, "hns-churn"},
		{"hns-churn@win-3+win-4", []string{"win-3", "win-4"}, []string{"win-0"}, "hns-churn@win-3+win-4"},
		{"hns-churn@win-4, hns-churn@win-3", []string{"win-3", "win-4"}, []string{"win-0"}, "hns-churn@win-3+win-4"},
		{"hns-churn@win-4,hns-churn", []string{"win-0", "win-4"}, nil, "hns-churn"},
		{"hns-churn,hns-churn@win-4", []string{"win-0", "win-4"}, nil, "hns-churn"},
	} {
		s, err := ParseSettings([]string{"--host-faults", tc.flag}, io.Discard)
		if err != nil {
			t.Errorf("%q: %v", tc.flag, err)
			continue
		}
		for _, n := range tc.on {
			if !s.Faults.On(FaultHNSChurn, n) {
				t.Errorf("%q: hns-churn not on %s", tc.flag, n)
			}
		}
		for _, n := range tc.notOn {
			if s.Faults.On(FaultHNSChurn, n) {
				t.Errorf("%q: hns-churn on %s", tc.flag, n)
			}
		}
		if got := s.Faults.String(); got != tc.canonical {
			t.Errorf("%q reads back as %q, want %q", tc.flag, got, tc.canonical)
		}
	}
}

func TestBadHostFaults(t *testing.T) {
	for _, tc := range []struct{ flag, want string }{
		{"hns-chrun", `--host-faults: unknown fault "hns-chrun" (known: ` + knownNames() + ")"},
		{"hns-churn@Win_3", `--host-faults: hns-churn@Win_3: "Win_3" is not a node name`},
		{"hns-churn@", `--host-faults: hns-churn@: "" is not a node name`},
	} {
		_, err := ParseSettings([]string{"--host-faults", tc.flag}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.flag, err, tc.want)
		}
	}
}

// Under install-fails-once a node's first install fails with a code and
// its second (the retry) lands; a node without the fault installs at once.
// shapedBy is the machine options of win-1, which plays fault, and of
// win-2, which does not.
func shapedBy(t *testing.T, fault Fault) (faulted, healthy fakewin.Options) {
	t.Helper()
	s, err := ParseSettings([]string{"--host-faults", string(fault) + "@win-1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s.Faults.shape("win-1", &faulted)
	s.Faults.shape("win-2", &healthy)
	return faulted, healthy
}

func TestInstallFailsOnceFailsTheFirstInstallOnly(t *testing.T) {
	for fault, code := range map[Fault]uint32{FaultInstallFailsOnce: badUpdateCode, FaultInstallFailsReboot: 0x80070BC9} {
		faulted, healthy := shapedBy(t, fault)
		if healthy.Catalogue.Fails != nil {
			t.Fatalf("%s: win-2 fails its installs without the fault", fault)
		}
		if got := faulted.Catalogue.Fails(host.Build{}); got != code {
			t.Fatalf("%s: first install: %#x, want %#x", fault, got, code)
		}
		for i := range 2 {
			if got := faulted.Catalogue.Fails(host.Build{}); got != 0 {
				t.Fatalf("%s: install %d after the first: %#x, want success", fault, i+2, got)
			}
		}
	}
}

// containerd-config-v1 lays down a config with no version line on its node
// only (a machine booted from these options: fakewin's
// TestAMajorContainerdJumpMigratesOnlyAVersion1Config).
func TestContainerdConfigV1IsAVersion1File(t *testing.T) {
	faulted, healthy := shapedBy(t, FaultContainerdConfigV1)
	if healthy.ContainerdConfig != "" || faulted.ContainerdConfig == "" || strings.Contains(faulted.ContainerdConfig, "version") {
		t.Fatalf("win-1's config %q, win-2's %q; want a file with no version line on win-1 only", faulted.ContainerdConfig, healthy.ContainerdConfig)
	}
}

// Under hns-churn every read differs from the one before and none is below
// what is programmed.
func TestChurningCountsMoveOnEveryRead(t *testing.T) {
	base := host.HNSCounts{LoadBalancers: 10, RemoteEndpoints: 20}
	read := churning(func() (host.HNSCounts, error) { return base, nil })
	prev, _ := read()
	for range 5 {
		c, _ := read()
		if c == prev {
			t.Fatalf("two reads in a row gave %+v", c)
		}
		if c.LoadBalancers < base.LoadBalancers || c.RemoteEndpoints < base.RemoteEndpoints {
			t.Fatalf("%+v is below the programmed %+v", c, base)
		}
		prev = c
	}
}

func TestHostProfiles(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		suffix     string
		runtime    host.Service
		csiService string
		// cni: the image's CNI's network mode, with --cni overlay.
		cni string
		err string
		// kubeProxyPod: a HostProcess DaemonSet runs kube-proxy (kind's
		// sig-windows-tools nodes); the others run it as a service, or
		// rke2 as its child.
		kubeProxyPod bool
	}{
		{args: nil, runtime: host.Service{Name: "containerd"}, kubeProxyPod: true},
		{args: []string{"--host-profile", "aks"}, suffix: "+azure", runtime: host.Service{Name: "containerd", Wrapper: host.WrapperNSSM}, csiService: "csi-proxy", cni: "l2bridge"},
		{args: []string{"--host-profile", "aks", "--containerd", "1.7.20+azure2"}, suffix: "+azure2", runtime: host.Service{Name: "containerd", Wrapper: host.WrapperNSSM}, csiService: "csi-proxy", cni: "l2bridge"},
		{args: []string{"--host-profile", "onprem"}, runtime: host.Service{Name: "containerd"}, csiService: "csiproxy"},
		{args: []string{"--host-profile", "onprem", "--containerd", "1.7.20+azure"}, err: `--host-profile onprem runs upstream containerd: drop "+azure" from --containerd`},
		{args: []string{"--host-profile", "eks"}, runtime: host.Service{Name: "containerd"}, cni: "l2bridge"},
		{args: []string{"--host-profile", "onprem-wsus"}, runtime: host.Service{Name: "containerd"}, csiService: "csiproxy"},
		// containerd a child of RKE2's service, found over CRI.
		{args: []string{"--host-profile", "rke2"}, suffix: "-k3s1", runtime: host.Service{Name: "rke2", Wrapper: host.WrapperParent}},
		{args: []string{"--host-profile", "gke"}, err: `--host-profile: want one of aks, eks, kind, onprem, onprem-wsus, rke2, got "gke"`},
	} {
		s, err := ParseSettings(tc.args, io.Discard)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		// What the agent's own host reads on a machine of the profile.
		o := fakewin.Options{Build: host.Build{Major: 10, Build: 20348, UBR: 2762}, Containerd: "1.7.20"}
		s.Profile.shape(&o, "overlay")
		if o.KubeProxyInPod != tc.kubeProxyPod {
			t.Errorf("%v: kube-proxy in a pod %v, want %v", tc.args, o.KubeProxyInPod, tc.kubeProxyPod)
		}
		m, err := fakewin.New(o)
		if err != nil {
			t.Fatal(err)
		}
		h, err := windows.NewOn(m.OS(), windows.Options{})
		if err != nil {
			t.Fatal(err)
		}
		obs, err := h.Observe(context.Background())
		m.Close()
		if err != nil {
			t.Fatal(err)
		}
		got := obs.RuntimeService
		if tc.cni == "" {
			tc.cni = "overlay"
		}
		if obs.ContainerdVersion != "1.7.20" || obs.CNIMode != tc.cni {
			t.Errorf("%v: containerd %q, CNI %q; want 1.7.20, %s", tc.args, obs.ContainerdVersion, obs.CNIMode, tc.cni)
		}
		if s.ContainerdSuffix != tc.suffix || got.Name != tc.runtime.Name || got.Wrapper != tc.runtime.Wrapper || !got.Running {
			t.Errorf("%v: containerd suffix %q, service %+v; want %q, %+v", tc.args, s.ContainerdSuffix, got, tc.suffix, tc.runtime)
		}
		switch {
		case tc.csiService == "" && obs.CSIProxyHost != nil:
			t.Errorf("%v: a CSI Proxy host service %+v, want none", tc.args, obs.CSIProxyHost)
		case tc.csiService != "" && (obs.CSIProxyHost == nil || obs.CSIProxyHost.Name != tc.csiService || !obs.CSIProxyHost.PipesAnswer):
			t.Errorf("%v: CSI Proxy host service %+v, want %s answering", tc.args, obs.CSIProxyHost, tc.csiService)
		}
	}
}

// docs/agent.md's fault table has a row per fault and no other, whose
// second column is the fault's --help line (backquotes aside): a fault added
// without its row, or a row kept for a fault gone, fails here.
func TestTheAgentDocsTableEveryFault(t *testing.T) {
	page, err := os.ReadFile("../../docs/agent.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, found := strings.Cut(string(page), "\n| fault | what the host does |")
	if !found {
		t.Fatal("docs/agent.md has no fault table")
	}
	rows := map[Fault]string{}
	// The header's rest and the separator, then the rows.
	for _, row := range strings.Split(table, "\n")[2:] {
		cells := strings.Split(row, "|")
		if len(cells) < 3 {
			break
		}
		rows[Fault(strings.Trim(cells[1], " `"))] = strings.ReplaceAll(strings.TrimSpace(cells[2]), "`", "")
	}
	for _, f := range faults {
		if does, ok := rows[f.Fault]; !ok {
			t.Errorf("docs/agent.md's fault table has no row for %s", f.Fault)
		} else if does != f.does {
			t.Errorf("docs/agent.md says %s: %q; its --help says %q", f.Fault, does, f.does)
		}
		delete(rows, f.Fault)
	}
	for f := range rows {
		t.Errorf("docs/agent.md's fault table lists %s, which is no fault", f)
	}
}

// A containerd swap on a node where a service the agent knows nothing of
// depends on containerd: the SCM refuses to stop containerd while that
// service runs, so the swap stops it first and starts it again after.
func TestAContainerdSwapStopsAThirdPartyDependentAndStartsItAgain(t *testing.T) {
	m, h := shapedHost(t, "onprem", "service-deps", host.Build{Major: 10, Build: 20348, UBR: 2762},
		windows.Options{SwapProof: windows.SwapProof{StartWithin: 2 * time.Second, SettleFor: 200 * time.Millisecond, CheckEvery: 20 * time.Millisecond}})
	ctx := context.Background()
	if err := h.UpgradeContainerd(ctx, host.RuntimeRequest{Revision: "r1", Attempt: 1, Version: "1.7.22", From: "1.7.20"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		obs, err := h.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if u := obs.RuntimeUpgrade; u != nil && u.Phase != host.RuntimeScheduled && u.Phase != host.RuntimeRunning {
			if u.Phase != host.RuntimeSucceeded || obs.ContainerdVersion != "1.7.22" {
				t.Fatalf("upgrade %+v, containerd %q; want Succeeded, 1.7.22", u, obs.ContainerdVersion)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the upgrade task did not end within 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, svc := range []string{"containerd", "kubelet", "kube-proxy", thirdPartyService} {
		if !m.Running(svc) {
			t.Errorf("%s does not run after the swap", svc)
		}
	}
}

// A WSUS Group Policy that has Automatic Updates install on its own
// schedule, and an image that disables the Windows Update service: preflight
// blocks the node before its cordon, naming what to set; the same node
// without them is not blocked for either.
func TestWindowsUpdatePoliciesThatWouldFailTheInstallBlockPreflight(t *testing.T) {
	for _, tc := range []struct{ faults, blocked string }{
		{"au-scheduled", "AUOptions=4"},
		{"wu-disabled", "sc.exe config wuauserv start= demand"},
		{"", ""},
	} {
		behind := host.Build{Major: 10, Build: 20348, UBR: 2700}
		_, h := shapedHost(t, "onprem-wsus", tc.faults, behind, windows.Options{})
		req := host.UpdateRequest{Revision: "r1", Attempt: 1, Target: host.Build{Major: 10, Build: 20348, UBR: 2762}}
		f := h.Preflight(context.Background(), req)
		r := decide.Preflight(decide.PreflightInput{Config: config.Revision{PatchLevel: "10.0.20348.2762"}, Observed: host.Observed{Build: behind}, Findings: &f})
		if tc.blocked == "" && !r.Ready() || tc.blocked != "" && !strings.Contains(r.String(), tc.blocked) {
			t.Errorf("faults %q: preflight %s, want it to say %q", tc.faults, r, tc.blocked)
		}
	}
}

// shapedHost is node n1 of a fleet of profile with faults, at build with
// containerd 1.7.20, and the agent's host on it; the machine stops with
// the test.
func shapedHost(t *testing.T, profile, faults string, build host.Build, opts windows.Options) (*fakewin.Machine, *windows.Host) {
	t.Helper()
	s, err := ParseSettings([]string{"--host-profile", profile, "--host-faults", faults}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o := fakewin.Options{Build: build, Containerd: "1.7.20"}
	s.Profile.shape(&o, "overlay")
	s.Faults.shape("n1", &o)
	m, err := fakewin.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	h, err := windows.NewOn(m.OS(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return m, h
}

// SOURCES.md has a row per fault and none for a fault that is not, each
// naming a source or saying it has none yet.
func TestEverySourceRowIsAFault(t *testing.T) {
	page, err := os.ReadFile("SOURCES.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[Fault]string{}
	for _, line := range strings.Split(string(page), "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) == 3 && strings.HasPrefix(cells[0], "| `") {
			rows[Fault(strings.Trim(cells[0], "| `"))] = strings.TrimSuffix(cells[2], " |")
		}
	}
	for _, f := range faults {
		if source, ok := rows[f.Fault]; !ok {
			t.Errorf("SOURCES.md has no row for %s", f.Fault)
		} else if !strings.Contains(source, "no source") && !strings.ContainsAny(source, "/`") {
			t.Errorf("SOURCES.md's %s row names no source and does not say it has none: %q", f.Fault, source)
		}
		delete(rows, f.Fault)
	}
	for f := range rows {
		t.Errorf("SOURCES.md has a row for %s, which is no fault", f)
	}
}
