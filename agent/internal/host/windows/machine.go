package windows

import (
	"context"
	"io/fs"
	"net"
	"net/http"
	"time"

	"winpool.dev/agent/internal/hns"
)

// Machine is everything under the seam: the Windows calls the agent's
// logic makes, each method one call and nothing more. Host and the
// scheduled tasks' bodies (RunServicingOn, RunContainerdSwapOn) run on a
// Machine, so what a node runs is what the Linux tests and the simulated
// fleet run, over a fake machine; machine_windows.go is the real one.
type Machine struct {
	// System: the service control manager, the registry, folders' security.
	System System
	// Tasks: Task Scheduler.
	Tasks TaskScheduler
	// Programs runs a program to its end (containerd, DISM, shutdown).
	Programs Programs
	// HCN lists HNS's networks, load balancers and endpoints.
	HCN hns.API
	// WindowsUpdate opens a Windows Update Agent session.
	WindowsUpdate func() (WindowsUpdate, func(), error)
	// Net: pipes, sockets and HTTP as this machine reaches them.
	Net Net
	// Box: the clock, the process, the disk.
	Box Box
	// Processes: the host's process table.
	Processes Processes
}

// Process is one entry of the process table (PROCESSENTRY32).
type Process struct {
	PID, ParentPID uint32
	// Image is the program's file name (kube-proxy.exe).
	Image string
}

// Processes is the host's process table, as far as the agent uses it.
type Processes interface {
	// List is a snapshot of the processes that run
	// (CreateToolhelp32Snapshot, Process32First/Next).
	List() ([]Process, error)
	// Terminate ends process pid (OpenProcess with PROCESS_TERMINATE,
	// TerminateProcess with exit code 1).
	Terminate(pid uint32) error
}

// TaskScheduler is Task Scheduler, as far as the agent uses it.
type TaskScheduler interface {
	// RegisterTask creates or replaces task name in the root folder from
	// its XML definition (ITaskFolder.RegisterTask, TASK_CREATE_OR_UPDATE).
	RegisterTask(name, definition string) error
	// RunTask runs the registered task now, its conditions applying
	// (IRegisteredTask.Run). nil means Task Scheduler accepted the run, not
	// that the task's program started.
	RunTask(name string) error
	// LastTaskResult is the task's Last Run Result (IRegisteredTask.
	// LastTaskResult): SCHED_S_TASK_HAS_NOT_RUN, its program's exit code, or
	// why Task Scheduler could not start it.
	LastTaskResult(name string) (uint32, error)
}

// Output is what a program left when it ended.
type Output struct {
	Stdout, Stderr []byte
	ExitCode       int
}

// Programs runs programs.
type Programs interface {
	// Run runs exe with args to its end. err: it could not be started, or
	// ctx ended first (a non-zero exit code is no error).
	Run(ctx context.Context, exe string, args ...string) (Output, error)
}

// Net is how the machine reaches others.
type Net interface {
	// Dial opens a TCP connection (preflight's probes).
	Dial(ctx context.Context, network, addr string) (net.Conn, error)
	// HTTP is the client downloads use: HTTPS_PROXY as the process has it.
	HTTP() *http.Client
	// WinHTTPProxy is the machine's WinHTTP proxy (`netsh winhttp show
	// proxy`), which the Windows Update client uses.
	WinHTTPProxy() (WinHTTPProxyConfig, error)
	// DialPipe connects to a named pipe (\\.\pipe\name).
	DialPipe(ctx context.Context, pipe string) (net.Conn, error)
}

// Box is the machine itself: its clock, this process, its disk.
type Box interface {
	Now() time.Time
	// SinceBoot is how long the machine has been up (GetTickCount64).
	SinceBoot() time.Duration
	// Executable is this process's program (os.Executable).
	Executable() (string, error)
	Getenv(key string) string
	Setenv(key, value string) error
	Stat(path string) (fs.FileInfo, error)
	// FreeBytes on drive ("C:") available to this account.
	FreeBytes(drive string) (int64, error)
	// ProductVersion is a program's version resource ("" when none).
	ProductVersion(path string) string
}
