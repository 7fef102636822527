package decide

import (
	"reflect"
	"strings"
	"testing"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/host"
)

func pkgs(names ...string) []config.Package {
	var ps []config.Package
	for _, n := range names {
		ps = append(ps, config.Package{Path: `C:\updates\` + n, SHA256: strings.Repeat("0", 64)})
	}
	return ps
}

func TestServicingPlan(t *testing.T) {
	type step struct {
		dir    string
		files  []string
		folder bool
	}
	for _, tc := range []struct {
		name  string
		build string
		pkgs  []config.Package
		want  []step
	}{
		{"ltsc2022: one call per package, in order", "10.0.20348.2700", pkgs("ssu.cab", "lcu.msu", "other.msu"),
			[]step{{"01", []string{"ssu.cab"}, false}, {"02", []string{"lcu.msu"}, false}, {"03", []string{"other.msu"}, false}}},
		{"ltsc2025: the checkpoint and its follower from one folder", "10.0.26100.1742", pkgs("checkpoint.msu", "lcu.msu"),
			[]step{{"01", []string{"checkpoint.msu", "lcu.msu"}, true}}},
		{"ltsc2025: a cab before the msu run stays first and alone", "10.0.26100.1742", pkgs("ssu.cab", "checkpoint.msu", "lcu.msu", "late.cab"),
			[]step{{"01", []string{"ssu.cab"}, false}, {"02", []string{"checkpoint.msu", "lcu.msu"}, true}, {"03", []string{"late.cab"}, false}}},
		{"ltsc2025: a single msu is a file call", "10.0.26100.1742", pkgs("lcu.msu"),
			[]step{{"01", []string{"lcu.msu"}, false}}},
		{"no packages: no calls", "10.0.26100.1742", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []step
			for _, s := range ServicingPlan(tc.pkgs, build(tc.build)) {
				var files []string
				for _, p := range s.Packages {
					files = append(files, p.FileName())
				}
				got = append(got, step{s.Dir, files, s.WholeFolder})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCombineServicing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		exits     []StepExit
		planned   int
		wantCode  int
		wantInDet []string
	}{
		{"ssu installed, lcu needs a reboot", []StepExit{{What: "ssu.cab", ExitCode: 0}, {What: "lcu.msu", ExitCode: 3010}}, 2, ExitRebootRequired, []string{"ssu.cab: Installed", "lcu.msu: RebootRequired (0x00000BC2)"}},
		{"all installed", []StepExit{{What: "ssu.cab", ExitCode: 0}, {What: "lcu.msu", ExitCode: 0}}, 2, ExitSuccess, nil},
		{"ssu already there, lcu installed", []StepExit{{What: "ssu.cab", ExitCode: 2359302}, {What: "lcu.msu", ExitCode: 0}}, 2, ExitSuccess, []string{"ssu.cab: AlreadyInstalled"}},
		{"everything already installed", []StepExit{{What: "ssu.cab", ExitCode: 2359302}, {What: "lcu.msu", ExitCode: 0x240006}}, 2, ExitAlreadyInstalled, nil},
		{"superseded ssu not applicable, lcu reboots", []StepExit{{What: "ssu.cab", ExitCode: 0x800F081E}, {What: "lcu.msu", ExitCode: 3010}}, 2, ExitRebootRequired, nil},
		{"nothing applies", []StepExit{{What: "ssu.cab", ExitCode: 0x800F081E}, {What: "lcu.msu", ExitCode: 0x800F081E}}, 2, ExitNotApplicable, nil},
		{"lcu fails after the ssu: the failure is the result", []StepExit{{What: "ssu.cab", ExitCode: 3010}, {What: "lcu.msu", ExitCode: 0x800F0922}}, 3, 0x800F0922,
			[]string{"lcu.msu (step 2 of 3; before it: ssu.cab: RebootRequired"}},
		{"first call fails", []StepExit{{What: "ssu.cab", ExitCode: 5}}, 2, 5, []string{"ssu.cab (step 1 of 2; before it: nothing)"}},
		{"a call that needs a reboot first: its code is the result", []StepExit{{What: "ssu.cab", ExitCode: 0}, {What: "lcu.msu", ExitCode: ExitCBSPending}}, 2,
			ExitCBSPending, []string{"lcu.msu (step 2 of 2; before it: ssu.cab: Installed"}},
		{"Windows Update's reboot-first code likewise", []StepExit{{What: "KB5050002", ExitCode: ExitWUFailRebootRequired}}, 1, ExitWUFailRebootRequired, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CombineServicing(tc.exits, tc.planned)
			if uint32(got.ExitCode) != uint32(tc.wantCode) {
				t.Errorf("exit = 0x%08X, want 0x%08X", uint32(got.ExitCode), uint32(tc.wantCode))
			}
			for _, w := range tc.wantInDet {
				if !strings.Contains(got.Detail, w) {
					t.Errorf("detail %q lacks %q", got.Detail, w)
				}
			}
		})
	}
}

// The record holds what the calls installed, in their order: not an update
// that was there already, did not apply, or failed, even before a failure.
func TestTheRecordIsWhatTheCallsInstalled(t *testing.T) {
	one := func(kb string) []host.InstalledUpdate { return []host.InstalledUpdate{{KB: kb}} }
	got := CombineServicing([]StepExit{
		{What: "ssu.cab", ExitCode: ExitAlreadyInstalled, Installed: one("ssu.cab")},
		{What: "dotnet.msu", ExitCode: ExitNotApplicable, Installed: one("dotnet.msu")},
		{What: "lcu.msu", ExitCode: ExitRebootRequired, Installed: one("lcu.msu")},
		{What: "oob.msu", ExitCode: ExitSuccess, Installed: one("oob.msu")},
		{What: "bad.msu", ExitCode: 0x800F0922, Installed: one("bad.msu")},
	}, 5)
	if want := append(one("lcu.msu"), one("oob.msu")...); !reflect.DeepEqual(got.Installed, want) {
		t.Errorf("installed = %+v, want %+v", got.Installed, want)
	}
}

func TestServicingStopsAtTheFirstFailure(t *testing.T) {
	for code, want := range map[int]bool{0: true, 3010: true, 2359302: true, 0x800F081E: true, 0x800F0922: false, 0x800F0823: false, 1: false,
		ExitCBSPending: false, ExitFailRebootRequired: false} {
		if got := ServicingContinues(code); got != want {
			t.Errorf("ServicingContinues(0x%08X) = %v, want %v", uint32(code), got, want)
		}
	}
}

// Only what an install can clear justifies a reboot: file renames never do.
func TestRebootReasons(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    host.RebootSignals
		want string
	}{
		{"nothing", host.RebootSignals{}, ""},
		{"CBS", host.RebootSignals{CBSRebootPending: true}, "CBS RebootPending"},
		{"Windows Update", host.RebootSignals{WURebootRequired: true}, "Windows Update RebootRequired"},
		{"file renames alone", host.RebootSignals{FileRenames: []string{`\??\C:\x.tmp`, ""}}, ""},
		{"all of them", host.RebootSignals{CBSRebootPending: true, WURebootRequired: true, FileRenames: []string{"a", "b"}},
			"CBS RebootPending, Windows Update RebootRequired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(RebootReasons(tc.s), ", "); got != tc.want {
				t.Errorf("RebootReasons = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWindowsUpdateExit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		result  int
		hresult int32
		reboot  bool
		want    UpdateOutcome
		code    uint32
	}{
		{"succeeded, reboot needed", WUSucceeded, 0, true, RebootRequired, 3010},
		{"succeeded", WUSucceeded, 0, false, Installed, 0},
		{"succeeded with errors is a failure", WUSucceededWithErrors, -2147024891, false, UpdateFailed, 0x80070005},
		{"failed with its HRESULT", WUFailed, int32(-2146498530), false, NotApplicable, 0x800F081E},
		{"aborted without an HRESULT", WUAborted, 0, true, UpdateFailed, WUGenericFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code := WindowsUpdateExit(tc.result, tc.hresult, tc.reboot)
			if uint32(code) != tc.code || ClassifyUpdate(code) != tc.want {
				t.Errorf("exit = 0x%08X (%v), want 0x%08X (%v)", uint32(code), ClassifyUpdate(code), tc.code, tc.want)
			}
		})
	}
}

// Pinned KBs are matched by ID whatever the titles' language, in the pool's
// order; one already installed (not offered) is skipped; none offered is an
// error naming them and what is offered.
func TestSelectPinnedUpdates(t *testing.T) {
	offered := []WUUpdate{
		{Title: "2024-10 Kumulatives Update für Microsoft Server Operating System, Version 21H2 für x64-basierte Systeme (KB5044281)", KBs: []string{"5044281"}},
		{Title: "Sicherheitsupdate für .NET Framework (KB5044091)", KBs: []string{"5044091"}},
		{Title: "サービス スタック更新プログラム (KB5043936)", KBs: []string{"KB5043936"}},
	}
	for _, tc := range []struct {
		name string
		kbs  []string
		want []int
		err  string
	}{
		{"in the pool's order, servicing stack first", []string{"KB5043936", "KB5044281"}, []int{2, 0}, ""},
		{"one installed already", []string{"KB5040000", "KB5044281"}, []int{0}, ""},
		{"none offered", []string{"KB5040000"}, nil,
			"Windows Update offers none of KB5040000, which the pool pins (os.updates.kbs); it offers KB5043936, KB5044091, KB5044281"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SelectPinnedUpdates(offered, tc.kbs)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("SelectPinnedUpdates = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// The install carries the pins and says so.
func TestPinnedKBsReachTheInstall(t *testing.T) {
	in := request()
	in.Config.Config.Updates = &config.Updates{Source: config.SourceWindowsUpdate, KBs: []string{"KB5043936", "KB5044281"}}
	s := Next(in)
	if s.Action != InstallUpdate || !reflect.DeepEqual(s.Update.KBs, []string{"KB5043936", "KB5044281"}) ||
		!strings.Contains(s.Report.Message, "from Windows Update (KB5043936, KB5044281)") {
		t.Errorf("step %v %+v %q, want the install of the two pinned KBs", s.Action, s.Update, s.Report.Message)
	}
}
