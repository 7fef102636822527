//go:build windows

package windows

import (
	"errors"
	"fmt"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
	"golang.org/x/sys/windows/svc"
	"golang.org/x/sys/windows/svc/mgr"
)

// winSystem is System on Windows: one call each, errors mapped to the
// sentinels the logic acts on.
type winSystem struct{}

func (winSystem) QueryService(name string) (ServiceStatus, error) {
	var out ServiceStatus
	err := withService(name, func(s *mgr.Service) error {
		st, err := s.Query()
		out = ServiceStatus{State: serviceStateOf(uint32(st.State)), Win32ExitCode: st.Win32ExitCode, ServiceSpecificExitCode: st.ServiceSpecificExitCode}
		return err
	})
	return out, err
}

func (winSystem) ServiceImagePath(name string) (string, error) {
	var path string
	err := withService(name, func(s *mgr.Service) error {
		cfg, err := s.Config()
		path = cfg.BinaryPathName
		return err
	})
	return path, err
}

func (winSystem) StartService(name string) error {
	return mapped(withService(name, func(s *mgr.Service) error { return s.Start() }))
}

func (winSystem) StopService(name string) error {
	return mapped(withService(name, func(s *mgr.Service) error { _, err := s.Control(svc.Stop); return err }))
}

func (winSystem) ServiceDependents(name string) ([]string, error) {
	var out []string
	err := withService(name, func(s *mgr.Service) (err error) {
		out, err = s.ListDependentServices(svc.AnyActivity)
		return err
	})
	return out, mapped(err)
}

func (winSystem) RegistryString(key, value string) (v string, expand bool, err error) {
	err = withKey(key, func(k registry.Key) (err error) {
		var typ uint32
		v, typ, err = k.GetStringValue(value)
		expand = typ == registry.EXPAND_SZ
		return err
	})
	return v, expand, err
}

func (winSystem) RegistryInteger(key, value string) (v uint64, err error) {
	err = withKey(key, func(k registry.Key) (err error) { v, _, err = k.GetIntegerValue(value); return err })
	return v, err
}

func (winSystem) RegistryStrings(key, value string) (v []string, err error) {
	err = withKey(key, func(k registry.Key) (err error) { v, _, err = k.GetStringsValue(value); return err })
	return v, err
}

func (winSystem) RegistryKeyExists(key string) (bool, error) {
	err := withKey(key, func(registry.Key) error { return nil })
	if errors.Is(err, ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// withKey opens one HKLM key for reading for one call.
func withKey(key string, f func(registry.Key) error) error {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, key, registry.QUERY_VALUE)
	if err != nil {
		return mapped(err)
	}
	defer k.Close()
	return mapped(f(k))
}

func (winSystem) ExpandEnvironment(s string) (string, error) { return registry.ExpandString(s) }

// withService opens one service for one call.
func withService(name string, f func(*mgr.Service) error) error {
	m, err := mgr.Connect()
	if err != nil {
		return fmt.Errorf("connecting to the service control manager: %w", err)
	}
	defer m.Disconnect()
	s, err := m.OpenService(name)
	if err != nil {
		return mapped(err)
	}
	defer s.Close()
	return mapped(f(s))
}

func mapped(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, windows.ERROR_SERVICE_DOES_NOT_EXIST):
		return ErrNoService
	case errors.Is(err, windows.ERROR_SERVICE_ALREADY_RUNNING):
		return ErrServiceRunning
	case errors.Is(err, windows.ERROR_SERVICE_NOT_ACTIVE):
		return ErrServiceNotActive
	case errors.Is(err, registry.ErrNotExist):
		return ErrNotExist
	}
	return err
}
