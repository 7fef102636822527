package hnsmodel

import (
	"sync"
	"time"
)

// Programming is each node's kube-proxy programming its HNS as winkernel
// does: in syncs. A sync takes every Service changed since the last one began
// and replaces what each needs once, however often it changed meanwhile; it
// takes what that work costs at the node's release's rates; changes arriving
// during it wait for the next. What it records is the network-programming
// latency: from a change (the fleet's watch hearing it) to the end of the
// sync that programmed it, per node and over the fleet.
//
// A node is up (programming) or down (rebooting: kube-proxy is not running,
// and the full sync after the boot, the node's own catch-up, picks the
// changes up). Changes heard while a node is down or still in the full sync
// after its boot cost it time but are not counted as its latencies: such a
// node serves no traffic (its cordon or the hns-not-ready taint keeps pods
// off), and its catch-up is what winpool's HNS readiness measures. The
// latency is the data plane's as the nodes serving pods see it.
type Programming struct {
	now   func() time.Time
	scale float64

	mu    sync.Mutex
	nodes map[string]*nodeProgramming
	fleet Histogram
	// afterCatchUp: the latencies of the first two syncs after a node's
	// full sync after its boot, which the changes it heard while catching
	// up make long (part of fleet, told apart to say where the tail is).
	afterCatchUp Histogram
}

type nodeProgramming struct {
	rates Rates
	up    bool
	// syncEnd is when the sync under way ends (zero or past: none is).
	syncEnd time.Time
	// bootSyncUntil is when the full sync after the node's boot ends.
	bootSyncUntil time.Time
	// pending are the Services changed since that sync began, by key;
	// firstPending is when the first of them was heard.
	pending      map[string]*pendingChange
	firstPending time.Time
	latency      Histogram
	// syncs since the node came up.
	syncs int
}

// pendingChange is a Service's changes waiting for the next sync: the work
// it will take, and when each change was heard.
type pendingChange struct {
	work    Work
	arrived []time.Time
}

// NewProgramming: scale multiplies every cost (the fleet's --hns-cost-scale).
func NewProgramming(scale float64, now func() time.Time) *Programming {
	if now == nil {
		now = time.Now
	}
	return &Programming{now: now, scale: scale, nodes: map[string]*nodeProgramming{}}
}

// Up says node's kube-proxy programs from now on, busy with its full sync
// until busyUntil (zero or past: caught up).
func (p *Programming) Up(node string, rates Rates, busyUntil time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.nodes[node]
	if n == nil {
		n = &nodeProgramming{}
		p.nodes[node] = n
	}
	n.rates, n.up, n.syncEnd, n.bootSyncUntil, n.pending, n.syncs = rates, true, busyUntil, busyUntil, nil, 0
}

// Down says node is rebooting: what it had not programmed goes with
// kube-proxy (the full sync after the boot holds it); its latencies so far stay.
func (p *Programming) Down(node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := p.nodes[node]; n != nil {
		p.advance(n, p.now())
		n.up, n.pending = false, nil
	}
}

// Forget drops a node the fleet no longer plays (its latencies stay in the
// fleet's histogram).
func (p *Programming) Forget(node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.nodes, node)
}

// Cost is what w takes a node of these rates, scaled as this fleet scales.
func (p *Programming) Cost(r Rates, w Work) time.Duration { return r.Cost(w, p.scale) }

// Program has every node that is up hear service's change w.
func (p *Programming) Program(service string, w Work) {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.nodes {
		if !n.up {
			continue
		}
		p.advance(n, now)
		if n.pending == nil {
			n.pending, n.firstPending = map[string]*pendingChange{}, now
		}
		c := n.pending[service]
		if c == nil {
			c = &pendingChange{}
			n.pending[service] = c
		}
		// One replacement of the Service's load balancers, whatever the count of changes.
		c.work = Work{LoadBalancers: max(c.work.LoadBalancers, w.LoadBalancers), RemoteEndpoints: c.work.RemoteEndpoints + w.RemoteEndpoints}
		if !now.Before(n.bootSyncUntil) {
			c.arrived = append(c.arrived, now)
		}
		p.advance(n, now)
	}
}

// advance runs n's syncs that have begun by now: the next one begins when
// the last ends, or at its first change if kube-proxy was idle.
func (p *Programming) advance(n *nodeProgramming, now time.Time) {
	for len(n.pending) > 0 {
		start := later(n.syncEnd, n.firstPending)
		if start.After(now) {
			return
		}
		var cost time.Duration
		for _, c := range n.pending {
			cost += n.rates.Cost(c.work, p.scale)
		}
		n.syncEnd = start.Add(cost)
		behindCatchUp := !n.bootSyncUntil.IsZero() && n.syncs < 2
		n.syncs++
		for _, c := range n.pending {
			for _, at := range c.arrived {
				n.latency.Observe(n.syncEnd.Sub(at))
				p.fleet.Observe(n.syncEnd.Sub(at))
				if behindCatchUp {
					p.afterCatchUp.Observe(n.syncEnd.Sub(at))
				}
			}
		}
		n.pending = nil
	}
}

// Backlog is how long node's HNS needs to program what it heard so far.
func (p *Programming) Backlog(node string) time.Duration {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.nodes[node]
	if n == nil || !n.up {
		return 0
	}
	p.advance(n, now)
	left := max(n.syncEnd.Sub(now), 0)
	for _, c := range n.pending {
		left += n.rates.Cost(c.work, p.scale)
	}
	return left
}

// Node is node's latencies (zero for a node never up), its syncs begun by now counted.
func (p *Programming) Node(node string) Histogram {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := p.nodes[node]; n != nil {
		p.advance(n, now)
		return n.latency
	}
	return Histogram{}
}

// Fleet is every node's latencies together, each node's syncs begun by now counted.
func (p *Programming) Fleet() Histogram { return p.fleetAt(p.now()) }

// Final is Fleet once nothing more will change: every change heard counted,
// those still waiting for a sync included.
func (p *Programming) Final() Histogram { return p.fleetAt(time.Unix(1<<40, 0)) }

// FinalAfterCatchUp is the part of Final programmed in the first two syncs
// after a node's catch-up from its boot.
func (p *Programming) FinalAfterCatchUp() Histogram {
	p.fleetAt(time.Unix(1<<40, 0))
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.afterCatchUp
}

func (p *Programming) fleetAt(now time.Time) Histogram {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.nodes {
		p.advance(n, now)
	}
	return p.fleet
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
