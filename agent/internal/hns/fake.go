package hns

// Fake is an in-memory HNS for tests: networks, load balancers and each
// network's endpoints.
type Fake struct {
	Nets          []Network
	LBs           int
	DSRLBs        int
	EndpointsByID map[string][]Endpoint
	Err           error
}

func (f *Fake) Networks() ([]Network, error) { return f.Nets, f.Err }
func (f *Fake) LoadBalancers() (LoadBalancers, error) {
	return LoadBalancers{All: f.LBs, DSR: f.DSRLBs}, f.Err
}
func (f *Fake) Endpoints(id string) ([]Endpoint, error) {
	return f.EndpointsByID[id], f.Err
}
