//! The whole decision of one reconcile, pure: which nodes are released, the
//! rollout plan, the pool's status, the agent DaemonSet and revision
//! ConfigMap writes, the HNS condition and taint writes, the order of the node
//! writes, the revision ConfigMaps no longer needed and the
//! Events. The shell in `apply` executes it and decides nothing itself.

use crate::api::EventReason;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::runtime::events::{Event, EventType};

use self::agent::{AgentWrite, ConfigMapWrites, agent_write, configmap_writes, hold_agent_roll};
use self::csi_proxy::{CsiProxyWrites, csi_proxy_writes};
use self::hns_node::{HnsNode, HnsWrites, hns_readiness, hns_writes_for, within_catch_up_grace};
use self::memory::{GatesSeen, NODE_EVENT_INTERVAL, PoolMemory, StatusWrite, signed};
use self::pod_network::{PodNetworkWrites, pod_network_writes};
use self::release::{release_body, release_patch};
use crate::api::node_record::NodeRecord;
use crate::api::report::ApplyStatus;
use crate::api::report::WindowsNodeReport;
use crate::api::{WindowsNodePool, WindowsNodePoolStatus, names};
use crate::builders::daemonset::AgentSettings;
use crate::decision::agent_report::AgentReport;
use crate::decision::agent_report::Reported;
use crate::decision::breaker::{self, BadUpdate, Breaker};
use crate::decision::drain::{self, DrainRules, PodOnNode};
use crate::decision::gates::GateResult;
use crate::decision::hns::{self, Limits};
use crate::decision::membership::Membership;
use crate::decision::node_view::node_view;
use crate::decision::patch_policy::{self, MemberPatch, PatchResolution};
use crate::decision::ring::{self, Followed, FollowedMember, RingHold, RingSeen};
use crate::decision::rollout::{
    ClusterInFlight, HnsReadiness, Hold, NodePatch, NodeState, NodeView, Plan, PoolInput, PoolRules, could_start, decide, held_cordoned,
    may_be_installing, unpatched_taint,
};
use crate::decision::status::{PoolTransition, build_status, transition_events};

/// What one reconcile read: the cluster as the decision sees it, owned.
pub(crate) struct Observed {
    /// The pool's members, each with its agent's report object, if it wrote one.
    pub members: Vec<(Arc<NodeRecord>, Option<Arc<WindowsNodeReport>>)>,
    /// Nodes labelled for the pool that it no longer selects, each with its
    /// agent's report object, if it wrote one.
    pub deselected: Vec<(Arc<NodeRecord>, Option<Arc<WindowsNodeReport>>)>,
    pub membership: Membership,
    /// The pool's drain rules, parsed once a round: the pods below were
    /// listed by them, and the judgement and the evictions read them too.
    pub rules: DrainRules,
    /// The pods of every Draining member.
    pub pods_by_node: BTreeMap<String, Vec<PodOnNode>>,
    pub ds_of_pool: Vec<Arc<DaemonSet>>,
    pub cms_of_pool: Vec<Arc<ConfigMap>>,
    /// Revisions known to the cluster: those with a ConfigMap.
    pub existing_revisions: BTreeSet<String>,
    /// Cluster-wide expected HNS load balancers and endpoints.
    pub hns_totals: (i64, i64),
    /// Load balancers of Services whose endpoints have not arrived yet (they will).
    pub hns_awaiting: i64,
    /// Services with more backends than a node's HNS takes, and how many.
    pub hns_over_limit: (Vec<String>, usize),
    /// How long a node of the pool's release needs to program the Service
    /// and EndpointSlice changes heard so far ([`hns::Backlog`]).
    pub hns_backlog: Duration,
    pub hns_limits: Limits,
    /// How far the operator's clock is off the API server's, when past the bound.
    pub clock_skew: Option<jiff::SignedDuration>,
    /// Updates failing with one code on enough nodes across pools ([`breaker::tripped`]).
    pub bad_updates: Vec<BadUpdate>,
    /// For a pool that follows another: that pool and its nodes.
    pub ring: RingObserved,
    /// The install's bound on nodes in flight across its pools, and how many
    /// other pools' nodes are in flight now.
    pub cluster: Option<ClusterInFlight>,
    /// The operator's --hooks-namespace (where hook Jobs run), if set.
    pub hooks_namespace: Option<String>,
    /// Members' hook Jobs for their current start, by node.
    pub hook_runs: BTreeMap<String, Vec<crate::decision::rollout::hooks::HookRun>>,
    /// The pool's other hook Jobs: (Job, node, the start it was for, how it goes).
    pub other_hook_jobs: Vec<(String, String, jiff::Timestamp, crate::decision::rollout::hooks::HookOutcome)>,
    /// With os.patchPolicy: the patch level resolved from the members'
    /// offers ([`patch_resolution`]); the round decides by the pool it makes.
    pub patch: Option<PatchResolution>,
}

/// `os.patchPolicy`'s resolution this round, from the members' offers and
/// the resolution the status holds. Members updated for the revision that
/// resolution makes show the build it lands on.
pub(crate) fn patch_resolution(pool: &WindowsNodePool, seen: &Observed, now: Timestamp) -> Option<PatchResolution> {
    let policy = pool.spec.os.patch_policy.as_ref()?;
    let previous = pool.status.as_ref().and_then(|s| s.resolved_patch.as_ref());
    let effective = patch_policy::effective_spec(&pool.spec, previous);
    // A floor above the resolution rolls the nodes to the floor: what they
    // run then says nothing of the update's own build.
    let by_resolution = matches!(effective, std::borrow::Cow::Owned(_));
    let rev = crate::decision::revision::revision_of(&effective);
    let members: Vec<MemberPatch<'_>> = seen
        .members
        .iter()
        .map(|(n, report)| {
            let agent = AgentReport::of(report.as_deref());
            let updated = by_resolution
                && n.label(names::LABEL_REVISION) == Some(rev.as_str())
                && agent.applied_revision.as_deref() == Some(rev.as_str())
                && agent.apply_status == Some(Reported::Known(ApplyStatus::Succeeded));
            MemberPatch {
                node: &n.name,
                offer: report.as_deref().and_then(|r| r.observations().offer.as_ref()),
                kernel: n.kernel_version.parse().ok(),
                updated,
            }
        })
        .collect();
    Some(patch_policy::resolve(policy, previous, &members, now))
}

/// What the round learnt once its members were judged: the health gates,
/// and the other pools' nodes in flight (read last, under the lock that
/// holds them until this round's starts land).
#[derive(Default)]
pub(crate) struct Asked {
    /// The health gates as the round looks at them ([`gate_look`]); empty: not looked at.
    pub gates: Vec<GateResult>,
    /// They were asked this round (not what they saw a moment ago).
    pub gates_asked: bool,
    pub cluster: Option<ClusterInFlight>,
}

/// The members judged, once a round: their views, and their HNS as the
/// Nodes should show it.
pub(crate) struct Judged<'s> {
    /// The spec's revision, computed here once a round; the gates' look and
    /// the decision read it.
    pub rev: String,
    /// The spec parsed, as often: durations, target build, schedule.
    pub rules: PoolRules,
    pub views: Vec<NodeView>,
    pub hns_nodes: Vec<HnsNode<'s>>,
}

/// What a pool that follows another observed of it.
#[derive(Default)]
pub(crate) struct RingObserved {
    /// The pool this one follows (rollout.follows), if it exists.
    pub followed: Option<Arc<WindowsNodePool>>,
    /// The nodes labelled for the pool followed.
    pub followed_members: Vec<FollowedMember>,
    /// pool → the pool it follows, for every pool that follows one.
    pub follows: BTreeMap<String, String>,
}

impl RingObserved {
    /// What the ring gate reads ([`ring::hold`]).
    pub fn seen(&self) -> RingSeen<'_> {
        RingSeen {
            followed: self.followed.as_deref().map(|p| Followed {
                name: p.metadata.name.as_deref().unwrap_or_default(),
                spec: &p.spec,
                generation: p.metadata.generation,
                status: p.status.as_ref(),
            }),
            members: self.followed_members.clone(),
            follows: self.follows.clone(),
        }
    }
}

#[derive(Default)]
pub(crate) struct Round {
    /// The bad-update breaker pausing the pool, first of all: the
    /// annotations to write and what to tell.
    pub pause: Option<BreakerPause>,
    /// Deselected nodes given back, before anything else is written.
    pub releases: Vec<(NodePatch, serde_json::Value)>,
    /// Deselected nodes kept (label, cordon, agent) while their host may
    /// still be installing: (node, what its agent reports).
    pub held_leaving: Vec<(String, ApplyStatus)>,
    pub plan: Plan,
    /// Written before any node is labelled for the revisions they carry.
    pub agent: Option<AgentWrite>,
    pub configmaps: ConfigMapWrites,
    /// Written with the ConfigMaps; deleted with the stale ConfigMaps, last.
    pub csi_proxy: CsiProxyWrites,
    /// Written with the agent; deleted last.
    pub pod_network: PodNetworkWrites,
    /// Pods (`namespace/name`) a drain does not ask to evict this round: a
    /// budget refused them a moment ago ([`PoolMemory::evictions_waiting`]).
    pub evictions_waiting: BTreeSet<String>,
    /// When the first of them is due again.
    pub eviction_due_in: Option<Duration>,
    pub status: WindowsNodePoolStatus,
    pub status_write: StatusWrite,
    /// Each with the message its condition carries, for the log line.
    pub hns_writes: Vec<(HnsWrites, String)>,
    /// Members whose HNS is not ready (for metrics).
    pub hns_not_ready: Vec<String>,
    /// Members whose HNS lost what it held in this boot (Collapsed or Drifted).
    pub hns_drifted: usize,
    /// kube-proxy restarts asked this round (after the HNS writes, before the
    /// node writes), and where the members' repairs stand.
    pub hns_repairs: hns_repair::Repairs,
    pub hns_utilization: f64,
    /// Revision ConfigMaps no node carries any more: (name, revision).
    pub stale_configmaps: Vec<(String, String)>,
    /// Hook Jobs still running for no start in flight ([`crate::decision::rollout::hooks::orphaned`]).
    pub orphaned_hook_jobs: Vec<String>,
    /// The standing problems not announced yet.
    pub announce: Vec<Event>,
    /// Condition flips and the like, announced once the status is written.
    pub transitions: Vec<(PoolTransition, String)>,
    /// When an update os.patchPolicy.minAge holds becomes eligible.
    pub patch_eligible_in: Option<Duration>,
}

/// The node writes in two phases: every write that finishes or moves a node
/// lands before any write that starts one, so the cluster never holds more
/// nodes in flight than the plan allowed, even for the milliseconds between
/// two parallel writes.
pub(crate) fn node_write_phases(plan: &Plan) -> (Vec<&NodePatch>, Vec<&NodePatch>) {
    let (starts, others) = plan.patches.iter().partition(|p| p.from == NodeState::Pending && p.to != NodeState::Pending);
    (others, starts)
}

/// The node writes of a round, once its HNS writes are done.
#[derive(Debug, Default)]
pub(crate) struct NodeWrites<'p> {
    /// Finishes and moves, written first.
    pub first: Vec<&'p NodePatch>,
    /// Starts, written once every write before them landed.
    pub then: Vec<&'p NodePatch>,
}

/// The plan's node writes ([`node_write_phases`]) when the taint of the
/// nodes in `hns_behind` could not be written: those are not written (a node
/// is never moved on while its taint lags), and no node starts this round,
/// since a node held back frees no slot.
pub(crate) fn node_writes<'p>(plan: &'p Plan, hns_behind: &BTreeSet<String>) -> NodeWrites<'p> {
    let (first, then) = node_write_phases(plan);
    let ready = |phase: Vec<&'p NodePatch>| phase.into_iter().filter(|p| !hns_behind.contains(&p.node)).collect();
    NodeWrites { first: ready(first), then: if hns_behind.is_empty() { ready(then) } else { Vec::new() } }
}

/// Nodes that carry the pool's label but are not its members (all of them,
/// when the pool is deleted: no members): they go back to their owners.
pub(crate) fn labelled_non_members<'n>(
    pool: &'n str,
    nodes: &'n [Arc<NodeRecord>],
    membership: &'n Membership,
) -> impl Iterator<Item = &'n Arc<NodeRecord>> {
    let members: BTreeSet<&str> = membership.members.iter().map(String::as_str).collect();
    nodes.iter().filter(|n| n.label(names::LABEL_POOL) == Some(pool)).filter(move |n| !members.contains(n.name.as_str()))
}

/// Nodes leaving the pool, split: those free to go, and those whose host may
/// still be installing (in flight, its agent reporting Applying or
/// Rebooting). Released mid-install, a node would go back into service with a
/// half-staged update, and its agent, no longer the pool's, would stop
/// answering for it; so it stays the pool's until its agent reports a result.
pub(crate) struct Leaving<'n> {
    pub free: Vec<&'n Arc<NodeRecord>>,
    pub held: Vec<(String, ApplyStatus)>,
}

pub(crate) fn leaving(nodes: &[(Arc<NodeRecord>, Option<Arc<WindowsNodeReport>>)]) -> Leaving<'_> {
    let mut out = Leaving { free: Vec::new(), held: Vec::new() };
    for (n, report) in nodes {
        let view = node_view(n, &AgentReport::of(report.as_deref()), HnsReadiness::Unknown);
        match may_be_installing(&view).filter(|_| view.state.in_flight()) {
            Some(status) => out.held.push((n.name.clone(), status)),
            None => out.free.push(n),
        }
    }
    out
}

/// Each node given back, with its release and the merge patch body that does it.
pub(crate) fn releases<'n>(nodes: impl IntoIterator<Item = &'n Arc<NodeRecord>>, why: &str) -> Vec<(NodePatch, serde_json::Value)> {
    nodes
        .into_iter()
        .map(|n| {
            let p = release_patch(n, why);
            let body = release_body(n, &p);
            (p, body)
        })
        .collect()
}

/// The Draining members, whose pods the round needs listed.
pub(crate) fn draining(members: &[(Arc<NodeRecord>, Option<Arc<WindowsNodeReport>>)]) -> Vec<String> {
    members
        .iter()
        .filter(|(n, _)| n.annotation(names::ANN_STATE) == Some(NodeState::Draining.as_str()))
        .map(|(n, _)| n.name.clone())
        .collect()
}

/// When `rev`'s ConfigMap was marked as the pool's target; `None` while it
/// is not (or carries no time: marked by an older winpool, not judged late).
fn target_marked_at(cms_of_pool: &[Arc<ConfigMap>], rev: &str) -> Option<Timestamp> {
    cms_of_pool
        .iter()
        .filter(|c| c.labels().get(names::LABEL_REVISION).map(String::as_str) == Some(rev))
        .filter(|c| c.labels().get(names::LABEL_TARGET).map(String::as_str) == Some("true"))
        .find_map(|c| c.annotations().get(names::ANN_TARGET_SINCE)?.parse().ok())
}

/// The round's pure preparation of what it observed: the patch level the
/// members' offers resolve to (`os.patchPolicy`, into `seen.patch`), and the
/// pool as the round decides by it (that level in place of the spec's floor).
pub(crate) fn prepare<'p>(pool: &'p WindowsNodePool, seen: &mut Observed, now: Timestamp) -> std::borrow::Cow<'p, WindowsNodePool> {
    seen.patch = patch_resolution(pool, seen, now);
    crate::decision::patch_policy::effective_pool(pool, seen.patch.as_ref().and_then(|r| r.patch.as_ref()))
}

/// The members as the decision sees them: each view with its HNS judged (a
/// member that was caught up and fell behind keeps CATCH_UP_GRACE, counted
/// from when the memory first saw it behind), the pods its drain must still
/// remove, and the budget refusing its drain (forgotten once it is not
/// Draining). The memory forgets what it kept of nodes that left the pool.
pub(crate) fn judge<'s>(pool: &WindowsNodePool, seen: &'s Observed, memory: &mut PoolMemory, now: Timestamp) -> Judged<'s> {
    let pool_rules = PoolRules::of(&pool.spec);
    let grace = signed(pool_rules.node_timeout);
    let rules = &seen.rules;
    let mut views = Vec::with_capacity(seen.members.len());
    let mut hns_nodes = Vec::with_capacity(seen.members.len());
    for (n, report) in &seen.members {
        let mut v = node_view(n, &AgentReport::of(report.as_deref()), HnsReadiness::Unknown);
        v.zone = crate::decision::node_view::zone_of(n, &pool.spec.rollout);
        let (mut readiness, mut reason, mut message) = hns_readiness(&v, seen.hns_totals, &pool.spec.hns, grace, now);
        let state = v.state.state();
        let in_flight = v.state.in_flight();
        let previous = n.hns_condition.as_ref();
        let behind = readiness == HnsReadiness::NotReady;
        let lost = memory.hns_lost_in_boot(&n.name, &n.boot_id, readiness == HnsReadiness::Ready) && behind && !in_flight;
        memory.saw_boot(&n.name, &n.boot_id, now);
        let collapsed = lost.then(|| hns_node::collapse(&v, seen.hns_totals)).flatten();
        if let Some(m) = collapsed {
            // Nothing a moving count explains: no grace.
            (reason, message) = (hns::reasons::COLLAPSED, m);
        } else if memory.hns_grace(&n.name, behind, |since| within_catch_up_grace(previous, in_flight, readiness, since, now), now) {
            // Still within its grace: judged as its condition says, so nothing is written.
            let kept = previous.and_then(|c| c.message.clone()).unwrap_or_default();
            (readiness, reason, message) = (HnsReadiness::Ready, hns::reasons::CAUGHT_UP, kept);
        } else if lost || hns_node::drift_standing(previous, behind) {
            reason = hns_node::drift_reason(previous);
            message = hns_node::drift_message(&v, seen.hns_totals);
        }
        v.hns = readiness;
        v.drain_block = memory.drain_block(&v.name, state == Some(NodeState::Draining));
        if let Some(pods) = seen.pods_by_node.get(&v.name) {
            v.pods_to_evict = drain::remaining(pods, rules, now);
            v.drain_held = drain::first_held(pods, rules);
        }
        v.hook_runs = seen.hook_runs.get(&v.name).cloned().unwrap_or_default();
        let counts_seen_at = report
            .as_deref()
            .and_then(|r| r.observations().hns.as_ref())
            .filter(|h| h.boot_id.as_deref() == Some(n.boot_id.as_str()))
            .and_then(|h| Some(h.observed_at.as_ref()?.0));
        hns_nodes.push(HnsNode { node: n, readiness, reason, message, counts_seen_at });
        views.push(v);
    }
    memory.keep_members(&seen.membership.members.iter().map(String::as_str).collect());
    Judged { rev: crate::decision::revision::revision_of(&pool.spec), rules: pool_rules, views, hns_nodes }
}

/// The pool's settings the rollout decides by, and what holds it this round.
struct Holds<'a> {
    gates: &'a [GateResult],
    cluster: Option<ClusterInFlight>,
    average_node_update: Option<Duration>,
    bad_update: Option<&'a BadUpdate>,
    ring: Option<&'a RingHold>,
}

fn input<'a>(
    pool: &'a WindowsNodePool,
    name: &'a str,
    judged: (&'a str, &'a PoolRules),
    seen: &'a Observed,
    holds: Holds<'a>,
) -> PoolInput<'a> {
    let (rev, rules) = judged;
    PoolInput {
        name,
        spec: &pool.spec,
        rev,
        rules,
        existing_revisions: &seen.existing_revisions,
        gates: holds.gates,
        average_node_update: holds.average_node_update,
        target_marked_at: target_marked_at(&seen.cms_of_pool, rev),
        paused_by_annotation: pool.paused_by_annotation(),
        clock_skew: seen.clock_skew,
        bad_update: holds.bad_update,
        ring: holds.ring,
        cluster: holds.cluster,
        hooks_namespace: seen.hooks_namespace.as_deref(),
        hns_backlog: seen.hns_backlog,
        // Read from the memory by decide_round.
        evictions_unheard: 0,
    }
}

/// What holds the pool's starts for the ring it follows, this round.
fn ring_of(pool: &WindowsNodePool, rev: &str, seen: &Observed, now: Timestamp) -> Option<RingHold> {
    let promoted = pool.status.as_ref().and_then(|s| s.promoted_revision.as_deref());
    ring::hold(&pool.name_any(), &pool.spec, rev, promoted, &seen.ring.seen(), now)
}

/// What the round's health gates are.
#[derive(Debug, PartialEq)]
pub(crate) enum GateLook {
    /// No gates, or no node would start anyway: not looked at (nothing holds).
    NotNeeded,
    /// What they saw a moment ago still stands.
    Fresh(Vec<GateResult>),
    /// They must be asked (I/O, and the reconcile waits for it).
    Ask,
}

/// Whether the round looks at the pool's health gates, and how: only when a
/// node would start if none held it, and asked anew only when what they last
/// saw no longer stands ([`crate::decision::gates::still_fresh`]; a spec change always asks anew).
pub(crate) fn gate_look(pool: &WindowsNodePool, seen: &Observed, judged: &Judged<'_>, memory: &PoolMemory, now: Timestamp) -> GateLook {
    if pool.spec.rollout.health_gates.is_empty() {
        return GateLook::NotNeeded;
    }
    let name = pool.name_any();
    let rev = judged.rev.as_str();
    let breaker = breaker_of(pool, seen);
    let ring = ring_of(pool, rev, seen, now);
    let holds = Holds { gates: &[], cluster: seen.cluster, average_node_update: None, bad_update: breaker.holding(), ring: ring.as_ref() };
    let pool_input = input(pool, &name, (rev, &judged.rules), seen, holds);
    if !could_start(&pool_input, &judged.views, now) && !crate::decision::rollout::could_undo(&pool_input, &judged.views, now) {
        return GateLook::NotNeeded;
    }
    match memory.fresh_gates(pool.metadata.generation, judged.rules.health_gate_interval, now) {
        Some(results) => GateLook::Fresh(results),
        None => GateLook::Ask,
    }
}

/// How soon a refused pool is looked at again when nothing changes: the
/// operator's allow-lists change only with its flags (a restart).
const REFUSED_REQUEUE: Duration = Duration::from_secs(300);

/// The round of a pool whose SYSTEM inputs the operator refuses (an agent
/// image, a runtime archive or a package share it does not allow): nothing
/// is observed and nothing rolled; only its status is written, through the
/// same throttle and record as every round's, saying why (Stalled), and the
/// problem is announced once. None for a pool it takes.
pub(crate) fn refused_round(pool: &WindowsNodePool, settings: &Settings, memory: &mut PoolMemory, now: Timestamp) -> Option<Round> {
    let (reason, msg) = agent::system_inputs_refused(pool, settings)?;
    let status = agent::refusal(pool, reason.as_str(), &msg, now);
    let announce = memory.standing_news(vec![(msg.clone(), reason.warning(msg, "Validate"))]);
    Some(Round {
        status_write: memory.status_write(pool.status.as_ref(), &status, now),
        status,
        announce,
        plan: Plan { requeue_after: REFUSED_REQUEUE, ..Plan::default() },
        ..Round::default()
    })
}

/// The whole decision of one reconcile, and what the pool's memory is once
/// it is carried out as planned (what the writes do is taken in by
/// [`PoolMemory::settle`]).
#[cfg(test)]
pub(crate) fn decide_round(
    pool: &WindowsNodePool,
    settings: &Settings,
    seen: &Observed,
    mut memory: PoolMemory,
    now: Timestamp,
) -> (Round, PoolMemory) {
    let judged = judge(pool, seen, &mut memory, now);
    decide_judged(pool, settings, seen, judged, Asked { cluster: seen.cluster, ..Asked::default() }, memory, now)
}

/// [`decide_round`] on members [`judge`]d once for the round (the gates'
/// look read them too).
pub(crate) fn decide_judged(
    pool: &WindowsNodePool,
    settings: &Settings,
    seen: &Observed,
    judged: Judged<'_>,
    asked: Asked,
    mut memory: PoolMemory,
    now: Timestamp,
) -> (Round, PoolMemory) {
    let name = pool.name_any();
    let spec = &pool.spec;
    let Judged { rev, rules, views, hns_nodes } = judged;
    let leaving = leaving(&seen.deselected);
    if asked.gates_asked {
        memory.gates = Some(GatesSeen { at: now, generation: pool.metadata.generation, results: asked.gates.clone() });
    }
    let average = memory
        .average_node_update
        .or_else(|| pool.status.as_ref()?.average_node_update_seconds.map(|s| Duration::from_secs(s.max(0) as u64)));
    let breaker = breaker_of(pool, seen);
    let ring = ring_of(pool, &rev, seen, now);
    let holds = Holds {
        gates: &asked.gates,
        cluster: asked.cluster,
        average_node_update: average,
        bad_update: breaker.holding(),
        ring: ring.as_ref(),
    };
    let pool_input = PoolInput { evictions_unheard: memory.evictions_unheard(now), ..input(pool, &name, (&rev, &rules), seen, holds) };
    let plan = decide(&pool_input, &views, now);
    let mut repairs = hns_repair::repairs(&spec.hns.repair, &seen.members, &hns_nodes, now);
    let mut problems = problems(pool, &plan, &seen.membership, &hns_nodes);
    problems.append(&mut repairs.problems);
    let mut capacity = hns::capacity(seen.hns_totals, &seen.hns_limits, spec.hns.warn_percent, seen.hns_over_limit.clone());
    capacity.0.awaiting_load_balancers = seen.hns_awaiting;
    let mut status = build_status(spec, &plan, &seen.membership, Some(capacity), pool.status.as_ref(), pool.metadata.generation, now);
    if let Some(r) = &seen.patch {
        crate::decision::status::with_patch(&mut status, r, pool.status.as_ref(), pool.metadata.generation, now);
    }
    let round = Round {
        pause: match breaker {
            Breaker::Pause { trip, record } => Some(BreakerPause { trip, record }),
            _ => None,
        },
        releases: releases(leaving.free, "no longer selected by the pool: node released"),
        held_leaving: leaving.held,
        agent: hold_agent_roll(
            agent_write(pool, settings, &seen.ds_of_pool),
            plan.by_state.get(&NodeState::Applying).copied().unwrap_or(0),
        ),
        configmaps: configmap_writes(pool, &settings.agent_namespace, &plan, &seen.cms_of_pool, now),
        csi_proxy: csi_proxy_writes(pool, settings, &plan, &seen.cms_of_pool, &seen.ds_of_pool),
        pod_network: pod_network_writes(pool, settings, &seen.ds_of_pool),
        evictions_waiting: memory.evictions_waiting(now),
        eviction_due_in: memory.next_eviction_due(now),
        hns_writes: hns_writes(&hns_nodes, &views, &plan, pool, &seen.cms_of_pool, now),
        hns_not_ready: hns_nodes.iter().filter(|h| h.readiness == HnsReadiness::NotReady).map(|h| h.node.name.clone()).collect(),
        hns_drifted: hns_nodes.iter().filter(|h| matches!(h.reason, hns::reasons::COLLAPSED | hns::reasons::DRIFTED)).count(),
        hns_repairs: repairs,
        hns_utilization: seen.hns_limits.utilization(seen.hns_totals),
        stale_configmaps: stale_configmaps(&seen.cms_of_pool, &plan),
        orphaned_hook_jobs: orphaned_hook_jobs(&seen.other_hook_jobs, &views),
        announce: memory.standing_news(problems),
        transitions: transition_events(pool.status.as_ref(), &status),
        patch_eligible_in: seen.patch.as_ref().and_then(|r| r.eligible_in),
        status_write: memory.status_write(pool.status.as_ref(), &status, now),
        status,
        plan,
    };
    (round, memory)
}

/// What the bad-update breaker does to this pool.
fn breaker_of(pool: &WindowsNodePool, seen: &Observed) -> Breaker {
    let recorded = pool.annotations().get(names::ANN_BAD_UPDATE).map(String::as_str);
    breaker::for_pool(&seen.bad_updates, &pool.spec.os.patch_level, recorded, pool.pause_annotation())
}

/// The breaker's pause of one pool ([`Breaker::Pause`]).
pub(crate) struct BreakerPause {
    pub trip: BadUpdate,
    /// `winpool.dev/bad-update`: every trip of the pool's target.
    pub record: String,
}

impl BreakerPause {
    /// The merge patch that pauses the pool and records why.
    pub fn patch(&self) -> serde_json::Value {
        serde_json::json!({ "metadata": { "annotations": { names::ANN_PAUSED: names::PAUSED_BY_BREAKER, names::ANN_BAD_UPDATE: self.record } } })
    }
}

/// When to look at the pool again: when the plan says, when a deferred
/// status write may go out, and while node transitions wait to be announced.
pub(crate) fn requeue_after(round: &Round, memory: &PoolMemory, now: Timestamp) -> Duration {
    let mut requeue = round.plan.requeue_after;
    // A member behind on HNS is judged again when its grace ends: nothing
    // else may happen then (a node whose HNS lost load balancers reports
    // the same counts from then on).
    // Graces already over are judged: no hurry for them.
    if let Some(ends) = memory.hns_behind.values().map(|since| *since + hns_node::CATCH_UP_GRACE).filter(|ends| *ends > now).min() {
        requeue = requeue.min(Duration::try_from(now.duration_until(ends)).unwrap_or_default().max(Duration::from_millis(100)));
    }
    if memory.batch_waiting() {
        requeue = requeue.min(NODE_EVENT_INTERVAL);
    }
    if let StatusWrite::Defer(wait) = round.status_write {
        requeue = requeue.min(wait.max(Duration::from_millis(100)));
    }
    if let Some(due) = round.patch_eligible_in {
        requeue = requeue.min(due.max(Duration::from_secs(1)));
    }
    if let Some(due) = round.eviction_due_in {
        requeue = requeue.min(due.max(Duration::from_millis(100)));
    }
    requeue
}

/// The writes that bring each member's HNS condition and taint in step with
/// the same observation the plan was made from: a node is never Updated while
/// still tainted, and never loses its taint before it is.
fn hns_writes(
    hns_nodes: &[HnsNode<'_>],
    views: &[NodeView],
    plan: &Plan,
    pool: &WindowsNodePool,
    cms_of_pool: &[Arc<ConfigMap>],
    now: Timestamp,
) -> Vec<(HnsWrites, String)> {
    let taint_when_not_ready = pool.spec.hns.taint_when_not_ready;
    let target: Option<crate::decision::versions::WindowsBuild> = pool.spec.os.patch_level.parse().ok();
    let target_since = target_marked_at(cms_of_pool, &plan.revision);
    let patch_of: HashMap<&str, &NodePatch> = plan.patches.iter().map(|p| (p.node.as_str(), p)).collect();
    hns_nodes
        .iter()
        .zip(views)
        .filter_map(|(h, v)| {
            let patch = patch_of.get(v.name.as_str()).copied();
            let held = held_cordoned(v, patch);
            let state = patch.map(|p| p.to).or_else(|| v.state.state()).unwrap_or(NodeState::Pending);
            let unpatched = unpatched_taint(v, state, target.as_ref(), target_since);
            let mut w = hns_writes_for(h, held, taint_when_not_ready, unpatched, now)?;
            // They land before the node's guarded start and move its resourceVersion:
            // guarded by the same version, they hand the start the one they leave.
            w.unless_changed_since = patch.and_then(|p| p.unless_changed_since.clone());
            Some((w, h.message.clone()))
        })
        .collect()
}

fn orphaned_hook_jobs(
    jobs: &[(String, String, jiff::Timestamp, crate::decision::rollout::hooks::HookOutcome)],
    views: &[NodeView],
) -> Vec<String> {
    let current = |node: &str| views.iter().find(|v| v.name == node).map(|v| (v.state.state().unwrap_or_default(), v.started_at));
    jobs.iter()
        .filter(|(_, node, at, outcome)| crate::decision::rollout::hooks::orphaned(*at, outcome, current(node)))
        .map(|(job, ..)| job.clone())
        .collect()
}

fn stale_configmaps(cms_of_pool: &[Arc<ConfigMap>], plan: &Plan) -> Vec<(String, String)> {
    cms_of_pool
        .iter()
        .map(|c| (c.name_any(), c.labels().get(names::LABEL_REVISION).cloned().unwrap_or_default()))
        .filter(|(_, rev)| !plan.config_revisions.contains(rev))
        .collect()
}

/// Node values the plan ignored, the health gate that holds the rollout, and
/// nodes the pool selects but leaves alone.
fn problems(pool: &WindowsNodePool, plan: &Plan, membership: &Membership, hns_nodes: &[HnsNode<'_>]) -> Vec<(String, Event)> {
    let mut problems = Vec::new();
    // Keyed by the node and what was seen: a collapse that turns into a
    // standing drift is said once more; one that recovers and comes back, again.
    for h in hns_nodes.iter().filter(|h| matches!(h.reason, hns::reasons::COLLAPSED | hns::reasons::DRIFTED)) {
        let node = &h.node.name;
        let ev = Event {
            type_: EventType::Warning,
            reason: if h.reason == hns::reasons::COLLAPSED { EventReason::HnsCollapsed } else { EventReason::HnsDrifted }.as_str().into(),
            note: Some(format!("{node}: {}", h.message)),
            action: "Observe".into(),
            secondary: Some(node_ref(node)),
        };
        problems.push((format!("hns:{node}:{}:{}", h.reason, h.node.boot_id), ev));
    }
    for (node, msg) in &plan.warnings {
        let ev = Event {
            type_: EventType::Warning,
            reason: EventReason::NodeIgnoredValue.as_str().into(),
            note: Some(format!("{node}: {msg}")),
            action: "Observe".into(),
            secondary: Some(node_ref(node)),
        };
        problems.push((format!("{node}:{msg}"), ev));
    }
    // Keyed by what was found: a label put back and set again is news again
    // (the key is gone once the round finds the label winpool's).
    for (node, t) in &plan.tampered {
        let restored = t.restored.as_deref().map_or_else(|| "removed".to_string(), |r| format!("put back to {r:?}"));
        let ev = Event {
            type_: EventType::Warning,
            reason: EventReason::RevisionLabelRestored.as_str().into(),
            note: Some(format!(
                "{node}: {} {:?} was not set by winpool; {restored}. Its agent acts only on a start winpool recorded: the host was not touched",
                names::LABEL_REVISION,
                t.found
            )),
            action: "Restore".into(),
            secondary: Some(node_ref(node)),
        };
        problems.push((format!("tamper:{node}:{}", t.found), ev));
    }
    // Keyed by the node and the revision: said once while the node stays
    // blocked for it, whatever the wording of the agent's reasons does.
    for (node, why) in plan.preflight_blocked() {
        let ev = Event {
            type_: EventType::Warning,
            reason: EventReason::PreflightBlocked.as_str().into(),
            note: Some(format!("{node} is not started for revision {}: its agent's preflight found {why}", plan.revision)),
            action: "Preflight".into(),
            secondary: Some(node_ref(node)),
        };
        problems.push((format!("preflight:{node}:{}", plan.revision), ev));
    }
    if let Some(Hold::HealthGateClosed { gate, seen }) = &plan.hold {
        // Keyed by the gate and the kind of thing it saw, not the details:
        // which alerts fire may change while it stays closed, but a gate
        // that could not be read and then sees firing alerts is news.
        let ev = Event {
            type_: EventType::Warning,
            reason: EventReason::HealthGateClosed.as_str().into(),
            note: Some(format!("no new node starts: gate \"{gate}\": {seen}")),
            action: "Rollout".into(),
            secondary: None,
        };
        problems.push((format!("health-gate:{gate}:{}", seen.kind()), ev));
    }
    if !membership.conflicts.is_empty() {
        let msg = membership.conflicts.message(pool.spec.os.version.as_str());
        let ev = Event {
            type_: EventType::Warning,
            reason: EventReason::NodesLeftAlone.as_str().into(),
            note: Some(msg.clone()),
            action: "Select".into(),
            secondary: None,
        };
        problems.push((msg, ev));
    }
    problems
}

/// The operator's settings a round reads (its flags, as `winpool run` parsed them).
#[derive(Debug, Clone)]
pub struct Settings {
    pub agent_namespace: String,
    pub agent: AgentSettings,
    /// Only pools matching this label selector are reconciled (sharding, canaries, tests).
    pub pool_selector: Option<String>,
    /// Image prefixes a pool's spec.agent.image may use; empty allows any.
    pub allowed_agent_images: Vec<String>,
    /// URL prefixes a pool's spec.runtime.archive may use; empty allows none.
    pub allowed_runtime_archives: Vec<String>,
    /// Share prefixes (`\\server.dns.name\share`) a pool's update packages
    /// may be read from; empty allows none (drive paths are always allowed).
    pub allowed_package_shares: Vec<String>,
    /// Image prefixes a pool's hooks may run; empty allows any.
    pub allowed_hook_images: Vec<String>,
    /// ServiceAccounts a pool's hooks may run as; empty allows none.
    pub allowed_hook_service_accounts: Vec<String>,
    /// CSI Proxy's HostProcess image repository (tagged with the pool's version).
    pub csi_proxy_repository: String,
    /// The pause image of the pools' pod-network DaemonSets; None: none runs.
    pub pod_network_image: Option<String>,
    /// The operator's own namespace: the only one whose Secrets (health gate credentials) it reads.
    pub secret_namespace: String,
    /// This install's name in a pool's `winpool.dev/claimed-by` ("": claims nothing).
    pub install_id: String,
    /// Nodes failing one update with one code, across pools, before every
    /// pool targeting it pauses (0: never).
    pub bad_update_threshold: u32,
    /// Nodes that may be in flight at once across every pool of this
    /// install (0: only each pool's maxUnavailable bounds it).
    pub max_nodes_in_flight: u32,
    /// Where `rollout.hooks` Jobs run (None: a pool's hooks fail its nodes, saying so).
    pub hooks_namespace: Option<String>,
    /// How long and how many of each node's ended operations are kept.
    pub operation_retention: crate::decision::operation::Retention,
}

#[cfg(test)]
impl Settings {
    /// The chart's defaults, with this agent image: what the unit tests run with.
    pub(crate) fn example(agent_image: &str) -> Self {
        Settings {
            agent_namespace: "winpool-agents".into(),
            agent: AgentSettings { image: agent_image.into(), hns_interval: "15s".into(), max_attempts: 3, pod: Default::default() },
            pool_selector: None,
            allowed_agent_images: Vec::new(),
            allowed_hook_images: Vec::new(),
            allowed_hook_service_accounts: Vec::new(),
            allowed_runtime_archives: Vec::new(),
            allowed_package_shares: Vec::new(),
            csi_proxy_repository: crate::builders::csi_proxy::DEFAULT_REPOSITORY.into(),
            pod_network_image: Some(crate::builders::pod_network::DEFAULT_IMAGE.into()),
            secret_namespace: "winpool-system".into(),
            install_id: String::new(),
            bad_update_threshold: crate::decision::breaker::DEFAULT_THRESHOLD,
            max_nodes_in_flight: 0,
            hooks_namespace: None,
            operation_retention: Default::default(),
        }
    }
}

/// A reference to a Node, as an Event's second object.
pub(crate) fn node_ref(node: &str) -> k8s_openapi::api::core::v1::ObjectReference {
    k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(node.to_string()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::builders::daemonset::{AgentDrift, agent_daemonset};

    fn pool() -> WindowsNodePool {
        crate::test_builders::pool("p").runtime("1.7.22").build()
    }

    fn settings() -> Settings {
        Settings::example("winpool/agent:dev")
    }

    fn node(name: &str, pool: Option<&str>, cordoned_by_winpool: bool) -> Arc<NodeRecord> {
        let mut n = k8s_openapi::api::core::v1::Node {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            ..Default::default()
        };
        if let Some(p) = pool {
            n.metadata.labels = Some([(names::LABEL_POOL.to_string(), p.to_string())].into());
        }
        if cordoned_by_winpool {
            n.metadata.annotations = Some([(names::ANN_CORDONED_BY_WINPOOL.to_string(), "true".to_string())].into());
            n.spec = Some(k8s_openapi::api::core::v1::NodeSpec { unschedulable: Some(true), ..Default::default() });
        }
        Arc::new(NodeRecord::from(&n))
    }

    fn patch(node: &str, from: NodeState, to: NodeState) -> NodePatch {
        NodePatch { node: node.into(), from, to, ..Default::default() }
    }

    /// A node that leaves the pool mid-install (a selector edit, a second
    /// pool, the pool deleted) stays the pool's while its agent reports
    /// Applying or Rebooting for the start in flight; then it goes.
    #[test]
    fn a_node_leaving_mid_install_is_held_until_its_agent_reports_a_result() {
        let leaving_node = |state: &str| {
            member(
                "a",
                &[(names::ANN_STATE, state), (names::ANN_TARGET_REVISION, "r1"), (names::ANN_STARTED_AT, "2026-11-29T12:00:00Z")],
                None,
            )
        };
        let report = |status: &str, revision: &str| {
            let observed: crate::api::report::WindowsNodeReportStatus = serde_json::from_value(serde_json::json!({
                "apply": {"revision": revision, "status": status, "startedAt": "2026-11-29T12:00:00Z"}
            }))
            .unwrap();
            Some(Arc::new(WindowsNodeReport::reported("a", observed)))
        };
        let held = |state: &str, r: Option<Arc<WindowsNodeReport>>| {
            let nodes = [(leaving_node(state), r)];
            let out = leaving(&nodes);
            (out.held.iter().map(|(n, s)| format!("{n} {s}")).collect::<Vec<_>>(), out.free.len())
        };
        assert_eq!(held("Applying", report("Applying", "r1")), (vec!["a Applying".to_string()], 0));
        assert_eq!(held("Applying", report("Rebooting", "r1")), (vec!["a Rebooting".to_string()], 0));
        for (what, state, r) in [
            ("a result", "Applying", report("Failed", "r1")),
            ("verifying", "Verifying", report("Succeeded", "r1")),
            ("an earlier revision's install", "Applying", report("Applying", "r0")),
            ("no report", "Applying", None),
            ("not in flight", "Updated", report("Applying", "r1")),
        ] {
            assert_eq!(held(state, r), (Vec::<String>::new(), 1), "{what}: free to go");
        }
    }

    #[test]
    fn only_nodes_labelled_for_the_pool_and_no_longer_selected_are_released() {
        let nodes = vec![node("a", Some("p"), false), node("b", Some("p"), true), node("c", Some("q"), false), node("d", None, false)];
        let membership = Membership { members: vec!["a".into()], ..Default::default() };
        let released = releases(labelled_non_members("p", &nodes, &membership), "released");
        assert_eq!(released.iter().map(|(p, _)| p.node.as_str()).collect::<Vec<_>>(), ["b"]);
        let p = &released[0].0;
        assert_eq!(p.labels.get(names::LABEL_POOL), Some(&None), "the pool label goes");
        assert_eq!(p.unschedulable, Some(false), "winpool's cordon is lifted");
    }

    #[test]
    fn a_closed_gate_is_a_standing_problem_announced_again_only_when_what_it_sees_changes_kind() {
        use crate::decision::gates::{Failure, Seen};
        let (pool, existing) = (pool(), BTreeSet::new());
        let node = NodeView { name: "a".into(), ready: true, ..Default::default() };
        let problems_with = |seen: Seen| {
            let gates = [GateResult { gate: "alerts".into(), seen }];
            let input = PoolInput { gates: &gates, ..PoolInput::of_spec("p", &pool.spec, &existing) };
            problems(&pool, &decide(&input, std::slice::from_ref(&node), Timestamp::UNIX_EPOCH), &Membership::default(), &[])
        };
        let firing = |names: &[&str]| Seen::Alerts { total: names.len(), names: names.iter().map(|s| s.to_string()).collect() };
        let one = problems_with(firing(&["A"]));
        assert_eq!(one.len(), 1);
        let (key, ev) = &one[0];
        assert_eq!((ev.reason.as_str(), ev.type_), ("HealthGateClosed", EventType::Warning));
        assert_eq!(ev.note.as_deref(), Some("no new node starts: gate \"alerts\": 1 alert firing: A"));
        assert_eq!(&problems_with(firing(&["A", "B"]))[0].0, key, "other alerts, same problem: not announced again");
        let failed = problems_with(Seen::Failed(Failure::Timeout(std::time::Duration::from_secs(5))));
        assert_ne!(&failed[0].0, key, "a gate that cannot be read is news");
        assert!(problems_with(firing(&[])).is_empty(), "an open gate is no problem");
    }

    #[test]
    fn writes_that_finish_or_move_a_node_come_before_writes_that_start_one() {
        let existing = BTreeSet::new();
        let pool = pool();
        let input = PoolInput::of_spec("p", &pool.spec, &existing);
        let mut plan = decide(&input, &[], Timestamp::UNIX_EPOCH);
        plan.patches = vec![
            patch("a", NodeState::Pending, NodeState::Draining),
            patch("b", NodeState::Draining, NodeState::Applying),
            patch("c", NodeState::Pending, NodeState::Pending),
            patch("d", NodeState::Verifying, NodeState::Updated),
        ];
        let (first, then) = node_write_phases(&plan);
        let names = |v: Vec<&NodePatch>| v.into_iter().map(|p| p.node.clone()).collect::<Vec<_>>();
        assert_eq!(names(first), ["b", "c", "d"], "in the plan's order");
        assert_eq!(names(then), ["a"]);
    }

    #[test]
    fn the_agent_daemonset_is_applied_when_missing_replaced_when_edited_and_left_when_current() {
        let (pool, settings) = (pool(), settings());
        let wanted = agent_daemonset(&pool, &settings.agent_namespace, &settings.agent);

        let missing = agent_write(&pool, &settings, &[]).expect("a missing DaemonSet is written");
        assert_eq!((missing.drift, missing.replace), (AgentDrift::Missing, false));
        assert_eq!(missing.daemonset.metadata.resource_version, None, "applied, not guarded");

        let mut current = wanted.clone();
        current.metadata.resource_version = Some("7".into());
        assert!(agent_write(&pool, &settings, &[Arc::new(current.clone())]).is_none(), "up to date: no write");

        let mut edited = current;
        edited.spec.as_mut().unwrap().template.spec.as_mut().unwrap().node_selector.as_mut().unwrap().insert("x".into(), "y".into());
        let put_back = agent_write(&pool, &settings, &[Arc::new(edited)]).expect("a hand edit is put back");
        assert_eq!((put_back.drift, put_back.replace), (AgentDrift::HandEdited, true));
        assert_eq!(put_back.daemonset.metadata.resource_version.as_deref(), Some("7"), "guarded by what was judged");
        assert_eq!(put_back.daemonset.spec, wanted.spec, "replaced whole by what winpool wants");
    }

    #[test]
    fn an_agent_roll_waits_while_a_node_is_applying_but_a_missing_or_edited_daemonset_does_not() {
        let (pool, settings) = (pool(), settings());
        let mut old = agent_daemonset(&pool, &settings.agent_namespace, &settings.agent);
        old.metadata.annotations.as_mut().unwrap().insert(crate::builders::daemonset::ANN_SPEC_HASH.into(), "an older agent".into());
        let outdated = || agent_write(&pool, &settings, &[Arc::new(old.clone())]);
        assert_eq!(outdated().map(|w| w.drift), Some(AgentDrift::Outdated));
        assert!(hold_agent_roll(outdated(), 1).is_none(), "held while a node is Applying");
        assert!(hold_agent_roll(outdated(), 0).is_some(), "rolled once none is");
        assert!(hold_agent_roll(agent_write(&pool, &settings, &[]), 3).is_some(), "a missing DaemonSet is written at once");
    }

    #[test]
    fn the_target_revision_gets_its_configmap_once() {
        let (pool, settings) = (pool(), settings());
        let existing = BTreeSet::new();
        let plan = decide(&PoolInput::of_spec("p", &pool.spec, &existing), &[], Timestamp::UNIX_EPOCH);
        let writes = configmap_writes(&pool, &settings.agent_namespace, &plan, &[], Timestamp::UNIX_EPOCH);
        assert_eq!(writes.create.iter().map(|(r, _)| r.as_str()).collect::<Vec<_>>(), [plan.revision.as_str()]);
        let cm = Arc::new(writes.create[0].1.clone());
        let again = configmap_writes(&pool, &settings.agent_namespace, &plan, std::slice::from_ref(&cm), Timestamp::UNIX_EPOCH);
        assert!(again.create.is_empty());
        assert!(stale_configmaps(&[cm], &plan).is_empty(), "the target's ConfigMap is not stale");
    }

    #[test]
    fn the_target_mark_moves_with_the_spec_off_the_old_revision_first() {
        let (pool, settings) = (pool(), settings());
        let existing = BTreeSet::new();
        let plan_of = |pool: &WindowsNodePool| {
            let input = PoolInput::of_spec("p", &pool.spec, &existing);
            decide(&input, &[], Timestamp::UNIX_EPOCH)
        };
        let plan = plan_of(&pool);
        let first = configmap_writes(&pool, &settings.agent_namespace, &plan, &[], Timestamp::UNIX_EPOCH);
        let old = Arc::new(first.create[0].1.clone());
        assert_eq!(old.labels().get(names::LABEL_TARGET).map(String::as_str), Some("true"), "created with the mark");
        assert!(first.mark.is_empty());
        assert_eq!(target_marked_at(std::slice::from_ref(&old), &plan.revision), Some(Timestamp::UNIX_EPOCH), "and when");
        assert_eq!(target_marked_at(std::slice::from_ref(&old), "another"), None);

        let mut newer = pool.clone();
        newer.spec.os.patch_level = "10.0.20348.2800".into();
        let plan = plan_of(&newer);
        let w = configmap_writes(&newer, &settings.agent_namespace, &plan, std::slice::from_ref(&old), Timestamp::UNIX_EPOCH);
        assert_eq!(w.create[0].1.labels().get(names::LABEL_TARGET).map(String::as_str), Some("true"), "the new target's is marked");
        assert_eq!(w.mark, [(old.name_any(), false)], "the old target's mark comes off");

        // The spec goes back: the old ConfigMap (still there for a node on it) is marked again.
        let unmarked = {
            let mut c = (*old).clone();
            c.labels_mut().remove(names::LABEL_TARGET);
            Arc::new(c)
        };
        let newer_cm = Arc::new(w.create[0].1.clone());
        let back =
            configmap_writes(&pool, &settings.agent_namespace, &plan_of(&pool), &[unmarked, newer_cm.clone()], Timestamp::UNIX_EPOCH);
        assert!(back.create.is_empty());
        assert_eq!(back.mark, [(newer_cm.name_any(), false), (old.name_any(), true)], "off the newer first, then on the old");
    }
    /// A member at rest with the given annotations and HNS condition, as the cache holds it.
    fn member(name: &str, annotations: &[(&str, &str)], hns: Option<(&str, &str)>) -> Arc<NodeRecord> {
        use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};
        let mut n = k8s_openapi::api::core::v1::Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some("1".into()),
                labels: Some([(names::LABEL_POOL.to_string(), "p".to_string())].into()),
                annotations: Some(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut conditions = vec![NodeCondition { type_: "Ready".into(), status: "True".into(), ..Default::default() }];
        if let Some((status, reason)) = hns {
            conditions.push(NodeCondition {
                type_: names::NODE_CONDITION_HNS_READY.into(),
                status: status.into(),
                reason: Some(reason.into()),
                message: Some("as it was".into()),
                ..Default::default()
            });
        }
        n.status = Some(NodeStatus { conditions: Some(conditions), ..Default::default() });
        Arc::new(NodeRecord::from(&n))
    }

    /// A round with health gates, followed as the shell runs it (judge, the
    /// gates' look, the decision), computes the spec's revision once (it was
    /// five times: the look's input and its could-start and could-undo
    /// settings, the decision's input and its settings), and parses its
    /// durations and schedule once (they were parsed by each settings: 2 or 3).
    #[test]
    fn a_round_with_gates_computes_the_revision_and_parses_the_spec_once() {
        let mut pool = pool();
        pool.spec.rollout.health_gates = serde_json::from_value(serde_json::json!([
            {"name": "no-alerts", "kind": "Prometheus", "url": "http://prometheus:9090", "query": "ALERTS", "timeout": "5s"}
        ]))
        .unwrap();
        pool.spec.rollout.staging = false;
        // Undo on, with a soak: the gates' look also asks whether an undo could be due.
        (pool.spec.rollout.undo, pool.spec.rollout.soak_time) = (true, "10m".into());
        let rev = crate::decision::revision::revision_of(&pool.spec);
        let cleared =
            |name: &str| (member(name, &[], None), reported(name, serde_json::json!({"preflight": {"revision": rev, "verdict": "Ready"}})));
        let seen = observed_with(vec![cleared("a"), cleared("b")], (0, 0));
        let (mut memory, now) = (PoolMemory::default(), at(0));
        crate::decision::revision::COMPUTED.with(|c| c.set(0));
        crate::decision::rollout::PARSED.with(|c| c.set(0));
        let judged = judge(&pool, &seen, &mut memory, now);
        let look = gate_look(&pool, &seen, &judged, &memory, now);
        assert_eq!(look, GateLook::Ask, "a node would start: the gates are asked");
        let (round, _) = decide_judged(&pool, &settings(), &seen, judged, Asked::default(), memory, now);
        assert!(!round.plan.revision.is_empty());
        assert_eq!(crate::decision::revision::COMPUTED.with(|c| c.get()), 1);
        assert_eq!(crate::decision::rollout::PARSED.with(|c| c.get()), 1, "durations and schedule parsed once");
    }

    /// What a round reads, on plain values: these members, nothing else in the cluster.
    fn observed(members: Vec<Arc<NodeRecord>>, hns_totals: (i64, i64)) -> Observed {
        observed_with(members.into_iter().map(|n| (n, None)).collect(), hns_totals)
    }

    /// The members with their agents' reports.
    fn observed_with(members: Vec<(Arc<NodeRecord>, Option<Arc<WindowsNodeReport>>)>, hns_totals: (i64, i64)) -> Observed {
        let pool = pool();
        Observed {
            membership: Membership { members: members.iter().map(|(n, _)| n.name.clone()).collect(), ..Default::default() },
            members,
            deselected: Vec::new(),
            rules: DrainRules::of(&pool.spec.rollout.drain),
            pods_by_node: BTreeMap::new(),
            ds_of_pool: Vec::new(),
            cms_of_pool: Vec::new(),
            existing_revisions: BTreeSet::new(),
            hns_totals,
            hns_awaiting: 0,
            hns_over_limit: (Vec::new(), 0),
            hns_backlog: Duration::ZERO,
            hns_limits: Limits::for_pool(&pool.spec.hns, pool.spec.os.version),
            clock_skew: None,
            bad_updates: Vec::new(),
            ring: Default::default(),
            cluster: None,
            hooks_namespace: None,
            hook_runs: BTreeMap::new(),
            other_hook_jobs: Vec::new(),
            patch: None,
        }
    }

    /// A report whose status is `status`, as its agent wrote it.
    fn reported(name: &str, status: serde_json::Value) -> Option<Arc<WindowsNodeReport>> {
        Some(Arc::new(WindowsNodeReport::reported(name, serde_json::from_value(status).unwrap())))
    }

    fn at(secs: i64) -> Timestamp {
        "2026-12-03T12:00:00Z".parse::<Timestamp>().unwrap() + jiff::SignedDuration::from_secs(secs)
    }

    /// The whole round on plain values: a member whose HNS was caught up and
    /// now lags the cluster's counts keeps its condition (no write) for
    /// CATCH_UP_GRACE from when the memory first saw it behind, then is
    /// written NotReady; once caught up, the memory forgets it.
    #[test]
    fn a_round_gives_a_member_falling_behind_its_grace_from_the_memory() {
        let (pool, settings) = (pool(), settings());
        let with_counts = |lb: i64| {
            let a = member("a", &[], Some(("True", hns::reasons::CAUGHT_UP)));
            observed_with(vec![(a, reported("a", serde_json::json!({"hns": {"loadBalancers": lb, "endpoints": 100}})))], (100, 100))
        };
        let seen = with_counts(10);
        let writes = |r: &Round| {
            r.hns_writes.iter().map(|(w, _)| (w.node.clone(), w.condition.as_ref().map(|c| c.status.clone()))).collect::<Vec<_>>()
        };

        let (round, memory) = decide_round(&pool, &settings, &seen, PoolMemory::default(), at(0));
        assert!(writes(&round).is_empty(), "just fell behind: no write");
        assert_eq!(memory.hns_behind.get("a"), Some(&at(0)), "remembered since when");
        let (round, memory) = decide_round(&pool, &settings, &seen, memory, at(59));
        assert!(writes(&round).is_empty(), "still within its grace");
        assert_eq!(requeue_after(&round, &memory, at(59)), std::time::Duration::from_secs(1), "judged again when the grace ends");
        assert_eq!(requeue_after(&round, &memory, at(61)), round.plan.requeue_after, "and no sooner than the plan once it has ended");
        let (round, _) = decide_round(&pool, &settings, &seen, memory.clone(), at(60));
        assert_eq!(writes(&round), [("a".to_string(), Some("False".to_string()))], "behind for the whole grace: NotReady");
        assert_eq!(round.hns_not_ready, ["a"]);
        let (round, memory) = decide_round(&pool, &settings, &seen, PoolMemory::default(), at(60));
        assert!(writes(&round).is_empty(), "a memory that never saw it behind starts its grace now");

        let caught_up = with_counts(100);
        let (_, memory) = decide_round(&pool, &settings, &caught_up, memory, at(61));
        assert!(memory.hns_behind.is_empty(), "caught up: forgotten");
    }

    /// HNS a member held in this boot and lost is drift, named as such: a
    /// collapse to a tenth or less at once (no grace: nothing a moving count
    /// explains), tainted, with an Event; a smaller loss after the grace, as
    /// Drifted. The same counts after a reboot, or seen by a replica that
    /// never saw the node caught up, are a catch-up, as before.
    #[test]
    fn hns_lost_in_the_same_boot_is_a_collapse_at_once_or_a_drift_after_the_grace() {
        use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus, NodeSystemInfo};
        let (pool, settings) = (pool(), settings());
        let node = |lb: i64, boot: &str| {
            let mut n = k8s_openapi::api::core::v1::Node {
                metadata: ObjectMeta {
                    name: Some("a".into()),
                    resource_version: Some("1".into()),
                    labels: Some([(names::LABEL_POOL.to_string(), "p".to_string())].into()),
                    ..Default::default()
                },
                ..Default::default()
            };
            let conditions = vec![
                NodeCondition { type_: "Ready".into(), status: "True".into(), ..Default::default() },
                NodeCondition {
                    type_: names::NODE_CONDITION_HNS_READY.into(),
                    status: "True".into(),
                    reason: Some(hns::reasons::CAUGHT_UP.into()),
                    message: Some("as it was".into()),
                    ..Default::default()
                },
            ];
            let info = NodeSystemInfo { boot_id: boot.into(), ..Default::default() };
            n.status = Some(NodeStatus { conditions: Some(conditions), node_info: Some(info), ..Default::default() });
            // The counts name no boot: the node's memory of what it held in this boot says which.
            let report = reported("a", serde_json::json!({"hns": {"loadBalancers": lb, "endpoints": 100}}));
            observed_with(vec![(Arc::new(NodeRecord::from(&n)), report)], (100, 100))
        };
        let said = |r: &Round| {
            r.hns_writes
                .iter()
                .filter_map(|(w, _)| w.condition.as_ref().map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default())))
                .collect::<Vec<_>>()
        };
        let events = |r: &Round| r.announce.iter().map(|e| e.reason.clone()).collect::<Vec<_>>();
        let (_, held) = decide_round(&pool, &settings, &node(100, "b1"), PoolMemory::default(), at(0));

        let (round, _) = decide_round(&pool, &settings, &node(3, "b1"), held.clone(), at(1));
        assert_eq!(said(&round), [("False".to_string(), "Collapsed".to_string())], "3 of 100 in the boot it held 100: at once");
        assert_eq!(round.hns_not_ready, ["a"]);
        assert_eq!(events(&round), ["HNSCollapsed"]);
        assert!(round.hns_writes[0].0.condition.as_ref().unwrap().message.as_ref().unwrap().contains("3 of the 100"));

        let (round, _) = decide_round(&pool, &settings, &node(3, "b2"), held.clone(), at(1));
        assert!(said(&round).is_empty(), "after a reboot: a catch-up, with its grace");
        let (round, _) = decide_round(&pool, &settings, &node(3, "b1"), PoolMemory::default(), at(1));
        assert!(said(&round).is_empty(), "a replica that never saw it caught up: a catch-up");

        let (round, memory) = decide_round(&pool, &settings, &node(90, "b1"), held.clone(), at(1));
        assert!(said(&round).is_empty(), "10 lost: maybe a moving count, the grace first");
        let (round, _) = decide_round(&pool, &settings, &node(90, "b1"), memory, at(61));
        assert_eq!(said(&round), [("False".to_string(), "Drifted".to_string())], "still 10 short after the grace");
        assert_eq!(events(&round), ["HNSDrifted"]);
    }

    /// The budget that refused a node's drain is in its view while it is
    /// Draining, and forgotten by the round once it is not.
    #[test]
    fn a_round_forgets_a_drain_block_once_the_node_is_not_draining() {
        let (pool, settings) = (pool(), settings());
        let mut memory = PoolMemory::default();
        memory.drain_blocks.insert("a".into(), crate::decision::rollout::DrainBlock { budget: "shop/checkout".into(), since: at(0) });
        memory.drain_blocks.insert("gone".into(), crate::decision::rollout::DrainBlock { budget: "shop/checkout".into(), since: at(0) });
        let rev = crate::decision::revision::revision_of(&pool.spec);
        let draining = member(
            "a",
            &[(names::ANN_STATE, "Draining"), (names::ANN_STATE_SINCE, "2026-12-03T12:00:00Z"), (names::ANN_TARGET_REVISION, &rev)],
            None,
        );
        let mut seen = observed(vec![draining], (0, 0));
        let pod = PodOnNode {
            namespace: "shop".into(),
            name: "checkout-1".into(),
            stays: false,
            has_empty_dir: false,
            managed: true,
            deleting_since: None,
        };
        seen.pods_by_node.insert("a".into(), vec![pod]);
        let (round, memory) = decide_round(&pool, &settings, &seen, memory, at(1));
        assert!(memory.drain_blocks.contains_key("a"), "kept while Draining");
        assert!(!memory.drain_blocks.contains_key("gone"), "a node that left the pool is forgotten");
        assert_eq!(
            round.status.drain_blocked_nodes.iter().map(|b| b.pod_disruption_budget.as_str()).collect::<Vec<_>>(),
            ["shop/checkout"]
        );

        let updated = member("a", &[(names::ANN_STATE, "Updated")], None);
        let (_, memory) = decide_round(&pool, &settings, &observed(vec![updated], (0, 0)), memory, at(2));
        assert!(memory.drain_blocks.is_empty(), "not Draining any more: what blocked its drain is history");
    }

    /// The round decides whether its status is written: at once when a
    /// condition flips, progress alone at most every PROGRESS_WRITE_INTERVAL
    /// after this replica's last write; a status already there is not written.
    #[test]
    fn a_round_throttles_a_status_that_only_moved_its_progress() {
        let (mut pool, settings) = (pool(), settings());
        let seen = observed(vec![member("a", &[], None), member("b", &[], None)], (0, 0));
        let (first, mut memory) = decide_round(&pool, &settings, &seen, PoolMemory::default(), at(0));
        assert_eq!(first.status_write, StatusWrite::Write, "a pool without a status");
        memory.wrote_status(2, first.status.clone(), at(0));
        pool.status = Some(first.status.clone());
        pool.metadata.resource_version = Some("2".into());
        let (same, memory) = decide_round(&pool, &settings, &seen, memory, at(1));
        assert_eq!(same.status_write, StatusWrite::Unchanged, "nothing moved");
        let three = observed(vec![member("a", &[], None), member("b", &[], None), member("c", &[], None)], (0, 0));
        let (moved, memory) = decide_round(&pool, &settings, &three, memory, at(1));
        assert!(crate::decision::status::only_progress_changed(pool.status.as_ref().unwrap(), &moved.status), "a node joined: counts only");
        assert_eq!(moved.status_write, StatusWrite::Defer(std::time::Duration::from_secs(1)));
        assert_eq!(requeue_after(&moved, &memory, at(1)), std::time::Duration::from_secs(1), "and the round looks again then");
        let (later, _) = decide_round(&pool, &settings, &three, memory, at(2));
        assert_eq!(later.status_write, StatusWrite::Write, "the interval has passed");
    }

    /// A node whose taint could not be written is not moved on, and while
    /// any is behind no node starts (a node held back frees no slot).
    #[test]
    fn a_lagging_taint_holds_its_node_and_every_start() {
        let existing = BTreeSet::new();
        let spec = pool().spec;
        let input = PoolInput::of_spec("p", &spec, &existing);
        let mut plan = decide(&input, &[], Timestamp::UNIX_EPOCH);
        plan.patches = vec![
            patch("a", NodeState::Pending, NodeState::Draining),
            patch("b", NodeState::Draining, NodeState::Applying),
            patch("d", NodeState::Verifying, NodeState::Updated),
        ];
        let names = |v: &[&NodePatch]| v.iter().map(|p| p.node.clone()).collect::<Vec<_>>();
        let all = node_writes(&plan, &BTreeSet::new());
        assert_eq!((names(&all.first), names(&all.then)), (vec!["b".to_string(), "d".to_string()], vec!["a".to_string()]));
        let lagging = node_writes(&plan, &BTreeSet::from(["d".to_string()]));
        assert_eq!(names(&lagging.first), ["b"], "d waits for its taint");
        assert!(lagging.then.is_empty(), "and nobody starts this round");
    }
}

pub mod agent;
pub mod csi_proxy;
pub mod hns_node;
pub mod hns_repair;
pub mod memory;
pub mod pod_network;
pub mod release;
