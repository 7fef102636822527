package windows

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"winpool.dev/agent/internal/host"
)

// kubeProxyImage is kube-proxy's program on every node image.
const kubeProxyImage = "kube-proxy.exe"

// hostProcessShim starts the processes of HostProcess containers
// (hcsshim's job containers): a process it started, directly or through a
// script, belongs to a pod whose kubelet starts the container again when it
// ends (restartPolicy Always), as sig-windows-tools' and Calico's
// kube-proxy DaemonSets run it.
const hostProcessShim = "containerd-shim-runhcs-v1.exe"

// maxAncestors bounds the walk up the process tree (a PID can be reused by
// a process that is not the parent any more, which can make a cycle).
const maxAncestors = 8

// restartKubeProxyPod ends kube-proxy where it runs in a pod and waits for
// the kubelet to start its container again: a new kube-proxy programs every
// Service anew, as a restarted service does. A kube-proxy.exe under
// anything but the shim (rke2.exe, which restarts its children only with
// itself) is not ended: ErrNoKubeProxyService, naming what runs it.
func (h *Host) restartKubeProxyPod(ctx context.Context) (string, error) {
	procs, err := h.m.Processes.List()
	if err != nil {
		return "", fmt.Errorf("listing the host's processes: %w", err)
	}
	i := slices.IndexFunc(procs, func(p Process) bool { return strings.EqualFold(p.Image, kubeProxyImage) })
	if i < 0 {
		return "", fmt.Errorf("%w; no %s runs either", host.ErrNoKubeProxyService, kubeProxyImage)
	}
	proxy := procs[i]
	chain := ancestors(procs, proxy)
	if !slices.ContainsFunc(chain, func(image string) bool { return strings.EqualFold(image, hostProcessShim) }) {
		return "", fmt.Errorf("%w; %s (pid %d) runs under %s, which starts it again only with itself", host.ErrNoKubeProxyService,
			kubeProxyImage, proxy.PID, strings.Join(chain, " under "))
	}
	what := fmt.Sprintf("%s in its pod (pid %d)", kubeProxyImage, proxy.PID)
	if err := h.m.Processes.Terminate(proxy.PID); err != nil {
		return what, fmt.Errorf("ending %s: %w", what, err)
	}
	for {
		procs, err := h.m.Processes.List()
		if err == nil {
			if j := slices.IndexFunc(procs, func(p Process) bool {
				return strings.EqualFold(p.Image, kubeProxyImage) && p.PID != proxy.PID
			}); j >= 0 {
				return fmt.Sprintf("%s in its pod (pid %d, then %d)", kubeProxyImage, proxy.PID, procs[j].PID), nil
			}
		}
		select {
		case <-ctx.Done():
			return what, fmt.Errorf("ended %s, and the kubelet has not started it again: %w; see the pod's events (kubectl -n kube-system describe pod on this node)", what, ctx.Err())
		case <-time.After(servicePoll):
		}
	}
}

// ancestors are the images of p's parent, its parent's, and so on, as far
// as the table (or maxAncestors) goes; "an exited process" where a parent
// is gone.
func ancestors(procs []Process, p Process) []string {
	var chain []string
	for range maxAncestors {
		i := slices.IndexFunc(procs, func(q Process) bool { return q.PID == p.ParentPID && q.PID != p.PID })
		if i < 0 {
			if len(chain) == 0 {
				chain = append(chain, "an exited process")
			}
			return chain
		}
		p = procs[i]
		chain = append(chain, p.Image)
	}
	return chain
}
