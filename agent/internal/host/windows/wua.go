package windows

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
)

// WindowsUpdate is the Windows Update Agent's session under the seam: one
// call of its API per method (wua_windows.go); which updates to take, in
// which order, and what the results mean is installFromWindowsUpdate's,
// here, tested on Linux.
type WindowsUpdate interface {
	// Search is IUpdateSearcher.Search(criteria): the updates offered, as
	// the selection reads them, indexed for Download and Install.
	Search(criteria string) ([]decide.WUUpdate, error)
	// Download is IUpdateDownloader.Download of update i alone (its EULA
	// accepted): the OperationResultCode and HResult. background sets the
	// downloader's Priority to dpLow (BITS then takes only bandwidth nothing
	// else uses: staging, while the node serves); else dpNormal. An update
	// already downloaded returns at once.
	Download(i int, background bool) (resultCode int, hresult int32, err error)
	// Install is IUpdateInstaller.Install of update i alone: the
	// OperationResultCode, HResult and RebootRequired.
	Install(i int) (resultCode int, hresult int32, rebootRequired bool, err error)
}

// wuSearch is the Windows Update Agent search: software updates not yet
// installed and not hidden by an administrator. Against WSUS (when the
// node's policy names one) it returns only what WSUS approved for it.
const wuSearch = "IsInstalled=0 and IsHidden=0 and Type='Software'"

// installFromWindowsUpdate searches Windows Update (or WSUS), installs only
// the servicing stack and cumulative updates decide.SelectWindowsUpdates
// picks (or the KBs the revision pins), one at a time, servicing stack
// first (it may require exclusive handling, and the cumulative update needs
// it in place), and folds their results into one servicing exit code.
func installFromWindowsUpdate(ctx context.Context, wu WindowsUpdate, req host.UpdateRequest) (host.UpdateResult, error) {
	offered, err := wu.Search(wuSearch)
	if code, ok := hresultOf(err); ok {
		// Judged by its code like an install's result: a busy or
		// unavailable source is tried again within the attempts.
		return host.UpdateResult{ExitCode: int(code), Detail: "the Windows Update search (" + err.Error() + ")"}, nil
	}
	if err != nil {
		return host.UpdateResult{}, fmt.Errorf("searching Windows Update (does the node reach Windows Update or its WSUS server?): %w", err)
	}
	chosen, err := chooseUpdates(offered, req)
	if err != nil {
		return host.UpdateResult{}, err
	}
	var exits []decide.StepExit
	for _, i := range chosen {
		if ctx.Err() != nil {
			return host.UpdateResult{}, ctx.Err()
		}
		code, err := installOne(wu, i)
		if err != nil {
			return host.UpdateResult{}, fmt.Errorf("Windows Update: %s: %w", offered[i].Title, err)
		}
		exits = append(exits, decide.StepExit{What: offered[i].Title, ExitCode: code})
		if !decide.ServicingContinues(code) {
			break
		}
	}
	res := decide.CombineServicing(exits, len(chosen))
	res.Detail = "Windows Update: " + res.Detail
	return res, nil
}

// chooseUpdates is what the install takes from what is offered: the KBs
// the revision pins, or the servicing stack and cumulative updates
// decide.SelectWindowsUpdates picks; an error says why nothing, naming what
// is offered. Preflight asks it too (offer.go), so the two never disagree.
func chooseUpdates(offered []decide.WUUpdate, req host.UpdateRequest) ([]int, error) {
	if len(req.KBs) > 0 {
		return decide.SelectPinnedUpdates(offered, req.KBs)
	}
	if chosen := decide.SelectWindowsUpdates(offered); len(chosen) > 0 {
		return chosen, nil
	}
	var titles []string
	for _, u := range offered {
		titles = append(titles, u.Title)
	}
	return nil, fmt.Errorf("Windows Update offers no servicing stack or cumulative update for this host (offered: %s); "+
		"with WSUS, approve the cumulative update that reaches %s for this node's group, or pin it by KB ID (os.updates.kbs)", orNone(titles), req.Target)
}

// installOne downloads and installs one update, and returns the result as a
// servicing exit code.
func installOne(wu WindowsUpdate, i int) (int, error) {
	rc, hr, err := wu.Download(i, false)
	if err != nil {
		return 0, fmt.Errorf("downloading: %w", err)
	}
	if rc != decide.WUSucceeded {
		return decide.WindowsUpdateExit(rc, hr, false), nil
	}
	rc, hr, reboot, err := wu.Install(i)
	if err != nil {
		return 0, fmt.Errorf("installing: %w", err)
	}
	return decide.WindowsUpdateExit(rc, hr, reboot), nil
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "nothing"
	}
	return strings.Join(list, "; ")
}

// hresultOf is the failure HRESULT a Windows Update Agent call's error
// carries (go-ole's OleError, which the COM calls wrap), if any.
func hresultOf(err error) (uint32, bool) {
	var coded interface{ Code() uintptr }
	if !errors.As(err, &coded) {
		return 0, false
	}
	code := uint32(coded.Code())
	return code, code&0x80000000 != 0
}
