//! The rollout's types: what it reads of a node ([`NodeView`]), of a pool
//! ([`PoolInput`]), and what a round decides ([`Plan`]); the patch a node
//! gets is `patch`'s.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{MAX_LISTED_FAILED, NodePatch, NodeState, Tampering, clipped, preflight};
use crate::api::report::ApplyStatus;
use crate::api::{DrainBlockedNode, FailedNode, NodeCounts, PreflightBlockedNode, UpdatingNode, WindowsNodePoolSpec, names};
use crate::decision::agent_report::Reported;
use crate::decision::gates::{GateResult, Seen};
use crate::decision::window::Span;

/// The `winpool.dev/state` a Node records, parsed once where the Node is read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Recorded {
    /// None yet: a node the pool has not taken in.
    #[default]
    Nothing,
    State(NodeState),
    /// A value winpool never writes, kept for the warning that names it.
    Unknown(String),
}

impl Recorded {
    pub fn parse(raw: Option<&str>) -> Self {
        match raw {
            None => Recorded::Nothing,
            Some(v) => NodeState::parse(v).map_or_else(|| Recorded::Unknown(v.to_string()), Recorded::State),
        }
    }

    /// The state, when the Node records one winpool knows.
    pub fn state(&self) -> Option<NodeState> {
        match self {
            Recorded::State(s) => Some(*s),
            _ => None,
        }
    }

    pub fn in_flight(&self) -> bool {
        self.state().is_some_and(NodeState::in_flight)
    }
}

impl From<NodeState> for Recorded {
    fn from(s: NodeState) -> Self {
        Recorded::State(s)
    }
}

/// Whether a node's HNS has programmed the cluster's Services (see `hns`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HnsReadiness {
    Ready,
    NotReady,
    /// The agent never reported counts; the rollout does not wait on what it cannot see.
    #[default]
    Unknown,
}

/// A member node as the decision needs it, read from the Node object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeView {
    pub name: String,
    /// It carries winpool's `winpool.dev/unpatched` taint ([`super::unpatched_taint`]).
    pub unpatched_taint: bool,
    /// When its Node was created.
    pub created: Option<Timestamp>,
    /// Labelled `winpool.dev/hold=true`: never started while it is.
    pub held_by_label: bool,
    /// Its domain for `rollout.maxUnavailablePerZone` (the value of the
    /// pool's topologyKey label); None without the label.
    pub zone: Option<String>,
    pub pool_label: Option<String>,
    pub revision_label: Option<String>,
    /// The `winpool.dev/state` label, which mirrors the annotation.
    pub state_label: Option<String>,
    /// `winpool.dev/state`; a value winpool never writes is reported, not trusted.
    pub state: Recorded,
    pub state_since: Option<Timestamp>,
    pub started_at: Option<Timestamp>,
    pub target_revision: Option<String>,
    pub drained_revision: Option<String>,
    pub cordoned_by_winpool: bool,
    /// `winpool.dev/hotpatch`: started in service for a hotpatch.
    pub hotpatch: bool,
    /// `winpool.dev/undo`: started again to take its update off; the gate that held it.
    pub undo: Option<String>,
    pub unschedulable: bool,
    pub ready: bool,
    pub kernel_version: Option<String>,
    pub runtime_version: Option<String>,
    /// The kubelet's `nodeInfo.bootID`: changes on every reboot.
    pub boot_id: Option<String>,
    /// The bootID when the node started an update that needs a reboot (`winpool.dev/boot-id`).
    pub boot_id_at_start: Option<String>,
    pub applied_revision: Option<String>,
    pub apply_status: Option<Reported<ApplyStatus>>,
    pub apply_message: Option<String>,
    /// When the node's servicing task last beat (this start's report only).
    pub apply_heartbeat: Option<Timestamp>,
    /// This start's success followed an install that needed no reboot.
    pub apply_no_reboot: bool,
    /// Then, the build the agent read from the host after the install (the
    /// kubelet's kernelVersion keeps the build it read at its own start).
    pub apply_host_build: Option<String>,
    pub csi_proxy_version: Option<String>,
    pub cni_mode: Option<Reported<crate::api::CniMode>>,
    pub failure_reason: Option<String>,
    pub failure_message: Option<String>,
    pub hns: HnsReadiness,
    /// Pods an eviction must still remove; only observed for Draining nodes.
    pub pods_to_evict: usize,
    /// A PodDisruptionBudget refusing this Draining node's evictions.
    pub drain_block: Option<DrainBlock>,
    /// The first pod the drain's rules keep on the node and why (no
    /// controller without force, emptyDir data): what its DrainTimeout names.
    pub drain_held: Option<String>,
    /// Its hook Jobs for its current start (`rollout.hooks`), as found.
    pub hook_runs: Vec<super::hooks::HookRun>,
    /// Put back for a PodDisruptionBudget (`winpool.dev/drain-blocked-by`/`-since`).
    pub drain_blocked_by: Option<String>,
    pub drain_blocked_since: Option<Timestamp>,
    /// The agent reports HNS counts on this node (both counts present, of any boot).
    pub hns_reported: bool,
    /// The agent's HNS counts, when they were read in the node's current boot.
    pub hns_load_balancers: Option<i64>,
    pub hns_endpoints: Option<i64>,
    /// The resourceVersion the view was read at: a start is guarded by it.
    pub resource_version: Option<String>,
    /// How containerd's service is installed, as the agent reports it (`containerd (nssm)`).
    pub runtime_service: Option<String>,
    /// A CSI Proxy host service whose pipes answer, as the agent reports it.
    pub csi_proxy_host: Option<String>,
    /// winpool's `winpool.dev/csi-proxy-host` label.
    pub csi_proxy_host_label: Option<String>,
    /// The agent's last preflight, and the revision it judged.
    pub preflight: Option<Preflight>,
    /// The agent's download of the update before the drain, and its revision.
    pub staging: Option<Staging>,
    /// `winpool.dev/agent-version`: an agent has reported on this node.
    pub agent_version: Option<String>,
}

impl NodeView {
    /// The agent's last word on this start's install, when it is one the agent writes.
    pub fn apply(&self) -> Option<ApplyStatus> {
        self.apply_status.as_ref().and_then(Reported::known)
    }
}

/// The agent's verdict on whether a revision can be applied to its host,
/// reached before the node is started (`winpool.dev/preflight`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preflight {
    pub revision: String,
    pub verdict: PreflightVerdict,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreflightVerdict {
    Ready,
    /// The agent's reasons, as it wrote them.
    Blocked(String),
}

/// The agent's download of a revision's update while the node serves
/// (`rollout.staging`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staging {
    pub revision: String,
    pub state: StagingState,
    /// What is staged installs without a reboot (a hotpatch).
    pub reboot_free: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StagingState {
    /// The download runs.
    Running,
    /// What the install takes is on the node.
    Staged,
    /// The download failed: the agent's message (it tries again).
    Failed(String),
}

/// A Draining node whose evictions a PodDisruptionBudget refuses, as the
/// shell saw it (kept in memory: a restarted operator sees it again within a
/// round).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainBlock {
    /// namespace/name of the budget.
    pub budget: String,
    /// The first refusal of this drain.
    pub since: Timestamp,
}

/// What to do with a Draining node's pods this round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainMode {
    /// Eviction API: PodDisruptionBudgets hold.
    Evict,
    /// drain.timeout passed and drain.deleteAfterTimeout is set: delete what eviction could not move.
    Delete,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FailedInfo {
    pub node: String,
    pub reason: String,
    pub message: String,
    pub since: Option<Timestamp>,
}

/// Why the rollout is not starting new nodes (when it is not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    PausedBySpec,
    /// `winpool.dev/paused: "true"` on the pool.
    PausedByAnnotation,
    FailureLimit {
        failed: usize,
        limit: i32,
    },
    /// No window is open; the next opens then.
    OutsideWindow {
        opens: Timestamp,
    },
    /// No window opens within the horizon (a long rollout.notAllowedDates freeze).
    NoWindowAhead,
    BadWindow(String),
    /// A health gate is closed (or, scope Node, holds every node that could start): what it saw.
    HealthGateClosed {
        gate: String,
        seen: Seen,
    },
    /// The operator's clock is this far off the API server's (past MAX_CLOCK_SKEW).
    ClockSkew {
        by: jiff::SignedDuration,
    },
    /// The pool's target failed with one code on enough nodes across pools
    /// (`decision::breaker`): paused by the annotation, saying why.
    BadUpdate(crate::decision::breaker::BadUpdate),
    /// The pool it follows (`rollout.follows`) has not soaked this revision, or is Degraded.
    Ring(crate::decision::ring::RingHold),
    /// Nodes of this install's pools fill --max-nodes-in-flight.
    ClusterLimit(ClusterInFlight),
    /// The pool's nodes' HNS has more to program than rollout.hnsPacing allows.
    HnsBacklog(HnsWait),
}

/// What holds the rollout, said for a person (`kubectl winpool plan`).
impl std::fmt::Display for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Hold::PausedBySpec => write!(f, "rollout.paused is true"),
            Hold::PausedByAnnotation => write!(f, "paused by the annotation {} (kubectl winpool resume)", names::ANN_PAUSED),
            Hold::FailureLimit { failed, limit } => write!(f, "{failed} failed nodes reached maxFailedNodes {limit}"),
            Hold::OutsideWindow { opens } => write!(f, "outside the maintenance windows; the next opens at {opens}"),
            Hold::NoWindowAhead => write!(f, "no maintenance window opens within 400 days outside rollout.notAllowedDates"),
            Hold::BadWindow(e) => write!(f, "the maintenance windows are invalid: {e}"),
            Hold::HealthGateClosed { gate, seen } => write!(f, "health gate {gate:?} is closed: {seen}"),
            Hold::ClockSkew { by } => write!(f, "{}", clock_skew_message(*by)),
            Hold::BadUpdate(b) => write!(f, "paused by the bad-update breaker: {}", b.message()),
            Hold::Ring(r) => write!(f, "{r}"),
            Hold::ClusterLimit(c) => write!(f, "{}", cluster_limit_message(*c)),
            Hold::HnsBacklog(w) => write!(f, "{}", w.message()),
        }
    }
}

/// Nodes out of service anyway (not in flight), and what maxUnavailable
/// allows: when the first reach the second, no node that is in service can
/// start (one out of service still can: it costs no capacity).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Unavailable {
    pub out_of_service: usize,
    pub max_unavailable: usize,
}

/// Nodes that finished their update less than rollout.soakTime ago.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Soak {
    pub nodes: usize,
    /// When the first of them is done soaking and frees its slot.
    pub first_ends: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    pub revision: String,
    pub patches: Vec<NodePatch>,
    pub drain: Vec<(String, DrainMode)>,
    /// Draining nodes of `drain` whose evictions this round are bounded
    /// (rollout.hnsPacing), and to how many; the others are not.
    pub eviction_caps: BTreeMap<String, usize>,
    /// Hook Jobs to create, once this round's node writes landed.
    pub hooks: Vec<super::hooks::HookStart>,
    /// Revisions whose ConfigMap must exist (the target, and any still carried by a node).
    pub config_revisions: BTreeSet<String>,
    pub counts: NodeCounts,
    /// Nodes per state after this plan is applied (for metrics).
    pub by_state: BTreeMap<NodeState, usize>,
    pub failed: Vec<FailedInfo>,
    pub hold: Option<Hold>,
    /// The maintenance window open now or next; `None` without windows (or none ahead).
    pub window: Option<Span>,
    /// No window rule stops starts now (none set, or one is open).
    pub window_open: bool,
    /// Updated nodes still within rollout.soakTime: they hold slots of maxUnavailable.
    pub soaking: Option<Soak>,
    /// Nodes out of service that are not in flight: they hold slots of maxUnavailable too.
    pub unavailable: Unavailable,
    /// Nodes whose drain a PodDisruptionBudget blocks, by name: the budget,
    /// and for the ones put back when they may start again.
    pub blocked: BTreeMap<String, (String, Option<Timestamp>)>,
    /// Nodes in flight once this plan lands: state and since when.
    pub in_flight: Vec<(String, NodeState, Option<Timestamp>)>,
    /// The pool's average node update time (the input), and when the rollout
    /// should be done at that pace (none while held or with nothing to do).
    pub average_node_update: Option<Duration>,
    pub estimated_completion: Option<Timestamp>,
    /// Why in-flight nodes are still waiting, node -> what it waits for.
    pub waiting: BTreeMap<String, String>,
    /// Nodes below the target patch level as the kubelet reports it.
    pub behind_patch_level: usize,
    /// When nodes must run the target (`compliance.deadline`).
    pub deadline: Option<Timestamp>,
    /// Nodes below the patch level past that deadline.
    pub patch_overdue: usize,
    pub requeue_after: Duration,
    /// Problems with individual nodes worth an Event (bogus labels, garbage versions).
    pub warnings: Vec<(String, String)>,
    /// Pending nodes never started because they would need a containerd
    /// replacement the pool does not allow: node -> why.
    pub runtime_refused: BTreeMap<String, String>,
    /// Pending nodes not started until their agent's preflight clears them
    /// for this revision: node -> awaited, or blocked and why.
    pub preflight_held: BTreeMap<String, preflight::PreflightHeld>,
    /// Members whose revision label winpool did not set; put back by this
    /// plan's patches.
    pub tampered: BTreeMap<String, Tampering>,
    /// Pending nodes a person holds (`winpool.dev/hold=true`): never started.
    pub held: BTreeSet<String>,
    /// The pool follows another, and that one has soaked the revision: the
    /// pool's status records it as promoted.
    pub promoted: bool,
}

impl Plan {
    /// The nodes their agent's preflight blocks, with its reasons.
    pub fn preflight_blocked(&self) -> impl Iterator<Item = (&String, &String)> {
        self.preflight_held.iter().filter_map(|(n, h)| match h {
            preflight::PreflightHeld::Blocked(why) => Some((n, why)),
            preflight::PreflightHeld::Awaited | preflight::PreflightHeld::Staging => None,
        })
    }

    /// How many nodes still await their agent's verdict on the revision.
    pub fn preflight_awaited(&self) -> usize {
        self.preflight_held.values().filter(|h| **h == preflight::PreflightHeld::Awaited).count()
    }

    /// Pending nodes cleared by their agent, whose update it is downloading
    /// before the drain (`rollout.staging`).
    pub fn staging(&self) -> usize {
        self.preflight_held.values().filter(|h| **h == preflight::PreflightHeld::Staging).count()
    }
}

/// The pool-level inputs of one decision.
#[derive(Clone, Copy)]
pub struct PoolInput<'a> {
    pub name: &'a str,
    pub spec: &'a WindowsNodePoolSpec,
    /// The spec's revision ([`crate::decision::revision::revision_of`]), computed once
    /// a round by whoever builds the input: every step reads it here.
    pub rev: &'a str,
    /// The spec parsed, once a round as the revision: every step reads it here.
    pub rules: &'a super::PoolRules,
    /// Revisions whose ConfigMap exists now (a hand-set revision label without one is bogus).
    pub existing_revisions: &'a BTreeSet<String>,
    /// How long the pool's nodes have been taking to update (the estimate's pace).
    pub average_node_update: Option<Duration>,
    /// The health gates as the controller evaluated them this round, in spec
    /// order; empty when it did not (no gates, or no node could start anyway).
    pub gates: &'a [GateResult],
    /// When the target revision's ConfigMap was marked as the target (the
    /// agents' cue to preflight it); `None` before it is.
    pub target_marked_at: Option<Timestamp>,
    /// The pool carries `winpool.dev/paused: "true"` (`kubectl winpool pause`):
    /// a pause GitOps does not revert, since it is not in the spec.
    pub paused_by_annotation: bool,
    /// How far the operator's clock is off the API server's, when that is
    /// past [`MAX_CLOCK_SKEW`]: no node starts and none times out.
    pub clock_skew: Option<jiff::SignedDuration>,
    /// The bad-update trip that pauses the pool, if any ([`crate::decision::breaker::Breaker::holding`]).
    pub bad_update: Option<&'a crate::decision::breaker::BadUpdate>,
    /// What holds the pool's starts for the ring it follows ([`crate::decision::ring::hold`]).
    pub ring: Option<&'a crate::decision::ring::RingHold>,
    /// The operator's --max-nodes-in-flight, with what other pools hold of it.
    pub cluster: Option<ClusterInFlight>,
    /// The operator's --hooks-namespace, where `rollout.hooks` Jobs run; None: hooks cannot run.
    pub hooks_namespace: Option<&'a str>,
    /// How long a node of the pool's release needs to program the Service
    /// and EndpointSlice changes heard so far (`rollout.hnsPacing` waits while it is over budget).
    pub hns_backlog: Duration,
    /// Evictions of this pool that went through a moment ago, whose
    /// EndpointSlice changes the backlog may not hold yet: they take room too.
    pub evictions_unheard: usize,
}

/// `rollout.hnsPacing` holding the rollout: the estimated programming
/// backlog of the pool's nodes, and the budget it is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HnsWait {
    pub backlog: Duration,
    pub budget: Duration,
}

impl HnsWait {
    /// What it holds, said for a person.
    pub fn message(&self) -> String {
        format!(
            "each Windows node's HNS has an estimated {}s of Service and EndpointSlice changes to program, over rollout.hnsPacing.budget {}s",
            self.backlog.as_secs(),
            self.budget.as_secs()
        )
    }

    /// When the backlog will be back within the budget, if nothing more changes.
    pub fn clears_in(&self) -> Duration {
        self.backlog.saturating_sub(self.budget)
    }
}

/// The install-wide bound on nodes in flight (--max-nodes-in-flight) and the
/// nodes of other pools in flight now: three pools at maxUnavailable 2 must
/// not take six nodes of a cluster that can spare four.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClusterInFlight {
    pub limit: usize,
    pub elsewhere: usize,
    /// Pools of the install held by the bound since before this one
    /// ([`super::cluster::waiting_ahead`]): each keeps a slot for itself.
    pub waiting_ahead: usize,
}

/// What the install-wide bound holds, said for a person.
pub fn cluster_limit_message(c: ClusterInFlight) -> String {
    let ahead = match c.waiting_ahead {
        0 => String::new(),
        n => format!(" and {n} pools have waited longer for a slot"),
    };
    format!(
        "{} nodes of other pools are in flight{ahead}; the operator's --max-nodes-in-flight {} allows no more across its pools",
        c.elsewhere, c.limit
    )
}

/// What a clock skew past the bound holds, said for a person.
pub fn clock_skew_message(by: jiff::SignedDuration) -> String {
    let (secs, side) = if by.is_negative() { (-by.as_secs(), "ahead of") } else { (by.as_secs(), "behind") };
    format!(
        "the operator's clock is {secs}s {side} the API server's (its Date header), more than {}s: \
         no node starts and none times out until the clocks agree (check NTP on the operator's node)",
        MAX_CLOCK_SKEW.as_secs()
    )
}

/// How far the operator's clock may be off the API server's. winpool judges
/// times by the API server's clock (the `Date` of its answers), but a clock
/// this far off means time on this host cannot be trusted from one moment to
/// the next (NTP broken, a VM resumed): nothing is started or timed out on it.
pub const MAX_CLOCK_SKEW: jiff::SignedDuration = jiff::SignedDuration::from_mins(2);

/// A spec's revision for a test's input, kept for the test's life.
#[cfg(test)]
pub fn test_revision(spec: &WindowsNodePoolSpec) -> &'static str {
    Box::leak(crate::decision::revision::revision_of(spec).into_boxed_str())
}

#[cfg(test)]
impl<'a> PoolInput<'a> {
    /// A pool as its spec alone says: no gates asked, no history, no target marked yet.
    pub fn of_spec(name: &'a str, spec: &'a WindowsNodePoolSpec, existing_revisions: &'a BTreeSet<String>) -> Self {
        PoolInput {
            name,
            spec,
            rev: test_revision(spec),
            rules: super::test_rules(spec),
            existing_revisions,
            average_node_update: None,
            gates: &[],
            target_marked_at: None,
            paused_by_annotation: false,
            clock_skew: None,
            bad_update: None,
            ring: None,
            cluster: None,
            hooks_namespace: None,
            hns_backlog: Duration::ZERO,
            evictions_unheard: 0,
        }
    }
}

/// Why a node failed (`winpool.dev/failure-reason`; the message says the rest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureReason {
    /// It did not finish a step within spec.rollout.nodeTimeout.
    Timeout,
    /// Its pods could not be evicted within spec.rollout.drain.timeout.
    DrainTimeout,
    /// Its agent reported that the install failed.
    ApplyFailed,
    /// A `rollout.hooks` Job failed or ran past its timeout.
    HookFailed,
    /// A Node-scope health gate held it in its soak, and its agent took the
    /// cumulative update off (`rollout.undo`).
    UpdateUndone,
    /// Taking the update off such a node failed.
    UndoFailed,
}

impl FailureReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::Timeout => "Timeout",
            FailureReason::DrainTimeout => "DrainTimeout",
            FailureReason::ApplyFailed => "ApplyFailed",
            FailureReason::HookFailed => "HookFailed",
            FailureReason::UpdateUndone => "UpdateUndone",
            FailureReason::UndoFailed => "UndoFailed",
        }
    }
}

impl Plan {
    /// Longest in their state first (unknown since first), then by name.
    pub fn updating_nodes_status(&self) -> Vec<UpdatingNode> {
        let mut v: Vec<&(String, NodeState, Option<Timestamp>)> = self.in_flight.iter().collect();
        v.sort_by(|a, b| (a.2, &a.0).cmp(&(b.2, &b.0)));
        v.into_iter()
            .take(MAX_LISTED_FAILED)
            .map(|(name, st, since)| UpdatingNode { name: name.clone(), state: *st, since: since.map(Time) })
            .collect()
    }

    pub fn preflight_blocked_status(&self) -> Vec<PreflightBlockedNode> {
        self.preflight_blocked()
            .take(MAX_LISTED_FAILED)
            .map(|(name, why)| PreflightBlockedNode { name: name.clone(), reason: clipped(why) })
            .collect()
    }

    pub fn drain_blocked_status(&self) -> Vec<DrainBlockedNode> {
        self.blocked
            .iter()
            .take(MAX_LISTED_FAILED)
            .map(|(name, (budget, retry))| DrainBlockedNode {
                name: name.clone(),
                pod_disruption_budget: budget.clone(),
                retry_after: retry.map(Time),
            })
            .collect()
    }

    pub fn failed_nodes_status(&self) -> Vec<FailedNode> {
        self.failed
            .iter()
            .take(MAX_LISTED_FAILED)
            .map(|f| FailedNode { name: f.node.clone(), reason: f.reason.clone(), message: clipped(&f.message), since: f.since.map(Time) })
            .collect()
    }
}
