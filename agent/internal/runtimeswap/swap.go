package runtimeswap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/stage"
	"winpool.dev/agent/internal/versions"
)

// Machine is what the task does to services and binaries beyond files.
type Machine interface {
	// Stop stops a service and waits until it has stopped.
	Stop(ctx context.Context, service string) error
	// Start starts a service and waits until it runs.
	Start(ctx context.Context, service string) error
	// RuntimeVersion is the version the running containerd gives over CRI
	// on its pipe (RuntimeService.Version): the runtime answers, not only its
	// service (NSSM reports Running while its child crash-loops).
	RuntimeVersion(ctx context.Context) (string, error)
	// KubeletHealthy: the kubelet's healthz endpoint answers ok.
	KubeletHealthy(ctx context.Context) error
	// MigrateConfig is what `<containerd> config migrate` makes of the
	// config file at path (containerd 2.x reads the 1.x format only
	// migrated: default_runtime and others are gone).
	MigrateConfig(ctx context.Context, containerd, path string) ([]byte, error)
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
	// migrated: config.toml was rewritten (its original is in BackupDir).
	migrated bool
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
	if err := s.migrateConfig(ctx); err != nil {
		return err
	}
	if err := s.startAll(ctx); err != nil {
		return err
	}
	return s.prove(ctx)
}

// migrateConfig rewrites config.toml for a major version jump when the
// new containerd could not read it: a version 1 file (no `version`, or
// `version = 1`), which containerd 2.x no longer takes. A version 2 file is
// left as it is: containerd 2.x migrates it in memory at every start, and a
// file an admin or the node image wrote stays theirs (AKS and EKS images
// write version 2). The original is kept in BackupDir for the rollback.
func (s *swap) migrateConfig(ctx context.Context) error {
	if !majorJump(s.p.From, s.p.Version) {
		return nil
	}
	cfg := s.p.ConfigFile()
	old, err := os.ReadFile(cfg)
	if errors.Is(err, os.ErrNotExist) {
		return nil // containerd's built-in defaults: nothing to migrate
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", cfg, err)
	}
	if configVersion(old) >= 2 {
		return nil
	}
	out, err := s.m.MigrateConfig(ctx, filepath.Join(s.p.InstallDir, "containerd.exe"), cfg)
	if err != nil {
		return fmt.Errorf("migrating %s from containerd %s to %s: %w", cfg, s.p.From, s.p.Version, err)
	}
	if err := os.WriteFile(filepath.Join(s.p.BackupDir, "config.toml"), old, 0o600); err != nil {
		return fmt.Errorf("keeping %s: %w", cfg, err)
	}
	s.migrated = true
	if err := os.WriteFile(cfg, out, 0o600); err != nil {
		return fmt.Errorf("writing the migrated %s: %w", cfg, err)
	}
	return nil
}

// configVersion is a containerd config file's top-level `version` (before
// its first table); 1 when it has none, as containerd reads it.
func configVersion(toml []byte) int {
	for _, line := range strings.Split(string(toml), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			break
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(key) != "version" {
			continue
		}
		value, _, _ = strings.Cut(value, "#")
		if v, err := strconv.Atoi(strings.TrimSpace(value)); err == nil {
			return v
		}
	}
	return 1
}

// majorJump: from and to are versions with different major numbers.
func majorJump(from, to string) bool {
	major := func(v string) string {
		v = strings.TrimPrefix(strings.TrimSpace(v), "v")
		m, _, _ := strings.Cut(v, ".")
		return m
	}
	return from != "" && major(from) != major(to)
}

// prove: the new runtime answers over CRI with the version asked, and the
// kubelet is healthy, within StartWithin; and both keep answering for
// SettleFor. A service that reports Running proves nothing: a wrapper such as
// NSSM does while its child crash-loops.
func (s *swap) prove(ctx context.Context) error {
	every := orDefault(s.p.CheckEvery, DefaultCheckEvery)
	deadline := time.Now().Add(orDefault(s.p.StartWithin, DefaultStartWithin))
	for {
		err := s.check(ctx)
		if err == nil {
			break
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("containerd %s did not come up within %s: %w", s.p.Version, orDefault(s.p.StartWithin, DefaultStartWithin), err)
		}
		if err := sleep(ctx, every); err != nil {
			return err
		}
	}
	settle := orDefault(s.p.SettleFor, DefaultSettleFor)
	for until := time.Now().Add(settle); time.Now().Before(until); {
		if err := sleep(ctx, every); err != nil {
			return err
		}
		if err := s.check(ctx); err != nil {
			return fmt.Errorf("containerd %s answered, then stopped answering within %s (its service may say Running while it crash-loops): %w", s.p.Version, settle, err)
		}
	}
	return nil
}

// check asks the runtime its version over CRI and the kubelet its health.
func (s *swap) check(ctx context.Context) error {
	out, err := s.m.RuntimeVersion(ctx)
	if err != nil {
		return fmt.Errorf("asking containerd over CRI: %w", err)
	}
	// CRI's RuntimeVersion is the bare version ("v1.7.22"), not --version's line.
	have := strings.TrimPrefix(strings.TrimSpace(out), "v")
	if cmp, err := versions.Compare(have, s.p.Version); err != nil || cmp != 0 {
		return fmt.Errorf("containerd reports %q over CRI after the swap, not %s", have, s.p.Version)
	}
	if err := s.m.KubeletHealthy(ctx); err != nil {
		return fmt.Errorf("kubelet healthz: %w", err)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
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
		if s.migrated {
			old, err := os.ReadFile(filepath.Join(s.p.BackupDir, "config.toml"))
			if err == nil {
				err = os.WriteFile(s.p.ConfigFile(), old, 0o600)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("restoring %s: %w", s.p.ConfigFile(), err))
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
