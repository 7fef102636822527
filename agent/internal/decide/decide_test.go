package decide

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"
)

func strp(s string) *string { return &s }

func build(s string) host.Build {
	b, err := host.ParseBuild(s)
	if err != nil {
		panic(err)
	}
	return b
}

// request is a node asked for revision r1 that the agent has not reported on,
// on a host one patch behind, with everything else already right. Its agent
// runs standalone, so the label alone is the request: what follows the
// operator's go-signal is the same either way (TestOnlyARecordedStartIsActedOn
// covers the signal).
func request() Input {
	return Input{
		Standalone: true,
		Namespace:  "winpool-agents",
		Pool:       "win22",
		Revision:   "r1",
		Config: RevisionConfig{Config: config.Revision{
			Revision:        "r1",
			Pool:            "win22",
			OSBuild:         20348,
			PatchLevel:      "10.0.20348.2762",
			RuntimeName:     "containerd",
			RuntimeVersion:  strp("1.7.22"),
			CNIMode:         "overlay",
			CSIProxyVersion: strp("v1.1.3"),
		}},
		Observed: host.Observed{
			Build:             build("10.0.20348.2700"),
			ContainerdVersion: "1.7.22",
			CNIMode:           "overlay",
			CSIProxyVersion:   "1.1.3",
		},
		MaxAttempts: 3,
	}
}

// patched is request() on a host already at the patch level.
func patched() Input {
	in := request()
	in.Observed.Build = build("10.0.20348.2762")
	return in
}

func applying(in Input, s names.ApplyStatus, st host.State) Input {
	in.Reported = NodeReport{AppliedRevision: in.Revision, Status: s, Message: "earlier"}
	in.State = st
	return in
}

type want struct {
	action  Action
	status  names.ApplyStatus // "" when no report is written
	message []string          // substrings the message must hold
	state   host.State
	target  string
	version string
}

func check(t *testing.T, got Step, w want) {
	t.Helper()
	if got.Action != w.action {
		t.Errorf("action = %v, want %v (report %+v)", got.Action, w.action, got.Report)
	}
	if got.Report.Status != w.status {
		t.Errorf("status = %q, want %q (message %q)", got.Report.Status, w.status, got.Report.Message)
	}
	if w.status != "" && got.Report.AppliedRevision != "r1" {
		t.Errorf("applied-revision = %q, want r1", got.Report.AppliedRevision)
	}
	for _, m := range w.message {
		if !strings.Contains(got.Report.Message, m) {
			t.Errorf("message %q lacks %q", got.Report.Message, m)
		}
	}
	if !got.State.Same(w.state) {
		t.Errorf("state = %+v, want %+v", got.State, w.state)
	}
	if w.target != "" && got.Target.String() != w.target {
		t.Errorf("target = %s, want %s", got.Target, w.target)
	}
	if got.Version != w.version {
		t.Errorf("version = %q, want %q", got.Version, w.version)
	}
}

func TestNext(t *testing.T) {
	fresh := host.State{Revision: "r1"}
	cases := []struct {
		name string
		in   func() Input
		want want
	}{
		{
			name: "no revision label: idle, whatever the host says",
			in: func() Input {
				in := request()
				in.Revision = ""
				in.State = host.State{Revision: "old", Attempts: 2}
				return in
			},
			want: want{action: Idle, state: host.State{Revision: "old", Attempts: 2}},
		},
		{
			name: "succeeded for this revision: idle",
			in:   func() Input { return applying(request(), names.StatusSucceeded, fresh) },
			want: want{action: Idle, state: fresh},
		},
		{
			name: "failed for this revision: idle until the operator clears apply-status",
			in:   func() Input { return applying(request(), names.StatusFailed, host.State{Revision: "r1", Attempts: 3}) },
			want: want{action: Idle, state: host.State{Revision: "r1", Attempts: 3}},
		},
		{
			name: "fresh request below the patch level: install, counters reset",
			in: func() Input {
				in := request()
				in.State = host.State{Revision: "r0", Attempts: 3, Reboots: 2}
				return in
			},
			want: want{action: InstallUpdate, status: names.StatusApplying, state: host.State{Revision: "r1", Attempts: 1},
				target: "10.0.20348.2762", message: []string{"10.0.20348.2762", "attempt 1 of 3"}},
		},
		{
			name: "fresh request for an earlier-reported revision resets counters of this one",
			in: func() Input {
				in := request()
				in.Reported = NodeReport{AppliedRevision: "r0", Status: names.StatusSucceeded}
				in.State = host.State{Revision: "r1", Attempts: 3}
				return in
			},
			want: want{action: InstallUpdate, status: names.StatusApplying, state: host.State{Revision: "r1", Attempts: 1}},
		},
		{
			name: "retry after failure: operator cleared apply-status, counters reset",
			in: func() Input {
				in := request()
				in.Reported = NodeReport{AppliedRevision: "r1"}
				in.State = host.State{Revision: "r1", Attempts: 3, Reboots: 3}
				return in
			},
			want: want{action: InstallUpdate, status: names.StatusApplying, state: host.State{Revision: "r1", Attempts: 1}},
		},
		{
			name: "continuation keeps the counters",
			in: func() Input {
				return applying(request(), names.StatusApplying, host.State{Revision: "r1", Attempts: 1, Reboots: 1})
			},
			want: want{action: InstallUpdate, status: names.StatusApplying, state: host.State{Revision: "r1", Attempts: 2, Reboots: 1},
				message: []string{"attempt 2 of 3"}},
		},
		{
			name: "the operator failed the node (nodeTimeout) while it installed: no reboot; the agent reports how the install ended",
			in: func() Input {
				in := applying(request(), names.StatusApplying, host.State{Revision: "r1", Attempts: 1})
				in.NodeState, in.StartedAt = "Failed", "10:00"
				in.Observed.Reboot.CBSRebootPending = true
				in.Observed.UpdateTask = &host.UpdateTask{Revision: "r1", Attempt: 1, Phase: host.UpdateDone, Result: host.UpdateResult{ExitCode: ExitRebootRequired}}
				return in
			},
			want: want{action: Report, status: names.StatusFailed, state: host.State{Revision: "r1", Attempts: 1},
				message: []string{"asks for a reboot to finish it"}},
		},
		{
			name: "a retry's start drains the node before it clears the report: nothing is installed meanwhile",
			in: func() Input {
				in := applying(request(), names.StatusApplying, host.State{Revision: "r1", StartedAt: "10:00", Attempts: 1})
				in.StartedAt, in.NodeState = "10:40", "Draining"
				return in
			},
			want: want{action: Idle, state: host.State{Revision: "r1", StartedAt: "10:00", Attempts: 1}},
		},
		{
			name: "kubectl winpool retry removed the state of a node failed mid-install: back in service, nothing is touched",
			in: func() Input {
				in := applying(request(), names.StatusRebooting, host.State{Revision: "r1", StartedAt: "10:00", Attempts: 1, Reboots: 1})
				in.StartedAt = "10:00"
				in.Observed.Reboot.CBSRebootPending = true
				return in
			},
			want: want{action: Idle, state: host.State{Revision: "r1", StartedAt: "10:00", Attempts: 1, Reboots: 1}},
		},
		{
			name: "a node labelled by hand (no state, no start) is worked on",
			in: func() Input {
				return request()
			},
			want: want{action: InstallUpdate, status: names.StatusApplying, state: host.State{Revision: "r1", Attempts: 1}},
		},
		{
			name: "a retry of the revision (a new start) while the Node still says Applying starts over",
			in: func() Input {
				in := applying(request(), names.StatusApplying, host.State{Revision: "r1", StartedAt: "10:00", Attempts: 3, Reboots: 2})
				in.StartedAt, in.NodeState = "10:40", names.StateApplying
				return in
			},
			want: want{action: InstallUpdate, status: names.StatusApplying, state: host.State{Revision: "r1", StartedAt: "10:40", Attempts: 1}},
		},
		{
			name: "continuation of the same start carries on",
			in: func() Input {
				in := applying(request(), names.StatusApplying, host.State{Revision: "r1", StartedAt: "10:40", Attempts: 1})
				in.StartedAt, in.NodeState = "10:40", names.StateApplying
				return in
			},
			want: want{action: InstallUpdate, status: names.StatusApplying, state: host.State{Revision: "r1", StartedAt: "10:40", Attempts: 2}},
		},
		{
			name: "continuation whose host state is about another revision starts over",
			in: func() Input {
				return applying(request(), names.StatusApplying, host.State{Revision: "r0", Attempts: 3})
			},
			want: want{action: InstallUpdate, status: names.StatusApplying, state: host.State{Revision: "r1", Attempts: 1}},
		},
		{
			name: "reboot pending below the patch level: reboot, reported first",
			in: func() Input {
				in := applying(request(), names.StatusApplying, host.State{Revision: "r1", Attempts: 1})
				in.Observed.Reboot.CBSRebootPending = true
				return in
			},
			want: want{action: Reboot, status: names.StatusRebooting, state: host.State{Revision: "r1", Attempts: 1, Reboots: 1},
				message: []string{"rebooting to finish the update to 10.0.20348.2762 (reboot 1 of at most 6)"}},
		},
		{
			name: "reboot pending at the patch level: no reboot, the node is done",
			in: func() Input {
				in := patched()
				in.Observed.Reboot.CBSRebootPending = true
				return in
			},
			want: want{action: Report, status: names.StatusSucceeded, state: fresh},
		},
		{
			name: "file renames alone below the patch level: install, never a reboot for them",
			in: func() Input {
				in := request()
				in.Observed.Reboot.FileRenames = []string{`\??\C:\ProgramData\Microsoft\Windows Defender\x.tmp`, ""}
				return in
			},
			want: want{action: InstallUpdate, status: names.StatusApplying, state: host.State{Revision: "r1", Attempts: 1}},
		},
		{
			name: "file renames left after the update's reboot, below the patch level: install again, no reboot",
			in: func() Input {
				in := applying(request(), names.StatusRebooting, host.State{Revision: "r1", Attempts: 1, Reboots: 1})
				in.Observed.Reboot.FileRenames = []string{`\??\C:\x.tmp`, ""}
				return in
			},
			want: want{action: InstallUpdate, status: names.StatusApplying, state: host.State{Revision: "r1", Attempts: 2, Reboots: 1}},
		},
		{
			name: "Windows Update's RebootRequired below the patch level: reboot, naming it",
			in: func() Input {
				in := request()
				in.Observed.Reboot = host.RebootSignals{WURebootRequired: true, FileRenames: []string{"a", "b"}}
				return in
			},
			want: want{action: Reboot, status: names.StatusRebooting, state: host.State{Revision: "r1", Reboots: 1},
				message: []string{"(reboot 1 of at most 6): Windows Update RebootRequired"}},
		},
		{
			name: "the host cannot be read: wait, naming the read, counters kept",
			in: func() Input {
				in := applying(request(), names.StatusApplying, host.State{Revision: "r1", Attempts: 1})
				in.Observed = host.Observed{}
				in.ObserveError, in.ObserveFailingFor = "containerd --version: context deadline exceeded", 40*time.Second
				return in
			},
			want: want{action: Wait, status: names.StatusApplying, state: host.State{Revision: "r1", Attempts: 1},
				message: []string{"cannot read the host (containerd --version: context deadline exceeded)", "fails after 5m0s of this"}},
		},
		{
			name: "the host cannot be read for the whole grace: fail, naming the read",
			in: func() Input {
				in := applying(request(), names.StatusApplying, host.State{Revision: "r1", Attempts: 1})
				in.Observed = host.Observed{}
				in.ObserveError, in.ObserveFailingFor, in.ReadGrace = "reading UBR: Access is denied.", 2*time.Minute, time.Minute
				return in
			},
			want: want{action: Report, status: names.StatusFailed, state: host.State{Revision: "r1", Attempts: 1},
				message: []string{"cannot read the host for 1m0s: reading UBR: Access is denied.", AgentLog}},
		},
		{
			name: "a reboot that never clears the pending flag is capped",
			in: func() Input {
				in := applying(request(), names.StatusRebooting, host.State{Revision: "r1", Attempts: 1, Reboots: 6})
				in.Observed.Reboot.CBSRebootPending = true
				return in
			},
			want: want{action: Report, status: names.StatusFailed, state: host.State{Revision: "r1", Attempts: 1, Reboots: 6},
				message: []string{"still pending after 6 reboots", "10.0.20348.2700", "CBS.log"}},
		},
		{
			name: "attempt cap: fails with the build the node is stuck at",
			in: func() Input {
				in := applying(request(), names.StatusRebooting, host.State{Revision: "r1", Attempts: 3, Reboots: 3})
				in.Observed.Build = build("10.0.20348.2740")
				return in
			},
			want: want{action: Report, status: names.StatusFailed, state: host.State{Revision: "r1", Attempts: 3, Reboots: 3},
				message: []string{"still at build 10.0.20348.2740 after 3 update attempts (target 10.0.20348.2762)",
					`C:\Windows\Logs\CBS\CBS.log`, `C:\Windows\Logs\DISM\dism.log`}},
		},
		{
			name: "MaxAttempts below 1 means the default",
			in: func() Input {
				in := applying(request(), names.StatusApplying, host.State{Revision: "r1", Attempts: 2})
				in.MaxAttempts = 0
				return in
			},
			want: want{action: InstallUpdate, status: names.StatusApplying, state: host.State{Revision: "r1", Attempts: 3},
				message: []string{"attempt 3 of 3"}},
		},
		{
			name: "another Windows release: never an update, reimage",
			in: func() Input {
				in := request()
				in.Observed.Build = build("10.0.17763.6532")
				return in
			},
			want: want{action: Report, status: names.StatusFailed, state: fresh,
				message: []string{"node runs 10.0.17763.6532, revision wants 10.0.20348.2762", "reimage the node"}},
		},
		{
			name: "a build past the patch level is compliant",
			in: func() Input {
				in := request()
				in.Observed.Build = build("10.0.20348.2900")
				return in
			},
			want: want{action: Report, status: names.StatusSucceeded, state: fresh,
				message: []string{"build 10.0.20348.2900"}},
		},
		{
			name: "config missing names the ConfigMap",
			in: func() Input {
				in := request()
				in.Config = RevisionConfig{Status: ConfigNotFound}
				return in
			},
			want: want{action: Report, status: names.StatusFailed, state: fresh,
				message: []string{"winpool-agents/winpool-win22-r1", "does not exist"}},
		},
		{
			name: "config unreadable names the ConfigMap and the problem",
			in: func() Input {
				in := request()
				in.Config = RevisionConfig{Status: ConfigUnreadable, Problem: "has no key config.json"}
				return in
			},
			want: want{action: Report, status: names.StatusFailed, state: fresh,
				message: []string{"winpool-agents/winpool-win22-r1", "unreadable: has no key config.json"}},
		},
		{
			name: "config with a patch level that is not a build",
			in: func() Input {
				in := request()
				in.Config.Config.PatchLevel = "2024-10"
				return in
			},
			want: want{action: Report, status: names.StatusFailed, state: fresh,
				message: []string{"winpool-agents/winpool-win22-r1", "patchLevel", `"2024-10"`}},
		},
		{
			name: "no pool label: the ConfigMap cannot be named",
			in: func() Input {
				in := request()
				in.Pool = ""
				return in
			},
			want: want{action: Report, status: names.StatusFailed, state: fresh, message: []string{names.LabelPool}},
		},
		{
			name: "containerd behind: upgrade",
			in: func() Input {
				in := patched()
				in.Observed.ContainerdVersion = "1.7.20"
				return in
			},
			want: want{action: UpgradeContainerd, status: names.StatusApplying, version: "1.7.22",
				state:   host.State{Revision: "r1", RuntimeUpgrades: 1},
				message: []string{"upgrading containerd 1.7.20 → 1.7.22"}},
		},
		{
			name: "containerd missing: install",
			in: func() Input {
				in := patched()
				in.Observed.ContainerdVersion = ""
				return in
			},
			want: want{action: UpgradeContainerd, status: names.StatusApplying, version: "1.7.22",
				state:   host.State{Revision: "r1", RuntimeUpgrades: 1},
				message: []string{"installing containerd 1.7.22"}},
		},
		{
			name: "containerd with a vendor suffix satisfies the plain version",
			in: func() Input {
				in := patched()
				in.Config.Config.RuntimeVersion = strp("1.7.17")
				in.Observed.ContainerdVersion = "1.7.17+azure"
				return in
			},
			want: want{action: Report, status: names.StatusSucceeded, state: fresh, message: []string{"containerd 1.7.17+azure"}},
		},
		{
			name: "containerd rc.9 is not rc.10",
			in: func() Input {
				in := patched()
				in.Config.Config.RuntimeVersion = strp("2.0.0-rc.10")
				in.Observed.ContainerdVersion = "2.0.0-rc.9"
				return in
			},
			want: want{action: UpgradeContainerd, status: names.StatusApplying, version: "2.0.0-rc.10",
				state:   host.State{Revision: "r1", RuntimeUpgrades: 1},
				message: []string{"upgrading containerd 2.0.0-rc.9 → 2.0.0-rc.10"}},
		},
		{
			name: "containerd past the pinned version: installs the pinned one",
			in: func() Input {
				in := patched()
				in.Observed.ContainerdVersion = "1.7.23"
				return in
			},
			want: want{action: UpgradeContainerd, status: names.StatusApplying, version: "1.7.22",
				state:   host.State{Revision: "r1", RuntimeUpgrades: 1},
				message: []string{"downgrading containerd 1.7.23 → 1.7.22"}},
		},
		{
			name: "containerd unmanaged: any version is fine",
			in: func() Input {
				in := patched()
				in.Config.Config.RuntimeVersion = nil
				in.Observed.ContainerdVersion = "1.6.0"
				return in
			},
			want: want{action: Report, status: names.StatusSucceeded, state: fresh},
		},
		{
			name: "containerd upgrades are capped",
			in: func() Input {
				in := applying(patched(), names.StatusApplying, host.State{Revision: "r1", RuntimeUpgrades: 3})
				in.Observed.ContainerdVersion = "1.7.20"
				return in
			},
			want: want{action: Report, status: names.StatusFailed, state: host.State{Revision: "r1", RuntimeUpgrades: 3},
				message: []string{"containerd still reports 1.7.20 after 3 attempts to install 1.7.22"}},
		},
		{
			name: "CNI mismatch: never switched in place",
			in: func() Input {
				in := patched()
				in.Observed.CNIMode = "l2bridge"
				return in
			},
			want: want{action: Report, status: names.StatusFailed, state: fresh,
				message: []string{"HNS network is l2bridge, the pool asks for overlay", "spec.networking.cniMode", "reimage"}},
		},
		{
			name: "no HNS network yet: wait, within the grace",
			in: func() Input {
				in := patched()
				in.Observed.CNIMode = ""
				in.NetworkMissingFor = time.Minute
				return in
			},
			want: want{action: Wait, status: names.StatusApplying, state: fresh, message: []string{"waiting for the HNS network"}},
		},
		{
			name: "no HNS network past the grace: still a wait (AKS: a pod sandbox creates it), naming the pod-network DaemonSet",
			in: func() Input {
				in := patched()
				in.Pool = "aks1"
				in.Observed.CNIMode = ""
				in.NetworkMissingFor = 3 * DefaultNetworkGrace
				return in
			},
			want: want{action: Wait, status: names.StatusApplying, state: fresh,
				message: []string{"no HNS network for 5m0s (the pool asks for overlay)", "DaemonSet winpool-aks1-pod-network", "winpool-pod-network"}},
		},
		{
			name: "CSI Proxy missing: wait for winpool's DaemonSet to start it (the agent installs nothing)",
			in: func() Input {
				in := patched()
				in.Pool = "win22"
				in.Observed.CSIProxyVersion = ""
				in.CSIProxyWrongFor = time.Minute
				return in
			},
			want: want{action: Wait, status: names.StatusApplying, state: fresh,
				message: []string{"waiting for CSI Proxy v1.1.3 (running: none)"}},
		},
		{
			name: "CSI Proxy at another version (the old pod still stopping): wait",
			in: func() Input {
				in := patched()
				in.Observed.CSIProxyVersion = "1.1.2"
				return in
			},
			want: want{action: Wait, status: names.StatusApplying, state: fresh, message: []string{"running: 1.1.2"}},
		},
		{
			name: "CSI Proxy still not at the version after the grace: failed, naming the DaemonSet and the service",
			in: func() Input {
				in := patched()
				in.Pool = "win22"
				in.Observed.CSIProxyVersion = "1.1.2"
				in.CSIProxyWrongFor = DefaultNetworkGrace
				return in
			},
			want: want{action: Report, status: names.StatusFailed, state: fresh,
				message: []string{"CSI Proxy v1.1.3 is not running after 5m0s (running: 1.1.2)", "DaemonSet winpool-win22-csi-proxy-v1-1-3",
					"-l app.kubernetes.io/name=winpool-csi-proxy", "Get-Service csi-proxy, csiproxy"}},
		},
		{
			name: "CSI Proxy with a v prefix on one side only is the same version",
			in: func() Input {
				in := patched()
				in.Observed.CSIProxyVersion = "v1.1.3"
				in.CSIProxyWrongFor = DefaultNetworkGrace
				return in
			},
			want: want{action: Report, status: names.StatusSucceeded, state: fresh},
		},
		{
			name: "a host CSI Proxy service whose pipes answer satisfies the pool whatever its version says (AKS: csi-proxy under NSSM)",
			in: func() Input {
				in := patched()
				in.Observed.CSIProxyVersion = "unknown"
				in.Observed.CSIProxyHost = &host.CSIProxyHost{Service: host.Service{Name: "csi-proxy", Wrapper: host.WrapperNSSM, Running: true},
					Version: "unknown", PipesAnswer: true}
				return in
			},
			want: want{action: Report, status: names.StatusSucceeded, state: fresh},
		},
		{
			name: "a host CSI Proxy service whose pipes do not answer is waited for like any other",
			in: func() Input {
				in := patched()
				in.Observed.CSIProxyVersion = "unknown"
				in.Observed.CSIProxyHost = &host.CSIProxyHost{Service: host.Service{Name: "csiproxy", Running: true}, Version: "unknown"}
				return in
			},
			want: want{action: Wait, status: names.StatusApplying, state: fresh, message: []string{"running: unknown"}},
		},
		{
			name: "CSI Proxy not asked for: whatever runs is fine",
			in: func() Input {
				in := patched()
				in.Config.Config.CSIProxyVersion = nil
				in.Observed.CSIProxyVersion = ""
				return in
			},
			want: want{action: Report, status: names.StatusSucceeded, state: fresh},
		},
		{
			name: "everything satisfied: succeeded with the observed values",
			in:   patched,
			want: want{action: Report, status: names.StatusSucceeded, state: fresh,
				message: []string{"revision r1 applied: build 10.0.20348.2762, containerd 1.7.22, cni overlay, csi-proxy 1.1.3"}},
		},
		{
			name: "continuation after the reboot: succeeded",
			in: func() Input {
				return applying(patched(), names.StatusRebooting, host.State{Revision: "r1", Attempts: 1, Reboots: 1})
			},
			want: want{action: Report, status: names.StatusSucceeded, state: host.State{Revision: "r1", Attempts: 1, Reboots: 1}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { check(t, Next(c.in()), c.want) })
	}
}

// A node stuck below the patch level goes install → reboot → install … and
// stops at the cap with the build it is stuck at, never looping.
func TestNextStuckNodeStopsAtTheCap(t *testing.T) {
	in := request()
	in.Observed.Build = build("10.0.20348.2740")
	installs := 0
	for step := 0; step < 20; step++ {
		s := Next(in)
		switch s.Action {
		case InstallUpdate:
			installs++
			in = installed(in, s, ExitRebootRequired)
			s = Next(in)
			if s.Action != Reboot {
				t.Fatalf("after 3010: %v, want Reboot", s.Action)
			}
			in.Reported, in.State = s.Report, s.State
			// The reboot finishes without moving the build.
		case Report:
			if s.Report.Status != names.StatusFailed {
				t.Fatalf("stuck node reported %s: %s", s.Report.Status, s.Report.Message)
			}
			if installs != 3 {
				t.Errorf("installs = %d, want 3", installs)
			}
			if !strings.Contains(s.Report.Message, "still at build 10.0.20348.2740 after 3 update attempts") {
				t.Errorf("message %q does not name the stuck build", s.Report.Message)
			}
			return
		default:
			t.Fatalf("unexpected step %v", s.Action)
		}
	}
	t.Fatal("no final report after 20 steps")
}

// A revision label is no start: an agent run by the operator acts only on a
// node the operator started (its state and started-at); only a standalone
// agent acts on a label set on a node no operator ever touched.
func TestOnlyARecordedStartIsActedOn(t *testing.T) {
	cases := []struct {
		name       string
		state      string
		startedAt  string
		standalone bool
		acts       bool
	}{
		{name: "label set by hand on a member the operator never started", acts: false},
		{name: "label set by hand with a forged state but no start", state: names.StateApplying, acts: false},
		{name: "label set by hand on a Pending node with an old start", state: "Pending", startedAt: "10:00", acts: false},
		{name: "label set by hand on an Updated node", state: "Updated", acts: false},
		{name: "the operator's start, Applying", state: names.StateApplying, startedAt: "10:00", acts: true},
		{name: "the operator's start, Verifying", state: names.StateVerifying, startedAt: "10:00", acts: true},
		{name: "standalone: a label on a node no operator touched", standalone: true, acts: true},
		{name: "standalone: still not on a node the operator has in service", state: "Updated", standalone: true, acts: false},
		{name: "standalone: not while the operator drains it", state: "Draining", startedAt: "10:00", standalone: true, acts: false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := request()
			in.NodeState, in.StartedAt, in.Standalone = c.state, c.startedAt, c.standalone
			got := Next(in)
			if acts := got.Action != Idle; acts != c.acts {
				t.Errorf("action %v (report %+v), want acting=%v", got.Action, got.Report, c.acts)
			}
			if !c.acts && !reflect.DeepEqual(got.Report, NodeReport{}) {
				t.Errorf("a node the agent may not touch got a report: %+v", got.Report)
			}
		})
	}
}

// A node the operator failed at its nodeTimeout while this agent reported an
// install in flight stays cordoned until the agent's report is final: the
// agent waits for its own tasks, then reports how the install ended. It
// acts on nothing (no install, swap or reboot) on a Failed node.
func TestAFailedNodeMidInstallGetsItsFinalReportAndNothingElse(t *testing.T) {
	failedMidInstall := func(status names.ApplyStatus, task *host.UpdateTask) Input {
		in := applying(request(), status, host.State{Revision: "r1", StartedAt: "s1", Attempts: 1})
		in.NodeState, in.StartedAt = names.StateFailed, "s1"
		in.Observed.UpdateTask = task
		return in
	}
	running := &host.UpdateTask{Revision: "r1", StartedAt: "s1", Phase: host.UpdateRunning}
	done := &host.UpdateTask{Revision: "r1", StartedAt: "s1", Phase: host.UpdateDone, Result: host.UpdateResult{ExitCode: ExitRebootRequired}}
	st := host.State{Revision: "r1", StartedAt: "s1", Attempts: 1}

	check(t, Next(failedMidInstall(names.StatusApplying, running)), want{action: Wait, status: names.StatusApplying, state: st,
		message: []string{"failed this node at its nodeTimeout", "the servicing task still runs"}})
	in := failedMidInstall(names.StatusApplying, done)
	in.Observed.Reboot.CBSRebootPending = true
	check(t, Next(in), want{action: Report, status: names.StatusFailed, state: st,
		message: []string{"it has ended", "exit code 3010", "asks for a reboot", "kubectl winpool retry"}})
	check(t, Next(failedMidInstall(names.StatusRebooting, nil)), want{action: Report, status: names.StatusFailed, state: st,
		message: []string{"it has ended (build 10.0.20348.2700"}})

	for name, in := range map[string]Input{
		"a final report": failedMidInstall(names.StatusFailed, done),
		"an install of another revision": func() Input {
			in := failedMidInstall(names.StatusApplying, running)
			in.Reported.AppliedRevision = "r0"
			return in
		}(),
		"no start recorded": func() Input { in := failedMidInstall(names.StatusApplying, running); in.StartedAt = ""; return in }(),
	} {
		if got := Next(in); got.Action != Idle {
			t.Errorf("%s: %v (report %+v), want Idle", name, got.Action, got.Report)
		}
	}
}
