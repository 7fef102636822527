package windows

import (
	"context"
	"errors"
	"fmt"
)

// kubeProxyServices are the names node images install kube-proxy under as a
// Windows service of its own: AKS's "kubeproxy" (NSSM, AgentBaker's
// windowscsehelper), sig-windows-tools' and EKS's "kube-proxy" (EKS wraps it in
// its service host). rke2 runs kube-proxy inside its rke2 service, and the
// HostProcess DaemonSets of sig-windows-tools and Calico in a pod: the pod's
// is restarted by ending its process (kubeproxy_pod.go), rke2's not at all.
var kubeProxyServices = []string{"kubeproxy", "kube-proxy"}

// RestartKubeProxy stops kube-proxy's service and starts it again: on start,
// kube-proxy's winkernel programs every Service anew, recreating the load
// balancers HNS lost while kube-proxy believed them programmed
// (kubernetes#110849, #135802). Nothing depends on kube-proxy, so nothing else
// stops.
func (h *Host) RestartKubeProxy(ctx context.Context) (string, error) {
	sys := h.m.System
	for _, name := range kubeProxyServices {
		_, err := sys.QueryService(name)
		if errors.Is(err, ErrNoService) {
			continue
		}
		if err != nil {
			return name, fmt.Errorf("service %s: %w", name, err)
		}
		if err := stopService(ctx, sys, name); err != nil {
			return name, err
		}
		return name, startService(ctx, sys, name)
	}
	return h.restartKubeProxyPod(ctx)
}
