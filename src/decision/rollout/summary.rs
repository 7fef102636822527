//! What the round's decisions add up to: the counts, the failed list and
//! when to look again.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;

use super::max_unavailable;
use super::settings::{Decided, RoundSettings};
use super::{FailedInfo, Hold, IDLE_REQUEUE, IN_FLIGHT_REQUEUE, NodeState, NodeView, Soak};
use crate::api::{NodeCounts, names};

/// Nodes per state, every state present.
pub(super) fn by_state(r: &Decided<'_>) -> BTreeMap<NodeState, usize> {
    let mut by_state: BTreeMap<NodeState, usize> = NodeState::ALL.iter().map(|s| (*s, 0)).collect();
    for s in r.states.values() {
        *by_state.entry(*s).or_default() += 1;
    }
    by_state
}

pub(super) fn counts(by_state: &BTreeMap<NodeState, usize>, total: usize) -> NodeCounts {
    let count = |s: NodeState| by_state.get(&s).copied().unwrap_or(0) as i32;
    NodeCounts {
        total: total as i32,
        updated: count(NodeState::Updated),
        updating: count(NodeState::Draining) + count(NodeState::Applying) + count(NodeState::Verifying),
        pending: count(NodeState::Pending),
        failed: count(NodeState::Failed),
    }
}

/// Every failed node, by name, with why.
pub(super) fn failed(s: &RoundSettings<'_>, r: &Decided<'_>, sorted: &[&NodeView]) -> Vec<FailedInfo> {
    let mut failed = Vec::new();
    for n in sorted {
        if r.states.get(n.name.as_str()) != Some(&NodeState::Failed) {
            continue;
        }
        // A node that failed in this very plan carries its reason in the patch.
        let from_patch = r.patches.iter().find(|p| p.node == n.name && p.to == NodeState::Failed);
        let get = |k: &str, fallback: &Option<String>| {
            from_patch.and_then(|p| p.annotations.get(k).cloned().flatten()).or_else(|| fallback.clone()).unwrap_or_default()
        };
        failed.push(FailedInfo {
            node: n.name.clone(),
            reason: get(names::ANN_FAILURE_REASON, &n.failure_reason),
            message: get(names::ANN_FAILURE_MESSAGE, &n.failure_message),
            since: if from_patch.is_some() { Some(s.now) } else { n.state_since },
        });
    }
    failed
}

/// From now until `t`, at least a second and at most the idle requeue.
pub(super) fn until(t: Timestamp, now: Timestamp) -> Duration {
    t.duration_since(now).unsigned_abs().clamp(Duration::from_secs(1), IDLE_REQUEUE)
}

/// Soon while nodes are in flight; when the window opens if nodes wait for
/// it; when the first soaking node frees its slot; a closed health gate
/// again after rollout.healthGateInterval; when the open window closes (the
/// status names the next one).
pub(super) fn requeue_after(s: &RoundSettings<'_>, counts: &NodeCounts, hold: Option<&Hold>, soaking: Option<&Soak>) -> Duration {
    let now = s.now;
    let until = |t: Timestamp| until(t, now);
    // A node that soaks may be found unhealthy and its update taken off:
    // its gates are looked at as often as closed ones are.
    let undo_watch = (s.spec.rollout.undo && soaking.is_some()).then_some(s.rules.health_gate_interval);
    let after = match hold {
        _ if counts.updating > 0 => IN_FLIGHT_REQUEUE,
        None if counts.pending > 0 && soaking.is_some() => until(soaking.map_or(now, |k| k.first_ends)),
        Some(Hold::OutsideWindow { opens }) if counts.pending > 0 => until(*opens),
        Some(Hold::HealthGateClosed { .. }) if counts.pending > 0 => s.rules.health_gate_interval,
        Some(Hold::Ring(r)) if counts.pending > 0 => r.due().map_or(IDLE_REQUEUE, until),
        // Other pools' nodes finishing are no event of this pool: look again
        // as often as a pool with nodes in flight does.
        Some(Hold::ClusterLimit(_)) if counts.pending > 0 => IN_FLIGHT_REQUEUE,
        // Changes that add to the backlog are events of the HNS watches too.
        Some(Hold::HnsBacklog(w)) if counts.pending > 0 => w.clears_in().clamp(Duration::from_secs(1), IN_FLIGHT_REQUEUE),
        _ => s.window.as_ref().map_or(IDLE_REQUEUE, |w| until(w.end)),
    };
    undo_watch.map_or(after, |every| after.min(every))
}

/// The in-flight nodes once this round lands, with since when they are in
/// their state (this round's transitions: now).
pub(super) fn in_flight(s: &RoundSettings<'_>, r: &Decided<'_>, sorted: &[&NodeView]) -> Vec<(String, NodeState, Option<Timestamp>)> {
    // Once per round, not per node: a wave of hundreds in flight would make it quadratic.
    let moved: std::collections::BTreeSet<&str> =
        r.patches.iter().filter(|p| p.annotations.contains_key(names::ANN_STATE_SINCE)).map(|p| p.node.as_str()).collect();
    sorted
        .iter()
        .filter_map(|n| {
            let st = *r.states.get(n.name.as_str())?;
            st.in_flight().then(|| (n.name.clone(), st, if moved.contains(n.name.as_str()) { Some(s.now) } else { n.state_since }))
        })
        .collect()
}

/// Waves left (nodes not yet updated over maxUnavailable, rounded up) times
/// the average node update: rough, but from this pool's own pace. None while
/// held, with nothing left, or before any node of the pool was timed.
pub(super) fn estimated_completion(
    s: &RoundSettings<'_>,
    counts: &NodeCounts,
    hold: Option<&Hold>,
    average: Option<Duration>,
) -> Option<Timestamp> {
    let left = (counts.pending + counts.updating).max(0) as u32;
    if left == 0 || hold.is_some() {
        return None;
    }
    let per_wave = max_unavailable(&s.spec.rollout.max_unavailable, counts.total.max(0) as usize).max(1) as u32;
    let waves = left.div_ceil(per_wave);
    let total = average?.checked_mul(waves)?;
    s.now.checked_add(jiff::SignedDuration::try_from(total).ok()?).ok()
}
