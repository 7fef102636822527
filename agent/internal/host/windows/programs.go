package windows

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"time"
)

// execPrograms is Programs on os/exec, which is the same call on every
// platform.
type execPrograms struct{}

func (execPrograms) Run(ctx context.Context, exe string, args ...string) (Output, error) {
	cmd := exec.CommandContext(ctx, exe, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Once the program is killed, a process it left holding its output
	// must not keep the caller waiting.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	out := Output{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	var exit *exec.ExitError
	if errors.As(err, &exit) && ctx.Err() == nil {
		out.ExitCode = exit.ExitCode()
		return out, nil
	}
	return out, err
}
