//go:build windows

package windows

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

// The seam's real calls, on the Windows runner (.github/workflows/windows.yml):
// the logic above them is tested on Linux over fakeSystem (seam_test.go);
// these prove the one-line calls answer as the fake does.

func TestTheRealSystemReadsServices(t *testing.T) {
	sys := winSystem{}
	// The event log runs on every Windows Server, as svchost.
	got, err := readServices(sys, "EventLog", "winpool-no-such-service")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !got[0].Running || !strings.Contains(strings.ToLower(got[0].Program), "svchost.exe") {
		t.Errorf("EventLog: %+v", got)
	}
	if _, err := sys.QueryService("winpool-no-such-service"); !errors.Is(err, ErrNoService) {
		t.Errorf("a missing service: %v, want ErrNoService", err)
	}
	if err := sys.StartService("EventLog"); !errors.Is(err, ErrServiceRunning) {
		t.Errorf("starting a running service: %v, want ErrServiceRunning", err)
	}
}

func TestTheRealSystemReadsTheRegistry(t *testing.T) {
	sys := winSystem{}
	b, err := readBuild(sys)
	if err != nil {
		t.Fatal(err)
	}
	if b.Major != 10 || b.Build < 17763 || b.UBR <= 0 {
		t.Errorf("build %s", b)
	}
	if _, err := rebootSignals(sys); err != nil {
		t.Errorf("reboot signals: %v", err)
	}
	if _, _, err := sys.RegistryString(`SOFTWARE\winpool-no-such-key`, "x"); !errors.Is(err, ErrNotExist) {
		t.Errorf("a missing key: %v, want ErrNotExist", err)
	}
	if ok, err := sys.RegistryKeyExists(currentVersionKey); !ok || err != nil {
		t.Errorf("CurrentVersion exists: %v %v", ok, err)
	}
	if _, err := readWUPolicy(sys); err != nil {
		t.Errorf("Windows Update policy: %v", err)
	}
}

func TestTheRealSystemReadsFileSecurity(t *testing.T) {
	sys := winSystem{}
	if _, _, err := sys.FileSecurity(`C:\winpool-no-such-folder\x`); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing path: %v, want fs.ErrNotExist", err)
	}
	s, mode, err := sys.FileSecurity(`C:\Windows`)
	if err != nil || mode != fs.ModeDir || s.OwnerSID == "" {
		t.Errorf(`C:\Windows: %+v %v %v`, s, mode, err)
	}
	dir := t.TempDir() + `\created`
	if err := sys.CreateFolder(dir, stateFolderSDDL); err != nil {
		t.Fatal(err)
	}
	if err := sys.CreateFolder(dir, stateFolderSDDL); !errors.Is(err, ErrExists) {
		t.Errorf("creating it again: %v, want ErrExists", err)
	}
}
