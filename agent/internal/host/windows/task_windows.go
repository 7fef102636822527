//go:build windows

package windows

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// runTask (re)creates the one-shot task name as SYSTEM, running command,
// and starts it now. /SC ONCE needs a start time; the task is only ever run
// by /Run.
//
// schtasks is not stopped when ctx ends (the agent being stopped): killed
// after /Run had started the task, it would report a task that runs as one
// that never started. commandTimeout still bounds a hung schtasks.
func runTask(ctx context.Context, name, command string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commandTimeout)
	defer cancel()
	schtasks := filepath.Join(systemRoot(), "System32", "schtasks.exe")
	create := []string{"/Create", "/F", "/TN", name, "/TR", command, "/SC", "ONCE", "/ST", "00:00", "/RU", "SYSTEM", "/RL", "HIGHEST"}
	for _, args := range [][]string{create, {"/Run", "/TN", name}} {
		out, err := exec.CommandContext(ctx, schtasks, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("schtasks %s %s: %w (output %q)", args[0], name, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
