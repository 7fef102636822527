package windows

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/runtimeswap"
)

func TestContainerdInstallSet(t *testing.T) {
	release := []stagedFile{{Name: "containerd.exe"}, {Name: "containerd-shim-runhcs-v1.exe"}, {Name: "ctr.exe"}, {Name: "containerd-stress.exe"}}
	all := []binary{{"containerd-shim-runhcs-v1.exe", "containerd-shim-runhcs-v1.exe"}, {"containerd-stress.exe", "containerd-stress.exe"},
		{"containerd.exe", "containerd.exe"}, {"ctr.exe", "ctr.exe"}}
	with := func(extra ...stagedFile) []stagedFile { return append(append([]stagedFile{}, release...), extra...) }
	for _, c := range []struct {
		name   string
		staged []stagedFile
		want   []binary
		word   string // an error naming this
	}{
		{"a release's bin folder", release, all, ""},
		{"containerd alone", []stagedFile{{Name: "containerd.exe"}}, []binary{{"containerd.exe", "containerd.exe"}}, ""},
		{"anything else is ignored", with(stagedFile{Name: "evil.exe"}, stagedFile{Name: "payload.dll"}, stagedFile{Name: "readme.txt"},
			stagedFile{Name: "containerd.exe.bak"}, stagedFile{Name: "sub", Type: fs.ModeDir}, stagedFile{Name: "link.exe", Type: fs.ModeSymlink}), all, ""},
		{"names are matched as Windows does", []stagedFile{{Name: "Containerd.EXE"}, {Name: "CTR.exe"}},
			[]binary{{"Containerd.EXE", "containerd.exe"}, {"CTR.exe", "ctr.exe"}}, ""},
		{"no containerd.exe", []stagedFile{{Name: "ctr.exe"}, {Name: "evil.exe"}}, nil, "no containerd.exe"},
		{"nothing", nil, nil, "no containerd.exe"},
		{"containerd.exe is a folder", []stagedFile{{Name: "containerd.exe", Type: fs.ModeDir}}, nil, "containerd.exe is not a plain file"},
		{"ctr.exe is a link", []stagedFile{{Name: "containerd.exe"}, {Name: "ctr.exe", Type: fs.ModeSymlink}}, nil, "ctr.exe is not a plain file"},
		{"a name twice", with(stagedFile{Name: "CTR.EXE"}), nil, "the same name"},
	} {
		got, err := containerdInstallSet(c.staged)
		if c.word != "" {
			if err == nil || !strings.Contains(err.Error(), c.word) {
				t.Errorf("%s: %v, %v; want an error naming %q", c.name, got, err, c.word)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

// swapMachineFake is the service manager for runSwap on Linux: services
// stop and start, and containerd answers over CRI with the version
// containerd.exe (a version string here) holds.
type swapMachineFake struct {
	calls      []string
	installDir string
}

func (m *swapMachineFake) Stop(_ context.Context, s string) error {
	m.calls = append(m.calls, "stop "+s)
	return nil
}

func (m *swapMachineFake) Start(_ context.Context, s string) error {
	m.calls = append(m.calls, "start "+s)
	return nil
}

func (m *swapMachineFake) RuntimeVersion(context.Context) (string, error) {
	b, err := os.ReadFile(filepath.Join(m.installDir, "containerd.exe"))
	if err != nil {
		return "", err
	}
	return strings.Fields(string(b))[2], nil
}

func (m *swapMachineFake) KubeletHealthy(context.Context) error { return nil }

func (m *swapMachineFake) MigrateConfig(context.Context, string, string) ([]byte, error) {
	return nil, errors.New("no major version jump in these tests")
}

const newContainerd = "containerd github.com/containerd/containerd v1.7.22 7f7fdf5fed64eb6a7caf99b3e12efcf9d60e311c"

// swapPlan lays out containerd 1.7.20 installed and 1.7.22 staged in new\
// with the given extra files, and writes the plan.
func swapPlan(t *testing.T, staged map[string]string) (planFile string, p runtimeswap.Plan) {
	root := t.TempDir()
	work := filepath.Join(root, "winpool", "runtime", "r1-1")
	p = runtimeswap.Plan{Revision: "r1", Attempt: 1, Version: "1.7.22",
		InstallDir: filepath.Join(root, "Program Files", "containerd"), NewDir: filepath.Join(work, "new"),
		BackupDir: filepath.Join(work, "old"), ResultFile: filepath.Join(root, "winpool", "runtime", "result.json"),
		Services: swapServices, Started: time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC),
		StartWithin: 20 * time.Millisecond, SettleFor: 5 * time.Millisecond, CheckEvery: time.Millisecond}
	for name, body := range map[string]string{"containerd.exe": "containerd github.com/containerd/containerd v1.7.20 8fc6bcff", "ctr.exe": "old ctr", "config.toml": "cni"} {
		write(t, filepath.Join(p.InstallDir, name))
		os.WriteFile(filepath.Join(p.InstallDir, name), []byte(body), 0o600)
	}
	for name, body := range staged {
		write(t, filepath.Join(p.NewDir, filepath.FromSlash(name)))
		os.WriteFile(filepath.Join(p.NewDir, filepath.FromSlash(name)), []byte(body), 0o600)
	}
	planFile = filepath.Join(work, "plan.json")
	if err := runtimeswap.WriteJSON(planFile, p); err != nil {
		t.Fatal(err)
	}
	return planFile, p
}

func installed(t *testing.T, dir string) map[string]string {
	files := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		files[e.Name()] = string(b)
	}
	return files
}

func TestRunSwapInstallsOnlyTheNamedBinaries(t *testing.T) {
	planFile, p := swapPlan(t, map[string]string{"containerd.exe": newContainerd, "ctr.exe": "new ctr",
		"evil.exe": "planted", "version.dll": "planted", "sub/more.exe": "planted"})
	m := &swapMachineFake{installDir: p.InstallDir}
	r, err := runSwap(context.Background(), planFile, m)
	if err != nil || r.Phase != host.RuntimeSucceeded {
		t.Fatalf("runSwap = %+v, %v; want Succeeded", r, err)
	}
	want := map[string]string{"containerd.exe": newContainerd, "ctr.exe": "new ctr", "config.toml": "cni"}
	if got := installed(t, p.InstallDir); !reflect.DeepEqual(got, want) {
		t.Errorf("containerd's folder holds %v, want %v (nothing but the named binaries installed)", got, want)
	}
	var names []string
	for n := range installed(t, filepath.Join(filepath.Dir(p.NewDir), "install")) {
		names = append(names, n)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "containerd.exe,ctr.exe" {
		t.Errorf("install\\ holds %v", names)
	}
	if got, _ := runtimeswap.ReadResult(p.ResultFile); got == nil || got.Phase != host.RuntimeSucceeded {
		t.Errorf("result file %+v, want Succeeded", got)
	}
}

func TestRunSwapWithoutContainerdChangesNothing(t *testing.T) {
	planFile, p := swapPlan(t, map[string]string{"ctr.exe": "new ctr", "containerd.exe.txt": "not it"})
	m := &swapMachineFake{installDir: p.InstallDir}
	r, err := runSwap(context.Background(), planFile, m)
	if err != nil {
		t.Fatal(err)
	}
	if r.Phase != host.RuntimeRolledBack || !strings.Contains(r.Message, "nothing was stopped or replaced") || !strings.Contains(r.Message, "no containerd.exe") ||
		!strings.Contains(r.Message, p.NewDir) {
		t.Errorf("result %+v, want RolledBack saying nothing changed and why", r)
	}
	if len(m.calls) != 0 {
		t.Errorf("services touched: %v", m.calls)
	}
	if got, _ := runtimeswap.ReadResult(p.ResultFile); got == nil || got.Phase != host.RuntimeRolledBack || got.Message != r.Message {
		t.Errorf("result file %+v, want %+v", got, r)
	}
	if got := installed(t, p.InstallDir); got["ctr.exe"] != "old ctr" {
		t.Errorf("containerd's folder changed: %v", got)
	}
}
