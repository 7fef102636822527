package windows

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"time"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/runtimeswap"
	"winpool.dev/agent/internal/stage"
)

// The services the swap stops (in this order) and starts (in reverse).
var swapServices = []string{"kubelet", "containerd"}

// runtimeUpgrader prepares a containerd upgrade and starts the task that
// carries it out; the Windows parts (the task, the agent's own path) are
// passed in, so the preparation is tested on Linux.
type runtimeUpgrader struct {
	// dir is %ProgramData%\winpool\runtime.
	dir    string
	client *http.Client
	// releases is where official containerd releases are downloaded from.
	releases string
	// self is the running agent's executable, copied for the task.
	self string
	// installDir holds the running containerd.exe and its config.toml.
	installDir string
	// startTask registers the one-shot SYSTEM task from its definition
	// (taskDefinition) and runs it.
	startTask func(definition string) error
	now       func() time.Time
	// proof times the new containerd's proof (zero: the defaults).
	proof SwapProof
	// rehash is how the files written for the task are hashed again before
	// it starts; nil is stage.Digest (a test passes another).
	rehash func(path string) (string, error)
}

func (u runtimeUpgrader) resultFile() string { return filepath.Join(u.dir, "result.json") }

// start stages the release archive under <dir>\<revision>-<attempt>\ and
// checks its sha256, extracts the binaries, copies the agent there for the
// task (the container's own files go away when containerd stops it), writes
// the plan and a Scheduled result, and starts the task. It refuses while an
// earlier task still runs: two swaps at once would trade binaries under
// each other. The sha256 of every file the task runs or installs (the new
// binaries, the agent's copy, the plan) is recorded as it is written and
// checked again right before the task is started.
func (u runtimeUpgrader) start(ctx context.Context, req host.RuntimeRequest) error {
	if cur, err := runtimeswap.ReadResult(u.resultFile()); err == nil && cur != nil &&
		(cur.Phase == host.RuntimeScheduled || cur.Phase == host.RuntimeRunning) &&
		u.now().Sub(cur.Started) < decide.DefaultRuntimeTaskTimeout {
		return fmt.Errorf("a containerd upgrade task (%s attempt %d, to %s) is still %s, see %s",
			cur.Revision, cur.Attempt, cur.Version, cur.Phase, u.resultFile())
	}
	work := filepath.Join(u.dir, fmt.Sprintf("%s-%d", req.Revision, req.Attempt))
	archiveURL, digest, err := u.archiveOf(ctx, req)
	if err != nil {
		return err
	}
	archive := filepath.Join(work, path.Base(archiveURL))
	if err := stage.Fetch(ctx, u.client, stage.Source{URL: archiveURL, NoRedirect: req.Archive != nil}, archive, digest, stage.MaxRuntimeArchive); err != nil {
		return fmt.Errorf("staging containerd %s: %w", req.Version, err)
	}
	newDir := filepath.Join(work, "new")
	if err := os.RemoveAll(newDir); err != nil {
		return err
	}
	names, err := stage.ExtractContainerd(archive, newDir)
	if err != nil {
		return err
	}
	written := fileDigests{}
	for _, n := range names {
		if err := written.add(filepath.Join(newDir, n)); err != nil {
			return err
		}
	}
	exe := filepath.Join(work, "winpool-agent.exe")
	sum, err := copyHashed(u.self, exe)
	if err != nil {
		return fmt.Errorf("copying the agent for the task: %w", err)
	}
	written[exe] = sum
	plan := runtimeswap.Plan{
		Revision: req.Revision, Attempt: req.Attempt, Version: req.Version,
		InstallDir: u.installDir, NewDir: newDir, BackupDir: filepath.Join(work, "old"),
		ResultFile: u.resultFile(), Services: swapServices, Started: u.now().UTC(), From: req.From,
		StartWithin: u.proof.StartWithin, SettleFor: u.proof.SettleFor, CheckEvery: u.proof.CheckEvery,
	}
	definition, err := written.plan(filepath.Join(work, "plan.json"), plan, exe, ContainerdSwapCommand, "the containerd upgrade task", 0, u.rehash)
	if err != nil {
		return err
	}
	scheduled := host.RuntimeUpgrade{Revision: req.Revision, Attempt: req.Attempt, Version: req.Version, Phase: host.RuntimeScheduled, Started: plan.Started}
	if err := runtimeswap.WriteJSON(u.resultFile(), scheduled); err != nil {
		return err
	}
	return u.startTask(definition)
}

// archiveOf is the archive to install and its sha256: the revision's, or the
// official release checked against the .sha256sum published next to it.
func (u runtimeUpgrader) archiveOf(ctx context.Context, req host.RuntimeRequest) (string, string, error) {
	if req.Archive != nil {
		return req.Archive.URL, req.Archive.SHA256, nil
	}
	archive, sumURL := stage.OfficialContainerdFrom(u.releases, req.Version)
	body, err := stage.Get(ctx, u.client, sumURL, stage.MaxSumFile)
	if err != nil {
		return "", "", fmt.Errorf("reading %s (nodes that cannot reach it need the pool's runtimeArchive): %w", sumURL, err)
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, 64<<10))
	if err != nil {
		return "", "", err
	}
	d, err := stage.ParseSHA256Sum(string(b), path.Base(archive))
	return archive, d, err
}

// readsContainerdVersion: containerd's version is read unless its upgrade
// task is under way (Scheduled or Running, and younger than the time a task
// may take), when the binary may be half copied or the service stopped. A
// record older than that is a task that died (a boot, a task that never
// ran): hiding the version for good would make the agent swap a containerd
// that is already right.
func readsContainerdVersion(task *host.RuntimeUpgrade, now time.Time) bool {
	underWay := task != nil && (task.Phase == host.RuntimeScheduled || task.Phase == host.RuntimeRunning)
	return !underWay || now.Sub(task.Started) > decide.DefaultRuntimeTaskTimeout
}
