package fleet

import (
	"io"
	"strings"
	"testing"

	"winpool.dev/agent/internal/host"
)

func TestHostFaults(t *testing.T) {
	for _, tc := range []struct {
		flag      string
		on, notOn []string // node names
		canonical string
	}{
		{"", nil, []string{"win-0"}, ""},
		{"hns-churn", []string{"win-0", "win-9"}, nil, "hns-churn"},
		{"hns-churn@win-3+win-4", []string{"win-3", "win-4"}, []string{"win-0"}, "hns-churn@win-3+win-4"},
		{"hns-churn@win-4, hns-churn@win-3", []string{"win-3", "win-4"}, []string{"win-0"}, "hns-churn@win-3+win-4"},
		{"hns-churn@win-4,hns-churn", []string{"win-0", "win-4"}, nil, "hns-churn"},
		{"hns-churn,hns-churn@win-4", []string{"win-0", "win-4"}, nil, "hns-churn"},
	} {
		s, err := ParseSettings([]string{"--host-faults", tc.flag}, io.Discard)
		if err != nil {
			t.Errorf("%q: %v", tc.flag, err)
			continue
		}
		for _, n := range tc.on {
			if !s.Faults.On(FaultHNSChurn, n) {
				t.Errorf("%q: hns-churn not on %s", tc.flag, n)
			}
		}
		for _, n := range tc.notOn {
			if s.Faults.On(FaultHNSChurn, n) {
				t.Errorf("%q: hns-churn on %s", tc.flag, n)
			}
		}
		if got := s.Faults.String(); got != tc.canonical {
			t.Errorf("%q reads back as %q, want %q", tc.flag, got, tc.canonical)
		}
	}
}

func TestBadHostFaults(t *testing.T) {
	for _, tc := range []struct{ flag, want string }{
		{"hns-chrun", `--host-faults: unknown fault "hns-chrun" (known: hns-churn, read-errors, pending-renames, overshoot, undershoot, reboot-unknown, agent-restart, ssu-first)`},
		{"hns-churn@Win_3", `--host-faults: hns-churn@Win_3: "Win_3" is not a node name`},
		{"hns-churn@", `--host-faults: hns-churn@: "" is not a node name`},
	} {
		_, err := ParseSettings([]string{"--host-faults", tc.flag}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.flag, err, tc.want)
		}
	}
}

// Under hns-churn every read differs from the one before and none is below
// what is programmed.
func TestChurningCountsMoveOnEveryRead(t *testing.T) {
	base := host.HNSCounts{LoadBalancers: 10, RemoteEndpoints: 20}
	read := churning(func() host.HNSCounts { return base })
	prev := read()
	for range 5 {
		c := read()
		if c == prev {
			t.Fatalf("two reads in a row gave %+v", c)
		}
		if c.LoadBalancers < base.LoadBalancers || c.RemoteEndpoints < base.RemoteEndpoints {
			t.Fatalf("%+v is below the programmed %+v", c, base)
		}
		prev = c
	}
}
