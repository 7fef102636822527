package hnsmodel

import (
	"sync"
	"time"
)

// Programming is each node's kube-proxy programming its HNS one change after
// another: a change waits for the ones before it, then takes what its work
// costs at the node's release's rates. What it records is the
// network-programming latency: from the change (the fleet's watch hearing it)
// to the node's HNS reflecting it, per node and over the fleet.
//
// A node is either up (programming) or down (rebooting: kube-proxy is not
// running, and the full sync after the boot, the node's own catch-up, picks
// the changes up; they are not counted as this node's latencies).
type Programming struct {
	now   func() time.Time
	scale float64

	mu    sync.Mutex
	nodes map[string]*nodeProgramming
	fleet Histogram
}

type nodeProgramming struct {
	rates Rates
	up    bool
	// busyUntil is when the node's HNS will have programmed every change it
	// heard of so far.
	busyUntil time.Time
	latency   Histogram
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
	n.rates, n.up, n.busyUntil = rates, true, busyUntil
}

// Down says node is rebooting; its latencies so far stay.
func (p *Programming) Down(node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := p.nodes[node]; n != nil {
		n.up = false
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

// Program queues w on every node that is up.
func (p *Programming) Program(w Work) {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.nodes {
		if !n.up {
			continue
		}
		n.busyUntil = later(n.busyUntil, now).Add(n.rates.Cost(w, p.scale))
		latency := n.busyUntil.Sub(now)
		n.latency.Observe(latency)
		p.fleet.Observe(latency)
	}
}

// Backlog is how long node's HNS needs to program what it heard of so far.
func (p *Programming) Backlog(node string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.nodes[node]
	if n == nil || !n.up {
		return 0
	}
	return max(n.busyUntil.Sub(p.now()), 0)
}

// Node is node's latencies (zero for a node never up).
func (p *Programming) Node(node string) Histogram {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := p.nodes[node]; n != nil {
		return n.latency
	}
	return Histogram{}
}

// Fleet is every node's latencies together.
func (p *Programming) Fleet() Histogram {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fleet
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
