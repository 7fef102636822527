package decide

import (
	"strings"
	"testing"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/host"
)

func TestPreflight(t *testing.T) {
	v := func(s string) *string { return &s }
	cfg := config.Revision{Revision: "r2", PatchLevel: "10.0.20348.2762", CNIMode: "overlay", RuntimeVersion: v("1.7.22")}
	behind := host.Observed{Build: host.Build{Major: 10, Build: 20348, UBR: 2700}, ContainerdVersion: "1.7.22", CNIMode: "overlay"}
	room := &host.PreflightFindings{Sources: []host.SourceCheck{{Name: "Windows Update"}}, SystemDrive: "C:", FreeBytes: 40 << 30}
	with := func(f func(*host.Observed)) host.Observed { o := behind; f(&o); return o }
	cases := []struct {
		name     string
		cfg      config.Revision
		obs      host.Observed
		findings *host.PreflightFindings
		blocked  []string // each a part of one reason, in order; none: Ready
		note     string
		pending  bool
	}{
		{name: "behind, source and room", cfg: cfg, obs: behind, findings: room},
		{name: "source unreachable", cfg: cfg, obs: behind,
			findings: &host.PreflightFindings{Sources: []host.SourceCheck{{Name: "https://dl.example/kb.msu", Err: "HTTP 404 Not Found"}}, FreeBytes: 40 << 30},
			blocked:  []string{"update source https://dl.example/kb.msu cannot be reached: HTTP 404 Not Found"}},
		{name: "no room on C:", cfg: cfg, obs: behind,
			findings: &host.PreflightFindings{Sources: room.Sources, SystemDrive: "C:", FreeBytes: 3 << 30},
			blocked:  []string{"C: has less than 10.0 GiB free, which an update needs"}},
		{name: "free space unreadable is not a block", cfg: cfg, obs: behind,
			findings: &host.PreflightFindings{Sources: room.Sources, FreeBytes: -1}},
		{name: "at the patch level: the sources do not matter", cfg: cfg,
			obs:      with(func(o *host.Observed) { o.Build.UBR = 2762 }),
			findings: &host.PreflightFindings{Sources: []host.SourceCheck{{Name: "WSUS", Err: "down"}}, FreeBytes: 1}},
		{name: "another release", cfg: cfg, obs: with(func(o *host.Observed) { o.Build.Build = 17763 }),
			blocked: []string{"node runs 10.0.17763.2700, the pool asks 10.0.20348.2762"}},
		{name: "a vendor containerd the pool would replace", cfg: cfg, obs: with(func(o *host.Observed) { o.ContainerdVersion = "1.7.20+azure" }), findings: room,
			blocked: []string{"containerd 1.7.20+azure would not be replaced with 1.7.22"}},
		{name: "a vendor containerd at the version asked", cfg: cfg, obs: with(func(o *host.Observed) { o.ContainerdVersion = "1.7.22+azure" }), findings: room},
		{name: "InPlace replaces a vendor containerd", cfg: func() config.Revision { c := cfg; c.RuntimeUpgrade = RuntimeInPlace; return c }(),
			obs: with(func(o *host.Observed) { o.ContainerdVersion = "1.7.20+azure" }), findings: room},
		{name: "another CNI", cfg: cfg, obs: with(func(o *host.Observed) { o.CNIMode = "l2bridge" }), findings: room,
			blocked: []string{"HNS network is l2bridge, the pool asks for overlay"}},
		{name: "a pending reboot is a note", cfg: cfg, obs: with(func(o *host.Observed) { o.Reboot.CBSRebootPending = true }), findings: room,
			note: "a reboot is pending"},
		{name: "pending file renames alone are nothing", cfg: cfg, obs: with(func(o *host.Observed) { o.Reboot.FileRenames = []string{`\??\C:\x`, ""} }), findings: room},
		{name: "two blocks, both said", cfg: cfg, obs: with(func(o *host.Observed) { o.CNIMode = "l2bridge" }),
			findings: &host.PreflightFindings{Sources: []host.SourceCheck{{Name: "Windows Update", Err: "timeout"}}, FreeBytes: 40 << 30},
			blocked:  []string{"update source Windows Update cannot be reached: timeout", "HNS network is l2bridge"}},
		{name: "the offer search still runs: no verdict", cfg: cfg, obs: behind, pending: true,
			findings: offered(room, host.UpdateOffer{Searching: true})},
		{name: "a block needs no search", cfg: cfg, obs: with(func(o *host.Observed) { o.CNIMode = "l2bridge" }),
			findings: offered(room, host.UpdateOffer{Searching: true}), blocked: []string{"HNS network is l2bridge"}},
		{name: "what the install takes is offered: a note naming it", cfg: cfg, obs: behind,
			findings: offered(room, host.UpdateOffer{Takes: []string{"KB5050002: 2026-12 Cumulative Update"}}), note: "KB5050002: 2026-12 Cumulative Update"},
		{name: "nothing the install takes is offered", cfg: cfg, obs: behind,
			findings: offered(room, host.UpdateOffer{Refusal: "Windows Update offers none of KB5050009, which the pool pins"}),
			blocked:  []string{"nothing the install would take (the search before the drain): Windows Update offers none of KB5050009"}},
		{name: "the search failed", cfg: cfg, obs: behind,
			findings: offered(room, host.UpdateOffer{Err: "searching: IUpdateSearcher.Search: 0x8024401C"}),
			blocked:  []string{"the Windows Update search failed: searching: IUpdateSearcher.Search: 0x8024401C"}},
		{name: "at the patch level, nothing is searched for", cfg: cfg, obs: with(func(o *host.Observed) { o.Build.UBR = 2762 }),
			findings: offered(room, host.UpdateOffer{Searching: true})},
		{name: "Automatic Updates installs on a schedule", cfg: cfg, obs: behind, findings: au(room, false, 4),
			blocked: []string{"Windows Update > Configure Automatic Updates to Disabled, or to 2"}},
		{name: "Automatic Updates: the local administrator chooses", cfg: cfg, obs: behind, findings: au(room, false, 5), blocked: []string{"AUOptions=5"}},
		{name: "Automatic Updates notifies", cfg: cfg, obs: behind, findings: au(room, false, 2)},
		{name: "Automatic Updates downloads and notifies", cfg: cfg, obs: behind, findings: au(room, false, 3)},
		{name: "Automatic Updates off, whatever AUOptions says", cfg: cfg, obs: behind, findings: au(room, true, 4)},
		{name: "the Windows Update service disabled", cfg: cfg, obs: behind,
			findings: func() *host.PreflightFindings { g := *room; g.WUServiceDisabled = true; return &g }(),
			blocked:  []string{"wuauserv) is disabled"}},
		{name: "unreadable patch level", cfg: func() config.Revision { c := cfg; c.PatchLevel = "2762"; return c }(), obs: behind,
			blocked: []string{"the revision's patchLevel"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Preflight(PreflightInput{Config: c.cfg, Observed: c.obs, Findings: c.findings})
			if len(r.Blocked) != len(c.blocked) {
				t.Fatalf("blocked %q, want %d reasons %q", r.Blocked, len(c.blocked), c.blocked)
			}
			for i, want := range c.blocked {
				if !strings.Contains(r.Blocked[i], want) {
					t.Errorf("reason %d %q does not say %q", i, r.Blocked[i], want)
				}
			}
			if r.Pending != c.pending {
				t.Errorf("pending %v, want %v", r.Pending, c.pending)
			}
			if c.note != "" && !strings.Contains(strings.Join(r.Notes, "\n"), c.note) {
				t.Errorf("notes %q do not say %q", r.Notes, c.note)
			}
			want := "Ready"
			if len(c.blocked) > 0 {
				want = "Blocked: " + strings.Join(r.Blocked, "; ")
			}
			if r.String() != want {
				t.Errorf("verdict %q, want %q", r.String(), want)
			}
		})
	}
}

// au is f with the Automatic Updates policy.
func au(f *host.PreflightFindings, off bool, options uint64) *host.PreflightFindings {
	g := *f
	g.AutomaticUpdates = host.AutomaticUpdates{NoAutoUpdate: off, AUOptions: options}
	return &g
}

// offered is f with the offer search's answer.
func offered(f *host.PreflightFindings, o host.UpdateOffer) *host.PreflightFindings {
	g := *f
	g.Offer = &o
	return &g
}

func TestPreflightUpdateIsNeededOnlyBelowThePatchLevel(t *testing.T) {
	cfg := config.Revision{Revision: "r2", PatchLevel: "10.0.20348.2762", Updates: &config.Updates{Source: config.SourceWindowsUpdate, KBs: []string{"KB5044281"}}}
	for ubr, want := range map[int]bool{2700: true, 2762: false, 2800: false} {
		req, needed, err := PreflightUpdate("r2", cfg, host.Observed{Build: host.Build{Major: 10, Build: 20348, UBR: ubr}})
		if err != nil || needed != want || req.Target.UBR != 2762 || len(req.KBs) != 1 {
			t.Errorf("UBR %d: needed %t err %v req %+v, want needed %t and the KB pin", ubr, needed, err, req, want)
		}
	}
}
