package windows

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/runtimeswap"
	"winpool.dev/agent/internal/stage"
)

const containerdArchive = "containerd-1.7.22-windows-amd64.tar.gz"

func releaseArchive(t *testing.T) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range map[string]string{"bin/containerd.exe": "containerd 1.7.22", "bin/ctr.exe": "ctr 1.7.22"} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// releases serves containerd 1.7.22 laid out as containerd's GitHub releases
// are, with the published .sha256sum next to the archive.
func releases(t *testing.T, sumLine string) (*httptest.Server, []byte) {
	arch := releaseArchive(t)
	if sumLine == "" {
		sumLine = digest(string(arch)) + "  " + containerdArchive + "\n"
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1.7.22/" + containerdArchive:
			w.Write(arch)
		case "/v1.7.22/" + containerdArchive + ".sha256sum":
			w.Write([]byte(sumLine))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, arch
}

type taskRecorder struct {
	t        *testing.T
	commands []string
}

func (r *taskRecorder) start(definition string) error {
	r.commands = append(r.commands, execOf(r.t, definition))
	return nil
}

var now = time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)

func upgrader(t *testing.T, srv *httptest.Server, tasks *taskRecorder) runtimeUpgrader {
	self := filepath.Join(t.TempDir(), "winpool-agent.exe")
	os.WriteFile(self, []byte("the agent"), 0o700)
	return runtimeUpgrader{
		dir: filepath.Join(t.TempDir(), "runtime"), client: srv.Client(), releases: srv.URL,
		self: self, installDir: `C:\Program Files\containerd`, startTask: tasks.start,
		now: func() time.Time { return now },
	}
}

func TestUpgradeFromTheOfficialRelease(t *testing.T) {
	srv, _ := releases(t, "")
	tasks := &taskRecorder{t: t}
	u := upgrader(t, srv, tasks)
	req := host.RuntimeRequest{Revision: "r1", Attempt: 1, Version: "1.7.22"}
	if err := u.start(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(u.dir, "r1-1")
	plan, err := runtimeswap.ReadPlan(filepath.Join(work, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := runtimeswap.Plan{Revision: "r1", Attempt: 1, Version: "1.7.22", InstallDir: `C:\Program Files\containerd`,
		NewDir: filepath.Join(work, "new"), BackupDir: filepath.Join(work, "old"), ResultFile: filepath.Join(u.dir, "result.json"),
		Services: []string{"kubelet", "containerd"}, Started: now}
	if !reflect.DeepEqual(plan, want) {
		t.Errorf("plan = %+v, want %+v", plan, want)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "new", "containerd.exe")); string(b) != "containerd 1.7.22" {
		t.Errorf("new containerd.exe = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "winpool-agent.exe")); string(b) != "the agent" {
		t.Errorf("the task's copy of the agent = %q", b)
	}
	if len(tasks.commands) != 1 || !strings.Contains(tasks.commands[0], `containerd-swap "`+filepath.Join(work, "plan.json")+`"`) {
		t.Errorf("task commands %v, want one running the plan", tasks.commands)
	}
	r, _ := runtimeswap.ReadResult(filepath.Join(u.dir, "result.json"))
	if r == nil || r.Phase != host.RuntimeScheduled || r.Attempt != 1 || r.Revision != "r1" {
		t.Errorf("result file = %+v, want Scheduled for r1 attempt 1", r)
	}

	// While that task runs, no second one starts.
	if err := u.start(context.Background(), host.RuntimeRequest{Revision: "r1", Attempt: 2, Version: "1.7.22"}); err == nil ||
		!strings.Contains(err.Error(), "still Scheduled") || len(tasks.commands) != 1 {
		t.Errorf("second start while the first is scheduled: %v (%d tasks), want a refusal", err, len(tasks.commands))
	}
}

func TestUpgradeRefusesAnArchiveThatIsNotTheRelease(t *testing.T) {
	srv, _ := releases(t, strings.Repeat("0", 64)+"  "+containerdArchive+"\n")
	tasks := &taskRecorder{t: t}
	u := upgrader(t, srv, tasks)
	err := u.start(context.Background(), host.RuntimeRequest{Revision: "r1", Attempt: 1, Version: "1.7.22"})
	var mm *stage.MismatchError
	if !errors.As(err, &mm) || mm.Want != strings.Repeat("0", 64) {
		t.Fatalf("err = %v, want a digest mismatch against the published sha256sum", err)
	}
	if len(tasks.commands) != 0 {
		t.Errorf("a task started for an archive that failed its digest: %v", tasks.commands)
	}
}

func TestUpgradeFromTheRevisionsArchive(t *testing.T) {
	srv, arch := releases(t, "not used")
	tasks := &taskRecorder{t: t}
	u := upgrader(t, srv, tasks)
	u.releases = "https://unreachable.invalid" // the official release is never asked
	req := host.RuntimeRequest{Revision: "r1", Attempt: 1, Version: "1.7.22",
		Archive: &config.Archive{URL: srv.URL + "/v1.7.22/" + containerdArchive, SHA256: digest(string(arch))}}
	if err := u.start(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(tasks.commands) != 1 {
		t.Errorf("tasks %v, want one", tasks.commands)
	}
}

func TestUpgradeRefusesAFileChangedBeforeTheTask(t *testing.T) {
	srv, _ := releases(t, "")
	tasks := &taskRecorder{t: t}
	u := upgrader(t, srv, tasks)
	work := filepath.Join(u.dir, "r1-1")
	exe := filepath.Join(work, "winpool-agent.exe")
	// What is hashed again before the task is what was written, unless
	// someone swapped the agent's copy in between.
	var rehashed []string
	u.rehash = func(p string) (string, error) {
		rehashed = append(rehashed, filepath.Base(p))
		if p == exe {
			return digest("swapped"), nil
		}
		return stage.Digest(p)
	}
	err := u.start(context.Background(), host.RuntimeRequest{Revision: "r1", Attempt: 1, Version: "1.7.22"})
	var changed *changedError
	if !errors.As(err, &changed) || changed.Path != exe || changed.Written != digest("the agent") || changed.Now != digest("swapped") {
		t.Fatalf("err = %v, want the agent's copy named with both digests", err)
	}
	if want := []string{"containerd.exe", "ctr.exe", "plan.json", "winpool-agent.exe"}; !reflect.DeepEqual(rehashed, want) {
		t.Errorf("hashed again %v, want %v (the binaries installed, the plan, the agent's copy)", rehashed, want)
	}
	if len(tasks.commands) != 0 {
		t.Errorf("a task started: %v", tasks.commands)
	}
	if r, _ := runtimeswap.ReadResult(filepath.Join(u.dir, "result.json")); r != nil {
		t.Errorf("result file %+v, want none (no task is waited for)", r)
	}
}

func TestContainerdVersionIsNotReadDuringASwap(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for phase, want := range map[host.RuntimePhase]bool{
		host.RuntimeScheduled: false, host.RuntimeRunning: false,
		host.RuntimeSucceeded: true, host.RuntimeRolledBack: true, host.RuntimeFailed: true,
	} {
		if got := readsContainerdVersion(&host.RuntimeUpgrade{Phase: phase, Started: now.Add(-time.Minute)}, now); got != want {
			t.Errorf("%s: reads = %v, want %v", phase, got, want)
		}
	}
	if !readsContainerdVersion(nil, now) {
		t.Error("no task: the version must be read")
	}
	if !readsContainerdVersion(&host.RuntimeUpgrade{Phase: host.RuntimeRunning, Started: now.Add(-time.Hour)}, now) {
		t.Error("a Running record an hour old is a dead task: the version must be read")
	}
}
