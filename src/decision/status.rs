//! The pool's status and conditions, derived (purely) from a rollout [`Plan`].
//!
//! Conditions follow metav1.Condition rules: lastTransitionTime changes only
//! when the status flips, so `kubectl wait` and alerting see real transitions.

use crate::api::EventReason;
use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::{HnsStatus, WindowsNodePoolSpec, WindowsNodePoolStatus, conditions, names};
use crate::decision::membership::Membership;
use crate::decision::provider::ManagedNodes;
use crate::decision::rollout::{Hold, NodeState, Plan};

/// Membership problems found while selecting the pool's nodes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conflicts {
    /// Node -> the other pools that also select it.
    pub multiple_pools: Vec<(String, Vec<String>)>,
    /// Node -> its windows-build label, which is not the pool's OS version.
    pub wrong_os: Vec<(String, String)>,
    /// Node -> the pool it is leaving, which still holds it (labelled as
    /// its own) until its agent reports a result and it is given back.
    pub held_elsewhere: Vec<(String, String)>,
    /// Nodes labelled `kubernetes.io/os=windows` whose kubelet reports another OS.
    pub not_windows: Vec<String>,
}

impl Conflicts {
    pub fn is_empty(&self) -> bool {
        self.multiple_pools.is_empty() && self.wrong_os.is_empty() && self.held_elsewhere.is_empty() && self.not_windows.is_empty()
    }

    /// Only nodes still held by the pool they leave: they come once it gives
    /// them back, without anyone acting.
    fn clear_on_their_own(&self) -> bool {
        self.multiple_pools.is_empty() && self.wrong_os.is_empty() && self.not_windows.is_empty()
    }

    /// Why a pool with no node of its own has none, by count: the nodes are
    /// named once, in NodeConflicts.
    fn none_is_own(&self) -> String {
        let counted = [
            (self.multiple_pools.len(), "selected by another pool too"),
            (self.wrong_os.len(), "running another Windows release"),
            (self.held_elsewhere.len(), "still held by the pool they leave"),
            (self.not_windows.len(), "not Windows by their kubelet"),
        ];
        let why: Vec<String> = counted.iter().filter(|(n, _)| *n > 0).map(|(n, what)| format!("{n} {what}")).collect();
        format!("none of the nodes the pool selects is its own: {} (condition NodeConflicts names them)", why.join(", "))
    }

    pub fn message(&self, pool_os: &str) -> String {
        let mut parts = Vec::new();
        let list = |v: Vec<String>| {
            let n = v.len();
            let mut s: Vec<String> = v.into_iter().take(10).collect();
            if n > 10 {
                s.push(format!("and {} more", n - 10));
            }
            s.join(", ")
        };
        if !self.not_windows.is_empty() {
            parts.push(format!(
                "{} nodes are labelled kubernetes.io/os=windows but their kubelet reports another OS, and are left alone: {}",
                self.not_windows.len(),
                list(self.not_windows.clone())
            ));
        }
        if !self.multiple_pools.is_empty() {
            parts.push(format!(
                "{} nodes are selected by more than one pool and are left alone: {}",
                self.multiple_pools.len(),
                list(self.multiple_pools.iter().map(|(n, p)| format!("{n} (also {})", p.join(", "))).collect())
            ));
        }
        if !self.wrong_os.is_empty() {
            parts.push(format!(
                "{} nodes run another Windows release than {pool_os} and are left alone: {}",
                self.wrong_os.len(),
                list(self.wrong_os.iter().map(|(n, b)| format!("{n} ({b})")).collect())
            ));
        }
        if !self.held_elsewhere.is_empty() {
            parts.push(format!(
                "{} nodes are still held by the pool they leave, until it gives them back, and are left alone: {}",
                self.held_elsewhere.len(),
                list(self.held_elsewhere.iter().map(|(n, p)| format!("{n} (by {p})")).collect())
            ));
        }
        parts.join("; ")
    }
}

fn cond(type_: &str, status: bool, reason: &str, message: String) -> Condition {
    Condition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
        last_transition_time: Time(Timestamp::UNIX_EPOCH),
        observed_generation: None,
    }
}

/// Keep the previous transition time when a condition's status did not change.
pub fn merge_conditions(previous: &[Condition], mut next: Vec<Condition>, generation: Option<i64>, now: Timestamp) -> Vec<Condition> {
    for c in &mut next {
        c.observed_generation = generation;
        c.last_transition_time = match previous.iter().find(|p| p.type_ == c.type_) {
            Some(p) if p.status == c.status => p.last_transition_time.clone(),
            _ => Time(now),
        };
    }
    next
}

fn node_list(names: impl Iterator<Item = String>) -> String {
    let all: Vec<String> = names.collect();
    let mut shown: Vec<String> = all.iter().take(5).cloned().collect();
    if all.len() > 5 {
        shown.push(format!("and {} more", all.len() - 5));
    }
    shown.join(", ")
}

pub fn build_status(
    spec: &WindowsNodePoolSpec,
    plan: &Plan,
    membership: &Membership,
    hns: Option<(HnsStatus, Condition)>,
    previous: Option<&WindowsNodePoolStatus>,
    generation: Option<i64>,
    now: Timestamp,
) -> WindowsNodePoolStatus {
    let (progressing, course) = progressing_condition(plan, &membership.conflicts);
    let mut next = vec![
        ready_condition(plan, course, &membership.conflicts),
        reconciling_condition(&progressing, course),
        stalled_condition(&progressing, course),
        progressing,
        degraded_condition(spec, plan, course),
        paused_condition(plan),
        conflict_condition(spec, &membership.conflicts),
        managed_condition(&membership.managed, membership.members.len()),
        tamper_condition(plan, previous, now),
    ];
    next.extend(overdue_condition(plan));
    // HNS capacity is judged only when the round could see the cluster's load;
    // otherwise the last judgement stands.
    let (hns_status, hns_condition) = match hns {
        Some((s, c)) => (Some(s), Some(c)),
        None => (previous.and_then(|p| p.hns.clone()), None),
    };
    if let Some(c) = hns_condition {
        next.push(c);
    } else if let Some(prev) = previous.and_then(|p| p.conditions.iter().find(|c| c.type_ == conditions::HNS_CAPACITY)) {
        next.push(prev.clone());
    }

    let progressing = next.iter().any(|c| c.type_ == conditions::PROGRESSING && c.status == "True");
    WindowsNodePoolStatus {
        observed_generation: generation,
        revision: Some(plan.revision.clone()),
        started_revision: if progressing { Some(plan.revision.clone()) } else { previous.and_then(|p| p.started_revision.clone()) },
        promoted_revision: match spec.rollout.follows {
            None => None,
            Some(_) if plan.promoted => Some(plan.revision.clone()),
            Some(_) => previous.and_then(|p| p.promoted_revision.clone()),
        },
        rolled_out_at: rolled_out_at(plan, previous, now),
        nodes: plan.counts.clone(),
        hns: hns_status,
        conditions: merge_conditions(previous.map(|p| p.conditions.as_slice()).unwrap_or(&[]), next, generation, now),
        next_window_start: plan.window.and_then(|w| w.known_start()).map(Time),
        next_window_end: plan.window.and_then(|w| w.known_end()).map(Time),
        updating_nodes: plan.updating_nodes_status(),
        drain_blocked_nodes: plan.drain_blocked_status(),
        preflight_blocked_nodes: plan.preflight_blocked_status(),
        average_node_update_seconds: plan.average_node_update.map(|d| d.as_secs() as i64),
        estimated_completion_time: estimate(plan, previous),
        failed_nodes: plan.failed_nodes_status(),
        // Written by with_patch from the round's resolution; kept until then.
        resolved_patch: spec.os.patch_policy.as_ref().and(previous.and_then(|p| p.resolved_patch.clone())),
    }
}

/// When every node came to run the revision, Updated: the time said before
/// for the same revision, else now, rounded up to the second (a status time
/// is written to the second: rounded down, a soak from it would be short);
/// none while a node does not.
fn rolled_out_at(plan: &Plan, previous: Option<&WindowsNodePoolStatus>, now: Timestamp) -> Option<Time> {
    let c = &plan.counts;
    (c.total > 0 && c.updated == c.total).then(|| {
        let said = previous.filter(|p| p.revision.as_deref() == Some(plan.revision.as_str())).and_then(|p| p.rolled_out_at.clone());
        let up = jiff::TimestampRound::new().smallest(jiff::Unit::Second).mode(jiff::RoundMode::Ceil);
        said.unwrap_or(Time(now.round(up).unwrap_or(now)))
    })
}

/// `status.resolvedPatch` and the `PatchResolved` condition of the round's
/// `os.patchPolicy` resolution.
pub fn with_patch(
    status: &mut WindowsNodePoolStatus,
    r: &crate::decision::patch_policy::PatchResolution,
    previous: Option<&WindowsNodePoolStatus>,
    generation: Option<i64>,
    now: Timestamp,
) {
    status.resolved_patch = r.patch.clone();
    let c = crate::decision::patch_policy::condition(r);
    let merged = merge_conditions(previous.map(|p| p.conditions.as_slice()).unwrap_or(&[]), vec![c], generation, now);
    status.conditions.retain(|c| c.type_ != conditions::PATCH_RESOLVED);
    status.conditions.extend(merged);
}

/// The plan's estimate, unless the counts are as last written: the estimate
/// moves with now, and a status rewritten each round for it alone is churn.
fn estimate(plan: &Plan, previous: Option<&WindowsNodePoolStatus>) -> Option<Time> {
    let kept = previous.filter(|p| p.nodes == plan.counts).and_then(|p| p.estimated_completion_time.clone());
    plan.estimated_completion.map(|t| kept.unwrap_or(Time(t)))
}

/// "2 nodes wait for a PodDisruptionBudget (shop/checkout)": budgets only,
/// so the message does not change with every retry.
fn blocked_note(plan: &Plan) -> String {
    let budgets: BTreeSet<&str> = plan.blocked.values().map(|(b, _)| b.as_str()).collect();
    let budgets: Vec<&str> = budgets.into_iter().collect();
    format!(
        "{} nodes wait for a PodDisruptionBudget ({}); see status.drainBlockedNodes",
        plan.blocked.len(),
        node_list(budgets.iter().map(|b| b.to_string()))
    )
}

/// "2 nodes are never started: win-1 runs containerd 1.7.20+azure, …": the
/// first node's reason in full (they are usually all alike), the rest by name.
fn runtime_refused_note(plan: &Plan) -> String {
    let mut refused = plan.runtime_refused.iter();
    let Some((first, why)) = refused.next() else { return String::new() };
    let others: Vec<String> = refused.map(|(n, _)| n.clone()).collect();
    let also = if others.is_empty() { String::new() } else { format!(" (also {})", node_list(others.into_iter())) };
    format!("{} nodes are never started: {first} {why}{also}", plan.runtime_refused.len())
}

/// "2 nodes blocked by their agent's preflight: win-3 update source … (also win-4)".
fn preflight_note(plan: &Plan) -> String {
    let mut blocked = plan.preflight_blocked();
    let Some((first, why)) = blocked.next() else { return String::new() };
    let others: Vec<String> = blocked.map(|(n, _)| n.clone()).collect();
    let count = others.len() + 1;
    let also = if others.is_empty() { String::new() } else { format!(" (also {})", node_list(others.into_iter())) };
    let nodes = if count == 1 { "node" } else { "nodes" };
    format!("{count} {nodes} blocked by their agent's preflight, never cordoned: {first}: {why}{also}")
}

/// "2 nodes failed (a, b; why: status.failedNodes)": a failure's message
/// can run to hundreds of characters, and is said once, in status.failedNodes.
fn failures(plan: &Plan) -> String {
    format!(
        "{} failed ({}; why: status.failedNodes, kubectl winpool status)",
        count(plan.failed.len()),
        node_list(plan.failed.iter().map(|f| f.node.clone()))
    )
}

/// Why nothing starts when nothing holds the rollout: the pending nodes
/// themselves are usually Ready; the nodes down anyway hold their slots.
fn out_of_service_note(plan: &Plan) -> String {
    let u = plan.unavailable;
    let (down, pending) = (u.out_of_service, plan.counts.pending);
    format!(
        "{down} {} out of service (not Ready, or cordoned by someone else) and maxUnavailable is {}: no pending node can start until some are back; {pending} pending",
        if down == 1 { "node is" } else { "nodes are" },
        u.max_unavailable,
    )
}

/// How a reader that waits on the pool (Flux through kstatus, Argo CD's
/// health check) should take the rollout's course; Ready, Reconciling and
/// Stalled follow from it (docs/gitops.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Course {
    /// Nodes are moving, or will as soon as something that clears on its own
    /// does (capacity, a health gate, a drain that times out into Failed).
    Moving,
    /// The nodes left wait for the maintenance window the spec asks for: the
    /// pool is as its spec wants it now, not "in progress" for weeks.
    AwaitingWindow,
    /// A person paused it; a person resumes it.
    Held,
    /// It cannot go on until someone acts: failed nodes, a schedule that never
    /// opens, agents that refuse the revision.
    Stalled,
    /// Every node that can run the revision does.
    Done,
}

fn ready_condition(plan: &Plan, course: Course, conflicts: &Conflicts) -> Condition {
    let (c, rev) = (&plan.counts, &plan.revision);
    if c.total == 0 && conflicts.is_empty() {
        cond(conditions::READY, false, Readiness::NoNodes.as_str(), NO_NODES.into())
    } else if c.total == 0 {
        cond(conditions::READY, false, Readiness::NodesConflict.as_str(), conflicts.none_is_own())
    } else if c.updated == c.total {
        cond(conditions::READY, true, Readiness::RolloutComplete.as_str(), format!("all {} nodes run revision {rev}", c.total))
    } else if let (Course::AwaitingWindow, 0, Some(Hold::Ring(r))) = (course, c.failed, &plan.hold) {
        let message = format!("{} of {} nodes run revision {rev}; the others wait: {r}", c.updated, c.total);
        cond(conditions::READY, true, Readiness::WaitingForFollowedPool.as_str(), message)
    } else if course == Course::AwaitingWindow && c.failed == 0 {
        let opens = plan.window.and_then(|w| w.known_start()).map(|t| format!(" at {t}")).unwrap_or_default();
        let message =
            format!("{} of {} nodes run revision {rev}; the others start when the maintenance window opens{opens}", c.updated, c.total);
        cond(conditions::READY, true, Readiness::WaitingForMaintenanceWindow.as_str(), message)
    } else {
        cond(
            conditions::READY,
            false,
            Readiness::RolloutIncomplete.as_str(),
            format!("{} of {} nodes run revision {rev}", c.updated, c.total),
        )
    }
}

/// kstatus' Reconciling: True while the rollout moves (its reason and message
/// are Progressing's), so a GitOps wait follows it.
fn reconciling_condition(progressing: &Condition, course: Course) -> Condition {
    cond(conditions::RECONCILING, course == Course::Moving, &progressing.reason, progressing.message.clone())
}

/// kstatus' Stalled: True when the rollout waits for a person, never for time.
fn stalled_condition(progressing: &Condition, course: Course) -> Condition {
    match course {
        Course::Stalled => cond(conditions::STALLED, true, &progressing.reason, progressing.message.clone()),
        _ => cond(conditions::STALLED, false, "NotStalled", "nothing waits for a person's action".into()),
    }
}

fn moving(reason: Progress, message: String) -> (Condition, Course) {
    (cond(conditions::PROGRESSING, true, reason.as_str(), message), Course::Moving)
}

fn stopped(reason: Progress, message: String, course: Course) -> (Condition, Course) {
    (cond(conditions::PROGRESSING, false, reason.as_str(), message), course)
}

/// `; note` when there is a note.
fn and_note(note: String) -> String {
    if note.is_empty() { note } else { format!("; {note}") }
}

/// Nodes are in flight. Counts only: a per-node wait list would change every
/// few seconds and rewrite the status each time.
fn updating_condition(plan: &Plan) -> (Condition, Course) {
    let c = &plan.counts;
    let by = |s: NodeState| plan.by_state.get(&s).copied().unwrap_or(0);
    let blocked = if plan.blocked.is_empty() { String::new() } else { blocked_note(plan) };
    let refused = if plan.runtime_refused.is_empty() { String::new() } else { runtime_refused_note(plan) };
    moving(
        Progress::NodesUpdating,
        format!(
            "{} updating ({} draining, {} applying, {} verifying), {} pending, {} updated of {}{}{}{}",
            c.updating,
            by(NodeState::Draining),
            by(NodeState::Applying),
            by(NodeState::Verifying),
            c.pending,
            c.updated,
            c.total,
            and_note(blocked),
            and_note(refused),
            and_note(preflight_note(plan)),
        ),
    )
}

const NO_NODES: &str = "no Windows node matches the pool's nodeSelector";

/// Why no pending node starts though a slot may be free: each one is
/// labelled winpool.dev/hold=true, needs a containerd the pool may not
/// replace, or waits for its agent (its preflight, its download). The
/// Progressing condition says it, and `kubectl winpool plan` shows it as what
/// holds the rollout: one verdict for both.
#[derive(Debug, Clone, PartialEq)]
pub struct Standstill {
    pub reason: Progress,
    /// The pending nodes by what each waits for.
    pub message: String,
    course: Course,
}

/// The standstill of a decision whose `pending` nodes are all held, refused
/// or awaiting their agent; `None` while one of them may start.
pub fn standstill(plan: &Plan, pending: usize) -> Option<Standstill> {
    let stuck: BTreeSet<&String> = plan.held.iter().chain(plan.runtime_refused.keys()).chain(plan.preflight_held.keys()).collect();
    if stuck.is_empty() || stuck.len() < pending {
        return None;
    }
    let (awaited, staging, blocked) = (plan.preflight_awaited(), plan.staging(), plan.preflight_blocked().count());
    // Nodes on their way first: the rest is looked at when they arrive.
    let (reason, course) = if awaited + staging > 0 {
        (Progress::AwaitingPreflight, Course::Moving)
    } else if blocked > 0 {
        (Progress::PreflightBlocked, Course::Stalled)
    } else if !plan.runtime_refused.is_empty() {
        (Progress::RuntimeUpgradeRefused, Course::Stalled)
    } else {
        (Progress::NodesHeld, Course::Held)
    };
    let held = (!plan.held.is_empty()).then(|| {
        let names: Vec<&str> = plan.held.iter().map(String::as_str).take(10).collect();
        format!("{} held by the node label {}=true: {}", plan.held.len(), names::LABEL_HOLD, names.join(", "))
    });
    let waiting = (awaited + staging > 0).then(|| format!("waiting for {}", awaited_note(awaited, staging, &plan.revision)));
    let notes = [held, Some(runtime_refused_note(plan)), waiting, Some(preflight_note(plan))];
    let message = notes.into_iter().flatten().filter(|n| !n.is_empty()).collect::<Vec<_>>().join("; ");
    Some(Standstill { reason, message, course })
}

/// Nodes are pending, none in flight, and nothing holds the rollout: why none starts.
fn pending_condition(plan: &Plan) -> (Condition, Course) {
    let c = &plan.counts;
    match plan.soaking {
        Some(k) => moving(
            Progress::Soaking,
            format!(
                "{} updated nodes soaking (rollout.soakTime) before the next starts at {}; {} pending, {} updated of {}",
                k.nodes, k.first_ends, c.pending, c.updated, c.total
            ),
        ),
        None if !plan.blocked.is_empty() => {
            stopped(Progress::DrainBlocked, format!("{} pending; {}", c.pending, blocked_note(plan)), Course::Moving)
        }
        None => match standstill(plan, c.pending.max(0) as usize) {
            Some(s) => {
                let message = format!("{} pending; {}", c.pending, s.message);
                (cond(conditions::PROGRESSING, s.course == Course::Moving, s.reason.as_str(), message), s.course)
            }
            None => stopped(Progress::NodesNotReady, out_of_service_note(plan), Course::Moving),
        },
    }
}

/// What the pending nodes their agents hold wait for: a preflight, the
/// download before the drain.
fn awaited_note(awaited: usize, staging: usize, rev: &str) -> String {
    let preflight = format!("{awaited} agents' preflight of revision {rev}");
    let download = format!("{staging} agents' download of its update (rollout.staging)");
    match (awaited, staging) {
        (_, 0) => preflight,
        (0, _) => download,
        _ => format!("{preflight} and {download}"),
    }
}

fn progressing_condition(plan: &Plan, conflicts: &Conflicts) -> (Condition, Course) {
    let (c, rev) = (&plan.counts, &plan.revision);
    if c.total == 0 && conflicts.is_empty() {
        return stopped(Progress::NoNodes, NO_NODES.into(), Course::Done);
    }
    if c.total == 0 {
        let course = if conflicts.clear_on_their_own() { Course::Moving } else { Course::Stalled };
        return stopped(Progress::NodesConflict, conflicts.none_is_own(), course);
    }
    match (&plan.hold, c.updating > 0, c.pending > 0) {
        (_, true, _) => updating_condition(plan),
        (None, false, true) => pending_condition(plan),
        (Some(Hold::PausedBySpec), false, true) => {
            stopped(Progress::Paused, format!("rollout.paused is true; {} nodes pending", c.pending), Course::Held)
        }
        (Some(Hold::PausedByAnnotation), false, true) => {
            stopped(Progress::Paused, format!("paused by the annotation {}; {} nodes pending", names::ANN_PAUSED, c.pending), Course::Held)
        }
        (Some(Hold::BadUpdate(b)), false, true) => stopped(
            Progress::Paused,
            format!("paused by the bad-update breaker; {} nodes pending: {}", c.pending, b.message()),
            Course::Held,
        ),
        (Some(Hold::FailureLimit { failed, limit }), false, true) => {
            let message = format!("{failed} failed nodes reached maxFailedNodes {limit}; {} nodes pending", c.pending);
            stopped(Progress::FailureLimitReached, message, Course::Stalled)
        }
        (Some(Hold::OutsideWindow { opens }), false, true) => {
            let closes = plan.window.and_then(|w| w.known_end()).map(|t| format!(" and closes at {t}")).unwrap_or_default();
            stopped(
                Progress::OutsideMaintenanceWindow,
                format!("{} nodes pending; the next maintenance window opens at {opens}{closes}", c.pending),
                Course::AwaitingWindow,
            )
        }
        (Some(Hold::NoWindowAhead), false, true) => stopped(
            Progress::NoMaintenanceWindowAhead,
            format!("{} nodes pending; no maintenance window opens within 400 days outside rollout.notAllowedDates", c.pending),
            Course::Stalled,
        ),
        (Some(Hold::BadWindow(e)), false, true) => stopped(Progress::InvalidMaintenanceWindow, e.clone(), Course::Stalled),
        (Some(Hold::HealthGateClosed { gate, seen }), false, true) => {
            // Pending nodes whose agent has not judged the revision wait for
            // it, whatever the gate says (a node-scope gate holds only the
            // nodes it saw).
            let (awaited, staging) = (plan.preflight_awaited(), plan.staging());
            let preflight = match (awaited, staging) {
                (0, 0) => String::new(),
                (a, 0) => format!(", {a} of them awaiting their agent's preflight of revision {rev}"),
                (a, s) => format!(", {} of them waiting for {}", a + s, awaited_note(a, s, rev)),
            };
            stopped(Progress::HealthGateClosed, format!("gate \"{gate}\": {seen}; {} nodes pending{preflight}", c.pending), Course::Moving)
        }
        (Some(Hold::Ring(r)), false, true) => stopped(
            Progress::AwaitingFollowedPool,
            format!("{} nodes pending; {r}", c.pending),
            if r.needs_a_person() { Course::Stalled } else { Course::AwaitingWindow },
        ),
        (Some(Hold::ClusterLimit(limit)), false, true) => stopped(
            Progress::ClusterLimitReached,
            format!("{} nodes pending; {}", c.pending, crate::decision::rollout::cluster_limit_message(*limit)),
            Course::Moving,
        ),
        (Some(Hold::HnsBacklog(w)), false, true) => {
            stopped(Progress::WaitingForHNS, format!("{} nodes pending; {}", c.pending, w.message()), Course::Moving)
        }
        (Some(Hold::ClockSkew { by }), false, true) => stopped(
            Progress::ClockSkewed,
            format!("{}; {} nodes pending", crate::decision::rollout::clock_skew_message(*by), c.pending),
            Course::Stalled,
        ),
        (_, false, false) if c.failed > 0 => {
            let message = format!("no node left to update; {}", failures(plan));
            stopped(Progress::NodesFailed, message, Course::Stalled)
        }
        (_, false, false) => stopped(Progress::RolloutComplete, format!("revision {rev} rolled out"), Course::Done),
    }
}

/// What the failures mean for the rollout follows its course, as Progressing,
/// Reconciling and Stalled say it: "goes on" only while it does.
fn degraded_condition(spec: &WindowsNodePoolSpec, plan: &Plan, course: Course) -> Condition {
    let c = &plan.counts;
    if c.failed == 0 {
        return cond(conditions::DEGRADED, false, "NoFailures", "no node failed".into());
    }
    let limit = spec.rollout.max_failed_nodes;
    let rollout = match (&plan.hold, course) {
        _ if c.pending == 0 && c.updating == 0 => "no node is left to update".to_string(),
        (Some(Hold::FailureLimit { .. }), _) => format!("the rollout paused itself at maxFailedNodes {limit}"),
        (_, Course::Moving) if limit == 0 => "the rollout goes on (maxFailedNodes 0: failures never pause it)".to_string(),
        (_, Course::Moving) => format!("the rollout goes on until maxFailedNodes {limit}"),
        _ => "the rollout waits, as Progressing says".to_string(),
    };
    let message = format!(
        "{}; {rollout}. Fix the node, then retry it: kubectl winpool retry <node> (or remove its winpool.dev/state annotation)",
        failures(plan)
    );
    cond(conditions::DEGRADED, true, "NodesFailed", message)
}

fn paused_condition(plan: &Plan) -> Condition {
    match &plan.hold {
        Some(Hold::PausedBySpec) => cond(conditions::PAUSED, true, "PausedBySpec", "rollout.paused is true".into()),
        Some(Hold::PausedByAnnotation) => cond(
            conditions::PAUSED,
            true,
            "PausedByAnnotation",
            format!("the pool carries {}: \"true\" (kubectl winpool pause)", names::ANN_PAUSED),
        ),
        Some(Hold::BadUpdate(b)) => cond(conditions::PAUSED, true, "BadUpdate", b.message()),
        Some(Hold::FailureLimit { limit, .. }) => {
            cond(conditions::PAUSED, true, "FailureLimitReached", format!("maxFailedNodes {limit} reached: {}", failures(plan)))
        }
        _ => cond(conditions::PAUSED, false, "NotPaused", "the rollout is not paused".into()),
    }
}

/// Stated once, as a condition that stands while it is true, not an Event
/// every round: the provider's own upgrades are not winpool's to stop.
fn managed_condition(managed: &ManagedNodes, members: usize) -> Condition {
    let message = if managed.is_empty() { "no node's image is managed by its provider".into() } else { managed.message(members) };
    cond(conditions::PROVIDER_MANAGED, !managed.is_empty(), managed.reason(), message)
}

/// How long RevisionLabelTampered stays True after it turned True: the label
/// is put back in the round that finds it, so without a hold the condition
/// would be True for one round only, too briefly for a person or an alert to see.
pub const TAMPER_CONDITION_HOLD: Duration = Duration::from_secs(3600);

/// A revision label winpool did not set was found (and put back) this round,
/// or within TAMPER_CONDITION_HOLD of the condition turning True.
fn tamper_condition(plan: &Plan, previous: Option<&WindowsNodePoolStatus>, now: Timestamp) -> Condition {
    if !plan.tampered.is_empty() {
        let found = node_list(plan.tampered.iter().map(|(n, t)| {
            format!(
                "{n} ({:?}, put back to {})",
                t.found,
                t.restored.as_deref().map_or_else(|| "no label".to_string(), |r| format!("{r:?}"))
            )
        }));
        let message = format!(
            "{} winpool did not set, put back: {found}. An agent acts only on a start winpool recorded, so no host was touched; \
             find who writes it (the Node's managedFields, the audit log)",
            names::LABEL_REVISION
        );
        return cond(conditions::REVISION_LABEL_TAMPERED, true, "LabelRestored", message);
    }
    let held = previous
        .and_then(|p| p.conditions.iter().find(|c| c.type_ == conditions::REVISION_LABEL_TAMPERED))
        .filter(|c| c.status == "True" && now.duration_since(c.last_transition_time.0).unsigned_abs() < TAMPER_CONDITION_HOLD);
    match held {
        Some(c) => c.clone(),
        None => cond(conditions::REVISION_LABEL_TAMPERED, false, "NoTampering", "every member's revision label is one winpool set".into()),
    }
}

/// With a deadline: whether nodes missed it (none without one, so a pool
/// that sets none carries no condition it never asked for).
fn overdue_condition(plan: &Plan) -> Option<Condition> {
    let deadline = plan.deadline?;
    Some(if plan.patch_overdue > 0 {
        let message = format!(
            "{} of {} nodes run below the patch level of revision {} past its deadline ({deadline}): see kubectl winpool compliance",
            plan.patch_overdue, plan.counts.total, plan.revision
        );
        cond(conditions::PATCH_OVERDUE, true, "DeadlinePassed", message)
    } else if plan.behind_patch_level > 0 {
        let message = format!("{} nodes below the patch level have until {deadline}", plan.behind_patch_level);
        cond(conditions::PATCH_OVERDUE, false, "WithinDeadline", message)
    } else {
        cond(conditions::PATCH_OVERDUE, false, "AtPatchLevel", "every node runs the patch level".into())
    })
}

fn conflict_condition(spec: &WindowsNodePoolSpec, conflicts: &Conflicts) -> Condition {
    if conflicts.is_empty() {
        cond(conditions::NODES_CONFLICT, false, "NoConflicts", "every selected node belongs to this pool alone".into())
    } else {
        cond(conditions::NODES_CONFLICT, true, "NodesLeftAlone", conflicts.message(spec.os.version.as_str()))
    }
}

/// Condition flips worth an Event on the pool: (reason, message).
/// A change of the pool's conditions that is announced as an Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolTransition {
    RolloutStarted,
    RolloutComplete,
    RolloutPaused,
    RolloutResumed,
    /// The cluster's Services come near or over what a node's HNS holds.
    HnsCapacity,
}

impl PoolTransition {
    pub fn reason(self) -> EventReason {
        match self {
            PoolTransition::RolloutStarted => EventReason::RolloutStarted,
            PoolTransition::RolloutComplete => EventReason::RolloutComplete,
            PoolTransition::RolloutPaused => EventReason::RolloutPaused,
            PoolTransition::RolloutResumed => EventReason::RolloutResumed,
            PoolTransition::HnsCapacity => EventReason::HnsCapacity,
        }
    }

    /// A pause holds every node until a person lifts it, and a pool near its
    /// HNS limits needs a look: Warnings. The rest is news.
    pub fn is_warning(self) -> bool {
        matches!(self, PoolTransition::RolloutPaused | PoolTransition::HnsCapacity)
    }
}

pub fn transition_events(previous: Option<&WindowsNodePoolStatus>, next: &WindowsNodePoolStatus) -> Vec<(PoolTransition, String)> {
    let was = |t: &str| previous.and_then(|p| p.conditions.iter().find(|c| c.type_ == t)).map(|c| c.status.clone());
    // A rollout starts once per revision (when it first progresses: a
    // revision held from the start, paused or outside its window, starts when
    // the hold lifts), or again when nodes join a pool that had finished.
    // Progressing also drops to False inside a rollout (no capacity while
    // nodes are NotReady, a hold that lifts): resuming is not a new start, and
    // announcing it again read as a second rollout.
    let previous_progress =
        previous.and_then(|p| p.conditions.iter().find(|c| c.type_ == conditions::PROGRESSING)).map(|c| Progress::parse(&c.reason));
    let new_rollout = previous.is_none_or(|p| p.started_revision != next.revision)
        || matches!(
            previous_progress,
            None | Some(Some(Progress::RolloutComplete | Progress::NodesFailed | Progress::NoNodes | Progress::NodesConflict))
        );
    // Ready is also True for a pool whose remaining nodes wait for their
    // window; the rollout is complete only when Ready says so by its reason.
    let complete = |s: Option<&WindowsNodePoolStatus>| {
        s.and_then(|s| s.conditions.iter().find(|c| c.type_ == conditions::READY))
            .is_some_and(|c| c.status == "True" && Readiness::parse(&c.reason) == Some(Readiness::RolloutComplete))
    };
    let mut out = Vec::new();
    if complete(Some(next)) && !complete(previous) {
        let ready = next.conditions.iter().find(|c| c.type_ == conditions::READY).expect("complete means a Ready condition");
        out.push((PoolTransition::RolloutComplete, ready.message.clone()));
    }
    for c in &next.conditions {
        if was(&c.type_).as_deref() == Some(c.status.as_str()) {
            continue;
        }
        let reason = match (c.type_.as_str(), c.status.as_str()) {
            (conditions::PROGRESSING, "True") if new_rollout => PoolTransition::RolloutStarted,
            (conditions::PAUSED, "True") => PoolTransition::RolloutPaused,
            (conditions::PAUSED, "False") if was(conditions::PAUSED).is_some() => PoolTransition::RolloutResumed,
            (conditions::HNS_CAPACITY, _) if c.reason != crate::decision::hns::CapacityState::WithinLimits.as_str() => {
                PoolTransition::HnsCapacity
            }
            _ => continue,
        };
        out.push((reason, c.message.clone()));
    }
    out
}

/// How often a status that only moved its progress (counts, numbers in
/// messages) is written. Anything a reader acts on — a condition's status or
/// reason, the revision, the generation, which nodes failed, the HNS state — is
/// written at once; counts in between land within this time.
pub const PROGRESS_WRITE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(2);

/// True when `next` differs from `previous` only in progress: the node counts,
/// condition messages and transition times, and the HNS numbers. Such a change
/// can wait for [`PROGRESS_WRITE_INTERVAL`]; at a thousand nodes writing every
/// one of them was one status write per three nodes updated.
pub fn only_progress_changed(previous: &WindowsNodePoolStatus, next: &WindowsNodePoolStatus) -> bool {
    let key = |s: &WindowsNodePoolStatus| {
        let conds: Vec<(String, String, String)> =
            s.conditions.iter().map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone())).collect();
        let failed: Vec<&str> = s.failed_nodes.iter().map(|f| f.name.as_str()).collect();
        let hns = s.hns.as_ref().map(|h| (h.state, h.limit_load_balancers, h.limit_endpoints));
        let window = (s.next_window_start.clone(), s.next_window_end.clone());
        (s.observed_generation, s.revision.clone(), conds, failed.join(","), hns, window)
    };
    key(previous) == key(next)
}

/// The most an Event's note may hold (events.k8s.io/v1 rejects longer notes).
const EVENT_NOTE_MAX: usize = 1024;

/// One Event per kind of node transition in a round, not one per node: a wave
/// of a hundred nodes is two Events on the pool instead of two hundred writes,
/// and `kubectl describe wnp` stays readable at scale. Each node's own story is
/// on the Node (its `winpool.dev/state*` annotations) and in the log. Failures
/// stay one Event per node (on the pool and on the Node): each needs a look.
/// `written` are the transitions that landed this round, in any order; returns
/// (reason, note) for `NodesStarted` and `NodesUpdated`.
pub fn node_batch_events(written: &[(&str, NodeState, NodeState)], revision: &str) -> Vec<(EventReason, String)> {
    let mut started: Vec<&str> =
        written.iter().filter(|(_, from, to)| *from == NodeState::Pending && to.in_flight()).map(|w| w.0).collect();
    let mut updated: Vec<&str> =
        written.iter().filter(|(_, from, to)| from.in_flight() && *to == NodeState::Updated).map(|w| w.0).collect();
    started.sort_unstable();
    updated.sort_unstable();
    let mut out = Vec::new();
    if !started.is_empty() {
        out.push((
            EventReason::NodesStarted,
            names_note(&format!("started updating {} to revision {revision}", count(started.len())), &started),
        ));
    }
    if !updated.is_empty() {
        out.push((EventReason::NodesUpdated, names_note(&format!("{} updated to revision {revision}", count(updated.len())), &updated)));
    }
    out
}

fn count(n: usize) -> String {
    if n == 1 { "1 node".into() } else { format!("{n} nodes") }
}

/// `head: a, b, c` with as many names as fit in an Event note, then "and N more".
fn names_note(head: &str, nodes: &[&str]) -> String {
    let mut note = format!("{head}: ");
    for (i, n) in nodes.iter().enumerate() {
        if i > 0 {
            note.push_str(", ");
        }
        // Room for this name and a closing "and 99999 more" after it.
        if note.len() + n.len() + ", and 99999 more".len() > EVENT_NOTE_MAX {
            note.push_str(&format!("and {} more", nodes.len() - i));
            return note;
        }
        note.push_str(n);
    }
    note
}

#[cfg(test)]
mod gitops;
mod reason;
pub use reason::{Progress, Readiness};

#[cfg(test)]
mod tests {
    use super::gitops::now;
    use super::*;
    use crate::decision::rollout::preflight::cleared;
    use crate::decision::rollout::{NodeView, PoolInput, decide};
    use std::collections::{BTreeMap, BTreeSet};

    fn spec(extra: &str) -> WindowsNodePoolSpec {
        crate::test_builders::spec(extra)
    }

    fn plan_for(spec: &WindowsNodePoolSpec, nodes: &[NodeView], now: Timestamp) -> Plan {
        decide(&PoolInput::of_spec("p", spec, &BTreeSet::new()), &cleared(spec, nodes), now)
    }

    fn status_for(
        spec: &WindowsNodePoolSpec,
        nodes: &[NodeView],
        prev: Option<&WindowsNodePoolStatus>,
        now: Timestamp,
    ) -> WindowsNodePoolStatus {
        build_status(spec, &plan_for(spec, nodes, now), &Membership::default(), None, prev, Some(3), now)
    }

    /// The status of one round of `input` over `nodes` (their preflights as given).
    fn round_status(input: &PoolInput, nodes: &[NodeView], now: Timestamp) -> WindowsNodePoolStatus {
        build_status(input.spec, &decide(input, nodes, now), &Membership::default(), None, None, Some(3), now)
    }

    fn event_reasons(prev: Option<&WindowsNodePoolStatus>, next: &WindowsNodePoolStatus) -> Vec<String> {
        transition_events(prev, next).into_iter().map(|(r, _)| r.reason().as_str().to_string()).collect()
    }

    fn get<'a>(s: &'a WindowsNodePoolStatus, t: &str) -> &'a Condition {
        s.conditions.iter().find(|c| c.type_ == t).unwrap()
    }

    fn node(name: &str) -> NodeView {
        NodeView { name: name.into(), ready: true, pool_label: Some("p".into()), ..Default::default() }
    }

    /// A node updated to `rev` `ago` before now, as its agent and kubelet report it.
    fn updated(name: &str, rev: &str, ago: jiff::SignedDuration) -> NodeView {
        NodeView {
            state: crate::decision::rollout::NodeState::Updated.into(),
            state_since: Some(now() - ago),
            revision_label: Some(rev.into()),
            applied_revision: Some(rev.into()),
            apply_status: Some(crate::decision::agent_report::Reported::Known(crate::api::report::ApplyStatus::Succeeded)),
            kernel_version: Some("10.0.20348.2762".into()),
            cni_mode: Some(crate::decision::agent_report::Reported::parse("overlay")),
            ..node(name)
        }
    }

    fn ring_status(spec: &WindowsNodePoolSpec, ring: Option<&crate::decision::ring::RingHold>, now: Timestamp) -> WindowsNodePoolStatus {
        let existing = BTreeSet::new();
        round_status(&PoolInput { ring, ..PoolInput::of_spec("p", spec, &existing) }, &cleared(spec, &[node("a"), node("b")]), now)
    }

    /// A ring waiting for its soak is as its spec wants it (Ready, not
    /// Reconciling), a ring whose canary failed needs a person (Stalled), and
    /// the revision the ring let start is recorded as promoted.
    #[test]
    fn a_ring_waiting_on_the_pool_it_follows_says_so_and_records_what_it_promoted() {
        use crate::decision::ring::RingHold;
        let now: Timestamp = "2026-12-04T12:00:00Z".parse().unwrap();
        let spec = spec("rollout: {follows: {pool: canary}}");
        let until = now + jiff::SignedDuration::from_hours(2);
        let soaking = ring_status(&spec, Some(&RingHold::Soaking { pool: "canary".into(), until }), now);
        let p = get(&soaking, conditions::PROGRESSING);
        assert_eq!(p.reason, "AwaitingFollowedPool");
        assert!(p.message.contains("canary") && p.message.contains(&until.to_string()), "{}", p.message);
        assert_eq!((get(&soaking, "Ready").status.as_str(), get(&soaking, "Ready").reason.as_str()), ("True", "WaitingForFollowedPool"));
        assert_eq!(get(&soaking, "Reconciling").status, "False");
        assert_eq!(get(&soaking, "Stalled").status, "False");
        assert_eq!(soaking.promoted_revision, None);
        assert!(soaking.updating_nodes.is_empty(), "no node started");

        let degraded = ring_status(&spec, Some(&RingHold::Degraded { pool: "canary".into(), message: "1 nodes failed".into() }), now);
        assert_eq!(get(&degraded, "Stalled").status, "True");
        assert_eq!(get(&degraded, "Ready").status, "False");

        let open = ring_status(&spec, None, now);
        assert_eq!(open.promoted_revision, open.revision);
        assert_eq!(open.nodes.updating, 1, "one node started");
        assert_eq!(ring_status(&self::spec(""), None, now).promoted_revision, None, "a pool that follows none promotes nothing");
    }

    /// A rollout waiting for HNS moves on by itself: Progressing False with
    /// reason WaitingForHNS and the estimate against the budget, Reconciling
    /// (a GitOps wait keeps waiting), never Stalled.
    #[test]
    fn a_rollout_waiting_for_hns_says_how_far_behind_and_is_not_stalled() {
        let now: Timestamp = "2026-12-04T12:00:00Z".parse().unwrap();
        let spec = spec("rollout: {hnsPacing: {budget: 30s}}");
        let existing = BTreeSet::new();
        let input = PoolInput { hns_backlog: std::time::Duration::from_secs(95), ..PoolInput::of_spec("p", &spec, &existing) };
        let st = round_status(&input, &cleared(&spec, &[node("a"), node("b")]), now);
        let p = get(&st, conditions::PROGRESSING);
        assert_eq!((p.status.as_str(), p.reason.as_str()), ("False", "WaitingForHNS"));
        assert!(p.message.contains("95s") && p.message.contains("budget 30s"), "{}", p.message);
        assert_eq!(get(&st, "Stalled").status, "False");
        assert_eq!(get(&st, "Reconciling").status, "True");
        assert_eq!(st.nodes.updating, 0, "no node started");
    }

    /// The label is put back in the round that finds it; the condition tells
    /// of it for TAMPER_CONDITION_HOLD after it turned True, then clears.
    #[test]
    fn a_tampered_revision_label_is_a_condition_for_an_hour() {
        let t0: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let at = |mins: i64| t0 + jiff::SignedDuration::from_mins(mins);
        let spec = spec("rollout: {paused: true}");
        let tampered = NodeView { revision_label: Some("feedface00".into()), ..node("win-3") };
        let found = status_for(&spec, &[tampered], None, t0);
        let c = get(&found, conditions::REVISION_LABEL_TAMPERED);
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "LabelRestored"));
        assert!(c.message.contains("win-3") && c.message.contains("feedface00"), "{}", c.message);
        // Put back: later rounds see winpool's label (here: none).
        let later = status_for(&spec, &[node("win-3")], Some(&found), at(59));
        assert_eq!(get(&later, conditions::REVISION_LABEL_TAMPERED), c, "still told, unchanged");
        let cleared = status_for(&spec, &[node("win-3")], Some(&later), at(61));
        let c = get(&cleared, conditions::REVISION_LABEL_TAMPERED);
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "NoTampering"));
    }

    #[test]
    fn a_closed_health_gate_is_named_in_the_progressing_condition_with_what_it_saw() {
        use crate::decision::gates::{Failure, GateResult, Seen};
        let spec = spec("rollout: {maxUnavailable: 1}");
        let existing = BTreeSet::new();
        let cases = [
            (
                Seen::Alerts { total: 2, names: vec!["KubeNodeNotReady".into(), "X".into()] },
                "gate \"no-critical-alerts\": 2 alerts firing: KubeNodeNotReady, X; 2 nodes pending",
            ),
            (
                Seen::Failed(Failure::Timeout(std::time::Duration::from_secs(5))),
                "gate \"no-critical-alerts\": query failed: timeout after 5s; 2 nodes pending",
            ),
        ];
        for (seen, want) in cases {
            let gates = [GateResult { gate: "no-critical-alerts".into(), seen }];
            let input = PoolInput { gates: &gates, ..PoolInput::of_spec("p", &spec, &existing) };
            let s = round_status(&input, &cleared(&spec, &[node("a"), node("b")]), now());
            let c = get(&s, conditions::PROGRESSING);
            assert_eq!((c.status.as_str(), c.reason.as_str(), c.message.as_str()), ("False", "HealthGateClosed", want));
            assert_eq!(get(&s, conditions::PAUSED).status, "False", "a closed gate is no pause: it opens by itself");
        }
    }

    #[test]
    fn a_node_scope_gate_s_message_counts_the_pending_nodes_that_await_their_agent_not_the_gate() {
        use crate::decision::gates::{GateResult, Seen};
        let spec = spec("rollout: {maxUnavailable: 2}");
        let existing = BTreeSet::new();
        let on = BTreeMap::from([("a".to_string(), vec!["ns/backup".to_string()])]);
        let gates = [GateResult { gate: "no-backups".into(), seen: Seen::PodsOnNodes(on) }];
        // a's agent cleared the revision and a pod holds it; b's agent has yet to answer.
        let mut nodes = cleared(&spec, &[node("a")]);
        nodes.push(node("b"));
        let s = round_status(&PoolInput { gates: &gates, ..PoolInput::of_spec("p", &spec, &existing) }, &nodes, now());
        let c = get(&s, conditions::PROGRESSING);
        let rev = crate::decision::revision::revision_of(&spec);
        assert_eq!(
            (c.reason.as_str(), c.message.as_str()),
            (
                "HealthGateClosed",
                format!("gate \"no-backups\": matching pods run on 1 node: a (ns/backup); 2 nodes pending, 1 of them awaiting their agent's preflight of revision {rev}").as_str()
            )
        );
    }

    #[test]
    fn a_rollout_held_by_soaking_nodes_is_progressing_and_says_when_the_next_starts() {
        let spec = spec("rollout: {maxUnavailable: 1, soakTime: 5m}");
        let rev = crate::decision::revision::revision_of(&spec);
        let soaking = NodeView { target_revision: Some(rev.clone()), ..updated("a", &rev, jiff::SignedDuration::from_secs(60)) };
        let s = status_for(&spec, &[soaking, node("b")], None, now());
        let c = get(&s, conditions::PROGRESSING);
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "Soaking"), "{}", c.message);
        assert!(c.message.contains("2026-11-29T12:04:00Z"), "says when the next node starts: {}", c.message);
    }

    #[test]
    fn nodes_down_that_use_up_max_unavailable_are_counted_in_the_progressing_condition_not_the_pending_ones() {
        let spec = spec("rollout: {maxUnavailable: 2}");
        let rev = crate::decision::revision::revision_of(&spec);
        // Updated a while ago, and then their kubelets stopped posting status.
        let down = |name: &str| NodeView { ready: false, ..updated(name, &rev, jiff::SignedDuration::from_mins(10)) };
        // Ready, but cordoned by someone else (an admin's maintenance).
        let cordoned = NodeView { ready: true, unschedulable: true, ..down("c") };
        let nodes = [down("a"), down("b"), cordoned, node("d"), node("e")];
        let s = status_for(&spec, &nodes, None, now());
        let c = get(&s, conditions::PROGRESSING);
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "NodesNotReady"), "{}", c.message);
        assert_eq!(
            c.message,
            "3 nodes are out of service (not Ready, or cordoned by someone else) and maxUnavailable is 2: \
             no pending node can start until some are back; 2 pending"
        );
    }

    #[test]
    fn a_pool_outside_its_windows_names_the_next_one_and_looks_again_when_it_opens() {
        // Sunday noon; windows: Saturdays 02:00-06:00 UTC and a week after Patch Tuesday in Berlin.
        let spec = spec(
            "rollout: {maintenanceWindows: [{days: [Sat], start: '02:00', end: '06:00'}, \
             {relativeMonthly: {weekIndex: Second, dayOfWeek: Tue, offsetDays: 7}, start: '22:00', end: '04:00', timeZone: Europe/Berlin}]}",
        );
        let s = status_for(&spec, &[node("a")], None, now());
        assert_eq!(
            (
                s.next_window_start.as_ref().map(|t| t.0.to_string()).as_deref(),
                s.next_window_end.as_ref().map(|t| t.0.to_string()).as_deref()
            ),
            (Some("2026-12-05T02:00:00Z"), Some("2026-12-05T06:00:00Z"))
        );
        let c = get(&s, conditions::PROGRESSING);
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "OutsideMaintenanceWindow"));
        assert!(c.message.contains("opens at 2026-12-05T02:00:00Z and closes at 2026-12-05T06:00:00Z"), "{}", c.message);
        let existing = BTreeSet::new();
        let plan = decide(&PoolInput::of_spec("p", &spec, &existing), &cleared(&spec, &[node("a")]), now());
        assert_eq!(plan.requeue_after, crate::decision::rollout::IDLE_REQUEUE, "the window is days away: the idle requeue comes first");
        let plan =
            decide(&PoolInput::of_spec("p", &spec, &existing), &cleared(&spec, &[node("a")]), "2026-12-05T01:59:00Z".parse().unwrap());
        assert_eq!(plan.requeue_after, std::time::Duration::from_secs(60), "looks again when the window opens");
        // Inside the window: open, and the status still names it (it closes at 06:00).
        let inside = status_for(&spec, &[node("a")], None, "2026-12-05T03:00:00Z".parse().unwrap());
        assert_eq!(inside.next_window_end.as_ref().map(|t| t.0.to_string()).as_deref(), Some("2026-12-05T06:00:00Z"));
        assert_eq!(get(&inside, conditions::PROGRESSING).reason, "NodesUpdating");
        // Without windows the status says nothing about them.
        let none = status_for(&self::spec(""), &[node("a")], None, now());
        assert_eq!((none.next_window_start, none.next_window_end), (None, None));
    }

    #[test]
    fn nodes_below_the_patch_level_past_the_deadline_turn_patch_overdue() {
        let spec = spec("compliance: {deadline: 336h}");
        let existing = BTreeSet::new();
        let overdue_at = |marked_days_ago: i64, spec: &WindowsNodePoolSpec| {
            let marked = now() - jiff::SignedDuration::from_hours(24 * marked_days_ago);
            let input = PoolInput { target_marked_at: Some(marked), ..PoolInput::of_spec("p", spec, &existing) };
            let plan = decide(&input, &cleared(spec, &[node("a"), node("b")]), now());
            let st = build_status(spec, &plan, &Membership::default(), None, None, Some(3), now());
            (
                plan.patch_overdue,
                st.conditions.iter().find(|c| c.type_ == conditions::PATCH_OVERDUE).map(|c| (c.status.clone(), c.reason.clone())),
            )
        };
        assert_eq!(overdue_at(15, &spec), (2, Some(("True".into(), "DeadlinePassed".into()))));
        assert_eq!(overdue_at(13, &spec), (0, Some(("False".into(), "WithinDeadline".into()))));
        assert_eq!(overdue_at(400, &self::spec("")), (0, None), "no deadline, no condition");
    }

    #[test]
    fn conditions_say_what_the_rollout_is_doing() {
        type Want<'a> = &'a [(&'a str, &'a str, &'a str)];
        let cases: &[(&str, usize, Want)] = &[
            ("", 0, &[("Ready", "False", "NoNodes")]),
            ("", 2, &[("Ready", "False", "RolloutIncomplete"), ("Progressing", "True", "NodesUpdating"), ("Paused", "False", "NotPaused")]),
            ("rollout: {paused: true}", 2, &[("Progressing", "False", "Paused"), ("Paused", "True", "PausedBySpec")]),
            // kstatus reads Reconciling and Stalled first, then Ready.
            ("", 2, &[("Reconciling", "True", "NodesUpdating"), ("Stalled", "False", "NotStalled")]),
            ("rollout: {paused: true}", 2, &[("Ready", "False", "RolloutIncomplete"), ("Reconciling", "False", "Paused")]),
            // Sunday noon, a Saturday window: nothing is failing, nothing is to do
            // before Saturday, so a GitOps wait must not hang until then.
            (
                "rollout: {maintenanceWindows: [{days: [Sat], start: '02:00', end: '06:00'}]}",
                2,
                &[
                    ("Ready", "True", "WaitingForMaintenanceWindow"),
                    ("Reconciling", "False", "OutsideMaintenanceWindow"),
                    ("Stalled", "False", "NotStalled"),
                ],
            ),
            (
                "rollout: {maintenanceWindows: [{start: '02:00', end: '06:00', timeZone: Nowhere/Land}]}",
                2,
                &[("Ready", "False", "RolloutIncomplete"), ("Stalled", "True", "InvalidMaintenanceWindow")],
            ),
        ];
        for (extra, n, want) in cases {
            let s = spec(extra);
            let nodes: Vec<_> = (0..*n).map(|i| node(&format!("n{i}"))).collect();
            let st = status_for(&s, &nodes, None, now());
            for (t, status, reason) in *want {
                let c = get(&st, t);
                assert_eq!((c.status.as_str(), c.reason.as_str()), (*status, *reason), "{extra} / {n} nodes / {t}: {}", c.message);
                assert_eq!(c.observed_generation, Some(3));
            }
            assert_eq!(st.observed_generation, Some(3));
        }
    }

    #[test]
    fn a_pool_paused_by_its_annotation_says_so() {
        let s = spec("");
        let existing = BTreeSet::new();
        let nodes = [node("a"), node("b")];
        let input = PoolInput { paused_by_annotation: true, ..PoolInput::of_spec("p", &s, &existing) };
        let st = round_status(&input, &cleared(&s, &nodes), now());
        let (progressing, paused) = (get(&st, "Progressing"), get(&st, "Paused"));
        assert_eq!((progressing.status.as_str(), progressing.reason.as_str()), ("False", "Paused"));
        assert_eq!(progressing.message, "paused by the annotation winpool.dev/paused; 2 nodes pending");
        assert_eq!((paused.status.as_str(), paused.reason.as_str()), ("True", "PausedByAnnotation"));
    }

    #[test]
    fn transition_time_moves_only_when_status_flips() {
        let t0: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let t1: Timestamp = "2026-11-29T12:05:00Z".parse().unwrap();
        let s = spec("rollout: {paused: true}");
        let first = status_for(&s, &[node("a")], None, t0);
        let second = status_for(&s, &[node("a")], Some(&first), t1);
        assert_eq!(get(&second, "Paused").last_transition_time.0, t0);
        let unpaused = status_for(&spec(""), &[node("a")], Some(&second), t1);
        assert_eq!(get(&unpaused, "Paused").last_transition_time.0, t1);
    }

    #[test]
    fn condition_flips_become_events_once() {
        let s = spec("");
        let first = status_for(&s, &[node("a")], None, now());
        let ev = event_reasons(None, &first);
        assert_eq!(ev, ["RolloutStarted"]);
        let again = status_for(&s, &[node("a")], Some(&first), now());
        assert!(transition_events(Some(&first), &again).is_empty(), "no flip, no event");
        let paused = status_for(&spec("rollout: {paused: true}"), &[node("a")], Some(&again), now());
        let ev = event_reasons(Some(&again), &paused);
        assert!(ev.contains(&"RolloutPaused".to_string()), "{ev:?}");
    }

    /// Ready is True while the rest wait for their window; the rollout is
    /// complete, and announced so, only when every node runs the revision.
    #[test]
    fn a_pool_ready_while_it_waits_for_its_window_is_announced_complete_only_when_done() {
        let saturdays = spec("rollout: {maintenanceWindows: [{days: [Sat], start: '02:00', end: '06:00'}]}");
        let waiting = status_for(&saturdays, &[node("a")], None, now());
        assert_eq!(get(&waiting, "Ready").reason, "WaitingForMaintenanceWindow");
        let reasons = event_reasons;
        assert!(!reasons(None, &waiting).contains(&"RolloutComplete".to_string()), "waiting is not complete");
        let mut done = waiting.clone();
        for c in done.conditions.iter_mut().filter(|c| c.type_ == "Ready") {
            (c.reason, c.message) = ("RolloutComplete".into(), "all 1 nodes run revision r".into());
        }
        assert_eq!(reasons(Some(&waiting), &done), ["RolloutComplete"], "Ready stays True; its reason says it is complete");
        assert!(reasons(Some(&done), &done).is_empty(), "once");
    }

    #[test]
    fn a_rollout_that_waits_for_capacity_and_goes_on_is_started_once() {
        let s = spec("");
        let started = status_for(&s, &[node("a")], None, now());
        let with_progressing = |st: &WindowsNodePoolStatus, status: &str, reason: &str| {
            let mut st = st.clone();
            for c in st.conditions.iter_mut().filter(|c| c.type_ == "Progressing") {
                (c.status, c.reason) = (status.into(), reason.into());
            }
            st
        };
        // A round with nothing in flight: NotReady nodes use up maxUnavailable.
        let waiting = with_progressing(&started, "False", "NodesNotReady");
        let goes_on = status_for(&s, &[node("a")], Some(&waiting), now());
        assert_eq!(get(&goes_on, "Progressing").status, "True");
        let ev = event_reasons(Some(&waiting), &goes_on);
        assert!(!ev.contains(&"RolloutStarted".to_string()), "the same rollout goes on: {ev:?}");

        // The same pool after a finished rollout (nodes joined, a new revision): a new one.
        let done = with_progressing(&goes_on, "False", "RolloutComplete");
        let ev = event_reasons(Some(&done), &goes_on);
        assert_eq!(ev, ["RolloutStarted"]);
    }

    #[test]
    fn a_revision_held_from_the_start_is_announced_when_it_first_progresses() {
        let events = event_reasons;
        // The pool's new patch level arrives paused (or outside its window): nothing rolls yet.
        let held = status_for(&spec("rollout: {paused: true}"), &[node("a"), node("b")], None, now());
        assert_eq!(get(&held, "Progressing").status, "False");
        assert!(!events(None, &held).contains(&"RolloutStarted".to_string()));
        let still = status_for(&spec("rollout: {paused: true}"), &[node("a"), node("b")], Some(&held), now());
        // The hold lifts: the rollout of this revision starts now, once.
        let goes = status_for(&spec(""), &[node("a"), node("b")], Some(&still), now());
        assert_eq!(get(&goes, "Progressing").status, "True");
        assert!(events(Some(&still), &goes).contains(&"RolloutStarted".to_string()), "{:?}", events(Some(&still), &goes));
        assert_eq!(goes.started_revision, goes.revision);
        // Held again mid-rollout and resumed: the same rollout goes on.
        let paused = status_for(&spec("rollout: {paused: true}"), &[node("a"), node("b")], Some(&goes), now());
        assert_eq!(paused.started_revision, goes.revision, "a hold does not forget that the rollout started");
        let resumed = status_for(&spec(""), &[node("a"), node("b")], Some(&paused), now());
        assert!(!events(Some(&paused), &resumed).contains(&"RolloutStarted".to_string()));
    }

    #[test]
    fn conflicts_are_named_and_bounded() {
        let c = Conflicts {
            multiple_pools: (0..12).map(|i| (format!("n{i}"), vec!["other".into()])).collect(),
            wrong_os: vec![("w".into(), "10.0.17763".into())],
            held_elsewhere: vec![("h".into(), "old".into())],
            not_windows: vec!["control-plane-0".into()],
        };
        let m = c.message("ltsc2022");
        assert!(
            m.contains("1 nodes are labelled kubernetes.io/os=windows but their kubelet reports another OS")
                && m.contains("control-plane-0"),
            "{m}"
        );
        assert!(m.contains("1 nodes are still held by the pool they leave") && m.contains("h (by old)"), "{m}");
        assert!(m.contains("12 nodes are selected by more than one pool"), "{m}");
        assert!(m.contains("n0 (also other)") && m.contains("and 2 more"), "{m}");
        assert!(m.contains("w (10.0.17763)"), "{m}");
    }

    #[test]
    fn node_transitions_of_a_round_become_one_event_per_kind_that_fits_a_note() {
        use NodeState::*;
        let written = [
            ("n2", Pending, Draining),
            ("n1", Pending, Applying),
            ("n9", Verifying, Updated),
            ("n3", Applying, Verifying),
            ("n4", Applying, Failed),
            ("n5", Updated, Pending),
        ];
        let ev = node_batch_events(&written, "abc");
        assert_eq!(
            ev,
            vec![
                (EventReason::NodesStarted, "started updating 2 nodes to revision abc: n1, n2".to_string()),
                (EventReason::NodesUpdated, "1 node updated to revision abc: n9".to_string()),
            ],
            "a move within the update, a failure (its own Event) and a reset are not announced here"
        );
        assert!(node_batch_events(&[("n3", Applying, Verifying)], "abc").is_empty());

        // A wave of 500 nodes with long names: the note stays within the API's limit and says how many it left out.
        let names: Vec<String> = (0..500).map(|i| format!("akswin-nodepool-{i:05}")).collect();
        let written: Vec<_> = names.iter().map(|n| (n.as_str(), Pending, Draining)).collect();
        let (_, note) = &node_batch_events(&written, "abc")[0];
        assert!(note.len() <= EVENT_NOTE_MAX, "{}", note.len());
        assert!(note.starts_with("started updating 500 nodes to revision abc: akswin-nodepool-00000, "), "{note}");
        let shown = note.matches("akswin-nodepool-").count();
        assert!(note.ends_with(&format!("and {} more", 500 - shown)), "{note}");
        assert!(shown > 10, "as many names as fit: {shown}");
    }

    #[test]
    fn progress_alone_can_wait_but_what_a_reader_acts_on_cannot() {
        let spec = spec("");
        let base = status_for(&spec, &[NodeView { name: "a".into(), ready: true, ..Default::default() }], None, now());
        let mut counts = base.clone();
        counts.nodes.updated += 1;
        counts.nodes.pending -= 1;
        if let Some(c) = counts.conditions.first_mut() {
            c.message = format!("{} (moved)", c.message);
        }
        assert!(only_progress_changed(&base, &counts), "counts and messages are progress");
        assert!(only_progress_changed(&base, &base));

        let mut flipped = base.clone();
        flipped.conditions[0].status = if flipped.conditions[0].status == "True" { "False".into() } else { "True".into() };
        let mut reason = base.clone();
        reason.conditions[0].reason = "SomethingElse".into();
        let mut revision = base.clone();
        revision.revision = Some("other".into());
        let mut generation = base.clone();
        generation.observed_generation = Some(99);
        let mut failed = base.clone();
        failed.failed_nodes.push(crate::api::FailedNode { name: "a".into(), reason: "x".into(), message: "y".into(), since: None });
        for (what, next) in [
            ("condition status", flipped),
            ("reason", reason),
            ("revision", revision),
            ("generation", generation),
            ("failed nodes", failed),
        ] {
            assert!(!only_progress_changed(&base, &next), "{what} is written at once");
        }
    }

    #[test]
    fn a_pool_of_provider_managed_nodes_says_so_in_one_condition() {
        let spec = spec("rollout: {maxUnavailable: 1}");
        let plan = plan_for(&spec, &[node("a"), node("b")], now());
        let mut membership = Membership { members: vec!["a".into(), "b".into()], ..Default::default() };
        membership.managed.count(&std::collections::BTreeMap::from([(
            "kubernetes.azure.com/node-image-version".to_string(),
            "AKSWindows-2022".to_string(),
        )]));
        let s = build_status(&spec, &plan, &membership, None, None, Some(3), now());
        let c = get(&s, conditions::PROVIDER_MANAGED);
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "AKSNodeImage"));
        assert!(c.message.starts_with("1 of 2 nodes are AKS nodes"), "{}", c.message);
        let again = build_status(&spec, &plan, &membership, None, Some(&s), Some(3), now() + jiff::SignedDuration::from_mins(5));
        assert_eq!(get(&again, conditions::PROVIDER_MANAGED).last_transition_time, c.last_transition_time, "stated once");
        let none = build_status(&spec, &plan, &Membership::default(), None, None, Some(3), now());
        assert_eq!(get(&none, conditions::PROVIDER_MANAGED).status, "False");
    }

    /// A node whose agent's preflight blocks `spec`'s revision for `why`.
    fn blocked(spec: &WindowsNodePoolSpec, name: &str, why: &str) -> NodeView {
        use crate::decision::rollout::{Preflight, PreflightVerdict};
        let revision = crate::decision::revision::revision_of(spec);
        NodeView { preflight: Some(Preflight { revision, verdict: PreflightVerdict::Blocked(why.into()) }), ..node(name) }
    }

    #[test]
    fn nodes_held_by_preflight_say_whether_the_rollout_waits_or_is_blocked() {
        let spec = spec("rollout: {maxUnavailable: 1}");
        let blocked = |name: &str| blocked(&spec, name, "C: has 3.0 GiB free");
        let s = status_for(&spec, &[blocked("a"), blocked("b")], None, now());
        let c = get(&s, conditions::PROGRESSING);
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "PreflightBlocked"));
        assert!(c.message.contains("a: C: has 3.0 GiB free") && c.message.contains("also b"), "{}", c.message);
        assert_eq!(
            s.preflight_blocked_nodes.iter().map(|b| (b.name.as_str(), b.reason.as_str())).collect::<Vec<_>>(),
            [("a", "C: has 3.0 GiB free"), ("b", "C: has 3.0 GiB free")]
        );

        let s = round_status(&PoolInput::of_spec("p", &spec, &BTreeSet::new()), &[blocked("a"), node("b")], now());
        let c = get(&s, conditions::PROGRESSING);
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "AwaitingPreflight"), "b's agent has yet to answer: {}", c.message);

        // One held by its label, the other blocked: none starts, and no capacity is awaited.
        let s = status_for(&spec, &[NodeView { held_by_label: true, ..node("a") }, blocked("b")], None, now());
        let c = get(&s, conditions::PROGRESSING);
        assert_eq!((c.reason.as_str(), get(&s, "Stalled").status.as_str()), ("PreflightBlocked", "True"), "{}", c.message);
        assert!(
            c.message.contains("1 held by the node label winpool.dev/hold=true: a") && c.message.contains("b: C: has"),
            "{}",
            c.message
        );
    }

    /// A ring soaks from `rolledOutAt`: when every node first ran the
    /// revision (rounded up to the second, as a status time is written),
    /// kept while they do, gone while one does not.
    #[test]
    fn rolled_out_at_is_when_every_node_first_ran_the_revision() {
        let s = spec("");
        let counts = |updated| crate::api::NodeCounts { total: 2, updated, ..Default::default() };
        let at = |plan: &Plan, prev: Option<&WindowsNodePoolStatus>, t: Timestamp| {
            build_status(&s, plan, &Membership::default(), None, prev, Some(3), t).rolled_out_at.map(|t| t.0)
        };
        let (done, rolling) = (gitops::outcome(&s, counts(2), 0, None), gitops::outcome(&s, counts(1), 0, None));
        let t = now() + jiff::SignedDuration::from_millis(300);
        assert_eq!(at(&done, None, t), Some(now() + jiff::SignedDuration::from_secs(1)), "rounded up");
        let prev = build_status(&s, &done, &Membership::default(), None, None, Some(3), t);
        assert_eq!(at(&done, Some(&prev), t + jiff::SignedDuration::from_hours(1)), prev.rolled_out_at.clone().map(|t| t.0), "kept");
        assert_eq!(at(&rolling, Some(&prev), t), None, "a node behind again");
    }

    /// `outcome`, its failures as long as an agent's: hundreds of characters.
    fn failed_outcome(spec: &WindowsNodePoolSpec, c: crate::api::NodeCounts, hold: Option<Hold>) -> Plan {
        let long = |i| crate::decision::rollout::FailedInfo {
            node: format!("win-{i}"),
            reason: "ApplyFailed".into(),
            message: format!("win-{i}: install exited with 0x80070643; {}", "CBS.log says the package failed. ".repeat(14)),
            since: None,
        };
        Plan { failed: (0..c.failed).map(long).collect(), ..gitops::outcome(spec, c.clone(), c.failed as usize, hold) }
    }

    fn status_of(spec: &WindowsNodePoolSpec, plan: &Plan, conflicts: Conflicts) -> WindowsNodePoolStatus {
        build_status(spec, plan, &Membership { conflicts, ..Default::default() }, None, None, Some(3), now())
    }

    /// Six nodes the pool selects, each selected by another pool too.
    fn elsewhere() -> Conflicts {
        Conflicts { multiple_pools: (0..6).map(|i| (format!("w-{i}"), vec!["win22-web".into()])).collect(), ..Default::default() }
    }

    /// What one condition says that another denies, in `st`.
    fn contradictions(st: &WindowsNodePoolStatus) -> Vec<String> {
        let c = |t: &str| st.conditions.iter().find(|c| c.type_ == t);
        let is = |t: &str| c(t).is_some_and(|c| c.status == "True");
        let reason = |t: &str| c(t).map_or("", |c| c.reason.as_str());
        let complete = |t: &str| reason(t) == "RolloutComplete";
        let mut found: Vec<String> = [
            (is("Reconciling") && is("Stalled"), "Reconciling and Stalled"),
            (is("Ready") && (is("Stalled") || is("Degraded")), "Ready and Stalled or Degraded"),
            (complete("Ready") != complete("Progressing"), "RolloutComplete in only one of Ready and Progressing"),
            (reason("Ready") == "NoNodes" && is("NodeConflicts"), "no node matches, NodeConflicts names some"),
            (c("Degraded").is_some_and(|d| d.message.contains("goes on")) && !is("Reconciling"), "goes on, not Reconciling"),
            (reason("Paused") == "FailureLimitReached" && !is("Stalled"), "paused at maxFailedNodes, not Stalled"),
        ]
        .into_iter()
        .filter(|(contradicts, _)| *contradicts)
        .map(|(_, what)| what.to_string())
        .collect();
        for f in &st.failed_nodes {
            let times = st.conditions.iter().filter(|c| c.message.contains(&f.message)).count();
            if times > 0 {
                found.push(format!("{}'s failure said again in {times} conditions", f.name));
            }
        }
        found
    }

    /// Every state the GitOps fixtures stand for, and the ones a demo found:
    /// no condition says what another denies.
    #[test]
    fn no_two_conditions_contradict_each_other() {
        let (never, two) = (spec("rollout: {maxFailedNodes: 0}"), spec("rollout: {maxFailedNodes: 2}"));
        let limit = || Some(Hold::FailureLimit { failed: 2, limit: 2 });
        let none = Conflicts::default;
        let mut states: Vec<(String, WindowsNodePoolStatus)> = gitops::fixtures()
            .into_iter()
            .filter_map(|(name, pool)| Some((name.to_string(), serde_json::from_value(pool.get("status")?.clone()).ok()?)))
            .collect();
        states.extend(
            [
                ("all nodes another pool's", status_of(&never, &plan_for(&never, &[], now()), elsewhere())),
                ("0 tolerated, failed, none left", status_of(&never, &failed_outcome(&never, gitops::counts(2, 0, 0, 0, 2), None), none())),
                (
                    "0 tolerated, failed, more to do",
                    status_of(&never, &failed_outcome(&never, gitops::counts(4, 0, 1, 1, 2), None), none()),
                ),
                ("limit reached, none left", status_of(&two, &failed_outcome(&two, gitops::counts(3, 1, 0, 0, 2), limit()), none())),
                ("limit reached", status_of(&two, &failed_outcome(&two, gitops::counts(4, 0, 0, 2, 2), limit()), none())),
            ]
            .map(|(name, st)| (name.to_string(), st)),
        );
        let found: Vec<(&str, Vec<String>)> =
            states.iter().map(|(name, st)| (name.as_str(), contradictions(st))).filter(|(_, c)| !c.is_empty()).collect();
        assert_eq!(found, [], "{} states", states.len());
    }

    /// A pool with no node of its own says why in Ready and in its REASON
    /// (Progressing): none matches, or every one it selects is left alone.
    #[test]
    fn a_pool_without_nodes_of_its_own_says_why_and_is_not_complete() {
        let s = spec("");
        let plan = plan_for(&s, &[], now());
        let said = |conflicts| {
            let st = status_of(&s, &plan, conflicts);
            let m = get(&st, "Ready").message.clone();
            [get(&st, "Ready"), get(&st, "Progressing"), get(&st, "Stalled")].map(|c| c.reason.clone()).join(" ") + ": " + &m
        };
        assert_eq!(said(Conflicts::default()), "NoNodes NoNodes NotStalled: no Windows node matches the pool's nodeSelector");
        let all_elsewhere = said(elsewhere());
        assert!(
            all_elsewhere.starts_with("NodesConflict NodesConflict NodesConflict: ")
                && all_elsewhere.contains("6 selected by another pool")
        );
        let leaving = Conflicts { held_elsewhere: vec![("w-0".into(), "old".into())], ..Default::default() };
        assert!(said(leaving).contains(" NotStalled: "), "a node the pool it leaves still holds comes by itself");
    }

    /// maxFailedNodes 0 never pauses: with nothing left to update, Degraded
    /// says so, as Stalled does, not that the rollout goes on.
    #[test]
    fn degraded_says_the_rollout_goes_on_only_while_it_does() {
        let s = spec("rollout: {maxFailedNodes: 0}");
        let degraded = |c| get(&status_of(&s, &failed_outcome(&s, c, None), Conflicts::default()), "Degraded").message.clone();
        let done = degraded(gitops::counts(2, 0, 0, 0, 2));
        assert!(done.contains("no node is left to update") && !done.contains("goes on"), "{done}");
        assert!(degraded(gitops::counts(4, 0, 1, 1, 2)).contains("goes on (maxFailedNodes 0: failures never pause it)"));
    }

    /// A failure's message is said once, in status.failedNodes; the
    /// conditions name the nodes and point there.
    #[test]
    fn a_failure_is_said_once_in_failed_nodes() {
        let s = spec("rollout: {maxFailedNodes: 2}");
        let plan = failed_outcome(&s, gitops::counts(3, 1, 0, 0, 2), Some(Hold::FailureLimit { failed: 2, limit: 2 }));
        let st = status_of(&s, &plan, Conflicts::default());
        assert_eq!(st.failed_nodes[0].message, plan.failed[0].message);
        for t in ["Degraded", "Stalled", "Progressing", "Paused"] {
            let m = &get(&st, t).message;
            assert!(!m.contains(&plan.failed[0].message) && m.contains("win-0, win-1") && m.len() < 300, "{t}: {m}");
        }
    }
}
