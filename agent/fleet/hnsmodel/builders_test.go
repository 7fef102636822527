package hnsmodel

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Builders of Services and EndpointSlices as the API server stores them.

type svcOpt func(*v1.Service)

func svc(name string, opts ...svcOpt) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  "10.96.0.10",
			ClusterIPs: []string{"10.96.0.10"},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports:      []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt(8080)}},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func clusterIPs(ips ...string) svcOpt {
	return func(s *v1.Service) {
		s.Spec.ClusterIP = ips[0]
		s.Spec.ClusterIPs = ips
		s.Spec.IPFamilies = nil
		for _, ip := range ips {
			if familyOf(parseIP(ip)) == v1.IPv6Protocol {
				s.Spec.IPFamilies = append(s.Spec.IPFamilies, v1.IPv6Protocol)
			} else {
				s.Spec.IPFamilies = append(s.Spec.IPFamilies, v1.IPv4Protocol)
			}
		}
	}
}

func headless(s *v1.Service) {
	s.Spec.ClusterIP = v1.ClusterIPNone
	s.Spec.ClusterIPs = []string{v1.ClusterIPNone}
}

func externalName(s *v1.Service) {
	s.Spec.Type = v1.ServiceTypeExternalName
	s.Spec.ExternalName = "db.example.com"
}

func nodePort(s *v1.Service) {
	s.Spec.Type = v1.ServiceTypeNodePort
	for i := range s.Spec.Ports {
		s.Spec.Ports[i].NodePort = int32(30080 + i)
	}
}

func loadBalancer(ingress ...string) svcOpt {
	return func(s *v1.Service) {
		nodePort(s)
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		for _, ip := range ingress {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
		}
	}
}

func noNodePorts(s *v1.Service) {
	f := false
	s.Spec.AllocateLoadBalancerNodePorts = &f
	for i := range s.Spec.Ports {
		s.Spec.Ports[i].NodePort = 0
	}
}

func ingressMode(mode v1.LoadBalancerIPMode) svcOpt {
	return func(s *v1.Service) {
		for i := range s.Status.LoadBalancer.Ingress {
			s.Status.LoadBalancer.Ingress[i].IPMode = &mode
		}
	}
}

func ingressHostname(h string) svcOpt {
	return func(s *v1.Service) {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{Hostname: h})
	}
}

func externalIPs(ips ...string) svcOpt {
	return func(s *v1.Service) { s.Spec.ExternalIPs = ips }
}

func ports(names ...string) svcOpt {
	return func(s *v1.Service) {
		s.Spec.Ports = nil
		for i, n := range names {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: n, Protocol: v1.ProtocolTCP, Port: int32(80 + i)})
		}
	}
}

func udp(s *v1.Service) {
	for i := range s.Spec.Ports {
		s.Spec.Ports[i].Protocol = v1.ProtocolUDP
	}
}

func externalLocal(s *v1.Service) {
	s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	s.Spec.HealthCheckNodePort = 32000
}

func internalLocal(s *v1.Service) {
	p := v1.ServiceInternalTrafficPolicyLocal
	s.Spec.InternalTrafficPolicy = &p
}

func preserveDestination(s *v1.Service) {
	s.Annotations = map[string]string{"preserve-destination": "true"}
}

// ep is an endpoint: address, node, and its conditions.
type ep struct {
	ip                          string
	node                        string
	ready, serving, terminating *bool
}

func b(v bool) *bool { return &v }

func readyOn(ip, node string) ep { return ep{ip: ip, node: node} }
func notReady(ip string) ep      { return ep{ip: ip, node: "other", ready: b(false), serving: b(false)} }
func terminatingServing(ip string) ep {
	return ep{ip: ip, node: "other", ready: b(false), serving: b(true), terminating: b(true)}
}
func terminatingGone(ip string) ep {
	return ep{ip: ip, node: "other", ready: b(false), serving: b(false), terminating: b(true)}
}

func ready(ips ...string) []ep {
	var out []ep
	for _, ip := range ips {
		out = append(out, ep{ip: ip, node: "other"})
	}
	return out
}

type sliceOpt func(*discovery.EndpointSlice)

func endpointSlice(service, name string, eps []ep, opts ...sliceOpt) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name,
			Labels: map[string]string{discovery.LabelServiceName: service},
		},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{slicePortOf("http", v1.ProtocolTCP, 8080)},
	}
	for _, e := range eps {
		de := discovery.Endpoint{Addresses: []string{e.ip}, Conditions: discovery.EndpointConditions{
			Ready: e.ready, Serving: e.serving, Terminating: e.terminating,
		}}
		if e.node != "" {
			n := e.node
			de.NodeName = &n
		}
		s.Endpoints = append(s.Endpoints, de)
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func slicePortOf(name string, proto v1.Protocol, port int32) discovery.EndpointPort {
	return discovery.EndpointPort{Name: &name, Protocol: &proto, Port: &port}
}

func ipv6(s *discovery.EndpointSlice) { s.AddressType = discovery.AddressTypeIPv6 }

func fqdn(s *discovery.EndpointSlice) { s.AddressType = discovery.AddressTypeFQDN }

func slicePorts(p ...discovery.EndpointPort) sliceOpt {
	return func(s *discovery.EndpointSlice) { s.Ports = p }
}

func unlabelled(s *discovery.EndpointSlice) { s.Labels = nil }

func ipsFrom(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s.%d", prefix, i+1))
	}
	return out
}
