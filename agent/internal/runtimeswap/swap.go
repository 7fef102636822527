package runtimeswap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/stage"
)

// Machine is what the task does to services and binaries beyond files.
type Machine interface {
	// Stop stops a service and waits until it has stopped.
	Stop(ctx context.Context, service string) error
	// Start starts a service and waits until it runs.
	Start(ctx context.Context, service string) error
	// Version is what `<containerd> --version` prints.
	Version(ctx context.Context, containerd string) (string, error)
}

// Run carries out the plan and returns the outcome it also wrote to the
// result file. Every path out of it leaves either the new containerd running
// and verified, or the old binaries back in place and started (RolledBack),
// or says that even that failed (Failed).
func Run(ctx context.Context, p Plan, m Machine) host.RuntimeUpgrade {
	r := host.RuntimeUpgrade{Revision: p.Revision, Attempt: p.Attempt, Version: p.Version, Phase: host.RuntimeRunning, Started: p.Started}
	// A result file that cannot be written leaves the agent waiting until
	// its timeout; the swap itself is still worth doing.
	_ = WriteJSON(p.ResultFile, r)

	s := swap{p: p, m: m}
	if err := s.do(ctx); err != nil {
		if rbErr := s.rollback(ctx); rbErr != nil {
			r.Phase = host.RuntimeFailed
			r.Message = fmt.Sprintf("%v; rolling back: %v", err, rbErr)
		} else {
			r.Phase = host.RuntimeRolledBack
			r.Message = err.Error()
		}
	} else {
		r.Phase = host.RuntimeSucceeded
		r.Message = fmt.Sprintf("containerd %s runs; the binaries it replaced are in %s", p.Version, p.BackupDir)
	}
	_ = WriteJSON(p.ResultFile, r)
	return r
}

type swap struct {
	p Plan
	m Machine
	// stopped: the services stopped so far, in stop order.
	stopped []string
	// backedUp: binaries moved from InstallDir to BackupDir.
	backedUp []string
	// installed: binaries copied into InstallDir.
	installed []string
}

func (s *swap) do(ctx context.Context) error {
	for _, svc := range s.p.Services {
		if err := s.m.Stop(ctx, svc); err != nil {
			return fmt.Errorf("stopping %s: %w", svc, err)
		}
		s.stopped = append(s.stopped, svc)
	}
	names, err := binaries(s.p.NewDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.p.BackupDir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", s.p.BackupDir, err)
	}
	for _, n := range names {
		cur := filepath.Join(s.p.InstallDir, n)
		if _, err := os.Stat(cur); err == nil {
			// A rename, not a copy: Windows renames an executable that still
			// runs (a shim of a running pod), but will not overwrite it.
			bak := filepath.Join(s.p.BackupDir, n)
			_ = os.Remove(bak)
			if err := os.Rename(cur, bak); err != nil {
				return fmt.Errorf("moving %s aside: %w", cur, err)
			}
			s.backedUp = append(s.backedUp, n)
		}
		if err := stage.CopyFile(filepath.Join(s.p.NewDir, n), cur, 0o755, true); err != nil {
			return fmt.Errorf("installing %s: %w", cur, err)
		}
		s.installed = append(s.installed, n)
	}
	if err := s.startAll(ctx); err != nil {
		return err
	}
	out, err := s.m.Version(ctx, filepath.Join(s.p.InstallDir, "containerd.exe"))
	if err != nil {
		return fmt.Errorf("containerd --version: %w", err)
	}
	have, err := decide.ParseContainerdVersion(out)
	if err != nil {
		return err
	}
	if cmp, err := decide.CompareVersions(have, s.p.Version); err != nil || cmp != 0 {
		return fmt.Errorf("containerd reports %s after the swap, not %s", have, s.p.Version)
	}
	return nil
}

// startAll starts the stopped services, containerd before kubelet.
func (s *swap) startAll(ctx context.Context) error {
	for i := len(s.stopped) - 1; i >= 0; i-- {
		if err := s.m.Start(ctx, s.stopped[i]); err != nil {
			return fmt.Errorf("starting %s: %w", s.stopped[i], err)
		}
	}
	return nil
}

// rollback puts back what do changed: stops the services again, removes
// the new binaries, moves the old ones back, and starts what it stopped.
func (s *swap) rollback(ctx context.Context) error {
	var errs []error
	if len(s.installed) > 0 || len(s.backedUp) > 0 {
		for _, svc := range s.stopped {
			if err := s.m.Stop(ctx, svc); err != nil {
				errs = append(errs, fmt.Errorf("stopping %s: %w", svc, err))
			}
		}
		for _, n := range s.installed {
			if err := discard(filepath.Join(s.p.InstallDir, n)); err != nil {
				errs = append(errs, err)
			}
		}
		for _, n := range s.backedUp {
			if err := os.Rename(filepath.Join(s.p.BackupDir, n), filepath.Join(s.p.InstallDir, n)); err != nil {
				errs = append(errs, fmt.Errorf("restoring %s: %w", n, err))
			}
		}
	}
	if err := s.startAll(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// discard removes a binary, or renames it out of the way when it still runs
// (Windows will not delete a running executable).
func discard(path string) error {
	if err := os.Remove(path); err == nil || os.IsNotExist(err) {
		return nil
	}
	if err := os.Rename(path, path+".winpool-discarded"); err != nil {
		return fmt.Errorf("removing the new %s: %w", path, err)
	}
	return nil
}

func binaries(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the new binaries in %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(strings.ToLower(e.Name()), ".exe") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if !contains(names, "containerd.exe") {
		return nil, fmt.Errorf("%s holds no containerd.exe", dir)
	}
	return names, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
