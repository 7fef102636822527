package decide

import (
	"reflect"
	"testing"
	"time"
)

// Products, as IUpdate.Categories carries them beside the classification
// (the selection does not read them).
const (
	productServer2019 = "F702A48C-919B-45D6-9AEF-CA4248D50397"
	productServer21H2 = "71718F13-7324-4B0F-8F9E-2CA9DC978E53"
)

var patchTuesday = time.Date(2024, 10, 8, 17, 0, 0, 0, time.UTC)

const mb = 1 << 20

// offer is an update as the Windows Update Agent describes it.
func offer(title, class, kb string, size int64, more ...func(*WUUpdate)) WUUpdate {
	u := WUUpdate{Title: title, CategoryIDs: []string{productServer21H2, class}, KBs: []string{kb},
		Type: WUTypeSoftware, Size: size, Published: patchTuesday}
	for _, m := range more {
		m(&u)
	}
	return u
}

func exclusive(u *WUUpdate)  { u.Exclusive = true }
func browseOnly(u *WUUpdate) { u.BrowseOnly = true }
func driver(u *WUUpdate)     { u.Type = WUTypeDriver }
func server2019(u *WUUpdate) { u.CategoryIDs[0] = productServer2019 }
func published(t time.Time) func(*WUUpdate) {
	return func(u *WUUpdate) { u.Published = t }
}
func categories(ids ...string) func(*WUUpdate) {
	return func(u *WUUpdate) { u.CategoryIDs = ids }
}

// The servicing stack and the OS's cumulative update are found by category
// ID, flags and size, whatever the language of the titles; nothing else
// is taken, and a title alone makes nothing an update of the OS.
func TestSelectWindowsUpdates(t *testing.T) {
	lcuEN := "2024-10 Cumulative Update for Microsoft server operating system version 21H2 for x64-based Systems (KB5044281)"
	for _, tc := range []struct {
		name    string
		offered []WUUpdate
		want    []int
	}{
		{"Patch Tuesday on Server 2022: the servicing stack, then the cumulative update, nothing else", []WUUpdate{
			offer("2024-10 Cumulative Update for .NET Framework 3.5, 4.8 and 4.8.1 for Microsoft server operating system version 21H2 for x64 (KB5044091)",
				WUClassSecurityUpdates, "5044091", 80*mb),
			offer("Security Intelligence Update for Microsoft Defender Antivirus - KB2267602 (Version 1.419.163.0)", WUClassDefinitionUpdates, "2267602", 120*mb),
			offer(lcuEN, WUClassSecurityUpdates, "5044281", 420*mb),
			offer("Intel - System - 10.1.1.44", WUClassDrivers, "", 2*mb, driver),
			offer("2024-10 Servicing Stack Update for Microsoft server operating system version 21H2 for x64-based Systems (KB5044414)",
				WUClassSecurityUpdates, "5044414", 14*mb, exclusive),
			offer("2024-10 Cumulative Update Preview for Microsoft server operating system version 21H2 for x64-based Systems (KB5044288)",
				WUClassUpdates, "5044288", 430*mb, browseOnly),
			offer("Windows Malicious Software Removal Tool x64 - v5.129 (KB890830)", WUClassUpdates, "890830", 70*mb),
			offer("Windows Server 2025 feature update", WUClassUpgrades, "5044284", 4000*mb),
		}, []int{4, 2}},
		{"English titles: the OS's cumulative update, even when .NET's were the larger download", []WUUpdate{
			offer("2024-10 Cumulative Update for .NET Framework 3.5, 4.8 and 4.8.1 for Microsoft server operating system version 21H2 for x64 (KB5044091)",
				WUClassSecurityUpdates, "5044091", 900*mb),
			offer(lcuEN, WUClassSecurityUpdates, "5044281", 420*mb),
		}, []int{1}},
		{"a Windows Server 2025 hotpatch month: the hotpatch, not .NET's larger cumulative update", []WUUpdate{
			offer("2025-02 Cumulative Update for .NET Framework 3.5 and 4.8.1 for Microsoft server operating system version 24H2 for x64 (KB5050188)",
				WUClassSecurityUpdates, "5050188", 70*mb),
			offer("2025-02 Security Hotpatch Update for Windows Server 2025 for x64-based Systems (KB5052006)", WUClassSecurityUpdates, "5052006", 25*mb),
		}, []int{1}},
		{"German titles: the cumulative update is still found", []WUUpdate{
			offer("Kumulatives Update für Microsoft server operating system, Version 21H2 für x64-basierte Systeme (KB5044281)",
				WUClassSecurityUpdates, "5044281", 420*mb),
			offer("2024-10 Kumulatives Update für .NET Framework 3.5, 4.8 und 4.8.1 für Microsoft server operating system, Version 21H2 für x64 (KB5044091)",
				WUClassSecurityUpdates, "5044091", 80*mb),
			offer("Sicherheitsinformationsupdate für Microsoft Defender Antivirus – KB2267602 (Version 1.419.163.0)", WUClassDefinitionUpdates, "2267602", 120*mb),
			offer("Tool zum Entfernen bösartiger Software x64 – v5.129 (KB890830)", WUClassUpdateRollups, "890830", 70*mb),
		}, []int{0}},
		{"Japanese titles, with a servicing stack", []WUUpdate{
			offer("2024-10 x64 ベース システム用 Microsoft server operating system バージョン 21H2 の累積更新プログラム (KB5044281)",
				WUClassSecurityUpdates, "5044281", 420*mb),
			offer("2024-10 x64 ベース システム用 Microsoft server operating system バージョン 21H2 のサービス スタック更新プログラム (KB5044414)",
				WUClassSecurityUpdates, "5044414", 14*mb, exclusive),
		}, []int{1, 0}},
		{"an English cumulative-update title in the wrong category is not taken", []WUUpdate{
			offer(lcuEN, WUClassDefinitionUpdates, "5044281", 420*mb),
			offer(lcuEN, WUClassUpdateRollups, "5044281", 420*mb),
			offer(lcuEN, WUClassDrivers, "5044281", 420*mb, driver),
			offer(lcuEN, WUClassUpgrades, "5044281", 420*mb),
			offer(lcuEN, WUClassFeaturePacks, "5044281", 420*mb),
			offer(lcuEN, "00000000-0000-0000-0000-000000000000", "5044281", 420*mb),
			offer(lcuEN, "", "5044281", 420*mb, categories()),
		}, nil},
		{"an English title of the right category but a driver, optional, or the removal tool, is not taken", []WUUpdate{
			offer(lcuEN, WUClassSecurityUpdates, "5044281", 420*mb, driver),
			offer(lcuEN, WUClassSecurityUpdates, "5044281", 420*mb, browseOnly),
			offer(lcuEN, WUClassSecurityUpdates, "KB890830", 420*mb),
		}, nil},
		{"only definitions and the removal tool: nothing", []WUUpdate{
			offer("Security Intelligence Update for Microsoft Defender Antivirus - KB2267602", WUClassDefinitionUpdates, "2267602", 120*mb),
			offer("Windows Malicious Software Removal Tool x64 - v5.129 (KB890830)", WUClassUpdateRollups, "890830", 70*mb),
		}, nil},
		{"Server 2019: the servicing stack first, out-of-band cumulative update (Updates)", []WUUpdate{
			offer("2024-10 Cumulative Update for Windows Server 2019 (1809) for x64-based Systems (KB5044277)",
				WUClassUpdates, "5044277", 780*mb, server2019),
			offer("2024-10 Servicing Stack Update for Windows Server 2019 for x64-based Systems (KB5044410)",
				WUClassCriticalUpdates, "5044410", 12*mb, exclusive, server2019),
			offer("2024-10 Cumulative Update for .NET Framework 3.5, 4.7.2 and 4.8 for Windows Server 2019 for x64 (KB5044089)",
				WUClassSecurityUpdates, "5044089", 90*mb, server2019),
		}, []int{1, 0}},
		{"a .NET Framework update published after the cumulative update is still not taken", []WUUpdate{
			offer(lcuEN, WUClassSecurityUpdates, "5044281", 420*mb),
			offer("2024-10 Cumulative Update for .NET Framework (KB5045934)", WUClassSecurityUpdates, "5045934", 80*mb,
				published(patchTuesday.Add(9*24*time.Hour))),
		}, []int{0}},
		{"a .NET Framework cumulative update offered alone (same classification as the OS's): nothing", []WUUpdate{
			offer("2024-10 Cumulative Update for .NET Framework 3.5, 4.8 and 4.8.1 for Microsoft server operating system version 21H2 for x64 (KB5044091)",
				WUClassSecurityUpdates, "5044091", 80*mb),
			offer("Windows Malicious Software Removal Tool x64 - v5.129 (KB890830)", WUClassUpdateRollups, "890830", 70*mb),
		}, nil},
		{"the same in German: the product name is not translated", []WUUpdate{
			offer("2024-10 Kumulatives Update für .NET Framework 3.5, 4.8 und 4.8.1 für Microsoft server operating system, Version 21H2 für x64 (KB5044091)",
				WUClassSecurityUpdates, "5044091", 80*mb),
		}, nil},
		{"a servicing stack only", []WUUpdate{
			offer("servicing stack", WUClassSecurityUpdates, "5044414", 14*mb, exclusive),
		}, []int{0}},
		{"a combined cumulative update that must be installed alone is still the cumulative update", []WUUpdate{
			offer("servicing stack", WUClassSecurityUpdates, "5044414", 14*mb, exclusive),
			offer("combined", WUClassSecurityUpdates, "5044281", 420*mb, exclusive),
			offer(".NET", WUClassSecurityUpdates, "5044091", 80*mb),
		}, []int{0, 1}},
		{"sizes unknown: the newest, then the higher KB", []WUUpdate{
			offer("older", WUClassSecurityUpdates, "5042881", 0, published(patchTuesday.Add(-28*24*time.Hour))),
			offer("newer", WUClassSecurityUpdates, "5044281", 0),
			offer("same day, lower KB", WUClassSecurityUpdates, "5044091", 0),
		}, []int{1}},
		{"category IDs as WUA may spell them: lower case, in braces", []WUUpdate{
			offer("x", "{0fa1201d-4330-4fa8-8ae9-b877473b6441}", "5044281", 420*mb),
		}, []int{0}},
		{"nothing offered", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SelectWindowsUpdates(tc.offered); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("selected %v, want %v", got, tc.want)
			}
		})
	}
}
