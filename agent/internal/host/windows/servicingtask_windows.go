//go:build windows

package windows

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/windows"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
)

func (h *Host) servicingResult() (*host.UpdateTask, error) {
	t, err := readUpdateResult(servicingResultFile(h.o.StateDir))
	if err != nil {
		return nil, err
	}
	return interruptedByBoot(t, windows.DurationSinceBoot()), nil
}

// StartUpdate hands the install to a one-shot SYSTEM scheduled task outside
// the agent's pod (servicingtask.go) and returns once it runs; Observe
// reads the task's result file.
func (h *Host) StartUpdate(ctx context.Context, req host.UpdateRequest) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	s := servicingStarter{
		stateDir: h.o.StateDir, self: self, now: time.Now, getenv: os.Getenv, uptime: windows.DurationSinceBoot,
		startTask: func(ctx context.Context, command string) error {
			return runTask(ctx, decide.ServicingTaskName, command)
		},
	}
	return s.start(ctx, req)
}

// RunServicing is the servicing task's body (`winpool-agent.exe servicing
// <plan>`): it installs what the plan the agent wrote says, with DISM or
// the Windows Update client in this process, and records the outcome in the
// plan's result file.
func RunServicing(ctx context.Context, planFile string) (host.UpdateTask, error) {
	return runServicing(ctx, planFile, installUpdate)
}
