package decide

import (
	"fmt"

	"winpool.dev/agent/internal/host"
)

// UpdateOutcome is what a servicing exit code means for the agent.
type UpdateOutcome int

const (
	UpdateFailed UpdateOutcome = iota
	Installed
	RebootRequired
	NotApplicable
	AlreadyInstalled
)

func (o UpdateOutcome) String() string {
	switch o {
	case Installed:
		return "Installed"
	case RebootRequired:
		return "RebootRequired"
	case NotApplicable:
		return "NotApplicable"
	case AlreadyInstalled:
		return "AlreadyInstalled"
	}
	return "Failed"
}

// Servicing exit codes (DISM, wusa) the agent tells apart.
const (
	ExitSuccess = 0
	// ExitRebootRequired is ERROR_SUCCESS_REBOOT_REQUIRED.
	ExitRebootRequired = 3010
	// ExitNotApplicable is CBS_E_NOT_APPLICABLE (DISM): the package does not
	// apply to this image.
	ExitNotApplicable = 0x800F081E
	// ExitWUNotApplicable is WU_E_NOT_APPLICABLE, wusa's way of saying the same.
	ExitWUNotApplicable = 0x80240017
	// ExitAlreadyInstalled is WU_S_ALREADY_INSTALLED (wusa).
	ExitAlreadyInstalled = 0x240006
)

// ClassifyUpdate maps a servicing exit code. Windows exit codes are 32-bit
// unsigned; a caller that got the signed form (-2146498530 for 0x800F081E)
// is classified the same.
func ClassifyUpdate(exitCode int) UpdateOutcome {
	switch uint32(exitCode) {
	case ExitSuccess:
		return Installed
	case ExitRebootRequired:
		return RebootRequired
	case ExitNotApplicable, ExitWUNotApplicable:
		return NotApplicable
	case ExitAlreadyInstalled:
		return AlreadyInstalled
	}
	return UpdateFailed
}

// AfterInstall decides what follows an InstallUpdate step (install, as Next
// returned it and as its State was saved) that servicing answered with res.
func AfterInstall(in Input, install Step, res host.UpdateResult) Step {
	d := decision{in: in, state: install.State}
	code := uint32(res.ExitCode)
	switch ClassifyUpdate(res.ExitCode) {
	case RebootRequired:
		return d.reboot(install.Target, ReasonInstallAsked)
	case Installed, AlreadyInstalled:
		// The running build is judged by Next on a fresh observation: an
		// install that changed nothing counts against the attempts there.
		return Step{Action: Observe, State: d.state}
	case NotApplicable:
		// Never a reboot: nothing was staged, and rebooting would only loop.
		return d.fail(fmt.Sprintf("update not applicable to this host (0x%08X): %s does not apply to build %s (target %s); "+
			"the package is for another Windows release, or this host needs a newer servicing stack update first; %s",
			code, res.Detail, in.Observed.Build, install.Target, servicingLogs))
	}
	return d.fail(fmt.Sprintf("servicing exited 0x%08X (%d) installing %s; %s", code, code, res.Detail, servicingLogs))
}
