package hnsmodel

import (
	"net"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	netutils "k8s.io/utils/net"
)

// service is what winkernel reads from a Service: its ports per family, and the
// ClusterIPs that, on an overlay network, each get a remote endpoint of their own.
type service struct {
	ports      []servicePort
	clusterIPs []string
}

// serviceFrom is kube-proxy's ServiceChangeTracker.serviceToServiceMap (both
// families) plus winkernel's newServiceInfo. nil: kube-proxy skips the Service
// (headless, no ClusterIP yet, ExternalName).
func serviceFrom(s *v1.Service) *service {
	if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == v1.ClusterIPNone || s.Spec.Type == v1.ServiceTypeExternalName {
		return nil
	}
	out := &service{}
	for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		cip := clusterIPOf(s, fam)
		if cip == "" {
			continue
		}
		if len(s.Spec.Ports) > 0 {
			out.clusterIPs = append(out.clusterIPs, cip)
		}
		external := distinctIPs(s.Spec.ExternalIPs, fam)
		var ingress []string
		for _, ing := range s.Status.LoadBalancer.Ingress {
			if ing.IP != "" && (ing.IPMode == nil || *ing.IPMode == v1.LoadBalancerIPModeVIP) {
				ingress = append(ingress, ing.IP)
			}
		}
		ingress = distinctIPs(ingress, fam)
		for _, p := range s.Spec.Ports {
			sp := servicePort{
				name:            p.Name,
				protocol:        p.Protocol,
				family:          fam,
				clusterIP:       cip,
				nodePort:        p.NodePort > 0,
				externalIPs:     external,
				ingressIPs:      ingress,
				localTrafficDSR: s.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal,
				preserveDIP:     s.Annotations["preserve-destination"] == "true",
				internalTrafficLocal: s.Spec.InternalTrafficPolicy != nil &&
					*s.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal,
			}
			if sp.protocol == "" {
				sp.protocol = v1.ProtocolTCP
			}
			out.ports = append(out.ports, sp)
		}
	}
	return out
}

// clusterIPOf is kube-proxy's GetClusterIPByFamily (which tolerates Services
// written before spec.ipFamilies existed).
func clusterIPOf(s *v1.Service, fam v1.IPFamily) string {
	if len(s.Spec.IPFamilies) == 0 {
		if familyOf(parseIP(s.Spec.ClusterIP)) == fam {
			return s.Spec.ClusterIP
		}
		return ""
	}
	for i, f := range s.Spec.IPFamilies {
		if f == fam && i < len(s.Spec.ClusterIPs) {
			return s.Spec.ClusterIPs[i]
		}
	}
	return ""
}

func familyOf(ip net.IP) v1.IPFamily {
	switch {
	case ip == nil:
		return v1.IPFamilyUnknown
	case ip.To4() != nil:
		return v1.IPv4Protocol
	default:
		return v1.IPv6Protocol
	}
}

// distinctIPs keeps the valid addresses of family fam, in order, once each.
func distinctIPs(in []string, fam v1.IPFamily) []string {
	var out []string
	seen := map[string]struct{}{}
	for _, s := range in {
		ip := parseIP(s)
		if familyOf(ip) != fam {
			continue
		}
		k := ip.String()
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		out = append(out, k)
	}
	return out
}

// slice is what kube-proxy's EndpointSliceCache keeps of an EndpointSlice.
type slice struct {
	// service is the namespace/name key of the Service the slice belongs to.
	service   string
	family    v1.IPFamily
	ports     []slicePort
	endpoints []endpoint // port left 0: it comes from ports
}

type slicePort struct {
	name     string
	protocol v1.Protocol
	port     int32
}

// sliceFrom returns nil for a slice kube-proxy ignores: no service-name label,
// or an address type that is not an IP family (FQDN).
func sliceFrom(s *discovery.EndpointSlice) *slice {
	svc := s.Labels[discovery.LabelServiceName]
	if svc == "" {
		return nil
	}
	out := &slice{service: s.Namespace + "/" + svc}
	switch s.AddressType {
	case discovery.AddressTypeIPv4:
		out.family = v1.IPv4Protocol
	case discovery.AddressTypeIPv6:
		out.family = v1.IPv6Protocol
	default:
		return nil
	}
	for _, p := range s.Ports {
		// kube-proxy ignores ports without a name (nil) or a number.
		if p.Name == nil || p.Port == nil || *p.Port == 0 {
			continue
		}
		sp := slicePort{name: *p.Name, protocol: v1.ProtocolTCP, port: *p.Port}
		if p.Protocol != nil {
			sp.protocol = *p.Protocol
		}
		out.ports = append(out.ports, sp)
	}
	for _, e := range s.Endpoints {
		if len(e.Addresses) == 0 {
			continue
		}
		ep := endpoint{
			ready:       e.Conditions.Ready == nil || *e.Conditions.Ready,
			serving:     e.Conditions.Serving == nil || *e.Conditions.Serving,
			terminating: e.Conditions.Terminating != nil && *e.Conditions.Terminating,
		}
		ep.ip = e.Addresses[0]
		if ip := parseIP(e.Addresses[0]); ip != nil {
			ep.ip = ip.String()
		}
		if e.NodeName != nil {
			ep.node = *e.NodeName
		}
		out.endpoints = append(out.endpoints, ep)
	}
	return out
}

func parseIP(s string) net.IP { return netutils.ParseIPSloppy(s) }
