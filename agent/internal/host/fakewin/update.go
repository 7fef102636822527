package fakewin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/host/windows"
)

// Catalogue is what the machine's update source (Windows Update, or the
// WSUS its policy names) offers it, and how the install goes.
type Catalogue struct {
	// InstallTime is how long the download and the install take together,
	// or, with DownloadTime, the install alone.
	InstallTime time.Duration
	// DownloadTime is how long downloading the update takes (0: half the
	// InstallTime). An update downloaded before (staged) is not downloaded
	// again until its copy vanishes (Machine.ClearDownloads).
	DownloadTime time.Duration
	// Lands is the build an install of the update asked for stages for the
	// next boot (nil: that build): the source can offer a newer cumulative
	// update, or only an older one.
	Lands func(asked host.Build) host.Build
	// Fails, when set, is the HRESULT the install of the update asked for
	// fails with (CBS_E_INSTALLERS_FAILED 0x800F0922, CBS_E_NOT_APPLICABLE
	// 0x800F081E, …); 0: it installs.
	Fails func(asked host.Build) uint32
	// SSUFirst: a servicing stack update is offered alone first; it needs
	// its own reboot, and the cumulative update is offered after it.
	SSUFirst bool
	// TwoPhase: the boot that lands the update leaves CBS asking for one
	// more reboot (a two-phase update); the next boot clears it.
	TwoPhase bool
	// Localized: titles come back in German (a WSUS or a session whose
	// language is not English), not in the English the agent asks for.
	Localized bool
	// Unapproved: the source offers no servicing stack or cumulative update
	// (a WSUS whose administrator has not approved this month's for the
	// node's group, or a deferral policy): only what it offers every month.
	Unapproved bool
	// DotNetOnly: the source offers, of the month's updates, only .NET
	// Framework's cumulative update (a WSUS whose administrator approved
	// it and not the OS's), which the Microsoft Update Catalog files under
	// the OS's product and classification (Security Updates): only its
	// title says it is not the OS's.
	DotNetOnly bool
	// SearchTime is how long a search takes to answer.
	SearchTime time.Duration
	// Busy: Automatic Updates is installing something at the first
	// install: IUpdateInstaller.IsBusy says so once, and an Install called
	// while it is throws WU_E_OPERATIONINPROGRESS (0x80240009).
	Busy bool
	// Throws: the first search made during a servicing task throws
	// WU_E_PT_HTTP_STATUS_REQUEST_TIMEOUT (0x8024401C: WSUS timed out), the
	// first install WU_E_INSTALL_NOT_ALLOWED (0x80240016: Automatic Updates
	// took the installer after IsBusy said it was free).
	Throws bool
	// Unavailable: the first download fails with
	// WU_E_PT_HTTP_STATUS_SERVICE_UNAVAIL (0x80244022: WSUS answered 503).
	Unavailable bool
	// DownloadReset: the first download fails with
	// ERROR_INTERNET_CONNECTION_ABORTED (0x80072EFE: a proxy reset it).
	DownloadReset bool
	// Hotpatch: the machine is enrolled in hotpatching (Windows Server
	// 2025). Each update it installs is a month: the first and every third
	// after it are quarterly baselines (a cumulative update, a reboot), the
	// others hotpatches, which land in memory without one.
	Hotpatch bool
	// HotpatchReboots: a hotpatch's install asks for a reboot after all.
	HotpatchReboots bool
	// Permanent: no cumulative update can be taken off (the component
	// store was cleaned with /ResetBase): DISM /Remove-Package fails
	// CBS_E_CANNOT_UNINSTALL.
	Permanent bool
	// Approved, when set and it names a build, is a WSUS whose
	// administrator approved that build's cumulative update (published at
	// the time it gives): a machine below it is offered that update alone
	// (its own KB), one at or above it nothing, whatever a servicing task
	// asks; its install lands that build. Asked at every search and
	// install, so the approval can move while the machine runs.
	Approved func() (host.Build, time.Time, bool)
}

// approvedLocked is the WSUS approval in force, if any.
func (m *Machine) approvedLocked() (host.Build, time.Time, bool) {
	if m.o.Catalogue.Approved == nil {
		return host.Build{}, time.Time{}, false
	}
	return m.o.Catalogue.Approved()
}

// ApprovedKB is the KB ID of the cumulative update that brings a machine to
// build b, as the simulated WSUS names it: one per month (per revision of
// the build), as Microsoft's are.
func ApprovedKB(b host.Build) string { return fmt.Sprintf("50%05d", b.UBR) }

// wuState is the Windows Update Agent's: the update the running servicing
// task was asked for, and whether the servicing stack update went in.
type wuState struct {
	asked        host.Build
	ssuInstalled bool
	// downloads and installs made, for the faults of the first;
	// background: the downloads made at background priority.
	downloads, installs, background int
	// downloaded: the updates (by title) whose content is on the machine.
	downloaded map[string]bool
	// busyOver: Busy's installer has been seen busy; searchThrown:
	// Throws' search has thrown.
	busyOver, searchThrown bool
	// landed: OS updates installed (the months gone by, for Hotpatch).
	landed int
}

// hotpatchMonth: the machine is enrolled and this month is not a baseline.
func (m *Machine) hotpatchMonthLocked() bool { return m.o.Catalogue.Hotpatch && m.wu.landed%3 != 0 }

// ClearDownloads removes every downloaded update's content, as a disk
// cleanup of SoftwareDistribution\Download does: the install downloads it
// again.
func (m *Machine) ClearDownloads() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.wu.downloaded = nil
}

// downloadTime and installTime split the catalogue's times.
func (c Catalogue) downloadTime() time.Duration {
	if c.DownloadTime > 0 {
		return c.DownloadTime
	}
	return c.InstallTime / 2
}

func (c Catalogue) installTime() time.Duration {
	if c.DownloadTime > 0 {
		return c.InstallTime
	}
	return c.InstallTime - c.InstallTime/2
}

// Titles and KBs of what the catalogue offers; the KBs are the same every
// month here, which the selection never looks at.
const (
	ssuKB      = "5050001"
	cuKB       = "5050002"
	dotNetKB   = "5050003"
	hotpatchKB = "5052006"
)

// wuError is a Windows Update Agent method that failed, as go-ole hands it
// over: the method's IDispatch (ITypeInfo::Invoke) returns DISP_E_EXCEPTION
// with the method's own HRESULT in EXCEPINFO.scode, and go-ole's invoke
// returns an OleError of that code whose SubError is the EXCEPINFO
// (idispatch_windows.go, error.go). The method set is go-ole's.
type wuError struct {
	call string
	code uint32
	why  string
}

func (e wuError) Error() string   { return "Exception occurred. (" + e.call + ": " + e.why + ")" }
func (e wuError) Code() uintptr   { return 0x80020009 }
func (e wuError) SubError() error { return excepInfo(e) }

// excepInfo is go-ole's EXCEPINFO: scode filled in, wCode 0.
type excepInfo wuError

func (x excepInfo) Error() string { return x.why }
func (x excepInfo) SCODE() uint32 { return x.code }
func (x excepInfo) WCode() uint16 { return 0 }

// WUServiceKey is the Windows Update service's key; its Start value 4
// (serviceDisabled) is the SCM's "Disabled".
const (
	WUServiceKey    = `SYSTEM\CurrentControlSet\Services\wuauserv`
	serviceDisabled = 4
)

// openWindowsUpdate is a Windows Update Agent session.
func (m *Machine) openWindowsUpdate() (windows.WindowsUpdate, func(), error) {
	return &wuSession{m: m}, func() {}, nil
}

type wuSession struct {
	m       *Machine
	offered []decide.WUUpdate
}

// Search offers, besides the OS's updates, what every machine is offered
// every month and servicing must leave alone: the Malicious Software
// Removal Tool and Defender's definitions.
func (s *wuSession) Search(string) ([]decide.WUUpdate, error) {
	m := s.m
	m.mu.Lock()
	m.searches++
	m.mu.Unlock()
	if err := m.wait(m.o.Catalogue.SearchTime); err != nil {
		return nil, wuError{"IUpdateSearcher.Search", 0x80240007, "WU_E_NOT_INITIALIZED: the machine rebooted"}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ints[strings.ToLower(WUServiceKey+`\Start`)] == serviceDisabled {
		// The search needs the service, which the SCM will not start.
		return nil, wuError{"IUpdateSearcher.Search", 0x80070422, "ERROR_SERVICE_DISABLED: the Windows Update service (wuauserv) is disabled"}
	}
	if m.o.Catalogue.Throws && m.installs > 0 && !m.wu.searchThrown {
		m.wu.searchThrown = true
		return nil, wuError{"IUpdateSearcher.Search", 0x8024401C, "WU_E_PT_HTTP_STATUS_REQUEST_TIMEOUT: the WSUS server timed out"}
	}
	if m.unreach != "" {
		// WU_E_PT_WINHTTP_NAME_NOT_RESOLVED's kin: the search itself fails.
		return nil, wuError{"IUpdateSearcher.Search", 0x80072EE2, m.unreach}
	}
	month := time.Now().UTC().Format("2006-01")
	rel := releaseName(m.buildLocked().Build)
	release := fmt.Sprintf("Microsoft server operating system version %s for x64-based Systems", rel)
	ssu, cu := " Servicing Stack Update for ", " Cumulative Update for "
	if m.o.Catalogue.Localized {
		release = fmt.Sprintf("Microsoft Server-Betriebssystem, Version %s für x64-basierte Systeme", rel)
		ssu, cu = " Wartungsstapelupdate für ", " Kumulatives Update für "
	}
	s.offered = []decide.WUUpdate{
		{Title: "Windows Malicious Software Removal Tool x64 - v5.131 (KB890830)", KBs: []string{"890830"}, Type: decide.WUTypeSoftware,
			CategoryIDs: []string{decide.WUClassUpdateRollups}, Size: 80 << 20},
		{Title: "Security Intelligence Update for Microsoft Defender Antivirus - KB2267602", KBs: []string{"2267602"}, Type: decide.WUTypeSoftware,
			CategoryIDs: []string{decide.WUClassDefinitionUpdates}, Size: 120 << 20},
	}
	if m.o.Catalogue.Unapproved {
		return s.offered, nil
	}
	if m.o.Catalogue.DotNetOnly {
		s.offered = append(s.offered, dotNetUpdate(month, rel, m.o.Catalogue.Localized))
		return s.offered, nil
	}
	if b, published, ok := m.approvedLocked(); ok {
		if m.buildLocked().AtLeast(b) {
			return s.offered, nil
		}
		kb := ApprovedKB(b)
		s.offered = append(s.offered, decide.WUUpdate{Title: published.UTC().Format("2006-01") + cu + release + " (KB" + kb + ")", KBs: []string{kb},
			Type: decide.WUTypeSoftware, CategoryIDs: []string{decide.WUClassSecurityUpdates}, Size: 1200 << 20, Published: published, CveIDs: cveIDs(kb)})
		return s.offered, nil
	}
	if m.hotpatchMonthLocked() {
		s.offered = append(s.offered, decide.WUUpdate{Title: month + " Security Hotpatch Update for " + release + " (KB" + hotpatchKB + ")", KBs: []string{hotpatchKB},
			Type: decide.WUTypeSoftware, CategoryIDs: []string{decide.WUClassSecurityUpdates}, Size: 25 << 20, Published: time.Now(), RebootFree: true,
			CveIDs: cveIDs(hotpatchKB)})
		return s.offered, nil
	}
	if m.o.Catalogue.SSUFirst && !m.wu.ssuInstalled {
		s.offered = append(s.offered, decide.WUUpdate{Title: month + ssu + release + " (KB" + ssuKB + ")", KBs: []string{ssuKB},
			Type: decide.WUTypeSoftware, CategoryIDs: []string{decide.WUClassSecurityUpdates}, Exclusive: true, Size: 15 << 20, Published: time.Now()})
	} else {
		s.offered = append(s.offered, decide.WUUpdate{Title: month + cu + release + " (KB" + cuKB + ")", KBs: []string{cuKB},
			Type: decide.WUTypeSoftware, CategoryIDs: []string{decide.WUClassSecurityUpdates}, Size: 1200 << 20, Published: time.Now(), CveIDs: cveIDs(cuKB)})
	}
	return s.offered, nil
}

// cveIDs are the CVE IDs the update KB<kb> lists (IUpdate2.CveIDs): three,
// made up in CVE's format from the KB, so that each month's update names
// its own, as Microsoft's do. The servicing stack update and what every
// machine is offered list none here.
func cveIDs(kb string) []string {
	n := kb[max(len(kb)-4, 0):]
	return []string{"CVE-2026-" + n + "1", "CVE-2026-" + n + "2", "CVE-2026-" + n + "3"}
}

// dotNetUpdate is the month's .NET Framework cumulative update as the
// catalogue lists it beside the OS's: the same classification (and, in the
// catalogue, product), a twentieth of its size, a title of its own.
func dotNetUpdate(month, rel string, localized bool) decide.WUUpdate {
	title := fmt.Sprintf("%s Cumulative Update for .NET Framework 3.5, 4.8 and 4.8.1 for Microsoft server operating system version %s for x64 (KB%s)", month, rel, dotNetKB)
	if localized {
		title = fmt.Sprintf("%s Kumulatives Update für .NET Framework 3.5, 4.8 und 4.8.1 für Microsoft Server-Betriebssystem, Version %s für x64 (KB%s)", month, rel, dotNetKB)
	}
	return decide.WUUpdate{Title: title, KBs: []string{dotNetKB}, Type: decide.WUTypeSoftware,
		CategoryIDs: []string{decide.WUClassSecurityUpdates}, Size: 70 << 20, Published: time.Now()}
}

func releaseName(build int) string {
	switch build {
	case 17763:
		return "1809"
	case 20348:
		return "21H2"
	case 26100:
		return "24H2"
	}
	return fmt.Sprint(build)
}

// Download takes the download time, unless the update's content is on the
// machine already.
func (s *wuSession) Download(i int, background bool) (int, int32, error) {
	if i < 0 || i >= len(s.offered) {
		return 0, 0, fmt.Errorf("no update %d", i)
	}
	m, title := s.m, s.offered[i].Title
	m.mu.Lock()
	have := m.wu.downloaded[title]
	m.mu.Unlock()
	if have {
		return decide.WUSucceeded, 0, nil
	}
	if err := m.wait(m.o.Catalogue.downloadTime()); err != nil {
		return decide.WUAborted, 0, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.wu.downloads++
	if background {
		m.wu.background++
	}
	switch c := m.o.Catalogue; {
	case c.Unavailable && m.wu.downloads == 1:
		return decide.WUFailed, hr(0x80244022), nil
	case c.DownloadReset && m.wu.downloads == 1:
		return decide.WUFailed, hr(0x80072EFE), nil
	}
	if m.wu.downloaded == nil {
		m.wu.downloaded = map[string]bool{}
	}
	m.wu.downloaded[title] = true
	return decide.WUSucceeded, 0, nil
}

// InstallerBusy is IUpdateInstaller.IsBusy: Busy's installer, once.
func (s *wuSession) InstallerBusy() (bool, error) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	busy := s.m.o.Catalogue.Busy && !s.m.wu.busyOver
	s.m.wu.busyOver = true
	return busy, nil
}

// hr is an HRESULT as the Windows Update Agent's HResult property holds it.
func hr(code uint32) int32 { return int32(code) }

// Install takes the other half and stages what it installed for the next
// boot.
func (s *wuSession) Install(i int) (int, int32, bool, error) {
	if err := s.m.wait(s.m.o.Catalogue.installTime()); err != nil {
		return decide.WUAborted, 0, false, nil
	}
	if i < 0 || i >= len(s.offered) {
		return 0, 0, false, fmt.Errorf("no update %d", i)
	}
	s.m.mu.Lock()
	s.m.wu.installs++
	c, w := s.m.o.Catalogue, &s.m.wu
	busy := c.Busy && !w.busyOver
	w.busyOver = w.busyOver || busy
	s.m.mu.Unlock()
	switch {
	case busy:
		return 0, 0, false, wuError{"IUpdateInstaller.Install", 0x80240009, "WU_E_OPERATIONINPROGRESS: another installation is in progress"}
	case c.Throws && w.installs == 1:
		return 0, 0, false, wuError{"IUpdateInstaller.Install", 0x80240016, "WU_E_INSTALL_NOT_ALLOWED: another installation is in progress or a reboot is pending"}
	}
	if s.offered[i].Exclusive {
		s.m.mu.Lock()
		defer s.m.mu.Unlock()
		s.m.wu.ssuInstalled = true
		s.m.keys[strings.ToLower(wuRebootRequired)] = true
		return decide.WUSucceeded, 0, true, nil
	}
	if s.offered[i].RebootFree {
		return s.m.hotpatch()
	}
	code, err := s.m.install(context.Background(), true)
	if err != nil || code != 3010 {
		return decide.WUFailed, int32(uint32(code)), false, err
	}
	// Installed, it is offered no more; next month's update (the same
	// title here, where the month is the clock's) is a new download.
	s.m.mu.Lock()
	delete(s.m.wu.downloaded, s.offered[i].Title)
	s.m.mu.Unlock()
	return decide.WUSucceeded, 0, true, nil
}

// hotpatch lands the update asked for in memory: the build moves now, no
// reboot is asked (unless HotpatchReboots: then it is staged like a
// cumulative update).
func (m *Machine) hotpatch() (int, int32, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	asked := m.wu.asked
	if f := m.o.Catalogue.Fails; f != nil {
		if hr := f(asked); hr != 0 {
			m.failedLocked(hr)
			return decide.WUFailed, int32(hr), false, nil
		}
	}
	lands := m.landsLocked(asked)
	m.wu.landed++
	if m.o.Catalogue.HotpatchReboots {
		m.staged = &lands
		m.keys[strings.ToLower(cbsRebootPending)] = true
		return decide.WUSucceeded, 0, true, nil
	}
	m.setBuild(lands)
	m.hotpatched++
	return decide.WUSucceeded, 0, false, nil
}

// failedLocked is what a failed install leaves: one that failed with
// ERROR_FAIL_REBOOT_REQUIRED leaves its changes for a reboot to roll back
// (Component Based Servicing then says a reboot is pending).
func (m *Machine) failedLocked(hr uint32) {
	if hr == decide.ExitWUFailRebootRequired {
		m.keys[strings.ToLower(cbsRebootPending)] = true
	}
}

// landsLocked is the build an install of the update asked for stages: what
// WSUS approved when it approves one, else the catalogue's.
func (m *Machine) landsLocked(asked host.Build) host.Build {
	if b, _, ok := m.approvedLocked(); ok {
		return b
	}
	if f := m.o.Catalogue.Lands; f != nil {
		return f(asked)
	}
	return asked
}

// wait is time passing on the machine; a boot ends it.
func (m *Machine) wait(d time.Duration) error {
	m.mu.Lock()
	ctx := m.bootCtx
	m.mu.Unlock()
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// install is the component store taking the update asked for: staged for
// the next boot (3010), or failed. DISM waits the install time itself;
// Windows Update has waited it in Download and Install.
func (m *Machine) install(ctx context.Context, waited bool) (int, error) {
	if !waited {
		if err := m.wait(m.o.Catalogue.InstallTime); err != nil {
			return 0, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	asked := m.wu.asked
	if f := m.o.Catalogue.Fails; f != nil {
		if hr := f(asked); hr != 0 {
			m.failedLocked(hr)
			return int(hr), nil
		}
	}
	lands := m.landsLocked(asked)
	m.staged = &lands
	m.wu.landed++
	m.keys[strings.ToLower(cbsRebootPending)] = true
	return 3010, nil
}
