//! A member's HNS readiness as the Node should show it, decided: the
//! WindowsHNSReady condition and the hns-not-ready taint (the shell,
//! `controller::hns_node`, writes them).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Taint;
use kube::api::Patch;
use serde_json::json;

use crate::api::names;
use crate::api::node_record::NodeRecord;
use crate::decision::hns::{self, AwaitingReport};
use crate::decision::rollout::{HnsReadiness, NodeState};

pub(crate) fn json_patch(v: serde_json::Value) -> json_patch::Patch {
    serde_json::from_value(v).expect("a well-formed JSON patch")
}

pub(crate) struct HnsNode<'a> {
    pub(crate) node: &'a NodeRecord,
    pub(crate) readiness: HnsReadiness,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
    /// When the agent first read the counts it reports, in the node's
    /// current boot (the report's `hns.observedAt`).
    pub(crate) counts_seen_at: Option<Timestamp>,
}

/// Whether a condition reason says HNS lost what it held in this boot.
fn is_loss(reason: Option<&str>) -> bool {
    matches!(reason, Some(hns::reasons::COLLAPSED | hns::reasons::DRIFTED))
}

/// How long a node whose HNS was caught up may fall behind before it is NotReady (and tainted).
/// kube-proxy programs HNS in periodic syncs, so while a cluster's endpoints change every second a
/// ready node is always a few seconds behind the newest count; judged at once, every change was a
/// False and a True condition, a taint and an untaint: four Node writes per node per change (43,346
/// Node writes in 10 minutes of endpoint churn on 1,000 nodes at rest, `hack/bench.sh --phases churn`).
pub(crate) const CATCH_UP_GRACE: jiff::SignedDuration = jiff::SignedDuration::from_secs(60);

/// Whether a node judged behind is still given time: it was caught up (its condition says so), it
/// is not being updated (a rebooted node is judged by its update's rules), and it fell behind less
/// than [`CATCH_UP_GRACE`] ago. `behind_since` is when this replica first saw it behind.
pub(crate) fn within_catch_up_grace(
    previous: Option<&k8s_openapi::api::core::v1::NodeCondition>,
    in_flight: bool,
    readiness: HnsReadiness,
    behind_since: Timestamp,
    now: Timestamp,
) -> bool {
    let was_ready = previous.is_some_and(|c| c.status == "True" && c.reason.as_deref() == Some(hns::reasons::CAUGHT_UP));
    readiness == HnsReadiness::NotReady && was_ready && !in_flight && now.duration_since(behind_since) < CATCH_UP_GRACE
}

/// A collapse: a node caught up earlier in this boot whose HNS now holds at
/// most a quarter of the load balancers the cluster needs (at least
/// [`COLLAPSE_MIN_LOAD_BALANCERS`] of them: a handful missing is no collapse).
/// kubernetes#110849 saw 577 fall to 1 and take days to come back; an HNS
/// restart looks the same until kube-proxy has programmed it again. The
/// message says what was seen, the numbers included.
pub(crate) fn collapse(v: &crate::decision::rollout::NodeView, totals: (i64, i64)) -> Option<String> {
    let lb = v.hns_load_balancers?;
    (totals.0 >= COLLAPSE_MIN_LOAD_BALANCERS && lb.saturating_mul(4) <= totals.0).then(|| {
        format!(
            "HNS collapsed: it holds {lb} of the {} load balancers the cluster's Services need, after holding them in this boot (load balancers collapsed, or HNS restarted and kube-proxy is programming it anew); {DRIFT_ADVICE}",
            totals.0
        )
    })
}

/// The message of a node whose HNS stayed behind what it held in this boot.
pub(crate) fn drift_message(v: &crate::decision::rollout::NodeView, totals: (i64, i64)) -> String {
    let count = |c: Option<i64>| c.map_or_else(|| "?".into(), |c| c.to_string());
    format!(
        "HNS lost what it held in this boot and has not programmed it again: {} of {} load balancers and {} of {} endpoints (load balancers deleted out of band, kubernetes#135802); {DRIFT_ADVICE}",
        count(v.hns_load_balancers),
        totals.0,
        count(v.hns_endpoints),
        totals.1
    )
}

/// Below this many expected load balancers, no count is called a collapse.
pub(crate) const COLLAPSE_MIN_LOAD_BALANCERS: i64 = 10;

/// What to do about HNS that lost what it held, said in the condition's message.
pub(crate) const DRIFT_ADVICE: &str = "kube-proxy recreates nothing it believes programmed: restart kube-proxy on the node (the pool's hns.repair has its agent do it), or drain and reboot it (docs/alerts.md#windowsnodepoolhnsdrifted)";

/// A node whose condition already names a drift keeps naming it while it stays behind (the reason
/// does not fall back to CatchingUp, which would be a write for nothing).
pub(crate) fn drift_standing(previous: Option<&k8s_openapi::api::core::v1::NodeCondition>, behind: bool) -> bool {
    behind && previous.is_some_and(|c| c.status == "False" && is_loss(c.reason.as_deref()))
}

/// Drifted, or Collapsed if that is what the condition said already (a collapsed HNS climbing back
/// is still the collapse until it has caught up).
pub(crate) fn drift_reason(previous: Option<&k8s_openapi::api::core::v1::NodeCondition>) -> &'static str {
    match previous.and_then(|c| c.reason.as_deref()) {
        Some(hns::reasons::COLLAPSED) => hns::reasons::COLLAPSED,
        _ => hns::reasons::DRIFTED,
    }
}

pub(crate) fn hns_readiness(
    v: &crate::decision::rollout::NodeView,
    totals: (i64, i64),
    spec: &crate::api::HnsSpec,
    grace: jiff::SignedDuration,
    now: Timestamp,
) -> (HnsReadiness, &'static str, String) {
    // Right after the update the agent has not reported yet: within nodeTimeout, missing counts mean "not yet".
    // Only a node whose agent reported counts before the update is awaited (counts of the boot
    // before); an agent that never reported leaves the node Unknown, never tainted and never gating.
    let stale = v.hns_reported && v.hns_load_balancers.is_none();
    let awaiting = match v.state.state() {
        Some(NodeState::Applying | NodeState::Verifying) if stale => Some(AwaitingReport { since: v.started_at.unwrap_or(now), grace }),
        _ => None,
    };
    let tolerance = spec.tolerance_percent.clamp(0, 100) as u8;
    hns::node_readiness(v.hns_load_balancers, v.hns_endpoints, totals, tolerance, awaiting, now)
}

/// The writes that bring one node's WindowsHNSReady condition and hns-not-ready
/// taint in step with its readiness; `None` when both already are (most nodes,
/// most rounds), so a round costs no future and no request for them.
/// `held_cordoned`: see [`crate::decision::rollout::held_cordoned`].
pub(crate) fn hns_writes_for(
    h: &HnsNode<'_>,
    held_cordoned: bool,
    taint_when_not_ready: bool,
    unpatched: Option<bool>,
    now: Timestamp,
) -> Option<HnsWrites> {
    let previous = h.node.hns_condition.as_ref();
    let cond = hns::node_condition(h.readiness, h.reason, &h.message, previous, now);
    // No condition already says "unknown": a node whose agent never reported costs no write.
    let pointless = previous.is_none() && h.readiness == HnsReadiness::Unknown;
    // A node winpool holds cordoned for its update, awaiting its agent's first report since: winpool
    // dropped the counts itself, so nothing was observed. Its condition stays as it was until that
    // report (or the grace ends, or the node is uncordoned); a False now and a True seconds later were
    // two Node status writes per node per rollout, each sent to every watcher of Nodes. The state
    // annotation, the pool's status and winpool_pool_nodes_hns_not_ready show the wait meanwhile.
    let unobserved = held_cordoned && h.reason == hns::reasons::AWAITING_REPORT;
    // The numbers in a not-ready message move with every report; a node that stays behind for
    // the same reason is not rewritten for each (the message says what it was when it fell behind).
    let same = previous.is_some_and(|p| p.status == cond.status && p.reason == cond.reason);
    let condition = (!same && !pointless && !unobserved).then_some(cond);
    let wanted = [
        (names::TAINT_HNS_NOT_READY, hns::taint_wanted(h.readiness, taint_when_not_ready, held_cordoned)),
        (names::TAINT_UNPATCHED, unpatched),
    ];
    let taint = taints_patch(&h.node.taints, h.node.resource_version.as_deref(), &wanted);
    // A loss said now for the first time: how long after the agent read the counts that show it.
    let loss_detected = (condition.is_some() && is_loss(Some(h.reason)) && !is_loss(previous.and_then(|p| p.reason.as_deref())))
        .then(|| h.counts_seen_at.map(|at| (h.reason, now.duration_since(at).unsigned_abs())))
        .flatten();
    (condition.is_some() || taint.is_some()).then(|| HnsWrites {
        node: h.node.name.clone(),
        condition,
        taint,
        unless_changed_since: None,
        loss_detected,
    })
}

/// winpool's NoSchedule taints (`key`, wanted or not; `None`: as it is), as one
/// patch of the node's taints: the keys added and removed, and the patch.
/// JSON patch ops touch only winpool's taints, so the node lifecycle
/// controller's are never overwritten by a stale copy; only an empty list is
/// written whole, guarded by its resourceVersion. Removals go from the last
/// index down, each behind a test of its key, so the indices hold.
fn taints_patch(
    taints: &[Taint],
    rv: Option<&str>,
    wanted: &[(&'static str, Option<bool>)],
) -> Option<(TaintChange, Patch<serde_json::Value>)> {
    fn ours(key: &str) -> impl Fn(&Taint) -> bool + '_ {
        move |t| t.key == key && t.effect == "NoSchedule"
    }
    let mut change = TaintChange::default();
    for (key, want) in wanted {
        match (want, taints.iter().any(ours(key))) {
            (Some(true), false) => change.added.push(key),
            (Some(false), true) => change.removed.push(key),
            _ => {}
        }
    }
    if change.added.is_empty() && change.removed.is_empty() {
        return None;
    }
    let taint = |key: &str| Taint { key: key.into(), effect: "NoSchedule".into(), value: None, time_added: None };
    if taints.is_empty() {
        let all: Vec<Taint> = change.added.iter().map(|k| taint(k)).collect();
        return Some((change, Patch::Merge(json!({ "metadata": { "resourceVersion": rv }, "spec": { "taints": all } }))));
    }
    let mut ops = Vec::new();
    let mut gone: Vec<(usize, &str)> = change.removed.iter().filter_map(|k| Some((taints.iter().position(ours(k))?, *k))).collect();
    gone.sort_by_key(|g| std::cmp::Reverse(g.0));
    for (i, key) in gone {
        ops.push(json!({ "op": "test", "path": format!("/spec/taints/{i}/key"), "value": key }));
        ops.push(json!({ "op": "remove", "path": format!("/spec/taints/{i}") }));
    }
    for key in &change.added {
        ops.push(json!({ "op": "add", "path": "/spec/taints/-", "value": taint(key) }));
    }
    Some((change, Patch::Json(json_patch(serde_json::Value::Array(ops)))))
}

/// Which of winpool's taints a write adds and removes (for the log).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct TaintChange {
    pub(crate) added: Vec<&'static str>,
    pub(crate) removed: Vec<&'static str>,
}

pub(crate) struct HnsWrites {
    pub(crate) node: String,
    pub(crate) condition: Option<k8s_openapi::api::core::v1::NodeCondition>,
    /// Which of winpool's taints are added and removed, and the patch that does it.
    pub(crate) taint: Option<(TaintChange, Patch<serde_json::Value>)>,
    /// The resourceVersion the node's start this round is guarded by: these
    /// writes land only on it, and pass on the version they leave.
    pub(crate) unless_changed_since: Option<String>,
    /// The condition says for the first time that HNS lost what it held
    /// (`Collapsed` or `Drifted`): that reason, and how long after the
    /// agent read the counts that show it (`winpool_hns_loss_detection_seconds`).
    pub(crate) loss_detected: Option<(&'static str, std::time::Duration)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};

    fn node_with(status: &str, reason: &str) -> NodeRecord {
        let cond = NodeCondition {
            type_: names::NODE_CONDITION_HNS_READY.into(),
            status: status.into(),
            reason: Some(reason.into()),
            message: Some("before the update".into()),
            ..Default::default()
        };
        let mut n = Node::default();
        n.metadata.name = Some("win-a".into());
        n.status = Some(NodeStatus { conditions: Some(vec![cond]), ..Default::default() });
        NodeRecord::from(&n)
    }

    /// `node` judged NotReady, for `reason`.
    fn judged<'a>(node: &'a NodeRecord, reason: &'static str, message: &str) -> HnsNode<'a> {
        HnsNode { node, readiness: HnsReadiness::NotReady, reason, message: message.into(), counts_seen_at: None }
    }

    #[test]
    fn an_awaited_node_held_cordoned_keeps_its_condition_until_its_agent_reports() {
        let now: Timestamp = "2026-12-01T12:00:00Z".parse().unwrap();
        let node = node_with("True", hns::reasons::CAUGHT_UP);
        let awaited = judged(&node, hns::reasons::AWAITING_REPORT, "the node restarted and its agent has not reported");
        assert!(hns_writes_for(&awaited, true, true, None, now).is_none(), "winpool dropped the counts itself: nothing observed, no write");
        let uncordoned = hns_writes_for(&awaited, false, true, None, now).expect("uncordoned (hns.readyTimeout): the wait is written");
        assert_eq!(uncordoned.condition.map(|c| c.status), Some("False".into()));
        assert!(uncordoned.taint.is_some(), "and tainted, since pods may land on it now");

        // What the agent reports once back is an observation: written while held, too.
        let behind = HnsNode { reason: hns::reasons::CATCHING_UP, message: "HNS is catching up: 3 of 812".into(), ..awaited };
        let w = hns_writes_for(&behind, true, true, None, now).expect("a report that HNS is behind is written");
        assert_eq!(w.condition.map(|c| (c.status, c.reason)), Some(("False".into(), Some(hns::reasons::CATCHING_UP.into()))));
        assert!(w.taint.is_none(), "held cordoned: no taint");
    }

    /// The first condition that says HNS lost what it held carries how long after the agent
    /// read the counts that show it; one that said so already, one for another reason, or
    /// counts with no time of reading carry none.
    #[test]
    fn a_loss_said_for_the_first_time_is_timed_from_the_agents_reading() {
        let now: Timestamp = "2026-12-05T12:00:00Z".parse().unwrap();
        let read = Some(now - jiff::SignedDuration::from_secs(12));
        let ready = node_with("True", hns::reasons::CAUGHT_UP);
        let detected = |node: &NodeRecord, reason: &'static str, seen: Option<Timestamp>| {
            let h = HnsNode { counts_seen_at: seen, ..judged(node, reason, "HNS collapsed: it holds 3 of 40") };
            hns_writes_for(&h, false, true, None, now).and_then(|w| w.loss_detected)
        };
        let twelve = std::time::Duration::from_secs(12);
        assert_eq!(detected(&ready, hns::reasons::COLLAPSED, read), Some((hns::reasons::COLLAPSED, twelve)));
        assert_eq!(detected(&ready, hns::reasons::DRIFTED, read), Some((hns::reasons::DRIFTED, twelve)));
        let behind = node_with("False", hns::reasons::CATCHING_UP);
        assert_eq!(detected(&behind, hns::reasons::DRIFTED, read), Some((hns::reasons::DRIFTED, twelve)), "behind before, lost now");
        let said = node_with("False", hns::reasons::COLLAPSED);
        assert_eq!(detected(&said, hns::reasons::COLLAPSED, read), None, "said already");
        assert_eq!(detected(&said, hns::reasons::DRIFTED, read), None, "a collapse climbing back is the same loss");
        assert_eq!(detected(&ready, hns::reasons::CATCHING_UP, read), None, "no loss");
        assert_eq!(detected(&ready, hns::reasons::COLLAPSED, None), None, "no time of reading");
    }

    /// A node that was caught up and falls behind a moving count is given CATCH_UP_GRACE before it
    /// is NotReady; one being updated, one never caught up, or one behind for longer is not.
    #[test]
    fn a_ready_node_falling_behind_is_given_time_to_catch_up() {
        let now: Timestamp = "2026-12-02T12:00:00Z".parse().unwrap();
        let ready = node_with("True", hns::reasons::CAUGHT_UP);
        let caught_up = ready.hns_condition.as_ref();
        let not_ready = node_with("False", hns::reasons::CATCHING_UP);
        let secs = |s: i64| now - jiff::SignedDuration::from_secs(s);
        let nr = HnsReadiness::NotReady;
        assert!(within_catch_up_grace(caught_up, false, nr, secs(0), now), "just fell behind");
        assert!(within_catch_up_grace(caught_up, false, nr, secs(59), now), "behind for under a minute");
        assert!(!within_catch_up_grace(caught_up, false, nr, secs(60), now), "behind for the whole grace: NotReady");
        assert!(!within_catch_up_grace(caught_up, true, nr, secs(0), now), "a node being updated is judged by its update");
        assert!(!within_catch_up_grace(not_ready.hns_condition.as_ref(), false, nr, secs(0), now), "never caught up since");
        assert!(!within_catch_up_grace(None, false, nr, secs(0), now), "no condition yet");
        assert!(!within_catch_up_grace(caught_up, false, HnsReadiness::Unknown, secs(0), now), "unknown is not behind");
    }

    /// A node that stays behind is not rewritten for every count that moves: the condition says
    /// what it was when the node fell behind.
    #[test]
    fn a_node_that_stays_behind_is_not_rewritten_for_each_count() {
        let now: Timestamp = "2026-12-02T12:00:00Z".parse().unwrap();
        let n = node_with("False", hns::reasons::CATCHING_UP);
        let behind = judged(&n, hns::reasons::CATCHING_UP, "HNS is catching up: 7 of 9");
        let w = hns_writes_for(&behind, false, false, None, now);
        assert!(w.is_none_or(|w| w.condition.is_none()), "the same status and reason: no condition write");
    }

    /// Both of winpool's taints in one patch: the lifecycle controller's taint
    /// is never rewritten, a removal tests the key at its index first, and an
    /// empty list is written whole behind the node's resourceVersion.
    #[test]
    fn winpool_s_two_taints_change_in_one_patch_that_touches_no_other_taint() {
        let t = |key: &str| Taint { key: key.into(), effect: "NoSchedule".into(), value: None, time_added: None };
        let others = vec![t("node.kubernetes.io/unreachable"), t(names::TAINT_UNPATCHED), t("dedicated")];
        let wanted = [(names::TAINT_HNS_NOT_READY, Some(true)), (names::TAINT_UNPATCHED, Some(false))];
        let (change, patch) = taints_patch(&others, Some("7"), &wanted).unwrap();
        assert_eq!((change.added, change.removed), (vec![names::TAINT_HNS_NOT_READY], vec![names::TAINT_UNPATCHED]));
        let Patch::Json(ops) = patch else { panic!("a JSON patch") };
        assert_eq!(
            serde_json::to_value(ops).unwrap(),
            json!([
                { "op": "test", "path": "/spec/taints/1/key", "value": names::TAINT_UNPATCHED },
                { "op": "remove", "path": "/spec/taints/1" },
                { "op": "add", "path": "/spec/taints/-", "value": { "key": names::TAINT_HNS_NOT_READY, "effect": "NoSchedule" } },
            ])
        );
        let (_, patch) = taints_patch(&[], Some("7"), &[(names::TAINT_UNPATCHED, Some(true))]).unwrap();
        let Patch::Merge(body) = patch else { panic!("a merge patch") };
        assert_eq!(
            body,
            json!({ "metadata": { "resourceVersion": "7" }, "spec": { "taints": [{ "key": names::TAINT_UNPATCHED, "effect": "NoSchedule" }] } })
        );
        assert!(
            taints_patch(&others, Some("7"), &[(names::TAINT_UNPATCHED, Some(true)), (names::TAINT_HNS_NOT_READY, None)]).is_none(),
            "as it is"
        );
    }
}
