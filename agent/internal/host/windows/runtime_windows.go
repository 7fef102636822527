//go:build windows

package windows

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/runtimeswap"
	"winpool.dev/agent/internal/stage"
)

// The services the swap stops (in this order) and starts (in reverse).
var swapServices = []string{"kubelet", "containerd"}

// serviceTimeout bounds each stop or start of a service by the task.
const serviceTimeout = 2 * time.Minute

func (h *Host) runtimeDir() string { return filepath.Join(h.o.StateDir, "runtime") }

func (h *Host) resultFile() string { return filepath.Join(h.runtimeDir(), "result.json") }

func (h *Host) runtimeResult() (*host.RuntimeUpgrade, error) {
	return runtimeswap.ReadResult(h.resultFile())
}

// UpgradeContainerd stages and verifies the release archive, extracts its
// binaries, and hands the swap to a one-shot SYSTEM scheduled task that runs
// outside containerd (a copy of this binary, `containerd-swap <plan>`). It
// returns once the task is started; Observe reads the task's result file.
func (h *Host) UpgradeContainerd(ctx context.Context, req host.RuntimeRequest) error {
	if cur, err := h.runtimeResult(); err == nil && cur != nil &&
		(cur.Phase == host.RuntimeScheduled || cur.Phase == host.RuntimeRunning) &&
		time.Since(cur.Started) < decide.DefaultRuntimeTaskTimeout {
		return fmt.Errorf("a containerd upgrade task (%s attempt %d, to %s) is still %s, see %s", cur.Revision, cur.Attempt, cur.Version, cur.Phase, h.resultFile())
	}
	bin := h.containerdBinary()
	if bin == "" {
		return fmt.Errorf("containerd is not installed: the agent upgrades the containerd the node runs as service \"containerd\", it does not install one")
	}
	work := filepath.Join(h.runtimeDir(), fmt.Sprintf("%s-%d", req.Revision, req.Attempt))
	archiveURL, digest, err := archiveOf(ctx, req)
	if err != nil {
		return err
	}
	archive := filepath.Join(work, path.Base(archiveURL))
	if err := stage.Fetch(ctx, &http.Client{}, stage.Source{URL: archiveURL}, archive, digest); err != nil {
		return fmt.Errorf("staging containerd %s: %w", req.Version, err)
	}
	newDir := filepath.Join(work, "new")
	os.RemoveAll(newDir)
	if _, err := stage.ExtractContainerd(archive, newDir); err != nil {
		return err
	}
	// The task runs a copy of the agent outside the container: the
	// container's own files go away when containerd stops it.
	self, err := os.Executable()
	if err != nil {
		return err
	}
	exe := filepath.Join(work, "winpool-agent.exe")
	if err := copyExecutable(self, exe); err != nil {
		return fmt.Errorf("copying the agent for the task: %w", err)
	}
	plan := runtimeswap.Plan{
		Revision: req.Revision, Attempt: req.Attempt, Version: req.Version,
		InstallDir: filepath.Dir(bin), NewDir: newDir, BackupDir: filepath.Join(work, "old"),
		ResultFile: h.resultFile(), Services: swapServices, Started: time.Now().UTC(),
	}
	planFile := filepath.Join(work, "plan.json")
	if err := runtimeswap.WriteJSON(planFile, plan); err != nil {
		return err
	}
	scheduled := host.RuntimeUpgrade{Revision: req.Revision, Attempt: req.Attempt, Version: req.Version, Phase: host.RuntimeScheduled, Started: plan.Started}
	if err := runtimeswap.WriteJSON(h.resultFile(), scheduled); err != nil {
		return err
	}
	command, err := taskCommand(exe, planFile)
	if err != nil {
		return err
	}
	return runTask(ctx, command)
}

// archiveOf is the archive to install and its sha256: the revision's, or the
// official release checked against the .sha256sum published next to it.
func archiveOf(ctx context.Context, req host.RuntimeRequest) (string, string, error) {
	if req.Archive != nil {
		return req.Archive.URL, req.Archive.SHA256, nil
	}
	archive, sumURL := stage.OfficialContainerd(req.Version)
	body, err := stage.Get(ctx, &http.Client{}, sumURL)
	if err != nil {
		return "", "", fmt.Errorf("reading %s (nodes that cannot reach github.com need the pool's runtimeArchive): %w", sumURL, err)
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, 64<<10))
	if err != nil {
		return "", "", err
	}
	d, err := stage.ParseSHA256Sum(string(b), path.Base(archive))
	return archive, d, err
}

// runTask (re)creates the one-shot task as SYSTEM and starts it now. /SC
// ONCE needs a start time; the task is only ever run by /Run.
func runTask(ctx context.Context, command string) error {
	schtasks := filepath.Join(systemRoot(), "System32", "schtasks.exe")
	create := []string{"/Create", "/F", "/TN", decide.RuntimeTaskName, "/TR", command, "/SC", "ONCE", "/ST", "00:00", "/RU", "SYSTEM", "/RL", "HIGHEST"}
	for _, args := range [][]string{create, {"/Run", "/TN", decide.RuntimeTaskName}} {
		out, err := exec.CommandContext(ctx, schtasks, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("schtasks %s: %w (output %q)", args[0], err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// RunContainerdSwap is the scheduled task's body: it carries out the plan
// the agent wrote and records the outcome in the plan's result file.
func RunContainerdSwap(ctx context.Context, planFile string) (host.RuntimeUpgrade, error) {
	p, err := runtimeswap.ReadPlan(planFile)
	if err != nil {
		return host.RuntimeUpgrade{}, err
	}
	return runtimeswap.Run(ctx, p, swapMachine{}), nil
}

// swapMachine is runtimeswap.Machine on the Windows service manager.
type swapMachine struct{}

func (swapMachine) Stop(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, serviceTimeout)
	defer cancel()
	return stopService(ctx, name)
}

func (swapMachine) Start(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, serviceTimeout)
	defer cancel()
	return startService(ctx, name)
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
