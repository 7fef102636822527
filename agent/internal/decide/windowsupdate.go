package decide

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// WUUpdate is an update Windows Update (or WSUS) offers this host, as the
// Windows Update Agent's IUpdate describes it. Titles and category names are
// in the server's display language; what the selection reads is not: GUIDs,
// KB IDs, flags, sizes and dates.
type WUUpdate struct {
	// Title is for messages only; nothing is selected by it.
	Title string
	// CategoryIDs: the CategoryID (a GUID) of each of IUpdate.Categories:
	// its classification (WUClassification…) and its product.
	CategoryIDs []string
	// KBs: IUpdate.KBArticleIDs ("5044281"), the same in every language.
	KBs []string
	// CveIDs: IUpdate.CveIDs ("CVE-2025-21333"), for the record of what
	// was installed; nothing is selected by them.
	CveIDs []string
	// Type is IUpdate.Type: WUTypeSoftware or WUTypeDriver.
	Type int
	// Exclusive: IUpdate.InstallationBehavior.Impact is
	// iiRequiresExclusiveHandling, as a servicing stack update's is (it must
	// be installed alone).
	Exclusive bool
	// BrowseOnly: IUpdate3.BrowseOnly, an optional update (the monthly
	// previews) that Windows installs only when someone asks for it.
	BrowseOnly bool
	// Size is IUpdate.MaxDownloadSize in bytes (0 when unknown).
	Size int64
	// Published is IUpdate.LastDeploymentChangeTime.
	Published time.Time
	// RebootFree: IUpdate.InstallationBehavior.RebootBehavior is
	// irbNeverReboots, as Windows Update describes a hotpatch (Windows
	// Server 2025 enrolled in hotpatching, in a month that is not a
	// baseline): it installs without a reboot.
	RebootFree bool
}

// IUpdate.Type values (UpdateType).
const (
	WUTypeSoftware = 1
	WUTypeDriver   = 2
)

// The update classifications, by their fixed category IDs (WSUS
// Classification GUIDs, Microsoft Learn ff357803; Drivers and Upgrades as
// Windows Update for Business documents them). A servicing stack update has
// no classification of its own: since November 2018 they are Security
// Updates (Microsoft Learn, "Servicing stack updates").
const (
	WUClassSecurityUpdates   = "0FA1201D-4330-4FA8-8AE9-B877473B6441"
	WUClassCriticalUpdates   = "E6CF1350-C01B-414D-A61F-263D14D133B4"
	WUClassUpdates           = "CD5FFD1E-E932-4E3A-BF74-18BF0B1BBD83"
	WUClassUpdateRollups     = "28BC880E-0592-4CBF-8F95-C79B17911D5F"
	WUClassDefinitionUpdates = "E0789628-CE08-4437-BE74-2495B842F43B"
	WUClassDrivers           = "EBFC1FC5-71A4-4F7B-9ACA-3B9A503104A0"
	WUClassFeaturePacks      = "B54E7D24-7ADD-428F-8B75-90A396FA584F"
	WUClassUpgrades          = "3689BDC8-B205-4AF4-8D4A-A63924C5E9D5"
	WUClassServicePacks      = "68C5B0A3-D1A6-4553-AE49-01D3A7827828"
	WUClassTools             = "B4832BD8-E735-4761-8DAF-37F882276DAB"
)

// osClassifications are those an OS servicing stack or cumulative update
// has: Security Updates (the monthly cumulative update, servicing stacks),
// Updates (out-of-band and non-security releases), Critical Updates. Not
// Update Rollups (the Malicious Software Removal Tool, .NET Framework
// rollups), Definition Updates, Drivers, Feature Packs, Upgrades (feature
// updates), Service Packs, Tools.
var osClassifications = []string{WUClassSecurityUpdates, WUClassUpdates, WUClassCriticalUpdates}

// notOSKBs are updates offered every month that are never the OS's: the
// Malicious Software Removal Tool, Defender's security intelligence and its
// antimalware platform.
var notOSKBs = []string{"KB890830", "KB2267602", "KB4052623"}

// SelectWindowsUpdates picks, from what Windows Update offers, only what
// brings the OS to a newer patch level: servicing stack updates, then the
// OS's cumulative update. Never "everything available": drivers, feature
// updates, Defender definitions, the removal tool and previews are left to
// whoever manages the node's other updates. It returns the indexes to
// install in install order.
//
// No title makes an update count: it does when its classification (by
// category ID) is an OS one, it is software, not optional (BrowseOnly), not
// one of notOSKBs and not .NET Framework's (dotNetFramework, which only the
// title tells). Of those, the cumulative update is the largest
// download (an OS cumulative update is several times the size of a .NET
// Framework one, which has the same classification and ships the same day;
// equal sizes: the newest, then the higher KB); the servicing stack updates
// are the others that must be installed alone (Exclusive), in the order
// offered, before it.
func SelectWindowsUpdates(offered []WUUpdate) []int {
	var eligible []int
	for i, u := range offered {
		if isOSUpdate(u) {
			eligible = append(eligible, i)
		}
	}
	if len(eligible) == 0 {
		return nil
	}
	// The session asks for English titles (UserLocale 1033): where they
	// came back English, a title that says it is the OS's cumulative update
	// is preferred, so a .NET Framework update (same classification) is never
	// taken for it even if it were the larger. Where they did not, size decides.
	candidates := eligible
	if named := slices.DeleteFunc(slices.Clone(eligible), func(i int) bool { return !englishOSCumulative(offered[i].Title) }); len(named) > 0 {
		candidates = named
	}
	lcu := candidates[0]
	for _, i := range candidates[1:] {
		if newerCumulative(offered[i], offered[lcu]) {
			lcu = i
		}
	}
	var picked []int
	for _, i := range eligible {
		if i != lcu && offered[i].Exclusive {
			picked = append(picked, i)
		}
	}
	return append(picked, lcu)
}

// englishOSCumulative: an English title of the OS's cumulative update
// ("2024-10 Cumulative Update for Microsoft server operating system version
// 21H2 for x64-based Systems (KB5044281)") or, in a Windows Server 2025
// hotpatch month, of its hotpatch ("2025-02 Security Hotpatch Update for
// Windows Server 2025 for x64-based Systems (KB5052006)", a fraction of the
// size of .NET's cumulative update of that month), not .NET Framework's.
func englishOSCumulative(title string) bool {
	return (strings.Contains(title, "Cumulative Update") || strings.Contains(title, "Hotpatch")) && !strings.Contains(title, ".NET")
}

func isOSUpdate(u WUUpdate) bool {
	if u.Type == WUTypeDriver || u.BrowseOnly || dotNetFramework(u.Title) {
		return false
	}
	for _, kb := range u.KBs {
		if slices.Contains(notOSKBs, normalKB(kb)) {
			return false
		}
	}
	return slices.Contains(osClassifications, classification(u))
}

// PassedOverAsNotOS is the updates offered in an OS classification that
// SelectWindowsUpdates never takes because they are .NET Framework's: what
// a search that finds no cumulative update of the OS says it passed over.
func PassedOverAsNotOS(offered []WUUpdate) []int {
	var passed []int
	for i, u := range offered {
		if dotNetFramework(u.Title) && isOSUpdate(WUUpdate{Type: u.Type, BrowseOnly: u.BrowseOnly, KBs: u.KBs, CategoryIDs: u.CategoryIDs}) {
			passed = append(passed, i)
		}
	}
	return passed
}

// dotNetFramework: the update is .NET Framework's. The Microsoft Update
// Catalog files .NET Framework's monthly cumulative update under the OS's
// own product and classification (Security Updates), so no category ID
// tells it from the OS's; its title does, in every language: the product
// name is never translated. Offered alone (approved without the OS's), it
// would otherwise be taken for the OS's cumulative update, and a pool that
// follows its source would roll to a level its build never reaches.
func dotNetFramework(title string) bool {
	return strings.Contains(title, ".NET Framework")
}

// classification is the update's classification category ID, "" when it
// carries none known.
func classification(u WUUpdate) string {
	for _, id := range u.CategoryIDs {
		id = strings.ToUpper(strings.Trim(strings.TrimSpace(id), "{}"))
		if slices.Contains(knownClassifications, id) {
			return id
		}
	}
	return ""
}

var knownClassifications = []string{
	WUClassSecurityUpdates, WUClassCriticalUpdates, WUClassUpdates, WUClassUpdateRollups,
	WUClassDefinitionUpdates, WUClassDrivers, WUClassFeaturePacks, WUClassUpgrades,
	WUClassServicePacks, WUClassTools,
}

// newerCumulative: a is rather the OS's cumulative update than b.
func newerCumulative(a, b WUUpdate) bool {
	if a.Size != b.Size {
		return a.Size > b.Size
	}
	if !a.Published.Equal(b.Published) {
		return a.Published.After(b.Published)
	}
	return highestKB(a) > highestKB(b)
}

func highestKB(u WUUpdate) int {
	high := 0
	for _, kb := range u.KBs {
		if n, err := strconv.Atoi(strings.TrimPrefix(normalKB(kb), "KB")); err == nil && n > high {
			high = n
		}
	}
	return high
}

// normalKB spells a KB ID as the pool does: "KB5044281".
func normalKB(kb string) string {
	return "KB" + strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(kb)), "KB")
}

// SelectPinnedUpdates picks the offered updates a pool pins by KB ID (its
// os.updates.kbs), in the pool's order. KB IDs do not depend on the server's
// display language, titles and category names do. A pinned KB that is not
// offered may be installed already (Windows Update offers only what is not);
// when none is offered the error names them and what is offered.
func SelectPinnedUpdates(offered []WUUpdate, kbs []string) ([]int, error) {
	byKB := map[string]int{}
	var all []string
	for i, u := range offered {
		for _, kb := range u.KBs {
			id := normalKB(kb)
			if _, dup := byKB[id]; !dup {
				byKB[id] = i
				all = append(all, id)
			}
		}
	}
	var picked []int
	for _, kb := range kbs {
		if i, ok := byKB[strings.ToUpper(kb)]; ok && !slices.Contains(picked, i) {
			picked = append(picked, i)
		}
	}
	if len(picked) == 0 {
		offers := "nothing"
		if len(all) > 0 {
			sort.Strings(all)
			offers = strings.Join(all, ", ")
		}
		return nil, fmt.Errorf("Windows Update offers none of %s, which the pool pins (os.updates.kbs); it offers %s: "+
			"approve them in WSUS for this node's group, or check that they apply to this build", strings.Join(kbs, ", "), offers)
	}
	return picked, nil
}

// Windows Update Agent OperationResultCode values (IInstallationResult.ResultCode).
const (
	WUNotStarted          = 0
	WUInProgress          = 1
	WUSucceeded           = 2
	WUSucceededWithErrors = 3
	WUFailed              = 4
	WUAborted             = 5
)

// WUGenericFailure stands for a failure whose HRESULT Windows Update did not
// give (WU_E_UNEXPECTED).
const WUGenericFailure = 0x80240FFF

// WindowsUpdateExit maps an installation result to the exit code the rest of
// the agent understands (ClassifyUpdate): 3010 when a reboot is needed, 0 when
// done, else the HRESULT. Succeeded-with-errors is a failure: one of the
// updates (maybe the cumulative one) did not install.
func WindowsUpdateExit(resultCode int, hresult int32, rebootRequired bool) int {
	switch resultCode {
	case WUSucceeded:
		if rebootRequired {
			return ExitRebootRequired
		}
		return ExitSuccess
	}
	if hresult != 0 {
		return int(uint32(hresult))
	}
	return WUGenericFailure
}
