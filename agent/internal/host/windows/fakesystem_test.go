package windows

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
)

// fakeSystem is a machine under the System seam: services with their
// ImagePath and a script of the states successive queries see, the
// registry, and the machine's environment. Every call is recorded.
type fakeSystem struct {
	mu       sync.Mutex
	services map[string]*fakeService
	registry map[string]fakeValue // `key\value`
	integers map[string]uint64    // `key\value`
	multi    map[string][]string  // `key\value`
	keys     map[string]bool      // keys that exist without the values above
	env      map[string]string
	calls    []string
	// Files are real (a test's temporary folder); their security is kept
	// here, by path. An entry without one is owned by ownerOfOthers with
	// Users allowed to change it: what %ProgramData% gives what a user creates.
	security      map[string]EntrySecurity
	ownerOfOthers string
}

// agentsOwn is a folder as CreateFolder or SetFolderDACL leave it (SYSTEM owns what the agent creates).
var agentsOwn = EntrySecurity{OwnerSID: sidSystem, Protected: true,
	ACEs: []ACE{{Type: ACEAllow, Mask: 0x1f01ff, SID: sidSystem}, {Type: ACEAllow, Mask: 0x1f01ff, SID: sidAdministrators}}}

type fakeService struct {
	imagePath string
	// states: what each query returns next; the last one stays.
	states []ServiceStatus
	// onStart and onStop: the states that follow a start or stop control.
	onStart, onStop []ServiceStatus
	queryErr        error
	// dependents: the services that depend on this one.
	dependents []string
}

type fakeValue struct {
	s      string
	expand bool
}

func newFakeSystem() *fakeSystem {
	return &fakeSystem{services: map[string]*fakeService{}, registry: map[string]fakeValue{}, integers: map[string]uint64{}, multi: map[string][]string{}, keys: map[string]bool{}, env: map[string]string{},
		security: map[string]EntrySecurity{}, ownerOfOthers: "S-1-5-21-1-2-3-1001"}
}

func status(s ServiceState) ServiceStatus { return ServiceStatus{State: s} }

func (f *fakeSystem) record(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeSystem) QueryService(name string) (ServiceStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("query %s", name)
	s, ok := f.services[name]
	if !ok {
		return ServiceStatus{}, ErrNoService
	}
	if s.queryErr != nil {
		return ServiceStatus{}, s.queryErr
	}
	st := s.states[0]
	if len(s.states) > 1 {
		s.states = s.states[1:]
	}
	return st, nil
}

func (f *fakeSystem) ServiceImagePath(name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("config %s", name)
	s, ok := f.services[name]
	if !ok {
		return "", ErrNoService
	}
	return s.imagePath, nil
}

func (f *fakeSystem) control(name, what string, next func(*fakeService) []ServiceStatus, refuse ServiceState, refusal error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("%s %s", what, name)
	s, ok := f.services[name]
	if !ok {
		return ErrNoService
	}
	if s.states[0].State == refuse {
		return refusal
	}
	if n := next(s); len(n) > 0 {
		s.states = append([]ServiceStatus(nil), n...)
	}
	return nil
}

func (f *fakeSystem) StartService(name string) error {
	return f.control(name, "start", func(s *fakeService) []ServiceStatus { return s.onStart }, ServiceRunning, ErrServiceRunning)
}

func (f *fakeSystem) StopService(name string) error {
	return f.control(name, "stop", func(s *fakeService) []ServiceStatus { return s.onStop }, ServiceStopped, ErrServiceNotActive)
}

func (f *fakeSystem) ServiceDependents(name string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("dependents %s", name)
	s, ok := f.services[name]
	if !ok {
		return nil, ErrNoService
	}
	return s.dependents, nil
}

func (f *fakeSystem) RegistryString(key, value string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(`registry %s\%s`, key, value)
	v, ok := f.registry[key+`\`+value]
	if !ok {
		return "", false, ErrNotExist
	}
	return v.s, v.expand, nil
}

func (f *fakeSystem) RegistryInteger(key, value string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(`registry %s\%s`, key, value)
	v, ok := f.integers[key+`\`+value]
	if !ok {
		return 0, ErrNotExist
	}
	return v, nil
}

func (f *fakeSystem) RegistryStrings(key, value string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(`registry %s\%s`, key, value)
	v, ok := f.multi[key+`\`+value]
	if !ok {
		return nil, ErrNotExist
	}
	return v, nil
}

func (f *fakeSystem) RegistryKeyExists(key string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(`registry %s`, key)
	return f.keys[key], nil
}

func (f *fakeSystem) ExpandEnvironment(s string) (string, error) {
	for k, v := range f.env {
		s = strings.ReplaceAll(s, "%"+k+"%", v)
	}
	return s, nil
}

func (f *fakeSystem) CreateFolder(dir, sddl string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("create %s %s", dir, sddl)
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return ErrExists
		}
		return err
	}
	f.security[dir] = agentsOwn
	return nil
}

func (f *fakeSystem) FileSecurity(path string) (EntrySecurity, fs.FileMode, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Lstat(path)
	if err != nil {
		return EntrySecurity{}, 0, err
	}
	var mode fs.FileMode
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		mode = fs.ModeIrregular
	case fi.IsDir():
		mode = fs.ModeDir
	}
	s, ok := f.security[path]
	if !ok {
		s = EntrySecurity{OwnerSID: f.ownerOfOthers, ACEs: []ACE{{Type: ACEAllow, Mask: 0x1f01ff, SID: f.ownerOfOthers}, {Type: ACEAllow, Mask: 0x116, SID: "S-1-5-32-545"}}}
	}
	return s, mode, nil
}

func (f *fakeSystem) SetFolderDACL(dir, sddl string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("dacl %s %s", dir, sddl)
	s := f.security[dir]
	s.Protected, s.NullDACL, s.ACEs = true, false, agentsOwn.ACEs
	f.security[dir] = s
	return nil
}
