package windows

import (
	"fmt"
	"path/filepath"
)

// The subcommands of winpool-agent.exe that the agent's SYSTEM scheduled
// tasks run, with the plan file as their one argument (cmd/winpool-agent).
const (
	// ContainerdSwapCommand carries out a containerd upgrade plan
	// (RunContainerdSwap).
	ContainerdSwapCommand = "containerd-swap"
	// ServicingCommand carries out a servicing plan (RunServicing).
	ServicingCommand = "servicing"
)

// maxTaskRun is the longest command schtasks /TR accepts.
const maxTaskRun = 261

// taskCommand is a scheduled task's command line: the task's copy of the
// agent, running subcommand on that plan. Paths are quoted (Program Files
// and ProgramData may hold spaces on some images).
func taskCommand(exe, subcommand, plan string) (string, error) {
	cmd := fmt.Sprintf(`"%s" %s "%s"`, exe, subcommand, plan)
	if len(cmd) > maxTaskRun {
		return "", fmt.Errorf("the task's command line is %d characters, schtasks takes at most %d: use a shorter state folder than %s",
			len(cmd), maxTaskRun, filepath.Dir(exe))
	}
	return cmd, nil
}
