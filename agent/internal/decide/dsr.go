package decide

import (
	"fmt"

	"winpool.dev/agent/internal/host"
)

// dsrMissing says why a host does not run what networking.kubeProxy.enableDSR
// asks, or "" when it does or cannot be told yet. winpool does not set
// kube-proxy's flags (the node image does): with --enable-dsr, kube-proxy
// winkernel programs every ClusterIP's load balancer with Direct Server
// Return, so load balancers without a single DSR one mean kube-proxy runs
// without it. No load balancers (a fresh boot, an empty cluster) tell nothing.
func dsrMissing(wanted bool, hns *host.HNSCounts) string {
	if !wanted || hns == nil || hns.LoadBalancers == 0 || hns.DSRLoadBalancers > 0 {
		return ""
	}
	return fmt.Sprintf("the pool asks networking.kubeProxy.enableDSR, but none of the %d HNS load balancers has Direct Server Return: "+
		"kube-proxy runs without it; winpool does not set kube-proxy's flags: run it with --enable-dsr=true --feature-gates=WinDSR=true "+
		"(the node image's kube-proxy service), or set enableDSR: false (Get-HnsPolicyList shows each load balancer's flags)", hns.LoadBalancers)
}
