package decide

import "winpool.dev/agent/internal/host"

// Why the agent reboots a node. Each names, in the node's report and the
// fleet's statistics, a signal an install can clear.
const (
	// ReasonInstallAsked: the agent's own install exited with a
	// reboot-required code (3010): the update is staged for the boot.
	ReasonInstallAsked = "the update's install asked for a reboot"
	ReasonCBS          = "CBS RebootPending"
	ReasonWU           = "Windows Update RebootRequired"
)

// RebootReasons are the signals that justify a reboot before an install:
// Component Based Servicing's RebootPending (an install on top of it fails
// with CBS_E_PENDING, 0x800F082F) and Windows Update's RebootRequired.
// PendingFileRenameOperations never do: installers and Defender leave
// entries there routinely, some re-add one at every boot, and servicing does
// not need them cleared, so a reboot for them alone would burn every reboot
// the node is allowed without ever patching it. The agent's own install says
// itself when it needs a reboot (its exit code), whatever the renames hold.
func RebootReasons(s host.RebootSignals) []string {
	var why []string
	if s.CBSRebootPending {
		why = append(why, ReasonCBS)
	}
	if s.WURebootRequired {
		why = append(why, ReasonWU)
	}
	return why
}
