//! The bad-update breaker (pure). A cumulative update that breaks on an
//! image fails the same way on every node it reaches; a pool's
//! `maxFailedNodes` stops that pool alone, while every other pool targeting
//! the same update goes on failing nodes. When one update (a patch level)
//! fails with one result code on `threshold` nodes, counted across pools,
//! every pool targeting it pauses itself: `winpool.dev/paused:
//! bad-update`, the pause `kubectl winpool resume` lifts, and
//! `winpool.dev/bad-update`, which records the trips that paused it, so that
//! a person's resume is not undone by the same failures; a new trip pauses
//! it again. The breaker's pause is told from a person's ("true") by its
//! value: an undo goes on under the breaker's, not under a person's, and
//! while a person's stands the breaker leaves the pool to them.
//!
//! What counts is a node the operator started (Applying, Verifying) or
//! failed, whose agent reports a Failed result with a code for that same
//! start: counted as soon as the agent reports, not a round later when the
//! operator has marked the node, so a pool does not start a replacement for
//! a failure the breaker has not counted yet. A compromised agent can report
//! for its own node only, so it alone never trips a threshold above one.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;

use crate::api::names;
use crate::api::node_record::NodeRecord;
use crate::api::report::{ApplyStatus, WindowsNodeReport};
use crate::builders::configmap::CONFIG_KEY;
use crate::decision::rollout::{FailureReason, NodeState};
use crate::decision::versions::WindowsBuild;

/// The default of `--bad-update-threshold`: nodes failing one update with
/// one code before every pool targeting it pauses. Three, not one or two: a
/// node's own trouble (a full disk, a corrupt component store) fails it with
/// a code of its own, and two nodes sharing one by chance pause nobody.
pub const DEFAULT_THRESHOLD: u32 = 3;

/// The code an update taken off a node counts with (`rollout.undo`): its
/// install worked, the node's health after it did not. Nodes undone for one
/// update trip the breaker like nodes failing it with one HRESULT.
pub const UNDONE: &str = "UpdateUndone";

/// A node's failed install, as the breaker counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedInstall {
    pub pool: String,
    pub node: String,
    /// The patch level of the revision the node failed (the update).
    pub update: String,
    /// The HRESULT its agent reports ("0x800F0922").
    pub code: String,
}

/// An update that failed with one code on enough nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadUpdate {
    pub update: String,
    pub code: String,
    /// `pool/node`, sorted.
    pub nodes: Vec<String>,
}

impl BadUpdate {
    /// How the trip is recorded on a pool it paused.
    pub fn key(&self) -> String {
        format!("{}/{}", self.update, self.code)
    }

    /// Said on the pool (its Paused condition, the Event) for a person.
    pub fn message(&self) -> String {
        format!(
            "the update to {} failed with {} on {} nodes across pools ({}): every pool targeting it is paused. \
             Read the servicing logs of one of them (C:\\Windows\\Logs\\CBS\\CBS.log, Get-WindowsUpdateLog; \
             kubectl describe wnr <node> -n <agents namespace>), fix or replace the update, \
             then kubectl winpool retry the nodes and kubectl winpool resume each pool",
            self.update,
            self.code,
            self.nodes.len(),
            self.nodes.join(", ")
        )
    }
}

/// The failed install `node` shows, if it counts: the operator started or
/// failed the node, and its agent's report is a Failed result of that same
/// start and revision naming a result code. The update is read from the revision's
/// ConfigMap (`configmap`, the operator's own record of what it asked for).
pub fn failed_install(node: &NodeRecord, report: Option<&WindowsNodeReport>, configmap: Option<&ConfigMap>) -> Option<FailedInstall> {
    let state = NodeState::parse(node.annotation(names::ANN_STATE)?)?;
    if !matches!(state, NodeState::Applying | NodeState::Verifying | NodeState::Failed) {
        return None;
    }
    let (pool, revision) = (node.label(names::LABEL_POOL)?, node.label(names::LABEL_REVISION)?);
    let undone = |code: &str| FailedInstall { pool: pool.into(), node: node.name.clone(), update: String::new(), code: code.into() };
    let apply = report?.observations().apply.as_ref()?;
    let same_start = apply.started_at.as_deref() == node.annotation(names::ANN_STARTED_AT);
    // An undo counts once its agent says the update is off for that start, as
    // a failure does; a Failed state and reason on the Node alone are no
    // outcome: whoever may patch Nodes writes them.
    let undoing = node.annotation(names::ANN_UNDO).is_some()
        || (state == NodeState::Failed && node.annotation(names::ANN_FAILURE_REASON) == Some(FailureReason::UpdateUndone.as_str()));
    if undoing && apply.status == ApplyStatus::Succeeded && apply.revision == revision && same_start {
        let update = patch_level(configmap?)?;
        // And its kubelet runs a build below the update: a start copied from
        // a real install (which succeeded too) is no undo.
        let below =
            matches!((node.kernel_version.parse::<WindowsBuild>(), update.parse::<WindowsBuild>()), (Ok(k), Ok(u)) if !k.satisfies(&u));
        return below.then(|| FailedInstall { update, ..undone(UNDONE) });
    }
    let code = apply.result_code.as_deref()?;
    if apply.status != ApplyStatus::Failed || apply.revision != revision || !same_start || !is_result_code(code) {
        return None;
    }
    Some(FailedInstall { pool: pool.into(), node: node.name.clone(), update: patch_level(configmap?)?, code: code.into() })
}

/// "0x" and eight upper-case hex digits, as the agent writes an HRESULT
/// (the report's schema holds it to that too).
fn is_result_code(code: &str) -> bool {
    code.len() == 10 && code.starts_with("0x") && code[2..].bytes().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b))
}

fn patch_level(configmap: &ConfigMap) -> Option<String> {
    let config: serde_json::Value = serde_json::from_str(configmap.data.as_ref()?.get(CONFIG_KEY)?).ok()?;
    Some(config.get("patchLevel")?.as_str()?.to_string())
}

/// The updates that failed with one code on at least `threshold` nodes
/// (0: the breaker is off), in order of update and code.
pub fn tripped(failures: &[FailedInstall], threshold: u32) -> Vec<BadUpdate> {
    if threshold == 0 {
        return Vec::new();
    }
    let mut by_update: BTreeMap<(&str, &str), Vec<String>> = BTreeMap::new();
    for f in failures {
        by_update.entry((&f.update, &f.code)).or_default().push(format!("{}/{}", f.pool, f.node));
    }
    by_update
        .into_iter()
        .filter(|(_, nodes)| nodes.len() >= threshold as usize)
        .map(|((update, code), mut nodes)| {
            nodes.sort();
            BadUpdate { update: update.into(), code: code.into(), nodes }
        })
        .collect()
}

/// What the breaker does to one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Breaker {
    /// Nothing trips for its target, or a person resumed it since.
    Clear,
    /// A trip this pool has not been paused for: pause it, and record
    /// `record` (every trip of its target) in `winpool.dev/bad-update`.
    Pause { trip: BadUpdate, record: String },
    /// Still paused for a trip it recorded.
    Paused(BadUpdate),
}

impl Breaker {
    /// The trip that holds the pool this round, if any.
    pub fn holding(&self) -> Option<&BadUpdate> {
        match self {
            Breaker::Clear => None,
            Breaker::Pause { trip, .. } | Breaker::Paused(trip) => Some(trip),
        }
    }
}

/// The breaker for a pool targeting `target`, which records `recorded`
/// (its `winpool.dev/bad-update`, comma-separated keys) and carries `pause`
/// (its `winpool.dev/paused`).
pub fn for_pool(trips: &[BadUpdate], target: &str, recorded: Option<&str>, pause: Option<&str>) -> Breaker {
    if pause == Some("true") {
        return Breaker::Clear;
    }
    let ours: Vec<&BadUpdate> = trips.iter().filter(|t| t.update == target).collect();
    let recorded: Vec<&str> = recorded.unwrap_or_default().split(',').map(str::trim).collect();
    if let Some(new) = ours.iter().find(|t| !recorded.contains(&t.key().as_str())) {
        let record = ours.iter().map(|t| t.key()).collect::<Vec<_>>().join(",");
        return Breaker::Pause { trip: (*new).clone(), record };
    }
    match ours.first() {
        Some(trip) if pause == Some(names::PAUSED_BY_BREAKER) => Breaker::Paused((*trip).clone()),
        _ => Breaker::Clear,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::report::{ApplyReport, WindowsNodeReportStatus};

    fn failure(pool: &str, node: &str, update: &str, code: &str) -> FailedInstall {
        FailedInstall { pool: pool.into(), node: node.into(), update: update.into(), code: code.into() }
    }

    const LCU: &str = "10.0.20348.2762";
    const CODE: &str = "0x800F0922";

    #[test]
    fn one_update_failing_with_one_code_on_enough_nodes_across_pools_trips() {
        let failures = vec![
            failure("a", "a-1", LCU, CODE),
            failure("b", "b-1", LCU, CODE),
            failure("a", "a-2", LCU, "0x80070070"),
            failure("b", "b-2", LCU, CODE),
            failure("c", "c-1", "10.0.17763.6414", CODE),
        ];
        assert_eq!(
            tripped(&failures, 3),
            vec![BadUpdate { update: LCU.into(), code: CODE.into(), nodes: vec!["a/a-1".into(), "b/b-1".into(), "b/b-2".into()] }],
            "three nodes of two pools; another code and another update do not add to it"
        );
        assert!(tripped(&failures, 4).is_empty());
        assert!(tripped(&failures, 0).is_empty(), "0 turns it off");
    }

    #[test]
    fn a_pool_pauses_once_per_trip_and_a_resume_after_it_stands() {
        let trip = BadUpdate { update: LCU.into(), code: CODE.into(), nodes: vec!["a/a-1".into()] };
        let trips = vec![trip.clone()];
        let key = trip.key();
        let ours = Some(names::PAUSED_BY_BREAKER);
        assert_eq!(for_pool(&trips, LCU, None, None), Breaker::Pause { trip: trip.clone(), record: key.clone() });
        assert_eq!(for_pool(&trips, LCU, Some(&key), ours), Breaker::Paused(trip.clone()), "held, saying why");
        assert_eq!(for_pool(&trips, LCU, Some(&key), None), Breaker::Clear, "resumed by a person: stays resumed");
        assert_eq!(for_pool(&trips, "10.0.20348.2849", None, None), Breaker::Clear, "another target");
        // A person's pause is theirs: no undo under it, no breaker writing over it.
        assert_eq!(for_pool(&trips, LCU, Some(&key), Some("true")), Breaker::Clear, "paused again by a person");
        assert_eq!(for_pool(&trips, LCU, None, Some("true")), Breaker::Clear, "a trip while a person's pause stands");
        let second = BadUpdate { code: "0x80070070".into(), ..trip.clone() };
        let both = vec![trip.clone(), second.clone()];
        assert_eq!(
            for_pool(&both, LCU, Some(&key), None),
            Breaker::Pause { trip: second, record: format!("{key},{LCU}/0x80070070") },
            "a new code on the same update pauses again"
        );
    }

    fn node(state: &str, started: &str) -> NodeRecord {
        let n: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({"metadata": {"name": "a-1",
            "labels": {"winpool.dev/pool": "a", "winpool.dev/revision": "r1"},
            "annotations": {"winpool.dev/state": state, "winpool.dev/started-at": started}}}))
        .unwrap();
        NodeRecord::from(&n)
    }

    fn report(status: ApplyStatus, code: Option<&str>, started: &str) -> WindowsNodeReport {
        let apply = ApplyReport {
            revision: "r1".into(),
            status,
            message: None,
            started_at: Some(started.into()),
            heartbeat: None,
            result_code: code.map(Into::into),
            no_reboot: false,
            installed: vec![],
            host_build: None,
        };
        WindowsNodeReport::reported("a-1", WindowsNodeReportStatus { apply: Some(apply), ..Default::default() })
    }

    /// Revision r1's ConfigMap, asking for LCU.
    fn revision_configmap() -> ConfigMap {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "winpool-a-r1"},
            "data": {"config.json": format!("{{\"revision\": \"r1\", \"patchLevel\": \"{LCU}\"}}")}}))
        .unwrap()
    }

    #[test]
    fn only_a_node_the_operator_started_whose_agent_names_a_code_for_that_start_counts() {
        let cm = revision_configmap();
        let t = "2026-12-04T10:00:00Z";
        let counted = failed_install(&node("Failed", t), Some(&report(ApplyStatus::Failed, Some(CODE), t)), Some(&cm));
        assert_eq!(counted, Some(failure("a", "a-1", LCU, CODE)));
        let reported = failed_install(&node("Applying", t), Some(&report(ApplyStatus::Failed, Some(CODE), t)), Some(&cm));
        assert_eq!(reported, counted, "counted once its agent reports, before the operator marks it");
        for (why, n, r) in [
            ("the operator has not started it", node("Pending", t), report(ApplyStatus::Failed, Some(CODE), t)),
            ("no code", node("Failed", t), report(ApplyStatus::Failed, None, t)),
            ("an earlier start's result", node("Failed", "2026-12-04T11:00:00Z"), report(ApplyStatus::Failed, Some(CODE), t)),
            ("not the agent's failure", node("Failed", t), report(ApplyStatus::Applying, Some(CODE), t)),
            ("not an HRESULT", node("Failed", t), report(ApplyStatus::Failed, Some("0x800f0922; rm"), t)),
        ] {
            assert_eq!(failed_install(&n, Some(&r), Some(&cm)), None, "{why}");
        }
        assert_eq!(failed_install(&node("Failed", t), Some(&report(ApplyStatus::Failed, Some(CODE), t)), None), None, "no ConfigMap");
    }

    /// A node whose update was taken off (rollout.undo) counts for that
    /// update with the code UpdateUndone: once its agent says so for the
    /// undo's start, before and after the operator failed it; never on the
    /// Node's word alone.
    #[test]
    fn a_node_whose_update_was_taken_off_counts_for_that_update() {
        let cm = revision_configmap();
        let t = "2026-12-04T10:00:00Z";
        let with = |state: &str, key: &str, value: &str| {
            // Its kubelet runs the build below the update, which is off.
            let n: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({"metadata": {"name": "a-1",
                "labels": {"winpool.dev/pool": "a", "winpool.dev/revision": "r1"},
                "annotations": {"winpool.dev/state": state, "winpool.dev/started-at": t, key: value}},
                "status": {"nodeInfo": {"kernelVersion": "10.0.20348.2700", "architecture": "", "bootID": "", "containerRuntimeVersion": "",
                    "kubeProxyVersion": "", "kubeletVersion": "", "machineID": "", "operatingSystem": "windows", "osImage": "", "systemUUID": ""}}}))
            .unwrap();
            NodeRecord::from(&n)
        };
        let undoing = with("Applying", names::ANN_UNDO, "win-pods");
        let said = failed_install(&undoing, Some(&report(ApplyStatus::Succeeded, None, t)), Some(&cm));
        assert_eq!(said, Some(failure("a", "a-1", LCU, UNDONE)));
        let failed = with("Failed", names::ANN_FAILURE_REASON, "UpdateUndone");
        assert_eq!(failed_install(&failed, Some(&report(ApplyStatus::Succeeded, None, t)), Some(&cm)), said, "and once failed");
        assert_eq!(failed_install(&failed, None, Some(&cm)), None, "the Node's annotations alone: anyone with nodes/patch writes them");
        assert_eq!(
            failed_install(&node("Applying", t), Some(&report(ApplyStatus::Succeeded, None, t)), Some(&cm)),
            None,
            "an install that worked"
        );
        let earlier = failed_install(&undoing, Some(&report(ApplyStatus::Succeeded, None, "2026-12-04T09:00:00Z")), Some(&cm));
        assert_eq!(earlier, None, "the update's own success, before the undo's start");
        let mut on_it = failed.clone();
        on_it.kernel_version = LCU.into();
        let copied = failed_install(&on_it, Some(&report(ApplyStatus::Succeeded, None, t)), Some(&cm));
        assert_eq!(copied, None, "an install's start and success, the node still on the update: no undo");
    }
}
