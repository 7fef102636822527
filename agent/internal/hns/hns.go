// Package hns finds kube-proxy's HNS network and counts what kube-proxy
// (winkernel) has programmed into HNS, through a small API that the Windows
// host implements with hnslib's hcn (github.com/Microsoft/hnslib, the
// package Kubernetes moved to from hcsshim) and the tests with a fake, the way
// kube-proxy's winkernel keeps hcn behind its HostNetworkService interface.
package hns

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"winpool.dev/agent/internal/host"
)

// Network is an HNS network as hcn.HostComputeNetwork describes it.
type Network struct {
	ID   string
	Name string
	// Type is hcn's NetworkType: "Overlay", "L2Bridge", "L2Tunnel", "NAT", …
	Type string
}

// LoadBalancers counts HNS load balancers: all of them, and those with
// Direct Server Return (hcn.LoadBalancerFlagsDSR), which kube-proxy winkernel
// programs for every ClusterIP when it runs with --enable-dsr.
type LoadBalancers struct{ All, DSR int }

// Endpoint is an HNS endpoint; Remote is hcn.EndpointFlagsRemoteEndpoint,
// set on the endpoints kube-proxy creates for pods on other nodes.
type Endpoint struct{ Remote bool }

// API is the part of hcn the agent reads.
type API interface {
	Networks() ([]Network, error)
	// LoadBalancers counts the host's HNS load balancers (hcn.ListLoadBalancers).
	LoadBalancers() (LoadBalancers, error)
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

// Snapshot is one reading of HNS: kube-proxy's network (or why there is
// none) and, when counted, what kube-proxy winkernel has programmed.
type Snapshot struct {
	// ListErr: listing the networks failed; nothing else is known.
	ListErr error
	// Network is kube-proxy's network when Found; Problem says why the
	// choice is ambiguous (Select's error).
	Network Network
	Found   bool
	Problem error
	// Counts, as kube-proxy winkernel programs them: every HNS load balancer
	// on the host and the remote endpoints of Network (none while there is no
	// such network). CountErr: why they could not be counted.
	Counts   host.HNSCounts
	CountErr error
}

// Read takes one Snapshot: it lists the networks once, the load balancers
// once and the endpoints of kube-proxy's network once (none of the last two
// when the networks cannot be listed or the choice is ambiguous, nor the
// endpoints when there is no such network).
func Read(api API, configured string) Snapshot {
	s := readNetworks(api, configured)
	s.count(api)
	return s
}

// readNetworks lists the networks and picks kube-proxy's.
func readNetworks(api API, configured string) Snapshot {
	var s Snapshot
	nets, err := api.Networks()
	if err != nil {
		s.ListErr = err
		return s
	}
	s.Network, s.Found, s.Problem = Select(nets, configured)
	return s
}

// count counts what is programmed, on the networks s already listed.
func (s *Snapshot) count(api API) {
	s.Counts, s.CountErr = host.HNSCounts{}, nil
	switch {
	case s.ListErr != nil:
		s.CountErr = fmt.Errorf("listing HNS networks: %w", s.ListErr)
		return
	case s.Problem != nil:
		s.CountErr = s.Problem
		return
	}
	lbs, err := api.LoadBalancers()
	if err != nil {
		s.CountErr = fmt.Errorf("listing HNS load balancers: %w", err)
		return
	}
	s.Counts.LoadBalancers, s.Counts.DSRLoadBalancers = lbs.All, lbs.DSR
	if !s.Found {
		return
	}
	eps, err := api.Endpoints(s.Network.ID)
	if err != nil {
		s.Counts = host.HNSCounts{}
		s.CountErr = fmt.Errorf("listing the endpoints of HNS network %q: %w", s.Network.Name, err)
		return
	}
	for _, ep := range eps {
		if ep.Remote {
			s.Counts.RemoteEndpoints++
		}
	}
}

// CNI is what the Node reports of kube-proxy's network: its mode (Mode),
// why it is ambiguous, or why HNS could not be read; all "" while there is
// no such network yet.
func (s Snapshot) CNI() (mode, problem, readErr string) {
	switch {
	case s.ListErr != nil:
		return "", "", "listing HNS networks: " + s.ListErr.Error()
	case s.Problem != nil:
		return "", s.Problem.Error(), ""
	case s.Found:
		return Mode(s.Network), "", ""
	}
	return "", "", ""
}

// Reader is how the host reads HNS once per agent tick: the agent observes
// the host (kube-proxy's network, Network) and then counts (Counts) back to
// back, and may observe again while it decides. One listing of the networks
// serves every call within maxAge of it; Counts lists the load balancers and
// the endpoints of kube-proxy's network once per call. So a tick lists each
// of the three once, where separate reads would list the networks two or
// three times.
type Reader struct {
	api        API
	configured string
	maxAge     time.Duration
	now        func() time.Time

	mu   sync.Mutex
	last Snapshot
	at   time.Time
	have bool
}

// ReuseFor is how long a listing of the networks serves: longer than the
// agent takes from its observation to its count, far shorter than its tick.
const ReuseFor = 2 * time.Second

// NewReader reads api for kube-proxy's network named configured ("" to
// recognize it), reusing a listing of the networks for maxAge.
func NewReader(api API, configured string, maxAge time.Duration) *Reader {
	return &Reader{api: api, configured: configured, maxAge: maxAge, now: time.Now}
}

// Network is kube-proxy's network, from a listing younger than maxAge or a
// new one (Counts is not set).
func (r *Reader) Network() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.networks()
}

// Counts counts what kube-proxy has programmed, on the networks listed
// within maxAge (by Network, typically) or listed now.
func (r *Reader) Counts() (host.HNSCounts, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.networks()
	s.count(r.api)
	return s.Counts, s.CountErr
}

func (r *Reader) networks() Snapshot {
	now := r.now()
	if r.have && now.Sub(r.at) >= 0 && now.Sub(r.at) < r.maxAge {
		return r.last
	}
	r.last, r.at, r.have = readNetworks(r.api, r.configured), now, true
	return r.last
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
