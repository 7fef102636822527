//go:build windows

package windows

import (
	"github.com/Microsoft/hcsshim/hcn"

	"winpool.dev/agent/internal/hns"
)

// hcnAPI is hns.API on the real HNS, through the same hcn calls kube-proxy's
// winkernel makes.
type hcnAPI struct{}

var _ hns.API = hcnAPI{}

func (hcnAPI) Networks() ([]hns.Network, error) {
	nets, err := hcn.ListNetworks()
	if err != nil {
		return nil, err
	}
	out := make([]hns.Network, 0, len(nets))
	for _, n := range nets {
		out = append(out, hns.Network{ID: n.Id, Name: n.Name, Type: string(n.Type)})
	}
	return out, nil
}

func (hcnAPI) LoadBalancers() (int, error) {
	lbs, err := hcn.ListLoadBalancers()
	return len(lbs), err
}

func (hcnAPI) Endpoints(networkID string) ([]hns.Endpoint, error) {
	eps, err := hcn.ListEndpointsOfNetwork(networkID)
	if err != nil {
		return nil, err
	}
	out := make([]hns.Endpoint, 0, len(eps))
	for _, ep := range eps {
		out = append(out, hns.Endpoint{Remote: ep.Flags&hcn.EndpointFlagsRemoteEndpoint != 0})
	}
	return out, nil
}
