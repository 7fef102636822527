package hnsmodel

import (
	"testing"
	"time"
)

// A clock the test moves.
type clock struct{ t time.Time }

func (c *clock) now() time.Time        { return c.t }
func (c *clock) after(d time.Duration) { c.t = c.t.Add(d) }
func ms(n float64) time.Duration       { return time.Duration(n * float64(time.Millisecond)) }
func within10(got, want time.Duration) bool {
	return got >= want && float64(got) <= 1.1*float64(want)
}

// The latencies worked out by hand for two WS2019 nodes and one WS2022 node
// (600 ms a load balancer, 24 ms a remote endpoint; 27 ms and 1.2 ms), one of
// the 2019 nodes still in its full sync after a boot, until t=5s:
//
//	t=0    Service a: 1 LB        w19-a syncs a 0→0.6          w19-boot: a waits   w22 syncs 0→0.027
//	t=0.1  Service b: 2 LB + 1 ep w19-a: b waits for 0.6       b waits             w22 syncs 0.1→0.1552
//	t=0.2  Service a: 1 LB again  w19-a: a waits with b        a joins its wait    w22 syncs 0.2→0.227
//	t=10   Service c: 1 LB        (see below)
//
// w19-a's second sync begins at 0.6 with b and a once: 1.224 + 0.6 = 1.824 s,
// ends 2.424 (b: 2.324, a: 2.224). w19-boot's first sync begins at 5 with a
// (once, for its two changes) and b and ends at 6.824, but what a node heard
// during its boot's full sync is not counted: it served no traffic. At t=10
// every node is idle: c takes 0.6, 0.6 and 0.027.
func TestProgrammingLatencyMatchesAHandComputation(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	p := NewProgramming(1, c.now)
	p.Up("w19-a", RatesLTSC2019, time.Time{})
	p.Up("w19-boot", RatesLTSC2019, c.t.Add(5*time.Second))
	p.Up("w22", RatesLTSC2022, time.Time{})
	p.Up("down", RatesLTSC2019, time.Time{})
	p.Down("down")

	p.Program("a", Work{LoadBalancers: 1})
	c.after(100 * time.Millisecond)
	p.Program("b", Work{LoadBalancers: 2, RemoteEndpoints: 1})
	if got := p.Backlog("w19-a"); got != ms(1724) {
		t.Errorf("w19-a's backlog at t=0.1: %v, want 0.5s of a and 1.224s of b", got)
	}
	c.after(100 * time.Millisecond)
	p.Program("a", Work{LoadBalancers: 1})
	if got := p.Backlog("w19-boot"); got != ms(6624) {
		t.Errorf("w19-boot's backlog at t=0.2: %v, want 4.8s of its boot's sync, then a once and b", got)
	}
	c.after(9800 * time.Millisecond)
	p.Program("c", Work{LoadBalancers: 1})

	want := map[string][]time.Duration{
		"w19-a":    {ms(600), ms(2324), ms(2224), ms(600)},
		"w19-boot": {ms(600)},
		"w22":      {ms(27), ms(55.2), ms(27), ms(27)},
	}
	for node, lat := range want {
		h := p.Node(node)
		var sum, top time.Duration
		for _, l := range lat {
			sum += l
			top = max(top, l)
		}
		if h.Count != int64(len(lat)) || h.Sum != sum || h.Max != top {
			t.Errorf("%s: %d changes, sum %v, max %v; want %d, %v, %v", node, h.Count, h.Sum, h.Max, len(lat), sum, top)
		}
	}
	if h := p.Node("down"); h.Count != 0 {
		t.Errorf("a rebooting node programs nothing, yet it recorded %d changes", h.Count)
	}
	f := p.Fleet()
	if f.Count != 9 || f.Max != ms(2324) {
		t.Errorf("fleet: %d changes, max %v; want 9, 2.324s", f.Count, f.Max)
	}
	// p50 of nine is the fifth smallest: 0.6s (+10%).
	if got := f.Quantile(0.5); !within10(got, ms(600)) {
		t.Errorf("fleet p50 %v, want 600ms (+10%%)", got)
	}
}

// A change still waiting for a sync when the fleet stops is counted in the
// final figures, with the latency its sync will have.
func TestFinalCountsTheChangesStillWaiting(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	p := NewProgramming(1, c.now)
	p.Up("n", RatesLTSC2019, time.Time{})
	p.Program("a", Work{LoadBalancers: 1})
	p.Program("b", Work{LoadBalancers: 1})
	if got := p.Fleet().Count; got != 1 {
		t.Fatalf("b waits for a's sync: %d counted, want 1", got)
	}
	if f := p.Final(); f.Count != 2 || f.Max != ms(1200) {
		t.Errorf("final: %d changes, max %v; want 2, 1.2s", f.Count, f.Max)
	}
}

func TestACostScaleMultipliesEveryCost(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	p := NewProgramming(0.5, c.now)
	p.Up("n", RatesLTSC2019, time.Time{})
	p.Program("a", Work{LoadBalancers: 10})
	if got := p.Node("n").Max; got != 3*time.Second {
		t.Errorf("10 load balancers at half the 2019 cost: %v, want 3s", got)
	}
}

func TestHistogramQuantilesAreBucketBoundsNeverAboveTheMax(t *testing.T) {
	var h Histogram
	for i := 1; i <= 100; i++ {
		h.Observe(time.Duration(i) * time.Second)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Second}, {0.9, 90 * time.Second}, {0.99, 99 * time.Second}} {
		if got := h.Quantile(c.q); !within10(got, c.want) {
			t.Errorf("q%.2f = %v, want %v (+10%%)", c.q, got, c.want)
		}
	}
	if got := h.Quantile(1); got != 100*time.Second {
		t.Errorf("q1 = %v, want the max", got)
	}
}

// What a change costs is what kube-proxy would redo: an endpoint added to a
// Service with one port replaces its load balancer and creates one remote
// endpoint; the same slice written again costs nothing; deleting the Service
// removes its load balancer and its remote endpoints.
func TestAChangeCostsWhatWinkernelRedoes(t *testing.T) {
	m := New(tracked)
	var got []Work
	m.OnWork(func(svc string, w Work) {
		if svc != "ns/web" {
			t.Errorf("work of %q, want ns/web", svc)
		}
		got = append(got, w)
	})
	m.SetService(svc("web"))
	m.SetSlice(endpointSlice("web", "web-1", ready("10.244.1.1")))
	m.SetSlice(endpointSlice("web", "web-1", ready("10.244.1.1", "10.244.1.2")))
	m.SetSlice(endpointSlice("web", "web-1", ready("10.244.1.1", "10.244.1.2")))
	m.DeleteService("ns", "web")
	want := []Work{
		{LoadBalancers: 1, RemoteEndpoints: 1}, // the first endpoint: the load balancer appears
		{LoadBalancers: 1, RemoteEndpoints: 1},
		{LoadBalancers: 1, RemoteEndpoints: 2},
	}
	if len(got) != len(want) {
		t.Fatalf("work heard: %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// The first two syncs after a node's catch-up from its boot are told apart
// (FinalAfterCatchUp): a change heard just after it waits for the batch of
// what the node heard while catching up. Worked by hand on WS2019 rates:
// the boot's full sync ends at t=5; Services a and b (1 LB each) change at
// t=1 (not counted: the node served nothing then); c changes at t=5.5 and
// waits for the batch a+b (5 → 6.2), then its own sync (6.2 → 6.8): 1.3 s.
// d at t=20 is a later sync, in the fleet's latencies only.
func TestTheSyncsBehindACatchUpAreToldApart(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	p := NewProgramming(1, c.now)
	p.Up("n", RatesLTSC2019, c.t.Add(5*time.Second))
	c.after(time.Second)
	p.Program("a", Work{LoadBalancers: 1})
	p.Program("b", Work{LoadBalancers: 1})
	c.after(4500 * time.Millisecond)
	p.Program("c", Work{LoadBalancers: 1})
	c.after(14500 * time.Millisecond)
	p.Program("d", Work{LoadBalancers: 1})
	after, all := p.FinalAfterCatchUp(), p.Final()
	if s := after.Summary(); s.Changes != 1 || !within10(time.Duration(s.MaxMs*float64(time.Millisecond)), ms(1300)) {
		t.Errorf("behind the catch-up: %+v, want c alone at 1.3s", s)
	}
	if s := all.Summary(); s.Changes != 2 {
		t.Errorf("fleet: %+v, want c and d", s)
	}
}
