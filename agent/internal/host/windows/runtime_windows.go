//go:build windows

package windows

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	self, err := os.Executable()
	if err != nil {
		return err
	}
	u := runtimeUpgrader{
		dir: h.runtimeDir(), client: &http.Client{}, releases: stage.ContainerdReleases,
		self: self, installDir: filepath.Dir(bin), now: time.Now,
		startTask: func(ctx context.Context, command string) error {
			return runTask(ctx, decide.RuntimeTaskName, command)
		},
	}
	return u.start(ctx, req)
}

// RunContainerdSwap is the scheduled task's body: it carries out the plan
// the agent wrote, installing only the named containerd binaries (swap.go),
// and records the outcome in the plan's result file.
func RunContainerdSwap(ctx context.Context, planFile string) (host.RuntimeUpgrade, error) {
	return runSwap(ctx, planFile, swapMachine{})
}

// swapMachine is runtimeswap.Machine on the Windows service manager.
type swapMachine struct{}

func (swapMachine) Stop(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, serviceTimeout)
	defer cancel()
	return stopService(ctx, winSystem{}, name)
}

func (swapMachine) Start(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, serviceTimeout)
	defer cancel()
	return startService(ctx, winSystem{}, name)
}

func (swapMachine) Version(ctx context.Context, containerd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, containerd, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w (output %q)", containerd, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func (swapMachine) RuntimeVersion(ctx context.Context) (string, error) {
	return criRuntimeVersion(ctx, containerdPipe)
}

// KubeletHealthy needs no proxy exemption: Go never proxies a loopback
// address, whatever HTTP_PROXY the node sets.
func (swapMachine) KubeletHealthy(ctx context.Context) error {
	return kubeletHealthy(ctx, http.DefaultClient, kubeletHealthz)
}

func (swapMachine) MigrateConfig(ctx context.Context, containerd, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	return migrateConfig(ctx, containerd, path)
}
