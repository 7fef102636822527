package windows

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/stage"
)

// servicing installs update packages: the order and the checks are here, in
// code the tests run on Linux; DISM itself is passed in.
type servicing struct {
	// dir is %ProgramData%\winpool\updates; each revision stages into its own
	// folder below it.
	dir string
	// client downloads packages (the default transport honours HTTPS_PROXY).
	client *http.Client
	// dism runs DISM /Online /Add-Package /PackagePath:<path> /NoRestart and
	// returns its exit code; err only when it could not run at all.
	dism func(ctx context.Context, packagePath string) (int, error)
	// bandwidth paces the fetches, bytes a second (0: none).
	bandwidth int64
}

// install stages every package and checks its sha256 before any is
// installed (a wrong file stops everything before servicing starts), then
// runs DISM once per step of decide.ServicingPlan in the revision's order,
// stopping at the first failure, and folds the exit codes into one result.
func (s servicing) install(ctx context.Context, req host.UpdateRequest, running host.Build) (host.UpdateResult, error) {
	plan, _, err := s.stage(ctx, req, running)
	if err != nil {
		return host.UpdateResult{}, err
	}
	root := filepath.Join(s.dir, req.Revision)
	var exits []decide.StepExit
	for _, step := range plan {
		target := filepath.Join(root, step.Dir)
		var names []string
		for _, p := range step.Packages {
			names = append(names, p.FileName())
		}
		if !step.WholeFolder {
			target = filepath.Join(target, step.Packages[0].FileName())
		}
		code, err := s.dism(ctx, target)
		if err != nil {
			return host.UpdateResult{}, err
		}
		exit := decide.StepExit{What: strings.Join(names, " + "), ExitCode: code}
		for _, n := range names {
			exit.Installed = append(exit.Installed, host.InstalledUpdate{KB: n})
		}
		exits = append(exits, exit)
		if !decide.ServicingContinues(code) {
			break
		}
	}
	return decide.CombineServicing(exits, len(plan)), nil
}

// stage fetches every package of the plan into the revision's folder and
// checks its sha256 (one staged before the drain and still matching is
// not fetched again; a changed one is replaced), after deleting other
// revisions' folders; it returns the plan and what is staged.
func (s servicing) stage(ctx context.Context, req host.UpdateRequest, running host.Build) ([]decide.ServicingStep, []host.StagedItem, error) {
	if err := removeOtherRevisions(s.dir, req.Revision); err != nil {
		return nil, nil, fmt.Errorf("removing earlier revisions' packages from %s: %w", s.dir, err)
	}
	root := filepath.Join(s.dir, req.Revision)
	plan := decide.ServicingPlan(req.Packages, running)
	if len(plan) == 0 {
		return nil, nil, fmt.Errorf("the revision's update source is Packages but it lists none")
	}
	var items []host.StagedItem
	for _, step := range plan {
		for _, p := range step.Packages {
			dest := filepath.Join(root, step.Dir, p.FileName())
			if err := stage.FetchPaced(ctx, s.client, stage.Source{URL: p.URL, Path: p.Path}, dest, p.SHA256, stage.MaxPackage, s.bandwidth); err != nil {
				return nil, nil, fmt.Errorf("staging %s into %s: %w", p.Name(), root, err)
			}
			var size int64
			if fi, err := os.Stat(dest); err == nil {
				size = fi.Size()
			}
			items = append(items, host.StagedItem{Name: p.FileName(), Bytes: size, SHA256: p.SHA256})
		}
	}
	return plan, items, nil
}

// removeOtherRevisions deletes the staged folders of revisions other than
// keep under dir (one folder per revision): a cumulative update is hundreds
// of MB, and a revision that is no longer applied never needs its packages.
func removeOtherRevisions(dir, keep string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != keep {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}
