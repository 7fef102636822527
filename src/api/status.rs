//! `status`: what winpool observed and decided, written only by winpool, and
//! the pool's condition types.

#[allow(unused_imports)]
use super::*;

/// Observed state of the pool, written only by winpool.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WindowsNodePoolStatus {
    /// The spec generation this status describes; older than
    /// metadata.generation while the operator has yet to act on a change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Hash of the node-level configuration the pool is rolling to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The last revision whose rollout has started (Progressing was True for
    /// it). A revision held from the start (paused, outside its maintenance
    /// window) is announced with `RolloutStarted` when it first progresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_revision: Option<String>,
    /// For a pool that follows another (rollout.follows): the last revision
    /// that pool had soaked when this one was let start it. A revision once
    /// promoted rolls on when the pool followed moves to the next one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promoted_revision: Option<String>,
    /// When every node last came to run `revision`, Updated; absent while
    /// one does not. A pool that follows this one soaks from then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_out_at: Option<Time>,
    /// How many of the pool's nodes are in each phase of the rollout.
    #[serde(default)]
    pub nodes: NodeCounts,
    /// The cluster's HNS load against the nodes' limits (condition HNSCapacity says what it means).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hns: Option<HnsStatus>,
    /// One condition per type: server-side apply merges them by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The maintenance window open now, or else the next one (after
    /// notAllowedDates), RFC 3339; absent when the pool has no window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_window_start: Option<Time>,
    /// When that window closes, RFC 3339; absent when the pool has no window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_window_end: Option<Time>,
    /// Nodes between Pending and Updated, longest in their state first (at most 20).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub updating_nodes: Vec<UpdatingNode>,
    /// Nodes whose drain a PodDisruptionBudget blocks, by name (at most 20).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drain_blocked_nodes: Vec<DrainBlockedNode>,
    /// Pending nodes their agent's preflight blocks for this revision: they
    /// are never cordoned until it passes (at most 20, by name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preflight_blocked_nodes: Vec<PreflightBlockedNode>,
    /// Mean time from a node's start to Updated over the pool's recent
    /// updates (a moving average, kept across rollouts and restarts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub average_node_update_seconds: Option<i64>,
    /// When the rollout should be done at this pace: the waves left times
    /// the average node update; absent when nothing rolls or it is held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_completion_time: Option<Time>,
    /// Failed nodes, first 20 by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_nodes: Vec<FailedNode>,
    /// With os.patchPolicy: the cumulative update the nodes' update source
    /// offers, and the patch level the pool rolls to for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_patch: Option<ResolvedPatch>,
}

/// What `os.patchPolicy` resolved the pool's patch level to.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedPatch {
    /// The update's KB ID, e.g. KB5050002.
    #[schemars(length(max = 16))]
    pub kb: String,
    /// Its title, as Windows Update gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    pub title: Option<String>,
    /// When the source published (WSUS: approved) it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<Time>,
    /// The patch level the pool rolls to for it: one revision above the
    /// newest build the update was offered to (Windows Update names no
    /// build before an update is installed), or os.patchLevel if higher.
    pub patch_level: String,
    /// The build the nodes updated for it run: the update's own build, once a
    /// node runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// When winpool resolved it.
    pub resolved_at: Time,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeCounts {
    /// Nodes the pool's selector matches (conflicting nodes excluded).
    pub total: i32,
    /// Nodes that run the pool's revision and were verified.
    pub updated: i32,
    /// Nodes between Pending and Updated: draining, applying or verifying.
    pub updating: i32,
    /// Nodes still to start.
    pub pending: i32,
    /// Nodes whose update failed; they wait for a retry.
    pub failed: i32,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HnsStatus {
    /// HNS load balancers a node needs for the cluster's Services.
    pub expected_load_balancers: i64,
    /// The load balancers a node's HNS holds at most (hns.limits).
    pub limit_load_balancers: i64,
    /// Load balancers of Services whose endpoints have not arrived yet (a
    /// Service created before its pods): on no node yet, on every node once
    /// they do. The HNS admission policy counts them as taken.
    #[serde(default)]
    pub awaiting_load_balancers: i64,
    /// Remote endpoints a node needs for the cluster's Services.
    pub expected_endpoints: i64,
    /// The remote endpoints a node's HNS holds at most (hns.limits).
    pub limit_endpoints: i64,
    /// WithinLimits, NearLimit or Exceeded.
    pub state: super::CapacityState,
    /// Services whose ready backends exceed maxBackendsPerService (first 20).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services_over_backend_limit: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailedNode {
    /// The Node's name.
    pub name: String,
    /// Why it failed: Timeout, DrainTimeout or ApplyFailed.
    pub reason: String,
    /// What failed and where to look (an exit code names its log on the node).
    pub message: String,
    /// When the node failed, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdatingNode {
    /// The Node's name.
    pub name: String,
    /// Draining, Applying or Verifying.
    pub state: super::NodeState,
    /// Since when the node is in that state, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainBlockedNode {
    /// The Node's name.
    pub name: String,
    /// namespace/name of the budget that refuses the evictions.
    pub pod_disruption_budget: String,
    /// A node put back to Pending starts again no sooner than this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<Time>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreflightBlockedNode {
    /// The Node's name.
    pub name: String,
    /// The agent's reasons, as its report gives them (`status.preflight`).
    pub reason: String,
}

/// Condition types on the pool.
pub mod conditions {
    pub const READY: &str = "Ready";
    pub const PROGRESSING: &str = "Progressing";
    pub const DEGRADED: &str = "Degraded";
    pub const HNS_CAPACITY: &str = "HNSCapacity";
    pub const PAUSED: &str = "Paused";
    /// kstatus' abnormal-true pair: Reconciling while the rollout moves,
    /// Stalled while it waits for a person (docs/gitops.md).
    pub const RECONCILING: &str = "Reconciling";
    pub const STALLED: &str = "Stalled";
    /// Membership problems the controller found (a node in two pools, a node of another OS version).
    pub const NODES_CONFLICT: &str = "NodeConflicts";
    /// Members a cloud provider may reimage or replace, undoing in-place patches (`provider`).
    pub const PROVIDER_MANAGED: &str = "ProviderManaged";
    /// A member's `winpool.dev/revision` label was set by someone else than
    /// winpool (and put back); True for an hour after it is found.
    pub const REVISION_LABEL_TAMPERED: &str = "RevisionLabelTampered";
    /// With os.patchPolicy: whether the pool's patch level follows what its
    /// nodes are offered (False: the offers disagree, the newest is too
    /// young, or the nodes updated for it run different builds).
    pub const PATCH_RESOLVED: &str = "PatchResolved";
    /// With `compliance.deadline`: nodes still run below the patch level
    /// after the deadline for the pool's target passed.
    pub const PATCH_OVERDUE: &str = "PatchOverdue";
}
