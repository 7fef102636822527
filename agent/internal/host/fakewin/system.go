package fakewin

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"winpool.dev/agent/internal/host/windows"
)

// system is windows.System on the machine: the registry (names are
// case-insensitive, as Windows has them), the service control manager, and
// the security of the files under C:, which the machine gives SYSTEM, as
// Windows does for what a SYSTEM process creates.
type system struct{ m *Machine }

// agentsOwn is what the machine says of every file and folder: SYSTEM owns
// it, SYSTEM and Administrators alone may change it.
var agentsOwn = windows.EntrySecurity{OwnerSID: "S-1-5-18", OwnerAccount: `NT AUTHORITY\SYSTEM`, Protected: true,
	ACEs: []windows.ACE{{Type: windows.ACEAllow, Mask: 0x1f01ff, SID: "S-1-5-18"}, {Type: windows.ACEAllow, Mask: 0x1f01ff, SID: "S-1-5-32-544"}}}

func (s system) service(name string) (*service, error) {
	svc, ok := s.m.services[strings.ToLower(name)]
	if !ok {
		return nil, windows.ErrNoService
	}
	return svc, nil
}

func (s system) QueryService(name string) (windows.ServiceStatus, error) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	svc, err := s.service(name)
	if err != nil {
		return windows.ServiceStatus{}, err
	}
	if svc.running {
		return windows.ServiceStatus{State: windows.ServiceRunning}, nil
	}
	return windows.ServiceStatus{State: windows.ServiceStopped}, nil
}

func (s system) ServiceImagePath(name string) (string, error) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	svc, err := s.service(name)
	if err != nil {
		return "", err
	}
	if svc.NSSM {
		return `"` + s.m.Path(`k\nssm.exe`) + `"`, nil
	}
	if svc.Host != "" {
		return `"` + s.m.Path(svc.Host) + `" "` + s.m.Path(svc.Program) + `"`, nil
	}
	return `"` + s.m.Path(svc.Program) + `" --run-service`, nil
}

// StartService starts the service, and first, as the service control
// manager does, the services it depends on.
func (s system) StartService(name string) error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	svc, err := s.service(name)
	if err != nil {
		return err
	}
	if svc.running {
		return windows.ErrServiceRunning
	}
	s.startLocked(svc)
	if strings.EqualFold(path.Base(strings.ReplaceAll(svc.Program, `\`, "/")), "kube-proxy.exe") {
		s.m.kubeProxyStarted = time.Now()
	}
	return nil
}

func (s system) startLocked(svc *service) {
	for _, d := range svc.DependsOn {
		if dep, err := s.service(d); err == nil && !dep.running {
			s.startLocked(dep)
		}
	}
	svc.running = true
	svc.answers = 0
}

// errDependentsRunning is ERROR_DEPENDENT_SERVICES_RUNNING (1051): the
// service control manager does not stop a service others that run depend on.
var errDependentsRunning = errors.New("A stop control has been sent to a service that other running services are dependent on. (ERROR_DEPENDENT_SERVICES_RUNNING)")

// StopService stops the service, unless a running service depends on it.
func (s system) StopService(name string) error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	svc, err := s.service(name)
	if err != nil {
		return err
	}
	if !svc.running {
		return windows.ErrServiceNotActive
	}
	for _, other := range s.m.services {
		if other.running && slices.ContainsFunc(other.DependsOn, func(d string) bool { return strings.EqualFold(d, name) }) {
			return errDependentsRunning
		}
	}
	svc.running = false
	s.m.forgetServiceLocked(strings.ToLower(svc.Name))
	return nil
}

// ServiceDependents are the services that depend on name, directly.
func (s system) ServiceDependents(name string) ([]string, error) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if _, err := s.service(name); err != nil {
		return nil, err
	}
	var out []string
	for _, other := range s.m.services {
		if slices.ContainsFunc(other.DependsOn, func(d string) bool { return strings.EqualFold(d, name) }) {
			out = append(out, other.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (s system) RegistryString(key, value string) (string, bool, error) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if strings.EqualFold(key, currentVersionKey) && strings.EqualFold(value, "CurrentBuildNumber") {
		s.m.builds++
		if s.m.o.ReadFails != nil {
			if err := s.m.o.ReadFails(s.m.builds); err != nil {
				return "", false, err
			}
		}
	}
	v, ok := s.m.strs[strings.ToLower(key+`\`+value)]
	if !ok {
		return "", false, windows.ErrNotExist
	}
	return v, false, nil
}

func (s system) RegistryInteger(key, value string) (uint64, error) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	v, ok := s.m.ints[strings.ToLower(key+`\`+value)]
	if !ok {
		return 0, windows.ErrNotExist
	}
	return v, nil
}

func (s system) RegistryStrings(key, value string) ([]string, error) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	v, ok := s.m.multi[strings.ToLower(key+`\`+value)]
	if !ok {
		return nil, windows.ErrNotExist
	}
	return append([]string(nil), v...), nil
}

func (s system) RegistryKeyExists(key string) (bool, error) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	k := strings.ToLower(key)
	if s.m.keys[k] {
		return true, nil
	}
	for _, values := range []func() bool{
		func() bool { return hasPrefix(s.m.strs, k+`\`) },
		func() bool { return hasPrefix(s.m.ints, k+`\`) },
		func() bool { return hasPrefix(s.m.multi, k+`\`) },
	} {
		if values() {
			return true, nil
		}
	}
	return false, nil
}

func hasPrefix[V any](m map[string]V, prefix string) bool {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

func (s system) ExpandEnvironment(v string) (string, error) {
	return os.Expand(strings.NewReplacer("%ProgramFiles%", "${ProgramFiles}", "%ProgramData%", "${ProgramData}", "%SystemRoot%", "${SystemRoot}").Replace(v),
		box{s.m}.Getenv), nil
}

func (s system) CreateFolder(dir, sddl string) error {
	err := os.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrExist) {
		return windows.ErrExists
	}
	return err
}

func (s system) FileSecurity(path string) (windows.EntrySecurity, fs.FileMode, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return windows.EntrySecurity{}, 0, err
	}
	mode := fi.Mode() & fs.ModeDir
	if fi.Mode()&fs.ModeSymlink != 0 {
		mode = fs.ModeIrregular
	}
	return agentsOwn, mode, nil
}

func (s system) SetFolderDACL(string, string) error { return nil }
