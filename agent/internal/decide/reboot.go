package decide

import "strings"

// RebootSignals is what Windows leaves behind when servicing needs a reboot
// to finish, as read from the registry.
type RebootSignals struct {
	// CBSRebootPending: the key HKLM\SOFTWARE\Microsoft\Windows\CurrentVersion\
	// Component Based Servicing\RebootPending exists (DISM, .msu, .cab).
	CBSRebootPending bool
	// WURebootRequired: the key …\WindowsUpdate\Auto Update\RebootRequired
	// exists (Windows Update agent).
	WURebootRequired bool
	// FileRenames: the values PendingFileRenameOperations and
	// PendingFileRenameOperations2 under HKLM\SYSTEM\CurrentControlSet\Control\
	// Session Manager (REG_MULTI_SZ pairs of source and destination; an empty
	// destination is a delete at boot).
	FileRenames []string
}

// RebootPending says whether Windows wants a reboot, and which signals say so.
// A file rename list holding only empty strings is nothing pending: some
// installers leave the value behind emptied.
func RebootPending(s RebootSignals) (bool, string) {
	var why []string
	if s.CBSRebootPending {
		why = append(why, "CBS RebootPending")
	}
	if s.WURebootRequired {
		why = append(why, "Windows Update RebootRequired")
	}
	for _, r := range s.FileRenames {
		if strings.TrimSpace(r) != "" {
			why = append(why, "PendingFileRenameOperations")
			break
		}
	}
	return len(why) > 0, strings.Join(why, ", ")
}
