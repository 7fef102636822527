//! The step of one member node this round, by the state it is in.

use super::hooks::{self, Gate, HookKind};
use super::settings::{Decided, RoundSettings};
use super::{
    DrainBlock, DrainMode, FailureReason, HnsReadiness, NodePatch, NodeState, NodeView, Recorded, current_state, fail, fail_kept_cordoned,
    may_be_installing, release_cordon, verify_config, verify_health, verify_rebooted, waiting_for,
};
use crate::api::report::ApplyStatus;
use crate::api::{OnNodeFailure, names};
use crate::decision::gates::{self, Seen};

/// Problems with what the node says about itself, and the revision it still
/// carries (its ConfigMap must stay while it does).
pub(super) fn check<'n>(s: &RoundSettings<'_>, r: &mut Decided<'n>, n: &'n NodeView) {
    if let Recorded::Unknown(raw) = &n.state {
        r.warn(&n.name, format!("ignoring unknown {} value {raw:?}", names::ANN_STATE));
    }
    if let Some(label) = n.revision_label.as_deref() {
        if s.existing_revisions.contains(label) {
            r.config_revisions.insert(label.to_string());
        } else if label != s.rev {
            r.warn(
                &n.name,
                format!("{} {label:?} names no revision of this pool; the node will be rolled to {}", names::LABEL_REVISION, s.rev),
            );
        }
    }
}

/// Decide this node's next step and record it in the round.
pub(super) fn step<'n>(s: &RoundSettings<'_>, r: &mut Decided<'n>, n: &'n NodeView) {
    let state = current_state(n, &s.rev, s.spec);
    let mut p = NodePatch::new(&n.name, state, state, "");
    // Lands only on the Node decided from: one changed since (given back, moved on) is decided anew.
    p.unless_changed_since = n.resource_version.clone();
    // The pool label places the pool's agent on the node. It goes on as soon as
    // the node is a member, not when its turn comes: the agent then starts (and
    // reports what HNS holds) long before the node is asked to apply, instead of
    // inside its turn. One write per node per pool, never repeated.
    if n.pool_label.as_deref() != Some(s.pool) {
        p.label(names::LABEL_POOL, Some(s.pool));
        p.reason = "joined pool".into();
    }
    // `n` already reads as restored (decide_with); the Node does not yet.
    if let Some(t) = r.tampered.get(&n.name) {
        p.label(names::LABEL_REVISION, t.restored.as_deref());
        p.reason = format!("revision label {:?} was not set by winpool: put back", t.found);
    }
    // These two end the node's round with a write whatever else holds.
    if state.in_flight() && n.target_revision.as_deref() != Some(s.rev.as_str()) {
        let state = retarget(s, &mut p, n, state);
        r.states.insert(&n.name, state);
        r.patches.push(p);
        return;
    }
    if let Some(msg) = timed_out(s, n, state) {
        time_out(s, &mut p, n, msg);
        keep_cordoned_if_asked(s, &mut p);
        r.states.insert(&n.name, NodeState::Failed);
        r.patches.push(p);
        return;
    }
    // The label follows the recorded state. It differs when the annotation was
    // removed by hand (a retry) or written by an older winpool: one write.
    let label = n.state.state().and_then(NodeState::label);
    if n.state_label.as_deref() != label {
        p.label(names::LABEL_STATE, label);
        p.reason = "state label follows the state annotation".into();
    }
    // A CSI Proxy host service on the node: winpool's CSI Proxy DaemonSets
    // stay off it (their affinity excludes the label). Only for pools that
    // run them, so a pool without costs no write.
    let csi = &s.spec.storage.csi_proxy;
    if csi.enabled && csi.deploy == crate::api::CsiProxyDeploy::DaemonSet {
        let wanted = n.csi_proxy_host.as_ref().map(|_| "true");
        if n.csi_proxy_host_label.as_deref() != wanted {
            p.label(names::LABEL_CSI_PROXY_HOST, wanted);
            if p.reason.is_empty() {
                p.reason = "CSI Proxy host service label follows the agent's report".into();
            }
        }
    }
    let state = match state {
        NodeState::Draining => draining(s, r, &mut p, n),
        NodeState::Applying | NodeState::Verifying => applying(s, r, &mut p, n, state),
        NodeState::Updated => updated(s, r, &mut p, n),
        NodeState::Pending => {
            if n.held_by_label {
                r.held.insert(n.name.clone());
            }
            if let Some(why) = super::runtime::refusal(s.spec, n) {
                r.runtime_refused.insert(n.name.clone(), why);
            } else if let Some(held) = super::preflight::held(s, n) {
                r.preflight_held.insert(n.name.clone(), held);
            }
            // Put back for a budget earlier: it waits its turn at the end, and not before putBackAfter.
            if let (Some(budget), Some(put_back)) = (&n.drain_blocked_by, n.state_since) {
                r.blocked.insert(n.name.clone(), (budget.clone(), retry_after(s, put_back)));
            }
            state
        }
        NodeState::Failed => failed(s, &mut p, n),
    };
    keep_cordoned_if_asked(s, &mut p);
    r.states.insert(&n.name, state);
    if !p.labels.is_empty() || !p.annotations.is_empty() || p.unschedulable.is_some() {
        p.to = state;
        r.patches.push(p);
    }
}

/// `rollout.onNodeFailure: KeepCordoned`: a node this patch fails keeps
/// winpool's cordon (and the mark that it is winpool's, so a retry's start
/// and a person's uncordon both find it as it is).
fn keep_cordoned_if_asked(s: &RoundSettings<'_>, p: &mut NodePatch) {
    if s.spec.rollout.on_node_failure == OnNodeFailure::KeepCordoned && p.to == NodeState::Failed && p.unschedulable == Some(false) {
        p.unschedulable = None;
        p.annotations.remove(names::ANN_CORDONED_BY_WINPOOL);
    }
}

/// Fail a node that ran out of nodeTimeout. One whose host may still be
/// installing keeps winpool's cordon, and says so.
fn time_out(s: &RoundSettings<'_>, p: &mut NodePatch, n: &NodeView, mut msg: String) {
    match may_be_installing(n) {
        // In service (a hotpatch): there is no cordon to keep, and its agent
        // never reboots it uncordoned.
        Some(status) if !n.unschedulable => {
            msg = format!(
                "{msg}; its agent reports {status}, so the host may still be installing, in service (it is never rebooted uncordoned)"
            );
            fail_kept_cordoned(p, s.now, FailureReason::Timeout, &msg);
        }
        Some(status) => {
            msg = format!(
                "{msg}; kept cordoned: its agent reports {status}, so the host may still be installing; \
                 winpool lifts the cordon when the agent reports a final result"
            );
            fail_kept_cordoned(p, s.now, FailureReason::Timeout, &msg);
        }
        None => fail(p, n, s.now, FailureReason::Timeout, &msg),
    }
    p.reason = msg;
}

/// A Failed node kept cordoned when it timed out mid-install: the cordon
/// goes once its agent reports a final result (or none for this start). One
/// a person lifted meanwhile is theirs: winpool forgets it was its own, so it
/// never lifts a cordon they set later.
fn failed(s: &RoundSettings<'_>, p: &mut NodePatch, n: &NodeView) -> NodeState {
    if s.spec.rollout.on_node_failure == OnNodeFailure::KeepCordoned && n.unschedulable {
        return NodeState::Failed;
    }
    if n.cordoned_by_winpool && (!n.unschedulable || may_be_installing(n).is_none()) {
        release_cordon(p, n);
        p.reason = format!(
            "its agent reports {} after the timeout: winpool's cordon lifted",
            n.apply_status.as_ref().map_or_else(|| "no install in flight".to_string(), ToString::to_string)
        );
    }
    NodeState::Failed
}

/// A node in flight for an older revision (the spec changed mid-rollout) goes
/// on towards the new one. Returns its state after the patch.
fn retarget(s: &RoundSettings<'_>, p: &mut NodePatch, n: &NodeView, state: NodeState) -> NodeState {
    p.ann(names::ANN_TARGET_REVISION, Some(&s.rev));
    p.reason = format!("spec changed mid-rollout: retargeting to revision {}", s.rev);
    // The revision changed under the undo: the node goes on to the new one.
    super::patch::not_an_undo(p, n);
    if !matches!(state, NodeState::Applying | NodeState::Verifying) {
        return state;
    }
    if n.hotpatch && !n.unschedulable {
        // In service for a hotpatch: the new revision is drained for.
        let state = drain_before_reboot(s, p, n);
        p.reason = format!("spec changed mid-hotpatch: cordoned; draining for revision {}", s.rev);
        return state;
    }
    // Already drained and cordoned: go straight to applying the new revision.
    p.label(names::LABEL_REVISION, Some(&s.rev)).state(NodeState::Applying, s.now);
    p.ann(names::ANN_DRAINED_REVISION, Some(&s.rev));
    NodeState::Applying
}

/// How long a servicing task's reported heartbeat holds off nodeTimeout: the
/// agent moves it every 5 minutes, so two missed beats mean the task (or the
/// agent) is gone.
const HEARTBEAT_FRESH: jiff::SignedDuration = jiff::SignedDuration::from_mins(12);

/// Why a node in flight has run out of its budget, if it has. One without a
/// readable start time (a hand-edited or garbage annotation) is timed out
/// rather than trusted: it must never wait forever. A node whose servicing
/// task beats is installing (a Windows Server 2019 cumulative update
/// outlasts any fixed timeout): nodeTimeout does not fail it, for at most
/// `timeouts.install` from its start (the beat is the node's word; a
/// compromised host that beats for ever must not hold a maxUnavailable slot
/// for ever), and what follows the install (the boot that lands it, the
/// checks) has `timeouts.rebootToReady` from its last beat. No budget ends
/// before nodeTimeout from the start: a pool that set a long one keeps it.
fn timed_out(s: &RoundSettings<'_>, n: &NodeView, state: NodeState) -> Option<String> {
    // A clock that cannot be trusted times nothing out (the hold says why).
    if s.clock_skew.is_some() || !state.in_flight() {
        return None;
    }
    let started = n.started_at.or(n.state_since);
    let Some(start) = started else { return Some(over_budget(s, n, state, "nodeTimeout", &s.spec.rollout.node_timeout)) };
    if s.since(started) <= s.rules.node_timeout {
        return None;
    }
    let install = jiff::SignedDuration::try_from(s.install_budget()).unwrap_or(jiff::SignedDuration::MAX);
    // Either way of the leader's clock: a host's may be ahead.
    let beat_fresh = n.apply_heartbeat.is_some_and(|beat| s.now.duration_since(beat).abs() <= HEARTBEAT_FRESH);
    if state == NodeState::Applying && beat_fresh {
        return (s.now.duration_since(start) > install)
            .then(|| over_budget(s, n, state, "timeouts.install", &shown(s.rules.phases.install)));
    }
    // After a beating install, the reboot and the checks have their own
    // budget from its last beat: an install that outlasted nodeTimeout would
    // otherwise be timed out the moment it ends. A beat from the future, or
    // past the install's budget, moves nothing.
    let counted = |beat: &jiff::Timestamp| *beat <= s.now && beat.duration_since(start) <= install;
    let after_install = matches!(state, NodeState::Applying | NodeState::Verifying);
    match n.apply_heartbeat.filter(|beat| after_install && counted(beat)) {
        Some(beat) if s.since(Some(start.max(beat))) <= s.rules.phases.reboot_to_ready => None,
        Some(_) => {
            Some(over_budget(s, n, state, "timeouts.rebootToReady (from its install's last beat)", &shown(s.rules.phases.reboot_to_ready)))
        }
        None => Some(over_budget(s, n, state, "nodeTimeout", &s.spec.rollout.node_timeout)),
    }
}

/// The failure message of a node past `budget`, and what it waited for.
fn over_budget(s: &RoundSettings<'_>, n: &NodeView, state: NodeState, budget: &str, value: &str) -> String {
    format!("node did not finish {} within {budget} {value}; {}", state.as_str().to_lowercase(), waiting_for(s.spec, n, &s.rev, state))
}

/// A budget as a person reads it ("2h", "45m").
fn shown(d: std::time::Duration) -> String {
    jiff::SignedDuration::try_from(d).map(|d| format!("{d:#}")).unwrap_or_else(|_| format!("{d:?}"))
}

fn draining(s: &RoundSettings<'_>, r: &mut Decided<'_>, p: &mut NodePatch, n: &NodeView) -> NodeState {
    // The pre-drain hook runs first, pods or none; its time is not the drain's.
    let hook_done = match hooks::gate(s, r, p, n, HookKind::PreDrain, NodeState::Draining) {
        Gate::Open(at) => at,
        Gate::Shut(state) => return state,
    };
    if n.pods_to_evict == 0 {
        p.label(names::LABEL_REVISION, Some(&s.rev)).ann(names::ANN_DRAINED_REVISION, Some(&s.rev)).state(NodeState::Applying, s.now);
        p.ann(names::ANN_DRAIN_BLOCKED_BY, None).ann(names::ANN_DRAIN_BLOCKED_SINCE, None);
        p.reason = format!("drained; agent revision {} scheduled", s.rev);
        return NodeState::Applying;
    }
    // drain.timeout spans the retries of a node put back for a budget.
    let drain_started = match (n.drain_blocked_since, n.state_since) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let drain_started = drain_started.max(hook_done);
    if s.since(drain_started) <= s.rules.drain_timeout {
        if let Some(block) =
            n.drain_block.as_ref().filter(|b| !s.rules.put_back_after.is_zero() && s.since(Some(b.since)) >= s.rules.put_back_after)
        {
            put_back(s, p, n, block);
            r.blocked.insert(n.name.clone(), (block.budget.clone(), retry_after(s, s.now)));
            return NodeState::Pending;
        }
        // A retry stays blocked until its drain goes through (or the
        // refusal of this round shows who blocks it now): no flapping in
        // the status or the gauge an alert waits on.
        if let Some(budget) = n.drain_block.as_ref().map(|b| &b.budget).or(n.drain_blocked_by.as_ref()) {
            r.blocked.insert(n.name.clone(), (budget.clone(), None));
        }
        // Each eviction is a change every Windows node programs: none while
        // they are behind. drain.timeout keeps counting.
        if let Some(w) = s.hns_wait {
            r.wait(&n.name, format!("{} pods to evict; {}", n.pods_to_evict, w.message()));
            return NodeState::Draining;
        }
        if let Some(room) = r.eviction_room {
            if room == 0 {
                r.wait(
                    &n.name,
                    format!("{} pods to evict; this round's evictions went to the nodes before it (rollout.hnsPacing)", n.pods_to_evict),
                );
                return NodeState::Draining;
            }
            let allot = room.min(n.pods_to_evict);
            r.eviction_room = Some(room - allot);
            r.eviction_caps.insert(n.name.clone(), allot);
        }
        r.drain.push((n.name.clone(), DrainMode::Evict));
        let blocked = match (&n.drain_held, &n.drain_block) {
            (Some(held), _) => format!(" ({held})"),
            (None, Some(b)) => format!(" (PodDisruptionBudget {} refuses)", b.budget),
            (None, None) => String::new(),
        };
        r.wait(&n.name, format!("evicting {} pods{blocked}", n.pods_to_evict));
        return NodeState::Draining;
    }
    if s.spec.rollout.drain.delete_after_timeout {
        r.drain.push((n.name.clone(), DrainMode::Delete));
        r.wait(&n.name, format!("deleting {} pods after drain timeout (deleteAfterTimeout)", n.pods_to_evict));
        return NodeState::Draining;
    }
    let budget = n.drain_block.as_ref().map(|b| b.budget.as_str()).or(n.drain_blocked_by.as_deref());
    let why = match (&n.drain_held, budget) {
        (Some(held), _) => held.clone(),
        (None, Some(b)) => format!("PodDisruptionBudget {b} refuses"),
        (None, None) => "a PodDisruptionBudget may block them, or they are slow to terminate".to_string(),
    };
    let msg = format!("{} pods could not be evicted within drain.timeout {} ({why})", n.pods_to_evict, s.spec.rollout.drain.timeout);
    fail(p, n, s.now, FailureReason::DrainTimeout, &msg);
    p.reason = msg;
    NodeState::Failed
}

/// A node started in service (a hotpatch) whose install asks for a reboot
/// after all: its agent waits, and the node is cordoned and drained like any
/// start (the pre-drain hook first), then rebooted from the boot it is in.
fn drain_before_reboot(s: &RoundSettings<'_>, p: &mut NodePatch, n: &NodeView) -> NodeState {
    p.unschedulable = Some(true);
    p.ann(names::ANN_CORDONED_BY_WINPOOL, Some("true")).ann(names::ANN_HOTPATCH, None).ann(names::ANN_DRAINED_REVISION, None);
    if let Some(boot) = n.boot_id.as_deref() {
        p.ann(names::ANN_BOOT_ID, Some(boot));
    }
    p.state(NodeState::Draining, s.now);
    p.reason = format!("the update of revision {} asks for a reboot after all: cordoned; draining before it", s.rev);
    NodeState::Draining
}

/// Applying and Verifying: the agent's report, then the checks that prove it.
fn applying(s: &RoundSettings<'_>, r: &mut Decided<'_>, p: &mut NodePatch, n: &NodeView, state: NodeState) -> NodeState {
    if let Some(gate) = n.undo.as_deref() {
        return undoing(s, r, p, n, state, gate);
    }
    let reported = n.applied_revision.as_deref() == Some(s.rev.as_str());
    match (reported, n.apply()) {
        (true, Some(ApplyStatus::RebootRequired)) if !n.unschedulable => drain_before_reboot(s, p, n),
        (true, Some(ApplyStatus::Failed)) => {
            let msg = n.apply_message.clone().unwrap_or_else(|| "the agent reported a failure".into());
            fail(p, n, s.now, FailureReason::ApplyFailed, &msg);
            p.reason = format!("agent failed: {}", super::clipped(&msg));
            NodeState::Failed
        }
        (true, Some(ApplyStatus::Succeeded)) => match verified(s, r, n, state) {
            Ok(()) => {
                // Back on the target and checked, still cordoned: the post-update hook's turn.
                if let Gate::Shut(after) = hooks::gate(s, r, p, n, HookKind::PostUpdate, NodeState::Verifying) {
                    if after == NodeState::Verifying && state == NodeState::Applying {
                        p.state(NodeState::Verifying, s.now);
                    }
                    return after;
                }
                release_cordon(p, n);
                p.state(NodeState::Updated, s.now)
                    .ann(names::ANN_TARGET_REVISION, None)
                    .ann(names::ANN_BOOT_ID, None)
                    .ann(names::ANN_FAILURE_REASON, None)
                    .ann(names::ANN_FAILURE_MESSAGE, None)
                    .ann(names::ANN_STARTED_AT, None)
                    .ann(names::ANN_INSTALL_BUDGET, None);
                p.took = n.started_at.map(|t| s.since(Some(t)));
                p.reason = format!("verified at revision {}", s.rev);
                if n.hotpatch {
                    p.ann(names::ANN_HOTPATCH, None);
                    p.hotpatched = true;
                    p.reason += " (hotpatched in service: no cordon, no drain, no reboot)";
                }
                NodeState::Updated
            }
            Err(why) => {
                r.wait(&n.name, why);
                if state != NodeState::Applying {
                    return state;
                }
                p.state(NodeState::Verifying, s.now);
                p.reason = "agent applied the revision; verifying".into();
                NodeState::Verifying
            }
        },
        _ => {
            r.wait(&n.name, format!("waiting for the agent to apply revision {}", s.rev));
            state
        }
    }
}

/// Whether a node whose agent reports success really runs the target and takes
/// traffic. HNS alone may hold a node only for hns.readyTimeout; then it goes
/// on, reported.
fn verified(s: &RoundSettings<'_>, r: &mut Decided<'_>, n: &NodeView, state: NodeState) -> Result<(), String> {
    let why = match verify_config(s.spec, n).and_then(|()| verify_rebooted(n)).and_then(|()| verify_health(n)) {
        Ok(()) => return Ok(()),
        Err(why) => why,
    };
    let hns_only = verify_config(s.spec, n).is_ok() && verify_rebooted(n).is_ok() && n.ready && n.hns == HnsReadiness::NotReady;
    if hns_only && state == NodeState::Verifying && s.since(n.state_since) > s.rules.hns_ready_timeout {
        r.warn(&n.name, format!("HNS not ready after hns.readyTimeout {}; marked Updated anyway", s.spec.hns.ready_timeout));
        return Ok(());
    }
    Err(why)
}

fn updated(s: &RoundSettings<'_>, r: &mut Decided<'_>, p: &mut NodePatch, n: &NodeView) -> NodeState {
    if n.state != NodeState::Updated.into() {
        // Found already at target (a new node built from the right image, or
        // a restart between two writes): record it without rolling it.
        p.state(NodeState::Updated, s.now);
        p.reason = format!("already at revision {}", s.rev);
    } else if let Some(gate) = undo_due(s, n) {
        return start_undo(s, r, p, n, gate);
    }
    if n.cordoned_by_winpool {
        release_cordon(p, n);
        p.reason = "uncordoned: rollout of this node is complete".into();
    }
    NodeState::Updated
}

/// The Node-scope health gate that holds `n` while it soaks after its
/// update, when the pool takes a bad update off (`rollout.undo`). A node
/// found at the target (never updated by winpool) soaks too: its agent then
/// finds no update of its own to remove, and says so.
fn undo_due<'g>(s: &RoundSettings<'g>, n: &NodeView) -> Option<&'g gates::GateResult> {
    if !may_undo(s) || !in_soak(s, n) {
        return None;
    }
    gates::holding_node(s.gates, &n.name)
}

/// Whether an undo may start this round. A person's pause (`rollout.paused`,
/// `kubectl winpool pause`) and a clock that cannot be trusted hold it as
/// they hold any start: an undo cordons, drains and reboots. The bad-update
/// breaker's pause does not (it paused for such an update), nor do the
/// maintenance windows: they bound when an update goes on, and the node is
/// broken now.
pub(super) fn may_undo(s: &RoundSettings<'_>) -> bool {
    let paused_by_a_person = s.spec.rollout.paused || (s.paused_by_annotation && s.bad_update.is_none());
    s.spec.rollout.undo && !s.rules.soak_time.is_zero() && s.clock_skew.is_none() && !paused_by_a_person
}

/// Updated less than soakTime ago.
pub(super) fn in_soak(s: &RoundSettings<'_>, n: &NodeView) -> bool {
    let soak = jiff::SignedDuration::try_from(s.rules.soak_time).unwrap_or(jiff::SignedDuration::MAX);
    n.state == NodeState::Updated.into() && n.state_since.and_then(|t| t.checked_add(soak).ok()).is_some_and(|end| end > s.now)
}

/// Start the node again, to take its update off: cordoned and drained like
/// any start (the pre-drain hook first), whatever maxUnavailable says (it
/// soaks, so it already counts against it), then its agent removes the
/// cumulative update and reboots; the node ends Failed (`undoing`).
fn start_undo(s: &RoundSettings<'_>, r: &mut Decided<'_>, p: &mut NodePatch, n: &NodeView, gate: &gates::GateResult) -> NodeState {
    let now = s.now.to_string();
    p.ann(names::ANN_TARGET_REVISION, Some(&s.rev))
        .ann(names::ANN_STARTED_AT, Some(&now))
        .ann(names::ANN_INSTALL_BUDGET, Some(&format!("{}s", s.install_budget().as_secs())))
        .ann(names::ANN_UNDO, Some(&gate.gate))
        .ann(names::ANN_DRAINED_REVISION, None);
    if !n.unschedulable {
        p.unschedulable = Some(true);
        p.ann(names::ANN_CORDONED_BY_WINPOOL, Some("true"));
    }
    let pods = match &gate.seen {
        Seen::PodsOnNodes(on) => on.get(&n.name).map(|pods| pods.join(", ")).unwrap_or_default(),
        _ => String::new(),
    };
    let why = format!("health gate {} holds it in its soak after revision {} ({pods})", gate.gate, s.rev);
    r.warn(&n.name, format!("{why}: taking the cumulative update off (rollout.undo)"));
    if s.spec.rollout.drain.enabled {
        p.state(NodeState::Draining, s.now);
        p.reason = format!("{why}: cordoned; draining to take the update off");
        return NodeState::Draining;
    }
    p.state(NodeState::Applying, s.now);
    p.reason = format!("{why}: cordoned; the agent takes the update off (no drain)");
    NodeState::Applying
}

/// A node started to take its update off: Failed once its agent has, with
/// what it removed (the breaker counts it), or with why it could not.
fn undoing(s: &RoundSettings<'_>, r: &mut Decided<'_>, p: &mut NodePatch, n: &NodeView, state: NodeState, gate: &str) -> NodeState {
    let reported = n.applied_revision.as_deref() == Some(s.rev.as_str());
    let said = n.apply_message.as_deref().unwrap_or("no message");
    let (reason, msg) = match (reported, n.apply()) {
        (true, Some(ApplyStatus::Succeeded)) => (
            FailureReason::UpdateUndone,
            format!(
                "health gate {gate} held the node in its soak after revision {}; its agent took the update off: {said}. \
                 kubectl winpool retry installs it again",
                s.rev
            ),
        ),
        (true, Some(ApplyStatus::Failed)) => (
            FailureReason::UndoFailed,
            format!("health gate {gate} held the node in its soak after revision {}; taking the update off failed: {said}", s.rev),
        ),
        _ => {
            r.wait(&n.name, format!("waiting for the agent to take the update of revision {} off (health gate {gate})", s.rev));
            return state;
        }
    };
    fail(p, n, s.now, reason, &msg);
    p.ann(names::ANN_UNDO, None);
    p.reason = super::clipped(&msg);
    NodeState::Failed
}

/// Give the slot of a node whose drain a budget blocks to another node: back
/// to Pending, uncordoned, last in line, tried again after putBackAfter.
fn put_back(s: &RoundSettings<'_>, p: &mut NodePatch, n: &NodeView, block: &DrainBlock) {
    let since = n.drain_blocked_since.map_or(block.since, |t| t.min(block.since)).to_string();
    p.state(NodeState::Pending, s.now)
        .ann(names::ANN_DRAIN_BLOCKED_BY, Some(&block.budget))
        .ann(names::ANN_DRAIN_BLOCKED_SINCE, Some(&since))
        .ann(names::ANN_STARTED_AT, None)
        .ann(names::ANN_INSTALL_BUDGET, None)
        .ann(names::ANN_TARGET_REVISION, None)
        .ann(names::ANN_BOOT_ID, None);
    if n.hotpatch {
        p.ann(names::ANN_HOTPATCH, None);
    }
    release_cordon(p, n);
    p.reason = format!(
        "put back: PodDisruptionBudget {} refused its evictions for {}; tried again after that long",
        block.budget, s.spec.rollout.drain.put_back_after
    );
}

/// When a node put back at `put_back` may start again; `None` once it may.
fn retry_after(s: &RoundSettings<'_>, put_back: jiff::Timestamp) -> Option<jiff::Timestamp> {
    let at = put_back.checked_add(jiff::SignedDuration::try_from(s.rules.put_back_after).ok()?).ok()?;
    (at > s.now).then_some(at)
}
