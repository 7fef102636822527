//! `spec.rollout`: how fast, when (maintenance windows), behind which health
//! gates, and how nodes are drained.

#[allow(unused_imports)]
use super::*;
use std::collections::BTreeMap;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "type(self.maxUnavailable) == int ? self.maxUnavailable >= 1 : self.maxUnavailable.matches('^(100|[1-9][0-9]?)%$')",
    "message": "rollout.maxUnavailable must be a positive number of nodes (e.g. 1) or a percentage from 1% to 100% (e.g. \"10%\")",
    "fieldPath": ".maxUnavailable",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!has(self.maxUnavailablePerZone) || (type(self.maxUnavailablePerZone) == int ? self.maxUnavailablePerZone >= 1 : self.maxUnavailablePerZone.matches('^(100|[1-9][0-9]?)%$'))",
    "message": "rollout.maxUnavailablePerZone must be a positive number of nodes (e.g. 1) or a percentage from 1% to 100% of a zone's nodes (e.g. \"34%\")",
    "fieldPath": ".maxUnavailablePerZone",
    "reason": "FieldValueInvalid"
}, {
    "rule": "duration(self.nodeTimeout) > duration('0s')",
    "message": "rollout.nodeTimeout must be a positive duration such as 30m or 1h30m",
    "fieldPath": ".nodeTimeout",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!has(self.healthGates) || self.healthGates.all(g, self.healthGates.exists_one(h, h.name == g.name))",
    "message": "rollout.healthGates: every gate needs a name of its own (the condition and Events name the gate)",
    "fieldPath": ".healthGates",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!has(self.healthGateInterval) || duration(self.healthGateInterval) > duration('0s')",
    "message": "rollout.healthGateInterval must be a positive duration such as 30s",
    "fieldPath": ".healthGateInterval",
    "reason": "FieldValueInvalid"
}]))]
pub struct RolloutSpec {
    /// Nodes that may be between Pending and Updated at once: a number or a percent of the pool (default 1).
    #[serde(default = "default_max_unavailable")]
    pub max_unavailable: IntOrString,
    /// Nodes of one topology domain (the value of the Node label topologyKey,
    /// default a zone) that may be between Pending and Updated at once: a
    /// number, or a percent of that domain's nodes in the pool. Unset: only
    /// maxUnavailable bounds the rollout. Nodes without the label form one
    /// domain of their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable_per_zone: Option<IntOrString>,
    /// The Node label that names a node's domain for maxUnavailablePerZone
    /// (default topology.kubernetes.io/zone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 317))]
    pub topology_key: Option<String>,
    /// Start no new node while true; nodes already in flight finish (default false).
    #[serde(default)]
    pub paused: bool,
    /// The rollout pauses itself once this many nodes failed (default 1); 0: failures never pause it.
    #[serde(default = "default_max_failed_nodes")]
    #[schemars(range(min = 0))]
    pub max_failed_nodes: i32,
    /// Drain + apply + verify budget per node, a Go duration (default 30m).
    /// A node whose servicing task beats is held by `timeouts` instead.
    #[serde(default = "default_node_timeout")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub node_timeout: String,
    /// Budgets by phase for a node whose servicing task beats (the agent's
    /// install reports progress): the install, then the reboot back to Ready
    /// and verified. Each defaults by `os.version`, Windows Server 2019's
    /// longest. The drain's budget is `drain.timeout`.
    #[serde(default, skip_serializing_if = "PhaseTimeouts::is_unset")]
    pub timeouts: PhaseTimeouts,
    /// How a node is drained before its update.
    #[serde(default)]
    pub drain: DrainSpec,
    /// How long a node stays Updated and Ready before it stops counting
    /// against maxUnavailable, a Go duration (default 0s: at once), like a
    /// Deployment's minReadySeconds: a node that goes bad soon after its update
    /// shows it before the next one starts.
    #[serde(default = "default_soak_time")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub soak_time: String,
    /// When set, no new node starts outside these windows (any of them open is
    /// enough); nodes already in flight finish.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub maintenance_windows: Vec<MaintenanceWindow>,
    /// Dates on which no new node starts, even inside a window (a change
    /// freeze, the holidays).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub not_allowed_dates: Vec<DateRange>,
    /// Conditions of the cluster under which no new node starts (kured's
    /// Prometheus and blocking-pod checks); nodes in flight finish. A gate that
    /// cannot be evaluated counts as closed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub health_gates: Vec<HealthGate>,
    /// How often closed health gates are looked at again, a Go duration (default 30s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub health_gate_interval: Option<String>,
    /// What happens to winpool's cordon when a node fails: Uncordon (the
    /// default: back into service on whatever it runs, the failure on the
    /// pool) or KeepCordoned (out of service until a person retries or
    /// uncordons it; it counts against maxUnavailable meanwhile).
    #[serde(default)]
    pub on_node_failure: OnNodeFailure,
    /// A ring: this pool starts a revision only once the pool it follows runs
    /// that same revision on every node and has soaked (soakTime), and starts
    /// nothing while that pool is Degraded. Nodes in flight finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follows: Option<Follows>,
    /// Jobs run for each node: one before its drain (preDrain) and one once
    /// it is updated and verified, before it is uncordoned (postUpdate). They
    /// run in the operator's hooks namespace (the chart's hooks.namespace),
    /// with the node's name in WINPOOL_NODE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<Hooks>,
    /// Pace the rollout by how fast Windows programs its network: no node
    /// starts, and no pod of a draining node is evicted, while the estimated
    /// HNS programming backlog of the pool's nodes (every Service and
    /// EndpointSlice change costs each Windows node's kube-proxy time, at its
    /// release's published pace) is over the budget, and a round evicts no
    /// more pods than the room left takes (each costs two load-balancer
    /// replacements). On by default.
    #[serde(default)]
    pub hns_pacing: HnsPacing,
    /// Download each node's update while it still serves, once its preflight
    /// passed (Windows Update at its background priority, or the packages
    /// fetched and verified), and start only nodes whose download is done, so
    /// a node is out of service for the install and the reboot alone
    /// (default true; false: the install downloads, after the drain, for
    /// nodes on a metered link).
    #[serde(default = "default_true")]
    pub staging: bool,
    /// How fast a node downloads its update packages while it serves, in
    /// bytes a second (`50Mi`: 50 MiB/s; default 20Mi, about 168 Mbit/s, a
    /// 1.2 GB cumulative update in a minute). Windows Update's downloads are
    /// paced by BITS instead: its background priority takes only bandwidth
    /// nothing else uses. The install, after the drain, is not paced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[1-9][0-9]{0,5}(Ki|Mi|Gi)?$"))]
    pub staging_bandwidth: Option<String>,
    /// Install a hotpatch without cordon, drain or reboot: Windows Server 2025
    /// (and 2022 Azure Edition) nodes enrolled in hotpatching are offered, in
    /// the months between quarterly baselines, a security update that applies
    /// in memory. True: a node whose staged update is such a hotpatch (and
    /// that lacks nothing else of the revision) is updated in service; if its
    /// install asks for a reboot after all, winpool drains it first. Baseline
    /// months take the normal path. False (the default): every update is
    /// drained. Needs `staging: true` (the staging says which it is).
    #[serde(default)]
    pub hotpatch: bool,
    /// Take a bad cumulative update off a node: true, a node that a
    /// health gate of scope Node holds while it soaks after its update
    /// (within soakTime of Updated) is cordoned and drained again, its agent
    /// removes the cumulative update it runs (never a servicing stack update)
    /// and reboots it, and the node is Failed with reason UpdateUndone; the
    /// bad-update breaker counts it. False (the default): such a node only
    /// holds the rollout. Needs a soakTime and a Node-scope gate.
    #[serde(default)]
    pub undo: bool,
}

/// `rollout.hnsPacing`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HnsPacing {
    /// Default true.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// The programming latency a rollout may cause: how far behind the
    /// cluster's Services a Windows node's HNS may fall, a Go duration
    /// (default 30s).
    #[serde(default = "default_hns_pacing_budget")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub budget: String,
    /// How long this pool's nodes take to program HNS, where measured to differ
    /// from winpool's per-release default (docs/OPERATIONS.md "Rollouts paced by
    /// HNS"); each unset rate is the release's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rates: Option<HnsRates>,
}

/// `rollout.hnsPacing.rates`: Go durations per unit of work.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HnsRates {
    /// Replacing one load balancer (default 600ms on ltsc2019, 27ms on ltsc2022 and ltsc2025).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub per_load_balancer: Option<String>,
    /// Adding or removing one remote endpoint (default 24ms on ltsc2019, 1.2ms on ltsc2022 and ltsc2025).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub per_remote_endpoint: Option<String>,
}

impl Default for HnsPacing {
    fn default() -> Self {
        HnsPacing { enabled: true, budget: default_hns_pacing_budget(), rates: None }
    }
}

fn default_hns_pacing_budget() -> String {
    "30s".into()
}

/// The hooks of `rollout.hooks`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Hooks {
    /// Run once the node is cordoned, before any of its pods is evicted
    /// (stepping down a database primary, detaching storage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_drain: Option<Hook>,
    /// Run once the node runs the target and passed its checks, while it is
    /// still cordoned (a Job may tolerate the cordon to run on the node);
    /// the node is uncordoned and counted Updated after it succeeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_update: Option<Hook>,
}

/// One hook: the container a Job runs, how long it may take, and what its failure does.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Hook {
    /// The container image the Job runs.
    #[schemars(length(min = 1, max = 512))]
    pub image: String,
    /// The container's command (its image's entrypoint if empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub command: Vec<String>,
    /// The command's arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub args: Vec<String>,
    /// More environment for the container (WINPOOL_NODE, WINPOOL_POOL and
    /// WINPOOL_HOOK are always set).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub env: Vec<HookEnv>,
    /// A ServiceAccount of the hooks namespace the Job's pod runs as (default: that namespace's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub service_account_name: Option<String>,
    /// The user the container runs as: the pod runs as non-root (the hooks
    /// namespace enforces the restricted profile), so an image whose user is
    /// root needs one here (e.g. 65534).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub run_as_user: Option<i64>,
    /// Node labels the Job's pod must land on (default kubernetes.io/os: linux).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// How long the Job may run, a Go duration (default 10m); it counts in
    /// rollout.nodeTimeout. Past it the Job is stopped and the hook failed.
    #[serde(default = "default_hook_timeout")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub timeout: String,
    /// What a failed hook does to its node: Fail (the default: the node is
    /// Failed and counts against maxFailedNodes, so a broken hook stops the
    /// rollout) or Hold (the node is labelled winpool.dev/hold=true; before
    /// the drain it goes back to Pending uncordoned, after the update it
    /// stays cordoned as a person's; remove the label to let it go on).
    #[serde(default)]
    pub on_failure: HookFailure,
}

/// An environment variable of a hook's container: a literal, or a key of a
/// Secret of the hooks namespace (a credential kept out of the pool's spec,
/// and so out of git and `kubectl winpool support-bundle`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!has(self.valueFrom) || !has(self.value) || self.value == ''",
    "message": "a hook's env variable takes value or valueFrom, not both",
    "reason": "FieldValueInvalid"
}]))]
pub struct HookEnv {
    /// The variable's name.
    #[schemars(length(min = 1, max = 128), regex(pattern = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"))]
    pub name: String,
    /// Its value.
    #[serde(default)]
    #[schemars(length(max = 4096))]
    pub value: String,
    /// Where its value comes from instead: a key of a Secret in the hooks namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<HookEnvSource>,
}

/// The source of a hook's env variable.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookEnvSource {
    /// A key of a Secret of the hooks namespace (the Job's pod does not start while it is missing).
    pub secret_key_ref: HookSecretKey,
}

/// A key of a Secret in the hooks namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookSecretKey {
    /// The Secret's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// What a failed hook does to its node.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum HookFailure {
    #[default]
    Fail,
    Hold,
}

fn default_hook_timeout() -> String {
    "10m".into()
}

/// The pool a ring follows, and how long its rollout must have stood.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Follows {
    /// The name of the WindowsNodePool this one follows (its canary ring).
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"))]
    pub pool: String,
    /// How long every node of that pool must have run the revision before
    /// this pool starts it, a Go duration (default 24h).
    #[serde(default = "default_follows_soak_time")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub soak_time: String,
}

fn default_follows_soak_time() -> String {
    "24h".into()
}

/// The Node label maxUnavailablePerZone groups by when topologyKey is unset.
pub const DEFAULT_TOPOLOGY_KEY: &str = "topology.kubernetes.io/zone";

fn default_max_unavailable() -> IntOrString {
    IntOrString::Int(1)
}
fn default_max_failed_nodes() -> i32 {
    1
}
fn default_node_timeout() -> String {
    "30m".into()
}
fn default_soak_time() -> String {
    "0s".into()
}

impl Default for RolloutSpec {
    fn default() -> Self {
        Self {
            max_unavailable: default_max_unavailable(),
            max_unavailable_per_zone: None,
            topology_key: None,
            paused: false,
            max_failed_nodes: default_max_failed_nodes(),
            node_timeout: default_node_timeout(),
            timeouts: PhaseTimeouts::default(),
            drain: DrainSpec::default(),
            soak_time: default_soak_time(),
            maintenance_windows: Vec::new(),
            not_allowed_dates: Vec::new(),
            health_gates: Vec::new(),
            health_gate_interval: None,
            on_node_failure: OnNodeFailure::default(),
            follows: None,
            hooks: None,
            hns_pacing: HnsPacing::default(),
            staging: true,
            staging_bandwidth: None,
            hotpatch: false,
            undo: false,
        }
    }
}

/// `rollout.timeouts`: Go durations; unset, each is its OS release's default.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PhaseTimeouts {
    /// From the node's start, while its servicing task beats (default:
    /// ltsc2019 3h, ltsc2022 2h, ltsc2025 90m; never less than nodeTimeout):
    /// past it the node fails, kept cordoned while its agent may still be
    /// installing. A task that stops beating (12 minutes without a beat)
    /// has rebootToReady from its last beat, as an install that ended does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub install: Option<String>,
    /// From the install's last beat to the node Ready on the target and
    /// verified: the boot that lands a cumulative update ("Working on
    /// updates"), the kubelet, HNS (default: ltsc2019 45m, ltsc2022 30m,
    /// ltsc2025 20m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub reboot_to_ready: Option<String>,
}

impl PhaseTimeouts {
    pub fn is_unset(&self) -> bool {
        self.install.is_none() && self.reboot_to_ready.is_none()
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum OnNodeFailure {
    #[default]
    Uncordon,
    KeepCordoned,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "duration(self.timeout) > duration('0s')",
    "message": "rollout.drain.timeout must be a positive duration such as 10m",
    "fieldPath": ".timeout",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!has(self.gracePeriod) || duration(self.gracePeriod) < duration(self.timeout)",
    "message": "rollout.drain.gracePeriod must be shorter than rollout.drain.timeout, or no pod could finish in time",
    "fieldPath": ".gracePeriod",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!has(self.skipWaitForDeleteTimeout) || duration(self.skipWaitForDeleteTimeout) < duration(self.timeout)",
    "message": "rollout.drain.skipWaitForDeleteTimeout must be shorter than rollout.drain.timeout, or it never applies",
    "fieldPath": ".skipWaitForDeleteTimeout",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!has(self.podSelector) || !has(self.podSelector.matchExpressions) || self.podSelector.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'] && (e.operator in ['In', 'NotIn'] ? (has(e.values) && size(e.values) > 0) : (!has(e.values) || size(e.values) == 0)))",
    "message": "rollout.drain.podSelector.matchExpressions[]: the operator is In or NotIn with values, or Exists or DoesNotExist without",
    "fieldPath": ".podSelector",
    "reason": "FieldValueInvalid"
}]))]
pub struct DrainSpec {
    /// Cordon and evict pods before applying (default true).
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// How long evictions may take before the node fails, a Go duration (default 10m).
    #[serde(default = "default_drain_timeout")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub timeout: String,
    /// Evict pods that use emptyDir volumes, losing that data (default true).
    #[serde(default = "default_true")]
    pub delete_empty_dir_data: bool,
    /// Evict pods that no controller owns, as `kubectl drain --force` does
    /// (default false). Such a pod is not recreated anywhere once evicted, so
    /// without this it holds the drain and the node fails at drain.timeout,
    /// naming it.
    #[serde(default)]
    pub force: bool,
    /// Delete the pods a PodDisruptionBudget still protects once drain.timeout
    /// has passed, instead of failing the node (default false).
    #[serde(default)]
    pub delete_after_timeout: bool,
    /// The time each evicted pod gets to shut down, a Go duration, instead of
    /// its own terminationGracePeriodSeconds (default: its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub grace_period: Option<String>,
    /// Only pods that match this selector are evicted; the others stay on
    /// the node through its update (default: every pod a drain evicts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,
    /// A pod whose deletion began longer ago than this, a Go duration, is no
    /// longer waited for: a hung kubelet may never confirm it (default: wait
    /// until it is gone, within drain.timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub skip_wait_for_delete_timeout: Option<String>,
    /// A node whose evictions a PodDisruptionBudget has refused this long is
    /// put back (uncordoned, Pending, last in line) so that its slot goes to
    /// another node, and is tried again after as long; drain.timeout still
    /// counts from its first refusal. A Go duration (default 1m; 0s: hold the
    /// slot until drain.timeout).
    #[serde(default = "default_put_back_after")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub put_back_after: String,
}

fn default_put_back_after() -> String {
    "1m".into()
}

fn default_drain_timeout() -> String {
    "10m".into()
}

impl Default for DrainSpec {
    fn default() -> Self {
        Self {
            enabled: true,
            timeout: default_drain_timeout(),
            delete_empty_dir_data: true,
            force: false,
            delete_after_timeout: false,
            grace_period: None,
            pod_selector: None,
            skip_wait_for_delete_timeout: None,
            put_back_after: default_put_back_after(),
        }
    }
}

/// One health gate, of one kind: Prometheus (a query or its firing alerts),
/// Alertmanager (its active alerts) or Pods (pods matching a selector).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.kind == 'Pods' ? has(self.selector) && ![has(self.url), has(self.query), has(self.alerts), has(self.timeout), has(self.auth), has(self.tls)].exists(x, x) : has(self.url) && ![has(self.selector), has(self.namespaces), has(self.scope)].exists(x, x)",
    "messageExpression": "self.kind == 'Pods' ? 'a Pods health gate has a selector, and no url, query, alerts, timeout, auth or tls' : 'a ' + self.kind + ' health gate has a url, and no selector, namespaces or scope'",
    "reason": "FieldValueInvalid"
}, {
    "rule": "self.kind != 'Prometheus' || has(self.query) != has(self.alerts)",
    "message": "a Prometheus health gate has exactly one of query or alerts",
    "reason": "FieldValueInvalid"
}, {
    "rule": "self.kind != 'Alertmanager' || (has(self.alerts) && !has(self.query))",
    "message": "an Alertmanager health gate names alerts, not a query (Alertmanager has no PromQL)",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!has(self.timeout) || (duration(self.timeout) > duration('0s') && duration(self.timeout) <= duration('1m'))",
    "message": "a health gate's timeout must be a positive duration of at most 1m, such as 5s (a reconcile waits for it)",
    "fieldPath": ".timeout",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!has(self.tls) || (has(self.url) && self.url.startsWith('https://'))",
    "message": "a health gate's tls is for an https url; an http url has no certificate to verify",
    "fieldPath": ".tls",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!has(self.auth) || (has(self.url) && self.url.startsWith('https://'))",
    "message": "a health gate's auth sends credentials: the url must be https (over http anyone on the path reads them)",
    "fieldPath": ".auth",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!has(self.url) || !self.url.matches('^https?://[^/]*@')",
    "message": "credentials in the url are refused (they would land in status and logs): use the gate's auth with a Secret",
    "fieldPath": ".url",
    "reason": "FieldValueInvalid"
}]))]
pub struct HealthGate {
    /// Names the gate in the pool's condition and Events, e.g. no-critical-alerts.
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"), length(min = 1, max = 63))]
    pub name: String,
    /// Prometheus: closed while `query` returns any series, or `alerts` fire.
    /// Alertmanager: closed while `alerts` are active in its API v2; silenced
    /// and inhibited alerts do not count, so a silence opens the gate as it
    /// quiets the pager. Pods: closed while pods matching `selector` exist.
    pub kind: GateKind,
    /// Prometheus and Alertmanager: the API's base URL, e.g.
    /// http://prometheus.monitoring:9090 (http or https).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^https?://[^\s/?#]+(/[^\s?#]*)?$"), length(max = 2048))]
    pub url: Option<String>,
    /// Prometheus: a PromQL instant query (/api/v1/query); any series it returns closes the gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub query: Option<String>,
    /// Prometheus and Alertmanager: firing alerts whose name matches close the gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alerts: Option<AlertMatch>,
    /// Prometheus and Alertmanager: how long one request may take, a Go
    /// duration (default 5s); a gate whose request times out is closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub timeout: Option<String>,
    /// Prometheus and Alertmanager: credentials from a Secret in the operator's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<GateAuth>,
    /// Prometheus and Alertmanager: whom an https url's server certificate must
    /// be signed by. Without it the gate trusts the system roots the operator
    /// finds (its image holds none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<GateTls>,
    /// Pods: pods (not Succeeded or Failed) matching this selector close the gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Pods: only pods in these namespaces (default: every namespace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub namespaces: Vec<String>,
    /// Pods: Cluster (default), such a pod anywhere holds the rollout; Node,
    /// a node such a pod runs on is not started, other nodes are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<GateScope>,
}

/// What a health gate reads.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, strum::Display)]
pub enum GateKind {
    Prometheus,
    Alertmanager,
    Pods,
}

/// The certificate authorities an https gate trusts, and no others.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GateTls {
    /// A Secret in the operator's own namespace, labelled
    /// winpool.dev/health-gate-credentials=true, whose key ca.crt holds the
    /// PEM certificates of those authorities, and need hold nothing else.
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"), length(max = 253))]
    pub ca_secret_name: String,
}

/// Which firing alerts close the gate.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AlertMatch {
    /// A regular expression matched against the whole alert name, like
    /// PromQL's `=~` (e.g. `KubeNode.*|.*Critical`).
    #[schemars(length(min = 1, max = 1024))]
    pub name: String,
    /// Label matchers an alert must also meet, all of them (e.g. severity
    /// Equal critical, namespace NotMatches dev-.*).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub matchers: Vec<LabelMatcher>,
}

/// One label matcher, as Prometheus and Alertmanager write them.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelMatcher {
    /// The label's name, e.g. severity.
    #[schemars(regex(pattern = r"^[a-zA-Z_][a-zA-Z0-9_]*$"), length(max = 128))]
    pub label: String,
    /// Equal and NotEqual compare the value (PromQL's = and !=); Matches
    /// and NotMatches match it as a whole-value regular expression (=~, !~).
    pub op: MatchOp,
    /// The value, or the regular expression for =~ and !~. A label the alert
    /// lacks has the empty value, as in PromQL.
    #[schemars(length(max = 1024))]
    pub value: String,
}

/// How a [`LabelMatcher`] compares. Words, as a LabelSelector's operators
/// are, not PromQL's symbols: a bare `=` in YAML is a YAML 1.1 tag that
/// Python's and other YAML 1.1 parsers refuse to read in the CRD.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MatchOp {
    Equal,
    NotEqual,
    Matches,
    NotMatches,
}

/// Basic (Secret keys `username`, `password`) or Bearer (key `token`) auth.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GateAuth {
    /// Basic or Bearer.
    #[serde(rename = "type")]
    pub type_: GateAuthType,
    /// A Secret in the operator's own namespace (winpool reads no other Secret),
    /// labelled winpool.dev/health-gate-credentials=true.
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"), length(max = 253))]
    pub secret_name: String,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum GateAuthType {
    Basic,
    Bearer,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum GateScope {
    #[default]
    Cluster,
    Node,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum Weekday {
    Mon,
    Tue,
    Wed,
    Thu,
    Fri,
    Sat,
    Sun,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.start != self.end",
    "message": "a maintenance window's start and end must differ (a window that ends before it starts runs past midnight)",
    "fieldPath": ".end",
    "reason": "FieldValueInvalid"
}, {
    "rule": "[has(self.days), has(self.relativeMonthly), has(self.absoluteMonthly)].filter(x, x).size() <= 1",
    "message": "a maintenance window opens on weekdays (days), on a weekday of the month (relativeMonthly) or on a date of the month (absoluteMonthly): one of them",
    "fieldPath": ".absoluteMonthly",
    "reason": "FieldValueForbidden"
}]))]
pub struct MaintenanceWindow {
    /// Weekly: the days on which the window opens (default every day).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 7))]
    pub days: Vec<Weekday>,
    /// Monthly: the window opens on a day counted from a weekday of the month,
    /// e.g. a week after Patch Tuesday (second Tuesday + 7 days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative_monthly: Option<RelativeMonthly>,
    /// Monthly: the window opens on a date of the month, e.g. the 25th, or
    /// the last day with 31.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub absolute_monthly: Option<AbsoluteMonthly>,
    /// Opening time, HH:MM (24h).
    #[schemars(regex(pattern = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"))]
    pub start: String,
    /// Closing time, HH:MM (24h); earlier than start means the window runs past midnight.
    #[schemars(regex(pattern = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"))]
    pub end: String,
    /// IANA time zone of start/end, e.g. Europe/Zurich (default UTC).
    #[serde(default = "default_time_zone")]
    #[schemars(regex(pattern = r"^(UTC|[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,2})$"), length(max = 64))]
    pub time_zone: String,
}

fn default_time_zone() -> String {
    "UTC".into()
}

/// Which occurrence of a weekday in its month.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum WeekIndex {
    First,
    Second,
    Third,
    Fourth,
    Last,
}

/// "The second Tuesday of every month, plus 7 days, for 3 days".
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RelativeMonthly {
    /// Which occurrence of the weekday in the month: First to Fourth, or Last.
    pub week_index: WeekIndex,
    /// The weekday counted (Patch Tuesday: Second Tue).
    pub day_of_week: Weekday,
    /// Days added to that weekday (negative: before it), -27 to 27 (default 0).
    #[serde(default)]
    #[schemars(range(min = -27, max = 27))]
    pub offset_days: i32,
    /// On how many consecutive days the window opens, from that day (default 1).
    #[serde(default = "default_duration_days")]
    #[schemars(range(min = 1, max = 28))]
    pub duration_days: i32,
}

fn default_duration_days() -> i32 {
    1
}

/// "The 25th of every month, for 2 days".
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AbsoluteMonthly {
    /// The date of the month, 1 to 31. A month without that date opens on its
    /// last day instead, so a month-end window (31) opens every month and
    /// never skips February.
    #[schemars(range(min = 1, max = 31))]
    pub day_of_month: i32,
    /// On how many consecutive days the window opens, from that date (default 1).
    #[serde(default = "default_duration_days")]
    #[schemars(range(min = 1, max = 28))]
    pub duration_days: i32,
}

/// Whole days, first and last included, in a time zone.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.start <= self.end",
    "message": "rollout.notAllowedDates: end must not be before start",
    "fieldPath": ".end",
    "reason": "FieldValueInvalid"
}]))]
pub struct DateRange {
    /// First day, YYYY-MM-DD.
    #[schemars(regex(pattern = r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$"), length(max = 10))]
    pub start: String,
    /// Last day, YYYY-MM-DD (included).
    #[schemars(regex(pattern = r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$"), length(max = 10))]
    pub end: String,
    /// IANA time zone the days are in (default UTC).
    #[serde(default = "default_time_zone")]
    #[schemars(regex(pattern = r"^(UTC|[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,2})$"), length(max = 64))]
    pub time_zone: String,
}
