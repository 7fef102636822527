package windows

import (
	"context"
	"errors"
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

var target = host.Build{Major: 10, Minor: 0, Build: 20348, UBR: 2762}

func packagesRequest(attempt int) host.UpdateRequest {
	return host.UpdateRequest{Revision: "r1", Attempt: attempt, Target: target, Source: config.SourcePackages,
		Packages: []config.Package{{URL: "https://example.com/ssu.cab", SHA256: digest("ssu")}, {Path: `C:\packages\lcu.msu`, SHA256: digest("lcu")}}}
}

func TestServicingPlanRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		plan servicingPlan
	}{
		{"packages", servicingPlan{Revision: "r1", Attempt: 1, Target: "10.0.20348.2762", Source: config.SourcePackages,
			Packages: packagesRequest(1).Packages, StateDir: `C:\ProgramData\winpool`, ResultFile: `C:\ProgramData\winpool\servicing\result.json`, Started: now}},
		{"Windows Update behind a proxy, pinned", servicingPlan{Revision: "r2", Attempt: 3, Target: "10.0.26100.4061", Source: config.SourceWindowsUpdate,
			KBs: []string{"KB5043936", "KB5044281"}, StateDir: `D:\winpool`, ResultFile: `D:\winpool\servicing\result.json`, Started: now,
			Proxy: map[string]string{"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": ".cluster.local"}}},
		{"the default source", servicingPlan{Revision: "r3", Attempt: 2, Target: "10.0.17763.6414", StateDir: `C:\w`, ResultFile: `C:\w\r.json`, Started: now}},
	} {
		path := filepath.Join(dir, tc.name+".json")
		if err := runtimeswap.WriteJSON(path, tc.plan); err != nil {
			t.Fatal(err)
		}
		got, err := readServicingPlan(path)
		if err != nil || !reflect.DeepEqual(got, tc.plan) {
			t.Errorf("%s: read back %+v, %v; want %+v", tc.name, got, err, tc.plan)
		}
		req, err := got.request()
		if err != nil || req.Revision != tc.plan.Revision || req.Attempt != tc.plan.Attempt || req.Target.String() != tc.plan.Target ||
			req.Source != tc.plan.Source || !reflect.DeepEqual(req.Packages, tc.plan.Packages) || !reflect.DeepEqual(req.KBs, tc.plan.KBs) {
			t.Errorf("%s: request %+v, %v", tc.name, req, err)
		}
	}
}

func TestServicingPlanRefused(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, words string
	}{
		{"not JSON", "{", "is not a servicing plan"},
		{"no revision", `{"attempt":1,"target":"10.0.20348.2762","stateDir":"C:\\w","resultFile":"C:\\w\\r.json"}`, "lacks revision"},
		{"attempt 0", `{"revision":"r1","attempt":0,"target":"10.0.20348.2762","stateDir":"C:\\w","resultFile":"C:\\w\\r.json"}`, "lacks revision, attempt"},
		{"no result file", `{"revision":"r1","attempt":1,"target":"10.0.20348.2762","stateDir":"C:\\w"}`, "resultFile"},
		{"a target that is not a build", `{"revision":"r1","attempt":1,"target":"ltsc2022","stateDir":"C:\\w","resultFile":"C:\\w\\r.json"}`, "target"},
		{"an unknown source", `{"revision":"r1","attempt":1,"target":"10.0.20348.2762","source":"Floppy","stateDir":"C:\\w","resultFile":"C:\\w\\r.json"}`, `unknown update source "Floppy"`},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
		os.WriteFile(path, []byte(tc.content), 0o600)
		_, err := readServicingPlan(path)
		if err == nil || !strings.Contains(err.Error(), tc.words) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an error naming %s with %q", tc.name, err, path, tc.words)
		}
	}
}

func TestUpdateResultFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "servicing", "result.json")
	if r, err := readUpdateResult(path); r != nil || err != nil {
		t.Fatalf("no file: %+v, %v; want nil, nil", r, err)
	}
	var before os.FileInfo
	for _, r := range []host.UpdateTask{
		{Revision: "r1", Attempt: 1, Target: "10.0.20348.2762", Phase: host.UpdateRunning, Started: now},
		{Revision: "r1", Attempt: 1, Target: "10.0.20348.2762", Phase: host.UpdateDone, Started: now, Result: host.UpdateResult{ExitCode: 3010, Detail: "lcu.msu"}},
		{Revision: "r1", Attempt: 2, Target: "10.0.20348.2762", Phase: host.UpdateDone, Started: now, Error: "Windows Update offers nothing"},
	} {
		if err := writeUpdateResult(path, r); err != nil {
			t.Fatal(err)
		}
		got, err := readUpdateResult(path)
		r.ResultFile = path
		if err != nil || got == nil || !reflect.DeepEqual(*got, r) {
			t.Errorf("read back %+v, %v; want %+v", got, err, r)
		}
		// Written whole and renamed into place: a new file every time (a
		// reader never sees one half rewritten), and no temporary left.
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if before != nil && os.SameFile(before, fi) {
			t.Errorf("%s was rewritten in place, want a new file renamed over it", path)
		}
		before = fi
		if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
			t.Errorf("the folder holds %v, want only result.json", entries)
		}
	}

	for _, tc := range []struct{ name, content, words string }{
		{"not JSON", `{"phase":"Runn`, "is corrupt"},
		{"an unknown phase", `{"revision":"r1","attempt":1,"phase":"Scheduled"}`, `is corrupt (phase "Scheduled")`},
		{"no phase", `{"revision":"r1","attempt":1}`, `is corrupt (phase "")`},
	} {
		os.WriteFile(path, []byte(tc.content), 0o600)
		r, err := readUpdateResult(path)
		if r != nil || err == nil || !strings.Contains(err.Error(), path+" "+tc.words) || !strings.Contains(err.Error(), `\winpool\servicing`) {
			t.Errorf("%s: %+v, %v; want an error naming the file and the task", tc.name, r, err)
		}
	}
	os.Remove(path)
	os.Mkdir(path, 0o700) // a file that cannot be read
	if r, err := readUpdateResult(path); r != nil || err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("unreadable: %+v, %v; want an error naming the file", r, err)
	}
}

// servicingTasks records the commands started and the result file as each
// start found it.
type servicingTasks struct {
	t          *testing.T
	resultFile string
	commands   []string
	seen       []*host.UpdateTask
	err        error
}

func (s *servicingTasks) start(definition string) error {
	s.commands = append(s.commands, execOf(s.t, definition))
	r, err := readUpdateResult(s.resultFile)
	if err != nil {
		return err
	}
	s.seen = append(s.seen, r)
	return s.err
}

func starter(t *testing.T) (servicingStarter, *servicingTasks) {
	self := filepath.Join(t.TempDir(), "winpool-agent.exe")
	os.WriteFile(self, []byte("the agent"), 0o700)
	state := filepath.Join(t.TempDir(), "winpool")
	tasks := &servicingTasks{t: t, resultFile: servicingResultFile(state)}
	env := map[string]string{"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "10.0.0.0/8", "PATH": `C:\Windows`}
	return servicingStarter{stateDir: state, self: self, startTask: tasks.start, now: func() time.Time { return now },
		getenv: func(k string) string { return env[k] }}, tasks
}

func TestStartUpdate(t *testing.T) {
	s, tasks := starter(t)
	req := packagesRequest(1)
	if err := s.start(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(s.stateDir, "servicing")
	planFile, exe, resultFile := filepath.Join(dir, "plan.json"), filepath.Join(dir, "winpool-agent.exe"), filepath.Join(dir, "result.json")
	plan, err := readServicingPlan(planFile)
	if err != nil {
		t.Fatal(err)
	}
	want := servicingPlan{Revision: "r1", Attempt: 1, Target: "10.0.20348.2762", Source: config.SourcePackages, Packages: req.Packages,
		StateDir: s.stateDir, ResultFile: resultFile, Proxy: map[string]string{"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "10.0.0.0/8"}, Started: now}
	if !reflect.DeepEqual(plan, want) {
		t.Errorf("plan = %+v, want %+v", plan, want)
	}
	if b, _ := os.ReadFile(exe); string(b) != "the agent" {
		t.Errorf("the task's copy of the agent = %q", b)
	}
	if want := `"` + exe + `" servicing "` + planFile + `"`; len(tasks.commands) != 1 || tasks.commands[0] != want {
		t.Errorf("task commands %q, want [%s]", tasks.commands, want)
	}
	running := &host.UpdateTask{Revision: "r1", Attempt: 1, Target: "10.0.20348.2762", Phase: host.UpdateRunning, Started: now, MarksStart: true, ResultFile: resultFile}
	if len(tasks.seen) != 1 || !reflect.DeepEqual(tasks.seen[0], running) {
		t.Errorf("when the task started the result was %+v, want %+v", tasks.seen, running)
	}
	if r, _ := readUpdateResult(resultFile); !reflect.DeepEqual(r, running) {
		t.Errorf("result = %+v, want %+v", r, running)
	}

	// While that task runs, no second one starts, even for the next attempt
	// (an agent restarted meanwhile).
	err = s.start(context.Background(), packagesRequest(2))
	if err == nil || !strings.Contains(err.Error(), "still Running") || !strings.Contains(err.Error(), resultFile) || len(tasks.commands) != 1 {
		t.Errorf("second start while the first runs: %v (%d tasks), want a refusal naming %s", err, len(tasks.commands), resultFile)
	}
	if b, _ := os.ReadFile(exe); string(b) != "the agent" {
		t.Errorf("the running task's copy of the agent was touched: %q", b)
	}

	// Once it is done, the next attempt starts.
	writeUpdateResult(resultFile, host.UpdateTask{Revision: "r1", Attempt: 1, Phase: host.UpdateDone, Result: host.UpdateResult{ExitCode: 1}})
	if err := s.start(context.Background(), packagesRequest(2)); err != nil || len(tasks.commands) != 2 {
		t.Fatalf("start after the first is done: %v (%d tasks)", err, len(tasks.commands))
	}
	if r := tasks.seen[1]; r == nil || r.Phase != host.UpdateRunning || r.Attempt != 2 {
		t.Errorf("when the second task started the result was %+v, want Running for attempt 2", r)
	}

	// A task a boot ended (the machine has been up for less than when it
	// started) holds nothing: the next attempt starts, and records its uptime.
	s.uptime = func() time.Duration { return 3 * time.Minute }
	writeUpdateResult(resultFile, host.UpdateTask{Revision: "r1", Attempt: 2, Phase: host.UpdateRunning, StartedUptime: time.Hour})
	if err := s.start(context.Background(), packagesRequest(3)); err != nil || len(tasks.commands) != 3 {
		t.Fatalf("start after a boot ended the task: %v (%d tasks)", err, len(tasks.commands))
	}
	if r := tasks.seen[2]; r == nil || r.Attempt != 3 || r.StartedUptime != 3*time.Minute {
		t.Errorf("the third task's Running result %+v, want attempt 3 started at uptime 3m", r)
	}
}

func TestStartUpdateThatDoesNotStart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(s *servicingStarter, tasks *servicingTasks)
		req     host.UpdateRequest
		words   []string
		// result is the phase left in result.json ("" none); tasks how many
		// were started.
		result host.UpdatePhase
		tasks  int
	}{
		{"the task cannot be created", func(s *servicingStarter, tasks *servicingTasks) {
			tasks.err = errors.New(`registering task \winpool\servicing: RegisterTask: Access is denied.`)
		}, packagesRequest(1), []string{`starting the servicing task \winpool\servicing`, "Access is denied"}, host.UpdateDone, 1},
		{"an unknown source", nil, host.UpdateRequest{Revision: "r1", Attempt: 1, Target: target, Source: "Floppy"},
			[]string{`unknown update source "Floppy"`}, "", 0},
		{"the agent's copy changed before the task", func(s *servicingStarter, _ *servicingTasks) {
			exe := filepath.Join(s.stateDir, "servicing", "winpool-agent.exe")
			s.rehash = func(p string) (string, error) {
				if p == exe {
					return digest("swapped"), nil
				}
				return stage.Digest(p)
			}
		}, packagesRequest(1), []string{"winpool-agent.exe changed after the agent wrote it for the servicing task", digest("swapped")}, "", 0},
		{"the plan gone before the task", func(s *servicingStarter, _ *servicingTasks) {
			s.rehash = func(p string) (string, error) {
				if filepath.Base(p) == "plan.json" {
					return "", os.ErrNotExist
				}
				return stage.Digest(p)
			}
		}, packagesRequest(1), []string{"plan.json, written by the agent for the servicing task", "is gone"}, "", 0},
		{"a corrupt result file", func(s *servicingStarter, _ *servicingTasks) {
			os.MkdirAll(filepath.Join(s.stateDir, "servicing"), 0o700)
			os.WriteFile(servicingResultFile(s.stateDir), []byte("{"), 0o600)
		}, packagesRequest(1), []string{"result.json is corrupt"}, "", 0},
	} {
		s, tasks := starter(t)
		if tc.prepare != nil {
			tc.prepare(&s, tasks)
		}
		tasks.resultFile = servicingResultFile(s.stateDir)
		err := s.start(context.Background(), tc.req)
		for _, w := range tc.words {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: err %v, want one with %q", tc.name, err, w)
			}
		}
		if len(tasks.commands) != tc.tasks {
			t.Errorf("%s: %d tasks started, want %d", tc.name, len(tasks.commands), tc.tasks)
		}
		r, rerr := readUpdateResult(servicingResultFile(s.stateDir))
		switch {
		case tc.result == "" && r != nil:
			t.Errorf("%s: result %+v, want none (no task is waited for)", tc.name, r)
		case tc.result == "":
		case r == nil || r.Phase != tc.result:
			t.Errorf("%s: result %+v (%v), want %s", tc.name, r, rerr, tc.result)
		case r.Phase == host.UpdateDone && (r.Revision != tc.req.Revision || r.Attempt != tc.req.Attempt || !strings.Contains(r.Error, err.Error())):
			t.Errorf("%s: result %+v, want this attempt's, with the error %q", tc.name, r, err)
		}
	}
}

// planOf is the plan file a task command runs.
func planOf(t *testing.T, command string) string {
	f := strings.Fields(command)
	if len(f) != 3 || f[1] != ServicingCommand {
		t.Fatalf("command %q does not run servicing", command)
	}
	return strings.Trim(f[2], `"`)
}

func TestRunServicing(t *testing.T) {
	wantReq := packagesRequest(1)
	for _, tc := range []struct {
		name    string
		install installer
		// after prepares what the task finds once the agent started it.
		after  func(t *testing.T, planFile, resultFile string)
		result host.UpdateTask // Phase "": the result the agent wrote is left as it was
		err    string
		calls  int
	}{
		{"servicing answers", func(ctx context.Context, p servicingPlan, req host.UpdateRequest) (host.UpdateResult, error) {
			return host.UpdateResult{ExitCode: 3010, Detail: "ssu.cab, lcu.msu"}, nil
		}, nil, host.UpdateTask{Revision: "r1", Attempt: 1, Target: "10.0.20348.2762", Phase: host.UpdateDone, Started: now,
			Result: host.UpdateResult{ExitCode: 3010, Detail: "ssu.cab, lcu.msu"}}, "", 1},
		{"servicing cannot run", func(context.Context, servicingPlan, host.UpdateRequest) (host.UpdateResult, error) {
			return host.UpdateResult{}, errors.New("staging lcu.msu: sha256 mismatch")
		}, nil, host.UpdateTask{Revision: "r1", Attempt: 1, Target: "10.0.20348.2762", Phase: host.UpdateDone, Started: now,
			Error: "staging lcu.msu: sha256 mismatch"}, "", 1},
		{"servicing panics", func(context.Context, servicingPlan, host.UpdateRequest) (host.UpdateResult, error) {
			panic("nil IDispatch")
		}, nil, host.UpdateTask{Revision: "r1", Attempt: 1, Target: "10.0.20348.2762", Phase: host.UpdateDone, Started: now,
			Error: "the servicing task failed: nil IDispatch"}, "", 1},
		{"the task run again after it was done", nil, func(t *testing.T, _, resultFile string) {
			writeUpdateResult(resultFile, host.UpdateTask{Revision: "r1", Attempt: 1, Phase: host.UpdateDone, Result: host.UpdateResult{ExitCode: 3010}})
		}, host.UpdateTask{}, "holds Done for revision r1 attempt 1, not Running for revision r1 attempt 1", 0},
		{"a plan the agent did not start", nil, func(t *testing.T, _, resultFile string) {
			writeUpdateResult(resultFile, host.UpdateTask{Revision: "r1", Attempt: 2, Phase: host.UpdateRunning})
		}, host.UpdateTask{}, "holds Running for revision r1 attempt 2", 0},
		{"no result file", nil, func(t *testing.T, _, resultFile string) { os.Remove(resultFile) }, host.UpdateTask{}, "holds no result", 0},
		{"a plan that cannot be read", nil, func(t *testing.T, planFile, _ string) { os.WriteFile(planFile, []byte("{"), 0o600) },
			host.UpdateTask{Revision: "r1", Attempt: 1, Target: "10.0.20348.2762", Phase: host.UpdateDone, Started: now,
				Error: "the servicing task could not read its plan"}, "reading the servicing plan", 0},
	} {
		s, tasks := starter(t)
		if err := s.start(context.Background(), wantReq); err != nil {
			t.Fatal(err)
		}
		planFile, resultFile := planOf(t, tasks.commands[0]), servicingResultFile(s.stateDir)
		if tc.after != nil {
			tc.after(t, planFile, resultFile)
		}
		before, _ := os.ReadFile(resultFile)
		calls := 0
		install := func(ctx context.Context, p servicingPlan, req host.UpdateRequest) (host.UpdateResult, error) {
			calls++
			if cur, _ := readUpdateResult(resultFile); cur == nil || cur.Phase != host.UpdateRunning || cur.TaskStarted.IsZero() {
				t.Errorf("%s: installing before the result says the task started: %+v", tc.name, cur)
			} else if !cur.Heartbeat.Equal(cur.TaskStarted) {
				t.Errorf("%s: the start mark beats %v, want its own time %v (the first beat is the start)", tc.name, cur.Heartbeat, cur.TaskStarted)
			}
			if !reflect.DeepEqual(req, wantReq) || p.StateDir != s.stateDir || p.Proxy["HTTPS_PROXY"] != "http://proxy:3128" {
				t.Errorf("%s: installing %+v from %+v, want %+v", tc.name, req, p, wantReq)
			}
			return tc.install(ctx, p, req)
		}
		got, err := runServicing(context.Background(), planFile, install)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.err)
		}
		if calls != tc.calls {
			t.Errorf("%s: servicing ran %d times, want %d", tc.name, calls, tc.calls)
		}
		r, rerr := readUpdateResult(resultFile)
		if tc.result.Phase == "" {
			if after, _ := os.ReadFile(resultFile); string(after) != string(before) {
				t.Errorf("%s: result rewritten to %s, want it left as %s", tc.name, after, before)
			}
			continue
		}
		if r == nil || rerr != nil {
			t.Errorf("%s: no result (%v)", tc.name, rerr)
			continue
		}
		if !strings.HasPrefix(r.Error, tc.result.Error) || tc.result.Error == "" && r.Error != "" {
			t.Errorf("%s: result error %q, want %q", tc.name, r.Error, tc.result.Error)
		}
		// Nothing is installed before the task marked its start.
		if calls > 0 && r.TaskStarted.IsZero() {
			t.Errorf("%s: installed without marking the task started", tc.name)
		}
		// The last beat is the end, after the start mark.
		if calls > 0 && !r.Heartbeat.After(r.TaskStarted) {
			t.Errorf("%s: the result's beat %v is not its end (started %v)", tc.name, r.Heartbeat, r.TaskStarted)
		}
		r.Error, tc.result.Error, tc.result.ResultFile = "", "", resultFile
		r.TaskStarted, r.Heartbeat, tc.result.MarksStart = time.Time{}, time.Time{}, true
		if !reflect.DeepEqual(*r, tc.result) {
			t.Errorf("%s: result %+v, want %+v", tc.name, *r, tc.result)
		}
		if got.Phase != host.UpdateDone || got.Attempt != 1 {
			t.Errorf("%s: returned %+v, want the result written", tc.name, got)
		}
	}
}

// A Running result whose machine has been up for less than when it started
// is a task a boot ended; one started in this boot, or Done, is as written.
func TestInterruptedByBoot(t *testing.T) {
	running := &host.UpdateTask{Revision: "r1", Attempt: 1, Phase: host.UpdateRunning, StartedUptime: 2 * time.Hour}
	got := interruptedByBoot(running, 3*time.Minute)
	if got.Phase != host.UpdateDone || !got.Interrupted || running.Phase != host.UpdateRunning {
		t.Errorf("interrupted: %+v (the input must stay as read: %+v)", got, running)
	}
	for _, tc := range []*host.UpdateTask{
		nil,
		{Phase: host.UpdateRunning, StartedUptime: time.Minute},
		{Phase: host.UpdateDone, StartedUptime: 5 * time.Hour},
		{Phase: host.UpdateRunning},
	} {
		if got := interruptedByBoot(tc, 3*time.Minute); got != tc {
			t.Errorf("%+v became %+v", tc, got)
		}
	}
}

// The final result is written again while the file cannot be replaced.
func TestWriteResultPatiently(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "result.json")
	// A directory where the file goes: every write fails, as a rename over an open file does on Windows.
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	r := host.UpdateTask{Revision: "r1", Attempt: 1, Phase: host.UpdateDone}
	done := make(chan error, 1)
	go func() { done <- writeResultPatiently(context.Background(), path, r, 5, 50*time.Millisecond) }()
	time.Sleep(15 * time.Millisecond)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the write did not land once it could: %v", err)
	}
	if got, err := readUpdateResult(path); err != nil || got == nil || got.Phase != host.UpdateDone {
		t.Errorf("read back %+v, %v", got, err)
	}
	stuck := filepath.Join(dir, "stuck")
	if err := os.Mkdir(stuck, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeResultPatiently(context.Background(), stuck, r, 2, time.Millisecond); err == nil {
		t.Error("a write that can never land returned no error")
	}
}

// While it installs, the task says it is alive in its Running result, so
// the agent can tell a long install from a dead one; no beat lands after
// the final result.
func TestTheServicingTaskBeatsWhileItInstalls(t *testing.T) {
	defer func(every time.Duration) { heartbeatEvery = every }(heartbeatEvery)
	heartbeatEvery = 5 * time.Millisecond
	dir := t.TempDir()
	resultFile := filepath.Join(dir, "result.json")
	running := host.UpdateTask{Revision: "r1", Attempt: 1, Target: "10.0.20348.2762", Phase: host.UpdateRunning, MarksStart: true, TaskStarted: time.Now()}
	stop := heartbeat(resultFile, running, heartbeatEvery)
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, _ := readUpdateResult(resultFile)
		if r != nil && !r.Heartbeat.IsZero() && r.Phase == host.UpdateRunning {
			break
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("no heartbeat in %s: %+v", resultFile, r)
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	done := running
	done.Phase = host.UpdateDone
	if err := writeUpdateResult(resultFile, done); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * heartbeatEvery)
	if r, _ := readUpdateResult(resultFile); r == nil || r.Phase != host.UpdateDone {
		t.Errorf("after the task stopped beating, the result is %+v, want the final one", r)
	}
}
