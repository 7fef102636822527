package hnsmodel

import (
	"slices"
	"time"
)

// Work is what one Service or EndpointSlice change makes winkernel do on a
// node: load-balancer policies it deletes and creates again (an endpoint
// change replaces every load balancer of the Service port), and remote
// endpoints it creates or deletes.
type Work struct {
	LoadBalancers   int
	RemoteEndpoints int
}

func (w Work) Zero() bool { return w == Work{} }

// add is w plus what replacing a Service's contribution old with new costs
// (nil: none). A change kube-proxy would not see (the same policies, the same
// remote addresses) costs nothing.
func (w Work) add(old, new *contribution) Work {
	var before, after contribution
	if old != nil {
		before = *old
	}
	if new != nil {
		after = *new
	}
	if before.loadBalancers == after.loadBalancers && slices.Equal(before.remote, after.remote) && slices.Equal(before.clusterIPs, after.clusterIPs) {
		return w
	}
	w.LoadBalancers += max(before.loadBalancers, after.loadBalancers)
	w.RemoteEndpoints += len(minus(before.remote, after.remote)) + len(minus(after.remote, before.remote))
	return w
}

// Rates is how long one HNS operation takes a release's HNS.
//
// kubernetes/kubernetes#109124 measured a full sync of 2,000 ClusterIP
// Services with about 5,000 remote endpoints, on nodes with the OS fix and
// kube-proxy's fix: 22 minutes on Windows Server 2019 and 1 minute on 2022
// (about 0.66 s and 0.03 s per Service). The issue gives one total per
// release, not the split: we charge nine tenths of it to the load balancers
// and one tenth to the remote endpoints, so a full sync of that cluster takes
// what was measured (2,000 × 600 ms + 5,000 × 24 ms = 22 min; 2,000 × 27 ms +
// 5,000 × 1.2 ms = 1 min).
type Rates struct {
	PerLoadBalancer   time.Duration
	PerRemoteEndpoint time.Duration
}

var (
	RatesLTSC2019 = Rates{PerLoadBalancer: 600 * time.Millisecond, PerRemoteEndpoint: 24 * time.Millisecond}
	// Windows Server 2022 and later.
	RatesLTSC2022 = Rates{PerLoadBalancer: 27 * time.Millisecond, PerRemoteEndpoint: 1200 * time.Microsecond}
)

// Cost is how long w takes at these rates, times scale (0: free).
func (r Rates) Cost(w Work, scale float64) time.Duration {
	d := time.Duration(w.LoadBalancers)*r.PerLoadBalancer + time.Duration(w.RemoteEndpoints)*r.PerRemoteEndpoint
	return time.Duration(float64(d) * scale)
}
