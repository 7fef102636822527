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

// containerdService is the service containerd runs as, whether it
// registered itself (containerd --register-service) or NSSM runs it (AKS).
const containerdService = "containerd"

// runtimeParents are services that run containerd as a child process, not
// as a service of its own: RKE2's rke2 service (rancher/rke2,
// pkg/windows/service.go; containerd.exe and kubelet.exe under
// C:\var\lib\rancher\rke2\data\<release>\bin).
var runtimeParents = []string{"rke2"}

// containerdProgram is the containerd binary the agent runs (`containerd
// --version`, as SYSTEM): the one configured, else the program the containerd
// service runs (its ImagePath, or NSSM's Application on AKS), else
// %ProgramFiles%\containerd\containerd.exe where containerd's own installer
// puts it; "" when none is there. Never looked up on PATH: a folder on the
// machine's PATH that a user may write to would have SYSTEM run whatever
// containerd.exe was planted in it.
func containerdProgram(sys System, configured, programFiles string, exists func(string) bool) string {
	if configured != "" {
		return configured
	}
	if found, err := readServices(sys, containerdService); err == nil && len(found) == 1 && found[0].Program != "" {
		return found[0].Program
	}
	if programFiles == "" {
		programFiles = `C:\Program Files`
	}
	if p := programFiles + `\containerd\containerd.exe`; exists(p) {
		return p
	}
	return ""
}
