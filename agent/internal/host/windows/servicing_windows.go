//go:build windows

package windows

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/stage"
)

// InstallUpdate installs the revision's update from where the revision says.
func (h *Host) InstallUpdate(ctx context.Context, req host.UpdateRequest) (host.UpdateResult, error) {
	switch req.Source {
	case config.SourcePackages:
		return h.installPackages(ctx, req)
	case config.SourceWindowsUpdate, "":
		return installFromWindowsUpdate(ctx, req)
	}
	return host.UpdateResult{}, fmt.Errorf("unknown update source %q", req.Source)
}

// installPackages stages every package under
// %ProgramData%\winpool\updates\<revision>\ and checks its sha256 before any
// is installed, then runs DISM once per step of decide.ServicingPlan, in the
// revision's order, stopping at the first failure.
func (h *Host) installPackages(ctx context.Context, req host.UpdateRequest) (host.UpdateResult, error) {
	running, err := readBuild()
	if err != nil {
		return host.UpdateResult{}, err
	}
	updates := filepath.Join(h.o.StateDir, "updates")
	if err := removeOtherRevisions(updates, req.Revision); err != nil {
		return host.UpdateResult{}, fmt.Errorf("removing earlier revisions' packages from %s: %w", updates, err)
	}
	root := filepath.Join(updates, req.Revision)
	plan := decide.ServicingPlan(req.Packages, running)
	client := &http.Client{} // the default transport honours HTTPS_PROXY
	for _, step := range plan {
		for _, p := range step.Packages {
			dest := filepath.Join(root, step.Dir, p.FileName())
			if err := stage.Fetch(ctx, client, stage.Source{URL: p.URL, Path: p.Path}, dest, p.SHA256); err != nil {
				return host.UpdateResult{}, fmt.Errorf("staging %s into %s: %w", p.Name(), root, err)
			}
		}
	}
	var exits []decide.StepExit
	for _, step := range plan {
		dir := filepath.Join(root, step.Dir)
		target := dir
		var names []string
		for _, p := range step.Packages {
			names = append(names, p.FileName())
		}
		if !step.WholeFolder {
			target = filepath.Join(dir, step.Packages[0].FileName())
		}
		code, err := dism(ctx, target)
		if err != nil {
			return host.UpdateResult{}, err
		}
		exits = append(exits, decide.StepExit{What: strings.Join(names, " + "), ExitCode: code})
		if !decide.ServicingContinues(code) {
			break
		}
	}
	return decide.CombineServicing(exits, len(plan)), nil
}

// dism runs DISM /Online /Add-Package /PackagePath:<path> /NoRestart: the
// reboot is the agent's to make, after it reported Rebooting. It returns
// DISM's exit code; err only when DISM could not be run at all.
func dism(ctx context.Context, packagePath string) (int, error) {
	exe := filepath.Join(systemRoot(), "System32", "Dism.exe")
	cmd := exec.CommandContext(ctx, exe, "/Online", "/Add-Package", "/PackagePath:"+packagePath, "/NoRestart", "/Quiet", "/English")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exit) && ctx.Err() == nil:
		return exit.ExitCode(), nil
	}
	return 0, fmt.Errorf("running %s: %w (output %q)", exe, err, strings.TrimSpace(string(out)))
}
