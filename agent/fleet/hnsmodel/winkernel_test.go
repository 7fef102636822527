package hnsmodel

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"winpool.dev/agent/internal/host"
)

const self = "win-0" // the node whose HNS a case looks at, when it matters

// What winkernel programs, case by case. Each case names the kube-proxy rule
// it checks (pkg/proxy/winkernel/proxier.go syncProxyRules unless said).
func TestWhatWinkernelPrograms(t *testing.T) {
	three := ready("10.244.1.1", "10.244.2.1", "10.244.3.1")
	cases := []struct {
		name     string
		services []*v1.Service
		slices   []*discovery.EndpointSlice
		overlay  bool
		want     host.HNSCounts
	}{
		{
			name:     "ClusterIP: one load balancer per port, one remote endpoint per address",
			services: []*v1.Service{svc("web")},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", three)},
			want:     host.HNSCounts{LoadBalancers: 1, RemoteEndpoints: 3},
		},
		{
			name:     "overlay: the ClusterIP gets a remote endpoint of its own",
			services: []*v1.Service{svc("web")},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", three)},
			overlay:  true,
			want:     host.HNSCounts{LoadBalancers: 1, RemoteEndpoints: 4},
		},
		{
			name:     "overlay: the ClusterIP endpoint exists even without endpoints, load balancers do not",
			services: []*v1.Service{svc("web")},
			overlay:  true,
			want:     host.HNSCounts{LoadBalancers: 0, RemoteEndpoints: 1},
		},
		{
			name:     "each port is a load balancer; its endpoints share the remote endpoints",
			services: []*v1.Service{svc("web", ports("http", "https"))},
			slices: []*discovery.EndpointSlice{endpointSlice("web", "web-1", three, slicePorts(
				slicePortOf("http", v1.ProtocolTCP, 8080), slicePortOf("https", v1.ProtocolTCP, 8443)))},
			want: host.HNSCounts{LoadBalancers: 2, RemoteEndpoints: 3},
		},
		{
			name:     "a port without endpoints of its name gets no load balancer",
			services: []*v1.Service{svc("web", ports("http", "metrics"))},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", three)},
			want:     host.HNSCounts{LoadBalancers: 1, RemoteEndpoints: 3},
		},
		{
			name:     "the protocol is part of the port's identity",
			services: []*v1.Service{svc("dns", udp)},
			slices:   []*discovery.EndpointSlice{endpointSlice("dns", "dns-1", three)},
			want:     host.HNSCounts{},
		},
		{
			name:     "NodePort: plus one for the node port",
			services: []*v1.Service{svc("web", nodePort)},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", three)},
			want:     host.HNSCounts{LoadBalancers: 2, RemoteEndpoints: 3},
		},
		{
			name:     "LoadBalancer: ClusterIP, node port and one per ingress IP",
			services: []*v1.Service{svc("web", loadBalancer("20.1.1.1", "20.1.1.2"))},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", three)},
			want:     host.HNSCounts{LoadBalancers: 4, RemoteEndpoints: 3},
		},
		{
			name:     "LoadBalancer without node ports",
			services: []*v1.Service{svc("web", loadBalancer("20.1.1.1"), noNodePorts)},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", three)},
			want:     host.HNSCounts{LoadBalancers: 2, RemoteEndpoints: 3},
		},
		{
			name: "ingress: a repeated IP is one load balancer; Proxy mode and hostnames none",
			services: []*v1.Service{
				svc("a", loadBalancer("20.1.1.1", "20.1.1.1"), noNodePorts),
				svc("b", clusterIPs("10.96.0.11"), loadBalancer("20.1.1.2"), ingressMode(v1.LoadBalancerIPModeProxy), noNodePorts),
				svc("c", clusterIPs("10.96.0.12"), loadBalancer(), ingressHostname("lb.example.com"), noNodePorts),
			},
			slices: []*discovery.EndpointSlice{
				endpointSlice("a", "a-1", ready("10.244.1.1")),
				endpointSlice("b", "b-1", ready("10.244.1.2")),
				endpointSlice("c", "c-1", ready("10.244.1.3")),
			},
			want: host.HNSCounts{LoadBalancers: 2 + 1 + 1, RemoteEndpoints: 3},
		},
		{
			name:     "external IPs: one load balancer each, of the proxier's family only",
			services: []*v1.Service{svc("web", externalIPs("192.0.2.1", "192.0.2.2", "2001:db8::1", "not-an-ip"))},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", three)},
			want:     host.HNSCounts{LoadBalancers: 3, RemoteEndpoints: 3},
		},
		{
			name:     "headless Services are not proxied",
			services: []*v1.Service{svc("db", headless)},
			slices:   []*discovery.EndpointSlice{endpointSlice("db", "db-1", three)},
			overlay:  true,
			want:     host.HNSCounts{},
		},
		{
			name:     "ExternalName Services are not proxied",
			services: []*v1.Service{svc("ext", externalName)},
			slices:   []*discovery.EndpointSlice{endpointSlice("ext", "ext-1", three)},
			overlay:  true,
			want:     host.HNSCounts{},
		},
		{
			name:   "slices without a Service are not programmed",
			slices: []*discovery.EndpointSlice{endpointSlice("gone", "gone-1", three)},
			want:   host.HNSCounts{},
		},
		{
			name:     "slices without the service-name label and FQDN slices are ignored",
			services: []*v1.Service{svc("web")},
			slices: []*discovery.EndpointSlice{
				endpointSlice("web", "web-1", three, unlabelled),
				endpointSlice("web", "web-2", three, fqdn),
			},
			want: host.HNSCounts{},
		},
		{
			name:     "dual-stack: each family's proxier programs its own",
			services: []*v1.Service{svc("web", clusterIPs("10.96.0.10", "fd00::10"), nodePort)},
			slices: []*discovery.EndpointSlice{
				endpointSlice("web", "web-v4", three),
				endpointSlice("web", "web-v6", ready("fd00:244::1", "fd00:244::2"), ipv6),
			},
			overlay: true,
			want:    host.HNSCounts{LoadBalancers: 4, RemoteEndpoints: 5 + 2},
		},
		{
			name:     "dual-stack with endpoints of one family: the other programs nothing",
			services: []*v1.Service{svc("web", clusterIPs("fd00::10", "10.96.0.10"))},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-v4", three)},
			want:     host.HNSCounts{LoadBalancers: 1, RemoteEndpoints: 3},
		},
		{
			name:     "single-stack IPv6: IPv4 slices are not its endpoints",
			services: []*v1.Service{svc("web", clusterIPs("fd00::10"))},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-v4", three)},
			want:     host.HNSCounts{},
		},
		{
			name:     "a Service without spec.ipFamilies (older clients) is read from its ClusterIP",
			services: []*v1.Service{func() *v1.Service { s := svc("web"); s.Spec.IPFamilies = nil; return s }()},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", three)},
			want:     host.HNSCounts{LoadBalancers: 1, RemoteEndpoints: 3},
		},
		{
			name:     "not-ready endpoints are skipped; with none left there is no policy",
			services: []*v1.Service{svc("web", nodePort)},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", []ep{notReady("10.244.1.1"), terminatingGone("10.244.1.2")})},
			want:     host.HNSCounts{},
		},
		{
			name:     "terminating but serving endpoints are skipped while others are ready",
			services: []*v1.Service{svc("web", nodePort)},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", append(ready("10.244.1.1"), terminatingServing("10.244.1.2")))},
			want:     host.HNSCounts{LoadBalancers: 2, RemoteEndpoints: 1},
		},
		{
			name:     "without ingress IPs, terminating-only endpoints are not used (no terminating check)",
			services: []*v1.Service{svc("web", nodePort)},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", []ep{terminatingServing("10.244.1.1")})},
			want:     host.HNSCounts{},
		},
		{
			name:     "with ingress IPs, all terminating: serving ones are used, node port left out, ingress kept",
			services: []*v1.Service{svc("web", loadBalancer("20.1.1.1"))},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", []ep{terminatingServing("10.244.1.1"), terminatingGone("10.244.1.2")})},
			want:     host.HNSCounts{LoadBalancers: 2, RemoteEndpoints: 1},
		},
		{
			name:     "an address shared by Services is one remote endpoint",
			services: []*v1.Service{svc("a"), svc("b", clusterIPs("10.96.0.11"))},
			slices: []*discovery.EndpointSlice{
				endpointSlice("a", "a-1", three),
				endpointSlice("b", "b-1", ready("10.244.1.1")),
			},
			want: host.HNSCounts{LoadBalancers: 2, RemoteEndpoints: 3},
		},
		{
			name:     "an endpoint in two slices (moving) counts once, the live copy wins",
			services: []*v1.Service{svc("web")},
			slices: []*discovery.EndpointSlice{
				endpointSlice("web", "web-1", []ep{terminatingGone("10.244.1.1")}),
				endpointSlice("web", "web-2", ready("10.244.1.1")),
			},
			want: host.HNSCounts{LoadBalancers: 1, RemoteEndpoints: 1},
		},
		{
			name:     "an endpoint in two slices (moving): a terminating copy does not replace the live one",
			services: []*v1.Service{svc("web")},
			slices: []*discovery.EndpointSlice{
				endpointSlice("web", "web-1", ready("10.244.1.1")),
				endpointSlice("web", "web-2", []ep{terminatingGone("10.244.1.1")}),
			},
			want: host.HNSCounts{LoadBalancers: 1, RemoteEndpoints: 1},
		},
		{
			name:     "an endpoint on this node is local: a backend, no remote endpoint",
			services: []*v1.Service{svc("web")},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", append(ready("10.244.1.1"), readyOn("10.244.0.5", self)))},
			want:     host.HNSCounts{LoadBalancers: 1, RemoteEndpoints: 1},
		},
		{
			name:     "internalTrafficPolicy Local: no ClusterIP policy without a local endpoint",
			services: []*v1.Service{svc("web", internalLocal)},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", three)},
			want:     host.HNSCounts{LoadBalancers: 0, RemoteEndpoints: 3},
		},
		{
			name:     "internalTrafficPolicy Local with a local endpoint",
			services: []*v1.Service{svc("web", internalLocal)},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", append(three, readyOn("10.244.0.5", self)))},
			want:     host.HNSCounts{LoadBalancers: 1, RemoteEndpoints: 3},
		},
		{
			name:     "both traffic policies Local: remote endpoints are not even created",
			services: []*v1.Service{svc("web", nodePort, internalLocal, externalLocal)},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", append(three, readyOn("10.244.0.5", self)))},
			want:     host.HNSCounts{LoadBalancers: 2, RemoteEndpoints: 0},
		},
		{
			name:     "externalTrafficPolicy Local: node port and external IPs only where an endpoint runs",
			services: []*v1.Service{svc("web", nodePort, externalLocal, externalIPs("192.0.2.1"))},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", three)},
			want:     host.HNSCounts{LoadBalancers: 1, RemoteEndpoints: 3},
		},
		{
			name:     "externalTrafficPolicy Local with a local endpoint",
			services: []*v1.Service{svc("web", nodePort, externalLocal, externalIPs("192.0.2.1"))},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", append(three, readyOn("10.244.0.5", self)))},
			want:     host.HNSCounts{LoadBalancers: 3, RemoteEndpoints: 3},
		},
		{
			name: "externalTrafficPolicy Local LoadBalancer, no local endpoint: the terminating checks see " +
				"no endpoint, so nothing is filtered (not-ready ones too) and only the ClusterIP is programmed",
			services: []*v1.Service{svc("web", loadBalancer("20.1.1.1"), externalLocal)},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", append(three, notReady("10.244.9.9")))},
			want:     host.HNSCounts{LoadBalancers: 1, RemoteEndpoints: 4},
		},
		{
			name:     "externalTrafficPolicy Local LoadBalancer with a local endpoint",
			services: []*v1.Service{svc("web", loadBalancer("20.1.1.1"), externalLocal)},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", append(append(three, notReady("10.244.9.9")), readyOn("10.244.0.5", self)))},
			want:     host.HNSCounts{LoadBalancers: 3, RemoteEndpoints: 3},
		},
		{
			name:     "preserve-destination: node port and ingress use local endpoints only",
			services: []*v1.Service{svc("web", loadBalancer("20.1.1.1"), preserveDestination)},
			slices:   []*discovery.EndpointSlice{endpointSlice("web", "web-1", three)},
			want:     host.HNSCounts{LoadBalancers: 1, RemoteEndpoints: 3},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := New(func(n string) bool { return n == self })
			for _, s := range tc.services {
				m.SetService(s)
			}
			for _, s := range tc.slices {
				m.SetSlice(s)
			}
			if got := m.Counts(self, tc.overlay); got != tc.want {
				t.Errorf("node %s: got %+v, want %+v", self, got, tc.want)
			}
		})
	}
}
