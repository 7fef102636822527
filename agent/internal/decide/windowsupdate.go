package decide

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// WUUpdate is an update Windows Update (or WSUS) offers this host, as the
// Windows Update Agent's IUpdate describes it.
type WUUpdate struct {
	Title string
	// Categories: the names of IUpdate.Categories ("Security Updates",
	// "Drivers", "Microsoft Server operating system-21H2", …).
	Categories []string
	// KBs: IUpdate.KBArticleIDs ("5044281"), the same in every language.
	KBs []string
}

// SelectWindowsUpdates picks, from what Windows Update offers, only what
// brings the OS to a newer patch level: servicing stack updates, then the
// newest cumulative update of the OS. Never "everything available": drivers,
// feature updates, Defender definitions, .NET Framework updates and preview
// releases are left to whoever manages the node's other updates. It returns
// the indexes to install in install order.
func SelectWindowsUpdates(offered []WUUpdate) []int {
	var ssu []int
	lcu := -1
	for i, u := range offered {
		t := strings.ToLower(u.Title)
		if excluded(u, t) {
			continue
		}
		switch {
		case strings.Contains(t, "servicing stack update"):
			ssu = append(ssu, i)
		case strings.Contains(t, "cumulative update for microsoft server operating system"),
			strings.Contains(t, "cumulative update for windows server"):
			// Titles begin with the release month ("2024-10 Cumulative Update
			// …"), so the greatest title is the newest; WU normally offers only
			// one, the others being superseded.
			if lcu < 0 || u.Title > offered[lcu].Title {
				lcu = i
			}
		}
	}
	sort.Ints(ssu)
	if lcu >= 0 {
		return append(ssu, lcu)
	}
	return ssu
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
			id := "KB" + strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(kb)), "KB")
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

func excluded(u WUUpdate, lowerTitle string) bool {
	for _, w := range []string{".net framework", "preview", "feature update", "dynamic update"} {
		if strings.Contains(lowerTitle, w) {
			return true
		}
	}
	for _, c := range u.Categories {
		switch strings.ToLower(c) {
		case "drivers", "definition updates", "feature packs", "upgrades":
			return true
		}
	}
	return false
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
