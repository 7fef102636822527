package runtimeswap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"winpool.dev/agent/internal/host"
)

// machine is a fake node: services that stop and start, and a containerd
// whose --version is whatever containerd.exe in the install folder holds
// (the binaries in these tests are version strings), unless it fails to
// start.
type machine struct {
	running map[string]bool
	calls   []string
	// failStop / failStart: the n-th call (1-based) of that kind fails with err.
	failStop, failStart int
	stops, starts       int
	// newFailsToStart: containerd does not start while the new binary is installed.
	newFailsToStart bool
	installDir      string
	// answersBeforeCrash: the new containerd answers over CRI this many
	// times, then crash-loops (its service still Running); 0: it never does.
	answersBeforeCrash, answers int
	// kubeletUnhealthy: the kubelet's healthz fails after the swap.
	kubeletUnhealthy bool
	// migrations: config files `containerd config migrate` was run on.
	migrations []string
}

func (m *machine) Stop(_ context.Context, s string) error {
	m.stops++
	m.calls = append(m.calls, "stop "+s)
	if m.stops == m.failStop {
		return errors.New("access denied")
	}
	m.running[s] = false
	return nil
}

func (m *machine) Start(_ context.Context, s string) error {
	m.starts++
	m.calls = append(m.calls, "start "+s)
	if m.starts == m.failStart {
		return errors.New("the service did not respond")
	}
	if s == "containerd" && m.newFailsToStart {
		if b, _ := os.ReadFile(filepath.Join(m.installDir, "containerd.exe")); strings.Contains(string(b), "v1.7.22") {
			return errors.New("stopped while starting (exit code 1067)")
		}
	}
	m.running[s] = true
	return nil
}

// RuntimeVersion is what the installed containerd.exe says over CRI while its service runs.
func (m *machine) RuntimeVersion(context.Context) (string, error) {
	if !m.running["containerd"] {
		return "", errors.New("open \\\\.\\pipe\\containerd-containerd: The system cannot find the file specified.")
	}
	b, err := os.ReadFile(filepath.Join(m.installDir, "containerd.exe"))
	if err != nil {
		return "", err
	}
	v := strings.Fields(string(b))[2]
	if v == "v1.7.22" || v == "v2.0.1" {
		m.answers++
		if m.answersBeforeCrash > 0 && m.answers > m.answersBeforeCrash {
			return "", errors.New("rpc error: code = Unavailable desc = connection error")
		}
	}
	return v, nil
}

func (m *machine) KubeletHealthy(context.Context) error {
	if !m.running["kubelet"] || m.kubeletUnhealthy {
		return errors.New("Get \"http://127.0.0.1:10248/healthz\": connection refused")
	}
	return nil
}

func (m *machine) MigrateConfig(_ context.Context, _ string, path string) ([]byte, error) {
	m.migrations = append(m.migrations, path)
	b, err := os.ReadFile(path)
	return append([]byte("version = 3\n"), b...), err
}

const (
	oldContainerd = "containerd github.com/containerd/containerd v1.7.20 8fc6bcff51318944179630522a095cc9dbf9f353"
	newContainerd = "containerd github.com/containerd/containerd v1.7.22 7f7fdf5fed64eb6a7caf99b3e12efcf9d60e311c"
	config        = "[plugins.\"io.containerd.grpc.v1.cri\".cni]\n  bin_dir = \"c:/opt/cni/bin\"\n"
)

// node lays out an install folder with containerd 1.7.20 and its config, and
// new 1.7.22 binaries ready to go in.
func node(t *testing.T) (Plan, *machine) {
	root := t.TempDir()
	p := Plan{Revision: "r1", Attempt: 1, Version: "1.7.22",
		InstallDir:  filepath.Join(root, "Program Files", "containerd"),
		NewDir:      filepath.Join(root, "winpool", "runtime", "r1-1", "new"),
		BackupDir:   filepath.Join(root, "winpool", "runtime", "r1-1", "old"),
		ResultFile:  filepath.Join(root, "winpool", "runtime", "result.json"),
		Services:    []string{"kubelet", "containerd"},
		Started:     time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC),
		From:        "1.7.20",
		StartWithin: 30 * time.Millisecond, SettleFor: 10 * time.Millisecond, CheckEvery: time.Millisecond}
	for dir, files := range map[string]map[string]string{
		p.InstallDir: {"containerd.exe": oldContainerd, "containerd-shim-runhcs-v1.exe": "old shim", "ctr.exe": "old ctr", "config.toml": config},
		p.NewDir:     {"containerd.exe": newContainerd, "containerd-shim-runhcs-v1.exe": "new shim", "ctr.exe": "new ctr", "containerd-stress.exe": "new stress"},
	} {
		os.MkdirAll(dir, 0o700)
		for n, c := range files {
			os.WriteFile(filepath.Join(dir, n), []byte(c), 0o700)
		}
	}
	return p, &machine{running: map[string]bool{"kubelet": true, "containerd": true}, installDir: p.InstallDir}
}

func installed(t *testing.T, p Plan) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, _ := os.ReadDir(p.InstallDir)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(p.InstallDir, e.Name()))
		out[e.Name()] = string(b)
	}
	return out
}

var oldInstall = map[string]string{"containerd.exe": oldContainerd, "containerd-shim-runhcs-v1.exe": "old shim", "ctr.exe": "old ctr", "config.toml": config}

func TestSwapSucceeds(t *testing.T) {
	p, m := node(t)
	r := Run(context.Background(), p, m)
	if r.Phase != host.RuntimeSucceeded {
		t.Fatalf("phase %s (%s), want Succeeded", r.Phase, r.Message)
	}
	want := map[string]string{"containerd.exe": newContainerd, "containerd-shim-runhcs-v1.exe": "new shim", "ctr.exe": "new ctr",
		"containerd-stress.exe": "new stress", "config.toml": config}
	if got := installed(t, p); !reflect.DeepEqual(got, want) {
		t.Errorf("install folder = %v, want the new binaries and the config untouched", got)
	}
	if b, _ := os.ReadFile(filepath.Join(p.BackupDir, "containerd.exe")); string(b) != oldContainerd {
		t.Errorf("old containerd.exe not kept in %s", p.BackupDir)
	}
	if want := []string{"stop kubelet", "stop containerd", "start containerd", "start kubelet"}; !reflect.DeepEqual(m.calls, want) {
		t.Errorf("service calls %v, want %v", m.calls, want)
	}
	assertResultFile(t, p, host.RuntimeSucceeded)
}

func TestSwapRollsBack(t *testing.T) {
	for _, tc := range []struct {
		name     string
		setup    func(*machine)
		inMsg    string
		wantCall []string
	}{
		{"new containerd does not start", func(m *machine) { m.newFailsToStart = true }, "starting containerd: stopped while starting",
			[]string{"stop kubelet", "stop containerd", "start containerd", "stop kubelet", "stop containerd", "start containerd", "start kubelet"}},
		{"kubelet does not start after the swap", func(m *machine) { m.failStart = 2 }, "starting kubelet",
			[]string{"stop kubelet", "stop containerd", "start containerd", "start kubelet", "stop kubelet", "stop containerd", "start containerd", "start kubelet"}},
		{"containerd cannot be stopped: nothing changed, kubelet started again", func(m *machine) { m.failStop = 2 }, "stopping containerd: access denied",
			[]string{"stop kubelet", "stop containerd", "start kubelet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, m := node(t)
			tc.setup(m)
			r := Run(context.Background(), p, m)
			if r.Phase != host.RuntimeRolledBack || !strings.Contains(r.Message, tc.inMsg) {
				t.Fatalf("phase %s (%s), want RolledBack naming %q", r.Phase, r.Message, tc.inMsg)
			}
			if got := installed(t, p); !reflect.DeepEqual(got, oldInstall) {
				t.Errorf("install folder after rollback = %v, want the old binaries back", got)
			}
			if !reflect.DeepEqual(m.calls, tc.wantCall) {
				t.Errorf("service calls %v, want %v", m.calls, tc.wantCall)
			}
			if !m.running["kubelet"] || !m.running["containerd"] {
				t.Errorf("after rollback running = %v, want both services running", m.running)
			}
			assertResultFile(t, p, host.RuntimeRolledBack)
		})
	}
}

func TestSwapVersionMismatchRollsBack(t *testing.T) {
	p, m := node(t)
	os.WriteFile(filepath.Join(p.NewDir, "containerd.exe"), []byte("containerd github.com/containerd/containerd v1.7.21 abc"), 0o700)
	r := Run(context.Background(), p, m)
	if r.Phase != host.RuntimeRolledBack || !strings.Contains(r.Message, `reports "1.7.21" over CRI after the swap, not 1.7.22`) {
		t.Fatalf("phase %s (%s), want RolledBack on the version", r.Phase, r.Message)
	}
	if got := installed(t, p); !reflect.DeepEqual(got, oldInstall) {
		t.Errorf("install folder = %v, want the old binaries back", got)
	}
}

func TestFailedRollbackIsFailed(t *testing.T) {
	p, m := node(t)
	m.newFailsToStart = true
	m.failStart = 2 // the rollback's start of containerd fails too
	r := Run(context.Background(), p, m)
	if r.Phase != host.RuntimeFailed || !strings.Contains(r.Message, "rolling back") {
		t.Fatalf("phase %s (%s), want Failed saying the rollback failed", r.Phase, r.Message)
	}
	assertResultFile(t, p, host.RuntimeFailed)
}

func assertResultFile(t *testing.T, p Plan, want host.RuntimePhase) {
	t.Helper()
	r, err := ReadResult(p.ResultFile)
	if err != nil || r == nil {
		t.Fatalf("result file: %v, %v", r, err)
	}
	if r.Phase != want || r.Revision != p.Revision || r.Attempt != p.Attempt || !r.Started.Equal(p.Started) {
		t.Errorf("result file = %+v, want phase %s for %s attempt %d", r, want, p.Revision, p.Attempt)
	}
}

func TestPlanRoundTrip(t *testing.T) {
	p, _ := node(t)
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := WriteJSON(path, p); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPlan(path)
	if err != nil || !reflect.DeepEqual(got, p) {
		t.Errorf("ReadPlan = %+v, %v; want %+v", got, err, p)
	}
	os.WriteFile(path, []byte(`{"version": "1.7.22"}`), 0o600)
	if _, err := ReadPlan(path); err == nil {
		t.Error("a plan without folders: want an error")
	}
	if r, err := ReadResult(filepath.Join(t.TempDir(), "none.json")); r != nil || err != nil {
		t.Errorf("no result file: %v, %v; want nil, nil", r, err)
	}
}

// A runtime that answers and then crash-loops under its service wrapper, or
// never answers, or leaves the kubelet unhealthy, is rolled back: the
// service manager's Running proves nothing.
func TestSwapIsProvenOverCRIAndByTheKubelet(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*machine)
		inMsg string
	}{
		{"answers twice, then crash-loops", func(m *machine) { m.answersBeforeCrash = 2 }, "then stopped answering"},
		{"never answers", func(m *machine) { m.answersBeforeCrash = -1 }, "did not come up within"},
		{"kubelet unhealthy", func(m *machine) { m.kubeletUnhealthy = true }, "kubelet healthz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, m := node(t)
			tc.setup(m)
			if m.answersBeforeCrash < 0 {
				m.answersBeforeCrash, m.answers = 1, 1 // every answer is past the crash
			}
			r := Run(context.Background(), p, m)
			if r.Phase != host.RuntimeRolledBack || !strings.Contains(r.Message, tc.inMsg) {
				t.Fatalf("phase %s (%s), want RolledBack naming %q", r.Phase, r.Message, tc.inMsg)
			}
			if got := installed(t, p); !reflect.DeepEqual(got, oldInstall) {
				t.Errorf("install folder after rollback = %v, want the old binaries back", got)
			}
			if !m.running["kubelet"] || !m.running["containerd"] {
				t.Errorf("after rollback running = %v, want both services running", m.running)
			}
		})
	}
}

// 1.x -> 2.x: config.toml is migrated by the new containerd, the original
// kept; a rollback puts the original back. A minor upgrade leaves it alone.
func TestAMajorJumpMigratesTheConfigAndARollbackRestoresIt(t *testing.T) {
	const v2 = "containerd github.com/containerd/containerd/v2 v2.0.1 88c3d9bc"
	for _, crash := range []bool{false, true} {
		p, m := node(t)
		p.Version = "2.0.1"
		os.WriteFile(filepath.Join(p.NewDir, "containerd.exe"), []byte(v2), 0o700)
		if crash {
			m.answersBeforeCrash = 1
		}
		r := Run(context.Background(), p, m)
		if want := []string{p.ConfigFile()}; !reflect.DeepEqual(m.migrations, want) {
			t.Errorf("crash %v: migrations %v, want %v", crash, m.migrations, want)
		}
		got, _ := os.ReadFile(p.ConfigFile())
		kept, _ := os.ReadFile(filepath.Join(p.BackupDir, "config.toml"))
		if string(kept) != config {
			t.Errorf("crash %v: the original config is not kept: %q", crash, kept)
		}
		switch {
		case !crash && (r.Phase != host.RuntimeSucceeded || string(got) != "version = 3\n"+config):
			t.Errorf("phase %s (%s), config %q: want Succeeded with the migrated config", r.Phase, r.Message, got)
		case crash && (r.Phase != host.RuntimeRolledBack || string(got) != config):
			t.Errorf("phase %s (%s), config %q: want RolledBack with the original config", r.Phase, r.Message, got)
		}
	}
	p, m := node(t)
	if r := Run(context.Background(), p, m); r.Phase != host.RuntimeSucceeded || len(m.migrations) != 0 {
		t.Errorf("1.7.20 -> 1.7.22: phase %s, migrations %v; want Succeeded and none", r.Phase, m.migrations)
	}
}

// A version 2 config (what AKS and EKS images write) is read by containerd
// 2.x as it is, migrated in memory: a major jump leaves the file alone.
func TestAMajorJumpLeavesAVersion2ConfigAsItIs(t *testing.T) {
	const v2 = "containerd github.com/containerd/containerd/v2 v2.0.1 88c3d9bc"
	const version2 = "version = 2 # the node image's\n\n" + config
	p, m := node(t)
	p.Version = "2.0.1"
	os.WriteFile(filepath.Join(p.NewDir, "containerd.exe"), []byte(v2), 0o700)
	os.WriteFile(p.ConfigFile(), []byte(version2), 0o600)
	r := Run(context.Background(), p, m)
	got, _ := os.ReadFile(p.ConfigFile())
	if r.Phase != host.RuntimeSucceeded || len(m.migrations) != 0 || string(got) != version2 {
		t.Errorf("phase %s (%s), migrations %v, config %q: want Succeeded, no migration, the file as it was", r.Phase, r.Message, m.migrations, got)
	}
	for toml, want := range map[string]int{config: 1, version2: 2, "version=3\n": 3, "[x]\nversion = 2\n": 1, "version = 1\n" + config: 1} {
		if got := configVersion([]byte(toml)); got != want {
			t.Errorf("configVersion(%q) = %d, want %d", toml, got, want)
		}
	}
}
