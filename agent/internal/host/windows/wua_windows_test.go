//go:build windows

package windows

import (
	"os"
	"testing"
	"time"
)

// The Windows Update Agent's real COM calls, on the Windows runner (a
// search of this machine's installed updates takes minutes, so the
// workflow's own step runs it, WINPOOL_WUA_TEST=1): the properties the
// selection, staging and hotpatch read exist and read (the publication date,
// IUpdate.LastDeploymentChangeTime, is a VT_DATE that reads as a time), and a
// downloader takes the background priority staging sets.
func TestTheRealWindowsUpdateAgentDescribesUpdatesAndTakesAPriority(t *testing.T) {
	if os.Getenv("WINPOOL_WUA_TEST") == "" {
		t.Skip("WINPOOL_WUA_TEST is not set: the Windows workflow's own step searches this machine's updates")
	}
	s, err := openWUA()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	installed, err := s.Search("IsInstalled=1 and Type='Software'")
	if err != nil {
		t.Fatalf("searching the installed updates: %v", err)
	}
	if len(installed) == 0 {
		t.Fatal("no installed update: a runner image has its cumulative updates installed")
	}
	rebootFree, dated := 0, 0
	for _, u := range installed {
		if u.Title == "" || len(u.CategoryIDs) == 0 {
			t.Errorf("an update read without its title or categories: %+v", u)
		}
		switch {
		case u.Published.IsZero():
		case u.Published.Year() < 2000 || u.Published.After(time.Now().Add(24*time.Hour)):
			t.Errorf("%q: LastDeploymentChangeTime reads %v: not a date Windows Update published it on", u.Title, u.Published)
		default:
			dated++
		}
		if u.RebootFree {
			rebootFree++
		}
	}
	if dated == 0 {
		t.Error("no installed update reads a LastDeploymentChangeTime: the newest offer (os.patchPolicy) would have no date")
	}
	t.Logf("%d installed updates, %d of them dated, %d of them irbNeverReboots", len(installed), dated, rebootFree)
	downloader := s.wu.call(s.session, "CreateUpdateDownloader")
	s.wu.put(downloader, "Priority", int32(dpLow))
	if s.wu.err != nil {
		t.Fatalf("setting IUpdateDownloader.Priority to dpLow: %v", s.wu.err)
	}
	if got := s.wu.int(downloader, "Priority"); got != dpLow {
		t.Errorf("IUpdateDownloader.Priority reads %d after dpLow", got)
	}
}
