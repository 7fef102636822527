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
//! `rules` (the spec parsed once a round), `settings` (the round's settings
//! over them, the decisions so far), `node` (one
//! member's step by its state), `start` (the hold, the starts up to
//! maxUnavailable), `summary` (stale HNS reports, counts, failures, requeue),
//! `verify` (the checks a node must pass) and `tamper` (revision labels
//! winpool did not set). The types are `types`'s ([`NodeView`], [`Plan`],
//! [`PoolInput`]); the patch a node gets, and the steps every state shares
//! when it writes one, are `patch`'s.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::WindowsNodePoolSpec;
#[cfg(test)]
use crate::decision::revision::revision_of;

/// How many failed nodes the status lists by name; the count is always exact.
pub const MAX_LISTED_FAILED: usize = 20;
/// How often an in-flight rollout is looked at even without a watch event
/// (evictions finishing and timeouts produce no Node event).
pub const IN_FLIGHT_REQUEUE: Duration = Duration::from_secs(5);
pub const IDLE_REQUEUE: Duration = Duration::from_secs(300);

pub use crate::api::NodeState;

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
                && n.apply() == Some(ApplyStatus::Succeeded)
                && verify_config(spec, n).is_ok();
            if at_target { NodeState::Updated } else { NodeState::Pending }
        }
    }
}

/// The most of an agent's words winpool copies into a Node annotation or the
/// pool's status (the report CRD bounds a message at 2048 characters; the
/// status repeats one per failed node).
pub const MAX_COPIED_MESSAGE: usize = 1024;

/// `text` cut to [`MAX_COPIED_MESSAGE`] characters, saying so.
pub fn clipped(text: &str) -> String {
    match text.char_indices().nth(MAX_COPIED_MESSAGE) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}… ({} more characters)", &text[..cut], text[cut..].chars().count()),
    }
}

/// Whether this round would start a node if no health gate held it: the
/// controller evaluates the gates (I/O) only then, and decides again with
/// what they saw. Pure, like [`decide`].
pub fn could_start(pool: &PoolInput<'_>, nodes: &[NodeView], now: Timestamp) -> bool {
    let open = PoolInput { target_marked_at: None, gates: &[], ..*pool };
    decide(&open, nodes, now).patches.iter().any(|p| p.from == NodeState::Pending && p.to.in_flight())
}

/// Whether the gates could take an update off this round: the pool undoes
/// bad updates (`rollout.undo`) and a member soaks after its update. The
/// controller then asks the gates even when no node would start.
pub fn could_undo(pool: &PoolInput<'_>, nodes: &[NodeView], now: Timestamp) -> bool {
    if !pool.spec.rollout.undo {
        return false;
    }
    let s = settings::RoundSettings::new(pool, now);
    node::may_undo(&s) && nodes.iter().any(|n| node::in_soak(&s, n))
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
    let s = settings::RoundSettings::new(pool, now);
    let mut r = settings::Decided::new(&s.rev, s.eviction_room);
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

    let by_state = summary::by_state(&r);
    let counts = summary::counts(&by_state, nodes.len());
    let failed = summary::failed(&s, &r, &sorted);
    let behind_patch_level = nodes.iter().filter(|n| !kernel_satisfies(n, s.rules.target_build.as_ref())).count();
    let deadline = patch_deadline(s.spec, pool.target_marked_at);
    let patch_overdue = if deadline.is_some_and(|d| d <= now) { behind_patch_level } else { 0 };
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
        eviction_caps: r.eviction_caps,
        hooks: r.hooks,
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
        deadline,
        patch_overdue,
        requeue_after,
        warnings: r.warnings,
        runtime_refused: r.runtime_refused,
        preflight_held: r.preflight_held,
        tampered: r.tampered,
        held: r.held,
        promoted: s.spec.rollout.follows.is_some() && s.ring.is_none(),
    }
}

/// When nodes must run the pool's target (`compliance.deadline` after the
/// target revision was first marked): none without a deadline.
fn patch_deadline(spec: &WindowsNodePoolSpec, target_since: Option<Timestamp>) -> Option<Timestamp> {
    let deadline = parse_duration(&spec.compliance.as_ref()?.deadline)?;
    target_since?.checked_add(jiff::SignedDuration::try_from(deadline).ok()?).ok()
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

pub mod cluster;
pub mod hooks;
mod new_node;
mod node;
mod patch;
pub mod preflight;
mod rules;
pub mod runtime;
mod settings;
mod start;
mod summary;
mod tamper;
mod types;
mod verify;

use crate::api::report::ApplyStatus;
pub use new_node::unpatched_taint;
pub use patch::{NodePatch, held_cordoned, may_be_installing};
use patch::{fail, fail_kept_cordoned, release_cordon};
pub use rules::PoolRules;
#[cfg(test)]
pub use rules::{PARSED, test_rules};
pub use settings::{HEALTH_GATE_INTERVAL, gate_timeout, health_gate_interval, hns_pacing_budget, hns_rates, node_timeout, phase_budgets};
pub use start::{hotpatchable, out_of_service, start_order};
pub use tamper::Tampering;
pub use types::*;
use verify::{kernel_satisfies, waiting_for};
pub use verify::{verify_config, verify_health, verify_rebooted};

#[cfg(test)]
mod tests;
