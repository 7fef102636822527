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
	// InstallerBusy is IUpdateInstaller.IsBusy: another installation is in
	// progress, and an Install now would throw WU_E_OPERATIONINPROGRESS.
	InstallerBusy() (bool, error)
	// Install is IUpdateInstaller.Install of update i alone: the
	// OperationResultCode, HResult and RebootRequired.
	Install(i int) (resultCode int, hresult int32, rebootRequired bool, err error)
}

// A method of the Windows Update Agent that fails throws: its error carries
// the method's HRESULT (thrownHRESULT), judged as a result's HResult is.

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
	if code, ok := thrownHRESULT(err); ok {
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
		exit, err := installOne(wu, i)
		if err != nil {
			return host.UpdateResult{}, fmt.Errorf("Windows Update: %s: %w", offered[i].Title, err)
		}
		exit.What = offered[i].Title + exit.What
		exit.Installed = []host.InstalledUpdate{installedOf(offered[i])}
		exits = append(exits, exit)
		if !decide.ServicingContinues(exit.ExitCode) {
			break
		}
	}
	res := decide.CombineServicing(exits, len(chosen))
	res.Detail = "Windows Update: " + res.Detail
	return res, nil
}

// installedOf is how the record names an update: "KB" and its first KB
// article ID (one per cumulative update), its title when it has none.
func installedOf(u decide.WUUpdate) host.InstalledUpdate {
	kb := u.Title
	if len(u.KBs) > 0 {
		kb = "KB" + u.KBs[0]
	}
	return host.InstalledUpdate{KB: kb, Title: u.Title, CveIDs: u.CveIDs}
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
// servicing exit code; What is how it ended when a call threw (the
// caller puts the title before it).
func installOne(wu WindowsUpdate, i int) (decide.StepExit, error) {
	rc, hr, err := wu.Download(i, false)
	if code, ok := thrownHRESULT(err); ok {
		return decide.StepExit{What: " (the download threw: " + err.Error() + ")", ExitCode: int(code)}, nil
	} else if err != nil {
		return decide.StepExit{}, fmt.Errorf("downloading: %w", err)
	}
	if rc != decide.WUSucceeded {
		return decide.StepExit{ExitCode: decide.WindowsUpdateExit(rc, hr, false)}, nil
	}
	// As IsBusy's documentation asks: an install while another runs would
	// fail at once; it is tried again later (a transient code).
	// An IsBusy that cannot be read leaves it to Install to say.
	if busy, err := wu.InstallerBusy(); err == nil && busy {
		return decide.StepExit{What: " (IUpdateInstaller.IsBusy: another installation is in progress)", ExitCode: wuOperationInProgress}, nil
	}
	rc, hr, reboot, err := wu.Install(i)
	if code, ok := thrownHRESULT(err); ok {
		return decide.StepExit{What: " (the install threw: " + err.Error() + ")", ExitCode: int(code)}, nil
	} else if err != nil {
		return decide.StepExit{}, fmt.Errorf("installing: %w", err)
	}
	return decide.StepExit{ExitCode: decide.WindowsUpdateExit(rc, hr, reboot)}, nil
}

// wuOperationInProgress is WU_E_OPERATIONINPROGRESS.
const wuOperationInProgress = 0x80240009

func orNone(list []string) string {
	if len(list) == 0 {
		return "nothing"
	}
	return strings.Join(list, "; ")
}

// comError and comException are the methods of go-ole's *OleError and of
// the EXCEPINFO it carries (error.go, ole.go; wua_windows.go checks that
// they still have them).
type (
	comError     interface{ Code() uintptr }
	comException interface {
		SCODE() uint32
		WCode() uint16
	}
)

// dispEException is DISP_E_EXCEPTION: the method behind IDispatch.Invoke
// failed, and its own error is in EXCEPINFO (ITypeInfo::Invoke).
const dispEException = 0x80020009

// thrownHRESULT is the failure HRESULT a Windows Update Agent call's error
// carries, if any. go-ole's invoke returns every failed method as an
// OleError of DISP_E_EXCEPTION whose SubError is the EXCEPINFO
// (idispatch_windows.go): the method's HRESULT is its scode, or its wCode,
// which maps to an HRESULT as _com_error::WCodeToHRESULT does (comdef.h).
func thrownHRESULT(err error) (uint32, bool) {
	var coded comError
	if !errors.As(err, &coded) {
		return 0, false
	}
	code := uint32(coded.Code())
	var exc comException
	if sub, ok := coded.(interface{ SubError() error }); ok && code == dispEException && errors.As(sub.SubError(), &exc) {
		switch {
		case exc.SCODE()&0x80000000 != 0:
			code = exc.SCODE()
		case exc.WCode() >= 0xFE00:
			code = 0x8004FFFF
		case exc.WCode() != 0:
			code = 0x80040200 + uint32(exc.WCode())
		}
	}
	return code, code&0x80000000 != 0
}

// withThrownCode names the HRESULT a failed call threw, which go-ole's
// message does not ("Exception occurred.").
func withThrownCode(err error) error {
	if code, ok := thrownHRESULT(err); ok {
		return fmt.Errorf("0x%08X: %w (see %s)", code, err, decide.WindowsUpdateLog)
	}
	return err
}
