package windows

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/runtimeswap"
	"winpool.dev/agent/internal/stage"
)

// runSwap is the containerd upgrade task's body (RunContainerdSwap on
// Windows, with the service manager as m). runtimeswap installs every .exe
// in the plan's new\ folder, so the task first copies the named containerd
// binaries, and nothing else found in new\, into a folder of their own,
// install\, and hands that to runtimeswap. When new\ holds no usable set,
// nothing is stopped or changed and the result says why.
func runSwap(ctx context.Context, planFile string, m runtimeswap.Machine) (host.RuntimeUpgrade, error) {
	p, err := runtimeswap.ReadPlan(planFile)
	if err != nil {
		return host.RuntimeUpgrade{}, err
	}
	dir, err := onlyContainerdBinaries(p.NewDir)
	if err != nil {
		r := host.RuntimeUpgrade{Revision: p.Revision, Attempt: p.Attempt, Version: p.Version, Phase: host.RuntimeRolledBack,
			Started: p.Started, Message: fmt.Sprintf("nothing was stopped or replaced: %v", err)}
		if werr := runtimeswap.WriteJSON(p.ResultFile, r); werr != nil {
			return r, fmt.Errorf("%v; writing %s: %w", err, p.ResultFile, werr)
		}
		return r, nil
	}
	p.NewDir = dir
	return runtimeswap.Run(ctx, p, m), nil
}

// stagedFile is a directory entry of the staged new\ folder.
type stagedFile struct {
	Name string
	Type fs.FileMode
}

// binary is a staged file the task installs, and the name it gets.
type binary struct{ Staged, Name string }

// containerdInstallSet picks the files the task installs out of what new\
// holds: the containerd binaries a Windows release archive carries in bin\
// (stage.ContainerdBinaries), matched without regard to case as Windows
// names files, installed under their own names, in name order. Anything
// else is ignored. A named binary that is not a plain file, or the same
// name twice, is an error, and so is a set without containerd.exe.
func containerdInstallSet(staged []stagedFile) ([]binary, error) {
	named := map[string]string{}
	for _, b := range stage.ContainerdBinaries {
		named[strings.ToLower(b)] = b
	}
	var set []binary
	seen := map[string]string{}
	for _, f := range staged {
		name, ok := named[strings.ToLower(f.Name)]
		if !ok {
			continue
		}
		if !f.Type.IsRegular() {
			return nil, fmt.Errorf("%s is not a plain file", f.Name)
		}
		if prev, dup := seen[name]; dup {
			return nil, fmt.Errorf("%s and %s are the same name to Windows", prev, f.Name)
		}
		seen[name] = f.Name
		set = append(set, binary{Staged: f.Name, Name: name})
	}
	if _, ok := seen["containerd.exe"]; !ok {
		return nil, fmt.Errorf("no containerd.exe")
	}
	sort.Slice(set, func(i, j int) bool { return set[i].Name < set[j].Name })
	return set, nil
}

// onlyContainerdBinaries copies the containerd binaries staged in newDir
// into a fresh install\ folder next to it and returns that folder.
func onlyContainerdBinaries(newDir string) (string, error) {
	entries, err := os.ReadDir(newDir)
	if err != nil {
		return "", fmt.Errorf("reading the new binaries: %w", err)
	}
	var staged []stagedFile
	for _, e := range entries {
		staged = append(staged, stagedFile{Name: e.Name(), Type: e.Type()})
	}
	set, err := containerdInstallSet(staged)
	if err != nil {
		return "", fmt.Errorf("%s: %w", newDir, err)
	}
	dir := filepath.Join(filepath.Dir(newDir), "install")
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	for _, b := range set {
		if err := stage.CopyFile(filepath.Join(newDir, b.Staged), filepath.Join(dir, b.Name), 0o700, true); err != nil {
			return "", fmt.Errorf("copying %s to install it: %w", b.Staged, err)
		}
	}
	return dir, nil
}
