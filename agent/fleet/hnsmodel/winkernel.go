// Package hnsmodel is the simulated fleet's idea of what kube-proxy's winkernel
// proxier has programmed into HNS on a Windows node: load-balancer policies and
// remote endpoints, from Services and EndpointSlices.
//
// It is derived from kube-proxy itself (k8s.io/kubernetes pkg/proxy/winkernel,
// proxier.go syncProxyRules; pkg/proxy serviceport.go, servicechangetracker.go,
// endpointslicecache.go at v1.36), never from the operator's model: the fleet
// is the oracle the operator is tested against, so the two must be free to
// disagree. Where kube-proxy depends on machine state the cluster does not show
// (kube-proxy flags, HNS features), this model assumes a patched Windows Server
// with DSR support, forwardHealthCheckVip off (kube-proxy's default) and the
// CNI's local endpoints present in HNS.
package hnsmodel

import (
	v1 "k8s.io/api/core/v1"
)

// servicePort is one entry of winkernel's service map: a Service port in one
// IP family (the dual-stack proxier runs one proxier per family).
type servicePort struct {
	name     string
	protocol v1.Protocol
	family   v1.IPFamily
	// clusterIP of this family; always set (a family without one has no entry).
	clusterIP string
	nodePort  bool
	// externalIPs and ingressIPs of this family, without repeats (a repeated
	// VIP finds the load balancer already programmed, so it is not a second one).
	externalIPs []string
	ingressIPs  []string
	// localTrafficDSR: externalTrafficPolicy Local.
	localTrafficDSR bool
	// preserveDIP: annotation preserve-destination: "true".
	preserveDIP bool
	// internalTrafficLocal: internalTrafficPolicy Local.
	internalTrafficLocal bool
}

// endpoint is one entry of a service port's endpoints map (kube-proxy keys it
// by ip:port and keeps the first address of a slice endpoint).
type endpoint struct {
	ip          string
	port        int32
	node        string
	ready       bool
	serving     bool
	terminating bool
}

// programmed is what one service port puts into HNS on one node.
type programmed struct {
	loadBalancers int
	// remote lists the distinct IPs of the remote endpoints the port uses.
	// HNS holds one remote endpoint per IP, shared by every port that uses it.
	remote []string
}

// program replays winkernel's syncProxyRules for one service port, as the
// proxier on node sees it. node "" stands for any node that hosts none of the
// port's endpoints.
func program(sp *servicePort, eps []endpoint, node string) programmed {
	isLocal := func(e *endpoint) bool { return e.node != "" && e.node == node }
	used, local, available := usedEndpoints(sp, eps, isLocal)
	// "Endpoint information not available for service, not applying any policy"
	if len(used) == 0 {
		return programmed{}
	}
	var out programmed
	seen := make(map[string]struct{}, len(used))
	for _, e := range used {
		if isLocal(e) {
			continue
		}
		if _, dup := seen[e.ip]; !dup {
			seen[e.ip] = struct{}{}
			out.remote = append(out.remote, e.ip)
		}
	}
	out.loadBalancers = loadBalancers(sp, used, local, available)
	return out
}

// usedEndpoints are the endpoints winkernel programs for the port, the local
// ones among them, and whether the port is available (not every endpoint
// terminating or non-serving).
func usedEndpoints(sp *servicePort, eps []endpoint, isLocal func(*endpoint) bool) (used, local []*endpoint, available bool) {
	// Only Services with load-balancer ingress IPs get the terminating checks;
	// for the others both stay false and every port is "available".
	allTerminating, allNonServing := false, false
	if len(sp.ingressIPs) > 0 {
		allTerminating = allEndpointsTerminating(eps, sp.localTrafficDSR, isLocal)
		allNonServing = allEndpointsNonServing(eps, sp.localTrafficDSR, isLocal)
	}
	someServing := !allNonServing
	for i := range eps {
		e := &eps[i]
		if sp.internalTrafficLocal && sp.localTrafficDSR && !isLocal(e) {
			continue
		}
		// When no endpoint serves, winkernel filters nothing: every endpoint,
		// ready or not, is used (this also happens on a node without local
		// endpoints of an externalTrafficPolicy Local Service with ingress IPs,
		// where the checks above look at local endpoints only).
		if someServing && (!allTerminating && !e.ready || !e.serving) {
			continue
		}
		used = append(used, e)
		if isLocal(e) {
			local = append(local, e)
		}
	}
	return used, local, !allTerminating && !allNonServing
}

// loadBalancers counts the port's HNS load balancers: its ClusterIP, NodePort,
// external IPs and ingress IPs, each with the endpoints its traffic policy allows.
func loadBalancers(sp *servicePort, used, local []*endpoint, available bool) int {
	n := 0
	clusterIP := used
	if sp.internalTrafficLocal {
		clusterIP = local
	}
	if len(clusterIP) > 0 {
		n++
	}
	if sp.nodePort {
		eps := used
		if sp.preserveDIP || sp.localTrafficDSR {
			eps = local
		}
		if len(eps) > 0 && available {
			n++
		}
	}
	for range sp.externalIPs {
		eps := used
		if sp.localTrafficDSR {
			eps = local
		}
		if len(eps) > 0 && available {
			n++
		}
	}
	// Ingress load balancers do not check availability (winkernel creates them
	// even when every endpoint terminates).
	for range sp.ingressIPs {
		eps := used
		if sp.preserveDIP || sp.localTrafficDSR {
			eps = local
		}
		if len(eps) > 0 {
			n++
		}
	}
	return n
}

// allEndpointsTerminating is winkernel's isAllEndpointsTerminating: an
// endpoint that is neither ready nor terminating (a failing readiness probe)
// does not count either way; with DSR only local endpoints count.
func allEndpointsTerminating(eps []endpoint, dsr bool, isLocal func(*endpoint) bool) bool {
	for i := range eps {
		e := &eps[i]
		if dsr && !isLocal(e) {
			continue
		}
		if !e.ready && !e.terminating {
			continue
		}
		if !e.terminating {
			return false
		}
	}
	return true
}

// allEndpointsNonServing is winkernel's isAllEndpointsNonServing.
func allEndpointsNonServing(eps []endpoint, dsr bool, isLocal func(*endpoint) bool) bool {
	for i := range eps {
		e := &eps[i]
		if dsr && !isLocal(e) {
			continue
		}
		if e.serving {
			return false
		}
	}
	return true
}
