package decide

import (
	"strings"
	"testing"

	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"
)

func TestClassifyUpdate(t *testing.T) {
	cases := []struct {
		code int
		want UpdateOutcome
	}{
		{0, Installed},
		{3010, RebootRequired},
		{0x800F081E, NotApplicable},
		{2148468766, NotApplicable},
		{-2146498530, NotApplicable}, // 0x800F081E as a signed 32-bit exit code
		// 0x800F0C1E, a decimal once quoted for 0x800F081E by mistake: not the same code.
		{2148469790, UpdateFailed},
		{0x80240017, NotApplicable},
		{2359302, AlreadyInstalled},
		{0x240006, AlreadyInstalled},
		{1, UpdateFailed},
		{0x800F0922, UpdateFailed},
		{1641, UpdateFailed},
		{-1, UpdateFailed},
	}
	for _, c := range cases {
		if got := ClassifyUpdate(c.code); got != c.want {
			t.Errorf("ClassifyUpdate(%d / 0x%08X) = %v, want %v", c.code, uint32(c.code), got, c.want)
		}
	}
}

func TestAfterInstall(t *testing.T) {
	in := applying(request(), names.StatusApplying, host.State{Revision: "r1", Attempts: 1})
	install := Next(in)
	if install.Action != InstallUpdate {
		t.Fatalf("setup: %v, want InstallUpdate", install.Action)
	}
	in.Reported, in.State = install.Report, install.State
	afterInstall := host.State{Revision: "r1", Attempts: 2}
	cases := []struct {
		name string
		code int
		want want
	}{
		{
			name: "3010 reboots",
			code: 3010,
			want: want{action: Reboot, status: names.StatusRebooting, state: host.State{Revision: "r1", Attempts: 2, Reboots: 1},
				message: []string{"rebooting to finish the update to 10.0.20348.2762 (reboot 1 of at most 6)"}},
		},
		{name: "0 observes again", code: 0, want: want{action: Observe, state: afterInstall}},
		{name: "already installed observes again", code: 2359302, want: want{action: Observe, state: afterInstall}},
		{
			name: "not applicable fails and never reboots",
			code: 2148468766,
			want: want{action: Report, status: names.StatusFailed, state: afterInstall,
				message: []string{"update not applicable to this host (0x800F081E)", "kb5044281.msu", "10.0.20348.2700"}},
		},
		{
			name: "any other code fails with hex and decimal",
			code: 0x800F0922,
			want: want{action: Report, status: names.StatusFailed, state: afterInstall,
				message: []string{"servicing exited 0x800F0922 (2148469026) installing kb5044281.msu", `C:\Windows\Logs\CBS\CBS.log`, `C:\Windows\Logs\DISM\dism.log`}},
		},
		{
			name: "a small failure code is zero-padded",
			code: 5,
			want: want{action: Report, status: names.StatusFailed, state: afterInstall,
				message: []string{"servicing exited 0x00000005 (5)"}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check(t, AfterInstall(in, install, host.UpdateResult{ExitCode: c.code, Detail: "kb5044281.msu"}), c.want)
		})
	}
}

// Not-applicable must never turn into a reboot or another install: the
// package will not apply however often it is tried.
func TestNotApplicableNeverLoops(t *testing.T) {
	in := request()
	install := Next(in)
	in.Reported, in.State = install.Report, install.State
	s := AfterInstall(in, install, host.UpdateResult{ExitCode: ExitNotApplicable, Detail: "kb.msu"})
	if s.Action != Report || s.Report.Status != names.StatusFailed {
		t.Fatalf("not applicable: %v %s, want a Failed report", s.Action, s.Report.Status)
	}
	// The Node now says Failed for r1: the agent is done until the operator retries.
	in.Reported = s.Report
	in.State = s.State
	if next := Next(in); next.Action != Idle {
		t.Errorf("after a not-applicable failure: %v, want Idle", next.Action)
	}
	if !strings.Contains(s.Report.Message, "0x800F081E") {
		t.Errorf("message %q lacks the exit code", s.Report.Message)
	}
}

// A reboot asked for by servicing counts against the reboot cap too.
func TestAfterInstallRebootIsCapped(t *testing.T) {
	in := applying(request(), names.StatusApplying, host.State{Revision: "r1", Attempts: 2, Reboots: 6})
	install := Next(in)
	in.Reported, in.State = install.Report, install.State
	s := AfterInstall(in, install, host.UpdateResult{ExitCode: ExitRebootRequired})
	if s.Action != Report || s.Report.Status != names.StatusFailed || !strings.Contains(s.Report.Message, "after 6 reboots") {
		t.Fatalf("got %v %s %q, want Failed after 6 reboots", s.Action, s.Report.Status, s.Report.Message)
	}
}
