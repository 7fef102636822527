package hnsmodel

import (
	"sort"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"winpool.dev/agent/internal/host"
)

// Model keeps, from Service and EndpointSlice events, what a fully synced
// winkernel holds on each node. A change recomputes only the Service it
// touches, from that Service's slices (as kube-proxy's EndpointSliceCache
// does), and moves the totals by the difference; Counts is O(1).
//
// Nodes differ only through endpoints they host themselves (local endpoints
// are no remote endpoints, and traffic policies pick local ones). The model
// keeps the counts of a node hosting none of a Service's endpoints, and for
// the tracked nodes that do host some, the difference from those counts.
type Model struct {
	tracked func(node string) bool

	mu       sync.RWMutex
	services map[string]*service
	slices   map[string]*slice
	slicesOf map[string]map[string]struct{}
	applied  map[string]*contribution

	loadBalancers int
	// remoteRefs counts, per remote endpoint IP, the service ports using it.
	remoteRefs map[string]int
	remoteIPs  int
	clusterIPs map[string]int
	vips       int
	nodes      map[string]*nodeDelta
	// deltaNodes lists, per IP, the nodes whose references to it differ.
	deltaNodes map[string]map[string]struct{}

	// work is what the change being applied costs winkernel on every node,
	// by Service; onWork hears it once the change is in (nil: nobody listens yet).
	work   map[string]Work
	onWork func(service string, w Work)
}

// contribution is what one Service adds to the totals.
type contribution struct {
	loadBalancers int
	remote        []string // each port's distinct remote IPs, concatenated
	clusterIPs    []string
	nodes         map[string]*nodeContribution
}

// nodeContribution is how a Service looks different from a node hosting some
// of its endpoints.
type nodeContribution struct {
	loadBalancers int
	add, remove   []string
}

type nodeDelta struct {
	loadBalancers int
	refs          map[string]int
	// lost: IPs remote elsewhere but not here; gained: the reverse.
	lost, gained int
}

// New returns an empty model. tracked says which nodes' own endpoints matter
// (the fleet's nodes); nil tracks none, so every node counts as remote-only.
func New(tracked func(node string) bool) *Model {
	if tracked == nil {
		tracked = func(string) bool { return false }
	}
	return &Model{
		tracked:    tracked,
		services:   map[string]*service{},
		slices:     map[string]*slice{},
		slicesOf:   map[string]map[string]struct{}{},
		applied:    map[string]*contribution{},
		remoteRefs: map[string]int{},
		clusterIPs: map[string]int{},
		nodes:      map[string]*nodeDelta{},
		deltaNodes: map[string]map[string]struct{}{},
	}
}

// Counts is what HNS holds on node once kube-proxy has synced. overlay: the
// node's HNS network is an overlay (VXLAN) one, where winkernel also creates a
// remote endpoint for each Service ClusterIP.
func (m *Model) Counts(node string, overlay bool) host.HNSCounts {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c := host.HNSCounts{LoadBalancers: m.loadBalancers, RemoteEndpoints: m.remoteIPs}
	if d := m.nodes[node]; d != nil {
		c.LoadBalancers += d.loadBalancers
		c.RemoteEndpoints += d.gained - d.lost
	}
	if overlay {
		c.RemoteEndpoints += m.vips
	}
	return c
}

// OnWork has f hear, from now on, what each change costs every node's HNS.
// Set once the first list is in: the state the fleet starts in is programmed
// already, not a change.
func (m *Model) OnWork(f func(service string, w Work)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onWork = f
}

// charge unlocks the model after a change and tells onWork what it cost,
// outside the lock (the listener reads node state of its own).
func (m *Model) charge() {
	work, f := m.work, m.onWork
	m.work = nil
	m.mu.Unlock()
	if f == nil {
		return
	}
	for svc, w := range work {
		if !w.Zero() {
			f(svc, w)
		}
	}
}

func (m *Model) SetService(s *v1.Service) {
	m.mu.Lock()
	defer m.charge()
	key := s.Namespace + "/" + s.Name
	if svc := serviceFrom(s); svc != nil {
		m.services[key] = svc
	} else {
		delete(m.services, key)
	}
	m.recompute(key)
}

func (m *Model) DeleteService(namespace, name string) {
	m.mu.Lock()
	defer m.charge()
	key := namespace + "/" + name
	delete(m.services, key)
	m.recompute(key)
}

func (m *Model) SetSlice(s *discovery.EndpointSlice) {
	m.mu.Lock()
	defer m.charge()
	key := s.Namespace + "/" + s.Name
	old := m.dropSlice(key)
	if sl := sliceFrom(s); sl != nil {
		m.slices[key] = sl
		if m.slicesOf[sl.service] == nil {
			m.slicesOf[sl.service] = map[string]struct{}{}
		}
		m.slicesOf[sl.service][key] = struct{}{}
		m.recompute(sl.service)
		if old == sl.service {
			return
		}
	}
	if old != "" {
		m.recompute(old)
	}
}

func (m *Model) DeleteSlice(namespace, name string) {
	m.mu.Lock()
	defer m.charge()
	if svc := m.dropSlice(namespace + "/" + name); svc != "" {
		m.recompute(svc)
	}
}

// Retrack brings the model up to date after nodes started or stopped being
// tracked (the fleet adopted or forgot them): it recomputes the Services with
// endpoints on any of them, found in one pass over the slices. These are all
// the Services whose contribution changes: a contribution names a node only
// if, when it was computed from the slices the model still holds, the node
// hosted some of the Service's endpoints. A forgotten node's differences go
// with them.
func (m *Model) Retrack(nodes ...string) {
	if len(nodes) == 0 {
		return
	}
	set := make(map[string]struct{}, len(nodes))
	for _, n := range nodes {
		set[n] = struct{}{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	services := map[string]struct{}{}
	for _, sl := range m.slices {
		if _, done := services[sl.service]; done {
			continue
		}
		for _, e := range sl.endpoints {
			if _, hit := set[e.node]; hit {
				services[sl.service] = struct{}{}
				break
			}
		}
	}
	for svc := range services {
		m.recompute(svc)
	}
	// Which nodes the fleet plays changes nothing kube-proxy programs.
	m.work = nil
}

// dropSlice forgets a slice and returns the Service it belonged to ("" if none).
func (m *Model) dropSlice(key string) string {
	old := m.slices[key]
	if old == nil {
		return ""
	}
	delete(m.slices, key)
	delete(m.slicesOf[old.service], key)
	if len(m.slicesOf[old.service]) == 0 {
		delete(m.slicesOf, old.service)
	}
	return old.service
}

// recompute replaces a Service's contribution with one computed from what the
// model now knows of it.
func (m *Model) recompute(svcKey string) {
	old := m.applied[svcKey]
	if old != nil {
		m.apply(old, -1)
		delete(m.applied, svcKey)
	}
	svc := m.services[svcKey]
	if svc == nil {
		m.addWork(svcKey, old, nil)
		return
	}
	c := &contribution{clusterIPs: svc.clusterIPs}
	for i := range svc.ports {
		sp := &svc.ports[i]
		eps := m.endpointsOf(svcKey, sp)
		generic := program(sp, eps, "")
		c.loadBalancers += generic.loadBalancers
		c.remote = append(c.remote, generic.remote...)
		for _, n := range m.trackedNodesOf(eps) {
			own := program(sp, eps, n)
			if c.nodes == nil {
				c.nodes = map[string]*nodeContribution{}
			}
			nc := c.nodes[n]
			if nc == nil {
				nc = &nodeContribution{}
				c.nodes[n] = nc
			}
			nc.loadBalancers += own.loadBalancers - generic.loadBalancers
			nc.add = append(nc.add, minus(own.remote, generic.remote)...)
			nc.remove = append(nc.remove, minus(generic.remote, own.remote)...)
		}
	}
	m.applied[svcKey] = c
	m.apply(c, +1)
	m.addWork(svcKey, old, c)
}

func (m *Model) addWork(svcKey string, old, new *contribution) {
	if m.work == nil {
		m.work = map[string]Work{}
	}
	m.work[svcKey] = m.work[svcKey].add(old, new)
}

// endpointsOf is the service port's entry of kube-proxy's endpoints map: the
// endpoints of the Service's slices of the port's family whose port has the
// same name and protocol, once per ip:port, a terminating duplicate giving way
// to a live one.
func (m *Model) endpointsOf(svcKey string, sp *servicePort) []endpoint {
	keys := make([]string, 0, len(m.slicesOf[svcKey]))
	for k := range m.slicesOf[svcKey] {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	byKey := map[string]endpoint{}
	var order []string
	for _, k := range keys {
		sl := m.slices[k]
		if sl.family != sp.family {
			continue
		}
		for _, p := range sl.ports {
			if p.name != sp.name || p.protocol != sp.protocol {
				continue
			}
			for _, e := range sl.endpoints {
				e.port = p.port
				id := e.ip + ":" + strconv.Itoa(int(p.port))
				if _, exists := byKey[id]; !exists {
					order = append(order, id)
				} else if e.terminating {
					continue
				}
				byKey[id] = e
			}
		}
	}
	out := make([]endpoint, 0, len(order))
	for _, id := range order {
		out = append(out, byKey[id])
	}
	return out
}

func (m *Model) trackedNodesOf(eps []endpoint) []string {
	var out []string
	seen := map[string]struct{}{}
	for _, e := range eps {
		if e.node == "" || !m.tracked(e.node) {
			continue
		}
		if _, dup := seen[e.node]; !dup {
			seen[e.node] = struct{}{}
			out = append(out, e.node)
		}
	}
	return out
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		found := false
		for _, y := range b {
			if x == y {
				found = true
				break
			}
		}
		if !found {
			out = append(out, x)
		}
	}
	return out
}

func (m *Model) apply(c *contribution, sign int) {
	m.loadBalancers += sign * c.loadBalancers
	for _, ip := range c.remote {
		m.ref(ip, sign)
	}
	for _, ip := range c.clusterIPs {
		m.clusterIPs[ip] += sign
		switch n := m.clusterIPs[ip]; {
		case n == 0:
			delete(m.clusterIPs, ip)
			m.vips--
		case n == 1 && sign > 0:
			m.vips++
		}
	}
	for node, nc := range c.nodes {
		d := m.nodes[node]
		if d == nil {
			d = &nodeDelta{refs: map[string]int{}}
			m.nodes[node] = d
		}
		d.loadBalancers += sign * nc.loadBalancers
		for _, ip := range nc.add {
			m.nodeRef(node, d, ip, sign)
		}
		for _, ip := range nc.remove {
			m.nodeRef(node, d, ip, -sign)
		}
		if d.loadBalancers == 0 && len(d.refs) == 0 {
			delete(m.nodes, node)
		}
	}
}

// ref moves the cluster-wide references to a remote endpoint IP, keeping the
// per-node lost/gained counters exact for the nodes whose view of it differs.
func (m *Model) ref(ip string, delta int) {
	nodes := m.deltaNodes[ip]
	for n := range nodes {
		m.mark(m.nodes[n], ip, -1)
	}
	old := m.remoteRefs[ip]
	now := old + delta
	if now == 0 {
		delete(m.remoteRefs, ip)
	} else {
		m.remoteRefs[ip] = now
	}
	if old <= 0 && now > 0 {
		m.remoteIPs++
	} else if old > 0 && now <= 0 {
		m.remoteIPs--
	}
	for n := range nodes {
		m.mark(m.nodes[n], ip, +1)
	}
}

func (m *Model) nodeRef(node string, d *nodeDelta, ip string, delta int) {
	m.mark(d, ip, -1)
	d.refs[ip] += delta
	if d.refs[ip] == 0 {
		delete(d.refs, ip)
		delete(m.deltaNodes[ip], node)
		if len(m.deltaNodes[ip]) == 0 {
			delete(m.deltaNodes, ip)
		}
	} else {
		if m.deltaNodes[ip] == nil {
			m.deltaNodes[ip] = map[string]struct{}{}
		}
		m.deltaNodes[ip][node] = struct{}{}
	}
	m.mark(d, ip, +1)
}

// mark adds (sign +1) or takes back (-1) what ip means for d's counters in the
// current state. Taking back before a change and adding after it keeps the
// counters a function of the state, whatever order changes come in.
func (m *Model) mark(d *nodeDelta, ip string, sign int) {
	g := m.remoteRefs[ip]
	own := g + d.refs[ip]
	switch {
	case g > 0 && own <= 0:
		d.lost += sign
	case g <= 0 && own > 0:
		d.gained += sign
	}
}
