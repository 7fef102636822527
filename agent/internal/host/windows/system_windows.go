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
		out = ServiceStatus{State: serviceState(st.State), Win32ExitCode: st.Win32ExitCode, ServiceSpecificExitCode: st.ServiceSpecificExitCode}
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

func (winSystem) RegistryString(key, value string) (string, bool, error) {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, key, registry.QUERY_VALUE)
	if err != nil {
		return "", false, mapped(err)
	}
	defer k.Close()
	v, typ, err := k.GetStringValue(value)
	return v, typ == registry.EXPAND_SZ, mapped(err)
}

func (winSystem) RegistryInteger(key, value string) (uint64, error) {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, key, registry.QUERY_VALUE)
	if err != nil {
		return 0, mapped(err)
	}
	defer k.Close()
	v, _, err := k.GetIntegerValue(value)
	return v, mapped(err)
}

func (winSystem) RegistryStrings(key, value string) ([]string, error) {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, key, registry.QUERY_VALUE)
	if err != nil {
		return nil, mapped(err)
	}
	defer k.Close()
	v, _, err := k.GetStringsValue(value)
	return v, mapped(err)
}

func (winSystem) RegistryKeyExists(key string) (bool, error) {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, key, registry.QUERY_VALUE)
	if errors.Is(err, registry.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	k.Close()
	return true, nil
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

func serviceState(s svc.State) ServiceState {
	switch s {
	case svc.Stopped:
		return ServiceStopped
	case svc.StartPending:
		return ServiceStartPending
	case svc.StopPending:
		return ServiceStopPending
	case svc.Running:
		return ServiceRunning
	}
	return ServiceOther
}
