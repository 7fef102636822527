//go:build windows

package windows

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Task Scheduler's real calls on the runner (an administrator): the
// definition the agent registers is accepted, runs as SYSTEM on Run, and
// its program's exit code comes back as LastTaskResult, as the fake's does.
func TestTheRealTaskSchedulerRunsTheAgentsDefinition(t *testing.T) {
	const name = `winpool-test-task`
	// where.exe stands for the agent: it exits 1 (or 2) at once on the
	// arguments a servicing task gets.
	where := filepath.Join(os.Getenv("SystemRoot"), "System32", "where.exe")
	def, err := taskDefinition(where, ServicingCommand, filepath.Join(t.TempDir(), "plan.json"), 0)
	if err != nil {
		t.Fatal(err)
	}
	tasks := winTasks{}
	t.Cleanup(func() { _ = exec.Command("schtasks.exe", "/Delete", "/F", "/TN", name).Run() })
	if err := tasks.RegisterTask(name, def); err != nil {
		t.Fatalf("RegisterTask: %v\n%s", err, def)
	}
	if code, err := tasks.LastTaskResult(name); err != nil || code != 0x41303 {
		t.Errorf("a task never run: %#x, %v; want 0x41303 (SCHED_S_TASK_HAS_NOT_RUN)", code, err)
	}
	if err := tasks.RunTask(name); err != nil {
		t.Fatalf("RunTask: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		code, err := tasks.LastTaskResult(name)
		if err == nil && code != 0x41303 && code != 0x41301 {
			if code != 1 && code != 2 {
				t.Errorf("LastTaskResult %#x, want where.exe's exit code", code)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the task did not end within a minute: %#x, %v", code, err)
		case <-time.After(time.Second):
		}
	}
}

func TestTheRealPipeDialFailsForAMissingPipe(t *testing.T) {
	if pipeAnswers(context.Background(), winNet{}, `\\.\pipe\winpool-no-such-pipe`) {
		t.Error("a pipe nobody serves answered")
	}
}
