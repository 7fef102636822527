package fakewin

import (
	"fmt"
	"strings"

	"winpool.dev/agent/internal/host"
)

// The component store's cumulative update packages, as DISM lists and
// removes them: the image's own, then each one installed since. The last is
// the build's (Installed); the ones before it are Superseded, and removing
// the last makes the one before it the build at the next boot.

// cbsCannotUninstall is CBS_E_CANNOT_UNINSTALL: a permanent package.
const cbsCannotUninstall = 0x800F0825

// rollupName is a cumulative update's package identity.
func rollupName(b host.Build) string {
	return fmt.Sprintf("Package_for_RollupFix~31bf3856ad364e35~amd64~~%d.%d.1.7", b.Build, b.UBR)
}

// rollupsLocked are the packages, the image's first.
func (m *Machine) rollupsLocked() []host.Build {
	if len(m.rollups) == 0 {
		m.rollups = append(append([]host.Build(nil), m.o.EarlierRollups...), m.buildLocked())
	}
	return m.rollups
}

// landRollupLocked: the boot lands b; a newer one than the store's last is
// a cumulative update installed.
func (m *Machine) landRollupLocked(b host.Build) {
	r := m.rollupsLocked()
	if r[len(r)-1] != b {
		m.rollups = append(r, b)
	}
}

// packageTable is DISM /Get-Packages /Format:Table /English's output.
func (m *Machine) packageTable() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	b.WriteString("Deployment Image Servicing and Management tool\r\nVersion: 10.0.20348.681\r\n\r\n")
	fmt.Fprintf(&b, "Image Version: %s\r\n\r\nPackages listing:\r\n\r\n", m.buildLocked())
	rule := strings.Repeat("-", 70) + " | ------------ | --------------- | ---------------------\r\n"
	b.WriteString(rule)
	b.WriteString(fmt.Sprintf("%-70s | %-12s | %-15s | %s\r\n", "Package Identity", "State", "Release Type", "Install Time"))
	b.WriteString(rule)
	r := m.rollupsLocked()
	for i, build := range r {
		state := "Superseded"
		if i == len(r)-1 {
			state = "Installed"
		}
		fmt.Fprintf(&b, "%-70s | %-12s | %-15s | %s\r\n", rollupName(build), state, "Security Update", "11/12/2026 3:04 AM")
	}
	fmt.Fprintf(&b, "%-70s | %-12s | %-15s | %s\r\n", "Package_for_ServicingStack_2700~31bf3856ad364e35~amd64~~20348.2700.1.1", "Installed", "Update", "9/10/2026 2:13 AM")
	b.WriteString("The operation completed successfully.\r\n")
	return b.String()
}

// removePackage is DISM /Remove-Package of the cumulative update name: the
// one before it lands at the next boot (3010). The image's own, a
// superseded one, or any with Catalogue.Permanent is refused.
func (m *Machine) removePackage(name string) int {
	if err := m.wait(m.o.Catalogue.InstallTime); err != nil {
		return 1
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.rollupsLocked()
	if !strings.EqualFold(name, rollupName(r[len(r)-1])) {
		return 0x800F0805 // CBS_E_INVALID_PACKAGE: not an installed package
	}
	if len(r) == 1 || m.o.Catalogue.Permanent {
		return cbsCannotUninstall
	}
	prev := r[len(r)-2]
	m.rollups = r[:len(r)-1]
	m.staged = &prev
	m.undos++
	m.keys[strings.ToLower(cbsRebootPending)] = true
	return 3010
}
