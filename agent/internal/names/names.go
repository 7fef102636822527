// Package names holds the Node labels and annotations the agent reads. They
// are the contract with the operator (../../src/api/names.rs); the agent
// writes no Node (its report: package report).
package names

const (
	LabelPool     = "winpool.dev/pool"
	LabelRevision = "winpool.dev/revision"

	// LabelTarget marks the revision ConfigMap of a pool's target revision
	// (value "true"; the operator moves it when the spec changes): what the
	// agents preflight before any node of theirs is started.
	LabelTarget = "winpool.dev/target"

	// AnnStartedAt is written by the operator when it starts a node's update
	// (again on every retry) and only read by the agent: a report is the
	// answer to the attempt it names, so a report decided for an earlier
	// attempt can never land on a later one (src/api/names.rs ANN_STARTED_AT).
	AnnStartedAt = "winpool.dev/started-at"
	// AnnInstallBudget is written by the operator with AnnStartedAt: how long
	// that start lets the servicing task run (the pool's
	// rollout.timeouts.install, never below nodeTimeout), as a Go duration
	// (src/api/names.rs ANN_INSTALL_BUDGET).
	AnnInstallBudget = "winpool.dev/install-budget"
	// AnnUndo is written by the operator with AnnStartedAt when it starts a
	// node again to take its cumulative update off (rollout.undo: a health
	// gate held the node in its soak after the update); its value names the
	// gate. The agent then removes the update instead of installing one
	// (src/api/names.rs ANN_UNDO).
	AnnUndo = "winpool.dev/undo"

	// AnnState is the operator's state of the node's update (Draining,
	// Applying, Verifying, Updated, Failed), only read by the agent: it
	// touches the host only while the operator has the node Applying (or
	// Verifying), never one being drained or back in service
	// (src/api/names.rs ANN_STATE).
	AnnState       = "winpool.dev/state"
	AnnStateSince  = "winpool.dev/state-since"
	StateApplying  = "Applying"
	StateFailed    = "Failed"
	StateVerifying = "Verifying"

	// AnnHNSRepair is written by the operator on a member whose HNS lost what
	// it held in this boot, with the pool's hns.repair on: the Node's bootID
	// the agent is asked to restart kube-proxy in, once (src/api/names.rs
	// ANN_HNS_REPAIR). An ask for another boot is no ask.
	AnnHNSRepair = "winpool.dev/hns-repair"

	// ConfigMapKey is the key of a revision ConfigMap
	// (winpool-<pool>-<revision> in the agents' namespace) holding the JSON
	// revision configuration.
	ConfigMapKey = "config.json"

	// LabelCSIProxyApp selects the pods of winpool's CSI Proxy DaemonSets
	// (src/csi_proxy.rs); LabelCSIProxyVersion names the version a pod runs.
	LabelCSIProxyApp     = "app.kubernetes.io/name=winpool-csi-proxy"
	LabelCSIProxyVersion = "winpool.dev/csi-proxy-version"
	// LabelPodNetworkApp selects the pods of winpool's pod-network
	// DaemonSets (src/pod_network.rs).
	LabelPodNetworkApp = "app.kubernetes.io/name=winpool-pod-network"

	// FieldManager names the agent's writes in managedFields.
	FieldManager = "winpool-agent"
)

// ApplyStatus is the status of the agent's last apply (its report's
// apply.status); apply.revision names the revision it is about.
type ApplyStatus string

const (
	StatusApplying  ApplyStatus = "Applying"
	StatusRebooting ApplyStatus = "Rebooting"
	// StatusRebootRequired: the update is installed and Windows asks for a
	// reboot, but the node is in service (a hotpatch start, not cordoned):
	// the agent waits for the operator to drain it, then reboots.
	StatusRebootRequired ApplyStatus = "RebootRequired"
	StatusSucceeded      ApplyStatus = "Succeeded"
	StatusFailed         ApplyStatus = "Failed"
)

// ConfigMapName is the revision ConfigMap the operator writes before it moves
// a node's revision label.
func ConfigMapName(pool, revision string) string { return "winpool-" + pool + "-" + revision }
