//! Hostile input (issue 10): what people and broken agents put into the cluster.
//! Each case must be reported (condition, Event or log) and repaired or ignored;
//! never a panic, never a reconcile loop that is stuck (the pool converges or
//! says clearly why not). Runs on the shared local control plane like
//! tests/rollout.rs; each test has its own nodes, namespaces and operator.

use crate::support;
use crate::support::invariants;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{TEST_LABEL, TestSpace, install_crd, pool_manifest, wait_for, wait_nodes_ready};
use winpool::api::report::{ApplyStatus, WindowsNodeReport};
use winpool::api::{WindowsNodePool, names};
use winpool::decision::agent_report::Reported;

const WAIT: Duration = Duration::from_secs(180);
const PATCH: &str = "10.0.20348.2762";

/// `support::apply_pool`, but the API's answer is the test's to judge.
async fn try_apply_pool(t: &TestSpace, body: &serde_json::Value) -> kube::Result<WindowsNodePool> {
    let api: Api<WindowsNodePool> = Api::all(t.client.clone());
    let name = body["metadata"]["name"].as_str().unwrap();
    api.patch(name, &PatchParams::apply("winpool-tests").force(), &Patch::Apply(body)).await
}

fn cond<'a>(p: &'a WindowsNodePool, type_: &str) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    p.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)
}

fn is_true(p: &WindowsNodePool, type_: &str) -> bool {
    cond(p, type_).is_some_and(|c| c.status == "True")
}

/// Wait until the pool reports `updated` of `total` nodes at its current spec and Ready.
async fn wait_converged(t: &TestSpace, pool: &str, total: i32) -> WindowsNodePool {
    support::wait_pool_done(t, pool, total, WAIT).await
}

/// The invariant checker's end-of-rollout checks on the pool as it is now:
/// status counts agree with the nodes, no stranded winpool cordon, no revision label without its ConfigMap.
async fn final_invariants(t: &TestSpace, pool: &str) {
    let p = Api::<WindowsNodePool>::all(t.client.clone()).get(pool).await.expect("pool");
    let cms = Api::<ConfigMap>::namespaced(t.client.clone(), &t.agent_namespace()).list(&ListParams::default()).await.expect("cms").items;
    let nodes: Vec<Node> = t.nodes().await.into_iter().filter(|n| n.labels().get(names::LABEL_POOL) == Some(&pool.to_string())).collect();
    let reports =
        Api::<WindowsNodeReport>::namespaced(t.client.clone(), &t.agent_namespace()).list(&ListParams::default()).await.expect("reports");
    let mut c = invariants::Checker::new();
    c.finish(&invariants::Sample::from_cluster(Duration::ZERO, &p, &nodes, &cms, &reports.items));
    c.assert_clean();
}

/// Never a panic; and say how often reconciles failed (a stuck loop fails every 5s).
fn operator_log_checked(t: &TestSpace) -> String {
    let log = std::fs::read_to_string(t.log_path("operator")).unwrap_or_default();
    assert!(!log.contains("panicked"), "the operator panicked:\n{log}");
    let failures = log.lines().filter(|l| l.contains("reconcile failed")).count();
    eprintln!("[{}] operator log: {} lines, {failures} failed reconciles", t.id, log.lines().count());
    log
}

async fn pool_events(t: &TestSpace, pool: &str) -> Vec<(String, String)> {
    let events: Api<Event> = Api::all(t.client.clone());
    let list = events.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
    list.into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pool))
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

/// Delete a pool while its operator still runs, so its finalizer releases the nodes; a pool
/// the operator cannot finish with in time loses the finalizer, so nothing is left behind.
async fn delete_pool(t: &TestSpace, name: &str) {
    let api: Api<WindowsNodePool> = Api::all(t.client.clone());
    api.delete(name, &DeleteParams::default()).await.unwrap_or_else(|e| panic!("deleting pool {name}: {e}"));
    // The operator's finalizer releases the nodes before the pool goes.
    wait_for(&format!("pool {name} gone"), WAIT, || async { api.get_opt(name).await.ok()?.is_none().then_some(()) }).await;
    for n in t.nodes().await {
        let (node, labels, ann) = (n.name_any(), n.labels(), n.annotations());
        for k in [names::LABEL_POOL, names::LABEL_REVISION, names::LABEL_STATE, names::LABEL_CSI_PROXY_HOST] {
            assert!(!labels.contains_key(k), "{node} released without its {k} label: {labels:?}");
        }
        for k in [names::ANN_STATE, names::ANN_STARTED_AT, names::ANN_TARGET_REVISION, names::ANN_CORDONED_BY_WINPOOL] {
            assert!(!ann.contains_key(k), "{node} released without {k}: {ann:?}");
        }
    }
}

/// A node outside the sim's name prefix: no simulated agent reports for it, the test does.
async fn manual_node(t: &TestSpace, name: &str, labels: BTreeMap<String, String>) {
    let mut node = support::windows_node(t, name, "10.0.20348.2700", "1.7.20");
    let l = node.metadata.labels.get_or_insert_default();
    l.remove(support::TEST_LABEL);
    l.extend(labels);
    Api::<Node>::all(t.client.clone()).create(&PostParams::default(), &node).await.expect("manual node");
}

async fn annotate(t: &TestSpace, node: &str, anns: serde_json::Value) {
    Api::<Node>::all(t.client.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": anns}})))
        .await
        .unwrap_or_else(|e| panic!("annotating {node}: {e}"));
}

async fn node_info(t: &TestSpace, node: &str, info: serde_json::Value) {
    Api::<Node>::all(t.client.clone())
        .patch_status(node, &PatchParams::default(), &Patch::Merge(json!({"status": {"nodeInfo": info}})))
        .await
        .unwrap_or_else(|e| panic!("patching {node}'s nodeInfo: {e}"));
}

fn ann(n: &Node, k: &str) -> Option<String> {
    n.annotations().get(k).cloned()
}

fn cordoned(n: &Node) -> bool {
    n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false)
}

#[tokio::test]
async fn a_huge_selector_selects_exactly_its_nodes_and_an_unparseable_one_is_refused() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("hostile-selector").await;
    const N: usize = 60;
    let key = |i: usize| format!("sel.hostile.winpool.dev/k{i}");
    let extra: Vec<String> = (0..N).map(|i| format!("{}=v{i}", key(i))).collect();
    let labels_arg = format!("--labels={}", extra.join(","));
    t.start_sim(2, &["--apply-time=1s", "--reboot-time=0s", &labels_arg]);
    // A third node that carries every label but one value: the selector must not take it.
    let outsider = format!("{}outsider", t.node_prefix());
    let mut labels = t.node_labels();
    labels.extend((0..N).map(|i| (key(i), format!("v{i}"))));
    labels.insert(key(N / 2), "other".into());
    manual_node(&t, &outsider, labels).await;
    wait_nodes_ready(&t, 3).await;

    let pool = format!("{}-pool", t.id);
    let mut body = pool_manifest(&t, &pool, PATCH, json!({}));
    let sel = &mut body["spec"]["nodeSelector"];
    for i in 0..N {
        sel["matchLabels"][key(i)] = json!(format!("v{i}"));
    }
    let mut exprs = Vec::new();
    for i in 0..N {
        let mut values: Vec<String> = (0..10).map(|j| format!("decoy-{j}")).collect();
        values.push(format!("v{i}"));
        exprs.push(json!({"key": key(i), "operator": "In", "values": values}));
        exprs.push(json!({"key": key(i), "operator": "NotIn", "values": [format!("nope-{i}")]}));
        exprs.push(json!({"key": key(i), "operator": "Exists"}));
        exprs.push(json!({"key": format!("sel.hostile.winpool.dev/absent{i}"), "operator": "DoesNotExist"}));
    }
    sel["matchExpressions"] = json!(exprs);
    eprintln!("[{}] selector: {} matchLabels, {} matchExpressions, {} bytes", t.id, N + 1, exprs.len(), body.to_string().len());
    try_apply_pool(&t, &body).await.expect("the API takes a huge selector");

    // A selector the API takes but that cannot be parsed ("Near" is no operator).
    let bad = format!("{}-bad", t.id);
    let mut bad_body = pool_manifest(&t, &bad, PATCH, json!({}));
    bad_body["spec"]["nodeSelector"] = json!({"matchExpressions": [{"key": TEST_LABEL, "operator": "Near", "values": [t.id]}]});
    let bad_applied = try_apply_pool(&t, &bad_body).await;
    t.start_operator(&[]);

    let p = wait_converged(&t, &pool, 2).await;
    assert!(!is_true(&p, "NodeConflicts"), "the unparseable pool claims nothing, so no conflict: {:?}", cond(&p, "NodeConflicts"));
    let o = Api::<Node>::all(t.client.clone()).get(&outsider).await.unwrap();
    assert!(!o.labels().contains_key(names::LABEL_POOL) && ann(&o, names::ANN_STATE).is_none(), "the outsider was not selected");
    assert!(!cordoned(&o));
    final_invariants(&t, &pool).await;

    // The API refuses it with a message that says why, instead of storing a pool that selects nothing.
    let e = bad_applied.expect_err("an unknown selector operator is refused");
    eprintln!("[{}] the API refused the unparseable selector: {e}", t.id);
    assert!(e.to_string().contains("operator must be In, NotIn, Exists or DoesNotExist"), "{e}");
    operator_log_checked(&t);
    delete_pool(&t, &pool).await;
    t.cleanup().await;
}

#[tokio::test]
async fn a_pool_name_at_the_63_character_limit_rolls_and_a_longer_one_is_refused() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("hostile-name").await;
    t.start_sim(2, &["--apply-time=1s", "--reboot-time=0s"]);
    wait_nodes_ready(&t, 2).await;

    let mut pool = format!("{}-", t.id);
    while pool.len() < 63 {
        pool.push('x');
    }
    let too_long = format!("{pool}x");
    let err = try_apply_pool(&t, &pool_manifest(&t, &too_long, PATCH, json!({}))).await.expect_err("a 64-character pool name is refused");
    assert!(err.to_string().contains("63"), "the refusal says why: {err}");

    try_apply_pool(&t, &pool_manifest(&t, &pool, PATCH, json!({}))).await.expect("a 63-character pool name is fine");
    let metrics_port = t.start_operator(&[]);
    let p = wait_converged(&t, &pool, 2).await;
    let rev = p.status.unwrap().revision.unwrap();
    for n in t.nodes().await {
        assert_eq!(n.labels().get(names::LABEL_POOL), Some(&pool), "the 63-character name is a valid label value");
    }
    let ds = Api::<DaemonSet>::namespaced(t.client.clone(), &t.agent_namespace()).list(&ListParams::default()).await.unwrap().items;
    let mut ds_names: Vec<String> = ds.iter().map(|d| d.name_any()).collect();
    ds_names.sort();
    assert_eq!(ds_names, [format!("winpool-{pool}"), format!("winpool-{pool}-pod-network")], "the agent's and the pod network's");
    assert!(ds.iter().all(|d| d.labels().get(names::LABEL_POOL) == Some(&pool)));
    let cm = Api::<ConfigMap>::namespaced(t.client.clone(), &t.agent_namespace()).get(&format!("winpool-{pool}-{rev}")).await;
    assert!(cm.is_ok(), "the revision ConfigMap of a 63-character pool: {cm:?}");
    final_invariants(&t, &pool).await;
    operator_log_checked(&t);
    // A transient failure (e.g. the finalizer's JSON patch racing the cache on the first round) is
    // retried; what must not happen is a write the name makes invalid, failing every round.
    let (_, metrics) = support::http_get(metrics_port, "/metrics").await.expect("the operator serves /metrics");
    let errors: Vec<&str> = metrics.lines().filter(|l| l.starts_with("winpool_reconcile_errors_total{")).collect();
    let failed: f64 = errors.iter().filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum();
    assert!(!errors.is_empty() && failed <= 2.0, "failed reconciles: {errors:#?}");
    delete_pool(&t, &pool).await;
    t.cleanup().await;
}

#[tokio::test]
async fn garbage_or_missing_kernel_and_runtime_versions_are_repaired_by_the_rollout_or_fail_the_node() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("hostile-nodeinfo").await;
    t.start_sim(4, &["--apply-time=1s", "--reboot-time=0s"]);
    wait_nodes_ready(&t, 4).await;
    let prefix = t.node_prefix();
    let n = |i: usize| format!("{prefix}{i}");
    node_info(&t, &n(0), json!({"kernelVersion": "banana"})).await;
    node_info(&t, &n(1), json!({"kernelVersion": ""})).await;
    node_info(&t, &n(2), json!({"containerRuntimeVersion": "garbage"})).await;
    node_info(&t, &n(3), json!({"containerRuntimeVersion": ""})).await;
    let nodes_api: Api<Node> = Api::all(t.client.clone());
    let info = |node: &Node| node.status.clone().unwrap().node_info.unwrap();
    assert_eq!(info(&nodes_api.get(&n(0)).await.unwrap()).kernel_version, "banana", "kwok keeps what we wrote");

    let pool = format!("{}-pool", t.id);
    // Short budgets, so the second half ends in seconds: its agent's task beats
    // when node 0 is taken back in, so rebootToReady bounds it, not nodeTimeout.
    let rollout = json!({"maxUnavailable": 2, "nodeTimeout": "40s", "timeouts": {"rebootToReady": "40s"}, "maxFailedNodes": 5});
    try_apply_pool(&t, &pool_manifest(&t, &pool, PATCH, rollout)).await.unwrap();
    t.start_operator(&[]);
    // Garbage before the update: the nodes are simply behind; the agent's update repairs what the kubelet reports.
    let p = wait_converged(&t, &pool, 4).await;
    let rev = p.status.unwrap().revision.unwrap();
    for i in 0..4 {
        let node = nodes_api.get(&n(i)).await.unwrap();
        assert_eq!(
            (info(&node).kernel_version.as_str(), info(&node).container_runtime_version.as_str()),
            ("10.0.20348.2762", "containerd://1.7.22")
        );
    }
    final_invariants(&t, &pool).await;

    // Garbage after the update: node 0's kubelet no longer proves the patch level. winpool must
    // not call it Updated; it takes it back in, and since nothing repairs the report, the node
    // fails at its timeout and goes back to service, reported on the pool.
    node_info(&t, &n(0), json!({"kernelVersion": "10.0.abc"})).await;
    let api: Api<WindowsNodePool> = Api::all(t.client.clone());
    let p = wait_for("node 0 to be failed and reported", WAIT, || async {
        let p = api.get(&pool).await.ok()?;
        let failed = p.status.as_ref()?.failed_nodes.iter().any(|f| f.name == n(0));
        (failed && is_true(&p, "Degraded")).then_some(p)
    })
    .await;
    let st = p.status.clone().unwrap();
    let f = st.failed_nodes.iter().find(|f| f.name == n(0)).unwrap();
    eprintln!("[{}] garbage kernelVersion after the update: node failed with {}: {}", t.id, f.reason, f.message);
    assert_eq!(f.reason, "Timeout");
    assert_eq!((st.nodes.updated, st.nodes.failed), (3, 1), "{:?}", st.nodes);
    let node0 = nodes_api.get(&n(0)).await.unwrap();
    assert!(!cordoned(&node0) && ann(&node0, names::ANN_CORDONED_BY_WINPOOL).is_none(), "a failed node goes back to service");
    assert_eq!(node0.labels().get(names::LABEL_REVISION), Some(&rev));
    let degraded = cond(&p, "Degraded").unwrap();
    assert!(degraded.message.contains(&n(0)), "{}", degraded.message);
    final_invariants(&t, &pool).await;
    operator_log_checked(&t);
    delete_pool(&t, &pool).await;
    t.cleanup().await;
}

#[tokio::test]
async fn garbage_agent_reports_are_never_trusted_and_end_in_a_reported_failure() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("hostile-agent").await;
    t.start_sim(3, &["--apply-time=1s", "--reboot-time=0s"]);
    // Two nodes no simulated agent serves (outside the sim's name prefix): the test plays a broken agent.
    let (m0, m1) = (format!("m0-{}", t.id), format!("m1-{}", t.id));
    manual_node(&t, &m0, t.node_labels()).await;
    manual_node(&t, &m1, t.node_labels()).await;
    wait_nodes_ready(&t, 5).await;
    let prefix = t.node_prefix();
    let n = |i: usize| format!("{prefix}{i}");
    // Leftovers of a broken agent (winpool-looking annotations winpool does
    // not read: an agent reports in its WindowsNodeReport) and a hand-edited
    // state, before the pool exists.
    annotate(
        &t,
        &n(0),
        json!({
            "winpool.dev/apply-status": "Exploded",
            "winpool.dev/applied-revision": "garbage\u{1f4a5}",
            "winpool.dev/hns-load-balancers": "lots",
        }),
    )
    .await;
    annotate(&t, &n(1), json!({names::ANN_STATE: "Exploded", names::ANN_STATE_SINCE: "yesterday"})).await;

    let pool = format!("{}-pool", t.id);
    let body = pool_manifest(&t, &pool, PATCH, json!({"maxUnavailable": 5, "nodeTimeout": "30s", "maxFailedNodes": 5}));
    try_apply_pool(&t, &body).await.unwrap();
    t.start_operator(&[]);

    // The broken agent: on m0 it tries to report the right revision with a status that means
    // nothing (the API server refuses it: the report's schema); on m1 "Succeeded" for a revision
    // that does not exist.
    let api: Api<WindowsNodePool> = Api::all(t.client.clone());
    let nodes_api: Api<Node> = Api::all(t.client.clone());
    let mut played = [false, false];
    let mut preflighted = false;
    let deadline = Instant::now() + WAIT;
    let p = loop {
        // Its preflight of the pool's revision passes and its update is on the node (else it is never started).
        if !preflighted && let Some(rev) = api.get(&pool).await.ok().and_then(|p| p.status?.revision) {
            for node in [&m0, &m1] {
                let ready = json!({"preflight": {"revision": rev, "verdict": "Ready"}, "staging": {"revision": rev, "status": "Staged"}});
                t.write_report(node, ready).await.expect("a preflight");
            }
            preflighted = true;
        }
        for (i, node) in [&m0, &m1].into_iter().enumerate() {
            let Ok(nd) = nodes_api.get(node).await else { continue };
            if !played[i] && ann(&nd, names::ANN_STATE).as_deref() == Some("Applying") {
                let started_at = ann(&nd, names::ANN_STARTED_AT);
                let label = nd.labels().get(names::LABEL_REVISION).cloned().unwrap_or_default();
                if i == 0 {
                    let apply = json!({"apply": {"revision": label, "status": "Exploded", "startedAt": started_at}});
                    let r = t.write_report(node, apply).await;
                    assert!(matches!(&r, Err(kube::Error::Api(e)) if e.code == 422), "a status no agent writes is refused: {r:?}");
                } else {
                    let apply = json!({"apply": {"revision": "garbage", "status": "Succeeded", "startedAt": started_at}});
                    t.write_report(node, apply).await.expect("a success for no revision of the pool");
                }
                played[i] = true;
            }
        }
        if let Ok(p) = api.get(&pool).await
            && p.status.as_ref().is_some_and(|st| st.nodes.updated == 3 && st.nodes.failed == 2)
        {
            break p;
        }
        assert!(Instant::now() < deadline, "timed out waiting for 3 nodes Updated and the 2 broken ones failed");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(played.iter().all(|p| *p), "the broken agent reported on both nodes");
    let st = p.status.clone().unwrap();
    for m in [&m0, &m1] {
        let f = st.failed_nodes.iter().find(|f| &f.name == m).unwrap_or_else(|| panic!("{m} listed as failed: {:?}", st.failed_nodes));
        eprintln!("[{}] broken agent on {m}: failed with {}: {}", t.id, f.reason, f.message);
        assert_eq!(f.reason, "Timeout", "garbage is never taken for success or failure");
        let nd = nodes_api.get(m).await.unwrap();
        assert!(!cordoned(&nd), "{m} back in service");
    }
    assert!(is_true(&p, "Degraded"));
    let reports = t.reports().await;
    for i in 0..3 {
        let status = reports.get(&n(i)).and_then(|r| r.apply_status.clone());
        assert_eq!(status, Some(Reported::Known(ApplyStatus::Succeeded)), "the real agent's report took the place of the garbage");
    }
    // The hand-edited state was reported, not trusted.
    let ev = wait_for("an Event about the unknown state value", WAIT, || async {
        pool_events(&t, &pool)
            .await
            .into_iter()
            .find(|(r, note)| r == "NodeIgnoredValue" && note.contains(&n(1)) && note.contains("Exploded"))
    })
    .await;
    eprintln!("[{}] event: {} {}", t.id, ev.0, ev.1);
    operator_log_checked(&t);
    final_invariants(&t, &pool).await;
    delete_pool(&t, &pool).await;
    t.cleanup().await;
}

#[tokio::test]
async fn a_hand_edited_agent_daemonset_is_put_back_and_reported_and_the_rollout_completes() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("hostile-ds-edit").await;
    t.start_sim(2, &["--apply-time=1s", "--reboot-time=0s"]);
    wait_nodes_ready(&t, 2).await;
    let pool = format!("{}-pool", t.id);
    let rollout = json!({"maxUnavailable": 1, "nodeTimeout": "40s", "maxFailedNodes": 2, "paused": true});
    try_apply_pool(&t, &pool_manifest(&t, &pool, PATCH, rollout)).await.unwrap();
    t.start_operator(&[]);

    let ds_api: Api<DaemonSet> = Api::namespaced(t.client.clone(), &t.agent_namespace());
    let ds =
        wait_for("the agent DaemonSet", WAIT, || async { ds_api.list(&ListParams::default()).await.ok()?.items.into_iter().next() }).await;
    let ds_name = ds.name_any();
    let uid = ds.uid();
    // Someone edits it by hand: its pods would select no node.
    let edit = json!({"spec": {"template": {"spec": {"nodeSelector": {"hostile.winpool.dev/never": "true"}}}}});
    let edited = ds_api.patch(&ds_name, &PatchParams::default(), &Patch::Merge(edit)).await.unwrap();
    assert!(selector_of(&edited).contains_key("hostile.winpool.dev/never"), "the edit landed");

    // The operator puts back what it sets, in place (same object), and says so on the pool.
    let restored = wait_for("the DaemonSet's nodeSelector put back", WAIT, || async {
        let d = ds_api.get(&ds_name).await.ok()?;
        let sel = selector_of(&d);
        (!sel.contains_key("hostile.winpool.dev/never") && sel.get(names::LABEL_POOL) == Some(&pool)).then_some(d)
    })
    .await;
    assert_eq!(restored.uid(), uid, "reverted in place, not deleted and recreated");
    wait_for("a Warning Event AgentDaemonSetReverted on the pool", WAIT, || async {
        pool_events(&t, &pool).await.into_iter().find(|(reason, note)| reason == "AgentDaemonSetReverted" && note.contains(&ds_name))
    })
    .await;

    // The rollout then runs on the agents as winpool built them.
    let body = pool_manifest(&t, &pool, PATCH, json!({"maxUnavailable": 1, "nodeTimeout": "40s", "maxFailedNodes": 2}));
    try_apply_pool(&t, &body).await.unwrap();
    wait_converged(&t, &pool, 2).await;
    // Put back once: what the server defaults is not mistaken for an edit, round after round.
    assert_reverted_once(&t, &pool).await;
    final_invariants(&t, &pool).await;
    delete_pool(&t, &pool).await;
    t.cleanup().await;
}

/// What a cluster admin sets for the agents in the chart (`agent.*`) reaches the
/// DaemonSet the operator writes, through the flags the chart renders; a hand
/// edit of it is put back, and the API server's way of writing it back
/// ("0.1" CPU comes back "100m") is not taken for one.
#[tokio::test]
async fn the_charts_agent_settings_reach_the_agent_daemonset_and_a_hand_edit_of_them_is_put_back() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("hostile-agent-settings").await;
    t.start_sim(2, &["--apply-time=1s", "--reboot-time=0s"]);
    wait_nodes_ready(&t, 2).await;
    // The nodes the admin allows agents on (agent.nodeSelector below): without
    // the label a node gets no agent pod, so no agent token, and is never updated.
    let nodes: Api<Node> = Api::all(t.client.clone());
    for n in t.nodes().await {
        let label = json!({"metadata": {"labels": {"corp.example/agents": "allowed"}}});
        nodes.patch(&n.name_any(), &PatchParams::default(), &Patch::Merge(label)).await.unwrap();
    }
    let sets: Vec<String> = [
        "agent.imagePullSecrets[0].name=corp-registry",
        "agent.extraEnv[0].name=HTTPS_PROXY",
        "agent.extraEnv[0].value=http://proxy.corp.example:3128",
        "agent.extraEnv[1].name=HOST_IP",
        "agent.extraEnv[1].valueFrom.fieldRef.fieldPath=status.hostIP",
        "agent.resources.requests.cpu=0.1",
        "agent.resources.limits.memory=512Mi",
        "agent.apiServer=https://api.corp.example:6443",
        "agent.nodeSelector.corp\\.example/agents=allowed",
        "agent.priorityClassName=system-cluster-critical",
    ]
    .map(String::from)
    .into();
    let rendered = support::chart::render_chart(&t, "agent-settings", &sets);
    let flags = agent_flags(&rendered);
    assert_eq!(flags.len(), 6, "one flag per setting: {flags:?}");
    let pool = format!("{}-pool", t.id);
    let rollout = json!({"maxUnavailable": 1, "nodeTimeout": "40s", "maxFailedNodes": 2, "paused": true});
    try_apply_pool(&t, &pool_manifest(&t, &pool, PATCH, rollout)).await.unwrap();
    t.start_operator(&flags.iter().map(String::as_str).collect::<Vec<_>>());

    let ds_api: Api<DaemonSet> = Api::namespaced(t.client.clone(), &t.agent_namespace());
    let ds =
        wait_for("the agent DaemonSet", WAIT, || async { ds_api.list(&ListParams::default()).await.ok()?.items.into_iter().next() }).await;
    let ds_name = ds.name_any();
    let settings = AgentPodSettings::of(&ds);
    assert_eq!(settings.pull_secrets, ["corp-registry"]);
    assert_eq!(settings.priority_class.as_deref(), Some("system-cluster-critical"));
    assert_eq!(settings.node_selector.get("corp.example/agents").map(String::as_str), Some("allowed"));
    assert_eq!(settings.node_selector.get(names::LABEL_POOL), Some(&pool), "the pool's own selection stays");
    assert_eq!(settings.env("HTTPS_PROXY").as_deref(), Some("http://proxy.corp.example:3128"));
    assert_eq!(settings.env("WINPOOL_API_SERVER").as_deref(), Some("https://api.corp.example:6443"));
    assert!(settings.env_names.contains(&"HOST_IP".to_string()), "{:?}", settings.env_names);
    assert_eq!(settings.cpu_request.as_deref(), Some("100m"), "as the API server writes 0.1");
    assert_eq!(settings.memory_limit.as_deref(), Some("512Mi"));

    // Someone edits the agents by hand: another proxy, no pull secret, more CPU.
    let edit = json!({"spec": {"template": {"spec": {
        "imagePullSecrets": null,
        "containers": [{"name": "agent", "resources": {"requests": {"cpu": "2"}},
                        "env": [{"name": "HTTPS_PROXY", "value": "http://elsewhere:3128"}]}],
    }}}});
    let edited = ds_api.patch(&ds_name, &PatchParams::default(), &Patch::Strategic(edit)).await.unwrap();
    let e = AgentPodSettings::of(&edited);
    assert_eq!(
        (e.pull_secrets.len(), e.env("HTTPS_PROXY").as_deref(), e.cpu_request.as_deref()),
        (0, Some("http://elsewhere:3128"), Some("2"))
    );

    wait_for("the admin's agent settings put back", WAIT, || async {
        let now = AgentPodSettings::of(&ds_api.get(&ds_name).await.ok()?);
        (now == settings).then_some(())
    })
    .await;

    // The rollout's rounds then meet the DaemonSet as the API server keeps it,
    // and find nothing to put back.
    let body = pool_manifest(&t, &pool, PATCH, json!({"maxUnavailable": 1, "nodeTimeout": "40s", "maxFailedNodes": 2}));
    try_apply_pool(&t, &body).await.unwrap();
    wait_converged(&t, &pool, 2).await;
    assert_reverted_once(&t, &pool).await;
    assert_eq!(AgentPodSettings::of(&ds_api.get(&ds_name).await.unwrap()), settings);
    final_invariants(&t, &pool).await;
    delete_pool(&t, &pool).await;
    t.cleanup().await;
}

/// The `--agent-*` flags of the operator Deployment the chart renders (those
/// about the agents' pods; the namespace and image are the test's).
fn agent_flags(rendered: &str) -> Vec<String> {
    let deployment = serde_saphyr::from_multiple::<serde_json::Value>(rendered)
        .expect("the chart renders YAML")
        .into_iter()
        .find(|doc| doc["kind"].as_str() == Some("Deployment"))
        .expect("the chart renders the operator Deployment");
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str())
        .filter(|a| a.starts_with("--agent-") && !a.starts_with("--agent-namespace=") && !a.starts_with("--agent-image="))
        .map(String::from)
        .collect()
}

/// What an admin sets on the agent pods, read from a DaemonSet.
#[derive(Debug, PartialEq)]
struct AgentPodSettings {
    pull_secrets: Vec<String>,
    priority_class: Option<String>,
    node_selector: BTreeMap<String, String>,
    env_names: Vec<String>,
    env_values: BTreeMap<String, String>,
    cpu_request: Option<String>,
    memory_limit: Option<String>,
}

impl AgentPodSettings {
    fn of(ds: &DaemonSet) -> Self {
        let pod = ds.spec.as_ref().and_then(|s| s.template.spec.clone()).unwrap_or_default();
        let agent = pod.containers.into_iter().find(|c| c.name == "agent").unwrap_or_default();
        let env = agent.env.unwrap_or_default();
        let resources = agent.resources.unwrap_or_default();
        AgentPodSettings {
            pull_secrets: pod.image_pull_secrets.unwrap_or_default().into_iter().map(|r| r.name).collect(),
            priority_class: pod.priority_class_name,
            node_selector: pod.node_selector.unwrap_or_default(),
            env_names: env.iter().map(|e| e.name.clone()).collect(),
            env_values: env.iter().filter_map(|e| Some((e.name.clone(), e.value.clone()?))).collect(),
            cpu_request: resources.requests.and_then(|r| r.get("cpu").map(|q| q.0.clone())),
            memory_limit: resources.limits.and_then(|r| r.get("memory").map(|q| q.0.clone())),
        }
    }

    fn env(&self, name: &str) -> Option<String> {
        self.env_values.get(name).cloned()
    }
}

/// One AgentDaemonSetReverted Event on the pool, not repeated (a revert every
/// round would make it a series).
async fn assert_reverted_once(t: &TestSpace, pool: &str) {
    let events: Api<Event> = Api::all(t.client.clone());
    let reverted: Vec<Event> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some("AgentDaemonSetReverted") && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pool)
        })
        .collect();
    assert_eq!(reverted.len(), 1, "one Event");
    assert!(reverted[0].series.is_none(), "reverted once, not every round: {:?}", reverted[0].series);
}

fn selector_of(ds: &DaemonSet) -> BTreeMap<String, String> {
    ds.spec.as_ref().and_then(|s| s.template.spec.as_ref()).and_then(|s| s.node_selector.clone()).unwrap_or_default()
}

#[tokio::test]
async fn a_daemonset_deleted_by_hand_mid_rollout_is_recreated_and_the_rollout_finishes() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("hostile-ds-delete").await;
    t.start_sim(3, &["--apply-time=3s", "--reboot-time=0s"]);
    wait_nodes_ready(&t, 3).await;
    let pool = format!("{}-pool", t.id);
    try_apply_pool(&t, &pool_manifest(&t, &pool, PATCH, json!({"maxUnavailable": 1}))).await.unwrap();
    t.start_operator(&[]);

    let nodes_api: Api<Node> = Api::all(t.client.clone());
    wait_for("a node Applying", WAIT, || async {
        let nodes = nodes_api.list(&ListParams::default().labels(&format!("{TEST_LABEL}={}", t.id))).await.ok()?.items;
        nodes.iter().any(|n| ann(n, names::ANN_STATE).as_deref() == Some("Applying")).then_some(())
    })
    .await;
    let ds_api: Api<DaemonSet> = Api::namespaced(t.client.clone(), &t.agent_namespace());
    let ds = ds_api.get(&format!("winpool-{pool}")).await.expect("the pool's agent DaemonSet");
    let (name, uid) = (ds.name_any(), ds.uid());
    ds_api.delete(&name, &DeleteParams::background()).await.unwrap();
    let deleted_at = Instant::now();
    wait_for("the DaemonSet to be recreated", Duration::from_secs(60), || async {
        let d = ds_api.get_opt(&name).await.ok()??;
        (d.uid() != uid).then_some(())
    })
    .await;
    eprintln!("[{}] {name} recreated {:.1}s after it was deleted", t.id, deleted_at.elapsed().as_secs_f64());
    wait_converged(&t, &pool, 3).await;
    final_invariants(&t, &pool).await;
    operator_log_checked(&t);
    // From the API server's record: winpool applied the DaemonSet, and applied it again after the deletion.
    let applies = support::audit::requests(&support::audit::audit_log(), &name)
        .into_iter()
        .filter(|r| {
            r.resource == "daemonsets" && r.name == name && r.verb == "patch" && r.code < 300 && r.user_agent.starts_with("winpool/")
        })
        .count();
    assert!(applies >= 2, "winpool applied {name} {applies} times; it must apply it again after the deletion");
    delete_pool(&t, &pool).await;
    t.cleanup().await;
}

#[tokio::test]
async fn a_bogus_revision_label_is_put_back_and_reported_and_the_node_rolled_to_the_real_revision() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("hostile-revision").await;
    t.start_sim(2, &["--apply-time=1s", "--reboot-time=0s"]);
    wait_nodes_ready(&t, 2).await;
    let prefix = t.node_prefix();
    let n = |i: usize| format!("{prefix}{i}");
    let nodes_api: Api<Node> = Api::all(t.client.clone());
    let label = |v: &str| json!({"metadata": {"labels": {names::LABEL_REVISION: v}}});
    // Before the pool exists, someone labels a node for a revision that never was.
    nodes_api.patch(&n(1), &PatchParams::default(), &Patch::Merge(label("0000bogus1"))).await.unwrap();
    let pool = format!("{}-pool", t.id);
    try_apply_pool(&t, &pool_manifest(&t, &pool, PATCH, json!({}))).await.unwrap();
    t.start_operator(&[]);
    let p = wait_converged(&t, &pool, 2).await;
    let rev = p.status.unwrap().revision.unwrap();

    // After the rollout, by hand on an Updated node.
    nodes_api.patch(&n(0), &PatchParams::default(), &Patch::Merge(label("0000bogus0"))).await.unwrap();
    wait_for("node 0 to be back at the real revision", WAIT, || async {
        let nd = nodes_api.get(&n(0)).await.ok()?;
        let back = nd.labels().get(names::LABEL_REVISION) == Some(&rev) && ann(&nd, names::ANN_STATE).as_deref() == Some("Updated");
        (back && !cordoned(&nd)).then_some(())
    })
    .await;
    wait_converged(&t, &pool, 2).await;
    for (node, bogus) in [(n(0), "0000bogus0"), (n(1), "0000bogus1")] {
        let ev = wait_for(&format!("an Event about {node}'s bogus label"), WAIT, || async {
            pool_events(&t, &pool)
                .await
                .into_iter()
                .find(|(r, note)| r == "RevisionLabelRestored" && note.contains(&node) && note.contains(bogus))
        })
        .await;
        eprintln!("[{}] event: {} {}", t.id, ev.0, ev.1);
    }
    operator_log_checked(&t);
    let drains = support::audit::drains_per_node(&support::audit::requests(&support::audit::audit_log(), &t.node_prefix()));
    assert!(!drains.is_empty(), "the audit log records the rollout's drains");
    assert!(invariants::drained_twice(&drains).is_empty(), "a node is not drained twice for the revision it already had: {drains:?}");
    final_invariants(&t, &pool).await;
    delete_pool(&t, &pool).await;
    t.cleanup().await;
}

/// Regression test (issue 10): kube 5's client retries a 429 by itself (up to 15 times,
/// exponential backoff from 5ms), so `drain::drain_round`'s eviction of a PDB-protected pod
/// blocked the pool's reconcile for minutes instead of returning "not now", and nothing else
/// in the pool moved. `winpool run` turns the client's retry off.
#[tokio::test]
async fn a_refused_eviction_does_not_stall_the_rest_of_the_pool() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("hostile-429").await;
    t.start_sim(3, &["--apply-time=1s", "--reboot-time=0s"]);
    wait_nodes_ready(&t, 3).await;
    let prefix = t.node_prefix();
    let n = |i: usize| format!("{prefix}{i}");
    support::unevictable_pod(&t, &n(0), "pinned").await;
    let pool = format!("{}-pool", t.id);
    try_apply_pool(&t, &pool_manifest(&t, &pool, PATCH, json!({"maxUnavailable": 2, "drain": {"timeout": "10m"}}))).await.unwrap();
    t.start_operator(&[]);
    // n0 cannot drain (the PDB holds); n1 has nothing to evict and must finish regardless,
    // within a few 5s rounds; then n2 starts in its place.
    let api: Api<WindowsNodePool> = Api::all(t.client.clone());
    let started = Instant::now();
    let res = tokio::time::timeout(Duration::from_secs(45), async {
        loop {
            if let Ok(p) = api.get(&pool).await
                && p.status.as_ref().is_some_and(|s| s.nodes.updated >= 2)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;
    let st = api.get(&pool).await.ok().and_then(|p| p.status).map(|s| s.nodes);
    assert!(res.is_ok(), "after {:.0}s the pool is stuck behind one refused eviction: {st:?}", started.elapsed().as_secs_f64());
    let nd = Api::<Node>::all(t.client.clone()).get(&n(0)).await.unwrap();
    assert_eq!(ann(&nd, names::ANN_STATE).as_deref(), Some("Draining"), "n0 still waits for its PDB");
    operator_log_checked(&t);
    delete_pool(&t, &pool).await;
    t.cleanup().await;
}

/// Regression test (issue 10): a garbage `winpool.dev/started-at` on a node in flight read
/// as absent, and absent counted as "started now" every round, so the node never reached
/// nodeTimeout and stayed cordoned for good if its agent never reported. Pure: runs the
/// decision directly.
#[test]
fn a_garbage_started_at_does_not_disable_node_timeout() {
    use winpool::decision::rollout::{NodeState, NodeView, PoolInput, decide};
    let spec: winpool::api::WindowsNodePoolSpec =
        serde_saphyr::from_str("nodeSelector: {}\nos: {version: ltsc2022, patchLevel: 10.0.20348.2762}\nrollout: {nodeTimeout: 30m}")
            .unwrap();
    let rev = winpool::decision::revision::revision_of(&spec);
    let now: jiff::Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
    let long_ago = now - jiff::SignedDuration::from_hours(5);
    let mut node = Node::default();
    node.metadata.name = Some("n0".into());
    node.metadata.labels =
        Some([(names::LABEL_POOL.to_string(), "p".to_string()), (names::LABEL_REVISION.to_string(), rev.clone())].into());
    node.metadata.annotations = Some(
        [
            (names::ANN_STATE, "Applying"),
            (names::ANN_STATE_SINCE, &long_ago.to_string()),
            (names::ANN_STARTED_AT, "five hours ago"),
            (names::ANN_TARGET_REVISION, &rev),
            (names::ANN_CORDONED_BY_WINPOOL, "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    node.spec = Some(k8s_openapi::api::core::v1::NodeSpec { unschedulable: Some(true), ..Default::default() });
    let record = winpool::api::node_record::NodeRecord::from(&node);
    let report = winpool::decision::agent_report::AgentReport::of(None);
    let view: NodeView = winpool::decision::node_view::node_view(&record, &report, winpool::decision::rollout::HnsReadiness::Unknown);
    let existing = [rev.clone()].into();
    // Five hours in Applying, the agent silent: the garbage started-at counts as
    // absent, the time in the state stands in, and this very round fails the node.
    let plan = decide(
        &PoolInput {
            name: "p",
            spec: &spec,
            rev: &rev,
            rules: &winpool::decision::rollout::PoolRules::of(&spec),
            existing_revisions: &existing,
            target_marked_at: None,
            gates: &[],
            paused_by_annotation: false,
            average_node_update: None,
            clock_skew: None,
            bad_update: None,
            ring: None,
            cluster: None,
            hooks_namespace: None,
            hns_backlog: std::time::Duration::ZERO,
            evictions_unheard: 0,
        },
        std::slice::from_ref(&view),
        now,
    );
    let failed = plan.patches.iter().find(|p| p.node == "n0" && p.to == NodeState::Failed);
    assert!(failed.is_some(), "n0 has been Applying for 5h with nodeTimeout 30m: {:?}", plan.patches);
    let reason = failed.and_then(|p| p.annotations.get(names::ANN_FAILURE_REASON).cloned().flatten());
    assert_eq!(reason.as_deref(), Some("Timeout"));
    assert_eq!(failed.and_then(|p| p.unschedulable), Some(false), "and winpool's cordon is lifted");
}

/// A pool deleted while a node is Draining (a PodDisruptionBudget holds its
/// last pod): the finalizer gives the node back, uncordoned and without
/// winpool's labels and state, the pod untouched, and only then the pool goes.
#[tokio::test]
async fn a_pool_deleted_while_a_node_drains_gives_the_node_back_uncordoned() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("delete-draining").await;
    t.start_sim(1, &["--apply-time=1s"]);
    wait_nodes_ready(&t, 1).await;
    let node = format!("{}0", t.node_prefix());
    support::unevictable_pod(&t, &node, "precious").await;
    let pool = format!("{}-pool", t.id);
    let rollout = json!({"maxUnavailable": 1, "drain": {"timeout": "10m", "putBackAfter": "0s"}});
    support::apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", rollout)).await;
    t.start_operator(&[]);
    let nodes: Api<Node> = Api::all(t.client.clone());
    wait_for("the node cordoned and draining", WAIT, || async {
        let n = nodes.get(&node).await.ok()?;
        let cordoned = n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
        (cordoned && n.annotations().get(names::ANN_STATE).map(String::as_str) == Some("Draining")).then_some(())
    })
    .await;

    delete_pool(&t, &pool).await;
    let n = nodes.get(&node).await.unwrap();
    assert_ne!(n.spec.as_ref().and_then(|s| s.unschedulable), Some(true), "winpool's cordon is lifted: {:?}", n.spec);
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(t.client.clone(), &t.namespace);
    assert!(pods.get_opt("precious").await.unwrap().is_some_and(|p| p.metadata.deletion_timestamp.is_none()), "the pod is untouched");
    operator_log_checked(&t);
    t.cleanup().await;
}

/// One change of a Node as a watch delivered it: what the kubelet reports of
/// the host and what winpool recorded of its update.
#[derive(Debug, Clone, PartialEq)]
struct NodeSeen {
    kernel: String,
    boot: String,
    state: Option<String>,
    started: bool,
    cordoned: bool,
    label: Option<String>,
}

impl NodeSeen {
    fn of(n: &Node) -> Self {
        let info = n.status.as_ref().and_then(|s| s.node_info.as_ref());
        NodeSeen {
            kernel: info.map(|i| i.kernel_version.clone()).unwrap_or_default(),
            boot: info.map(|i| i.boot_id.clone()).unwrap_or_default(),
            state: ann(n, names::ANN_STATE),
            started: ann(n, names::ANN_STARTED_AT).is_some(),
            cordoned: cordoned(n),
            label: n.labels().get(names::LABEL_REVISION).cloned(),
        }
    }
}

/// Every change of `node` after resourceVersion `from`, in order, until the
/// task is aborted (a watch that ends is resumed where it ended).
fn watch_node(t: &TestSpace, node: &str, from: String) -> (std::sync::Arc<std::sync::Mutex<Vec<NodeSeen>>>, tokio::task::JoinHandle<()>) {
    use futures::StreamExt;
    use kube::api::{WatchEvent, WatchParams};
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (api, wp, out) =
        (Api::<Node>::all(t.client.clone()), WatchParams::default().fields(&format!("metadata.name={node}")), seen.clone());
    let task = tokio::spawn(async move {
        let mut rv = from;
        loop {
            let Ok(stream) = api.watch(&wp, &rv).await else { panic!("watching the node from {rv}") };
            let mut stream = Box::pin(stream);
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(WatchEvent::Added(n) | WatchEvent::Modified(n)) => {
                        rv = n.resource_version().unwrap_or_default();
                        out.lock().unwrap().push(NodeSeen::of(&n));
                    }
                    Ok(WatchEvent::Bookmark(b)) => rv = b.metadata.resource_version,
                    Ok(WatchEvent::Error(e)) => panic!("the node's watch failed (a gap would hide changes): {e:?}"),
                    Ok(WatchEvent::Deleted(_)) | Err(_) => break,
                }
            }
        }
    });
    (seen, task)
}

/// Issue 45: a revision label is no start. On a paused pool, someone labels a
/// member with the pool's own target revision (a person with nodes/patch, a
/// label-syncing controller): its agent installs nothing and reboots nothing,
/// the label is put back (the node never had one), the pool says so in a
/// condition and an Event naming the node. Once resumed, the node is rolled
/// for real, and the watch of it shows the host changed only after winpool
/// started and cordoned it.
#[tokio::test]
async fn a_hand_set_target_revision_on_a_paused_pools_member_touches_no_host_and_is_put_back() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("hostile-handlabel").await;
    t.start_sim(2, &["--apply-time=1s", "--reboot-time=1s"]);
    wait_nodes_ready(&t, 2).await;
    let pool = format!("{}-pool", t.id);
    try_apply_pool(&t, &pool_manifest(&t, &pool, PATCH, json!({"paused": true}))).await.unwrap();
    t.start_operator(&[]);
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    let nodes_api: Api<Node> = Api::all(t.client.clone());
    let node = format!("{}0", t.node_prefix());
    // Its agent runs (it has reported) and the pool knows its target.
    let rev = wait_for("the pool's target and the member's agent running", WAIT, || async {
        let rev = pools.get(&pool).await.ok()?.status?.revision?;
        t.reports().await.contains_key(&node).then_some(rev)
    })
    .await;
    let before = nodes_api.get(&node).await.unwrap();
    let original = NodeSeen::of(&before);
    assert!(original.label.is_none() && original.state.is_none() && !original.kernel.ends_with(".2762"), "{original:?}");
    let (seen, watch) = watch_node(&t, &node, before.resource_version().unwrap());

    let label = json!({"metadata": {"labels": {names::LABEL_REVISION: rev}}});
    nodes_api.patch(&node, &PatchParams::default(), &Patch::Merge(&label)).await.unwrap();
    let found = wait_for("the label put back, the condition and the Event", WAIT, || async {
        let n = nodes_api.get(&node).await.ok()?;
        let p = pools.get(&pool).await.ok()?;
        let c = cond(&p, "RevisionLabelTampered").filter(|c| c.status == "True" && c.message.contains(&node))?.clone();
        let ev = pool_events(&t, &pool).await.into_iter().find(|(r, note)| r == "RevisionLabelRestored" && note.contains(&node))?;
        n.labels().get(names::LABEL_REVISION).is_none().then_some((c, ev))
    })
    .await;
    eprintln!("[{}] condition: {} {}; event: {} {}", t.id, found.0.reason, found.0.message, found.1.0, found.1.1);
    let report = t.reports().await.remove(&node).expect("the member's report");
    assert_eq!(report.apply_status, None, "the agent reported an apply for a label no start stood behind: {report:?}");

    // Resumed: the node is rolled to the same revision, now by winpool.
    pools.patch(&pool, &PatchParams::default(), &Patch::Merge(json!({"spec": {"rollout": {"paused": false}}}))).await.unwrap();
    wait_converged(&t, &pool, 2).await;
    watch.abort();
    let seen = seen.lock().unwrap().clone();
    let host_changed =
        seen.iter().position(|s| s.kernel != original.kernel || s.boot != original.boot).expect("the rollout changed the host");
    let started = seen.iter().position(|s| s.started && s.cordoned && s.state.is_some());
    assert!(
        started.is_some_and(|i| i < host_changed),
        "the host changed before winpool started and cordoned the node: {:#?}",
        &seen[..=host_changed]
    );
    operator_log_checked(&t);
    final_invariants(&t, &pool).await;
    delete_pool(&t, &pool).await;
    t.cleanup().await;
}

/// A runtime archive is run by a SYSTEM task: one outside the operator's
/// allowed URL prefixes is refused (condition and Event naming it), no agent
/// DaemonSet is created and no node is touched.
#[tokio::test]
async fn a_runtime_archive_outside_the_allowed_prefixes_is_refused_and_no_node_is_touched() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("hostile-archive").await;
    t.start_sim(2, &["--apply-time=0.2s", "--reboot-time=0s"]);
    wait_nodes_ready(&t, 2).await;
    let pool = format!("{}-pool", t.id);
    let mut manifest = pool_manifest(&t, &pool, PATCH, json!({}));
    let url = "https://github.com/containerd/containerd/releases/download/v1.7.22/containerd-1.7.22-windows-amd64.tar.gz";
    manifest["spec"]["runtime"] = json!({"name": "containerd", "version": "1.7.22", "archive": {"url": url, "sha256": "0".repeat(64)}});
    try_apply_pool(&t, &manifest).await.expect("the pool is valid");
    t.start_operator(&["--allowed-runtime-archives=https://github.com/containerd/containerd-mirror/"]);
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    let msg = wait_for("the archive refused", Duration::from_secs(60), || async {
        let st = pools.get(&pool).await.ok()?.status?;
        let ready = st.conditions.iter().find(|c| c.type_ == "Ready")?;
        (ready.reason == "RuntimeArchiveNotAllowed").then(|| ready.message.clone())
    })
    .await;
    assert!(msg.contains(url) && msg.contains("https://github.com/containerd/containerd-mirror/"), "{msg}");
    assert!(pool_events(&t, &pool).await.iter().any(|(r, _)| r == "RuntimeArchiveNotAllowed"), "a Warning Event names it");
    let ds = Api::<DaemonSet>::namespaced(t.client.clone(), &t.agent_namespace()).list(&ListParams::default()).await.unwrap().items;
    assert!(ds.is_empty(), "no agent runs for a refused pool: {:?}", ds.iter().map(|d| d.name_any()).collect::<Vec<_>>());
    for n in t.nodes().await {
        assert!(
            !n.labels().contains_key(names::LABEL_REVISION) && !n.annotations().contains_key(names::ANN_STARTED_AT),
            "{} touched",
            n.name_any()
        );
    }
    t.cleanup().await;
}

/// A selector edit that drops a node while its host installs (the agent
/// reports Applying, then Rebooting): the node stays the pool's, cordoned,
/// with its agent, until the agent reports a result; only then is it given
/// back. Released mid-install it would take workloads with a half-staged
/// update, and its agent would be gone before the reboot.
#[tokio::test]
async fn a_node_dropped_from_the_pool_mid_install_is_given_back_only_after_its_result() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("hostile-leave").await;
    t.start_sim(2, &["--apply-time=6s", "--reboot-time=2s"]);
    wait_nodes_ready(&t, 2).await;
    let pool = format!("{}-pool", t.id);
    try_apply_pool(&t, &pool_manifest(&t, &pool, PATCH, json!({"maxUnavailable": 1}))).await.unwrap();
    t.start_operator(&[]);

    let installing = |r: Option<&winpool::decision::agent_report::AgentReport>| {
        r.and_then(|r| r.apply_status.as_ref()?.known()).filter(|s| matches!(s, ApplyStatus::Applying | ApplyStatus::Rebooting))
    };
    let node = wait_for("a node whose agent reports Applying", WAIT, || async {
        t.reports().await.into_iter().find(|(_, r)| r.apply_status == Some(Reported::Known(ApplyStatus::Applying))).map(|(n, _)| n)
    })
    .await;
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    let exclude = json!({"spec": {"nodeSelector": {"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [node]}
    ]}}});
    pools.patch(&pool, &PatchParams::default(), &Patch::Merge(&exclude)).await.unwrap();

    let nodes: Api<Node> = Api::all(t.client.clone());
    let held_while = std::sync::Mutex::new(Vec::new());
    let released = wait_for("the dropped node given back", WAIT, || async {
        let n = nodes.get(&node).await.ok()?;
        let reports = t.reports().await;
        let report = reports.get(&node);
        let member = n.labels().get(names::LABEL_POOL) == Some(&pool);
        let cordoned = n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
        if let Some(status) = installing(report) {
            assert!(member && cordoned, "{node} given back while its agent reports {status}");
            held_while.lock().unwrap().push(status);
            return None;
        }
        (!member).then_some((n, report.and_then(|r| r.apply_status.clone())))
    })
    .await;
    let held_while = held_while.into_inner().unwrap();
    assert!(!held_while.is_empty(), "the selector change landed while the host installed");
    // Between two looks too: the API server's record of every uncordon.
    let log = support::audit::requests_of_test(&support::audit::audit_log(), &t.node_prefix(), &t.namespace);
    let (uncordons, mid_install) = support::audit::uncordons_mid_install(&log);
    assert!(uncordons >= 1 && mid_install.is_empty(), "{uncordons} uncordons replayed: {mid_install:?}");
    let (n, result) = released;
    assert_eq!(result, Some(Reported::Known(ApplyStatus::Succeeded)), "given back after its result");
    assert_ne!(n.spec.as_ref().and_then(|s| s.unschedulable), Some(true), "and uncordoned");
    assert!(!n.annotations().contains_key(names::ANN_CORDONED_BY_WINPOOL));
    eprintln!(
        "[{}] {node} held through {} looks ({:?} … {:?}), then given back",
        t.id,
        held_while.len(),
        held_while.first(),
        held_while.last()
    );
    support::wait_pool_done(&t, &pool, 1, WAIT).await;
    operator_log_checked(&t);
    t.cleanup().await;
}

// ---- Issue 68: what a holder of `nodes get/list/patch` alone can forge ----
// Such a holder is the chart's own -pool-operator role, a label-syncing
// controller, a node template, or every node's kubelet credential. None of
// what it writes on a Node may start, undo, count or skip anything.

/// A client that holds only `nodes get/list/patch`: a ServiceAccount's token,
/// no admin certificate. Its ClusterRole and binding are named after the test
/// (`finish` removes them).
async fn node_patcher(t: &TestSpace) -> kube::Client {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let name = format!("{}-node-patcher", t.id);
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "node-patcher"}})).unwrap();
    Api::<ServiceAccount>::namespaced(t.client.clone(), &t.namespace).create(&PostParams::default(), &sa).await.expect("sa");
    let role: ClusterRole = serde_json::from_value(json!({"metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}]}))
    .unwrap();
    Api::<ClusterRole>::all(t.client.clone()).create(&PostParams::default(), &role).await.expect("role");
    let binding: ClusterRoleBinding = serde_json::from_value(json!({"metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "node-patcher", "namespace": t.namespace}]}))
    .unwrap();
    Api::<ClusterRoleBinding>::all(t.client.clone()).create(&PostParams::default(), &binding).await.expect("binding");
    let token = support::chart::service_account_token(t, "node-patcher");
    let client = support::client_with_token(&support::kubeconfig(), &token).await;
    // The authorizer's cache takes the binding within moments.
    let nodes: Api<Node> = Api::all(client.clone());
    wait_for("the node patcher's role to hold", WAIT, || async { nodes.list(&ListParams::default().limit(1)).await.ok() }).await;
    client
}

/// A test space with `nodes` simulated nodes, Ready.
async fn fleet(name: &str, nodes: usize, sim: &[&str]) -> TestSpace {
    install_crd(&support::client().await).await;
    let mut t = TestSpace::new(name).await;
    t.start_sim(nodes, sim);
    wait_nodes_ready(&t, nodes).await;
    t
}

/// The test's cleanup, with the node patcher's cluster-scoped role and binding.
async fn finish(t: TestSpace) {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let name = format!("{}-node-patcher", t.id);
    let _ = Api::<ClusterRoleBinding>::all(t.client.clone()).delete(&name, &DeleteParams::default()).await;
    let _ = Api::<ClusterRole>::all(t.client.clone()).delete(&name, &DeleteParams::default()).await;
    t.cleanup().await;
}

/// `who` merge-patches `node` with `body`; nodes/patch allows all of it.
async fn forge(who: &kube::Client, node: &str, body: serde_json::Value) {
    Api::<Node>::all(who.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .unwrap_or_else(|e| panic!("forging {node}: {e}"));
}

/// The pool's status once it describes its current spec.
async fn observed(t: &TestSpace, pool: &str) -> winpool::api::WindowsNodePoolStatus {
    let api: Api<WindowsNodePool> = Api::all(t.client.clone());
    wait_for(&format!("pool {pool} to observe its spec"), WAIT, || async {
        let p = api.get(pool).await.ok()?;
        p.status.filter(|s| s.observed_generation == p.metadata.generation && s.revision.is_some())
    })
    .await
}

/// A forged start (state Applying, started-at, the target's revision label, a
/// cordon, no drain) on one member of a paused pool, and a forged undo
/// (`winpool.dev/undo` on a forged start) on the other, each with a workload
/// pod on it: no host moves while its pod is there. Once resumed, winpool
/// rolls both for real; the first change of each host must find its pod
/// already evicted by winpool's drain, and the hosts end on the new build.
#[tokio::test]
async fn a_nodes_patch_holder_forging_a_start_or_an_undo_moves_no_host_under_a_pod() {
    let mut t = fleet("forged-start", 2, &["--apply-time=1s", "--reboot-time=1s"]).await;
    let pool = format!("{}-pool", t.id);
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    try_apply_pool(&t, &pool_manifest(&t, &pool, PATCH, json!({}))).await.unwrap();
    t.start_operator(&[]);
    let old_rev = wait_converged(&t, &pool, 2).await.status.unwrap().revision.unwrap();
    const NEXT: &str = "10.0.20348.2800";
    try_apply_pool(&t, &pool_manifest(&t, &pool, NEXT, json!({"paused": true}))).await.unwrap();
    let rev = observed(&t, &pool).await.revision.unwrap();
    assert_ne!(rev, old_rev);
    let (start, undo) = (format!("{}0", t.node_prefix()), format!("{}1", t.node_prefix()));
    for node in [&start, &undo] {
        support::pod_on_node(&t, node, &format!("work-{node}")).await;
    }
    let nodes_api: Api<Node> = Api::all(t.client.clone());
    let mut hosts = BTreeMap::new();
    for node in [&start, &undo] {
        hosts.insert(node.clone(), NodeSeen::of(&nodes_api.get(node).await.unwrap()));
    }

    let patcher = node_patcher(&t).await;
    let now = jiff::Timestamp::now().to_string();
    let started = |label: &str| {
        json!({"metadata": {"labels": {names::LABEL_REVISION: label, names::LABEL_STATE: "Applying"},
            "annotations": {names::ANN_STATE: "Applying", names::ANN_STATE_SINCE: now, names::ANN_STARTED_AT: now,
                names::ANN_TARGET_REVISION: label, names::ANN_CORDONED_BY_WINPOOL: "true"}},
            "spec": {"unschedulable": true}})
    };
    forge(&patcher, &start, started(&rev)).await;
    let mut undone = started(&old_rev);
    undone["metadata"]["annotations"][names::ANN_UNDO] = json!("forged-gate");
    forge(&patcher, &undo, undone).await;
    // A short nodeTimeout: a node the forged state holds back fails soon.
    let resume = json!({"spec": {"rollout": {"paused": false, "nodeTimeout": "20s"}}});
    pools.patch(&pool, &PatchParams::default(), &Patch::Merge(resume)).await.unwrap();

    // The operator judges each forged start at its nodeTimeout (it fails the
    // node: a forged state may hold a node back). By then no host has moved,
    // no pod was evicted: the agent acts on winpool's operations alone.
    wait_for("both forged starts judged (Failed at their nodeTimeout)", WAIT, || async {
        for node in [&start, &undo] {
            (ann(&nodes_api.get(node).await.ok()?, names::ANN_STATE).as_deref() == Some("Failed")).then_some(())?;
        }
        Some(())
    })
    .await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(t.client.clone(), &t.namespace);
    for (node, before) in &hosts {
        let seen = NodeSeen::of(&nodes_api.get(node).await.unwrap());
        assert!(seen.kernel == before.kernel && seen.boot == before.boot, "a forged start moved {node}'s host: {before:?} → {seen:?}");
        let pod = pods.get_opt(&format!("work-{node}")).await.unwrap();
        assert!(pod.is_some_and(|p| p.metadata.deletion_timestamp.is_none()), "{node}'s pod was evicted for a forged start");
    }
    operator_log_checked(&t);
    finish(t).await;
}

/// A node's own kubelet credential (`system:node:<name>`, which SYSTEM on a
/// compromised host can read): the Node authorizer lets it patch its own
/// Node, and no more. It forges a start on its own Node under a pod: its
/// host does not move and the pod stays; it may not write an operation.
#[tokio::test]
async fn a_compromised_kubelet_forging_a_start_on_its_own_node_moves_no_host_and_writes_no_operation() {
    use winpool::api::operation::{WindowsNodeOperation, WindowsNodeOperationSpec};
    let mut t = fleet("forged-kubelet", 1, &["--apply-time=1s", "--reboot-time=1s"]).await;
    let pool = format!("{}-pool", t.id);
    try_apply_pool(&t, &pool_manifest(&t, &pool, PATCH, json!({}))).await.unwrap();
    t.start_operator(&[]);
    wait_converged(&t, &pool, 1).await;
    try_apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2800", json!({"paused": true, "nodeTimeout": "20s"}))).await.unwrap();
    let rev = observed(&t, &pool).await.revision.unwrap();
    let node = format!("{}0", t.node_prefix());
    support::pod_on_node(&t, &node, "work").await;
    let nodes: Api<Node> = Api::all(t.client.clone());
    let before = NodeSeen::of(&nodes.get(&node).await.unwrap());

    let mut cfg = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(support::kubeconfig()).unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    cfg.auth_info.impersonate = Some(format!("system:node:{node}"));
    cfg.auth_info.impersonate_groups = Some(vec!["system:nodes".into(), "system:authenticated".into()]);
    let kubelet = kube::Client::try_from(cfg).unwrap();
    let now = jiff::Timestamp::now().to_string();
    forge(
        &kubelet,
        &node,
        json!({"metadata": {"labels": {names::LABEL_REVISION: rev},
        "annotations": {names::ANN_STATE: "Applying", names::ANN_STATE_SINCE: now, names::ANN_STARTED_AT: now,
            names::ANN_TARGET_REVISION: rev, names::ANN_CORDONED_BY_WINPOOL: "true"}}, "spec": {"unschedulable": true}}),
    )
    .await;
    let spec = WindowsNodeOperationSpec {
        node_name: node.clone(),
        pool: pool.clone(),
        revision: rev.clone(),
        started_at: now,
        ..Default::default()
    };
    let forged = Api::<WindowsNodeOperation>::namespaced(kubelet.clone(), &t.agent_namespace())
        .create(&PostParams::default(), &WindowsNodeOperation::new(&format!("{node}.forged"), spec))
        .await;
    assert!(matches!(&forged, Err(kube::Error::Api(s)) if s.code == 403), "a kubelet wrote an operation: {forged:?}");
    Api::<WindowsNodePool>::all(t.client.clone())
        .patch(&pool, &PatchParams::default(), &Patch::Merge(json!({"spec": {"rollout": {"paused": false}}})))
        .await
        .unwrap();
    wait_for("the forged start judged (Failed at its nodeTimeout)", WAIT, || async {
        (ann(&nodes.get(&node).await.ok()?, names::ANN_STATE).as_deref() == Some("Failed")).then_some(())
    })
    .await;
    let seen = NodeSeen::of(&nodes.get(&node).await.unwrap());
    assert!(seen.kernel == before.kernel && seen.boot == before.boot, "the kubelet's forged start moved its host: {before:?} → {seen:?}");
    let pod = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(t.client.clone(), &t.namespace).get_opt("work").await.unwrap();
    assert!(pod.is_some_and(|p| p.metadata.deletion_timestamp.is_none()), "the pod was evicted for a forged start");
    operator_log_checked(&t);
    finish(t).await;
}

/// Bump the pool's generation with a knob outside its revision and wait until
/// its status describes it: a round that began after what came before.
async fn round_after(t: &TestSpace, pool: &str, max_failed: i32) -> winpool::api::WindowsNodePoolStatus {
    let knob = json!({"spec": {"rollout": {"maxFailedNodes": max_failed}}});
    Api::<WindowsNodePool>::all(t.client.clone()).patch(pool, &PatchParams::default(), &Patch::Merge(&knob)).await.unwrap();
    observed(t, pool).await
}

/// `Failed` with reason `UpdateUndone` forged on three members (the breaker's
/// threshold): the breaker counts only outcomes the nodes' agents reported,
/// so the pool is not paused and no BadUpdateStopped Event is published.
#[tokio::test]
async fn a_nodes_patch_holder_forging_undone_updates_on_three_nodes_trips_no_breaker() {
    let mut t = fleet("forged-undone", 3, &["--apply-time=0.5s", "--reboot-time=0s"]).await;
    let pool = format!("{}-pool", t.id);
    try_apply_pool(&t, &pool_manifest(&t, &pool, PATCH, json!({}))).await.unwrap();
    t.start_operator(&[]);
    let rev = wait_converged(&t, &pool, 3).await.status.unwrap().revision.unwrap();

    let patcher = node_patcher(&t).await;
    let now = jiff::Timestamp::now().to_string();
    for i in 0..3 {
        // As the operator records an undone node (its target kept, so the
        // revision label stands as winpool's).
        let failed = json!({"metadata": {"labels": {names::LABEL_STATE: "Failed"}, "annotations": {
            names::ANN_STATE: "Failed", names::ANN_STATE_SINCE: now, names::ANN_TARGET_REVISION: rev,
            names::ANN_FAILURE_REASON: "UpdateUndone", names::ANN_FAILURE_MESSAGE: "forged"}}});
        forge(&patcher, &format!("{}{i}", t.node_prefix()), failed).await;
    }
    let status = round_after(&t, &pool, 5).await;
    let p = Api::<WindowsNodePool>::all(t.client.clone()).get(&pool).await.unwrap();
    eprintln!("[{}] after the forgery: {:?}, annotations {:?}", t.id, status.nodes, p.annotations());
    assert!(
        !p.paused_by_annotation() && !p.annotations().contains_key(names::ANN_BAD_UPDATE),
        "the breaker tripped: {:?}",
        p.annotations()
    );
    assert!(!is_true(&p, "Paused"), "{:?}", cond(&p, "Paused"));
    let events = pool_events(&t, &pool).await;
    assert!(!events.iter().any(|(r, _)| r == "BadUpdateStopped"), "{events:?}");
    finish(t).await;
}

/// A Linux node (a control plane, by its kubelet's status) that a nodes/patch
/// holder labels `kubernetes.io/os=windows` and that the pool's selector
/// matches is never a member: never labelled into the pool, never cordoned;
/// NodeConflicts names it.
#[tokio::test]
async fn a_nodes_patch_holder_labelling_a_linux_node_windows_makes_it_no_member() {
    let mut t = fleet("linux-as-windows", 1, &["--apply-time=0.5s", "--reboot-time=0s"]).await;
    let linux = format!("{}control-plane", t.node_prefix());
    let mut node = support::windows_node(&t, &linux, "6.8.0-45-generic", "1.7.22");
    let labels = node.metadata.labels.get_or_insert_default();
    labels.remove("node.kubernetes.io/windows-build");
    labels.extend([("kubernetes.io/os".into(), "linux".into()), ("node-role.kubernetes.io/control-plane".into(), String::new())]);
    let info = node.status.as_mut().and_then(|s| s.node_info.as_mut()).unwrap();
    (info.operating_system, info.os_image) = ("linux".into(), "Ubuntu 24.04.1 LTS".into());
    let nodes_api: Api<Node> = Api::all(t.client.clone());
    nodes_api.create(&PostParams::default(), &node).await.expect("the Linux node");
    let pool = format!("{}-pool", t.id);
    try_apply_pool(&t, &pool_manifest(&t, &pool, PATCH, json!({}))).await.unwrap();
    t.start_operator(&[]);
    wait_converged(&t, &pool, 1).await;

    let patcher = node_patcher(&t).await;
    forge(&patcher, &linux, json!({"metadata": {"labels": {"kubernetes.io/os": "windows"}}})).await;
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    let said = wait_for("NodeConflicts to name the Linux node", WAIT, || async {
        let n = nodes_api.get(&linux).await.ok()?;
        assert!(!n.labels().contains_key(names::LABEL_POOL) && !cordoned(&n), "the Linux node was taken in: {:?}", n.labels());
        let p = pools.get(&pool).await.ok()?;
        cond(&p, "NodeConflicts").filter(|c| c.status == "True" && c.message.contains(&linux)).map(|c| c.message.clone())
    })
    .await;
    eprintln!("[{}] NodeConflicts: {said}", t.id);
    let status = observed(&t, &pool).await;
    assert_eq!((status.nodes.total, status.nodes.updated), (1, 1), "the Linux node is no member");
    let n = nodes_api.get(&linux).await.unwrap();
    assert!(!n.labels().contains_key(names::LABEL_POOL) && !cordoned(&n) && ann(&n, names::ANN_STATE).is_none());
    finish(t).await;
}

/// A ring (rollout.follows, soakTime 1h) behind a canary that has just rolled:
/// the canary's node's `winpool.dev/state-since`, back-dated two days by a
/// nodes/patch holder, does not end the soak. The soak runs from the canary
/// pool's own status, so the ring promotes nothing and starts no node.
#[tokio::test]
async fn a_nodes_patch_holder_back_dating_a_soak_promotes_no_ring() {
    let mut t = fleet("forged-soak", 2, &["--apply-time=0.5s", "--reboot-time=0s"]).await;
    let (canary_node, ring_node) = (format!("{}0", t.node_prefix()), format!("{}1", t.node_prefix()));
    let nodes_api: Api<Node> = Api::all(t.client.clone());
    for (node, ring) in [(&canary_node, "canary"), (&ring_node, "prod")] {
        nodes_api.patch(node, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"ring": ring}}}))).await.unwrap();
    }
    let (canary, prod) = (format!("{}-canary", t.id), format!("{}-prod", t.id));
    for (pool, ring, rollout) in [(&canary, "canary", json!({})), (&prod, "prod", json!({"follows": {"pool": canary, "soakTime": "1h"}}))] {
        let mut m = pool_manifest(&t, pool, PATCH, rollout);
        m["spec"]["nodeSelector"]["matchLabels"]["ring"] = json!(ring);
        try_apply_pool(&t, &m).await.unwrap();
    }
    t.start_operator(&[]);
    wait_converged(&t, &canary, 1).await;
    let soaking = |s: &winpool::api::WindowsNodePoolStatus| {
        s.conditions.iter().any(|c| c.type_ == "Progressing" && c.reason == "AwaitingFollowedPool" && c.message.contains("soaks until"))
    };
    wait_for("the ring to soak", WAIT, || async { Some(observed(&t, &prod).await).filter(soaking) }).await;

    let patcher = node_patcher(&t).await;
    let long_ago = (jiff::Timestamp::now() - jiff::SignedDuration::from_hours(48)).to_string();
    forge(&patcher, &canary_node, json!({"metadata": {"annotations": {names::ANN_STATE_SINCE: long_ago}}})).await;
    // Both pools decide again after the back-dating.
    round_after(&t, &canary, 2).await;
    let status = round_after(&t, &prod, 2).await;
    eprintln!("[{}] the ring after the back-dating: {:?}", t.id, status.conditions.iter().find(|c| c.type_ == "Progressing"));
    assert_eq!(status.promoted_revision, None, "the ring promoted a revision that soaked minutes");
    assert!(soaking(&status), "{:?}", status.conditions);
    let n = nodes_api.get(&ring_node).await.unwrap();
    assert!(ann(&n, names::ANN_STARTED_AT).is_none() && !cordoned(&n), "the ring's node was started");
    finish(t).await;
}
