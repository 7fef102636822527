package windows

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"winpool.dev/agent/internal/host"
)

const (
	currentVersionKey = `SOFTWARE\Microsoft\Windows NT\CurrentVersion`
	cbsRebootPending  = `SOFTWARE\Microsoft\Windows\CurrentVersion\Component Based Servicing\RebootPending`
	wuRebootRequired  = `SOFTWARE\Microsoft\Windows\CurrentVersion\WindowsUpdate\Auto Update\RebootRequired`
	sessionManagerKey = `SYSTEM\CurrentControlSet\Control\Session Manager`
)

// readBuild reads 10.0.<CurrentBuildNumber>.<UBR>, the build the kubelet
// reports as kernelVersion.
func readBuild(sys System) (host.Build, error) {
	integer := func(name string) (int, error) {
		v, err := sys.RegistryInteger(currentVersionKey, name)
		if err != nil {
			return 0, fmt.Errorf(`reading HKLM\%s\%s: %w`, currentVersionKey, name, err)
		}
		return int(v), nil
	}
	var b host.Build
	var err error
	if b.Major, err = integer("CurrentMajorVersionNumber"); err != nil {
		return b, err
	}
	if b.Minor, err = integer("CurrentMinorVersionNumber"); err != nil {
		return b, err
	}
	if b.UBR, err = integer("UBR"); err != nil {
		return b, err
	}
	s, _, err := sys.RegistryString(currentVersionKey, "CurrentBuildNumber")
	if err != nil {
		return b, fmt.Errorf(`reading HKLM\%s\CurrentBuildNumber: %w`, currentVersionKey, err)
	}
	if b.Build, err = strconv.Atoi(strings.TrimSpace(s)); err != nil {
		return b, fmt.Errorf(`HKLM\%s\CurrentBuildNumber is %q, not a number`, currentVersionKey, s)
	}
	return b, nil
}

// rebootSignals reads what servicing leaves behind when it needs a reboot to
// finish: either flag key, or files queued to be replaced at boot. The
// decision of what they mean is decide.RebootPending.
func rebootSignals(sys System) (host.RebootSignals, error) {
	var s host.RebootSignals
	var err error
	if s.CBSRebootPending, err = sys.RegistryKeyExists(cbsRebootPending); err != nil {
		return s, fmt.Errorf(`opening HKLM\%s: %w`, cbsRebootPending, err)
	}
	if s.WURebootRequired, err = sys.RegistryKeyExists(wuRebootRequired); err != nil {
		return s, fmt.Errorf(`opening HKLM\%s: %w`, wuRebootRequired, err)
	}
	for _, name := range []string{"PendingFileRenameOperations", "PendingFileRenameOperations2"} {
		renames, err := sys.RegistryStrings(sessionManagerKey, name)
		if errors.Is(err, ErrNotExist) {
			continue
		}
		if err != nil {
			return s, fmt.Errorf(`reading HKLM\%s\%s: %w`, sessionManagerKey, name, err)
		}
		s.FileRenames = append(s.FileRenames, renames...)
	}
	return s, nil
}
