//! A node's `WindowsHNSReady` condition and `winpool.dev/hns-not-ready` taint,
//! from the counts its agent reports.

#[allow(unused_imports)]
use super::*;

/// The controller knows the counts on a node are gone or stale because the
/// node restarted (its report's counts are of an earlier boot; the rollout
/// rebooted the node at `since`): until `grace` has passed, a
/// node without counts is NotReady (HNS starts empty after a reboot), after
/// that Unknown, so a node whose agent never reports is not held forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AwaitingReport {
    pub since: Timestamp,
    pub grace: SignedDuration,
}

/// The smallest count that is within `tolerance` percent below `expected`.
fn ready_at(expected: i64, tolerance: u8) -> i64 {
    let need = i128::from(expected.max(0)) * i128::from(100 - tolerance);
    ((need + 99) / 100) as i64
}

/// HNS readiness of one node from the counts its agent reports (its report's
/// `hns.loadBalancers` and `hns.endpoints`) against the expected counts
/// ([`HnsTracker::totals`]). Returns the readiness, a reason from [`reasons`]
/// and a message.
///
/// - **Ready** (`CaughtUp`) when both counts are at least
///   `expected × (1 − tolerance_percent/100)` (rounded up; tolerance is clamped
///   to 100). The message carries no numbers so that a Ready node's condition
///   does not change, and need no write, each time the cluster's counts move.
/// - **NotReady** (`CatchingUp`) when a count is below that, with the numbers;
///   (`AwaitingReport`) when counts are missing while `awaiting` is in its grace
///   period.
/// - **Unknown** (`NotReported`) when a count is missing otherwise (the agent
///   never reported, or not within the grace period).
///
/// How Unknown is handled: the node gets `WindowsHNSReady=Unknown` with this
/// message, [`taint_wanted`] is false for it (a node whose agent never reports
/// is never tainted, so never blocked forever), and the rollout does not wait
/// on it (`rollout` gates only on `HnsReadiness::NotReady`).
pub fn node_readiness(
    reported_lb: Option<i64>,
    reported_ep: Option<i64>,
    expected: (i64, i64),
    tolerance_percent: u8,
    awaiting: Option<AwaitingReport>,
    now: Timestamp,
) -> (HnsReadiness, &'static str, String) {
    let tolerance = tolerance_percent.min(100);
    let (Some(lb), Some(ep)) = (reported_lb, reported_ep) else {
        let fields = [("hns.loadBalancers", reported_lb), ("hns.endpoints", reported_ep)];
        let missing: Vec<&str> = fields.iter().filter(|(_, v)| v.is_none()).map(|(field, _)| *field).collect();
        return not_reported(&missing.join(" and "), awaiting, now);
    };

    let (need_lb, need_ep) = (ready_at(expected.0, tolerance), ready_at(expected.1, tolerance));
    if lb >= need_lb && ep >= need_ep {
        return (
            HnsReadiness::Ready,
            reasons::CAUGHT_UP,
            format!("HNS holds at least {}% of the load balancers and remote endpoints the cluster's Services need", 100 - tolerance),
        );
    }
    (
        HnsReadiness::NotReady,
        reasons::CATCHING_UP,
        format!(
            "HNS is catching up: {} of {} load balancers and {} of {} endpoints programmed; ready at {} and {} ({}%)",
            thousands(lb),
            thousands(expected.0),
            thousands(ep),
            thousands(expected.1),
            thousands(need_lb),
            thousands(need_ep),
            100 - tolerance
        ),
    )
}

/// No HNS counts on the node: not ready for a while after a restart (HNS
/// starts empty), otherwise unknown.
fn not_reported(missing: &str, awaiting: Option<AwaitingReport>, now: Timestamp) -> (HnsReadiness, &'static str, String) {
    let Some(a) = awaiting else {
        return (
            HnsReadiness::Unknown,
            reasons::NOT_REPORTED,
            format!(
                "the agent has not reported HNS counts ({missing} missing); HNS readiness is unknown, so the node is not tainted and the rollout does not wait for it"
            ),
        );
    };
    if now.duration_since(a.since) < a.grace {
        return (
            HnsReadiness::NotReady,
            reasons::AWAITING_REPORT,
            format!(
                "the node restarted at {} and its agent has not reported HNS counts since ({missing} missing); HNS starts empty after a restart, so the node counts as not ready for up to {:#} after the restart",
                a.since, a.grace
            ),
        );
    }
    (
        HnsReadiness::Unknown,
        reasons::NOT_REPORTED,
        format!(
            "the agent has not reported HNS counts ({missing} missing) in the {:#} since the node restarted at {}; HNS readiness is unknown, so the node is not tainted and the rollout does not wait for it",
            a.grace, a.since
        ),
    )
}

/// The Node condition `WindowsHNSReady` (status True/False/Unknown for
/// Ready/NotReady/Unknown). `lastTransitionTime` is kept from `previous` while
/// the status is unchanged; `lastHeartbeatTime` is kept while status, reason
/// and message are all unchanged, so the result equals `previous` when nothing
/// changed and the controller can skip the write (`Some(&new) == previous`).
pub fn node_condition(
    readiness: HnsReadiness,
    reason: &str,
    message: &str,
    previous: Option<&NodeCondition>,
    now: Timestamp,
) -> NodeCondition {
    let status = match readiness {
        HnsReadiness::Ready => "True",
        HnsReadiness::NotReady => "False",
        HnsReadiness::Unknown => "Unknown",
    };
    let previous = previous.filter(|p| p.type_ == names::NODE_CONDITION_HNS_READY);
    let same_status = previous.filter(|p| p.status == status);
    let same_all = same_status.filter(|p| p.reason.as_deref() == Some(reason) && p.message.as_deref() == Some(message));
    NodeCondition {
        type_: names::NODE_CONDITION_HNS_READY.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_transition_time: Some(same_status.and_then(|p| p.last_transition_time.clone()).unwrap_or(Time(now))),
        last_heartbeat_time: Some(same_all.and_then(|p| p.last_heartbeat_time.clone()).unwrap_or(Time(now))),
    }
}

/// Whether the node should carry `winpool.dev/hns-not-ready:NoSchedule`: only
/// when NotReady and the pool has `taintWhenNotReady`. Unknown never taints.
/// `Some(true)`: add it, `Some(false)`: remove it, `None`: leave it as it is —
/// a NotReady node winpool holds cordoned for its update (`held_cordoned`)
/// gets no new taint (the cordon keeps pods off and the uncordon waits for
/// HNS), but one it already carries stays until HNS is ready.
pub fn taint_wanted(readiness: HnsReadiness, taint_when_not_ready: bool, held_cordoned: bool) -> Option<bool> {
    match (taint_when_not_ready && readiness == HnsReadiness::NotReady, held_cordoned) {
        (true, true) => None,
        (wanted, _) => Some(wanted),
    }
}

/// The taint winpool puts on a node whose HNS has not caught up.
pub fn hns_taint() -> Taint {
    Taint { key: names::TAINT_HNS_NOT_READY.into(), effect: "NoSchedule".into(), value: None, time_added: None }
}

fn is_hns_taint(t: &Taint) -> bool {
    t.key == names::TAINT_HNS_NOT_READY && t.effect == "NoSchedule"
}

/// The node's new `spec.taints` with winpool's taint added (`wanted`) or
/// removed, every other taint kept in order; `None` when nothing changes.
/// A taint with winpool's key but another effect is someone else's and is left
/// alone. Write the whole list back with the node's resourceVersion (taints
/// have no merge key, a patch replaces the list).
pub fn taints_update(current: &[Taint], wanted: bool) -> Option<Vec<Taint>> {
    let present = current.iter().any(is_hns_taint);
    match (wanted, present) {
        (true, false) => Some(current.iter().cloned().chain(std::iter::once(hns_taint())).collect()),
        (false, true) => Some(current.iter().filter(|t| !is_hns_taint(t)).cloned().collect()),
        _ => None,
    }
}
