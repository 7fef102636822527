package fake

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/runtimeswap"
)

// The simulated swap's proof is the real one (runtimeswap.Run), shortened:
// a fleet of thousands cannot settle for 30 s per node.
const (
	swapStartWithin = 2 * time.Second
	swapSettleFor   = 300 * time.Millisecond
	swapCheckEvery  = 50 * time.Millisecond
)

// swapTask runs the machine's containerd upgrade as a real node's task does:
// runtimeswap.Run on files (containerd.exe holds its `--version` line) and
// services of this simulated machine, so the fleet's swaps go through the
// same proof and rollback code as a Windows node's. Returns its result and
// what containerd runs afterwards, which the machine shows together (a real
// task writes its result once containerd runs what it says).
func swapTask(ctx context.Context, dir string, from string, req host.RuntimeRequest, crashLoops bool) (host.RuntimeUpgrade, string) {
	p := runtimeswap.Plan{Revision: req.Revision, Attempt: req.Attempt, Version: req.Version, From: from,
		InstallDir: filepath.Join(dir, "containerd"), NewDir: filepath.Join(dir, "new"), BackupDir: filepath.Join(dir, "old"),
		ResultFile: filepath.Join(dir, "result.json"), Services: []string{"kubelet", "containerd"}, Started: time.Now(),
		StartWithin: swapStartWithin, SettleFor: swapSettleFor, CheckEvery: swapCheckEvery}
	line := func(v string) string { return "containerd github.com/containerd/containerd v" + v + " 0123456" }
	for d, v := range map[string]string{p.InstallDir: from, p.NewDir: req.Version} {
		if err := os.MkdirAll(d, 0o700); err == nil {
			_ = os.WriteFile(filepath.Join(d, "containerd.exe"), []byte(line(v)), 0o600)
		}
	}
	_ = os.WriteFile(p.ConfigFile(), []byte("version = 2\n"), 0o600)
	m := &swapMachine{dir: p.InstallDir, running: map[string]bool{"kubelet": true, "containerd": true}, newVersion: req.Version, crashLoops: crashLoops}
	r := runtimeswap.Run(ctx, p, m)
	runs, err := os.ReadFile(filepath.Join(p.InstallDir, "containerd.exe"))
	_ = os.RemoveAll(dir)
	if err != nil {
		return r, from
	}
	return r, strings.TrimPrefix(strings.Fields(string(runs))[2], "v")
}

// swapMachine is the machine's service manager, CRI endpoint and kubelet.
type swapMachine struct {
	mu         sync.Mutex
	dir        string
	running    map[string]bool
	newVersion string
	// crashLoops: the new containerd answers once, then crash-loops while
	// its service manager (NSSM) still says Running.
	crashLoops bool
	answered   int
}

func (m *swapMachine) Stop(_ context.Context, s string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running[s] = false
	return nil
}

func (m *swapMachine) Start(_ context.Context, s string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running[s] = true
	return nil
}

func (m *swapMachine) RuntimeVersion(context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.running["containerd"] {
		return "", errors.New(`open \\.\pipe\containerd-containerd: the system cannot find the file specified`)
	}
	b, err := os.ReadFile(filepath.Join(m.dir, "containerd.exe"))
	if err != nil {
		return "", err
	}
	v := strings.Fields(string(b))[2]
	if m.crashLoops && strings.TrimPrefix(v, "v") == m.newVersion {
		if m.answered++; m.answered > 1 {
			return "", fmt.Errorf("rpc error: code = Unavailable desc = containerd %s exited (exit status 1), restarted by nssm", v)
		}
	}
	return v, nil
}

func (m *swapMachine) KubeletHealthy(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.running["kubelet"] {
		return errors.New(`Get "http://127.0.0.1:10248/healthz": connection refused`)
	}
	return nil
}

func (m *swapMachine) MigrateConfig(_ context.Context, _ string, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	return append([]byte("version = 3\n"), b...), err
}
