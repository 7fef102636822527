package decide

import (
	"strings"
	"testing"

	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"
)

// A pool asking for DSR blocks, before the cordon, a host whose load
// balancers have none with Direct Server Return (kube-proxy runs without
// --enable-dsr), and fails one started anyway; a host with DSR load
// balancers, none at all, unread HNS or a pool not asking pass.
func TestDSRIsVerifiedFromTheHostsLoadBalancers(t *testing.T) {
	counts := func(lbs, dsr int) *host.HNSCounts { return &host.HNSCounts{LoadBalancers: lbs, DSRLoadBalancers: dsr} }
	for _, tc := range []struct {
		name    string
		wanted  bool
		hns     *host.HNSCounts
		blocked bool
	}{
		{"without DSR", true, counts(40, 0), true},
		{"with DSR", true, counts(40, 38), false},
		{"no load balancers yet", true, counts(0, 0), false},
		{"HNS not read", true, nil, false},
		{"not asked", false, counts(40, 0), false},
	} {
		ready := patched()
		in := PreflightInput{Config: ready.Config.Config, Observed: ready.Observed, HNS: tc.hns}
		in.Config.EnableDSR = tc.wanted
		r := Preflight(in)
		said := strings.Join(r.Blocked, "; ")
		if blocked := strings.Contains(said, "Direct Server Return"); blocked != tc.blocked {
			t.Errorf("%s: preflight blocked %v (%q), want %v", tc.name, blocked, said, tc.blocked)
		}
		if tc.blocked && !strings.Contains(said, "none of the 40 HNS load balancers") {
			t.Errorf("%s: %q names no numbers", tc.name, said)
		}

		next := request() // one patch behind: failed before anything is installed
		next.Config.Config.EnableDSR, next.HNS = tc.wanted, tc.hns
		step := Next(next)
		failed := step.Report.Status == names.StatusFailed && strings.Contains(step.Report.Message, "Direct Server Return")
		if failed != tc.blocked || (!failed && step.Action != InstallUpdate) {
			t.Errorf("%s: on a started node: %v %+v, want failed %v", tc.name, step.Action, step.Report, tc.blocked)
		}
	}
}
