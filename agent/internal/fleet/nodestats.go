package fleet

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
}

// stats are the fleet's nodes' statistics, by node name.
func (f *Fleet) stats() []NodeStats {
	var out []NodeStats
	for _, n := range f.nodes.appendTo(nil) {
		m := n.host.Stats()
		n.mu.Lock()
		restarts := n.restarts
		n.mu.Unlock()
		out = append(out, NodeStats{
			Node: n.name, Build: m.Build.String(), Installs: m.Installs, Reboots: m.Reboots,
			RebootReasons: append([]string{}, m.RebootReasons...), RuntimeSwaps: m.RuntimeSwaps, Rollbacks: m.Rollbacks,
			AgentRestarts: restarts,
		})
	}
	slices.SortFunc(out, func(a, b NodeStats) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// writeStats writes the statistics to path as a JSON list, whole or not at
// all (a reader never sees half a file).
func writeStats(path string, stats []NodeStats) error {
	data, err := json.MarshalIndent(stats, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
