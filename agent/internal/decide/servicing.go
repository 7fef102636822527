package decide

import (
	"fmt"
	"strings"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/host"
)

// CheckpointBuild is the first release whose cumulative updates may come as
// a checkpoint update plus incremental ones (Windows Server 2025 / 24H2,
// build 26100): there Microsoft documents installing the .msu files of one
// update together from one folder, and lets DISM order them.
const CheckpointBuild = 26100

// ServicingStep is one DISM /Add-Package call.
type ServicingStep struct {
	// Dir is the staging subfolder of the revision's update folder that holds
	// this step's files ("01", "02", …): a folder step's files must sit alone
	// in theirs, since DISM installs everything it finds there.
	Dir string
	// Packages this call installs, in the revision's order.
	Packages []config.Package
	// WholeFolder: DISM is given the folder (/PackagePath:<dir>), not a file.
	WholeFolder bool
}

// ServicingPlan turns the revision's package list into DISM calls. The list
// order is the install order (servicing stack first, as the operator lists
// it): each package is a call of its own, except that on a checkpoint release
// a run of consecutive .msu files (a checkpoint update and the updates that
// follow it) is one call on their folder.
func ServicingPlan(pkgs []config.Package, running host.Build) []ServicingStep {
	var plan []ServicingStep
	add := func(ps []config.Package, folder bool) {
		plan = append(plan, ServicingStep{Dir: fmt.Sprintf("%02d", len(plan)+1), Packages: ps, WholeFolder: folder})
	}
	for i := 0; i < len(pkgs); {
		j := i + 1
		if running.Build >= CheckpointBuild && isMSU(pkgs[i]) {
			for j < len(pkgs) && isMSU(pkgs[j]) {
				j++
			}
		}
		add(pkgs[i:j:j], j-i > 1)
		i = j
	}
	return plan
}

func isMSU(p config.Package) bool { return strings.HasSuffix(strings.ToLower(p.FileName()), ".msu") }

// StepExit is what one servicing call returned.
type StepExit struct {
	// What names what was installed (file names), for messages.
	What     string
	ExitCode int
	// Installed is what the call installed, when it exits Installed or
	// RebootRequired (the rest installed nothing).
	Installed []host.InstalledUpdate
}

// ServicingContinues: after a call that exited so, the next one may run.
// Servicing stops at the first failure (a package that needs a newer
// servicing stack is one): the cumulative update must not go on without the
// servicing stack update before it.
func ServicingContinues(exitCode int) bool { return !stopsServicing(ClassifyUpdate(exitCode)) }

// A transient failure stops it too: the servicing stack update it may have
// been is not in place, and the whole install is tried again later. So does
// a call that needs a reboot first: nothing installs until it, and its code
// must be the result, or the reboot is never made.
func stopsServicing(o UpdateOutcome) bool {
	return o == UpdateFailed || o == ServicingStackRequired || o == Transient || o == RebootFirst
}

// CombineServicing folds the calls made (in order, the last one possibly a
// failure) into one result for the servicing task: a failure is the result; else a
// reboot if any call asked for one; else installed if anything was; else
// already installed if anything was; else not applicable.
func CombineServicing(exits []StepExit, planned int) host.UpdateResult {
	if len(exits) == 0 {
		return host.UpdateResult{ExitCode: ExitNotApplicable, Detail: "no packages"}
	}
	var parts []string
	for _, e := range exits {
		parts = append(parts, fmt.Sprintf("%s: %s", e.What, describeExit(e.ExitCode)))
	}
	last := exits[len(exits)-1]
	if stopsServicing(ClassifyUpdate(last.ExitCode)) {
		return host.UpdateResult{ExitCode: last.ExitCode, Installed: installedBy(exits),
			Detail: fmt.Sprintf("%s (step %d of %d; before it: %s)", last.What, len(exits), planned, orNothing(parts[:len(parts)-1]))}
	}
	best := UpdateOutcome(-1)
	code := ExitNotApplicable
	for _, e := range exits {
		if o := ClassifyUpdate(e.ExitCode); rank(o) > rank(best) {
			best, code = o, e.ExitCode
		}
	}
	return host.UpdateResult{ExitCode: code, Detail: strings.Join(parts, "; "), Installed: installedBy(exits)}
}

// installedBy is what the calls installed, in their order: an update that
// was already there, did not apply or failed is no part of the record.
func installedBy(exits []StepExit) []host.InstalledUpdate {
	var out []host.InstalledUpdate
	for _, e := range exits {
		if o := ClassifyUpdate(e.ExitCode); o == Installed || o == RebootRequired {
			out = append(out, e.Installed...)
		}
	}
	return out
}

func rank(o UpdateOutcome) int {
	switch o {
	case RebootRequired:
		return 4
	case Installed:
		return 3
	case AlreadyInstalled:
		return 2
	case NotApplicable:
		return 1
	}
	return 0
}

func describeExit(code int) string {
	return fmt.Sprintf("%s (0x%08X)", ClassifyUpdate(code), uint32(code))
}

func orNothing(parts []string) string {
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, "; ")
}
