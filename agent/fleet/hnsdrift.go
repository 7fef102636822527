package fleet

import (
	"time"

	"winpool.dev/agent/internal/host"
)

// HNS that loses what it held while the node runs, as seen in the field and
// handled by no one (issue 46). Each strikes once per fleet, --hns-fault-after
// after the node's HNS caught up (or the fleet started, for a node up since
// long ago), and lasts until the node reboots: a boot rebuilds HNS.
const (
	// FaultHNSCollapse: the node's load balancers and remote endpoints drop to a
	// handful and stay (kubernetes/kubernetes#110849: 577 load balancers to 1,
	// days to recover).
	FaultHNSCollapse Fault = "hns-collapse"
	// FaultHNSRestart: HNS restarts: everything deleted, kube-proxy programs it
	// again from scratch, taking a full sync's time (kubernetes#139519).
	FaultHNSRestart Fault = "hns-restart"
	// FaultLBDeleted: a tenth of the load balancers (at least one) deleted out
	// of band and never recreated: kube-proxy believes them programmed
	// (kubernetes/kubernetes#135802).
	FaultLBDeleted Fault = "lb-deleted"
)

// collapsedTo is what a collapsed HNS keeps of each count.
const collapsedTo = 3

// hnsDrift is the fault a node's HNS plays, if any.
func (n *simNode) hnsDrift() Fault {
	for _, f := range []Fault{FaultHNSCollapse, FaultHNSRestart, FaultLBDeleted} {
		if n.f.s.Faults.On(f, n.name) {
			return f
		}
	}
	return ""
}

// drifted is full as the node's HNS holds it once its fault struck: it
// strikes at the first read past its time, and a boot after that ends it, as
// does a restart of kube-proxy (kubeProxyStarted), from which HNS climbs back
// to full over a full sync. caughtUpAt is when the node's HNS held full in
// this boot.
func (n *simNode) drifted(full host.HNSCounts, caughtUpAt time.Time, fullSync time.Duration, kubeProxyStarted time.Time) host.HNSCounts {
	fault := n.hnsDrift()
	if fault == "" {
		return full
	}
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.hnsFaultAt.IsZero() {
		if now.Before(later(caughtUpAt, n.f.started).Add(n.f.s.HNSFaultAfter)) {
			return full
		}
		n.hnsFaultAt = now
		n.log.Info("HNS fault struck", "fault", string(fault))
	}
	if n.bootedAt.After(n.hnsFaultAt) {
		return full
	}
	var held host.HNSCounts
	switch fault {
	case FaultHNSCollapse:
		held = host.HNSCounts{LoadBalancers: min(full.LoadBalancers, collapsedTo), RemoteEndpoints: min(full.RemoteEndpoints, collapsedTo)}
	case FaultHNSRestart:
		held = catchUp(full, now.Sub(n.hnsFaultAt), fullSync)
	default:
		lost := max(1, full.LoadBalancers/10)
		held = host.HNSCounts{LoadBalancers: max(0, full.LoadBalancers-lost), RemoteEndpoints: full.RemoteEndpoints}
	}
	if !kubeProxyStarted.After(n.hnsFaultAt) {
		return held
	}
	// A restarted kube-proxy programs every Service again, keeping what HNS
	// still holds and recreating what it lost.
	back := catchUp(full, now.Sub(kubeProxyStarted), fullSync)
	return host.HNSCounts{LoadBalancers: max(held.LoadBalancers, back.LoadBalancers), RemoteEndpoints: max(held.RemoteEndpoints, back.RemoteEndpoints)}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
