package decide

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"winpool.dev/agent/internal/names"
	"winpool.dev/agent/internal/report"
)

// contract is ../names/testdata/contract.json, which the operator's own code
// writes (src/contract.rs): every name, state and status the two sides
// share, and what its name functions make of a few examples.
type contract struct {
	Labels        map[string]string `json:"labels"`
	Annotations   map[string]string `json:"annotations"`
	NodeStates    map[string]string `json:"nodeStates"`
	ApplyStatuses map[string]string `json:"applyStatuses"`
	ConfigMapKey  string            `json:"configMapKey"`
	NameExamples  map[string]string `json:"nameExamples"`
	// HNSRepairResults: what the report's hnsRepair.result may say.
	HNSRepairResults []string `json:"hnsRepairResults"`
}

// The agent's constants and name functions agree with the operator's, value
// by value: a rename on either side fails here, not in a cluster.
func TestTheAgentKeepsTheOperatorsContract(t *testing.T) {
	data, err := os.ReadFile("../names/testdata/contract.json")
	if err != nil {
		t.Fatal(err)
	}
	var c contract
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	ours := map[string]map[string]string{
		"labels": {
			"pool": names.LabelPool, "revision": names.LabelRevision, "target": names.LabelTarget,
			"csiProxyVersion": names.LabelCSIProxyVersion, "csiProxyApp": names.LabelCSIProxyApp, "podNetworkApp": names.LabelPodNetworkApp,
		},
		"annotations": {
			"state": names.AnnState, "stateSince": names.AnnStateSince, "startedAt": names.AnnStartedAt,
			"hnsRepair": names.AnnHNSRepair,
		},
		"nodeStates": {"applying": names.StateApplying, "verifying": names.StateVerifying, "failed": names.StateFailed},
		"applyStatuses": {
			"applying": string(names.StatusApplying), "rebooting": string(names.StatusRebooting),
			"rebootRequired": string(names.StatusRebootRequired),
			"succeeded":      string(names.StatusSucceeded), "failed": string(names.StatusFailed),
		},
		"nameExamples": {
			"configMap(win22, 5d8f2c1a9b)":             names.ConfigMapName("win22", "5d8f2c1a9b"),
			"csiProxyDaemonSet(win22, 1.1.3)":          CSIProxyDaemonSet("win22", "1.1.3"),
			"csiProxyDaemonSet(win22, v1.2.0+build.1)": CSIProxyDaemonSet("win22", "v1.2.0+build.1"),
			"podNetworkDaemonSet(win22)":               PodNetworkDaemonSet("win22"),
		},
	}
	theirs := map[string]map[string]string{
		"labels": c.Labels, "annotations": c.Annotations, "nodeStates": c.NodeStates, "applyStatuses": c.ApplyStatuses, "nameExamples": c.NameExamples,
	}
	for group, want := range theirs {
		if len(want) == 0 {
			t.Errorf("the contract has no %s", group)
		}
		for key, value := range want {
			got, ok := ours[group][key]
			switch {
			case !ok:
				t.Errorf("%s.%s: the operator names %q, the agent has no such name", group, key, value)
			case got != value:
				t.Errorf("%s.%s: the agent has %q, the operator %q", group, key, got, value)
			}
		}
		for key := range ours[group] {
			if _, ok := want[key]; !ok {
				t.Errorf("%s.%s: the agent has it, the contract does not", group, key)
			}
		}
	}
	results := []string{string(report.RepairRestarted), string(report.RepairFailed), string(report.RepairUnsupported)}
	if !slices.Equal(results, c.HNSRepairResults) {
		t.Errorf("hnsRepairResults: the agent writes %q, the operator reads %q", results, c.HNSRepairResults)
	}
	if names.ConfigMapKey != c.ConfigMapKey {
		t.Errorf("configMapKey: the agent has %q, the operator %q", names.ConfigMapKey, c.ConfigMapKey)
	}
}
