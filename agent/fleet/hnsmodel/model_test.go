package hnsmodel

import (
	"fmt"
	"math/rand/v2"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"winpool.dev/agent/internal/host"
)

var tracked = func(n string) bool { return n == "win-0" || n == "win-1" || n == "win-2" }

// recount is the model's answer computed the slow way: every Service port
// programmed from scratch, remote endpoints as one set.
func recount(m *Model, node string, overlay bool) host.HNSCounts {
	var c host.HNSCounts
	remote := map[string]struct{}{}
	vips := map[string]struct{}{}
	for key, s := range m.services {
		for i := range s.ports {
			p := program(&s.ports[i], m.endpointsOf(key, &s.ports[i]), node)
			c.LoadBalancers += p.loadBalancers
			for _, ip := range p.remote {
				remote[ip] = struct{}{}
			}
		}
		for _, ip := range s.clusterIPs {
			vips[ip] = struct{}{}
		}
	}
	c.RemoteEndpoints = len(remote)
	if overlay {
		c.RemoteEndpoints += len(vips)
	}
	return c
}

func randomService(r *rand.Rand, name string, i int) *v1.Service {
	var opts []svcOpt
	opts = append(opts, clusterIPs(fmt.Sprintf("10.96.0.%d", i)))
	if r.IntN(3) == 0 {
		opts = append(opts, clusterIPs(fmt.Sprintf("10.96.0.%d", i), fmt.Sprintf("fd00::%d", i)))
	}
	if r.IntN(2) == 0 {
		opts = append(opts, ports("http", "https"))
	}
	switch r.IntN(5) {
	case 0:
		opts = append(opts, nodePort)
	case 1:
		opts = append(opts, loadBalancer(fmt.Sprintf("20.0.0.%d", i), "2001:db8::1"))
	case 2:
		opts = append(opts, headless)
	}
	if r.IntN(4) == 0 {
		opts = append(opts, externalLocal)
	}
	if r.IntN(4) == 0 {
		opts = append(opts, internalLocal)
	}
	if r.IntN(5) == 0 {
		opts = append(opts, externalIPs("192.0.2.1", "192.0.2.2"))
	}
	return svc(name, opts...)
}

func randomSlice(r *rand.Rand, name string, services []string) *discovery.EndpointSlice {
	nodes := []string{"win-0", "win-1", "linux-0", ""}
	var eps []ep
	for range r.IntN(5) {
		e := ep{ip: fmt.Sprintf("10.244.0.%d", r.IntN(8)), node: nodes[r.IntN(len(nodes))]}
		switch r.IntN(4) {
		case 0:
			e.ready, e.serving = b(false), b(false)
		case 1:
			e.ready, e.serving, e.terminating = b(false), b(true), b(true)
		}
		eps = append(eps, e)
	}
	var opts []sliceOpt
	if r.IntN(2) == 0 {
		opts = append(opts, slicePorts(slicePortOf("http", v1.ProtocolTCP, 8080), slicePortOf("https", v1.ProtocolTCP, 8443)))
	}
	s := endpointSlice(services[r.IntN(len(services))], name, eps, opts...)
	if r.IntN(4) == 0 {
		ipv6(s)
		for i := range s.Endpoints {
			s.Endpoints[i].Addresses = []string{fmt.Sprintf("fd00:244::%d", r.IntN(8))}
		}
	}
	return s
}

// The incremental totals equal a recount after any sequence of Service and
// EndpointSlice events, for every node, however they interleave (slices
// before their Service, Services deleted under their slices, slices moving
// between Services).
func TestIncrementalCountsEqualARecount(t *testing.T) {
	services := []string{"a", "b", "c"}
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 1))
		m := New(tracked)
		for step := range 60 {
			switch op := r.IntN(4); op {
			case 0:
				i := r.IntN(len(services))
				m.SetService(randomService(r, services[i], i+1))
			case 1:
				m.DeleteService("ns", services[r.IntN(len(services))])
			case 2:
				m.SetSlice(randomSlice(r, fmt.Sprintf("s%d", r.IntN(5)), services))
			case 3:
				m.DeleteSlice("ns", fmt.Sprintf("s%d", r.IntN(5)))
			}
			for _, node := range []string{"win-0", "win-1", "win-2", "linux-0"} {
				view := node
				if !tracked(node) {
					view = "" // see TestUntrackedNodesSeeEveryEndpointAsRemote
				}
				for _, overlay := range []bool{false, true} {
					if got, want := m.Counts(node, overlay), recount(m, view, overlay); got != want {
						t.Fatalf("seed %d step %d node %s overlay %v: incremental %+v, recount %+v", seed, step, node, overlay, got, want)
					}
				}
			}
		}
		// Deleting everything leaves nothing behind, per node too.
		for _, s := range services {
			m.DeleteService("ns", s)
		}
		for i := range 5 {
			m.DeleteSlice("ns", fmt.Sprintf("s%d", i))
		}
		if len(m.nodes) != 0 || len(m.remoteRefs) != 0 || len(m.deltaNodes) != 0 || m.Counts("win-0", true) != (host.HNSCounts{}) {
			t.Fatalf("seed %d: state left after deleting everything: nodes %v refs %v counts %+v", seed, m.nodes, m.remoteRefs, m.Counts("win-0", true))
		}
	}
}

// Nodes come and go while the model runs (the fleet adopts a node added to
// the cluster, forgets a deleted one): after Retrack the counts equal a
// recount with the new set of tracked nodes, and a node no longer tracked
// leaves no differences behind.
func TestRetrackFollowsNodesComingAndGoing(t *testing.T) {
	services := []string{"a", "b", "c"}
	nodes := []string{"win-0", "win-1", "linux-0"}
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 2))
		on := map[string]bool{}
		m := New(func(n string) bool { return on[n] })
		for step := range 60 {
			switch op := r.IntN(5); op {
			case 0:
				i := r.IntN(len(services))
				m.SetService(randomService(r, services[i], i+1))
			case 1:
				m.DeleteService("ns", services[r.IntN(len(services))])
			case 2:
				m.SetSlice(randomSlice(r, fmt.Sprintf("s%d", r.IntN(5)), services))
			case 3:
				m.DeleteSlice("ns", fmt.Sprintf("s%d", r.IntN(5)))
			case 4:
				n := nodes[r.IntN(len(nodes))]
				on[n] = !on[n]
				m.Retrack(n)
			}
			for _, node := range nodes {
				view := node
				if !on[node] {
					view = ""
				}
				for _, overlay := range []bool{false, true} {
					if got, want := m.Counts(node, overlay), recount(m, view, overlay); got != want {
						t.Fatalf("seed %d step %d node %s (tracked %v) overlay %v: incremental %+v, recount %+v",
							seed, step, node, on[node], overlay, got, want)
					}
				}
			}
		}
		for _, n := range nodes {
			on[n] = false
		}
		m.Retrack(nodes...)
		if len(m.nodes) != 0 || len(m.deltaNodes) != 0 {
			t.Fatalf("seed %d: differences kept for untracked nodes: %v", seed, m.nodes)
		}
	}
}

// An untracked node is seen as hosting no endpoints: the fleet asks only
// about its own nodes, and keeping others' differences would cost memory for
// nothing.
func TestUntrackedNodesSeeEveryEndpointAsRemote(t *testing.T) {
	m := New(tracked)
	m.SetService(svc("web"))
	m.SetSlice(endpointSlice("web", "web-1", []ep{readyOn("10.244.0.1", "linux-0"), readyOn("10.244.0.2", "win-0")}))
	if got, want := m.Counts("linux-0", false), (host.HNSCounts{LoadBalancers: 1, RemoteEndpoints: 2}); got != want {
		t.Errorf("untracked linux-0: got %+v, want %+v", got, want)
	}
	if got, want := m.Counts("win-0", false), (host.HNSCounts{LoadBalancers: 1, RemoteEndpoints: 1}); got != want {
		t.Errorf("tracked win-0: got %+v, want %+v", got, want)
	}
	if len(m.nodes) != 1 {
		t.Errorf("differences kept for %d nodes, want 1 (win-0)", len(m.nodes))
	}
}

// A slice event costs the work of its own Service, not of the cluster: the
// Services around it are not recomputed.
func TestASliceChangeRecomputesOnlyItsService(t *testing.T) {
	m := New(nil)
	for i := range 50 {
		name := fmt.Sprintf("s%d", i)
		m.SetService(svc(name, clusterIPs(fmt.Sprintf("10.96.1.%d", i))))
		m.SetSlice(endpointSlice(name, name+"-1", ready(ipsFrom(fmt.Sprintf("10.%d.0", i), 3)...)))
	}
	before := map[string]*contribution{}
	for k, c := range m.applied {
		before[k] = c
	}
	m.SetSlice(endpointSlice("s7", "s7-1", ready(ipsFrom("10.7.0", 5)...)))
	for k, c := range m.applied {
		if changed := before[k] != c; changed != (k == "ns/s7") {
			t.Errorf("service %s recomputed: %v", k, changed)
		}
	}
	if got := m.Counts("win-0", false); got != (host.HNSCounts{LoadBalancers: 50, RemoteEndpoints: 49*3 + 5}) {
		t.Errorf("got %+v", got)
	}
}
