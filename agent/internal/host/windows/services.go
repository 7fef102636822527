package windows

import (
	"context"
	"errors"
	"fmt"
	"time"

	"winpool.dev/agent/internal/host"
)

// servicePoll is how often a service's state is re-read while waiting.
var servicePoll = 500 * time.Millisecond

// readServices reads how each of the named services is installed and
// whether it runs, in the order given; a name with no service is left out.
func readServices(sys System, names ...string) ([]host.Service, error) {
	var found []host.Service
	for _, name := range names {
		s, ok, err := readService(sys, name)
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
func readService(sys System, name string) (out host.Service, ok bool, err error) {
	st, err := sys.QueryService(name)
	if errors.Is(err, ErrNoService) {
		return host.Service{}, false, nil
	}
	if err != nil {
		return host.Service{}, false, fmt.Errorf("querying service %s: %w", name, err)
	}
	imagePath, err := sys.ServiceImagePath(name)
	if err != nil {
		return host.Service{}, false, fmt.Errorf("reading service %s's configuration: %w", name, err)
	}
	out = host.Service{Name: name, Wrapper: serviceWrapper(imagePath), Running: st.State == ServiceRunning}
	var app string
	if out.Wrapper == host.WrapperNSSM {
		if app, err = nssmApplication(sys, name); err != nil {
			return host.Service{}, false, err
		}
	}
	out.Program = serviceProgram(imagePath, out.Wrapper, app)
	return out, true, nil
}

// nssmApplication is the program NSSM runs for a service, its environment
// variables expanded (NSSM expands them when it starts the program); "" when
// NSSM has none configured.
func nssmApplication(sys System, service string) (string, error) {
	key := nssmParametersKey(service)
	v, expand, err := sys.RegistryString(key, "Application")
	if errors.Is(err, ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf(`reading HKLM\%s\Application: %w`, key, err)
	}
	if !expand {
		return v, nil
	}
	expanded, err := sys.ExpandEnvironment(v)
	if err != nil {
		return "", fmt.Errorf(`expanding HKLM\%s\Application %q: %w`, key, v, err)
	}
	return expanded, nil
}

// stopService stops a service and waits until it has stopped (a stopped one
// is left as it is).
func stopService(ctx context.Context, sys System, name string) error {
	st, err := sys.QueryService(name)
	if err != nil {
		return fmt.Errorf("service %s: %w", name, err)
	}
	if st.State != ServiceStopped && st.State != ServiceStopPending {
		if err := sys.StopService(name); err != nil && !errors.Is(err, ErrServiceNotActive) {
			return fmt.Errorf("service %s: stopping: %w", name, err)
		}
	}
	return waitState(ctx, sys, name, ServiceStopped)
}

// stopWithDependents stops the services that depend on name and run
// (deepest first), then name: the service control manager refuses to stop
// a service that running services depend on (ERROR_DEPENDENT_SERVICES_RUNNING;
// AKS's kubeproxy depends on kubelet). It returns the dependents it stopped,
// in the order they stopped, for startAfter.
func stopWithDependents(ctx context.Context, sys System, name string) ([]string, error) {
	deps, err := sys.ServiceDependents(name)
	if err != nil {
		return nil, fmt.Errorf("service %s: listing the services that depend on it: %w", name, err)
	}
	var stopped []string
	for _, d := range deps {
		st, err := sys.QueryService(d)
		if errors.Is(err, ErrNoService) {
			continue
		}
		if err != nil {
			return stopped, fmt.Errorf("service %s: %w", d, err)
		}
		if st.State == ServiceStopped {
			continue
		}
		more, err := stopWithDependents(ctx, sys, d)
		stopped = append(stopped, more...)
		if err != nil {
			return stopped, err
		}
		stopped = append(stopped, d)
	}
	return stopped, stopService(ctx, sys, name)
}

// startAfter starts again, after the service they depend on, the dependents
// stopWithDependents stopped (in the reverse order).
func startAfter(ctx context.Context, sys System, stopped []string) error {
	for i := len(stopped) - 1; i >= 0; i-- {
		if err := startService(ctx, sys, stopped[i]); err != nil {
			return err
		}
	}
	return nil
}

// startService starts a service and waits until it runs.
func startService(ctx context.Context, sys System, name string) error {
	if err := sys.StartService(name); err != nil && !errors.Is(err, ErrServiceRunning) {
		return fmt.Errorf("service %s: starting: %w", name, err)
	}
	return waitState(ctx, sys, name, ServiceRunning)
}

func waitState(ctx context.Context, sys System, name string, want ServiceState) error {
	t := time.NewTicker(servicePoll)
	defer t.Stop()
	for {
		st, err := sys.QueryService(name)
		if err != nil {
			return fmt.Errorf("service %s: %w", name, err)
		}
		if st.State == want {
			return nil
		}
		// A service that stopped while it was to start failed to start; its
		// exit code is what the service's log explains.
		if want == ServiceRunning && st.State == ServiceStopped {
			return fmt.Errorf("service %s: stopped while starting (exit code %d, service-specific %d)", name, st.Win32ExitCode, st.ServiceSpecificExitCode)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("service %s: still %s, not %s: %w", name, st.State, want, ctx.Err())
		case <-t.C:
		}
	}
}
