package windows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/runtimeswap"
)

// Servicing (DISM, or the Windows Update client) runs in a one-shot SYSTEM
// scheduled task, not in the agent: hcsshim kills a HostProcess pod's
// processes when the pod stops, so an agent restart would kill DISM in the
// middle of a CBS transaction, and the pod's memory limit would cover
// TiWorker's. The agent writes a plan and a Running result, then starts the
// task (`winpool-agent.exe servicing <plan>`, RunServicing), which installs
// and writes the result the agent reads back in Observe, possibly from a
// later agent process. The layout under the state folder:
//
//	servicing\plan.json          what the task installs (servicingPlan)
//	servicing\result.json        host.UpdateTask: Running, then Done
//	servicing\winpool-agent.exe  the task's copy of the agent
//
// Everything but the calls to Windows is here, tested on Linux.

const (
	servicingFolder   = "servicing"
	servicingPlanName = "plan.json"
	servicingResult   = "result.json"
	servicingAgent    = "winpool-agent.exe"
	// servicingTask names the task in messages.
	servicingTask = "the servicing task " + decide.ServicingTaskName
)

func servicingDir(stateDir string) string { return filepath.Join(stateDir, servicingFolder) }

// servicingResultFile is <StateDir>\servicing\result.json
// (decide.ServicingResultFile with the default state folder).
func servicingResultFile(stateDir string) string {
	return filepath.Join(servicingDir(stateDir), servicingResult)
}

// proxyVariables are carried from the agent's environment to the task's:
// the task runs with the machine's environment, not the pod's, and package
// downloads honour these (net/http's default transport) as they did when
// the agent ran servicing itself. The plan holding them is in the state
// folder, which only SYSTEM and Administrators read.
var proxyVariables = []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"}

// servicingPlan is what the servicing task installs: the whole
// host.UpdateRequest, and where the task keeps its files.
type servicingPlan struct {
	Revision string `json:"revision"`
	Attempt  int    `json:"attempt"`
	// Target is the build, as host.Build prints it (10.0.20348.2762).
	Target   string              `json:"target"`
	Source   config.UpdateSource `json:"source"`
	Packages []config.Package    `json:"packages,omitempty"`
	// KBs pin what Windows Update installs (host.UpdateRequest.KBs).
	KBs []string `json:"kbs,omitempty"`
	// StartedAt is the operator's start the attempt belongs to.
	StartedAt string `json:"startedAt,omitempty"`
	// StateDir is the agent's state folder; packages are staged under its
	// updates\ folder.
	StateDir string `json:"stateDir"`
	// ResultFile is where the outcome goes (a host.UpdateTask).
	ResultFile string `json:"resultFile"`
	// Proxy holds the proxyVariables set in the agent's environment.
	Proxy map[string]string `json:"proxy,omitempty"`
	// Started is when the agent started the task; the result keeps it.
	Started time.Time `json:"started"`
	// Undo: take the cumulative update of build Target off instead
	// (host.UpdateRequest.Undo).
	Undo bool `json:"undo,omitempty"`
}

// request is the host.UpdateRequest the plan was made from.
func (p servicingPlan) request() (host.UpdateRequest, error) {
	target, err := host.ParseBuild(p.Target)
	if err != nil {
		return host.UpdateRequest{}, err
	}
	return host.UpdateRequest{Revision: p.Revision, Attempt: p.Attempt, Target: target, Source: p.Source, Packages: p.Packages, KBs: p.KBs, StartedAt: p.StartedAt,
		Undo: p.Undo}, nil
}

// knownSource: the sources the task can install from ("" is Windows Update,
// as config.UpdateSource defaults).
func knownSource(s config.UpdateSource) bool {
	return s == config.SourcePackages || s == config.SourceWindowsUpdate || s == ""
}

// readServicingPlan reads and checks a plan file.
func readServicingPlan(path string) (servicingPlan, error) {
	var p servicingPlan
	b, err := os.ReadFile(path)
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("%s is not a servicing plan: %w", path, err)
	}
	if p.Revision == "" || p.Attempt < 1 || p.StateDir == "" || p.ResultFile == "" {
		return p, fmt.Errorf("%s lacks revision, attempt, stateDir or resultFile", path)
	}
	if _, err := p.request(); err != nil {
		return p, fmt.Errorf("%s: target: %w", path, err)
	}
	if !knownSource(p.Source) {
		return p, fmt.Errorf("%s: unknown update source %q", path, p.Source)
	}
	return p, nil
}

// readUpdateResult reads a servicing result file; nil when there is none.
// A file that is not a result (nor Running nor Done) is an error naming it:
// taken for Done with exit code 0, it would read as an install that worked.
func readUpdateResult(path string) (*host.UpdateTask, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the servicing task's result %s: %w", path, err)
	}
	var r host.UpdateTask
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s is corrupt (%v); delete it if no servicing task runs (%s in Task Scheduler)", path, err, decide.ServicingTaskName)
	}
	if r.Phase != host.UpdateRunning && r.Phase != host.UpdateDone {
		return nil, fmt.Errorf("%s is corrupt (phase %q); delete it if no servicing task runs (%s in Task Scheduler)", path, r.Phase, decide.ServicingTaskName)
	}
	r.ResultFile = path
	return &r, nil
}

// writeUpdateResult writes the result file through a temporary file and a
// rename, so the agent reads the old result or the new one, never half.
func writeUpdateResult(path string, r host.UpdateTask) error {
	return runtimeswap.WriteJSON(path, r)
}

// servicingStarter prepares the servicing task and starts it; the Windows
// parts (the task, the agent's own path, the environment) are passed in, so
// the preparation is tested on Linux.
type servicingStarter struct {
	stateDir string
	// self is the running agent's executable, copied for the task.
	self string
	// startTask registers the one-shot SYSTEM task from its definition
	// (taskDefinition) and runs it.
	startTask func(definition string) error
	now       func() time.Time
	// getenv reads the agent's environment (os.Getenv); nil reads nothing.
	getenv func(string) string
	// rehash is how the files written for the task are hashed again before
	// it starts; nil is stage.Digest (a test passes another).
	rehash func(path string) (string, error)
	// uptime is how long the machine has been up (nil: unknown, never a
	// boot since any task).
	uptime func() time.Duration
}

// start refuses while a servicing task is Running (two servicing runs at
// once fail with CBS_E_PENDING at best; the decision waits for it anyway),
// copies the agent for the task (the pod's own files go away with the pod),
// writes the plan, checks again that the copy and the plan are what it
// wrote, writes a Running result and starts the task. Running is written
// before the task starts: from then on an agent, restarted or not, waits
// for the task and never starts a second install for the attempt. When the
// task cannot be started, the result says so (Done with Error).
func (s servicingStarter) start(ctx context.Context, req host.UpdateRequest) error {
	if !knownSource(req.Source) {
		return fmt.Errorf("unknown update source %q", req.Source)
	}
	dir := servicingDir(s.stateDir)
	resultFile := servicingResultFile(s.stateDir)
	cur, err := readUpdateResult(resultFile)
	if err != nil {
		return err
	}
	if s.uptime != nil {
		cur = interruptedByBoot(cur, s.uptime())
	}
	if cur != nil && cur.Phase == host.UpdateRunning {
		return fmt.Errorf("%s (revision %s attempt %d, installing %s) is still Running since %s, see %s; "+
			"if it no longer runs (Task Scheduler), delete that file", servicingTask, cur.Revision, cur.Attempt, cur.Target,
			cur.Started.UTC().Format(time.RFC3339), resultFile)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	written := fileDigests{}
	exe := filepath.Join(dir, servicingAgent)
	sum, err := copyHashed(s.self, exe)
	if err != nil {
		return fmt.Errorf("copying the agent for the servicing task: %w", err)
	}
	written[exe] = sum
	plan := servicingPlan{
		Revision: req.Revision, Attempt: req.Attempt, Target: req.Target.String(), Source: req.Source, Packages: req.Packages, KBs: req.KBs, StartedAt: req.StartedAt,
		StateDir: s.stateDir, ResultFile: resultFile, Proxy: s.proxy(), Started: s.now().UTC(), Undo: req.Undo,
	}
	definition, err := written.plan(filepath.Join(dir, servicingPlanName), plan, exe, ServicingCommand, servicingTask, req.Limit, s.rehash)
	if err != nil {
		return err
	}
	running := host.UpdateTask{Revision: req.Revision, Attempt: req.Attempt, StartedAt: req.StartedAt, Target: plan.Target, Phase: host.UpdateRunning,
		Started: plan.Started, MarksStart: true, Undo: req.Undo}
	if s.uptime != nil {
		running.StartedUptime = s.uptime()
	}
	if err := writeUpdateResult(resultFile, running); err != nil {
		return fmt.Errorf("writing %s before starting %s: %w", resultFile, servicingTask, err)
	}
	if err := s.startTask(definition); err != nil {
		err = fmt.Errorf("starting %s: %w", servicingTask, err)
		done := running
		done.Phase = host.UpdateDone
		done.Error = err.Error() + "; nothing was installed"
		if werr := writeUpdateResult(resultFile, done); werr != nil {
			// The file says Running for a task that never ran: the decision
			// waits until its timeout, then fails naming the file.
			return fmt.Errorf("%w; writing that to %s failed too (%v): delete it", err, resultFile, werr)
		}
		return err
	}
	return nil
}

func (s servicingStarter) proxy() map[string]string {
	if s.getenv == nil {
		return nil
	}
	var env map[string]string
	for _, k := range proxyVariables {
		if v := s.getenv(k); v != "" {
			if env == nil {
				env = map[string]string{}
			}
			env[k] = v
		}
	}
	return env
}

// installer is the servicing itself: DISM for the plan's packages, or the
// Windows Update client; err when servicing could not be run at all.
type installer func(ctx context.Context, p servicingPlan, req host.UpdateRequest) (host.UpdateResult, error)

// runServicing is the servicing task's body (RunServicing on Windows, with
// the real installer). It installs only for a plan whose result file says
// Running for the plan's revision and attempt, as the agent left it right
// before starting the task: the task run a second time (by hand, or by
// Task Scheduler) never installs again over a result the agent may have
// acted on. It then writes the outcome there: Done with servicing's Result,
// or with Error when servicing could not be run at all. err: the task
// could not read its plan or write its result.
func runServicing(ctx context.Context, planFile string, install installer) (host.UpdateTask, error) {
	p, err := readServicingPlan(planFile)
	if err != nil {
		return endUnplanned(planFile, err)
	}
	req, _ := p.request() // checked by readServicingPlan
	cur, err := readUpdateResult(p.ResultFile)
	if err != nil {
		return host.UpdateTask{}, fmt.Errorf("nothing installed: %w", err)
	}
	if cur == nil || cur.Phase != host.UpdateRunning || cur.Revision != p.Revision || cur.Attempt != p.Attempt || cur.StartedAt != p.StartedAt {
		state := "no result"
		if cur != nil {
			state = fmt.Sprintf("%s for revision %s attempt %d", cur.Phase, cur.Revision, cur.Attempt)
		}
		return host.UpdateTask{}, fmt.Errorf("nothing installed: %s holds %s, not Running for revision %s attempt %d: "+
			"this plan has run already or the agent did not start it", p.ResultFile, state, p.Revision, p.Attempt)
	}
	// The mark that the task's program runs, before anything is installed:
	// Task Scheduler's "run" only says it accepted the run, and a program
	// antivirus or App Control blocks never gets here. Without the mark the
	// agent would take an install that runs for one that never started.
	started := *cur
	started.TaskStarted = time.Now().UTC()
	// The first beat: alive from the start, not from a minute in (a node
	// whose nodeTimeout runs out within that minute would be failed while
	// its install runs).
	started.Heartbeat = started.TaskStarted
	if err := writeResultPatiently(ctx, p.ResultFile, started, markWriteTries, time.Second); err != nil {
		return host.UpdateTask{}, fmt.Errorf("nothing installed: marking %s started: %w", p.ResultFile, err)
	}
	r := host.UpdateTask{Revision: p.Revision, Attempt: p.Attempt, StartedAt: p.StartedAt, Target: p.Target, Phase: host.UpdateDone, Started: p.Started,
		MarksStart: true, TaskStarted: started.TaskStarted, Undo: p.Undo}
	stopBeating := heartbeat(p.ResultFile, started, heartbeatEvery)
	res, err := installGuarded(ctx, p, req, install)
	// No heartbeat may land after (and so over) the final result.
	stopBeating()
	if err != nil {
		r.Error = err.Error()
	} else {
		r.Result = res
	}
	// The last beat is the end: what follows the install (the reboot, the
	// checks) is timed from it.
	r.Heartbeat = time.Now().UTC()
	if err := writeResultPatiently(ctx, p.ResultFile, r, resultWriteTries, time.Second); err != nil {
		return r, fmt.Errorf("servicing ended but its result could not be written to %s: %w", p.ResultFile, err)
	}
	r.ResultFile = p.ResultFile
	return r, nil
}

// resultWriteTries bounds writeResultPatiently: about a minute.
const resultWriteTries = 12

// heartbeatEvery is how often a running servicing task says it is alive: a
// Windows Update install of Windows Server 2019 outlasts any fixed node
// timeout, and the operator waits for a node whose task still beats.
var heartbeatEvery = time.Minute

// heartbeat rewrites the Running result with the time, every interval,
// until the returned function is called (which waits for a write under way).
// A write that fails is left to the next one.
func heartbeat(resultFile string, running host.UpdateTask, every time.Duration) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				running.Heartbeat = now.UTC()
				_ = writeUpdateResult(resultFile, running)
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// markWriteTries bounds the start mark's write: well within the agent's
// decide.TaskStartGrace.
const markWriteTries = 5

// writeResultPatiently writes the task's final result, trying again while
// it fails: Windows refuses to rename over a file another process has open
// without FILE_SHARE_DELETE, which Go's own reads (the agent's, every few
// seconds) and a scan by Defender are. A result that never lands leaves the
// agent waiting hours for a task that has ended.
func writeResultPatiently(ctx context.Context, path string, r host.UpdateTask, tries int, pause time.Duration) error {
	var err error
	for i := range tries {
		if err = writeUpdateResult(path, r); err == nil {
			return nil
		}
		if i+1 < tries {
			select {
			case <-time.After(pause * time.Duration(min(i+1, 5))):
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			}
		}
	}
	return err
}

// interruptedByBoot is the task's result as the agent must read it when the
// machine booted after the task started (the uptime now is below the one the
// task started at): a Running result then belongs to a task the boot killed
// (a power loss, maintenance, an admin's restart), and would otherwise hold
// the node for hours. It is Done and Interrupted: CBS completes or rolls
// back its transaction at boot, and the next attempt installs again.
func interruptedByBoot(t *host.UpdateTask, uptime time.Duration) *host.UpdateTask {
	if t == nil || t.Phase != host.UpdateRunning || t.StartedUptime <= 0 || uptime >= t.StartedUptime {
		return t
	}
	u := *t
	u.Phase, u.Interrupted = host.UpdateDone, true
	return &u
}

// installGuarded runs install, turning a panic into an error: the result
// must say Done whatever happens, or the agent waits for hours.
func installGuarded(ctx context.Context, p servicingPlan, req host.UpdateRequest, install installer) (res host.UpdateResult, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = host.UpdateResult{}, fmt.Errorf("the servicing task failed: %v", v)
		}
	}()
	return install(ctx, p, req)
}

// endUnplanned ends a task whose plan cannot be read: the Running result
// the agent wrote next to the plan (servicing\result.json) is rewritten as
// Done with that error, so the agent reports it now instead of waiting for
// the task's timeout. A result that is not Running is left as it is.
func endUnplanned(planFile string, planErr error) (host.UpdateTask, error) {
	resultFile := filepath.Join(filepath.Dir(planFile), servicingResult)
	cur, err := readUpdateResult(resultFile)
	if err != nil || cur == nil || cur.Phase != host.UpdateRunning {
		return host.UpdateTask{}, fmt.Errorf("reading the servicing plan: %w", planErr)
	}
	r := *cur
	r.Phase = host.UpdateDone
	r.Error = fmt.Sprintf("the servicing task could not read its plan: %v; nothing was installed", planErr)
	if err := writeResultPatiently(context.Background(), resultFile, r, resultWriteTries, time.Second); err != nil {
		return r, fmt.Errorf("reading the servicing plan: %w; writing %s: %v", planErr, resultFile, err)
	}
	return r, fmt.Errorf("reading the servicing plan: %w", planErr)
}
