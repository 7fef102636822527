package windows

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
)

// fakeWU is a Windows Update Agent session under the seam: what the source
// offers, and what downloading and installing each update answers.
type fakeWU struct {
	offered   []decide.WUUpdate
	searchErr error
	// download and install: (OperationResultCode, HResult) per index;
	// a missing one succeeds. reboot: installs that ask for a reboot.
	download, install map[int][2]int
	reboot            map[int]bool
	// busy: IsBusy's answers, in turn (then false); throws: what Install
	// throws instead of a result, by index.
	busy   []bool
	throws map[int]error
	calls  []string
}

func (f *fakeWU) InstallerBusy() (bool, error) {
	f.calls = append(f.calls, "is busy")
	if len(f.busy) == 0 {
		return false, nil
	}
	b := f.busy[0]
	f.busy = f.busy[1:]
	return b, nil
}

func (f *fakeWU) Search(criteria string) ([]decide.WUUpdate, error) {
	f.calls = append(f.calls, "search "+criteria)
	return f.offered, f.searchErr
}

func (f *fakeWU) Download(i int, background bool) (int, int32, error) {
	if background {
		f.calls = append(f.calls, "background download "+f.offered[i].KBs[0])
	} else {
		f.calls = append(f.calls, "download "+f.offered[i].KBs[0])
	}
	if r, ok := f.download[i]; ok {
		return r[0], int32(uint32(r[1])), nil
	}
	return decide.WUSucceeded, 0, nil
}

func (f *fakeWU) Install(i int) (int, int32, bool, error) {
	f.calls = append(f.calls, "install "+f.offered[i].KBs[0])
	if err := f.throws[i]; err != nil {
		return 0, 0, false, err
	}
	if r, ok := f.install[i]; ok {
		return r[0], int32(uint32(r[1])), false, nil
	}
	return decide.WUSucceeded, 0, f.reboot[i], nil
}

func wuOffer(title, class, kb string, exclusive bool) decide.WUUpdate {
	return decide.WUUpdate{Title: title, CategoryIDs: []string{class}, KBs: []string{kb}, Type: decide.WUTypeSoftware, Exclusive: exclusive, Size: 1 << 20}
}

// Patch Tuesday as WSUS offers it: the servicing stack and the cumulative
// update, with .NET's, Defender's and the removal tool beside them.
func patchTuesdayOffer() []decide.WUUpdate {
	return []decide.WUUpdate{
		wuOffer("Security Intelligence Update for Microsoft Defender Antivirus - KB2267602", decide.WUClassDefinitionUpdates, "2267602", false),
		wuOffer("2024-10 Cumulative Update for Microsoft server operating system version 21H2 for x64-based Systems (KB5044281)", decide.WUClassSecurityUpdates, "5044281", false),
		wuOffer("2024-10 Servicing Stack Update for Microsoft server operating system version 21H2 for x64-based Systems (KB5044414)", decide.WUClassSecurityUpdates, "5044414", true),
		wuOffer("Windows Malicious Software Removal Tool x64 - v5.129 (KB890830)", decide.WUClassUpdates, "890830", false),
	}
}

func TestWindowsUpdateInstallsTheServicingStackThenTheCumulativeUpdateAlone(t *testing.T) {
	ctx := context.Background()
	req := host.UpdateRequest{Target: host.Build{Major: 10, Build: 20348, UBR: 2762}}

	offer := patchTuesdayOffer()
	offer[1].CveIDs = []string{"CVE-2024-43572", "CVE-2024-43573"}
	wu := &fakeWU{offered: offer, reboot: map[int]bool{1: true}}
	res, err := installFromWindowsUpdate(ctx, wu, req)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"search " + wuSearch, "download 5044414", "is busy", "install 5044414", "download 5044281", "is busy", "install 5044281"}
	if !slices.Equal(wu.calls, want) {
		t.Errorf("calls %q\nwant %q", wu.calls, want)
	}
	if res.ExitCode != decide.ExitRebootRequired || !strings.HasPrefix(res.Detail, "Windows Update: ") {
		t.Errorf("result %+v, want 3010 (the cumulative update asked for a reboot)", res)
	}
	// The record, in the order installed, by KB with title and CVE IDs.
	if want := []host.InstalledUpdate{{KB: "KB5044414", Title: offer[2].Title}, {KB: "KB5044281", Title: offer[1].Title, CveIDs: offer[1].CveIDs}}; !reflect.DeepEqual(res.Installed, want) {
		t.Errorf("installed %+v\nwant %+v", res.Installed, want)
	}

	// A servicing stack update WSUS answers 503 for: the cumulative update
	// is not tried without it, and the result is the transient code.
	wu = &fakeWU{offered: patchTuesdayOffer(), download: map[int][2]int{2: {decide.WUFailed, 0x80244022}}}
	res, err = installFromWindowsUpdate(ctx, wu, req)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(wu.calls, "download 5044281") || uint32(res.ExitCode) != 0x80244022 || decide.ClassifyUpdate(res.ExitCode) != decide.Transient {
		t.Errorf("a transient failure of the servicing stack: calls %q, result %+v", wu.calls, res)
	}

	// Pinned KBs: those alone.
	wu = &fakeWU{offered: patchTuesdayOffer()}
	if _, err := installFromWindowsUpdate(ctx, wu, host.UpdateRequest{KBs: []string{"KB5044281"}}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(wu.calls[1:], []string{"download 5044281", "is busy", "install 5044281"}) {
		t.Errorf("pinned: calls %q", wu.calls)
	}

	// WSUS approved nothing the OS needs: said, naming what was offered and what to approve.
	wu = &fakeWU{offered: patchTuesdayOffer()[:1]}
	_, err = installFromWindowsUpdate(ctx, wu, req)
	if err == nil || !strings.Contains(err.Error(), "offers no servicing stack or cumulative update") || !strings.Contains(err.Error(), "KB2267602") ||
		!strings.Contains(err.Error(), "approve the cumulative update that reaches 10.0.20348.2762") {
		t.Errorf("nothing to install: %v", err)
	}

	wu = &fakeWU{searchErr: errors.New("0x8024401C")}
	if _, err := installFromWindowsUpdate(ctx, wu, req); err == nil || !strings.Contains(err.Error(), "does the node reach Windows Update or its WSUS server?") {
		t.Errorf("a search that fails: %v", err)
	}
}

// oleError and oleExcepInfo have the shape of go-ole's *OleError and its
// EXCEPINFO (wua_windows.go checks the method set against go-ole's).
type oleError struct {
	hr  uintptr
	sub error
}

func (e oleError) Error() string   { return "Exception occurred." }
func (e oleError) Code() uintptr   { return e.hr }
func (e oleError) SubError() error { return e.sub }

type oleExcepInfo struct {
	wCode uint16
	scode uint32
}

func (x oleExcepInfo) Error() string { return "exception" }
func (x oleExcepInfo) SCODE() uint32 { return x.scode }
func (x oleExcepInfo) WCode() uint16 { return x.wCode }

func TestAThrownWindowsUpdateErrorIsItsOwnHRESULT(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want uint32
		ok   bool
	}{
		{"DISP_E_EXCEPTION, scode set", fmt.Errorf("Search: %w", oleError{dispEException, oleExcepInfo{scode: 0x8024401C}}), 0x8024401C, true},
		{"DISP_E_EXCEPTION, wCode set", oleError{dispEException, oleExcepInfo{wCode: 1001}}, 0x800405E9, true},
		{"DISP_E_EXCEPTION, wCode past the range", oleError{dispEException, oleExcepInfo{wCode: 0xFE01}}, 0x8004FFFF, true},
		{"DISP_E_EXCEPTION, nothing inside", oleError{dispEException, nil}, dispEException, true},
		{"another code: its own", oleError{0x80070005, oleExcepInfo{scode: 0x8024401C}}, 0x80070005, true},
		{"not a COM error", errors.New("0x8024401C"), 0, false},
	} {
		if got, ok := thrownHRESULT(tc.err); got != tc.want || ok != tc.ok {
			t.Errorf("%s: 0x%08X %v, want 0x%08X %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// A thrown install, and an installer IsBusy says is taken, are judged by
// their codes: transient, the cumulative update not tried after them.
func TestThrownAndBusyInstallsAreTransient(t *testing.T) {
	req := host.UpdateRequest{Target: host.Build{Major: 10, Build: 20348, UBR: 2762}}
	for _, wu := range []*fakeWU{
		{offered: patchTuesdayOffer(), throws: map[int]error{2: oleError{dispEException, oleExcepInfo{scode: 0x80240016}}}},
		{offered: patchTuesdayOffer(), busy: []bool{true}},
	} {
		res, err := installFromWindowsUpdate(context.Background(), wu, req)
		if err != nil || decide.ClassifyUpdate(res.ExitCode) != decide.Transient || slices.Contains(wu.calls, "install 5044281") {
			t.Errorf("calls %q: result %+v, %v; want a transient code and no cumulative update", wu.calls, res, err)
		}
	}
}
