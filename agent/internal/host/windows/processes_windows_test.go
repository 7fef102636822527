//go:build windows

package windows

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The process table's real calls, on the Windows runner: the test's own
// process is listed under its parent with its program's name, and a child
// ended by Terminate exits with code 1, as the fake's processes do.
func TestTheRealProcessTableListsAndEndsProcesses(t *testing.T) {
	procs, err := winProcesses{}.List()
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	i := slices.IndexFunc(procs, func(p Process) bool { return p.PID == uint32(os.Getpid()) })
	if i < 0 || procs[i].ParentPID != uint32(os.Getppid()) || !strings.EqualFold(procs[i].Image, filepath.Base(self)) {
		t.Fatalf("this process (pid %d, parent %d, %s) in the table: %+v", os.Getpid(), os.Getppid(), filepath.Base(self), procs[max(i, 0)])
	}
	// ping.exe waits a minute and exits 0 on its own.
	child := exec.Command(filepath.Join(os.Getenv("SystemRoot"), "System32", "PING.EXE"), "-n", "60", "127.0.0.1")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	if err := (winProcesses{}).Terminate(uint32(child.Process.Pid)); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := child.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("the ended child: %v, want exit code 1", err)
	}
}
