package windows

import (
	"errors"
	"io/fs"
)

// System is the seam under the agent's Windows logic: each method is one
// call into Windows (the service control manager, the registry), and
// nothing more; what the agent makes of the answers (which program a
// wrapped service runs, when a stop is done, what a start that died says)
// is platform-neutral Go above it, run on Linux over a fake machine
// (kube-proxy's winkernel does the same with its HCN interface).
// system_windows.go is the real one.
type System interface {
	// QueryService is the service's status; ErrNoService when none of
	// that name is installed.
	QueryService(name string) (ServiceStatus, error)
	// ServiceImagePath is the service's configured command line (ImagePath).
	ServiceImagePath(name string) (string, error)
	// StartService asks the service to start; ErrServiceRunning when it runs.
	StartService(name string) error
	// StopService sends the stop control; ErrServiceNotActive when it is not
	// running (a service other running services depend on refuses it:
	// ERROR_DEPENDENT_SERVICES_RUNNING).
	StopService(name string) error
	// ServiceDependents are the services that depend on name directly
	// (EnumDependentServices, any state).
	ServiceDependents(name string) ([]string, error)
	// RegistryString reads a string value under HKLM\key, and whether it is
	// REG_EXPAND_SZ; ErrNotExist when the key or the value is missing.
	RegistryString(key, value string) (s string, expand bool, err error)
	// RegistryInteger reads a DWORD or QWORD value under HKLM\key;
	// ErrNotExist when the key or the value is missing.
	RegistryInteger(key, value string) (uint64, error)
	// RegistryStrings reads a REG_MULTI_SZ value under HKLM\key;
	// ErrNotExist when the key or the value is missing.
	RegistryStrings(key, value string) ([]string, error)
	// RegistryKeyExists says whether HKLM\key exists.
	RegistryKeyExists(key string) (bool, error)
	// ExpandEnvironment expands %VARIABLES% as the machine's environment has them.
	ExpandEnvironment(s string) (string, error)

	// CreateFolder creates dir with the security descriptor sddl;
	// ErrExists when something of that name exists.
	CreateFolder(dir, sddl string) error
	// FileSecurity reads the owner and DACL of a file or folder and what
	// kind of entry it is (fs.ModeDir, fs.ModeIrregular for a reparse
	// point, 0 for a file), from the entry itself: a link is not followed;
	// fs.ErrNotExist when there is none.
	FileSecurity(path string) (EntrySecurity, fs.FileMode, error)
	// SetFolderDACL gives dir the protected DACL of sddl.
	SetFolderDACL(dir, sddl string) error
}

// ServiceState is a service's SERVICE_STATUS.dwCurrentState, as far as the
// agent tells states apart: the first four are Windows' own values.
type ServiceState int

const (
	ServiceStopped ServiceState = iota + 1 // SERVICE_STOPPED
	ServiceStartPending
	ServiceStopPending
	ServiceRunning
	// ServiceOther: continue or pause pending, paused.
	ServiceOther
)

// serviceStateOf is the state of a SERVICE_STATUS.dwCurrentState.
func serviceStateOf(dwCurrentState uint32) ServiceState {
	if s := ServiceState(dwCurrentState); s >= ServiceStopped && s <= ServiceRunning {
		return s
	}
	return ServiceOther
}

func (s ServiceState) String() string {
	switch s {
	case ServiceStopped:
		return "Stopped"
	case ServiceStartPending:
		return "StartPending"
	case ServiceStopPending:
		return "StopPending"
	case ServiceRunning:
		return "Running"
	}
	return "Other"
}

// ServiceStatus is what QueryService returns.
type ServiceStatus struct {
	State ServiceState
	// Win32ExitCode and ServiceSpecificExitCode: why a service stopped.
	Win32ExitCode, ServiceSpecificExitCode uint32
}

// The answers of System that the logic above it acts on.
var (
	ErrNoService        = errors.New("the service does not exist")
	ErrServiceRunning   = errors.New("the service is already running")
	ErrServiceNotActive = errors.New("the service is not running")
	ErrNotExist         = errors.New("the registry key or value does not exist")
	ErrExists           = errors.New("it already exists")
)
