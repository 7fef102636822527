package fakewin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"winpool.dev/agent/internal/hns"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/host/windows"
)

// tasks is Task Scheduler: a task runs the agent's own task body (the
// program it names is the agent), on the machine, until it ends or the
// machine boots again. A run of a task that still runs is ignored, as
// MultipleInstancesPolicy IgnoreNew does; a run on battery power of a task
// whose conditions forbid it starts nothing, as IRegisteredTask.Run does.
type tasks struct{ m *Machine }

// RegisterTask keeps the task's definition, as Task Scheduler reads it
// (taskDefinition below); a new registration resets its Last Run Result.
func (t tasks) RegisterTask(name, definition string) error {
	def, err := readTaskDefinition(definition)
	if err != nil {
		return fmt.Errorf("task %s: %w", name, err)
	}
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	t.m.defs[name] = def
	if _, runs := t.m.tasks[name]; !runs {
		t.m.results[name] = schedTaskHasNotRun
	}
	return nil
}

func (t tasks) RunTask(name string) error {
	m := t.m
	m.mu.Lock()
	def, ok := m.defs[name]
	if !ok {
		m.mu.Unlock()
		return fmt.Errorf("task %s: the system cannot find the file specified (0x80070002)", name)
	}
	args := commandLine(def.Arguments)
	if len(args) != 2 {
		m.mu.Unlock()
		return fmt.Errorf("task %s: %q is not `<subcommand> <plan>`", name, def.Arguments)
	}
	if _, runs := m.tasks[name]; runs {
		m.mu.Unlock()
		return nil
	}
	if why := m.refusesToStart(def); why != 0 {
		m.results[name] = why
		m.mu.Unlock()
		return nil
	}
	ctx, cancel := context.WithCancel(m.bootCtx)
	run := &taskRun{cancel: cancel}
	m.tasks[name] = run
	switch args[0] {
	case windows.ServicingCommand:
		m.installs++
		var plan struct {
			Target string `json:"target"`
		}
		// The source offers what the plan asks for: a WSUS that approved
		// exactly the pool's update (Catalogue.Lands moves it).
		if err := readJSON(args[1], &plan); err == nil {
			m.wu.asked, _ = host.ParseBuild(plan.Target)
		}
	case windows.ContainerdSwapCommand:
		m.swaps++
	default:
		delete(m.tasks, name)
		m.mu.Unlock()
		cancel()
		return fmt.Errorf("task %s: unknown subcommand %q", name, args[0])
	}
	m.results[name] = schedTaskRunning
	m.mu.Unlock()
	if m.o.OnTaskStarted != nil {
		go m.o.OnTaskStarted(name)
	}
	go m.runTask(ctx, name, run, args[0], args[1])
	return nil
}

// refusesToStart is why Task Scheduler starts nothing for a run of def (its
// Last Run Result then), 0 when it starts it.
func (m *Machine) refusesToStart(def taskDefinition) uint32 {
	switch {
	case m.o.TasksNeverRun:
		return schedTaskHasNotRun
	case m.o.OnBattery && def.disallowOnBatteries():
		return schedTaskHasNotRun
	case !def.runsAsSystem():
		// The agent's bodies read and write what only SYSTEM may.
		return eAccessDenied
	}
	return 0
}

// runTask is the task's program, the agent's task body, until it ends.
func (m *Machine) runTask(ctx context.Context, name string, run *taskRun, subcommand, planFile string) {
	defer run.cancel()
	var rolledBack bool
	var err error
	if subcommand == windows.ServicingCommand {
		_, err = windows.RunServicingOn(ctx, m.OS(), planFile)
	} else {
		var r host.RuntimeUpgrade
		r, err = windows.RunContainerdSwapOn(ctx, m.OS(), planFile)
		rolledBack = r.Phase == host.RuntimeRolledBack
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// The task program's exit code: non-zero when it failed.
	m.results[name] = 0
	if err != nil {
		m.results[name] = 1
	}
	if rolledBack {
		m.rollback++
	}
	if m.tasks[name] == run {
		delete(m.tasks, name)
	}
}

// Task Scheduler's results for a task that has not run, and one running.
const (
	schedTaskHasNotRun = 0x41303
	schedTaskRunning   = 0x41301
	eAccessDenied      = 0x80070005
)

// LastTaskResult is the task's Last Run Result.
func (t tasks) LastTaskResult(name string) (uint32, error) {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	r, ok := t.m.results[name]
	if !ok {
		return 0, fmt.Errorf("task %s: the system cannot find the file specified", name)
	}
	return r, nil
}

// taskRun is a task running.
type taskRun struct{ cancel context.CancelFunc }

// commandLine splits a task's command line: quoted paths, bare words.
func commandLine(s string) []string {
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '"' {
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				return append(out, s[1:])
			}
			out, s = append(out, s[1:end+1]), s[end+2:]
			continue
		}
		word, rest, _ := strings.Cut(s, " ")
		out, s = append(out, word), rest
	}
	return out
}

// programs runs the programs a node has: containerd, shutdown, DISM.
type programs struct{ m *Machine }

func (p programs) Run(ctx context.Context, exe string, args ...string) (windows.Output, error) {
	if ctx.Err() != nil {
		return windows.Output{}, ctx.Err()
	}
	switch strings.ToLower(filepath.Base(strings.ReplaceAll(exe, `\`, "/"))) {
	case "containerd.exe", "containerd":
		return p.containerd(exe, args)
	case "shutdown.exe":
		return p.shutdown(args)
	case "dism.exe":
		return p.dism(ctx, args)
	}
	return windows.Output{}, &fs.PathError{Op: "exec", Path: exe, Err: fs.ErrNotExist}
}

// containerd is the installed containerd.exe: its file holds the line its
// --version prints. `config migrate` exists from 2.0 (containerd#9223): it
// prints the config it was given at version 3 (containerd 2.x migrates
// versions 1 and 2 the same way in memory at every start); 1.x has no such
// command.
func (p programs) containerd(exe string, args []string) (windows.Output, error) {
	b, err := os.ReadFile(exe)
	if err != nil {
		return windows.Output{}, &fs.PathError{Op: "exec", Path: exe, Err: fs.ErrNotExist}
	}
	switch {
	case len(args) == 1 && args[0] == "--version":
		return windows.Output{Stdout: b}, nil
	case len(args) == 4 && args[0] == "--config" && args[2] == "config" && args[3] == "migrate":
		cfg, err := os.ReadFile(args[1])
		if err != nil {
			return windows.Output{Stderr: []byte(err.Error()), ExitCode: 1}, nil
		}
		if !strings.Contains(string(b), " v2.") {
			return windows.Output{Stderr: []byte("containerd: No help topic for 'migrate'"), ExitCode: 1}, nil
		}
		return windows.Output{Stdout: []byte(migratedConfig(string(cfg)))}, nil
	}
	return windows.Output{Stderr: []byte("containerd: unexpected arguments " + strings.Join(args, " ")), ExitCode: 1}, nil
}

// shutdown /r starts the reboot: the machine goes down on its own time.
func (p programs) shutdown(args []string) (windows.Output, error) {
	reason := ""
	restart := false
	for i, a := range args {
		switch {
		case strings.EqualFold(a, "/r"):
			restart = true
		case strings.EqualFold(a, "/c") && i+1 < len(args):
			reason = strings.TrimPrefix(args[i+1], "winpool: ")
		}
	}
	if !restart {
		return windows.Output{Stderr: []byte("shutdown: only /r is simulated"), ExitCode: 87}, nil
	}
	m := p.m
	m.mu.Lock()
	m.reboots = append(m.reboots, reason)
	m.mu.Unlock()
	if m.o.OnReboot == nil {
		m.Boot()
	} else {
		go m.o.OnReboot(reason)
	}
	return windows.Output{}, nil
}

// dism /Add-Package installs a package: the update the plan asked for is
// staged for the next boot, exit 3010 (or the catalogue's failure).
func (p programs) dism(ctx context.Context, args []string) (windows.Output, error) {
	for _, a := range args {
		switch {
		case strings.EqualFold(a, "/Get-Packages"):
			return windows.Output{Stdout: []byte(p.m.packageTable())}, nil
		case strings.HasPrefix(strings.ToLower(a), "/packagename:"):
			return windows.Output{ExitCode: p.m.removePackage(a[len("/PackageName:"):])}, nil
		}
	}
	code, err := p.m.install(ctx, false)
	if err != nil {
		return windows.Output{}, err
	}
	return windows.Output{ExitCode: code}, nil
}

// hcn is HNS: kube-proxy's network, and what the fleet's model says HNS
// holds. A listing of the load balancers reads the model once, and the
// endpoints listed after it are of that same moment.
type hcn struct{ m *Machine }

func (h hcn) counts() (host.HNSCounts, error) {
	h.m.mu.Lock()
	gone := h.m.netGone
	h.m.mu.Unlock()
	// Without its network kube-proxy programs nothing.
	if h.m.o.HNS == nil || gone {
		return host.HNSCounts{}, nil
	}
	c, err := h.m.o.HNS()
	h.m.mu.Lock()
	h.m.hnsNow, h.m.hnsErr = c, err
	h.m.mu.Unlock()
	return c, err
}

// last is what the last listing of the load balancers read.
func (h hcn) last() (host.HNSCounts, error) {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	return h.m.hnsNow, h.m.hnsErr
}

func (h hcn) Networks() ([]hns.Network, error) {
	nets := []hns.Network{{ID: "ext-0", Name: "ext", Type: "L2Bridge"}}
	h.m.mu.Lock()
	gone := h.m.netGone
	h.m.mu.Unlock()
	if h.m.o.Network.Name != "" && !gone {
		n := h.m.o.Network
		n.ID = "net-0"
		nets = append(nets, n)
	}
	return nets, nil
}

func (h hcn) LoadBalancers() (hns.LoadBalancers, error) {
	c, err := h.counts()
	return hns.LoadBalancers{All: c.LoadBalancers, DSR: c.DSRLoadBalancers}, err
}

func (h hcn) Endpoints(id string) ([]hns.Endpoint, error) {
	c, err := h.last()
	if err != nil || id != "net-0" {
		return nil, err
	}
	eps := make([]hns.Endpoint, c.RemoteEndpoints)
	for i := range eps {
		eps[i].Remote = true
	}
	return eps, nil
}

// box is the machine's clock, its environment and its disk.
type box struct{ m *Machine }

func (b box) Now() time.Time { return time.Now() }

func (b box) SinceBoot() time.Duration {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	return time.Since(b.m.booted)
}

func (b box) Executable() (string, error) { return b.m.agentProgram(), nil }

func (b box) Getenv(k string) string {
	switch strings.ToLower(k) {
	case "programdata":
		return b.m.Path(`ProgramData`)
	case "programfiles":
		return b.m.Path(`Program Files`)
	case "systemroot":
		return b.m.Path(`Windows`)
	case "systemdrive":
		return "C:"
	}
	for name, v := range b.m.o.Environment {
		if strings.EqualFold(name, k) {
			return v
		}
	}
	return ""
}

// Setenv: the task's environment is its own process's; the machine keeps
// nothing of it.
func (b box) Setenv(string, string) error { return nil }

func (b box) Stat(p string) (fs.FileInfo, error) { return os.Stat(p) }

func (b box) FreeBytes(drive string) (int64, error) {
	if !strings.EqualFold(drive, "C:") {
		return -1, fmt.Errorf("no drive %s", drive)
	}
	if b.m.o.FreeBytes > 0 {
		return b.m.o.FreeBytes, nil
	}
	return 64 << 30, nil
}

func (b box) ProductVersion(path string) string {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	for _, s := range b.m.services {
		if b.m.Path(s.Program) == path {
			return s.ProductVersion
		}
	}
	return ""
}

var errUnreachable = errors.New("connect: connection timed out")

// TaskLimit is the ExecutionTimeLimit of the task registered as name ("":
// none registered): when Task Scheduler would end it.
func (m *Machine) TaskLimit(name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.defs[name].Settings.ExecutionTimeLimit
}

// migratedConfig is a containerd config at version 3: its top-level
// version line replaced (or added, for a version 1 file, which has none).
func migratedConfig(cfg string) string {
	var body []string
	for _, line := range strings.Split(cfg, "\n") {
		if k, _, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "version" {
			continue
		}
		body = append(body, line)
	}
	return "version = 3\n" + strings.TrimLeft(strings.Join(body, "\n"), "\n")
}
