package agent

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"winpool.dev/agent/internal/names"
	"winpool.dev/agent/internal/versions"
)

// csiProxyVersion is the CSI Proxy the node runs: the host's csiproxy
// service (a node image that ships it, as on AKS), else the pod of winpool's
// CSI Proxy DaemonSet on this node.
func (a *agent) csiProxyVersion() string {
	if a.obs.CSIProxyVersion != "" {
		return a.obs.CSIProxyVersion
	}
	return a.csiPod
}

// csiProxyHost describes the host's CSI Proxy service when it runs and its
// pipes answer ("" otherwise): a node image's CSI Proxy, which satisfies a
// pool that wants one whatever its version says, and beside which winpool's
// CSI Proxy DaemonSet must not run.
func (a *agent) csiProxyHost() string {
	h := a.obs.CSIProxyHost
	if h == nil || !h.Running || !h.PipesAnswer {
		return ""
	}
	return h.Describe()
}

// observeCSIProxy reads the CSI Proxy pod on this node (only while a
// revision asks for CSI Proxy: 5,000 agents listing pods every few seconds
// would load the API server for nothing) and returns the version the node
// runs and how long it has not been want for revision rev.
func (a *agent) observeCSIProxy(ctx context.Context, rev, want string) (string, time.Duration) {
	// A running host service wins over a pod (csiProxyVersion): no need to ask the API.
	if a.obs.CSIProxyVersion == "" {
		a.refreshCSIProxyPod(ctx)
	}
	have := a.csiProxyVersion()
	if cmp, err := versions.Compare(have, want); (err == nil && cmp == 0) || a.csiProxyHost() != "" {
		a.csiWrongRev, a.csiWrongSince = "", time.Time{}
		return have, 0
	}
	if a.csiWrongRev != rev || a.csiWrongSince.IsZero() {
		a.csiWrongRev, a.csiWrongSince = rev, time.Now()
	}
	return have, time.Since(a.csiWrongSince)
}

// refreshCSIProxyPod reads the CSI Proxy pod on this node into csiPod; an
// API error keeps the last observation.
func (a *agent) refreshCSIProxyPod(ctx context.Context) {
	pods, err := a.o.Client.CoreV1().Pods(a.o.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: names.LabelCSIProxyApp,
		FieldSelector: "spec.nodeName=" + a.o.NodeName,
	})
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("cannot list the CSI Proxy pod on this node (keeping the last observation)", "err", err)
		}
		return
	}
	a.csiPod = runningCSIProxy(pods.Items, a.o.NodeName)
}

// runningCSIProxy is the version of the CSI Proxy pod that runs and is
// ready: its image tag as the kubelet reports it (what started, not what was
// asked), or its version label when the image is pinned by digest. "" none.
func runningCSIProxy(pods []corev1.Pod, node string) string {
	for _, p := range pods {
		if p.Spec.NodeName != node || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.Name != "csi-proxy" || !c.Ready || c.State.Running == nil {
				continue
			}
			if tag := imageTag(c.Image); tag != "" {
				return strings.TrimPrefix(tag, "v")
			}
			return strings.TrimPrefix(p.Labels[names.LabelCSIProxyVersion], "v")
		}
	}
	return ""
}

// imageTag is the tag of an image reference ("" when it has none, or is
// pinned by digest): registry ports and digests are not tags.
func imageTag(image string) string {
	if strings.Contains(image, "@") {
		return ""
	}
	name := image[strings.LastIndex(image, "/")+1:]
	if i := strings.LastIndex(name, ":"); i >= 0 {
		return name[i+1:]
	}
	return ""
}
