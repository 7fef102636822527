package windows

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
)

func (h *Host) servicingResult() (*host.UpdateTask, error) {
	t, err := readUpdateResult(servicingResultFile(h.o.StateDir))
	if err != nil {
		return nil, err
	}
	t = interruptedByBoot(t, h.m.Box.SinceBoot())
	if t != nil && t.Phase == host.UpdateRunning && t.MarksStart && t.TaskStarted.IsZero() {
		// Why a task that was run has not started: Task Scheduler's word
		// (an unreadable one leaves the agent's message without it).
		if code, err := h.m.Tasks.LastTaskResult(decide.ServicingTaskName); err == nil {
			t.LastTaskResult = &code
		}
	}
	return t, nil
}

// StartUpdate hands the install to a one-shot SYSTEM scheduled task outside
// the agent's pod (servicingtask.go) and returns once it runs; Observe
// reads the task's result file.
func (h *Host) StartUpdate(ctx context.Context, req host.UpdateRequest) error {
	self, err := h.m.Box.Executable()
	if err != nil {
		return err
	}
	s := servicingStarter{
		stateDir: h.o.StateDir, self: self, now: h.m.Box.Now, getenv: h.m.Box.Getenv, uptime: h.m.Box.SinceBoot,
		startTask: func(definition string) error { return startTask(h.m.Tasks, decide.ServicingTaskName, definition) },
	}
	return s.start(ctx, req)
}

// RunServicingOn is the servicing task's body (`winpool-agent.exe servicing
// <plan>`) on m: it installs what the plan the agent wrote says, with DISM
// or the Windows Update client in this process, and records the outcome in
// the plan's result file.
func RunServicingOn(ctx context.Context, m Machine, planFile string) (host.UpdateTask, error) {
	return runServicing(ctx, planFile, func(ctx context.Context, p servicingPlan, req host.UpdateRequest) (host.UpdateResult, error) {
		return installUpdate(ctx, m, p, req)
	})
}

// installUpdate is the servicing task's installer: it installs the plan's
// update from where the revision says, in the task's own process, outside
// the agent's pod.
func installUpdate(ctx context.Context, m Machine, p servicingPlan, req host.UpdateRequest) (host.UpdateResult, error) {
	// The task runs with the machine's environment: the agent's proxy
	// settings come with the plan (servicingtask.go), and are set before
	// anything reads them (net/http reads them once).
	for k, v := range p.Proxy {
		if err := m.Box.Setenv(k, v); err != nil {
			return host.UpdateResult{}, fmt.Errorf("setting %s from the plan: %w", k, err)
		}
	}
	if req.Undo {
		return removeCumulative(ctx, dismRunner{m}, req.Target)
	}
	switch req.Source {
	case config.SourcePackages:
		running, err := readBuild(m.System)
		if err != nil {
			return host.UpdateResult{}, err
		}
		s := servicing{dir: filepath.Join(p.StateDir, "updates"), client: m.Net.HTTP(), dism: func(ctx context.Context, pkg string) (int, error) {
			return dism(ctx, m, pkg)
		}}
		return s.install(ctx, req, running)
	case config.SourceWindowsUpdate, "":
		wu, closeSession, err := m.WindowsUpdate()
		if err != nil {
			return host.UpdateResult{}, err
		}
		defer closeSession()
		return installFromWindowsUpdate(ctx, wu, req)
	}
	return host.UpdateResult{}, fmt.Errorf("unknown update source %q", req.Source)
}

// dism runs DISM /Online /Add-Package /PackagePath:<path> /NoRestart: the
// reboot is the agent's to make, after it reported Rebooting. It returns
// DISM's exit code; err only when DISM could not be run at all.
func dism(ctx context.Context, m Machine, packagePath string) (int, error) {
	exe := filepath.Join(systemRoot(m.Box.Getenv), "System32", "Dism.exe")
	out, err := m.Programs.Run(ctx, exe, "/Online", "/Add-Package", "/PackagePath:"+packagePath, "/NoRestart", "/Quiet", "/English")
	if err != nil {
		return 0, fmt.Errorf("running %s: %w (output %q)", exe, err, strings.TrimSpace(string(out.Stdout)+string(out.Stderr)))
	}
	return out.ExitCode, nil
}
