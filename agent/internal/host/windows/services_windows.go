//go:build windows

package windows

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
	"golang.org/x/sys/windows/svc"
	"golang.org/x/sys/windows/svc/mgr"

	"winpool.dev/agent/internal/host"
)

// servicePoll is how often a service's state is re-read while waiting.
const servicePoll = 500 * time.Millisecond

// readServices reads how each of the named services is installed and
// whether it runs, in the order given; a name with no service is left out.
func readServices(names ...string) ([]host.Service, error) {
	m, err := mgr.Connect()
	if err != nil {
		return nil, fmt.Errorf("connecting to the service control manager: %w", err)
	}
	defer m.Disconnect()
	var found []host.Service
	for _, name := range names {
		s, ok, err := readService(m, name)
		if err != nil {
			return nil, err
		}
		if ok {
			found = append(found, s)
		}
	}
	return found, nil
}

// readService reads one service: its state from the service control
// manager, its wrapper and program from its ImagePath and, under NSSM, from
// NSSM's parameters. ok is false when no such service is installed.
func readService(m *mgr.Mgr, name string) (out host.Service, ok bool, err error) {
	s, err := m.OpenService(name)
	if errors.Is(err, windows.ERROR_SERVICE_DOES_NOT_EXIST) {
		return host.Service{}, false, nil
	}
	if err != nil {
		return host.Service{}, false, fmt.Errorf("opening service %s: %w", name, err)
	}
	defer s.Close()
	st, err := s.Query()
	if err != nil {
		return host.Service{}, false, fmt.Errorf("querying service %s: %w", name, err)
	}
	cfg, err := s.Config()
	if err != nil {
		return host.Service{}, false, fmt.Errorf("reading service %s's configuration: %w", name, err)
	}
	out = host.Service{Name: name, Wrapper: serviceWrapper(cfg.BinaryPathName), Running: st.State == svc.Running}
	var app string
	if out.Wrapper == host.WrapperNSSM {
		if app, err = nssmApplication(name); err != nil {
			return host.Service{}, false, err
		}
	}
	out.Program = serviceProgram(cfg.BinaryPathName, out.Wrapper, app)
	return out, true, nil
}

// nssmApplication is the program NSSM runs for a service, its environment
// variables expanded (NSSM expands them when it starts the program); "" when
// NSSM has none configured.
func nssmApplication(service string) (string, error) {
	key := nssmParametersKey(service)
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, key, registry.QUERY_VALUE)
	if errors.Is(err, registry.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf(`opening HKLM\%s: %w`, key, err)
	}
	defer k.Close()
	v, typ, err := k.GetStringValue("Application")
	if errors.Is(err, registry.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf(`reading HKLM\%s\Application: %w`, key, err)
	}
	if typ != registry.EXPAND_SZ {
		return v, nil
	}
	expanded, err := registry.ExpandString(v)
	if err != nil {
		return "", fmt.Errorf(`expanding HKLM\%s\Application %q: %w`, key, v, err)
	}
	return expanded, nil
}

// stopService stops a service and waits until it has stopped (a stopped one
// is left as it is).
func stopService(ctx context.Context, name string) error {
	return withService(name, func(s *mgr.Service) error {
		st, err := s.Query()
		if err != nil {
			return err
		}
		if st.State != svc.Stopped && st.State != svc.StopPending {
			if _, err := s.Control(svc.Stop); err != nil && !errors.Is(err, windows.ERROR_SERVICE_NOT_ACTIVE) {
				return fmt.Errorf("stopping: %w", err)
			}
		}
		return waitState(ctx, s, svc.Stopped)
	})
}

// startService starts a service and waits until it runs.
func startService(ctx context.Context, name string) error {
	return withService(name, func(s *mgr.Service) error {
		if err := s.Start(); err != nil && !errors.Is(err, windows.ERROR_SERVICE_ALREADY_RUNNING) {
			return fmt.Errorf("starting: %w", err)
		}
		return waitState(ctx, s, svc.Running)
	})
}

func withService(name string, f func(*mgr.Service) error) error {
	m, err := mgr.Connect()
	if err != nil {
		return fmt.Errorf("connecting to the service control manager: %w", err)
	}
	defer m.Disconnect()
	s, err := m.OpenService(name)
	if err != nil {
		return fmt.Errorf("opening service %s: %w", name, err)
	}
	defer s.Close()
	if err := f(s); err != nil {
		return fmt.Errorf("service %s: %w", name, err)
	}
	return nil
}

func waitState(ctx context.Context, s *mgr.Service, want svc.State) error {
	t := time.NewTicker(servicePoll)
	defer t.Stop()
	for {
		st, err := s.Query()
		if err != nil {
			return err
		}
		if st.State == want {
			return nil
		}
		// A service that stopped while it was to start failed to start; its
		// exit code is what the service's log explains.
		if want == svc.Running && st.State == svc.Stopped {
			return fmt.Errorf("stopped while starting (exit code %d, service-specific %d)", st.Win32ExitCode, st.ServiceSpecificExitCode)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still %s, not %s: %w", stateName(st.State), stateName(want), ctx.Err())
		case <-t.C:
		}
	}
}

func stateName(s svc.State) string {
	switch s {
	case svc.Stopped:
		return "Stopped"
	case svc.StartPending:
		return "StartPending"
	case svc.StopPending:
		return "StopPending"
	case svc.Running:
		return "Running"
	}
	return fmt.Sprintf("state %d", s)
}

// productVersion reads the binary's version resource ("" when it has none,
// as Go binaries built without one do not).
func productVersion(path string) string {
	size, err := windows.GetFileVersionInfoSize(path, nil)
	if err != nil || size == 0 {
		return ""
	}
	buf := make([]byte, size)
	if err := windows.GetFileVersionInfo(path, 0, size, unsafe.Pointer(&buf[0])); err != nil {
		return ""
	}
	var fixed *windows.VS_FIXEDFILEINFO
	var n uint32
	if err := windows.VerQueryValue(unsafe.Pointer(&buf[0]), `\`, unsafe.Pointer(&fixed), &n); err != nil || fixed == nil || n == 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d.%d", fixed.ProductVersionMS>>16, fixed.ProductVersionMS&0xffff, fixed.ProductVersionLS>>16)
}
