//! HNS repair, decided: which members whose HNS collapsed or drifted winpool
//! asks to restart kube-proxy (`hns.repair`), and what their agents answered.
//! The ask is an annotation naming the Node's boot (`winpool.dev/hns-repair`);
//! the agent restarts kube-proxy's Windows service once in that boot and says
//! how it went in its report (`spec.hnsRepair`). kube-proxy recreates nothing
//! it believes programmed (kubernetes#110849, #135802); started anew, it
//! programs every Service again. AKS's `hnsremediator.ps1` restarts it only
//! when the HNS service's process changes, which sees neither.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use kube::runtime::events::{Event, EventType};
use serde_json::json;

use super::hns_node::HnsNode;
use super::node_ref;
use crate::api::node_record::NodeRecord;
use crate::api::report::{HnsRepairResult, WindowsNodeReport};
use crate::api::{EventReason, HnsRepairSpec, names};
use crate::decision::hns;

/// The window `hns.repair.maxPerHour` counts asks in.
const BUDGET_WINDOW: SignedDuration = SignedDuration::from_hours(1);

/// One member asked to restart kube-proxy in its current boot.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RepairAsk {
    pub node: String,
    /// The merge patch that asks (the boot, and when).
    pub body: serde_json::Value,
    /// What the Event announcing the ask says, once it has landed.
    pub note: String,
}

impl RepairAsk {
    /// The Event announcing the ask.
    pub fn event(&self) -> Event {
        Event {
            type_: EventType::Normal,
            reason: EventReason::HnsRepairAsked.as_str().into(),
            note: Some(self.note.clone()),
            action: "Repair".into(),
            secondary: Some(node_ref(&self.node)),
        }
    }
}

/// Where a member's repair stands in its current boot (`winpool_pool_hns_repairs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum RepairState {
    /// Asked; its agent has not answered.
    Asked,
    /// Answered.
    Answered(HnsRepairResult),
}

impl RepairState {
    /// Asked, then each answer.
    pub fn all() -> impl Iterator<Item = RepairState> {
        std::iter::once(RepairState::Asked).chain(HnsRepairResult::ALL.iter().map(|&r| RepairState::Answered(r)))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RepairState::Asked => "Asked",
            RepairState::Answered(r) => r.as_str(),
        }
    }
}

/// What the round does and sees of HNS repairs.
#[derive(Default)]
pub(crate) struct Repairs {
    pub asks: Vec<RepairAsk>,
    /// Members by where their repair stands in their current boot.
    pub states: BTreeMap<RepairState, usize>,
    /// Answers that did not restart kube-proxy, keyed for `standing_news`.
    pub problems: Vec<(String, Event)>,
}

/// Where `n`'s repair stands in its current boot, if one was asked or made.
fn state_of(n: &NodeRecord, report: Option<&WindowsNodeReport>) -> Option<(RepairState, Option<String>)> {
    if n.boot_id.is_empty() {
        return None;
    }
    let answer = report.and_then(|r| r.observations().hns_repair.as_ref()).filter(|r| r.boot_id == n.boot_id);
    match answer {
        Some(a) => Some((RepairState::Answered(a.result), a.message.clone())),
        None => (n.annotation(names::ANN_HNS_REPAIR) == Some(n.boot_id.as_str())).then_some((RepairState::Asked, None)),
    }
}

/// The asks of this round and the repairs' standing. A member is asked when
/// its HNS is `Collapsed` or `Drifted` (never one being updated: `judge` says
/// neither of it), nothing was asked or made in its current boot, and the
/// pool's asks of the last hour leave room; members in name order.
pub(crate) fn repairs(
    spec: &HnsRepairSpec,
    members: &[(Arc<NodeRecord>, Option<Arc<WindowsNodeReport>>)],
    hns_nodes: &[HnsNode<'_>],
    now: Timestamp,
) -> Repairs {
    let mut out = Repairs::default();
    for (n, report) in members {
        let Some((state, message)) = state_of(n, report.as_deref()) else { continue };
        *out.states.entry(state).or_default() += 1;
        if let RepairState::Answered(result @ (HnsRepairResult::Failed | HnsRepairResult::Unsupported)) = state {
            let ev = Event {
                type_: EventType::Warning,
                reason: EventReason::HnsRepairFailed.as_str().into(),
                note: Some(format!("{}: kube-proxy was not restarted ({}): {}", n.name, result.as_str(), message.unwrap_or_default())),
                action: "Repair".into(),
                secondary: Some(node_ref(&n.name)),
            };
            out.problems.push((format!("hns-repair:{}:{}", n.name, n.boot_id), ev));
        }
    }
    if !spec.enabled {
        return out;
    }
    let recent = members
        .iter()
        .filter_map(|(n, _)| n.annotation(names::ANN_HNS_REPAIR_ASKED_AT)?.parse::<Timestamp>().ok())
        .filter(|at| now.duration_since(*at) < BUDGET_WINDOW)
        .count();
    let room = usize::try_from(spec.max_per_hour).unwrap_or(0).saturating_sub(recent);
    let by_name: BTreeMap<&str, &(Arc<NodeRecord>, Option<Arc<WindowsNodeReport>>)> =
        members.iter().map(|m| (m.0.name.as_str(), m)).collect();
    let mut lost: Vec<&HnsNode<'_>> =
        hns_nodes.iter().filter(|h| matches!(h.reason, hns::reasons::COLLAPSED | hns::reasons::DRIFTED)).collect();
    lost.sort_by(|a, b| a.node.name.cmp(&b.node.name));
    let wanted = lost
        .into_iter()
        .filter(|h| !h.node.boot_id.is_empty())
        .filter(|h| by_name.get(h.node.name.as_str()).is_none_or(|(n, r)| state_of(n, r.as_deref()).is_none()));
    for (i, h) in wanted.take(room).enumerate() {
        let n = h.node;
        out.asks.push(RepairAsk {
            node: n.name.clone(),
            body: json!({ "metadata": { "annotations": {
                names::ANN_HNS_REPAIR: n.boot_id,
                names::ANN_HNS_REPAIR_ASKED_AT: now.to_string(),
            } } }),
            note: format!(
                "{}: HNS {} in this boot; asked its agent to restart kube-proxy (once per boot; {} of hns.repair.maxPerHour {} this hour)",
                n.name,
                h.reason,
                recent + i + 1,
                spec.max_per_hour
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::report::{HnsRepairReport, WindowsNodeReportStatus};
    use crate::decision::rollout::HnsReadiness;
    use k8s_openapi::api::core::v1::Node;

    const NOW: &str = "2026-12-05T12:00:00Z";

    fn now() -> Timestamp {
        NOW.parse().unwrap()
    }

    /// A member in boot `b-<name>` with winpool's annotations.
    fn member(name: &str, annotations: serde_json::Value) -> Arc<NodeRecord> {
        let n: Node = serde_json::from_value(json!({
            "metadata": { "name": name, "annotations": annotations },
            "status": { "nodeInfo": { "bootID": format!("b-{name}"), "machineID": "", "systemUUID": "", "kernelVersion": "",
                "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "", "kubeProxyVersion": "",
                "operatingSystem": "windows", "architecture": "amd64" } }
        }))
        .unwrap();
        Arc::new(NodeRecord::from(&n))
    }

    fn answered(boot: &str, result: HnsRepairResult) -> Option<Arc<WindowsNodeReport>> {
        let spec = WindowsNodeReportStatus {
            hns_repair: Some(HnsRepairReport {
                boot_id: boot.into(),
                at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()),
                service: Some("kube-proxy".into()),
                result,
                message: Some("no kube-proxy service".into()),
            }),
            ..Default::default()
        };
        Some(Arc::new(WindowsNodeReport::reported("x", spec)))
    }

    fn judged<'a>(n: &'a NodeRecord, reason: &'static str) -> HnsNode<'a> {
        let readiness = if reason == hns::reasons::CAUGHT_UP { HnsReadiness::Ready } else { HnsReadiness::NotReady };
        HnsNode { node: n, readiness, reason, message: String::new(), counts_seen_at: None }
    }

    fn asked(r: &Repairs) -> Vec<(&str, &str)> {
        r.asks.iter().map(|a| (a.node.as_str(), a.body["metadata"]["annotations"][names::ANN_HNS_REPAIR].as_str().unwrap())).collect()
    }

    /// Collapsed and Drifted members are asked, in name order, once per boot (an ask for an
    /// earlier boot is none), as far as the asks of the last hour leave room; never when off.
    #[test]
    fn a_member_whose_hns_was_lost_is_asked_once_per_boot_within_the_hourly_budget() {
        let ten_minutes_ago = "2026-12-05T11:50:00Z";
        let members = vec![
            (member("e", json!({ names::ANN_HNS_REPAIR: "b-old", names::ANN_HNS_REPAIR_ASKED_AT: "2026-12-05T09:00:00Z" })), None),
            (member("a", json!({})), None),
            (member("c", json!({})), None),
            (member("d", json!({ names::ANN_HNS_REPAIR: "b-d", names::ANN_HNS_REPAIR_ASKED_AT: ten_minutes_ago })), None),
            (member("b", json!({})), None),
        ];
        let reasons =
            [hns::reasons::COLLAPSED, hns::reasons::COLLAPSED, hns::reasons::CAUGHT_UP, hns::reasons::COLLAPSED, hns::reasons::DRIFTED];
        let hns_nodes: Vec<HnsNode<'_>> = members.iter().zip(reasons).map(|((n, _), r)| judged(n, r)).collect();
        let spec = |max_per_hour| HnsRepairSpec { enabled: true, max_per_hour };

        let r = repairs(&spec(3), &members, &hns_nodes, now());
        assert_eq!(asked(&r), [("a", "b-a"), ("b", "b-b")], "d asked 10 minutes ago counts; e's ask 3 hours ago does not");
        assert_eq!(r.asks[0].body["metadata"]["annotations"][names::ANN_HNS_REPAIR_ASKED_AT], NOW);
        assert!(r.asks[1].note.contains("3 of hns.repair.maxPerHour 3"), "{}", r.asks[1].note);
        assert_eq!(asked(&repairs(&spec(4), &members, &hns_nodes, now())), [("a", "b-a"), ("b", "b-b"), ("e", "b-e")]);
        assert_eq!(asked(&repairs(&spec(1), &members, &hns_nodes, now())), [], "the hour's budget is spent");
        assert!(repairs(&HnsRepairSpec::default(), &members, &hns_nodes, now()).asks.is_empty(), "off by default");
    }

    /// The agents' answers for the members' current boots are counted, an ask without one is
    /// Asked, and an answer that did not restart kube-proxy is a standing Warning.
    #[test]
    fn the_agents_answers_in_the_current_boot_are_counted_and_a_failure_announced() {
        let asked_for_boot = |name: &str| json!({ names::ANN_HNS_REPAIR: format!("b-{name}") });
        let members = vec![
            (member("a", asked_for_boot("a")), answered("b-a", HnsRepairResult::Restarted)),
            (member("b", asked_for_boot("b")), answered("b-b", HnsRepairResult::Unsupported)),
            (member("c", asked_for_boot("c")), answered("b-old", HnsRepairResult::Failed)),
            (member("d", json!({})), answered("b-old", HnsRepairResult::Restarted)),
        ];
        let r = repairs(&HnsRepairSpec::default(), &members, &[], now());
        let states: Vec<(&str, usize)> = r.states.iter().map(|(s, n)| (s.as_str(), *n)).collect();
        assert_eq!(states, [("Asked", 1), ("Restarted", 1), ("Unsupported", 1)]);
        let problems: Vec<(&str, &str)> = r.problems.iter().map(|(k, e)| (k.as_str(), e.reason.as_str())).collect();
        assert_eq!(problems, [("hns-repair:b:b-b", "HNSRepairFailed")]);
    }
}
