package fleet

import (
	"slices"
	"strings"
	"time"

	"winpool.dev/agent/fleet/hnsmodel"
)

// NodeStats is what one simulated machine went through while the fleet ran
// (--stats-file): what a test asserts about the host side of a rollout, such
// as how often and why a node rebooted, without reading logs.
type NodeStats struct {
	Node     string `json:"node"`
	Build    string `json:"build"`
	Installs int    `json:"installs"`
	Reboots  int    `json:"reboots"`
	// RebootReasons: the reason the agent gave for each reboot, in order.
	RebootReasons []string `json:"rebootReasons"`
	RuntimeSwaps  int      `json:"runtimeSwaps"`
	Rollbacks     int      `json:"rollbacks"`
	// AgentRestarts: the agent restarts the agent-restart fault made.
	AgentRestarts int `json:"agentRestarts"`
	// Programming: how long after each Service or EndpointSlice change this
	// node's HNS held it (while the node was up).
	Programming hnsmodel.Summary `json:"programming"`
	// HNSFaultAt: when its HNS fault (hns-collapse, hns-restart, lb-deleted) struck.
	HNSFaultAt *time.Time `json:"hnsFaultAt,omitempty"`
	// KubeProxyRestartedAt: when kube-proxy's service was last restarted
	// (by the agent, asked by the operator's hns.repair).
	KubeProxyRestartedAt *time.Time `json:"kubeProxyRestartedAt,omitempty"`
	// DownloadsCut and DownloadsResumed: downloads cut mid-body (download-cut)
	// and Range requests answered with the rest of a file.
	DownloadsCut     int `json:"downloadsCut,omitempty"`
	DownloadsResumed int `json:"downloadsResumed,omitempty"`
	// UpdateDownloads: Windows Update downloads made (an update staged
	// before the drain is not downloaded again); BackgroundDownloads: those
	// made at background priority, while the node served (staging).
	UpdateDownloads     int `json:"updateDownloads"`
	BackgroundDownloads int `json:"backgroundDownloads"`
	// Hotpatches: updates landed in memory, without a reboot.
	Hotpatches int `json:"hotpatches"`
	// Undos: cumulative updates taken off (DISM /Remove-Package).
	Undos int `json:"undos"`
}

// Latency is the fleet's network-programming latency as --latency-file
// writes it: the summary, and the histogram's non-empty buckets.
type Latency struct {
	hnsmodel.Summary
	Buckets []LatencyBucket `json:"buckets"`
	// AfterCatchUp: the part programmed in the first two syncs after a
	// node's catch-up from its boot.
	AfterCatchUp *hnsmodel.Summary `json:"afterCatchUp,omitempty"`
}

// LatencyBucket: Count latencies were at most LeMs (and above the bucket before).
type LatencyBucket struct {
	LeMs  float64 `json:"leMs"`
	Count int64   `json:"count"`
}

func latencyOf(h hnsmodel.Histogram) Latency {
	l := Latency{Summary: h.Summary(), Buckets: []LatencyBucket{}}
	for i, n := range h.Buckets {
		if n > 0 {
			l.Buckets = append(l.Buckets, LatencyBucket{LeMs: float64(hnsmodel.BucketBound(i)) / float64(time.Millisecond), Count: n})
		}
	}
	return l
}

// stats are the fleet's nodes' statistics, by node name.
func (f *Fleet) stats() []NodeStats {
	var out []NodeStats
	for _, n := range f.nodes.appendTo(nil) {
		m := n.host.Stats()
		n.mu.Lock()
		restarts := n.restarts
		var faultAt *time.Time
		if !n.hnsFaultAt.IsZero() {
			at := n.hnsFaultAt
			faultAt = &at
		}
		n.mu.Unlock()
		programming := f.programming.Node(n.name)
		out = append(out, NodeStats{
			Node: n.name, Build: m.Build.String(), Installs: m.Installs, Reboots: m.Reboots,
			RebootReasons: append([]string{}, m.RebootReasons...), RuntimeSwaps: m.RuntimeSwaps, Rollbacks: m.Rollbacks,
			AgentRestarts: restarts, Programming: programming.Summary(), HNSFaultAt: faultAt,
			DownloadsCut: m.DownloadsCut, DownloadsResumed: m.DownloadsResumed,
			UpdateDownloads: m.UpdateDownloads, BackgroundDownloads: m.BackgroundDownloads, Hotpatches: m.Hotpatches,
			Undos: m.Undos,
		})
		if !m.KubeProxyStarted.IsZero() {
			at := m.KubeProxyStarted
			out[len(out)-1].KubeProxyRestartedAt = &at
		}
	}
	slices.SortFunc(out, func(a, b NodeStats) int { return strings.Compare(a.Node, b.Node) })
	return out
}
