// Package runtimeswap replaces containerd's binaries on a node, from a
// one-shot task that runs outside containerd: the agent itself runs in a
// HostProcess container under containerd, so stopping containerd from the
// agent would stop the agent halfway through. The agent writes a Plan and
// starts the task; the task (this package, run as `winpool-agent.exe
// containerd-swap <plan>`) stops kubelet and containerd, moves the old
// binaries aside, puts the new ones in, starts both again, checks the version
// and rolls back on any failure, and writes what happened to the result file
// the agent reads back (possibly after it was restarted itself).
package runtimeswap

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"winpool.dev/agent/internal/host"
)

// Plan is what the task does, written by the agent next to the task's copy
// of the agent binary.
type Plan struct {
	Revision string `json:"revision"`
	Attempt  int    `json:"attempt"`
	Version  string `json:"version"`
	// InstallDir holds the running containerd's binaries and its config.toml;
	// only the binaries in NewDir are replaced there.
	InstallDir string `json:"installDir"`
	// NewDir holds the new binaries, extracted from the verified archive.
	NewDir string `json:"newDir"`
	// BackupDir receives the binaries they replace, and keeps them.
	BackupDir string `json:"backupDir"`
	// ResultFile is where the outcome goes (a host.RuntimeUpgrade).
	ResultFile string `json:"resultFile"`
	// Services are stopped in this order and started in the reverse one:
	// kubelet first, so it does not see containerd vanish and restart pods.
	Services []string `json:"services"`
	// Started is when the agent scheduled the task.
	Started time.Time `json:"started"`
	// From is the version the node ran before (a major jump migrates
	// config.toml); "" unknown, nothing migrated.
	From string `json:"from,omitempty"`
	// StartWithin is how long the new runtime has to answer over CRI, with
	// the kubelet healthy; SettleFor how long it must keep answering after
	// that, checked every CheckEvery. Zero: the defaults below.
	StartWithin time.Duration `json:"startWithin,omitempty"`
	SettleFor   time.Duration `json:"settleFor,omitempty"`
	CheckEvery  time.Duration `json:"checkEvery,omitempty"`
}

// Defaults of a Plan's proof durations. A crash-looping containerd under a
// service wrapper restarts within seconds (NSSM's default throttle is 1.5 s
// after a quick exit), so 30 s of answers is many of its cycles.
const (
	DefaultStartWithin = 2 * time.Minute
	DefaultSettleFor   = 30 * time.Second
	DefaultCheckEvery  = 2 * time.Second
)

// ConfigFile is containerd's config.toml in the install folder (where the
// Windows install instructions and AKS put it).
func (p Plan) ConfigFile() string { return filepath.Join(p.InstallDir, "config.toml") }

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// ReadPlan reads a plan file.
func ReadPlan(path string) (Plan, error) {
	var p Plan
	b, err := os.ReadFile(path)
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("%s is not a plan: %w", path, err)
	}
	if p.InstallDir == "" || p.NewDir == "" || p.BackupDir == "" || p.ResultFile == "" || p.Version == "" {
		return p, fmt.Errorf("%s lacks installDir, newDir, backupDir, resultFile or version", path)
	}
	return p, nil
}

// WriteJSON writes v to path through a temporary file, synced, and a rename,
// so a reader, or the next boot after a crash or a power cut, sees the old
// content or the new one, never half of one.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ReadResult reads the result file; nil when there is none.
func ReadResult(path string) (*host.RuntimeUpgrade, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r host.RuntimeUpgrade
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s is corrupt (%v); delete it if no containerd upgrade runs", path, err)
	}
	r.ResultFile = path
	return &r, nil
}
