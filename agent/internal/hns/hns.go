// Package hns finds kube-proxy's HNS network and counts what kube-proxy
// (winkernel) has programmed into HNS, through a small API that the Windows
// host implements with hcsshim's hcn and the tests with a fake, the way
// kube-proxy's winkernel keeps hcn behind its HostNetworkService interface.
package hns

import (
	"fmt"
	"sort"
	"strings"

	"winpool.dev/agent/internal/host"
)

// Network is an HNS network as hcn.HostComputeNetwork describes it.
type Network struct {
	ID   string
	Name string
	// Type is hcn's NetworkType: "Overlay", "L2Bridge", "L2Tunnel", "NAT", …
	Type string
}

// Endpoint is an HNS endpoint; Remote is hcn.EndpointFlagsRemoteEndpoint,
// set on the endpoints kube-proxy creates for pods on other nodes.
type Endpoint struct{ Remote bool }

// API is the part of hcn the agent reads.
type API interface {
	Networks() ([]Network, error)
	// LoadBalancers counts the host's HNS load balancers (hcn.ListLoadBalancers).
	LoadBalancers() (int, error)
	// Endpoints lists the endpoints of one network (hcn.ListEndpointsOfNetwork).
	Endpoints(networkID string) ([]Endpoint, error)
}

// KnownNetworks are the names CNIs give the network kube-proxy uses:
// Azure CNI "azure", flannel "cbr0" (host-gw/l2bridge) and "vxlan0"
// (overlay), flannel's newer "flannel.4096", Calico "Calico", sig-windows
// l2bridge setups "l2bridge".
var KnownNetworks = []string{"azure", "cbr0", "vxlan0", "flannel.4096", "Calico", "l2bridge"}

// helperNetworks are never kube-proxy's: AKS's "ext" and the "External"
// network flannel and Calico create so the host keeps its connectivity, and
// Windows' own NAT networks.
var helperNetworks = []string{"ext", "External", "nat", "Default Switch"}

// podNetworkTypes are the types a pod network of kube-proxy can have.
var podNetworkTypes = []string{"Overlay", "L2Bridge", "L2Tunnel"}

// Select finds kube-proxy's network. configured is the name kube-proxy was
// given (its --network-name, or KUBE_NETWORK, which the agent reads from
// its own environment); "" lets Select recognize it. ok is false when there is
// none (yet); err says why the choice is ambiguous.
func Select(nets []Network, configured string) (Network, bool, error) {
	if configured != "" {
		for _, n := range nets {
			if strings.EqualFold(n.Name, configured) {
				return n, true, nil
			}
		}
		return Network{}, false, nil
	}
	for _, name := range KnownNetworks {
		for _, n := range nets {
			if strings.EqualFold(n.Name, name) && isPodNetworkType(n.Type) {
				return n, true, nil
			}
		}
	}
	var candidates []Network
	for _, n := range nets {
		if isPodNetworkType(n.Type) && !isHelper(n.Name) {
			candidates = append(candidates, n)
		}
	}
	switch len(candidates) {
	case 0:
		return Network{}, false, nil
	case 1:
		return candidates[0], true, nil
	}
	var desc []string
	for _, n := range candidates {
		desc = append(desc, fmt.Sprintf("%q (%s)", n.Name, n.Type))
	}
	sort.Strings(desc)
	return Network{}, false, fmt.Errorf("several HNS networks could be kube-proxy's: %s; set KUBE_NETWORK on the agent to the one kube-proxy uses (its --network-name)",
		strings.Join(desc, ", "))
}

// Mode is the CNI mode as the Node reports it: the network's HNS type in
// lower case ("overlay", "l2bridge", "l2tunnel").
func Mode(n Network) string { return strings.ToLower(n.Type) }

// Count counts as kube-proxy winkernel programs them: every HNS load
// balancer on the host, and the remote endpoints of kube-proxy's network
// (none while there is no such network).
func Count(api API, configured string) (host.HNSCounts, error) {
	var c host.HNSCounts
	lbs, err := api.LoadBalancers()
	if err != nil {
		return c, fmt.Errorf("listing HNS load balancers: %w", err)
	}
	c.LoadBalancers = lbs
	nets, err := api.Networks()
	if err != nil {
		return c, fmt.Errorf("listing HNS networks: %w", err)
	}
	n, ok, err := Select(nets, configured)
	if err != nil || !ok {
		return c, err
	}
	eps, err := api.Endpoints(n.ID)
	if err != nil {
		return c, fmt.Errorf("listing the endpoints of HNS network %q: %w", n.Name, err)
	}
	for _, ep := range eps {
		if ep.Remote {
			c.RemoteEndpoints++
		}
	}
	return c, nil
}

func isPodNetworkType(t string) bool {
	for _, p := range podNetworkTypes {
		if strings.EqualFold(t, p) {
			return true
		}
	}
	return false
}

func isHelper(name string) bool {
	for _, h := range helperNetworks {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
}
