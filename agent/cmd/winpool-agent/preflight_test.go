package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"strings"
	"testing"
	"unicode/utf16"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
)

// kubeletKubeconfigText is a kubelet's kubeconfig as AKS writes it.
var kubeletKubeconfigText = func() string {
	b, err := os.ReadFile("../../internal/apiserver/testdata/aks-kubelet.kubeconfig")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

func mustBuild(s string) host.Build {
	b, err := host.ParseBuild(s)
	if err != nil {
		panic(err)
	}
	return b
}

func strp(s string) *string { return &s }

// TestPrintPreflight: what an administrator reads, line by line, and the
// exit code: 0 Ready, 1 Blocked; the last line is the verdict as the
// agent's preflight annotation has it.
func TestPrintPreflight(t *testing.T) {
	behind := host.Observed{Build: mustBuild("10.0.20348.2700"), ContainerdVersion: "1.7.22", CNIMode: "overlay"}
	packages := config.Revision{Revision: "5f1c9a2e01", Pool: "win22", PatchLevel: "10.0.20348.2762", CNIMode: "overlay",
		Updates: &config.Updates{Source: config.SourcePackages}}
	const heading = "revision 5f1c9a2e01 of pool win22: patch level 10.0.20348.2762 from Packages"
	for _, tc := range []struct {
		name      string
		cfg       config.Revision
		obs       host.Observed
		findings  *host.PreflightFindings
		api       string
		wantLines []string
		wantExit  int
	}{
		{"every source answers", packages, behind, &host.PreflightFindings{SystemDrive: "C:", FreeBytes: 42 << 30, Sources: []host.SourceCheck{
			{Name: `\\files\updates\ssu.cab`}, {Name: "https://updates.example.com/kb5044281.msu"}}},
			"API server https://10.240.0.4:6443 (the kubelet's kubeconfig) answers a TCP dial",
			[]string{
				heading,
				"host: build 10.0.20348.2700, containerd 1.7.22, HNS network overlay",
				"update: 10.0.20348.2700 to 10.0.20348.2762 from Packages",
				`  ok      \\files\updates\ssu.cab`,
				"  ok      https://updates.example.com/kb5044281.msu",
				"  ok      C: has 42.0 GiB free (an update needs 10.0 GiB)",
				"note: API server https://10.240.0.4:6443 (the kubelet's kubeconfig) answers a TCP dial",
				"Ready",
			}, preflightReady},
		{"a package not there and a full disk", packages, behind, &host.PreflightFindings{SystemDrive: "C:", FreeBytes: 3 << 30, Sources: []host.SourceCheck{
			{Name: `\\files\updates\ssu.cab`}, {Name: "https://updates.example.com/kb5044281.msu", Err: "HTTP 404 Not Found"}}},
			"",
			[]string{
				heading,
				"host: build 10.0.20348.2700, containerd 1.7.22, HNS network overlay",
				"update: 10.0.20348.2700 to 10.0.20348.2762 from Packages",
				`  ok      \\files\updates\ssu.cab`,
				"  FAILED  https://updates.example.com/kb5044281.msu: HTTP 404 Not Found",
				"  FAILED  C: has 3.0 GiB free, an update needs 10.0 GiB",
			}, preflightBlocked},
		{"WSUS down, a reboot pending, the API server away", config.Revision{PatchLevel: "10.0.20348.2762"},
			host.Observed{Build: mustBuild("10.0.20348.2700"), Reboot: host.RebootSignals{CBSRebootPending: true}},
			&host.PreflightFindings{SystemDrive: "C:", FreeBytes: -1, Sources: []host.SourceCheck{
				{Name: "WSUS http://wsus.corp:8530", Err: "dial tcp 10.1.0.9:8530: i/o timeout"}}},
			"API server https://10.240.0.4:6443 (the kubelet's kubeconfig) does not answer a TCP dial: dial tcp 10.240.0.4:6443: i/o timeout",
			[]string{
				"host: build 10.0.20348.2700, containerd -, HNS network -",
				"update: 10.0.20348.2700 to 10.0.20348.2762 from WindowsUpdate",
				"  FAILED  WSUS http://wsus.corp:8530: dial tcp 10.1.0.9:8530: i/o timeout",
				"  ?       C: free space could not be read (not judged)",
				"note: a reboot is pending (CBS RebootPending): the agent reboots before it installs",
				"note: API server https://10.240.0.4:6443 (the kubelet's kubeconfig) does not answer a TCP dial: dial tcp 10.240.0.4:6443: i/o timeout",
			}, preflightBlocked},
		{"WSUS offers no cumulative update", config.Revision{PatchLevel: "10.0.20348.2762"}, behind,
			&host.PreflightFindings{SystemDrive: "C:", FreeBytes: 42 << 30, Sources: []host.SourceCheck{{Name: "WSUS http://wsus.corp:8530"}},
				Offer: &host.UpdateOffer{Refusal: "Windows Update offers no servicing stack or cumulative update for this host (offered: KB890830)"}}, "",
			[]string{
				"  ok      WSUS http://wsus.corp:8530",
				"  FAILED  nothing the install would take: Windows Update offers no servicing stack or cumulative update for this host (offered: KB890830)",
			}, preflightBlocked},
		{"Windows Update offers the cumulative update", config.Revision{PatchLevel: "10.0.20348.2762"}, behind,
			&host.PreflightFindings{SystemDrive: "C:", FreeBytes: 42 << 30, Sources: []host.SourceCheck{{Name: "WSUS http://wsus.corp:8530"}},
				Offer: &host.UpdateOffer{Takes: []string{"KB5050002: 2026-12 Cumulative Update"}}}, "",
			[]string{
				"  ok      offered: KB5050002: 2026-12 Cumulative Update",
				"note: Windows Update offers what the install takes: KB5050002: 2026-12 Cumulative Update",
				"Ready",
			}, preflightReady},
		{"nothing to update, the node image's CSI Proxy", config.Revision{PatchLevel: "10.0.20348.2762", CSIProxyVersion: strp("v1.1.3")},
			host.Observed{Build: mustBuild("10.0.20348.2800"), CSIProxyHost: &host.CSIProxyHost{Service: host.Service{Name: "csi-proxy", Wrapper: host.WrapperNSSM}, PipesAnswer: true}},
			nil, "",
			[]string{
				"update: none needed (10.0.20348.2800 is at or past 10.0.20348.2762)",
				"note: CSI Proxy runs as the host service csi-proxy (nssm) (pipes answer: true)",
				"Ready",
			}, preflightReady},
		{"another release", config.Revision{PatchLevel: "10.0.20348.2762"}, host.Observed{Build: mustBuild("10.0.17763.6414")}, nil, "",
			[]string{"update: not checked (the host runs another release than 10.0.20348.2762)"}, preflightBlocked},
		{"a patch level that does not read", config.Revision{PatchLevel: "ltsc2022"}, behind, nil, "",
			[]string{"update: not checked (the patch level does not read)"}, preflightBlocked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := decide.PreflightInput{Config: tc.cfg, Observed: tc.obs, Findings: tc.findings}
			res := decide.Preflight(in)
			var out bytes.Buffer
			exit := printPreflight(&out, preflightReport{Heading: heading, Input: in, Result: res, APIServer: tc.api})
			if exit != tc.wantExit {
				t.Errorf("exit %d, want %d", exit, tc.wantExit)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if !containsInOrder(lines, tc.wantLines) {
				t.Errorf("output\n%s\nwant these lines in this order\n%s", out.String(), strings.Join(tc.wantLines, "\n"))
			}
			last := lines[len(lines)-1]
			if last != res.String() || (tc.wantExit == preflightReady) != (last == "Ready") || (tc.wantExit == preflightBlocked) != strings.HasPrefix(last, "Blocked: ") {
				t.Errorf("last line %q, want the verdict %q", last, res.String())
			}
		})
	}
}

// containsInOrder: every line of want is in got, in want's order.
func containsInOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// stubMachine is what a case's host answers: the command's output is under
// test here, not the host (windows.Host's preflight has its own tests).
type stubMachine struct {
	Build             host.Build
	CNIMode           string
	ObserveError      func(n int) error
	SourceUnreachable string
	FreeBytes         int64
}

// stubHost answers Observe and Preflight as its stubMachine says.
type stubHost struct {
	host.Host // nil: nothing else is called
	m         stubMachine
}

func (s stubHost) Observe(context.Context) (host.Observed, error) {
	if s.m.ObserveError != nil {
		if err := s.m.ObserveError(1); err != nil {
			return host.Observed{}, err
		}
	}
	return host.Observed{Build: s.m.Build, CNIMode: s.m.CNIMode}, nil
}

func (s stubHost) Preflight(_ context.Context, req host.UpdateRequest) host.PreflightFindings {
	f := host.PreflightFindings{SystemDrive: "C:", FreeBytes: s.m.FreeBytes}
	if f.FreeBytes == 0 {
		f.FreeBytes = 64 << 30
	}
	names := []string{"Windows Update"}
	if len(req.Packages) > 0 {
		names = names[:0]
		for _, p := range req.Packages {
			names = append(names, p.Name())
		}
	}
	for _, n := range names {
		f.Sources = append(f.Sources, host.SourceCheck{Name: n, Err: s.m.SourceUnreachable})
	}
	return f
}

// preflightCounter counts the host's preflights.
type preflightCounter struct {
	host.Host
	calls int
}

func (p *preflightCounter) Preflight(ctx context.Context, req host.UpdateRequest) host.PreflightFindings {
	p.calls++
	return p.Host.Preflight(ctx, req)
}

func utf16LE(s string) []byte {
	b := []byte{0xFF, 0xFE}
	for _, u := range utf16.Encode([]rune(s)) {
		b = append(b, byte(u), byte(u>>8))
	}
	return b
}

// TestRunPreflight: the command end to end on the simulated host: exit 2
// when it cannot run (flags, config, host), 0 Ready, 1 Blocked, and the
// host's own checks only when an update is needed.
func TestRunPreflight(t *testing.T) {
	digest := strings.Repeat("ab", 32)
	packagesJSON := `{"revision": "5f1c9a2e01", "pool": "win22", "patchLevel": "10.0.20348.2762", "cniMode": "overlay",
	 "updates": {"source": "Packages", "packages": [{"url": "https://updates.example.com/kb5044281.msu", "sha256": "` + digest + `"}]}}`
	files := map[string][]byte{
		"config.json":       []byte(packagesJSON),
		"config-utf16.json": utf16LE(packagesJSON),
		"broken.json":       []byte(`{"revision": "r1"`),
		`C:\k\config`:       []byte(kubeletKubeconfigText),
	}
	readFile := func(p string) ([]byte, error) {
		if b, ok := files[p]; ok {
			return b, nil
		}
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	behind := stubMachine{Build: mustBuild("10.0.20348.2700"), CNIMode: "overlay"}
	for _, tc := range []struct {
		name          string
		args          []string
		machine       stubMachine
		hostErr       error
		wantExit      int
		wantPreflight int
		wantOut       []string
		wantErr       string
	}{
		{"no flags", nil, behind, nil, preflightCannotRun, 0, nil, "give either --config or --patch-level"},
		{"both flags", []string{"--config", "config.json", "--patch-level", "10.0.20348.2762"}, behind, nil, preflightCannotRun, 0, nil, "give either --config or --patch-level"},
		{"an unknown flag", []string{"--pool", "win22"}, behind, nil, preflightCannotRun, 0, nil, "flag provided but not defined: -pool"},
		{"a stray argument", []string{"--patch-level", "10.0.20348.2762", "now"}, behind, nil, preflightCannotRun, 0, nil, "give either --config or --patch-level"},
		{"a patch level that is no build", []string{"--patch-level", "ltsc2022"}, behind, nil, preflightCannotRun, 0, nil, `--patch-level: "ltsc2022" is not a Windows build`},
		{"a config that is not there", []string{"--config", "missing.json"}, behind, nil, preflightCannotRun, 0, nil, "reading the revision's config: open missing.json"},
		{"a config that is not JSON", []string{"--config", "broken.json"}, behind, nil, preflightCannotRun, 0, nil, "broken.json: config.json is not valid JSON"},
		{"a host that is not usable", []string{"--patch-level", "10.0.20348.2762"}, behind, errors.New(`C:\ProgramData\winpool is owned by S-1-5-21-1 (CORP\eve)`), preflightCannotRun, 0, nil,
			`the host is not usable: C:\ProgramData\winpool is owned by S-1-5-21-1 (CORP\eve)`},
		{"a host that cannot be read", []string{"--patch-level", "10.0.20348.2762"},
			stubMachine{Build: behind.Build, ObserveError: func(int) error { return errors.New("containerd --version: timed out") }}, nil, preflightCannotRun, 0, nil,
			"cannot read the host: containerd --version: timed out"},
		{"a patch level from Windows Update, ready", []string{"--patch-level", "10.0.20348.2762"}, behind, nil, preflightReady, 1,
			[]string{"patch level 10.0.20348.2762 from Windows Update (or the node's WSUS)", "  ok      Windows Update", "  ok      C: has 64.0 GiB free (an update needs 10.0 GiB)",
				"note: API server https://10.240.0.4:6443 (the kubelet's kubeconfig) does not answer a TCP dial: dial tcp 10.240.0.4:6443: connect: connection refused", "Ready"}, ""},
		{"the revision's packages, ready", []string{"--config", "config.json"}, behind, nil, preflightReady, 1,
			[]string{"revision 5f1c9a2e01 of pool win22: patch level 10.0.20348.2762 from Packages", "  ok      https://updates.example.com/kb5044281.msu", "Ready"}, ""},
		{"a config PowerShell wrote in UTF-16", []string{"-config=config-utf16.json"}, behind, nil, preflightReady, 1,
			[]string{"revision 5f1c9a2e01 of pool win22: patch level 10.0.20348.2762 from Packages", "Ready"}, ""},
		{"a source the host does not reach", []string{"--config", "config.json"},
			stubMachine{Build: behind.Build, CNIMode: "overlay", SourceUnreachable: "dial tcp: i/o timeout"}, nil, preflightBlocked, 1,
			[]string{"  FAILED  https://updates.example.com/kb5044281.msu: dial tcp: i/o timeout",
				"Blocked: update source https://updates.example.com/kb5044281.msu cannot be reached: dial tcp: i/o timeout"}, ""},
		{"too little room", []string{"--config", "config.json"}, stubMachine{Build: behind.Build, CNIMode: "overlay", FreeBytes: 2 << 30}, nil, preflightBlocked, 1,
			[]string{"  FAILED  C: has 2.0 GiB free, an update needs 10.0 GiB"}, ""},
		{"already at the patch level: no source is checked", []string{"--config", "config.json"},
			stubMachine{Build: mustBuild("10.0.20348.2762"), CNIMode: "overlay", SourceUnreachable: "dial tcp: i/o timeout"}, nil, preflightReady, 0,
			[]string{"update: none needed (10.0.20348.2762 is at or past 10.0.20348.2762)", "Ready"}, ""},
		{"another release", []string{"--config", "config.json"}, stubMachine{Build: mustBuild("10.0.17763.6414"), CNIMode: "overlay"}, nil, preflightBlocked, 0,
			[]string{"Blocked: node runs 10.0.17763.6414, the pool asks 10.0.20348.2762: an update never changes the Windows release; reimage the node"}, ""},
		{"another CNI", []string{"--config", "config.json"}, stubMachine{Build: mustBuild("10.0.20348.2762"), CNIMode: "l2bridge"}, nil, preflightBlocked, 0,
			[]string{"Blocked: HNS network is l2bridge, the pool asks for overlay: the agent does not switch a CNI in place"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &preflightCounter{Host: stubHost{m: tc.machine}}
			env := preflightEnv{
				newHost:  func() (host.Host, error) { return h, tc.hostErr },
				readFile: readFile,
				getenv:   func(string) string { return "" },
				dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
					return nil, &net.OpError{Op: "dial", Net: network, Addr: tcpAddr(t, addr), Err: errors.New("connect: connection refused")}
				},
			}
			var stdout, stderr bytes.Buffer
			exit := runPreflight(context.Background(), tc.args, &stdout, &stderr, env)
			if exit != tc.wantExit {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", exit, tc.wantExit, stdout.String(), stderr.String())
			}
			if h.calls != tc.wantPreflight {
				t.Errorf("the host's preflight ran %d times, want %d", h.calls, tc.wantPreflight)
			}
			lines := strings.Split(stdout.String(), "\n")
			if !containsInOrder(lines, tc.wantOut) {
				t.Errorf("stdout\n%s\nwant these lines in this order\n%s", stdout.String(), strings.Join(tc.wantOut, "\n"))
			}
			if tc.wantErr != "" && !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("stderr %q, want it to say %q", stderr.String(), tc.wantErr)
			}
			if tc.wantExit == preflightCannotRun && stdout.Len() > 0 {
				t.Errorf("a run that could not check printed a report:\n%s", stdout.String())
			}
		})
	}
}

func tcpAddr(t *testing.T, addr string) net.Addr {
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatalf("dialled %q, not a host:port", addr)
	}
	return a
}

// TestAPIServerNote: the kubelet's API server dialled at its host and
// port; nothing else of its kubeconfig (the kubelet's credentials) shown.
func TestAPIServerNote(t *testing.T) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	kubeconfig := func(server string) []byte {
		return []byte(strings.Replace(kubeletKubeconfigText, "https://10.240.0.4:6443", server, 1))
	}
	files := map[string][]byte{
		`C:\k\config`:            kubeconfig("https://" + listener.Addr().String()),
		`D:\kubelet\down.conf`:   kubeconfig("https://" + closedAddr),
		`D:\kubelet\noport.conf`: kubeconfig("https://api.cluster.example"),
		`D:\kubelet\http.conf`:   kubeconfig("http://10.240.0.4:8080"),
	}
	var dialled []string
	for _, tc := range []struct {
		name, setting, want string
		dialled             []string
	}{
		{"the kubelet's endpoint answers", "", "API server https://" + listener.Addr().String() + " (the kubelet's kubeconfig) answers a TCP dial", []string{listener.Addr().String()}},
		{"it does not", `D:\kubelet\down.conf`, "API server https://" + closedAddr + " (the kubelet's kubeconfig) does not answer a TCP dial: dial tcp " + closedAddr + ": ", []string{closedAddr}},
		{"the https port by default", `D:\kubelet\noport.conf`, "API server https://api.cluster.example:443 (the kubelet's kubeconfig) does not answer", []string{"api.cluster.example:443"}},
		{"no kubelet kubeconfig", `D:\kubelet\none.conf`, `API server: no kubelet kubeconfig with an https server at D:\kubelet\none.conf`, nil},
		{"an http server is not the agent's", `D:\kubelet\http.conf`, `API server: no kubelet kubeconfig with an https server at D:\kubelet\http.conf`, nil},
		{"told to look for none", "none", "API server: not checked (WINPOOL_KUBELET_KUBECONFIG=none)", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dialled = nil
			env := preflightEnv{
				readFile: func(p string) ([]byte, error) {
					if b, ok := files[p]; ok {
						return b, nil
					}
					return nil, fs.ErrNotExist
				},
				getenv: func(k string) string { return map[string]string{"WINPOOL_KUBELET_KUBECONFIG": tc.setting}[k] },
				dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
					dialled = append(dialled, addr)
					if addr == "api.cluster.example:443" {
						return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("lookup api.cluster.example: no such host")}
					}
					return (&net.Dialer{}).DialContext(ctx, network, addr)
				},
			}
			got := apiServerNote(context.Background(), env)
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("note %q, want %q", got, tc.want)
			}
			if strings.Join(dialled, ",") != strings.Join(tc.dialled, ",") {
				t.Errorf("dialled %q, want %q", dialled, tc.dialled)
			}
			for _, secret := range []string{"client.key", "client.crt", "ca.crt"} {
				if strings.Contains(got, secret) {
					t.Errorf("note %q shows the kubeconfig's %s", got, secret)
				}
			}
		})
	}
}

func TestConfigText(t *testing.T) {
	const j = `{"revision": "r1", "pool": "wïn"}`
	be := []byte{0xFE, 0xFF}
	for _, u := range utf16.Encode([]rune(j)) {
		be = append(be, byte(u>>8), byte(u))
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want string
		err  bool
	}{
		{"UTF-8", []byte(j), j, false},
		{"UTF-8 with a byte order mark", append([]byte{0xEF, 0xBB, 0xBF}, j...), j, false},
		{"UTF-16 LE (Windows PowerShell's >)", utf16LE(j), j, false},
		{"UTF-16 BE", be, j, false},
		{"UTF-16 cut short", utf16LE(j)[:7], "", true},
	} {
		got, err := configText(tc.in)
		if (err != nil) != tc.err || string(got) != tc.want {
			t.Errorf("%s: %q, %v; want %q (error: %v)", tc.name, got, err, tc.want, tc.err)
		}
	}
}
