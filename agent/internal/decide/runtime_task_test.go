package decide

import (
	"strings"
	"testing"
	"time"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"
)

var t0 = time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)

// upgrading is a patched host on containerd 1.7.20 whose first upgrade to
// 1.7.22 was started for r1, and whose task left result u.
func upgrading(u *host.RuntimeUpgrade, now time.Time) Input {
	in := applying(patched(), names.StatusApplying, host.State{Revision: "r1", RuntimeUpgrades: 1})
	in.Observed.ContainerdVersion = "1.7.20"
	in.Observed.RuntimeUpgrade = u
	in.Now = now
	return in
}

func result(phase host.RuntimePhase, attempt int) *host.RuntimeUpgrade {
	return &host.RuntimeUpgrade{Revision: "r1", Attempt: attempt, Version: "1.7.22", Phase: phase, Started: t0, Message: "containerd did not start: service error 1067"}
}

func TestRuntimeUpgradeTask(t *testing.T) {
	started := host.State{Revision: "r1", RuntimeUpgrades: 1}
	cases := []struct {
		name string
		in   Input
		want want
	}{
		{"task scheduled: wait for it", upgrading(result(host.RuntimeScheduled, 1), t0.Add(time.Minute)),
			want{action: Wait, status: names.StatusApplying, state: started, message: []string{RuntimeTaskName, "Scheduled"}}},
		{"task running: wait for it, never a second install", upgrading(result(host.RuntimeRunning, 1), t0.Add(14*time.Minute)),
			want{action: Wait, status: names.StatusApplying, state: started, message: []string{"Running"}}},
		{"task running past the timeout: fail naming the result file", upgrading(result(host.RuntimeRunning, 1), t0.Add(16*time.Minute)),
			want{action: Report, status: names.StatusFailed, state: started, message: []string{"still Running after 15m0s", RuntimeResultFile}}},
		{"rolled back: fail with the task's reason, no retry", upgrading(result(host.RuntimeRolledBack, 1), t0.Add(time.Minute)),
			want{action: Report, status: names.StatusFailed, state: started, message: []string{"rolled back", "service error 1067", RuntimeResultFile}}},
		{"rollback failed too: fail saying the runtime may be down", upgrading(result(host.RuntimeFailed, 1), t0.Add(time.Minute)),
			want{action: Report, status: names.StatusFailed, state: started, message: []string{"runtime may be down", "service error 1067"}}},
		{"succeeded but containerd reports another version: next attempt", upgrading(result(host.RuntimeSucceeded, 1), t0.Add(time.Minute)),
			want{action: UpgradeContainerd, status: names.StatusApplying, version: "1.7.22", state: host.State{Revision: "r1", RuntimeUpgrades: 2}}},
		{"a result of an earlier attempt number says nothing about this one", func() Input {
			in := upgrading(result(host.RuntimeRolledBack, 1), t0)
			in.State.RuntimeUpgrades = 2
			return in
		}(), want{action: UpgradeContainerd, status: names.StatusApplying, version: "1.7.22", state: host.State{Revision: "r1", RuntimeUpgrades: 3}}},
		{"a fresh request ignores the last request's rolled-back result", func() Input {
			in := upgrading(result(host.RuntimeRolledBack, 1), t0)
			in.Reported = NodeReport{} // the operator cleared the report: a fresh request
			return in
		}(), want{action: UpgradeContainerd, status: names.StatusApplying, version: "1.7.22", state: host.State{Revision: "r1", RuntimeUpgrades: 1}}},
		{"another revision's result is ignored", func() Input {
			u := result(host.RuntimeRolledBack, 1)
			u.Revision = "r0"
			return upgrading(u, t0)
		}(), want{action: UpgradeContainerd, status: names.StatusApplying, version: "1.7.22", state: host.State{Revision: "r1", RuntimeUpgrades: 2}}},
		{"succeeded and containerd reports it: the revision goes on", func() Input {
			in := upgrading(result(host.RuntimeSucceeded, 1), t0)
			in.Observed.ContainerdVersion = "1.7.22"
			return in
		}(), want{action: Report, status: names.StatusSucceeded, state: started}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { check(t, Next(c.in), c.want) })
	}
}

func TestUpgradeCarriesTheArchiveAttemptAndRunningVersion(t *testing.T) {
	in := patched()
	in.Observed.ContainerdVersion = "1.7.20"
	arch := &config.Archive{URL: "https://mirror.example/containerd-1.7.22-windows-amd64.tar.gz", SHA256: strings.Repeat("a", 64)}
	in.Config.Config.RuntimeArchive = arch
	s := Next(in)
	want := host.RuntimeRequest{Revision: "r1", Attempt: 1, Version: "1.7.22", From: "1.7.20", Archive: arch}
	if s.Action != UpgradeContainerd || s.Runtime != want {
		t.Errorf("step %v %+v, want UpgradeContainerd %+v", s.Action, s.Runtime, want)
	}
}

func TestInstallCarriesTheUpdateSource(t *testing.T) {
	in := request()
	ps := pkgs("ssu.cab", "lcu.msu")
	in.Config.Config.Updates = &config.Updates{Source: config.SourcePackages, Packages: ps}
	s := Next(in)
	if s.Action != InstallUpdate || s.Update.Source != config.SourcePackages || len(s.Update.Packages) != 2 ||
		s.Update.Target != build("10.0.20348.2762") || s.Update.Revision != "r1" {
		t.Errorf("step %v %+v, want InstallUpdate of the two packages to 10.0.20348.2762", s.Action, s.Update)
	}
	if !strings.Contains(s.Report.Message, "from 2 package(s)") {
		t.Errorf("message %q does not say where the update comes from", s.Report.Message)
	}
	in.Config.Config.Updates = nil
	if s := Next(in); s.Update.Source != config.SourceWindowsUpdate || s.Update.Packages != nil || !strings.Contains(s.Report.Message, "from Windows Update") {
		t.Errorf("no updates field: %+v (%q), want Windows Update", s.Update, s.Report.Message)
	}
}

func TestRebootNamesWhatIsPending(t *testing.T) {
	in := request()
	in.Observed.Reboot = host.RebootSignals{CBSRebootPending: true, FileRenames: []string{`\??\C:\Windows\Temp\x.tmp`, ""}}
	check(t, Next(in), want{action: Reboot, status: names.StatusRebooting, state: host.State{Revision: "r1", Reboots: 1},
		message: []string{"(reboot 1 of at most 6): CBS RebootPending"}})
}
