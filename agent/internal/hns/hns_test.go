package hns

import (
	"errors"
	"strings"
	"testing"
	"time"

	"winpool.dev/agent/internal/host"
)

func TestSelect(t *testing.T) {
	nat := Network{ID: "n0", Name: "nat", Type: "NAT"}
	ext := Network{ID: "n1", Name: "ext", Type: "L2Bridge"}
	external := Network{ID: "n2", Name: "External", Type: "L2Bridge"}
	for _, tc := range []struct {
		name       string
		nets       []Network
		configured string
		wantName   string
		wantMode   string
		wantErr    string
	}{
		{"AKS azure CNI beside its ext helper", []Network{nat, ext, {ID: "a", Name: "azure", Type: "L2Bridge"}}, "", "azure", "l2bridge", ""},
		{"flannel vxlan", []Network{external, {ID: "v", Name: "vxlan0", Type: "Overlay"}}, "", "vxlan0", "overlay", ""},
		{"flannel host-gw", []Network{external, {ID: "c", Name: "cbr0", Type: "L2Bridge"}}, "", "cbr0", "l2bridge", ""},
		{"Calico vxlan beside External", []Network{external, {ID: "k", Name: "Calico", Type: "Overlay"}}, "", "Calico", "overlay", ""},
		{"an unknown name, the only pod network", []Network{nat, ext, {ID: "x", Name: "mynet", Type: "Overlay"}}, "", "mynet", "overlay", ""},
		{"KUBE_NETWORK names it", []Network{{ID: "a", Name: "azure", Type: "L2Bridge"}, {ID: "o", Name: "other", Type: "Overlay"}}, "other", "other", "overlay", ""},
		{"KUBE_NETWORK names one that is not there yet", []Network{{ID: "a", Name: "azure", Type: "L2Bridge"}}, "vxlan0", "", "", ""},
		{"only helpers: no network yet", []Network{nat, ext, external}, "", "", "", ""},
		{"a known name of a non-pod type is not taken", []Network{{ID: "z", Name: "azure", Type: "NAT"}}, "", "", "", ""},
		{"two unknown pod networks: ambiguous, says what to set", []Network{{ID: "1", Name: "a", Type: "Overlay"}, {ID: "2", Name: "b", Type: "L2Bridge"}}, "", "", "",
			`"a" (Overlay), "b" (L2Bridge); set KUBE_NETWORK`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, ok, err := Select(tc.nets, tc.configured)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ok != (tc.wantName != "") || n.Name != tc.wantName || (ok && Mode(n) != tc.wantMode) {
				t.Errorf("Select = %+v %v (mode %q), want %q mode %q", n, ok, Mode(n), tc.wantName, tc.wantMode)
			}
		})
	}
}

func TestCount(t *testing.T) {
	f := &Fake{
		Nets:   []Network{{ID: "e", Name: "ext", Type: "L2Bridge"}, {ID: "v", Name: "vxlan0", Type: "Overlay"}},
		LBs:    42,
		DSRLBs: 40,
		EndpointsByID: map[string][]Endpoint{
			"v": {{Remote: true}, {Remote: false}, {Remote: true}, {Remote: true}},
			"e": {{Remote: true}, {Remote: true}},
		},
	}
	// Read counts as kube-proxy winkernel programs them: every HNS load
	// balancer on the host, and the remote endpoints of kube-proxy's network
	// (none while there is no such network).
	count := func() (host.HNSCounts, error) {
		s := Read(f, "")
		return s.Counts, s.CountErr
	}
	got, err := count()
	if want := (host.HNSCounts{LoadBalancers: 42, RemoteEndpoints: 3, DSRLoadBalancers: 40}); err != nil || got != want {
		t.Errorf("counts = %+v, %v; want %+v (remote endpoints of vxlan0 only, local ones not counted; DSR ones among the load balancers)", got, err, want)
	}

	f.Nets = f.Nets[:1]
	if got, err := count(); err != nil || got != (host.HNSCounts{LoadBalancers: 42, DSRLoadBalancers: 40}) {
		t.Errorf("no kube-proxy network: counts = %+v, %v; want the load balancers and no endpoints", got, err)
	}

	f.Err = errors.New("HNS is not running")
	if _, err := count(); err == nil || !strings.Contains(err.Error(), "HNS is not running") {
		t.Errorf("HNS down: err = %v, want it passed on", err)
	}
}

// counting is an API that counts the calls of each list.
type counting struct {
	API
	networks, lbs, endpoints int
}

func (c *counting) Networks() ([]Network, error) { c.networks++; return c.API.Networks() }
func (c *counting) LoadBalancers() (LoadBalancers, error) {
	c.lbs++
	return c.API.LoadBalancers()
}
func (c *counting) Endpoints(id string) ([]Endpoint, error) {
	c.endpoints++
	return c.API.Endpoints(id)
}

func (c *counting) calls() [3]int { return [3]int{c.networks, c.lbs, c.endpoints} }

// failing fails one of the lists.
type failing struct {
	*Fake
	networks, lbs, endpoints error
}

func (f failing) Networks() ([]Network, error) {
	if f.networks != nil {
		return nil, f.networks
	}
	return f.Fake.Networks()
}
func (f failing) LoadBalancers() (LoadBalancers, error) {
	if f.lbs != nil {
		return LoadBalancers{}, f.lbs
	}
	return f.Fake.LoadBalancers()
}
func (f failing) Endpoints(id string) ([]Endpoint, error) {
	if f.endpoints != nil {
		return nil, f.endpoints
	}
	return f.Fake.Endpoints(id)
}

// One Read lists the networks, the load balancers and kube-proxy's
// network's endpoints once each (fewer when there is nothing to count), and
// its snapshot carries both what Observe reports (CNI) and the counts.
func TestReadListsEachOnce(t *testing.T) {
	vxlan := Network{ID: "v", Name: "vxlan0", Type: "Overlay"}
	ext := Network{ID: "e", Name: "ext", Type: "L2Bridge"}
	hnsFake := func(nets ...Network) *Fake {
		return &Fake{Nets: nets, LBs: 42, EndpointsByID: map[string][]Endpoint{
			"v": {{Remote: true}, {Remote: false}, {Remote: true}, {Remote: true}},
			"e": {{Remote: true}, {Remote: true}},
		}}
	}
	down := errors.New("HNS is not running")
	for _, tc := range []struct {
		name       string
		api        API
		configured string
		mode       string
		problem    string
		readErr    string
		counts     host.HNSCounts
		countErr   string
		calls      [3]int // networks, load balancers, endpoints
	}{
		{"kube-proxy's network found: everything listed once", hnsFake(ext, vxlan), "", "overlay", "", "",
			host.HNSCounts{LoadBalancers: 42, RemoteEndpoints: 3}, "", [3]int{1, 1, 1}},
		{"KUBE_NETWORK names it", hnsFake(ext, vxlan), "ext", "l2bridge", "", "",
			host.HNSCounts{LoadBalancers: 42, RemoteEndpoints: 2}, "", [3]int{1, 1, 1}},
		{"no network yet: no endpoints to list", hnsFake(ext), "", "", "", "",
			host.HNSCounts{LoadBalancers: 42}, "", [3]int{1, 1, 0}},
		{"ambiguous: nothing counted", hnsFake(Network{ID: "1", Name: "a", Type: "Overlay"}, Network{ID: "2", Name: "b", Type: "L2Bridge"}), "",
			"", "set KUBE_NETWORK", "", host.HNSCounts{}, "set KUBE_NETWORK", [3]int{1, 0, 0}},
		{"networks cannot be listed", failing{Fake: hnsFake(vxlan), networks: down}, "", "", "", "listing HNS networks: HNS is not running",
			host.HNSCounts{}, "listing HNS networks: HNS is not running", [3]int{1, 0, 0}},
		{"load balancers cannot be listed: the network is still known", failing{Fake: hnsFake(vxlan), lbs: down}, "", "overlay", "", "",
			host.HNSCounts{}, "listing HNS load balancers: HNS is not running", [3]int{1, 1, 0}},
		{"endpoints cannot be listed", failing{Fake: hnsFake(vxlan), endpoints: down}, "", "overlay", "", "",
			host.HNSCounts{}, `listing the endpoints of HNS network "vxlan0": HNS is not running`, [3]int{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := &counting{API: tc.api}
			s := Read(api, tc.configured)
			mode, problem, readErr := s.CNI()
			if mode != tc.mode || !contains(problem, tc.problem) || readErr != tc.readErr {
				t.Errorf("CNI = %q, %q, %q; want %q, %q, %q", mode, problem, readErr, tc.mode, tc.problem, tc.readErr)
			}
			if s.Counts != tc.counts || !containsErr(s.CountErr, tc.countErr) {
				t.Errorf("counts = %+v, %v; want %+v, %q", s.Counts, s.CountErr, tc.counts, tc.countErr)
			}
			if api.calls() != tc.calls {
				t.Errorf("lists called (networks, load balancers, endpoints) %v times, want %v", api.calls(), tc.calls)
			}
		})
	}
}

// The agent's tick observes (Network), counts (Counts) and may observe
// again while it decides: one listing of each per tick. The next tick, past
// ReuseFor, lists again; so does a count with no observation before it.
func TestReaderListsEachOncePerTick(t *testing.T) {
	f := &Fake{
		Nets:          []Network{{ID: "e", Name: "ext", Type: "L2Bridge"}, {ID: "v", Name: "vxlan0", Type: "Overlay"}},
		LBs:           7,
		EndpointsByID: map[string][]Endpoint{"v": {{Remote: true}, {Remote: true}}},
	}
	api := &counting{API: f}
	now := time.Unix(1_700_000_000, 0)
	r := NewReader(api, "", ReuseFor)
	r.now = func() time.Time { return now }

	tick := func() {
		if mode, _, _ := r.Network().CNI(); mode != "overlay" {
			t.Fatalf("mode = %q, want overlay", mode)
		}
		now = now.Add(50 * time.Millisecond)
		if c, err := r.Counts(); err != nil || c != (host.HNSCounts{LoadBalancers: 7, RemoteEndpoints: 2}) {
			t.Fatalf("Counts = %+v, %v", c, err)
		}
		now = now.Add(300 * time.Millisecond)
		r.Network() // the decision's own observation
	}
	tick()
	if got, want := api.calls(), [3]int{1, 1, 1}; got != want {
		t.Errorf("one tick listed (networks, load balancers, endpoints) %v times, want %v", got, want)
	}
	now = now.Add(15 * time.Second)
	tick()
	if got, want := api.calls(), [3]int{2, 2, 2}; got != want {
		t.Errorf("two ticks listed %v times, want %v", got, want)
	}
	now = now.Add(15 * time.Second)
	f.LBs = 8
	if c, err := r.Counts(); err != nil || c.LoadBalancers != 8 {
		t.Errorf("a count with no observation before it = %+v, %v; want a new reading", c, err)
	}
	if got, want := api.calls(), [3]int{3, 3, 3}; got != want {
		t.Errorf("after a lone count: %v, want %v", got, want)
	}
	// A failed listing is not retried within the tick either.
	now = now.Add(15 * time.Second)
	f.Err = errors.New("HNS is not running")
	if _, _, readErr := r.Network().CNI(); readErr == "" {
		t.Error("HNS down: Network reports no read error")
	}
	if _, err := r.Counts(); err == nil || !strings.Contains(err.Error(), "HNS is not running") {
		t.Errorf("HNS down: Counts err = %v", err)
	}
	if got, want := api.calls(), [3]int{4, 3, 3}; got != want {
		t.Errorf("HNS down: %v, want %v", got, want)
	}
}

func contains(s, sub string) bool {
	return sub == "" && s == "" || sub != "" && strings.Contains(s, sub)
}

func containsErr(err error, sub string) bool {
	if err == nil {
		return sub == ""
	}
	return sub != "" && strings.Contains(err.Error(), sub)
}
