//! Pools in every state a GitOps tool has to judge, as the operator writes
//! them, for the checks of `tests/gitops` (Flux's kstatus and the Argo CD
//! health check run by gopher-lua). Each fixture is the status
//! [`build_status`] writes for a round in that state; the Go tests hold the
//! expected verdicts, so a change to the conditions that moves a verdict
//! fails there. The files are written, never kept (git-ignored), so the Go
//! tests always judge what the operator writes now: `cargo test --lib
//! status::gitops` writes them, and hack/test.sh runs it before the Go tests.

use std::collections::BTreeSet;
use std::path::PathBuf;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::build_status;
use crate::api::{NodeCounts, WindowsNodePool, WindowsNodePoolSpec, names};
use crate::decision::membership::Membership;
use crate::decision::rollout::preflight::cleared;
use crate::decision::rollout::{FailedInfo, Hold, NodeState, NodeView, Plan, PoolInput, Preflight, PreflightVerdict, decide};

/// Sunday noon: a Saturday window is closed.
pub(super) fn now() -> Timestamp {
    "2026-11-29T12:00:00Z".parse().unwrap()
}

fn spec(extra: &str) -> WindowsNodePoolSpec {
    crate::test_builders::pool("win").selecting("pool", "win").with(extra).spec()
}

fn member(name: &str) -> NodeView {
    NodeView { name: name.into(), ready: true, pool_label: Some("win".into()), ..Default::default() }
}

fn members(n: usize) -> Vec<NodeView> {
    (0..n).map(|i| member(&format!("win-{i}"))).collect()
}

/// The operator's round for these nodes, as it decides it.
fn plan(spec: &WindowsNodePoolSpec, nodes: &[NodeView], paused_by_annotation: bool) -> Plan {
    let existing = BTreeSet::new();
    let input = PoolInput { paused_by_annotation, ..PoolInput::of_spec("win", spec, &existing) };
    decide(&input, &cleared(spec, nodes), now())
}

/// A round whose outcome needs nodes in states a unit of views cannot
/// reach in one decision (updated, failed): the decision for pending nodes
/// with the counts, failures and hold of that outcome.
pub(super) fn outcome(spec: &WindowsNodePoolSpec, counts: NodeCounts, failed: usize, hold: Option<Hold>) -> Plan {
    let mut p = plan(spec, &members(counts.total as usize), false);
    p.by_state = [(NodeState::Draining, counts.updating as usize)].into();
    p.counts = counts;
    p.failed = (0..failed)
        .map(|i| FailedInfo {
            node: format!("win-{i}"),
            reason: "ApplyFailed".into(),
            message: "the agent's install exited with 0x80070643 (C:\\Windows\\Logs\\CBS\\CBS.log)".into(),
            since: Some(now()),
        })
        .collect();
    p.hold = hold;
    p
}

pub(super) fn counts(total: i32, updated: i32, updating: i32, pending: i32, failed: i32) -> NodeCounts {
    NodeCounts { total, updated, updating, pending, failed }
}

/// What a GitOps tool reads of the pool: its metadata (the generation) and
/// the status for `plan`. Neither kstatus nor the Argo CD check reads the
/// spec, so the fixtures carry none.
fn pool(name: &str, spec: WindowsNodePoolSpec, plan: Option<&Plan>) -> Value {
    let status = plan.map(|p| build_status(&spec, p, &Membership::default(), None, None, Some(3), now()));
    let mut pool = WindowsNodePool::new(name, spec);
    pool.metadata.generation = Some(3);
    pool.status = status;
    let mut read = serde_json::to_value(&pool).unwrap();
    read.as_object_mut().expect("an object").remove("spec");
    read
}

pub(super) fn fixtures() -> Vec<(&'static str, Value)> {
    let plain = spec("rollout: {maxUnavailable: 1, maxFailedNodes: 2}");
    let saturdays = spec("rollout: {maintenanceWindows: [{days: [Sat], start: '02:00', end: '06:00'}]}");
    let paused = spec("rollout: {paused: true}");
    let bad_window = spec("rollout: {maintenanceWindows: [{start: '02:00', end: '06:00', timeZone: Nowhere/Land}]}");
    let rev = crate::decision::revision::revision_of(&plain);
    let refusing = |name: &str| NodeView {
        preflight: Some(Preflight { revision: rev.clone(), verdict: PreflightVerdict::Blocked("C: has 3.0 GiB free".into()) }),
        ..member(name)
    };
    let gate_closed = Some(Hold::HealthGateClosed {
        gate: "no-critical-alerts".into(),
        seen: crate::decision::gates::Seen::Alerts { total: 1, names: vec!["KubeNodeNotReady".into()] },
    });
    let at_limit = Some(Hold::FailureLimit { failed: 2, limit: 2 });
    let hns_behind = Some(Hold::HnsBacklog(crate::decision::rollout::HnsWait {
        backlog: std::time::Duration::from_secs(95),
        budget: std::time::Duration::from_secs(30),
    }));

    let mut by_annotation = pool("paused-by-annotation", plain.clone(), Some(&plan(&plain, &members(2), true)));
    by_annotation["metadata"]["annotations"] = json!({names::ANN_PAUSED: "true"});
    let mut unobserved = pool("generation-not-observed", plain.clone(), Some(&outcome(&plain, counts(3, 3, 0, 0, 0), 0, None)));
    unobserved["metadata"]["generation"] = json!(4);
    let mut deleting = pool("deleting", plain.clone(), Some(&outcome(&plain, counts(3, 3, 0, 0, 0), 0, None)));
    deleting["metadata"]["deletionTimestamp"] = json!("2026-11-29T12:00:00Z");
    deleting["metadata"]["finalizers"] = json!([crate::api::names::FINALIZER]);

    vec![
        ("complete", pool("complete", plain.clone(), Some(&outcome(&plain, counts(3, 3, 0, 0, 0), 0, None)))),
        ("updating", pool("updating", plain.clone(), Some(&plan(&plain, &members(3), false)))),
        ("outside-window", pool("outside-window", saturdays.clone(), Some(&plan(&saturdays, &members(3), false)))),
        ("paused", pool("paused", paused.clone(), Some(&plan(&paused, &members(2), false)))),
        ("paused-by-annotation", by_annotation),
        ("failure-limit", pool("failure-limit", plain.clone(), Some(&outcome(&plain, counts(4, 1, 0, 1, 2), 2, at_limit)))),
        ("failed-within-budget", pool("failed-within-budget", plain.clone(), Some(&outcome(&plain, counts(4, 1, 1, 1, 1), 1, None)))),
        ("finished-with-failures", pool("finished-with-failures", plain.clone(), Some(&outcome(&plain, counts(3, 2, 0, 0, 1), 1, None)))),
        ("health-gate-closed", pool("health-gate-closed", plain.clone(), Some(&outcome(&plain, counts(3, 0, 0, 3, 0), 0, gate_closed)))),
        ("waiting-for-hns", pool("waiting-for-hns", plain.clone(), Some(&outcome(&plain, counts(3, 0, 0, 3, 0), 0, hns_behind)))),
        (
            "preflight-blocked",
            pool("preflight-blocked", plain.clone(), Some(&plan(&plain, &[refusing("win-0"), refusing("win-1")], false))),
        ),
        ("invalid-window", pool("invalid-window", bad_window.clone(), Some(&plan(&bad_window, &members(2), false)))),
        ("no-nodes", pool("no-nodes", plain.clone(), Some(&plan(&plain, &[], false)))),
        ("generation-not-observed", unobserved),
        ("no-status", pool("no-status", plain.clone(), None)),
        ("deleting", deleting),
    ]
}

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/gitops/testdata/pools")
}

/// Writes every fixture and removes any other, so a state dropped here is
/// not judged from a file left over.
#[test]
fn writes_the_gitops_fixtures() {
    let dir = fixture_dir();
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    for old in std::fs::read_dir(&dir).unwrap().filter_map(|e| Some(e.ok()?.path())).filter(|p| p.extension().is_some_and(|x| x == "json"))
    {
        std::fs::remove_file(&old).unwrap_or_else(|e| panic!("removing {}: {e}", old.display()));
    }
    for (name, pool) in fixtures() {
        let file = dir.join(format!("{name}.json"));
        std::fs::write(&file, serde_json::to_string_pretty(&pool).unwrap() + "\n")
            .unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), fixtures().len(), "one file per fixture in {}", dir.display());
}

/// The states the fixtures stand for are the ones their names say: the
/// conditions a GitOps tool reads, as build_status decides them.
#[test]
fn each_fixture_is_in_the_state_it_names() {
    let all: std::collections::BTreeMap<&str, Value> = fixtures().into_iter().collect();
    let condition = |pool: &str, t: &str| {
        let c = all[pool]["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == t).cloned().unwrap();
        (c["status"].as_str().unwrap().to_string(), c["reason"].as_str().unwrap().to_string())
    };
    let is = |pool: &str, t: &str, status: &str, reason: &str| {
        assert_eq!(condition(pool, t), (status.to_string(), reason.to_string()), "{pool}: {t}");
    };
    is("complete", "Ready", "True", "RolloutComplete");
    is("updating", "Reconciling", "True", "NodesUpdating");
    is("outside-window", "Ready", "True", "WaitingForMaintenanceWindow");
    is("outside-window", "Reconciling", "False", "OutsideMaintenanceWindow");
    is("paused", "Paused", "True", "PausedBySpec");
    is("paused-by-annotation", "Paused", "True", "PausedByAnnotation");
    is("failure-limit", "Stalled", "True", "FailureLimitReached");
    is("failed-within-budget", "Reconciling", "True", "NodesUpdating");
    is("failed-within-budget", "Degraded", "True", "NodesFailed");
    is("finished-with-failures", "Stalled", "True", "NodesFailed");
    is("health-gate-closed", "Reconciling", "True", "HealthGateClosed");
    is("preflight-blocked", "Stalled", "True", "PreflightBlocked");
    is("invalid-window", "Stalled", "True", "InvalidMaintenanceWindow");
    is("no-nodes", "Ready", "False", "NoNodes");
    assert!(all["no-status"].get("status").is_none_or(Value::is_null));
}
