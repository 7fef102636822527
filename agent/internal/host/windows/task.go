package windows

import (
	"fmt"
	"path/filepath"
)

// maxTaskRun is the longest command schtasks /TR accepts.
const maxTaskRun = 261

// taskCommand is the scheduled task's command line: the task's copy of the
// agent, running the swap of that plan. Paths are quoted (Program Files and
// ProgramData may hold spaces on some images).
func taskCommand(exe, plan string) (string, error) {
	cmd := fmt.Sprintf(`"%s" containerd-swap "%s"`, exe, plan)
	if len(cmd) > maxTaskRun {
		return "", fmt.Errorf("the task's command line is %d characters, schtasks takes at most %d: use a shorter state folder than %s",
			len(cmd), maxTaskRun, filepath.Dir(exe))
	}
	return cmd, nil
}
