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
// (600 ms per load balancer, 24 ms per remote endpoint; 27 ms and 1.2 ms),
// one of the 2019 nodes still in its 5 s full sync after a boot:
//
//	t=0     change A: 1 LB            w19-a: 0.6     w19-boot: 5.6   w22: 0.027
//	t=0.1   change B: 2 LB + 1 ep     w19-a: 1.1+1.224-0.1 = ... (see below)
//	t=10    change C: 1 LB            every node idle again: 0.6, 0.6, 0.027
//
// B on w19-a: A ends at 0.6, B takes 1.224, ends 1.824: latency 1.724.
// B on w19-boot: busy until 5.6, ends 6.824: latency 6.724.
// B on w22: A ended at 0.027, B starts at 0.1, takes 0.0552: latency 0.0552.
func TestProgrammingLatencyMatchesAHandComputation(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	p := NewProgramming(1, c.now)
	p.Up("w19-a", RatesLTSC2019, time.Time{})
	p.Up("w19-boot", RatesLTSC2019, c.t.Add(5*time.Second))
	p.Up("w22", RatesLTSC2022, time.Time{})
	p.Up("down", RatesLTSC2019, time.Time{})
	p.Down("down")

	p.Program(Work{LoadBalancers: 1})
	c.after(100 * time.Millisecond)
	if got := p.Backlog("w19-a"); got != ms(500) {
		t.Errorf("w19-a's backlog at t=0.1: %v, want 500ms", got)
	}
	p.Program(Work{LoadBalancers: 2, RemoteEndpoints: 1})
	c.after(9900 * time.Millisecond)
	p.Program(Work{LoadBalancers: 1})

	want := map[string][]time.Duration{
		"w19-a":    {ms(600), ms(1724), ms(600)},
		"w19-boot": {ms(5600), ms(6724), ms(600)},
		"w22":      {ms(27), ms(55.2), ms(27)},
	}
	for node, lat := range want {
		h := p.Node(node)
		var sum, top time.Duration
		for _, l := range lat {
			sum += l
			top = max(top, l)
		}
		if h.Count != 3 || h.Sum != sum || h.Max != top {
			t.Errorf("%s: %d changes, sum %v, max %v; want 3, %v, %v", node, h.Count, h.Sum, h.Max, sum, top)
		}
		// The median is the second largest of three.
		if med := h.Quantile(0.5); !within10(med, median3(lat)) {
			t.Errorf("%s: p50 %v, want %v (+10%%)", node, med, median3(lat))
		}
	}
	if h := p.Node("down"); h.Count != 0 {
		t.Errorf("a rebooting node programs nothing, yet it recorded %d changes", h.Count)
	}
	f := p.Fleet()
	if f.Count != 9 || f.Max != ms(6724) {
		t.Errorf("fleet: %d changes, max %v; want 9, 6.724s", f.Count, f.Max)
	}
	// p99 of nine samples is the largest.
	if got := f.Quantile(0.99); got != ms(6724) {
		t.Errorf("fleet p99 %v, want the largest, 6.724s", got)
	}
}

func median3(l []time.Duration) time.Duration {
	a, b, c := l[0], l[1], l[2]
	return max(min(a, b), min(max(a, b), c))
}

func TestACostScaleMultipliesEveryCost(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	p := NewProgramming(0.5, c.now)
	p.Up("n", RatesLTSC2019, time.Time{})
	p.Program(Work{LoadBalancers: 10})
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
	m.OnWork(func(w Work) { got = append(got, w) })
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
