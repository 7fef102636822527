package windows

import (
	"context"
	"errors"
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
	calls             []string
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

	wu := &fakeWU{offered: patchTuesdayOffer(), reboot: map[int]bool{1: true}}
	res, err := installFromWindowsUpdate(ctx, wu, req)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"search " + wuSearch, "download 5044414", "install 5044414", "download 5044281", "install 5044281"}
	if !slices.Equal(wu.calls, want) {
		t.Errorf("calls %q\nwant %q", wu.calls, want)
	}
	if res.ExitCode != decide.ExitRebootRequired || !strings.HasPrefix(res.Detail, "Windows Update: ") {
		t.Errorf("result %+v, want 3010 (the cumulative update asked for a reboot)", res)
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
	if !slices.Equal(wu.calls[1:], []string{"download 5044281", "install 5044281"}) {
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
