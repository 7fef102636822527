//! The rollout decision: pure. Given a pool, its member nodes as plain structs
//! and the clock, say which nodes move to which state, which revision
//! ConfigMaps must exist, and what the pool's status is. No I/O happens here; `controller`
//! observes the cluster into [`NodeView`]s and acts on the returned [`Plan`].
//!
//! Per node: Pending → Draining → Applying → Verifying → Updated, or Failed.
//! Every state lives on the Node itself (annotations written in the same patch
//! as the label or cordon they describe), so a restarted operator re-derives
//! exactly the same plan.
//!
//! [`decide`] reads as the algorithm; each step lives with its concern:
//! `round` (the settings read once, the decisions so far), `node` (one
//! member's step by its state), `start` (the hold, the starts up to
//! maxUnavailable), `summary` (stale HNS reports, counts, failures, requeue)
//! and `verify` (the checks a node must pass).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::{DrainBlockedNode, FailedNode, NodeCounts, PreflightBlockedNode, UpdatingNode, WindowsNodePoolSpec, names};
use crate::gates::{GateResult, Seen};
#[cfg(test)]
use crate::revision::revision_of;
use crate::window::Span;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// How many failed nodes the status lists by name; the count is always exact.
pub const MAX_LISTED_FAILED: usize = 20;
/// How often an in-flight rollout is looked at even without a watch event
/// (evictions finishing and timeouts produce no Node event).
pub const IN_FLIGHT_REQUEUE: Duration = Duration::from_secs(5);
pub const IDLE_REQUEUE: Duration = Duration::from_secs(300);

pub use crate::api::NodeState;

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
    pub unschedulable: bool,
    pub ready: bool,
    pub kernel_version: Option<String>,
    pub runtime_version: Option<String>,
    /// The kubelet's `nodeInfo.bootID`: changes on every reboot.
    pub boot_id: Option<String>,
    /// The bootID when the node started an update that needs a reboot (`winpool.dev/boot-id`).
    pub boot_id_at_start: Option<String>,
    pub applied_revision: Option<String>,
    pub apply_status: Option<String>,
    pub apply_message: Option<String>,
    pub csi_proxy_version: Option<String>,
    pub cni_mode: Option<String>,
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
    /// Put back for a PodDisruptionBudget (`winpool.dev/drain-blocked-by`/`-since`).
    pub drain_blocked_by: Option<String>,
    pub drain_blocked_since: Option<Timestamp>,
    /// The agent reports HNS counts on this node (both counts present, of any boot).
    pub hns_reported: bool,
    /// The agent's HNS counts, raw, when they were read in the node's current boot.
    pub hns_load_balancers: Option<String>,
    pub hns_endpoints: Option<String>,
    /// The agent writes a `WindowsNodeReport` (an agent of 0.2.0 wrote annotations).
    pub reports_in_object: bool,
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
    /// `winpool.dev/agent-version`: an agent has reported on this node.
    pub agent_version: Option<String>,
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

impl Preflight {
    /// Reads the two annotations; an unknown verdict is a block that says so.
    pub fn parse(value: Option<&str>, revision: Option<&str>) -> Option<Preflight> {
        let (value, revision) = (value?, revision.filter(|r| !r.is_empty())?);
        let verdict = match value.strip_prefix(names::PREFLIGHT_BLOCKED) {
            _ if value == names::PREFLIGHT_READY => PreflightVerdict::Ready,
            Some(why) => PreflightVerdict::Blocked(why.to_string()),
            None => PreflightVerdict::Blocked(format!("the agent's preflight says {value:?}, neither Ready nor Blocked")),
        };
        Some(Preflight { revision: revision.to_string(), verdict })
    }
}

/// Whether winpool keeps this node cordoned past this round: it cordoned the
/// node for an update that is still in flight, and `patch` (this round's write
/// for the node, if any) does not lift the cordon. Such a node needs no HNS
/// taint: the cordon already keeps new pods off, and the uncordon waits for HNS
/// (or adds the taint, see `hns::taint_wanted`), which saves two writes per
/// rebooted node and a conflict with the state write.
pub fn held_cordoned(view: &NodeView, patch: Option<&NodePatch>) -> bool {
    let in_flight = view.state.in_flight();
    view.cordoned_by_winpool && view.unschedulable && in_flight && patch.is_none_or(|p| p.unschedulable != Some(false))
}

/// A change to one Node. `None` values delete the key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodePatch {
    pub node: String,
    pub labels: BTreeMap<String, Option<String>>,
    pub annotations: BTreeMap<String, Option<String>>,
    pub unschedulable: Option<bool>,
    /// Why, for the log line and the Event.
    pub reason: String,
    pub from: NodeState,
    pub to: NodeState,
    /// A node this patch marks Updated after a rollout: how long it took from
    /// its start (winpool_node_update_duration_seconds, the estimate in status).
    pub took: Option<Duration>,
    /// Land only on the Node as it was decided from (its resourceVersion). A start
    /// carries it: if the start's answer is lost (an API server restart) and the
    /// cache still shows the node idle, the next round's start is refused with a
    /// conflict instead of cordoning and draining the node a second time.
    pub unless_changed_since: Option<String>,
}

impl NodePatch {
    fn new(node: &str, from: NodeState, to: NodeState, reason: impl Into<String>) -> Self {
        NodePatch { node: node.to_string(), from, to, reason: reason.into(), ..Default::default() }
    }
    fn label(&mut self, k: &str, v: Option<&str>) -> &mut Self {
        self.labels.insert(k.to_string(), v.map(str::to_string));
        self
    }
    fn ann(&mut self, k: &str, v: Option<&str>) -> &mut Self {
        self.annotations.insert(k.to_string(), v.map(str::to_string));
        self
    }
    fn state(&mut self, to: NodeState, now: Timestamp) -> &mut Self {
        self.to = to;
        let now = now.to_string();
        self.label(names::LABEL_STATE, to.label()).ann(names::ANN_STATE, Some(to.as_str())).ann(names::ANN_STATE_SINCE, Some(&now))
    }
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

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub revision: String,
    pub patches: Vec<NodePatch>,
    pub drain: Vec<(String, DrainMode)>,
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
}

impl Plan {
    /// The nodes their agent's preflight blocks, with its reasons.
    pub fn preflight_blocked(&self) -> impl Iterator<Item = (&String, &String)> {
        self.preflight_held.iter().filter_map(|(n, h)| match h {
            preflight::PreflightHeld::Blocked(why) => Some((n, why)),
            preflight::PreflightHeld::Awaited => None,
        })
    }

    /// How many nodes still await their agent's verdict on the revision.
    pub fn preflight_awaited(&self) -> usize {
        self.preflight_held.values().filter(|h| **h == preflight::PreflightHeld::Awaited).count()
    }
}

/// The pool-level inputs of one decision.
#[derive(Clone, Copy)]
pub struct PoolInput<'a> {
    pub name: &'a str,
    pub spec: &'a WindowsNodePoolSpec,
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
}

impl<'a> PoolInput<'a> {
    /// A pool as its spec alone says: no gates asked, no history, no target marked yet.
    pub fn of_spec(name: &'a str, spec: &'a WindowsNodePoolSpec, existing_revisions: &'a BTreeSet<String>) -> Self {
        PoolInput {
            name,
            spec,
            existing_revisions,
            average_node_update: None,
            gates: &[],
            target_marked_at: None,
            paused_by_annotation: false,
        }
    }
}

/// maxUnavailable resolved against the pool size: percentages round down, but
/// never below one node, so a small pool still moves.
pub fn max_unavailable(v: &IntOrString, total: usize) -> usize {
    let n = match v {
        IntOrString::Int(i) => (*i).max(0) as usize,
        IntOrString::String(s) => {
            let pct: usize = s.trim_end_matches('%').trim().parse().unwrap_or(1).min(100);
            total * pct / 100
        }
    };
    n.max(1)
}

pub fn parse_duration(s: &str) -> Option<Duration> {
    let d: kube::core::Duration = s.parse().ok()?;
    if d.is_negative() { None } else { Some(d.into()) }
}

/// The current state of a node for this revision, derived from what is on it.
pub fn current_state(n: &NodeView, rev: &str, spec: &WindowsNodePoolSpec) -> NodeState {
    match n.state.state() {
        Some(s) if s.in_flight() => s,
        Some(NodeState::Failed) if n.target_revision.as_deref() == Some(rev) => NodeState::Failed,
        _ => {
            // Not in flight: Updated only if the node really runs this revision.
            let at_target = n.revision_label.as_deref() == Some(rev)
                && n.applied_revision.as_deref() == Some(rev)
                && n.apply_status.as_deref() == Some(names::APPLY_SUCCEEDED)
                && verify_config(spec, n).is_ok();
            if at_target { NodeState::Updated } else { NodeState::Pending }
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
}

impl FailureReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::Timeout => "Timeout",
            FailureReason::DrainTimeout => "DrainTimeout",
            FailureReason::ApplyFailed => "ApplyFailed",
        }
    }
}

/// The most of an agent's words winpool copies into a Node annotation or the
/// pool's status: the report CRD bounds its lines at 2048 characters, but an
/// agent of 0.2.0 wrote annotations without a bound, and one megabyte-long
/// message copied on would make every status write of the pool fail.
pub const MAX_COPIED_MESSAGE: usize = 1024;

/// `text` cut to [`MAX_COPIED_MESSAGE`] characters, saying so.
pub fn clipped(text: &str) -> String {
    match text.char_indices().nth(MAX_COPIED_MESSAGE) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}… ({} more characters)", &text[..cut], text[cut..].chars().count()),
    }
}

fn fail(p: &mut NodePatch, n: &NodeView, now: Timestamp, reason: FailureReason, message: &str) {
    let message = clipped(message);
    p.state(NodeState::Failed, now)
        .ann(names::ANN_FAILURE_REASON, Some(reason.as_str()))
        .ann(names::ANN_FAILURE_MESSAGE, Some(&message))
        .ann(names::ANN_BOOT_ID, None)
        // Whatever the preflight said before, the host has failed since: a
        // retry waits for its agent to judge it again.
        .ann(names::ANN_PREFLIGHT, None)
        .ann(names::ANN_PREFLIGHT_REVISION, None);
    // Never strand a node cordoned: a failed node goes back to service, the
    // failure is reported on the pool and the node waits for a person.
    release_cordon(p, n);
}

/// The agent's report is about the configuration it last applied; a node that
/// (re)enters Applying must be applied anew, even for the same revision (a
/// retry after a failure). The agent starts when the report is gone.
fn ask_agent_anew(p: &mut NodePatch) {
    p.ann(names::ANN_APPLIED_REVISION, None).ann(names::ANN_APPLY_STATUS, None).ann(names::ANN_APPLY_MESSAGE, None);
}

fn release_cordon(p: &mut NodePatch, n: &NodeView) {
    if n.cordoned_by_winpool {
        p.unschedulable = Some(false);
        p.ann(names::ANN_CORDONED_BY_WINPOOL, None);
    }
}

/// Whether this round would start a node if no health gate held it: the
/// controller evaluates the gates (I/O) only then, and decides again with
/// what they saw. Pure, like [`decide`].
pub fn could_start(pool: &PoolInput<'_>, nodes: &[NodeView], now: Timestamp) -> bool {
    let open = PoolInput { target_marked_at: None, gates: &[], ..*pool };
    decide(&open, nodes, now).patches.iter().any(|p| p.from == NodeState::Pending && p.to.in_flight())
}

/// One round of the rollout: each member's next step, then new starts unless
/// something holds the rollout, then what it all adds up to.
pub fn decide(pool: &PoolInput<'_>, nodes: &[NodeView], now: Timestamp) -> Plan {
    decide_with(pool, nodes, now, false)
}

/// [`decide`] as if nothing held the rollout: `hold` still says what holds it
/// now, and the patches start the nodes that would start once it lifts. Never
/// executed; `kubectl winpool plan` shows it as the next wave.
pub fn preview(pool: &PoolInput<'_>, nodes: &[NodeView], now: Timestamp) -> Plan {
    decide_with(pool, nodes, now, true)
}

fn decide_with(pool: &PoolInput<'_>, nodes: &[NodeView], now: Timestamp, despite_hold: bool) -> Plan {
    let s = round::RoundSettings::new(pool, now);
    let mut r = round::Decided::new(&s.rev);
    // A revision label winpool did not set goes back in this round's patch,
    // and the round decides from the label as it will be.
    let mut tampered = BTreeMap::new();
    let views: Vec<Cow<'_, NodeView>> = nodes
        .iter()
        .map(|n| match tamper::tampering(n) {
            Some(t) => {
                let restored = NodeView { revision_label: t.restored.clone(), ..n.clone() };
                tampered.insert(n.name.clone(), t);
                Cow::Owned(restored)
            }
            None => Cow::Borrowed(n),
        })
        .collect();
    r.tampered = tampered;
    let mut sorted: Vec<&NodeView> = views.iter().map(|v| v.as_ref()).collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));

    for &n in &sorted {
        node::check(&s, &mut r, n);
        node::step(&s, &mut r, n);
    }
    let mut hold = start::hold(&s, &r);
    let soaking = start::soaking(&s, &r, &sorted);
    if hold.is_none() || despite_hold {
        let gated = start::start_nodes(&s, &mut r, &sorted, soaking.map_or(0, |k| k.nodes));
        hold = hold.or(gated);
    }
    summary::drop_stale_hns_reports(&s, &mut r, &sorted);

    let by_state = summary::by_state(&r);
    let counts = summary::counts(&by_state, nodes.len());
    let failed = summary::failed(&s, &r, &sorted);
    let behind_patch_level = nodes.iter().filter(|n| !kernel_satisfies(n, s.target_build.as_ref())).count();
    let window_open = s.window_open();
    let in_flight = summary::in_flight(&s, &r, &sorted);
    let unavailable = Unavailable {
        out_of_service: start::idle_out_of_service(&r, &sorted),
        max_unavailable: max_unavailable(&s.spec.rollout.max_unavailable, sorted.len()),
    };
    let estimated_completion = summary::estimated_completion(&s, &counts, hold.as_ref(), pool.average_node_update);
    let retry_at = r.blocked.values().filter_map(|(_, at)| *at).min();
    let requeue_after = summary::requeue_after(&s, &counts, hold.as_ref(), soaking.as_ref());
    let requeue_after = retry_at.map_or(requeue_after, |t| requeue_after.min(summary::until(t, now)));
    Plan {
        revision: s.rev,
        patches: r.patches,
        drain: r.drain,
        config_revisions: r.config_revisions,
        counts,
        by_state,
        failed,
        hold,
        window: s.window,
        window_open,
        soaking,
        unavailable,
        blocked: r.blocked,
        in_flight,
        average_node_update: pool.average_node_update,
        estimated_completion,
        waiting: r.waiting,
        behind_patch_level,
        requeue_after,
        warnings: r.warnings,
        runtime_refused: r.runtime_refused,
        preflight_held: r.preflight_held,
        tampered: r.tampered,
    }
}

/// The pool's pace: an exponential moving average of node update times
/// (each new one weighs a fifth), so a slow month shows within a few nodes.
pub fn fold_average(average: Option<Duration>, samples: impl IntoIterator<Item = Duration>) -> Option<Duration> {
    samples.into_iter().fold(average, |avg, took| {
        Some(match avg {
            None => took,
            Some(a) => Duration::from_secs_f64(a.as_secs_f64() * 0.8 + took.as_secs_f64() * 0.2),
        })
    })
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

mod node;
pub mod preflight;
mod round;
pub mod runtime;
mod start;
mod summary;
mod tamper;
mod verify;

pub use round::{HEALTH_GATE_INTERVAL, gate_timeout, health_gate_interval, node_timeout};
pub use start::{out_of_service, start_order};
pub use tamper::Tampering;
use verify::{kernel_satisfies, waiting_for};
pub use verify::{verify_config, verify_health, verify_rebooted};

#[cfg(test)]
mod tests;
