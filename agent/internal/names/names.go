// Package names holds the Node labels and annotations the agent reads and
// writes. They are the contract with the operator (../../src/api.rs, names).
package names

const (
	LabelPool     = "winpool.dev/pool"
	LabelRevision = "winpool.dev/revision"

	// Written by the agent, and only these (the ValidatingAdmissionPolicy
	// shipped by the chart refuses any other change an agent tries).
	AnnAppliedRevision = "winpool.dev/applied-revision"
	AnnApplyStatus     = "winpool.dev/apply-status"
	AnnApplyMessage    = "winpool.dev/apply-message"
	AnnAgentVersion    = "winpool.dev/agent-version"
	AnnCSIProxyVersion = "winpool.dev/csi-proxy-version"
	AnnCNIMode         = "winpool.dev/cni-mode"
	// AnnRuntimeService is how containerd's service is installed:
	// "containerd", or "containerd (nssm)" under a service wrapper.
	AnnRuntimeService = "winpool.dev/runtime-service"
	// AnnCSIProxyHost names a CSI Proxy host service whose pipes answer
	// ("csi-proxy (nssm)" on AKS, "csiproxy"); absent when there is none.
	AnnCSIProxyHost    = "winpool.dev/csi-proxy-host"
	AnnHNSLoadBalancer = "winpool.dev/hns-load-balancers"
	AnnHNSEndpoints    = "winpool.dev/hns-endpoints"
	// AnnPreflight is the agent's read-only checks of its host for the
	// revision AnnPreflightRevision names (the pool's target, before the
	// operator starts the node): PreflightReady, or PreflightBlocked and
	// the reasons. The operator cordons only a node whose preflight passed
	// for the revision it starts it with (src/api.rs ANN_PREFLIGHT).
	AnnPreflight         = "winpool.dev/preflight"
	AnnPreflightRevision = "winpool.dev/preflight-revision"
	PreflightReady       = "Ready"
	PreflightBlocked     = "Blocked: "

	// LabelTarget marks the revision ConfigMap of a pool's target revision
	// (value "true"; the operator moves it when the spec changes): what the
	// agents preflight before any node of theirs is started.
	LabelTarget = "winpool.dev/target"

	// AnnStartedAt is written by the operator when it starts a node's update
	// (again on every retry) and only read by the agent: a report is the
	// answer to the attempt it names, so a report decided for an earlier
	// attempt can never land on a later one (src/api.rs ANN_STARTED_AT).
	AnnStartedAt = "winpool.dev/started-at"

	// AnnState is the operator's state of the node's update (Draining,
	// Applying, Verifying, Updated, Failed), only read by the agent: it
	// touches the host only while the operator has the node Applying (or
	// Verifying), never one being drained or back in service
	// (src/api.rs ANN_STATE).
	AnnState       = "winpool.dev/state"
	StateApplying  = "Applying"
	StateVerifying = "Verifying"

	// ConfigMapKey is the key of a revision ConfigMap
	// (winpool-<pool>-<revision> in the agents' namespace) holding the JSON
	// revision configuration.
	ConfigMapKey = "config.json"

	// LabelCSIProxyApp selects the pods of winpool's CSI Proxy DaemonSets
	// (src/csi_proxy.rs); LabelCSIProxyVersion names the version a pod runs.
	LabelCSIProxyApp     = "app.kubernetes.io/name=winpool-csi-proxy"
	LabelCSIProxyVersion = "winpool.dev/csi-proxy-version"

	// FieldManager names the agent's writes in managedFields.
	FieldManager = "winpool-agent"
)

// ApplyStatus is the value of winpool.dev/apply-status. The annotation
// winpool.dev/applied-revision names the revision the status is about.
type ApplyStatus string

const (
	StatusApplying  ApplyStatus = "Applying"
	StatusRebooting ApplyStatus = "Rebooting"
	StatusSucceeded ApplyStatus = "Succeeded"
	StatusFailed    ApplyStatus = "Failed"
)

// ConfigMapName is the revision ConfigMap the operator writes before it moves
// a node's revision label.
func ConfigMapName(pool, revision string) string { return "winpool-" + pool + "-" + revision }
