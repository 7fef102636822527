package windows

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/runtimeswap"
	"winpool.dev/agent/internal/stage"
)

// serviceTimeout bounds each stop or start of a service by the task.
const serviceTimeout = 2 * time.Minute

func (h *Host) runtimeDir() string { return filepath.Join(h.o.StateDir, "runtime") }

func (h *Host) resultFile() string { return filepath.Join(h.runtimeDir(), "result.json") }

func (h *Host) runtimeResult() (*host.RuntimeUpgrade, error) {
	return runtimeswap.ReadResult(h.resultFile())
}

// UpgradeContainerd hands the upgrade to a one-shot scheduled task outside
// containerd (runtime.go); Observe reads the task's result file.
func (h *Host) UpgradeContainerd(ctx context.Context, req host.RuntimeRequest) error {
	bin := h.containerdBinary()
	if bin == "" {
		return fmt.Errorf("containerd is not installed: the agent upgrades the containerd the node runs as service \"containerd\", it does not install one")
	}
	self, err := h.m.Box.Executable()
	if err != nil {
		return err
	}
	u := runtimeUpgrader{
		dir: h.runtimeDir(), client: h.m.Net.HTTP(), releases: h.releases(),
		self: self, installDir: filepath.Dir(bin), now: h.m.Box.Now, proof: h.o.SwapProof,
		startTask: func(definition string) error { return startTask(h.m.Tasks, decide.RuntimeTaskName, definition) },
	}
	return u.start(ctx, req)
}

// releases is where official containerd releases come from.
func (h *Host) releases() string {
	if h.o.ContainerdReleases != "" {
		return h.o.ContainerdReleases
	}
	return stage.ContainerdReleases
}

// RunContainerdSwapOn is the scheduled task's body on m: it carries out the
// plan the agent wrote, installing only the named containerd binaries
// (swap.go), and records the outcome in the plan's result file.
func RunContainerdSwapOn(ctx context.Context, m Machine, planFile string) (host.RuntimeUpgrade, error) {
	return runSwap(ctx, planFile, &swapMachine{m: m, dependents: map[string][]string{}})
}

// swapMachine is runtimeswap.Machine on the machine's service manager.
type swapMachine struct {
	m Machine
	// dependents are the services a Stop stopped because they depend on
	// the one it stopped; Start starts them again after it.
	dependents map[string][]string
}

func (s *swapMachine) Stop(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, serviceTimeout)
	defer cancel()
	stopped, err := stopWithDependents(ctx, s.m.System, name)
	s.dependents[name] = append(s.dependents[name], stopped...)
	return err
}

func (s *swapMachine) Start(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, serviceTimeout)
	defer cancel()
	if err := startService(ctx, s.m.System, name); err != nil {
		return err
	}
	if err := startAfter(ctx, s.m.System, s.dependents[name]); err != nil {
		return err
	}
	delete(s.dependents, name)
	return nil
}

func (s *swapMachine) Version(ctx context.Context, containerd string) (string, error) {
	return runVersion(ctx, s.m.Programs, containerd)
}

func (s *swapMachine) RuntimeVersion(ctx context.Context) (string, error) {
	return criVersion(ctx, s.m.Net, containerdPipe)
}

// KubeletHealthy needs no proxy exemption: Go never proxies a loopback
// address, whatever HTTP_PROXY the node sets.
func (s *swapMachine) KubeletHealthy(ctx context.Context) error {
	return kubeletHealthy(ctx, s.m.Net.HTTP(), kubeletHealthz)
}

func (s *swapMachine) MigrateConfig(ctx context.Context, containerd, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	return migrateConfig(ctx, s.m, containerd, path)
}
