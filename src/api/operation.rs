//! The `WindowsNodeOperation` (`winpool.dev/v1alpha1`, short name `wno`):
//! one start of one node, written by winpool alone. It is the agent's only
//! authority: the agent watches its own node's operations (a field selector
//! on `spec.nodeName`) and acts on nothing a Node carries. Anyone who may
//! patch Nodes (a label syncer, a node template, the node's own kubelet
//! credential) can write a Node's labels and annotations; only the operator's
//! ServiceAccount may write an operation (the chart's RBAC and its
//! ValidatingAdmissionPolicy, `templates/operation-policy.yaml`).
//!
//! No owner: an operation outlives its node and its pool, as the record of
//! what was done to the host.

// The kube derive's printcolumn(...) entries repeat `type_ = ...`, which clippy mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What winpool asks of one node in one start. Immutable once written: a
/// retry, an undo or a new revision is a new operation.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "winpool.dev",
    version = "v1alpha1",
    kind = "WindowsNodeOperation",
    doc = "One start of one Windows node by winpool: what it asks of the node's agent and how far it got. Written by winpool's operator alone; the agent acts on nothing else.",
    plural = "windowsnodeoperations",
    shortname = "wno",
    namespaced,
    status = "WindowsNodeOperationStatus",
    category = "winpool",
    selectable = ".spec.nodeName",
    derive = "PartialEq",
    printcolumn(name = "Node", type_ = "string", json_path = ".spec.nodeName"),
    printcolumn(name = "Pool", type_ = "string", json_path = ".spec.pool"),
    printcolumn(name = "Action", type_ = "string", json_path = ".spec.action"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Started", type_ = "date", json_path = ".spec.startedAt")
)]
#[serde(rename_all = "camelCase")]
pub struct WindowsNodeOperationSpec {
    /// The Node this operation is for; the agent of that node alone acts on it.
    #[schemars(length(min = 1, max = 253))]
    pub node_name: String,
    /// The Node's UID when it was started: a node re-created under the same
    /// name is another host, and its agent does not act on this operation.
    #[schemars(length(max = 64))]
    pub node_uid: String,
    /// When that Node was created (the host joined): which host a node name
    /// was at a time, once the Node is gone (`kubectl winpool compliance --as-of`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub node_created: Option<String>,
    /// The WindowsNodePool that started the node.
    #[schemars(length(min = 1, max = 63))]
    pub pool: String,
    /// The pool's metadata.generation when the node was started.
    pub pool_generation: i64,
    /// The pool revision the node is asked to run (its ConfigMap holds what the revision installs).
    #[schemars(length(min = 1, max = 63))]
    pub revision: String,
    /// What the agent does.
    pub action: OperationAction,
    /// When winpool started the node (RFC 3339): the start a report answers.
    #[schemars(length(min = 1, max = 64))]
    pub started_at: String,
    /// How long the node's servicing task may run (a Go duration, e.g. `18000s`): rollout.timeouts.install.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub install_budget: Option<String>,
    /// For an Undo: the health gate whose hold sent the node back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub undo_gate: Option<String>,
    /// The node's operation before this one, as it had ended: each node's
    /// operations form a chain, so one edited or deleted afterwards is found
    /// (`kubectl winpool history --verify`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<PreviousOperation>,
    /// Who asked: the field manager of the pool's last change to its spec
    /// before the start (a person's `kubectl`, a GitOps controller), as the
    /// API server recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub asked_by: Option<String>,
}

/// A link of a node's chain of operations.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreviousOperation {
    /// Its name.
    #[schemars(length(max = 253))]
    pub name: String,
    /// The SHA-256 of its name, spec and status (`decision::operation::digest`), hex.
    #[schemars(length(min = 64, max = 64))]
    pub sha256: String,
}

/// What an operation asks of the node's agent.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum OperationAction {
    /// Bring the host to the revision: OS update, containerd, CNI, CSI Proxy.
    #[default]
    Update,
    /// Take the node's cumulative update off (`rollout.undo`).
    Undo,
}

/// How far the operation got, as winpool decided it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WindowsNodeOperationStatus {
    /// The node's state in this operation: Applying and Verifying let its
    /// agent work on the host; any other phase ends the operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<crate::api::NodeState>,
    /// When the phase was entered (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub phase_since: Option<String>,
    /// When winpool had drained the node (RFC 3339); absent while the node
    /// serves (a hotpatch, or a node only confirmed at its target): its agent
    /// never reboots a node this does not name drained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub drained_at: Option<String>,
    /// Why the operation ended Failed (the node's failure reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub reason: Option<String>,
    /// What winpool said when it ended the operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub message: Option<String>,
    /// The build the node's kubelet reported when the operation began (`10.0.20348.2700`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub build_before: Option<String>,
    /// The build it reported when the operation ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub build_after: Option<String>,
    /// What the node's agent reported it installed for this start, with the
    /// CVE IDs Windows Update lists for each update.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub installed: Vec<crate::api::report::InstalledUpdate>,
    /// When the node's servicing task ended its install (its last heartbeat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub installed_at: Option<String>,
    /// Boots of the host during the operation, as winpool saw them (its
    /// kubelet's bootID moved): 0 for a hotpatch, 1 for a reboot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reboots: Option<i32>,
    /// When winpool put the node back in service (uncordoned it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub returned_at: Option<String>,
}
