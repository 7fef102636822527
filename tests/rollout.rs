//! The rollout engine against the real control plane: the operator binary, the
//! simulated fleet and agent, real DaemonSets, scheduling, evictions and PDBs.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use support::{TestSpace, apply_pool, audit, install_crd, pool_manifest, wait_for, wait_nodes_ready};
use winpool::api::{WindowsNodePool, conditions, names};

const WAIT: Duration = Duration::from_secs(180);

fn cordoned(nodes: &[Node]) -> usize {
    nodes.iter().filter(|n| n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false)).count()
}

/// Wait until the pool reports every node updated at `rev` (or any rev when None),
/// checking on every sample that no more than `max_unavailable` nodes are cordoned.
async fn wait_rolled_out(t: &TestSpace, pool: &str, total: i32, max_unavailable: usize) -> WindowsNodePool {
    let p = support::wait_pool_done(t, pool, total, WAIT).await;
    // Every write, not samples of them: replayed from the API server's audit log.
    let in_flight = audit::max_in_flight(&audit::requests(&audit::audit_log(), &t.node_prefix()));
    assert!(in_flight <= max_unavailable, "at most {max_unavailable} nodes in flight at once, the audit log shows {in_flight}");
    p
}

/// Every node at `rev`, labelled with its pool, Updated and schedulable, but
/// the one an administrator cordoned, which is rolled and stays cordoned.
async fn assert_every_node_rolled(t: &TestSpace, pool: &str, rev: &str, admin_cordoned: &str) {
    let (pool, rev) = (pool.to_string(), rev.to_string());
    for n in t.nodes().await {
        let name = n.name_any();
        if name == admin_cordoned {
            assert_eq!(n.spec.as_ref().and_then(|s| s.unschedulable), Some(true), "the admin's cordon stays");
            assert_eq!(n.labels().get(names::LABEL_REVISION), Some(&rev), "the admin-cordoned node is rolled too");
            continue;
        }
        assert_eq!(n.labels().get(names::LABEL_POOL), Some(&pool), "{name} labelled with its pool");
        assert_eq!(n.labels().get(names::LABEL_REVISION), Some(&rev), "{name} at the target revision");
        assert_eq!(n.annotations().get(names::ANN_STATE).map(String::as_str), Some("Updated"));
        assert!(!n.annotations().contains_key(names::ANN_CORDONED_BY_WINPOOL), "{name} uncordoned");
        assert_ne!(n.spec.as_ref().and_then(|s| s.unschedulable), Some(true), "{name} schedulable");
        let info = n.status.unwrap().node_info.unwrap();
        assert_eq!(info.kernel_version, "10.0.20348.2762");
        assert_eq!(info.container_runtime_version, "containerd://1.7.22");
    }
}

/// The rollout announced itself where `kubectl describe wnp` shows it: once
/// started and once complete, and each node once in NodesStarted and NodesUpdated.
async fn assert_the_rollout_announced_itself(t: &TestSpace, pool: &str, rev: &str) {
    let pool = pool.to_string();
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(t.client.clone());
    let reasons: BTreeSet<String> = wait_for("RolloutStarted and RolloutComplete events", WAIT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        let r: BTreeSet<String> = list
            .items
            .iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pool.as_str()))
            .filter_map(|e| e.reason.clone())
            .collect();
        (r.contains("RolloutStarted") && r.contains("RolloutComplete")).then_some(r)
    })
    .await;
    assert!(!reasons.contains("NodeFailed"), "{reasons:?}");
    assert!(reasons.contains("NodesStarted") && reasons.contains("NodesUpdated"), "{reasons:?}");
    // Once each: the round after a status write may still read the status before it; it
    // must not take the same transition for a new one (the demo showed `RolloutComplete (x2)`).
    let all_events = events.list(&ListParams::default()).await.unwrap().items;
    for reason in ["RolloutStarted", "RolloutComplete"] {
        let announced: Vec<_> = all_events
            .iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pool.as_str()) && e.reason.as_deref() == Some(reason))
            .map(|e| (e.note.clone(), e.series.as_ref().map(|s| s.count)))
            .collect();
        assert_eq!(announced.len(), 1, "one {reason}: {announced:?}");
        assert_eq!(announced[0].1, None, "{reason} announced once, not again as a series: {announced:?}");
    }
    // Starts and completions are announced per round, naming the nodes: every node shows up in each kind once.
    let all_events = events.list(&ListParams::default()).await.unwrap().items;
    for reason in ["NodesStarted", "NodesUpdated"] {
        let notes: Vec<String> = all_events
            .iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pool.as_str()) && e.reason.as_deref() == Some(reason))
            .filter_map(|e| e.note.clone())
            .collect();
        for n in t.nodes().await {
            let mentions = notes.iter().filter(|note| note.split([' ', ',']).any(|w| w == n.name_any())).count();
            assert_eq!(mentions, 1, "{reason} names {} once: {notes:?}", n.name_any());
        }
        assert!(notes.iter().all(|note| note.contains(&format!("revision {rev}"))), "{notes:?}");
    }
}

#[tokio::test]
async fn a_pool_rolls_every_node_to_the_target_and_again_on_a_new_patch_level() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("rollout-basic").await;
    // Every node's containerd download is cut mid-body once (a proxy resetting it): resumed, it swaps.
    t.start_sim(6, &["--apply-time=1s", "--reboot-time=0.5s", "--host-faults=download-cut"]);
    wait_nodes_ready(&t, 6).await;
    support::protected_workload(&t, 3, 2).await;
    // An administrator cordoned this node before the rollout: it must stay cordoned after.
    let admin_cordoned = format!("{}5", t.node_prefix());
    let nodes_api: Api<Node> = Api::all(t.client.clone());
    nodes_api.patch(&admin_cordoned, &PatchParams::default(), &Patch::Merge(json!({"spec": {"unschedulable": true}}))).await.unwrap();

    let pool = format!("{}-pool", t.id);
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", json!({}))).await;
    let metrics = t.start_operator(&[]);

    let p = wait_rolled_out(&t, &pool, 6, 2).await;
    let rev = p.status.as_ref().unwrap().revision.clone().unwrap();
    // Every node's update was timed, and none is left labelled with a state.
    let updates = support::metric(metrics, &format!("winpool_node_update_duration_seconds_count{{pool=\"{pool}\"}}")).await;
    assert_eq!(updates, Some(6.0), "one update duration per node");
    let labelled = nodes_api.list(&ListParams::default().labels(&format!("{},{}", names::LABEL_STATE, t.selector()))).await.unwrap();
    assert!(
        labelled.items.is_empty(),
        "Updated nodes carry no state label: {:?}",
        labelled.items.iter().map(|n| n.name_any()).collect::<Vec<_>>()
    );
    assert_every_node_rolled(&t, &pool, &rev, &admin_cordoned).await;
    assert_the_rollout_announced_itself(&t, &pool, &rev).await;

    let ds_api: Api<DaemonSet> = Api::namespaced(t.client.clone(), &t.agent_namespace());
    let ds: Vec<String> = ds_api.list(&ListParams::default()).await.unwrap().items.iter().map(|d| d.name_any()).collect();
    assert_eq!(
        ds,
        vec![format!("winpool-{pool}"), format!("winpool-{pool}-pod-network")],
        "one agent and one pod-network DaemonSet per pool"
    );
    let cm_api: Api<ConfigMap> = Api::namespaced(t.client.clone(), &t.agent_namespace());
    let ours = ListParams::default().labels("app.kubernetes.io/managed-by=winpool");
    let cms = || async { cm_api.list(&ours).await.unwrap().items.iter().map(|c| c.name_any()).collect::<BTreeSet<String>>() };
    assert_eq!(cms().await, BTreeSet::from([format!("winpool-{pool}-{rev}")]));
    // The agents stay: a second rollout moves labels, and creates and deletes no pod.
    let pods_api: Api<Pod> = Api::namespaced(t.client.clone(), &t.agent_namespace());
    let agent_pods = || async {
        pods_api
            .list(&ListParams::default().labels("app.kubernetes.io/name=winpool-agent"))
            .await
            .unwrap()
            .items
            .iter()
            .map(|p| (p.spec.clone().unwrap().node_name.unwrap(), p.uid().unwrap()))
            .collect::<BTreeMap<String, String>>()
    };
    let pods_before = agent_pods().await;
    assert_eq!(pods_before.len(), 6, "an agent pod per node: {pods_before:?}");

    // A new patch level is a new revision: the pool rolls again and the old ConfigMap goes.
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2800", json!({}))).await;
    let p2 = wait_for("the pool to pick up the new revision", WAIT, || async {
        let p = Api::<WindowsNodePool>::all(t.client.clone()).get(&pool).await.ok()?;
        (p.status.as_ref()?.revision.as_deref() != Some(rev.as_str())).then_some(p)
    })
    .await;
    // The first rollout gave the pool its pace: the second one has an estimate and lists its nodes in flight.
    wait_for("an estimated completion and the nodes in flight", WAIT, || async {
        let st = Api::<WindowsNodePool>::all(t.client.clone()).get(&pool).await.ok()?.status?;
        let eta = st.estimated_completion_time?.0;
        let listed =
            st.updating_nodes.iter().all(|u| u.since.is_some() && ["Draining", "Applying", "Verifying"].contains(&u.state.as_str()));
        (st.average_node_update_seconds.is_some()
            && !st.updating_nodes.is_empty()
            && listed
            && eta > jiff::Timestamp::now() - jiff::SignedDuration::from_mins(1))
        .then_some(())
    })
    .await;
    let rev2 = p2.status.unwrap().revision.unwrap();
    wait_rolled_out(&t, &pool, 6, 2).await;
    for n in t.nodes().await {
        assert_eq!(n.labels().get(names::LABEL_REVISION), Some(&rev2));
        assert_eq!(n.status.unwrap().node_info.unwrap().kernel_version, "10.0.20348.2800");
    }
    wait_for("the old revision's ConfigMap to be deleted", WAIT, || async {
        (cms().await == BTreeSet::from([format!("winpool-{pool}-{rev2}")])).then_some(())
    })
    .await;
    assert_eq!(agent_pods().await, pods_before, "the same agent pods (node -> UID) after the second rollout");

    // Deleting the pool gives its nodes back and removes its DaemonSet and ConfigMaps.
    Api::<WindowsNodePool>::all(t.client.clone()).delete(&pool, &DeleteParams::default()).await.unwrap();
    wait_for("the nodes to be released", WAIT, || async {
        let nodes = t.nodes().await;
        nodes.iter().all(|n| !n.labels().contains_key(names::LABEL_POOL) && !n.annotations().contains_key(names::ANN_STATE)).then_some(())
    })
    .await;
    wait_for("the pool's DaemonSet and ConfigMaps to be deleted", WAIT, || async {
        (ds_api.list(&ListParams::default()).await.ok()?.items.is_empty() && cms().await.is_empty()).then_some(())
    })
    .await;
    wait_for("the pool to be gone", WAIT, || async {
        Api::<WindowsNodePool>::all(t.client.clone()).get_opt(&pool).await.ok()?.is_none().then_some(())
    })
    .await;
    let still = nodes_api.get(&admin_cordoned).await.unwrap();
    assert_eq!(still.spec.and_then(|s| s.unschedulable), Some(true), "releasing never lifts an admin's cordon");
    t.cleanup().await;
}

#[tokio::test]
async fn a_failing_node_pauses_the_rollout_and_is_never_left_cordoned() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("rollout-fail").await;
    let bad = format!("{}0", t.node_prefix());
    t.start_sim(3, &["--apply-time=1s", &format!("--fail-nodes={bad}")]);
    wait_nodes_ready(&t, 3).await;
    let pool = format!("{}-pool", t.id);
    // Paused until every agent has judged the revision and staged its update:
    // the nodes then start in the pool's order (the failing node first), not
    // in the order their agents' downloads happened to finish.
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxUnavailable": 1, "maxFailedNodes": 1, "paused": true}))).await;
    t.start_operator(&[]);
    let api: Api<WindowsNodePool> = Api::all(t.client.clone());
    wait_for("every agent's preflight of the pool's revision", WAIT, || async {
        let rev = api.get(&pool).await.ok()?.status?.revision?;
        let reports = t.reports().await;
        (reports.len() == 3 && reports.values().all(|r| r.preflight.as_ref().is_some_and(|p| p.revision == rev))).then_some(())
    })
    .await;
    support::wait_all_staged(&t, 3).await;
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxUnavailable": 1, "maxFailedNodes": 1}))).await;

    let p = wait_for("the pool to report the failed node and pause", WAIT, || async {
        let p = api.get(&pool).await.ok()?;
        let st = p.status.as_ref()?;
        let degraded = st.conditions.iter().any(|c| c.type_ == "Degraded" && c.status == "True");
        let paused = st.conditions.iter().any(|c| c.type_ == "Paused" && c.status == "True" && c.reason == "FailureLimitReached");
        (degraded && paused).then_some(p)
    })
    .await;
    let st = p.status.unwrap();
    assert_eq!(st.failed_nodes.len(), 1);
    assert_eq!(st.failed_nodes[0].name, bad);
    assert_eq!(st.failed_nodes[0].reason, "ApplyFailed");
    assert!(
        st.failed_nodes[0].message.to_lowercase().contains("0x800f0922"),
        "the agent's message is passed on: {}",
        st.failed_nodes[0].message
    );
    let degraded = st.conditions.iter().find(|c| c.type_ == "Degraded").unwrap();
    assert!(degraded.message.contains(&bad), "{}", degraded.message);
    // `kubectl get nodes -l winpool.dev/state=Failed` finds it, and only it.
    let failed = Api::<Node>::all(t.client.clone())
        .list(&ListParams::default().labels(&format!("{}=Failed,{}", names::LABEL_STATE, t.selector())))
        .await
        .unwrap();
    assert_eq!(failed.items.iter().map(|n| n.name_any()).collect::<Vec<_>>(), std::slice::from_ref(&bad));

    // Paused: nothing else starts, and no node stays cordoned. A spec change
    // (a rollout knob, no new revision) makes the operator decide again; once
    // it has (observedGeneration), that decision is what the nodes show.
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxUnavailable": 1, "maxFailedNodes": 1, "nodeTimeout": "4m"})))
        .await;
    wait_for("the operator to decide on the new generation", WAIT, || async {
        let p = api.get(&pool).await.ok()?;
        (p.status.as_ref()?.observed_generation == p.metadata.generation).then_some(())
    })
    .await;
    let starts = audit::starts_per_node(&audit::requests(&audit::audit_log(), &t.node_prefix()));
    assert_eq!(starts.keys().collect::<Vec<_>>(), [&bad], "only the failed node was ever started: {starts:?}");
    let nodes = t.nodes().await;
    assert_eq!(cordoned(&nodes), 0, "no node left cordoned by a paused rollout");
    let st = api.get(&pool).await.unwrap().status.unwrap();
    assert_eq!((st.nodes.failed, st.nodes.updated, st.nodes.updating, st.nodes.pending), (1, 0, 0, 2));

    // Raising maxFailedNodes lets the rest of the pool go on.
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxUnavailable": 1, "maxFailedNodes": 5}))).await;
    wait_for("the other nodes to be updated", WAIT, || async {
        let st = api.get(&pool).await.ok()?.status?;
        (st.nodes.updated == 2 && st.nodes.failed == 1).then_some(())
    })
    .await;
    t.cleanup().await;
}

#[tokio::test]
async fn a_restarted_operator_resumes_where_it_was() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("rollout-restart").await;
    t.start_sim(4, &["--apply-time=3s"]);
    wait_nodes_ready(&t, 4).await;
    let pool = format!("{}-pool", t.id);
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxUnavailable": 1}))).await;
    t.start_operator(&[]);
    // Kill it while a node is in flight.
    wait_for("a node in flight", WAIT, || async {
        t.nodes()
            .await
            .iter()
            .any(|n| n.annotations().get(names::ANN_STATE).is_some_and(|s| s == "Applying" || s == "Verifying"))
            .then_some(())
    })
    .await;
    t.stop("operator");
    t.start_operator(&[]);
    wait_rolled_out(&t, &pool, 4, 1).await;
    // From the API server's own record: every node was started (cordoned and
    // drained) exactly once, across both operators.
    let starts = support::audit::starts_per_node(&support::audit::requests(&support::audit::audit_log(), &t.node_prefix()));
    assert_eq!(starts.len(), 4, "every node started: {starts:?}");
    assert!(starts.values().all(|c| *c == 1), "no node started twice: {starts:?}");
    t.cleanup().await;
}

#[tokio::test]
async fn with_put_back_after_zero_a_pdb_holds_the_drain_until_it_allows_the_eviction() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("rollout-pdb").await;
    t.start_sim(2, &["--apply-time=1s"]);
    wait_nodes_ready(&t, 2).await;
    let first = format!("{}0", t.node_prefix());
    // One pod on the first node, protected by a PDB that allows no disruption.
    support::unevictable_pod(&t, &first, "precious").await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(t.client.clone(), &t.namespace);
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(t.client.clone(), &t.namespace);

    let pool = format!("{}-pool", t.id);
    apply_pool(
        &t,
        &pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxUnavailable": 1, "drain": {"timeout": "5m", "putBackAfter": "0s"}})),
    )
    .await;
    t.start_operator(&[]);
    let nodes_api: Api<Node> = Api::all(t.client.clone());
    wait_for("the first node to start draining", WAIT, || async {
        let n = nodes_api.get(&first).await.ok()?;
        (n.annotations().get(names::ANN_STATE).map(String::as_str) == Some("Draining")).then_some(())
    })
    .await;
    // The PDB holds: three drain rounds were refused (429, as the API server
    // recorded them) and the pod is still there, the node still Draining.
    wait_for("three evictions refused by the PodDisruptionBudget", WAIT, || async {
        (audit::refused_evictions(&audit::audit_log(), &t.namespace, "precious") >= 3).then_some(())
    })
    .await;
    assert!(pods.get_opt("precious").await.unwrap().is_some_and(|p| p.metadata.deletion_timestamp.is_none()), "never force-deleted");
    let n = nodes_api.get(&first).await.unwrap();
    assert_eq!(n.annotations().get(names::ANN_STATE).map(String::as_str), Some("Draining"));

    // The budget now allows the disruption: the pod is evicted and the rollout completes.
    pdbs.patch("precious", &PatchParams::default(), &Patch::Merge(json!({"spec": {"minAvailable": 0}}))).await.unwrap();
    wait_rolled_out(&t, &pool, 2, 1).await;
    assert!(pods.get_opt("precious").await.unwrap().is_none(), "evicted once the PDB allowed it");
    t.cleanup().await;
}

#[tokio::test]
async fn a_node_a_pdb_blocks_is_put_back_the_others_go_on_and_it_is_tried_again() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("rollout-putback").await;
    t.start_sim(3, &["--apply-time=0.5s", "--reboot-time=0.5s"]);
    wait_nodes_ready(&t, 3).await;
    let first = format!("{}0", t.node_prefix());
    support::unevictable_pod(&t, &first, "precious").await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(t.client.clone(), &t.namespace);
    let api: Api<WindowsNodePool> = Api::all(t.client.clone());
    let pool = format!("{}-pool", t.id);
    let rollout = json!({"maxUnavailable": 1, "drain": {"timeout": "5m", "putBackAfter": "3s"}});
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", rollout)).await;
    let metrics = t.start_operator(&[]);

    // The blocked node gives its slot away: the other two are updated while it waits.
    let budget = format!("{}/precious", t.namespace);
    let st = wait_for("the other nodes updated while the blocked one waits", WAIT, || async {
        let st = api.get(&pool).await.ok()?.status?;
        (st.nodes.updated == 2 && st.drain_blocked_nodes.iter().any(|b| b.name == first)).then_some(st)
    })
    .await;
    assert_eq!(st.drain_blocked_nodes[0].pod_disruption_budget, budget, "status names the budget");
    let gauge = format!("winpool_pool_nodes_drain_blocked{{pool=\"{pool}\"}}");
    assert_eq!(support::metric(metrics, &gauge).await, Some(1.0));
    assert!(audit::max_in_flight(&audit::requests(&audit::audit_log(), &t.node_prefix())) <= 1, "maxUnavailable holds");
    // Put back (Draining -> Pending, uncordoned) and tried again, from the API server's record.
    wait_for("the blocked node to be tried again", WAIT, || async {
        (audit::starts_per_node(&audit::requests(&audit::audit_log(), &t.node_prefix())).get(&first) >= Some(&2)).then_some(())
    })
    .await;
    wait_for("a DrainBlocked Event naming the budget", WAIT, || async {
        support::pool_events(&t, &pool)
            .await
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("DrainBlocked") && e.note.as_deref().is_some_and(|n| n.contains(&budget) && n.contains(&first))
            })
            .then_some(())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), &t.namespace);
    assert!(pods.get_opt("precious").await.unwrap().is_some_and(|p| p.metadata.deletion_timestamp.is_none()), "never force-deleted");

    // The budget allows the disruption: the next try drains the node and the pool completes.
    pdbs.patch("precious", &PatchParams::default(), &Patch::Merge(json!({"spec": {"minAvailable": 0}}))).await.unwrap();
    let p = wait_rolled_out(&t, &pool, 3, 1).await;
    assert!(p.status.unwrap().drain_blocked_nodes.is_empty());
    let n = Api::<Node>::all(t.client.clone()).get(&first).await.unwrap();
    assert!(!n.annotations().contains_key(names::ANN_DRAIN_BLOCKED_BY), "the block is cleared once drained");
    t.cleanup().await;
}

#[tokio::test]
async fn a_node_selected_by_two_pools_is_left_alone_and_both_say_why() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("rollout-conflict").await;
    t.start_sim(2, &["--apply-time=1s"]);
    wait_nodes_ready(&t, 2).await;
    let shared = format!("{}0", t.node_prefix());
    let (a, b) = (format!("{}-a", t.id), format!("{}-b", t.id));
    apply_pool(&t, &pool_manifest(&t, &a, "10.0.20348.2762", json!({}))).await;
    let mut second = pool_manifest(&t, &b, "10.0.20348.2762", json!({}));
    second["spec"]["nodeSelector"]["matchLabels"]["kubernetes.io/hostname"] = json!(shared);
    apply_pool(&t, &second).await;
    t.start_operator(&[]);

    let api: Api<WindowsNodePool> = Api::all(t.client.clone());
    for pool in [&a, &b] {
        let msg = wait_for(&format!("{pool} to report the shared node"), WAIT, || async {
            let st = api.get(pool).await.ok()?.status?;
            let c = st.conditions.iter().find(|c| c.type_ == "NodeConflicts" && c.status == "True")?;
            Some(c.message.clone())
        })
        .await;
        assert!(msg.contains(&shared) && msg.contains("more than one pool"), "{pool}: {msg}");
    }
    // The other node rolls; the shared one is never touched.
    support::wait_pool_done(&t, &a, 1, WAIT).await;
    let n = Api::<Node>::all(t.client.clone()).get(&shared).await.unwrap();
    assert!(!n.labels().contains_key(names::LABEL_POOL), "shared node not claimed");
    assert!(!n.annotations().contains_key(names::ANN_STATE), "shared node not rolled");
    assert_ne!(n.spec.and_then(|s| s.unschedulable), Some(true));
    t.cleanup().await;
}

#[tokio::test]
async fn csi_proxy_runs_from_a_daemonset_of_each_nodes_revision_and_moves_with_the_rollout() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("rollout-csi").await;
    t.start_sim(3, &["--apply-time=0.5s", "--reboot-time=0.5s"]);
    wait_nodes_ready(&t, 3).await;
    let pool = format!("{}-pool", t.id);
    let with_csi = |t: &TestSpace, version: &str| {
        let mut m = pool_manifest(t, &pool, "10.0.20348.2762", json!({}));
        m["spec"]["storage"] = json!({"csiProxy": {"enabled": true, "version": version}});
        m
    };
    apply_pool(&t, &with_csi(&t, "v1.1.2")).await;
    t.start_operator(&[]);
    wait_rolled_out(&t, &pool, 3, 2).await;

    let ns = t.agent_namespace();
    let pods_api: Api<Pod> = Api::namespaced(t.client.clone(), &ns);
    let ds_api: Api<DaemonSet> = Api::namespaced(t.client.clone(), &ns);
    // The CSI Proxy each node runs, as the kubelet (kwok) reports its pods: node -> image.
    let csi_pods = || async {
        let list = pods_api.list(&ListParams::default().labels("app.kubernetes.io/name=winpool-csi-proxy")).await.unwrap();
        list.items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") && p.metadata.deletion_timestamp.is_none())
            .map(|p| (p.spec.clone().unwrap().node_name.unwrap(), p.spec.clone().unwrap().containers[0].image.clone().unwrap()))
            .collect::<BTreeMap<String, String>>()
    };
    let image = |v: &str| format!("ghcr.io/kubernetes-sigs/sig-windows/csi-proxy:{v}");
    let nodes = t.nodes().await;
    let want: BTreeMap<String, String> = nodes.iter().map(|n| (n.name_any(), image("v1.1.2"))).collect();
    assert_eq!(csi_pods().await, want, "a CSI Proxy pod of the pool's version on every node");
    let reports = t.reports().await;
    for n in &nodes {
        let seen = reports.get(&n.name_any()).and_then(|r| r.csi_proxy_version.as_deref());
        assert_eq!(seen, Some("1.1.2"), "the agent on {} saw it", n.name_any());
    }
    let agent_pod_uids = || async {
        let list = pods_api.list(&ListParams::default().labels("app.kubernetes.io/name=winpool-agent")).await.unwrap();
        list.items.iter().filter_map(|p| p.uid()).collect::<BTreeSet<String>>()
    };
    let agent_pods_before = agent_pod_uids().await;

    // A new CSI Proxy version is a new revision: each node moves to the new
    // version's DaemonSet on its turn, and the old one goes with the last node.
    apply_pool(&t, &with_csi(&t, "v1.1.3")).await;
    wait_for("the pool to pick up the new CSI Proxy version", WAIT, || async {
        let p = Api::<WindowsNodePool>::all(t.client.clone()).get(&pool).await.ok()?;
        (p.status.as_ref()?.observed_generation == p.metadata.generation).then_some(())
    })
    .await;
    wait_rolled_out(&t, &pool, 3, 2).await;
    let want: BTreeMap<String, String> = t.nodes().await.iter().map(|n| (n.name_any(), image("v1.1.3"))).collect();
    wait_for("v1.1.3 on every node and the v1.1.2 DaemonSet gone", WAIT, || async {
        let ds: BTreeSet<String> = ds_api.list(&ListParams::default()).await.ok()?.items.iter().map(|d| d.name_any()).collect();
        let want_ds =
            BTreeSet::from([format!("winpool-{pool}"), format!("winpool-{pool}-pod-network"), format!("winpool-{pool}-csi-proxy-v1-1-3")]);
        (csi_pods().await == want && ds == want_ds).then_some(())
    })
    .await;
    let reports = t.reports().await;
    for n in t.nodes().await {
        assert_eq!(reports.get(&n.name_any()).and_then(|r| r.csi_proxy_version.as_deref()), Some("1.1.3"), "{}", n.name_any());
    }
    assert_eq!(agent_pod_uids().await, agent_pods_before, "a CSI Proxy upgrade restarts no agent");
    t.cleanup().await;
}

#[tokio::test]
async fn with_soak_time_the_next_node_starts_only_after_the_last_one_was_updated_that_long() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("rollout-soak").await;
    t.start_sim(2, &["--apply-time=0.5s", "--reboot-time=0.5s"]);
    wait_nodes_ready(&t, 2).await;
    let pool = format!("{}-pool", t.id);
    let soak = Duration::from_secs(12);
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxUnavailable": 1, "soakTime": "12s"}))).await;
    t.start_operator(&[]);
    wait_for("the pool to say its updated node is soaking", WAIT, || async {
        let p = Api::<WindowsNodePool>::all(t.client.clone()).get(&pool).await.ok()?;
        let c = p.status?.conditions.into_iter().find(|c| c.type_ == "Progressing")?;
        (c.status == "True" && c.reason == "Soaking").then_some(())
    })
    .await;
    wait_rolled_out(&t, &pool, 2, 1).await;

    // From the API server's record: when winpool marked each node Updated, and when it started each.
    let reqs = audit::requests(&audit::audit_log(), &t.node_prefix());
    let ours = |r: &&audit::Request| {
        r.resource == "nodes" && r.subresource.is_empty() && r.verb == "patch" && r.code == 200 && r.user_agent.starts_with("winpool/")
    };
    // Updated as of the state-since that write carried (the soak counts from
    // there; the write itself completes a little later), never after the
    // API server completed it.
    let updated: BTreeMap<String, jiff::Timestamp> = reqs
        .iter()
        .filter(ours)
        .filter(|r| r.body["metadata"]["annotations"][names::ANN_STATE] == "Updated")
        .filter_map(|r| {
            let since: jiff::Timestamp = r.body["metadata"]["annotations"][names::ANN_STATE_SINCE].as_str()?.parse().ok()?;
            assert!(since <= r.at?, "{} Updated at {since}, written at {:?}", r.name, r.at);
            Some((r.name.clone(), since))
        })
        .collect();
    let started: BTreeMap<String, jiff::Timestamp> = reqs
        .iter()
        .filter(ours)
        .filter(|r| r.body["metadata"]["annotations"][names::ANN_STARTED_AT].is_string())
        .filter_map(|r| Some((r.name.clone(), r.at?)))
        .collect();
    assert_eq!((updated.len(), started.len()), (2, 2), "updated {updated:?}, started {started:?}");
    let (first, second) = {
        let mut by_start: Vec<(&String, &jiff::Timestamp)> = started.iter().collect();
        by_start.sort_by_key(|(_, at)| **at);
        (by_start[0].0.clone(), by_start[1].0.clone())
    };
    let gap = started[&second].duration_since(updated[&first]);
    assert!(
        gap >= jiff::SignedDuration::try_from(soak).unwrap(),
        "{second} started {gap:#} after {first} was Updated; soakTime is {soak:?}"
    );
    t.cleanup().await;
}

/// "HH:MM" of `t` in `tz`.
fn hhmm(t: jiff::Timestamp, tz: &str) -> String {
    t.in_tz(tz).unwrap().strftime("%H:%M").to_string()
}

fn progressing(p: &WindowsNodePool) -> Option<(String, String, String)> {
    let st = p.status.as_ref()?;
    let c = st.conditions.iter().find(|c| c.type_ == "Progressing")?;
    (st.observed_generation == p.metadata.generation).then(|| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

#[tokio::test]
async fn maintenance_windows_and_not_allowed_dates_decide_when_nodes_start() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("rollout-windows").await;
    t.start_sim(2, &["--apply-time=0.5s", "--reboot-time=0.5s"]);
    wait_nodes_ready(&t, 2).await;
    let api: Api<WindowsNodePool> = Api::all(t.client.clone());
    let pool = format!("{}-pool", t.id);
    let now = jiff::Timestamp::now();
    let hour = jiff::SignedDuration::from_hours(1);
    // A daily window that opens in three hours (UTC).
    let later = json!({"start": hhmm(now + 3 * hour, "UTC"), "end": hhmm(now + 4 * hour, "UTC")});
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxUnavailable": 1, "maintenanceWindows": [later]}))).await;
    let metrics = t.start_operator(&[]);
    let window_open = format!("winpool_pool_window_open{{pool=\"{pool}\"}}");

    let p = wait_for("the pool to wait for its window", WAIT, || async {
        let p = api.get(&pool).await.ok()?;
        (progressing(&p)?.1 == "OutsideMaintenanceWindow").then_some(p)
    })
    .await;
    let st = p.status.clone().unwrap();
    let opens: jiff::Timestamp = st.next_window_start.as_ref().expect("status.nextWindowStart").0;
    let closes: jiff::Timestamp = st.next_window_end.as_ref().expect("status.nextWindowEnd").0;
    let from_now = opens.duration_since(now);
    assert!(from_now > 2 * hour + jiff::SignedDuration::from_mins(58) && from_now <= 3 * hour, "opens in ~3 h: {opens}");
    assert_eq!(closes.duration_since(opens), hour);
    assert!(progressing(&p).unwrap().2.contains(&opens.to_string()), "the condition says when it opens");
    assert_eq!(support::metric(metrics, &window_open).await, Some(0.0));
    // That decision started nobody.
    assert!(audit::starts_per_node(&audit::requests(&audit::audit_log(), &t.node_prefix())).is_empty());
    // Nothing to do before the window and nothing failed: what a GitOps wait
    // (kstatus) reads says "current", not "in progress" for hours.
    let kstatus: Vec<(String, String, String)> = ["Ready", "Reconciling", "Stalled"]
        .iter()
        .filter_map(|t| st.conditions.iter().find(|c| c.type_ == *t).map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone())))
        .collect();
    let want = [
        ("Ready", "True", "WaitingForMaintenanceWindow"),
        ("Reconciling", "False", "OutsideMaintenanceWindow"),
        ("Stalled", "False", "NotStalled"),
    ];
    assert_eq!(kstatus, want.map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())));

    // A second window, open now in Kolkata (UTC+05:30): any open window is
    // enough. It opens once a month, on the date it opened on there (an
    // overnight window belongs to the day it opens).
    let opened_on = (now - hour).in_tz("Asia/Kolkata").unwrap().day();
    let open_now = json!({"absoluteMonthly": {"dayOfMonth": opened_on}, "start": hhmm(now - hour, "Asia/Kolkata"), "end": hhmm(now + hour, "Asia/Kolkata"), "timeZone": "Asia/Kolkata"});
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxUnavailable": 1, "maintenanceWindows": [later, open_now]})))
        .await;
    let p = wait_rolled_out(&t, &pool, 2, 1).await;
    // The rollout waited for its window from the first round; it is announced when the window opens.
    wait_for("a RolloutStarted Event once the window opened", WAIT, || async {
        support::pool_events(&t, &pool).await.iter().any(|e| e.reason.as_deref() == Some("RolloutStarted")).then_some(())
    })
    .await;
    let end: jiff::Timestamp = p.status.unwrap().next_window_end.unwrap().0;
    assert!((end.duration_since(now) - hour).abs() < jiff::SignedDuration::from_mins(2), "the open window closes in ~1 h: {end}");
    assert_eq!(support::metric(metrics, &window_open).await, Some(1.0));

    // A change freeze over yesterday, today and tomorrow (UTC days) closes the open window: a new patch level waits.
    let today = now.in_tz("UTC").unwrap().date();
    let freeze = json!([{"start": today.yesterday().unwrap().to_string(), "end": today.tomorrow().unwrap().to_string()}]);
    let rollout = json!({"maxUnavailable": 1, "maintenanceWindows": [later, open_now], "notAllowedDates": freeze});
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2800", rollout)).await;
    let p = wait_for("the new revision to wait out the freeze", WAIT, || async {
        let p = api.get(&pool).await.ok()?;
        (progressing(&p)?.1 == "OutsideMaintenanceWindow").then_some(p)
    })
    .await;
    let opens: jiff::Timestamp = p.status.unwrap().next_window_start.unwrap().0;
    let after_freeze = today.checked_add(jiff::ToSpan::days(2)).unwrap().in_tz("UTC").unwrap().timestamp();
    assert!(opens >= after_freeze, "the next window opens after the freeze ({after_freeze}): {opens}");
    assert_eq!(support::metric(metrics, &window_open).await, Some(0.0));
    t.cleanup().await;
}

/// The drain settings SUC's and kubectl's users rely on, on the real API
/// server: podSelector leaves the pods it does not match on the node,
/// gracePeriod is what each eviction asks for, a pod no controller owns holds
/// the drain until drain.timeout fails the node naming it, and with force it
/// is evicted like the rest; a pod whose deletion never completes (a
/// finalizer stands in for a kubelet that never confirms) is waited for
/// only skipWaitForDeleteTimeout.
#[tokio::test]
async fn drain_options_decide_which_pods_leave_and_how() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("rollout-drainopts").await;
    t.start_sim(1, &["--apply-time=0.5s", "--reboot-time=0.5s"]);
    wait_nodes_ready(&t, 1).await;
    let node = format!("{}0", t.node_prefix());
    support::pod_on_node(&t, &node, "leaves").await;
    support::pod_on_node(&t, &node, "stays").await;
    support::bare_pod_on_node(&t, &node, "bare", vec![]).await;
    support::pod_on_node(&t, &node, "lingers").await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), &t.namespace);
    let hold = json!({"metadata": {"finalizers": ["winpool-tests/hold"]}});
    pods.patch("lingers", &PatchParams::default(), &Patch::Merge(&hold)).await.unwrap();

    let pool = format!("{}-pool", t.id);
    let drain = |force: bool| {
        json!({"timeout": "15s", "gracePeriod": "7s", "force": force, "skipWaitForDeleteTimeout": "3s",
               "podSelector": {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["stays"]}]}})
    };
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxUnavailable": 1, "maxFailedNodes": 0, "drain": drain(false)})))
        .await;
    t.start_operator(&[]);
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    let failed = wait_for("the node to fail its drain on the pod no controller owns", WAIT, || async {
        let p = pools.get(&pool).await.ok()?;
        p.status?.failed_nodes.into_iter().find(|f| f.name == node)
    })
    .await;
    assert_eq!(failed.reason, "DrainTimeout");
    assert!(
        failed.message.contains(&format!("pod {}/bare has no controller to recreate it (rollout.drain.force evicts it)", t.namespace)),
        "{}",
        failed.message
    );
    assert!(pods.get_opt("leaves").await.unwrap().is_none(), "the selected, managed pod was evicted");
    let evictions = |pod: &str| {
        audit::requests(&audit::audit_log(), pod)
            .into_iter()
            .filter(|r| r.subresource == "eviction" && r.namespace == t.namespace && r.name == pod)
            .collect::<Vec<_>>()
    };
    let leaves = evictions("leaves");
    assert!(!leaves.is_empty(), "evicted through the Eviction API");
    assert!(leaves.iter().all(|r| r.body["deleteOptions"]["gracePeriodSeconds"] == 7), "gracePeriod: {:?}", leaves[0].body);
    assert!(evictions("bare").is_empty(), "a pod no controller owns is not evicted without force");

    // With force, a retry evicts it too; the pod podSelector leaves out stays through the update.
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxUnavailable": 1, "maxFailedNodes": 0, "drain": drain(true)})))
        .await;
    let retry = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-winpool"))
        .args(["retry", &node])
        .env("KUBECONFIG", support::kubeconfig())
        .output()
        .expect("kubectl-winpool runs");
    assert!(retry.status.success(), "{}", String::from_utf8_lossy(&retry.stderr));
    wait_rolled_out(&t, &pool, 1, 1).await;
    assert!(pods.get_opt("bare").await.unwrap().is_none(), "evicted with force");
    assert!(!evictions("bare").is_empty());
    let stays = pods.get_opt("stays").await.unwrap().expect("the pod podSelector leaves out is still there");
    assert!(stays.metadata.deletion_timestamp.is_none());
    assert!(evictions("stays").is_empty(), "never asked to leave");
    let lingers = pods.get_opt("lingers").await.unwrap().expect("its deletion never completes");
    assert!(lingers.metadata.deletion_timestamp.is_some(), "evicted, still terminating: not waited for past skipWaitForDeleteTimeout");
    pods.patch("lingers", &PatchParams::default(), &Patch::Merge(&json!({"metadata": {"finalizers": null}}))).await.unwrap();
    t.cleanup().await;
}

/// A node a person labels winpool.dev/hold=true is never started while the
/// rest of the pool rolls, and the pool says why it waits; once the label
/// goes, the node rolls too.
#[tokio::test]
async fn a_node_held_by_its_label_is_never_started_until_the_label_goes() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("rollout-hold").await;
    t.start_sim(3, &["--apply-time=0.5s", "--reboot-time=0.5s"]);
    wait_nodes_ready(&t, 3).await;
    let held = format!("{}1", t.node_prefix());
    let nodes_api: Api<Node> = Api::all(t.client.clone());
    let hold = |on: bool| json!({"metadata": {"labels": {names::LABEL_HOLD: on.then_some("true")}}});
    nodes_api.patch(&held, &PatchParams::default(), &Patch::Merge(hold(true))).await.unwrap();
    let pool = format!("{}-pool", t.id);
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxUnavailable": 2}))).await;
    t.start_operator(&[]);

    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    let msg = wait_for("the others updated and the pool saying it waits for the held node", WAIT, || async {
        let st = pools.get(&pool).await.ok()?.status?;
        let c = st.conditions.iter().find(|c| c.type_ == "Progressing" && c.reason == "NodesHeld")?;
        (st.nodes.updated == 2).then(|| c.message.clone())
    })
    .await;
    assert!(msg.contains(&held), "{msg}");
    let n = nodes_api.get(&held).await.unwrap();
    assert!(!n.annotations().contains_key(names::ANN_STARTED_AT), "the held node was never started");
    assert_ne!(n.spec.as_ref().and_then(|s| s.unschedulable), Some(true), "nor cordoned");

    nodes_api.patch(&held, &PatchParams::default(), &Patch::Merge(hold(false))).await.unwrap();
    wait_rolled_out(&t, &pool, 3, 2).await;
    t.cleanup().await;
}

/// One update failing with one code on nodes of two pools pauses both before
/// they touch more than the breaker's threshold plus the nodes in flight; a
/// person's resume of one pool stands while the same failures stay.
#[tokio::test]
async fn an_update_that_fails_everywhere_pauses_every_pool_targeting_it() {
    const LCU: &str = "10.0.20348.2762";
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("rollout-bad-update").await;
    t.start_sim(10, &["--apply-time=0.5s", "--reboot-time=0.5s", "--host-faults=bad-update"]);
    wait_nodes_ready(&t, 10).await;
    let pools = [format!("{}-a", t.id), format!("{}-b", t.id)];
    for (i, pool) in pools.iter().enumerate() {
        // Five nodes each; each pool would tolerate all five failing on its own.
        let mut m = pool_manifest(&t, pool, LCU, json!({"maxUnavailable": 2, "maxFailedNodes": 5}));
        let hosts: Vec<String> = (i * 5..i * 5 + 5).map(|n| format!("{}{n}", t.node_prefix())).collect();
        m["spec"]["nodeSelector"]["matchExpressions"] = json!([{"key": "kubernetes.io/hostname", "operator": "In", "values": hosts}]);
        apply_pool(&t, &m).await;
    }
    t.start_operator(&["--bad-update-threshold=2"]);

    let api: Api<WindowsNodePool> = Api::all(t.client.clone());
    let key = format!("{LCU}/0x800F0922");
    for pool in &pools {
        wait_for(&format!("{pool} to pause itself for the bad update"), WAIT, || async {
            let p = api.get(pool).await.ok()?;
            let paused = p.annotations().get(names::ANN_PAUSED).map(String::as_str) == Some(names::PAUSED_BY_BREAKER);
            let recorded = p.annotations().get(names::ANN_BAD_UPDATE) == Some(&key);
            let st = p.status?;
            let c = st.conditions.iter().find(|c| c.type_ == winpool::api::conditions::PAUSED && c.status == "True")?;
            (paused && recorded && c.reason == "BadUpdate" && c.message.contains("0x800F0922")).then_some(())
        })
        .await;
    }
    // Nodes in flight at the pause finish (and fail); then count what was touched.
    let nodes_api: Api<Node> = Api::all(t.client.clone());
    let touched = |nodes: &[Node], pool: Option<&str>| {
        nodes
            .iter()
            .filter(|n| pool.is_none_or(|p| n.labels().get(names::LABEL_POOL).map(String::as_str) == Some(p)))
            .filter(|n| n.annotations().contains_key(names::ANN_STARTED_AT))
            .count()
    };
    let nodes = wait_for("the nodes in flight at the pause to fail", WAIT, || async {
        let nodes = nodes_api.list(&ListParams::default().labels(&format!("{}={}", support::TEST_LABEL, t.id))).await.ok()?.items;
        let failed = nodes.iter().filter(|n| n.annotations().get(names::ANN_STATE).map(String::as_str) == Some("Failed")).count();
        (failed == touched(&nodes, None)).then_some(nodes)
    })
    .await;
    let (threshold, in_flight) = (2, 2 + 2);
    eprintln!("touched before both pools paused: {} of 10 nodes", touched(&nodes, None));
    assert!(touched(&nodes, None) <= threshold + in_flight, "touched {} of 10", touched(&nodes, None));
    let a_before = touched(&nodes, Some(&pools[0]));
    assert!(a_before < 5, "pool a has nodes left to start");

    // A person resumes pool a: it starts nodes again, and the same failures do not pause it again.
    api.patch(&pools[0], &PatchParams::default(), &Patch::Merge(&json!({"metadata": {"annotations": {names::ANN_PAUSED: null}}})))
        .await
        .unwrap();
    let a = wait_for("pool a to fail one more node after its resume", WAIT, || async {
        let p = api.get(&pools[0]).await.ok()?;
        (p.status.as_ref()?.nodes.failed as usize > a_before).then_some(p)
    })
    .await;
    assert_eq!(a.annotations().get(names::ANN_PAUSED), None, "the resume stands");
    let b = api.get(&pools[1]).await.unwrap();
    assert_eq!(b.annotations().get(names::ANN_PAUSED).map(String::as_str), Some(names::PAUSED_BY_BREAKER), "pool b stays paused");
    t.cleanup().await;
}

/// `maxUnavailablePerZone: 1` over three zones of two nodes: the pool rolls
/// with `maxUnavailable: 4`, but never has two nodes of one zone out at once
/// (every node write replayed from the audit log).
#[tokio::test]
async fn max_unavailable_per_zone_keeps_one_node_per_zone_out() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("rollout-zones").await;
    t.start_sim(6, &["--apply-time=1s", "--reboot-time=0.5s"]);
    wait_nodes_ready(&t, 6).await;
    let nodes_api: Api<Node> = Api::all(t.client.clone());
    let zone_of = |i: usize| format!("z{}", i / 2);
    for i in 0..6 {
        let label = json!({"metadata": {"labels": {"topology.kubernetes.io/zone": zone_of(i)}}});
        nodes_api.patch(&format!("{}{i}", t.node_prefix()), &PatchParams::default(), &Patch::Merge(label)).await.unwrap();
    }
    let pool = format!("{}-pool", t.id);
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxUnavailable": 4, "maxUnavailablePerZone": 1}))).await;
    t.start_operator(&[]);
    wait_rolled_out(&t, &pool, 6, 4).await;

    let requests = audit::requests(&audit::audit_log(), &t.node_prefix());
    for z in 0..3 {
        let zone: Vec<String> = (2 * z..2 * z + 2).map(|i| format!("{}{i}", t.node_prefix())).collect();
        let of_zone: Vec<_> = requests.iter().filter(|r| zone.contains(&r.name)).cloned().collect();
        assert_eq!(audit::max_in_flight(&of_zone), 1, "zone z{z}: one node out at a time");
    }
    t.cleanup().await;
}

/// Rings (rollout.follows): the second pool starts only once every node of
/// the first ran the revision for the soak time, records what it promoted,
/// and is stopped by the first pool's failures.
#[tokio::test]
async fn a_ring_starts_only_what_soaked_in_the_pool_it_follows_and_stops_when_that_pool_degrades() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("rollout-rings").await;
    t.start_sim(4, &["--apply-time=1s", "--reboot-time=0.5s"]);
    wait_nodes_ready(&t, 4).await;
    let nodes_api: Api<Node> = Api::all(t.client.clone());
    let prefix = t.node_prefix();
    let node = |i: usize| format!("{prefix}{i}");
    let ring_of = |i: usize| if i < 2 { "canary" } else { "prod" };
    for i in 0..4 {
        let label = json!({"metadata": {"labels": {"ring": ring_of(i)}}});
        nodes_api.patch(&node(i), &PatchParams::default(), &Patch::Merge(label)).await.unwrap();
    }
    let (canary, prod) = (format!("{}-canary", t.id), format!("{}-prod", t.id));
    let manifest = |t: &TestSpace, name: &str, ring: &str, patch: &str, rollout: serde_json::Value| {
        let mut m = pool_manifest(t, name, patch, rollout);
        m["spec"]["nodeSelector"]["matchLabels"]["ring"] = json!(ring);
        m
    };
    let soak = Duration::from_secs(15);
    let follows = json!({"follows": {"pool": canary, "soakTime": "15s"}});
    apply_pool(&t, &manifest(&t, &canary, "canary", "10.0.20348.2762", json!({}))).await;
    apply_pool(&t, &manifest(&t, &prod, "prod", "10.0.20348.2762", follows.clone())).await;
    t.start_operator(&[]);

    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    let progressing = |pool: String| {
        let pools = pools.clone();
        async move {
            let st = pools.get(&pool).await.ok()?.status?;
            st.conditions.into_iter().find(|c| c.type_ == "Progressing")
        }
    };
    // While the canary rolls and soaks, the ring says why it waits.
    let held = wait_for("the ring to wait for its canary", WAIT, || async {
        progressing(prod.clone()).await.filter(|c| c.reason == "AwaitingFollowedPool").map(|c| c.message)
    })
    .await;
    assert!(held.contains(&canary), "{held}");
    support::wait_pool_done(&t, &canary, 2, WAIT).await;
    let p = support::wait_pool_done(&t, &prod, 2, WAIT).await;
    let st = p.status.unwrap();
    assert_eq!(st.promoted_revision, st.revision, "the ring records what it promoted");

    // Replayed from the API server's record: when the canary's nodes were
    // recorded Updated (their state-since, to the second), and when the API
    // server took the ring's first start.
    let requests = audit::requests(&audit::audit_log(), &t.node_prefix());
    let state_writes = |to: &str, nodes: &[String]| {
        requests
            .iter()
            .filter(|r| nodes.contains(&r.name) && r.verb == "patch" && r.code == 200)
            .filter(|r| r.body["metadata"]["annotations"]["winpool.dev/state"] == to)
            .cloned()
            .collect::<Vec<_>>()
    };
    let since = |r: &audit::Request| r.body["metadata"]["annotations"]["winpool.dev/state-since"].as_str()?.parse::<jiff::Timestamp>().ok();
    let canary_done = state_writes("Updated", &[node(0), node(1)]).iter().filter_map(since).max().expect("canary nodes Updated");
    let prod_first = state_writes("Draining", &[node(2), node(3)]).iter().filter_map(|r| r.at).min().expect("ring nodes started");
    let waited = prod_first.duration_since(canary_done);
    assert!(waited.as_secs_f64() >= soak.as_secs_f64(), "the ring's first start came {waited:?} after its canary's last update");

    // The canary fails the next patch level on one node: the ring never starts it, and says why.
    let fail = json!({"metadata": {"labels": {"winpool.dev/sim-fail": "true"}}});
    nodes_api.patch(&node(1), &PatchParams::default(), &Patch::Merge(fail)).await.unwrap();
    apply_pool(&t, &manifest(&t, &canary, "canary", "10.0.20348.2800", json!({}))).await;
    apply_pool(&t, &manifest(&t, &prod, "prod", "10.0.20348.2800", follows)).await;
    let held = wait_for("the ring to stop for its degraded canary", WAIT, || async {
        progressing(prod.clone()).await.filter(|c| c.reason == "AwaitingFollowedPool" && c.message.contains("Degraded")).map(|c| c.message)
    })
    .await;
    assert!(held.contains(&node(1)), "names the canary's failed node: {held}");
    let next = pools.get(&prod).await.unwrap().status.unwrap().revision.unwrap();
    let requests = audit::requests(&audit::audit_log(), &t.node_prefix());
    let ring_starts: Vec<_> =
        audit::drains_per_node(&requests).into_keys().filter(|(n, rev)| *rev == next && n != &node(0) && n != &node(1)).collect();
    assert!(ring_starts.is_empty(), "the ring started {ring_starts:?}");
    t.cleanup().await;
}

/// --max-nodes-in-flight bounds every pool's nodes in flight together: three
/// pools at maxUnavailable 2 would take six nodes at once, the bound three.
#[tokio::test]
async fn the_operators_bound_on_nodes_in_flight_holds_across_pools() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("rollout-cluster-bound").await;
    t.start_sim(6, &["--apply-time=2s", "--reboot-time=0.5s"]);
    wait_nodes_ready(&t, 6).await;
    let nodes_api: Api<Node> = Api::all(t.client.clone());
    let prefix = t.node_prefix();
    for i in 0..6 {
        let label = json!({"metadata": {"labels": {"part": format!("p{}", i / 2)}}});
        nodes_api.patch(&format!("{prefix}{i}"), &PatchParams::default(), &Patch::Merge(label)).await.unwrap();
    }
    let pools: Vec<String> = (0..3).map(|i| format!("{}-p{i}", t.id)).collect();
    for (i, pool) in pools.iter().enumerate() {
        let mut m = pool_manifest(&t, pool, "10.0.20348.2762", json!({"maxUnavailable": 2}));
        m["spec"]["nodeSelector"]["matchLabels"]["part"] = json!(format!("p{i}"));
        apply_pool(&t, &m).await;
    }
    t.start_operator(&["--max-nodes-in-flight=3"]);
    for pool in &pools {
        support::wait_pool_done(&t, pool, 2, WAIT).await;
    }
    // Every write, replayed from the API server's audit log, across the pools.
    let in_flight = audit::max_in_flight(&audit::requests(&audit::audit_log(), &prefix));
    assert!(in_flight <= 3, "at most 3 nodes in flight across the pools, the audit log shows {in_flight}");
    t.cleanup().await;
}

/// A node that joins a pool below its patch level is patched before any pod
/// lands on it: one registered with the taint winpool.dev/unpatched keeps it
/// until winpool has updated it, one that joined without it gets it, and
/// neither is bound a pod while tainted (replayed from the audit log).
#[tokio::test]
async fn a_scale_out_node_is_patched_before_any_pod_lands_on_it() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("rollout-scale-out").await;
    t.start_sim(2, &["--apply-time=1s", "--reboot-time=0.5s"]);
    wait_nodes_ready(&t, 2).await;
    let pool = format!("{}-pool", t.id);
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxUnavailable": 1}))).await;
    t.start_operator(&[]);
    support::wait_pool_done(&t, &pool, 2, WAIT).await;

    // Two nodes join below the patch level: one as a node image registers with the taint, one
    // without. Both are held (winpool.dev/hold) while a workload is scheduled, so they stay
    // Pending, unpatched, for as long as the scheduler looks for room.
    let nodes_api: Api<Node> = Api::all(t.client.clone());
    let (registered, bare) = (format!("{}new-0", t.node_prefix()), format!("{}new-1", t.node_prefix()));
    let held = |name: &str| {
        let mut node = support::windows_node(&t, name, "10.0.20348.2700", "1.7.20");
        node.metadata.labels.get_or_insert_default().insert(names::LABEL_HOLD.into(), "true".into());
        node
    };
    let mut node = held(&registered);
    node.spec = Some(serde_json::from_value(json!({"taints": [{"key": names::TAINT_UNPATCHED, "effect": "NoSchedule"}]})).unwrap());
    nodes_api.create(&Default::default(), &node).await.unwrap();
    nodes_api.create(&Default::default(), &held(&bare)).await.unwrap();
    // winpool taints the one that came without (a node image should register with it:
    // until winpool's first look, the scheduler may place pods on it).
    wait_for(&format!("{bare} to be tainted"), WAIT, || async {
        let node = nodes_api.get(&bare).await.ok()?;
        node.spec?.taints?.iter().any(|t| t.key == names::TAINT_UNPATCHED).then_some(())
    })
    .await;
    // Ready, and the node lifecycle controller's not-ready taint gone: winpool's is the only one left.
    wait_for("the new nodes to be Ready with only winpool's taint", WAIT, || async {
        for n in [&registered, &bare] {
            let node = nodes_api.get(n).await.ok()?;
            let ready = node.status.as_ref()?.conditions.as_ref()?.iter().any(|c| c.type_ == "Ready" && c.status == "True");
            let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
            (ready && taints.iter().all(|t| t.key == names::TAINT_UNPATCHED)).then_some(())?;
        }
        Some(())
    })
    .await;
    // Pods that would spread onto the new nodes were they free of the taint.
    support::protected_workload(&t, 6, 0).await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), &t.namespace);
    let placed = wait_for("every pod to be scheduled", WAIT, || async {
        let list = pods.list(&ListParams::default().labels("app=web")).await.ok()?.items;
        let on: Vec<String> = list.iter().filter_map(|p| p.spec.as_ref()?.node_name.clone()).collect();
        (on.len() == 6).then_some(on)
    })
    .await;
    assert!(!placed.contains(&registered) && !placed.contains(&bare), "no pod on an unpatched node: {placed:?}");
    for n in [&registered, &bare] {
        nodes_api
            .patch(n, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {names::LABEL_HOLD: null}}})))
            .await
            .unwrap();
    }
    support::wait_pool_done(&t, &pool, 4, WAIT).await;
    for n in [&registered, &bare] {
        let node = nodes_api.get(n).await.unwrap();
        let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
        assert!(!taints.iter().any(|t| t.key == names::TAINT_UNPATCHED), "{n}: untainted once Updated");
    }

    let log = audit::audit_log();
    let node_patches = audit::requests(&log, &t.node_prefix());
    let taint_writes = |node: &str, present: bool| -> Vec<jiff::Timestamp> {
        node_patches
            .iter()
            .filter(|r| r.name == node && r.verb == "patch" && r.code == 200 && r.user_agent.starts_with("winpool/"))
            .filter(|r| {
                let body = r.body.to_string();
                body.contains(names::TAINT_UNPATCHED) && (body.contains("\"remove\"") != present)
            })
            .filter_map(|r| r.at)
            .collect()
    };
    assert!(!taint_writes(&bare, true).is_empty(), "winpool tainted the node that joined without the taint");
    let bindings: Vec<(String, jiff::Timestamp)> = audit::requests(&log, "web-")
        .into_iter()
        .filter(|r| r.namespace == t.namespace && r.resource == "pods" && r.subresource == "binding" && r.code == 201)
        .filter_map(|r| Some((r.body["target"]["name"].as_str()?.to_string(), r.at?)))
        .collect();
    assert!(!bindings.is_empty(), "the workload was scheduled");
    for n in [&registered, &bare] {
        let untainted = *taint_writes(n, false).iter().max().expect("winpool removed the taint");
        let early: Vec<_> = bindings.iter().filter(|(to, at)| to == n && *at < untainted).collect();
        assert!(early.is_empty(), "{n}: pods bound before it was patched: {early:?}");
    }
    t.cleanup().await;
}

/// A test space with two simulated Windows nodes, Ready, and a Linux node of
/// its own (cleaned up with it) where the hooks' pods run (kwok completes
/// them): `nodeSelector: {winpool-test/hooks: <test id>}`.
async fn two_nodes_and_a_hook_runner(name: &str) -> TestSpace {
    install_crd(&support::client().await).await;
    let mut t = TestSpace::new(name).await;
    t.start_sim(2, &["--apply-time=1s", "--reboot-time=0.5s"]);
    wait_nodes_ready(&t, 2).await;
    let runner = format!("{}hooks", t.node_prefix());
    let mut node = support::windows_node(&t, &runner, "6.1.0", "1.7.22");
    let labels = node.metadata.labels.get_or_insert_default();
    labels.insert("kubernetes.io/os".into(), "linux".into());
    labels.insert("winpool-test/hooks".into(), t.id.clone());
    labels.remove("node.kubernetes.io/windows-build");
    Api::<Node>::all(t.client.clone()).create(&Default::default(), &node).await.unwrap();
    t
}

/// The leader's wall clock steps half an hour ahead mid-install (an NTP
/// step, a VM resumed), between two of its learns of the API server's time:
/// the node in flight is not timed out (its nodeTimeout is 15m) and finishes,
/// the next one is held with ClockSkewed, and once the clock is back the
/// rollout finishes with no failure.
#[tokio::test]
async fn a_wall_clock_step_mid_install_times_nothing_out_and_is_reported_as_skew() {
    install_crd(&support::client().await).await;
    let mut t = TestSpace::new("clock-step").await;
    t.start_sim(2, &["--apply-time=40s", "--reboot-time=0.5s"]);
    wait_nodes_ready(&t, 2).await;
    let pool = format!("{}-pool", t.id);
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxUnavailable": 1, "nodeTimeout": "15m"}))).await;
    let skew = t.temp_dir().join("clock-skew-seconds");
    std::fs::write(&skew, "0").unwrap();
    t.start_operator_with_env("operator", &[], &support::kubeconfig(), &support::skewed_clock::env_stepped_by(&skew));

    let nodes_api: Api<Node> = Api::all(t.client.clone());
    let state = |n: &Node| n.annotations().get(names::ANN_STATE).cloned().unwrap_or_default();
    let node = wait_for("a node installing", WAIT, || async {
        t.nodes().await.into_iter().find(|n| state(n) == "Applying").map(|n| n.name_any())
    })
    .await;
    std::fs::write(&skew, "1800").unwrap();
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    wait_for("the pool to report the skew", WAIT, || async {
        let st = pools.get(&pool).await.ok()?.status?;
        st.conditions.iter().any(|c| c.type_ == conditions::PROGRESSING && c.reason == "ClockSkewed").then_some(())
    })
    .await;
    assert_eq!(state(&nodes_api.get(&node).await.unwrap()), "Updated", "the step timed the node out");
    std::fs::write(&skew, "0").unwrap();
    let done = support::wait_pool_done(&t, &pool, 2, WAIT).await;
    assert_eq!(done.status.map(|s| s.failed_nodes.len()), Some(0), "no node failed");
    t.cleanup().await;
}

/// A hook Job still running when its node's start ends is deleted, not left
/// to run to its deadline: here the pool stops selecting the node while its
/// pre-drain hook's pod waits for a node that never comes.
#[tokio::test]
async fn a_hook_job_outliving_its_nodes_start_is_deleted() {
    use k8s_openapi::api::batch::v1::Job;
    let mut t = two_nodes_and_a_hook_runner("hook-orphan").await;
    let hook = json!({"image": "registry.k8s.io/pause:3.10", "timeout": "10m", "nodeSelector": {"winpool-test/hooks": "nowhere"}});
    let pool = format!("{}-pool", t.id);
    let mut manifest = pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxUnavailable": 1, "hooks": {"preDrain": hook}}));
    apply_pool(&t, &manifest).await;
    t.start_operator(&[&format!("--hooks-namespace={}", t.namespace)]);
    let jobs: Api<Job> = Api::namespaced(t.client.clone(), &t.namespace);
    let job = wait_for("a pre-drain hook Job", WAIT, || async {
        jobs.list(&ListParams::default()).await.ok()?.items.into_iter().next().map(|j| j.name_any())
    })
    .await;
    let deadline = jobs.get(&job).await.unwrap().spec.and_then(|s| s.active_deadline_seconds).unwrap();
    assert!(deadline <= 180, "bounded by the node's nodeTimeout 3m, not the hook's 10m: {deadline}s");

    manifest["spec"]["nodeSelector"]["matchLabels"]["winpool-test/none"] = json!("x");
    apply_pool(&t, &manifest).await;
    wait_for("the hook Job deleted with its node's start", WAIT, || async {
        match jobs.get_opt(&job).await {
            Ok(None) => Some(()),
            Ok(Some(j)) => j.metadata.deletion_timestamp.map(|_| ()),
            Err(_) => None,
        }
    })
    .await;
    t.cleanup().await;
}

/// A hook Job the API server refuses is its node's trouble, not the pool's:
/// an admission policy refuses the first node's pre-drain Job, and the second
/// node still runs its hook, is drained of its pod and updated, while the
/// first waits (cordoned, undrained) with a `HookJobNotCreated` Event naming
/// it; once the policy goes, the first node's Job is created and it finishes.
#[tokio::test]
async fn a_refused_hook_job_holds_only_its_node_and_the_pools_other_drains_go_on() {
    use k8s_openapi::api::admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding};
    use k8s_openapi::api::batch::v1::Job;
    let mut t = two_nodes_and_a_hook_runner("hook-refused").await;
    let nodes_api: Api<Node> = Api::all(t.client.clone());
    let (refused, other) = (format!("{}0", t.node_prefix()), format!("{}1", t.node_prefix()));
    support::pod_on_node(&t, &other, "work").await;

    // The policy: no Job for the first node in this test's namespace.
    let policy = format!("{}-no-hook-for-node0", t.id);
    let vaps: Api<ValidatingAdmissionPolicy> = Api::all(t.client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(t.client.clone());
    let vap: ValidatingAdmissionPolicy = serde_json::from_value(json!({"metadata": {"name": policy}, "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["jobs"]}]},
        "validations": [{"expression": format!("!has(object.metadata.annotations) || !('{0}' in object.metadata.annotations) || object.metadata.annotations['{0}'] != '{refused}'", names::ANN_HOOK_NODE),
                         "message": "no hook Job for this node (test policy)"}]}}))
    .unwrap();
    vaps.create(&Default::default(), &vap).await.unwrap();
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({"metadata": {"name": policy}, "spec": {
        "policyName": policy, "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": t.namespace}}}}}))
    .unwrap();
    bindings.create(&Default::default(), &binding).await.unwrap();
    // In force before the operator starts: a dry run of such a Job is refused.
    let jobs: Api<Job> = Api::namespaced(t.client.clone(), &t.namespace);
    let probe: Job = serde_json::from_value(json!({"metadata": {"name": "probe", "annotations": {names::ANN_HOOK_NODE: refused}},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}}))
    .unwrap();
    let dry = kube::api::PostParams { dry_run: true, ..Default::default() };
    wait_for("the test policy in force", WAIT, || async { jobs.create(&dry, &probe).await.is_err().then_some(()) }).await;

    let hook = json!({"image": "registry.k8s.io/pause:3.10", "timeout": "2m", "nodeSelector": {"winpool-test/hooks": t.id}});
    let pool = format!("{}-pool", t.id);
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxUnavailable": 2, "hooks": {"preDrain": hook}}))).await;
    let hooks_ns = format!("--hooks-namespace={}", t.namespace);
    t.start_operator(&[&hooks_ns]);

    let state = |n: &Node| n.annotations().get(names::ANN_STATE).cloned().unwrap_or_default();
    wait_for("the other node Updated, its pod evicted", WAIT, || async {
        let n = nodes_api.get(&other).await.ok()?;
        (state(&n) == "Updated").then_some(())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), &t.namespace);
    assert!(pods.get_opt("work").await.unwrap().is_none_or(|p| p.metadata.deletion_timestamp.is_some()), "its pod was evicted");
    let first = nodes_api.get(&refused).await.unwrap();
    assert_eq!(state(&first), "Draining", "the refused node waits for its hook");
    assert!(first.annotations().get(names::ANN_DRAINED_REVISION).is_none(), "and is not drained");
    let named = wait_for("a HookJobNotCreated Event naming the node", WAIT, || async {
        support::pool_events(&t, &pool).await.into_iter().find(|e| {
            e.reason.as_deref() == Some("HookJobNotCreated") && e.note.as_deref().is_some_and(|n| n.starts_with(&format!("{refused}:")))
        })
    })
    .await;
    assert_eq!(named.type_.as_deref(), Some("Warning"));

    // The policy gone, the next round creates the Job and the node goes on.
    bindings.delete(&policy, &Default::default()).await.unwrap();
    vaps.delete(&policy, &Default::default()).await.unwrap();
    support::wait_pool_done(&t, &pool, 2, WAIT).await;
    t.cleanup().await;
}

/// `rollout.hooks` on the real API server: the Job controller runs the hook
/// Jobs, kwok completes their pods on a Linux node. A pre-drain hook whose
/// Job fails (its pod lands nowhere and the deadline stops it) holds its
/// node, uncordoned and never drained; once the hook can run, each node's
/// pre-drain Job completes before the node is drained and its post-update
/// Job completes before it is uncordoned as Updated.
#[tokio::test]
async fn a_failing_pre_drain_hook_holds_its_node_and_a_passing_one_runs_before_its_drain() {
    use k8s_openapi::api::batch::v1::Job;
    let mut t = two_nodes_and_a_hook_runner("rollout-hooks").await;
    let nodes_api: Api<Node> = Api::all(t.client.clone());

    let hook = |runs_on: &str, timeout: &str| {
        json!({"image": "registry.k8s.io/pause:3.10", "timeout": timeout, "onFailure": "Hold",
               "nodeSelector": {"winpool-test/hooks": runs_on}})
    };
    let pool = format!("{}-pool", t.id);
    let manifest = |pre: serde_json::Value| {
        pool_manifest(
            &t,
            &pool,
            "10.0.20348.2762",
            json!({"maxUnavailable": 1, "hooks": {"preDrain": pre, "postUpdate": hook(&t.id, "2m")}}),
        )
    };
    let (failing, fixed) = (manifest(hook("nowhere", "3s")), manifest(hook(&t.id, "2m")));
    apply_pool(&t, &failing).await;
    let hooks_ns = format!("--hooks-namespace={}", t.namespace);
    t.start_operator(&[&hooks_ns]);

    // Each node in turn: its pre-drain Job fails at its deadline, the node is held.
    let members: Vec<String> = (0..2).map(|i| format!("{}{i}", t.node_prefix())).collect();
    let held = wait_for("both nodes held by their failed pre-drain hook", WAIT, || async {
        let mut held = Vec::new();
        for n in &members {
            let node = nodes_api.get(n).await.ok()?;
            (node.labels().get(names::LABEL_HOLD).map(String::as_str) == Some("true")).then_some(())?;
            held.push(node);
        }
        Some(held)
    })
    .await;
    for node in &held {
        let ann = node.annotations();
        assert_eq!(ann.get(names::ANN_STATE).map(String::as_str), Some("Pending"), "{}", node.name_any());
        assert!(!node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false), "{}: uncordoned", node.name_any());
        assert!(ann.get(names::ANN_DRAINED_REVISION).is_none(), "{}: never drained", node.name_any());
        let why = ann.get(names::ANN_HOLD_REASON).cloned().unwrap_or_default();
        assert!(why.contains("DeadlineExceeded") && why.contains("logs job/winpool-pre-drain-"), "{why}");
    }

    // The hook fixed and the holds lifted: the rollout goes through both hooks on every node.
    apply_pool(&t, &fixed).await;
    for n in &members {
        nodes_api
            .patch(n, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {names::LABEL_HOLD: null}}})))
            .await
            .unwrap();
    }
    support::wait_pool_done(&t, &pool, 2, WAIT).await;

    let jobs: Vec<Job> = Api::<Job>::namespaced(t.client.clone(), &t.namespace).list(&ListParams::default()).await.unwrap().items;
    let log = audit::audit_log();
    let node_patches = audit::requests(&log, &t.node_prefix());
    // When winpool first wrote `state` to this value on the node, after `after`.
    let wrote_state = |node: &str, state: &str, after: jiff::Timestamp| -> Option<jiff::Timestamp> {
        node_patches
            .iter()
            .filter(|r| r.name == node && r.verb == "patch" && r.code == 200 && r.user_agent.starts_with("winpool/"))
            .filter(|r| {
                r.body.pointer(&format!("/metadata/annotations/{}", names::ANN_STATE.replace('/', "~1"))).and_then(|v| v.as_str())
                    == Some(state)
            })
            .filter_map(|r| r.at)
            .find(|at| *at > after)
    };
    for n in &members {
        let done = |kind: &str| -> jiff::Timestamp {
            let job = jobs
                .iter()
                .filter(|j| j.labels().get(names::LABEL_HOOK).map(String::as_str) == Some(kind))
                .filter(|j| j.annotations().get(names::ANN_HOOK_NODE) == Some(n))
                .find(|j| j.status.as_ref().and_then(|s| s.succeeded) == Some(1))
                .unwrap_or_else(|| panic!("{n}: no succeeded {kind} Job"));
            let env = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers[0].env.clone().unwrap_or_default();
            assert!(env.iter().any(|e| e.name == "WINPOOL_NODE" && e.value.as_deref() == Some(n.as_str())), "{n}: its name passed in");
            job.status.as_ref().and_then(|s| s.completion_time.as_ref()).map(|t| t.0).expect("completed")
        };
        let (pre, post) = (done("pre-drain"), done("post-update"));
        let applying = wrote_state(n, "Applying", jiff::Timestamp::UNIX_EPOCH).expect("drained into Applying");
        assert!(pre < applying, "{n}: pre-drain hook done at {pre}, drained by {applying}");
        let updated = wrote_state(n, "Updated", post - jiff::SignedDuration::from_secs(1));
        assert!(updated.is_some_and(|u| u >= post), "{n}: Updated ({updated:?}) only after its post-update hook ({post})");
        assert!(post > applying, "{n}: the post-update hook ran after the update");
    }
}

/// Under --max-nodes-in-flight, a pool held by the bound gets the next free
/// slot: the pool that rolls, whose finished node wakes it at once, does not
/// take the slot back while another waits (replayed from the audit log).
#[tokio::test]
async fn under_the_bound_across_pools_the_longest_waiting_pool_gets_the_next_slot() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("rollout-bound-turns").await;
    // Installs long enough that pool b, once its agents judged the revision, waits while a's run.
    t.start_sim(6, &["--apply-time=8s", "--reboot-time=0.5s"]);
    wait_nodes_ready(&t, 6).await;
    let nodes_api: Api<Node> = Api::all(t.client.clone());
    let prefix = t.node_prefix();
    // Pool a: four nodes; pool b: two.
    for i in 0..6 {
        let label = json!({"metadata": {"labels": {"part": if i < 4 { "a" } else { "b" }}}});
        nodes_api.patch(&format!("{prefix}{i}"), &PatchParams::default(), &Patch::Merge(label)).await.unwrap();
    }
    let manifest = |part: &str, paused: bool| {
        let mut m = pool_manifest(&t, &format!("{}-{part}", t.id), "10.0.20348.2762", json!({"maxUnavailable": 2, "paused": paused}));
        m["spec"]["nodeSelector"]["matchLabels"]["part"] = json!(part);
        m
    };
    let (a, b_paused, b) = (manifest("a", false), manifest("b", true), manifest("b", false));
    apply_pool(&t, &a).await;
    apply_pool(&t, &b_paused).await;
    t.start_operator(&["--max-nodes-in-flight=2"]);
    // Pool a fills the bound; then pool b is resumed and waits for a slot.
    wait_for("pool a to fill the bound", WAIT, || async {
        let nodes = nodes_api.list(&ListParams::default().labels(&format!("{},part=a", t.selector()))).await.ok()?.items;
        let in_flight =
            nodes.iter().filter(|n| n.annotations().get(names::ANN_STATE).is_some_and(|s| s == "Draining" || s == "Applying")).count();
        (in_flight == 2).then_some(())
    })
    .await;
    apply_pool(&t, &b).await;
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    let b_name = format!("{}-b", t.id);
    let waiting_since = wait_for("pool b to wait for a slot", WAIT, || async {
        let p = pools.get(&b_name).await.ok()?;
        let c = p.status?.conditions.into_iter().find(|c| c.type_ == "Progressing")?;
        // Its transition time is when Progressing turned False (the pause): our own clock says when it waits.
        (c.reason == "ClusterLimitReached").then(jiff::Timestamp::now)
    })
    .await;
    for part in ["a", "b"] {
        support::wait_pool_done(&t, &format!("{}-{part}", t.id), if part == "a" { 4 } else { 2 }, WAIT).await;
    }

    // The starts in the order the API server took them, by pool.
    let parts: BTreeMap<String, &str> = (0..6).map(|i| (format!("{prefix}{i}"), if i < 4 { "a" } else { "b" })).collect();
    let mut starts: Vec<(jiff::Timestamp, &str)> = audit::requests(&audit::audit_log(), &prefix)
        .iter()
        .filter(|r| r.verb == "patch" && r.code == 200 && r.user_agent.starts_with("winpool/"))
        .filter(|r| {
            r.body["metadata"]["annotations"][names::ANN_STATE] == "Draining"
                && r.body["metadata"]["annotations"][names::ANN_STARTED_AT].is_string()
        })
        .filter_map(|r| Some((r.at?, *parts.get(&r.name)?)))
        .collect();
    starts.sort();
    let order: Vec<&str> = starts.iter().map(|(_, p)| *p).collect();
    // Both of a's first nodes finish together and free two slots: one is kept
    // for b, which waits, so a takes one more and b the other, where first
    // come would give a both (a, a, a, a, b, b).
    let before_b: Vec<_> = starts.iter().take_while(|(_, p)| *p == "a").collect();
    assert!(before_b.len() <= 3, "pool b, waiting from {waiting_since}, started only after pool a's {} starts: {order:?}", before_b.len());
    let in_flight = audit::max_in_flight(&audit::requests(&audit::audit_log(), &prefix));
    assert!(in_flight <= 2, "at most 2 nodes in flight across the pools, the audit log shows {in_flight}");
    t.cleanup().await;
}

/// `os.patchPolicy`: a pool whose patch level follows its update source
/// rolls to the cumulative update the nodes' (simulated) WSUS approves, with
/// no person bumping `os.patchLevel`, records the build it lands on, and
/// rolls again when WSUS approves the next month's. The resolution is the
/// agents' own search, the build the Nodes' kernelVersion.
#[tokio::test]
async fn a_pool_following_its_update_source_rolls_to_what_wsus_approves() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("patch-policy").await;
    let approval = t.temp_dir().join("wsus-approved");
    std::fs::create_dir_all(t.temp_dir()).unwrap();
    let days_ago = |days: i64| jiff::Timestamp::now() - jiff::SignedDuration::from_hours(24 * days);
    std::fs::write(&approval, format!("10.0.20348.2762 {}", days_ago(30))).unwrap();
    t.start_sim(3, &["--apply-time=1s", &format!("--wsus-approved-file={}", approval.display())]);
    wait_nodes_ready(&t, 3).await;
    let pool = format!("{}-pool", t.id);
    let mut body = pool_manifest(&t, &pool, "10.0.20348.2700", json!({"maxUnavailable": 3}));
    body["spec"]["os"]["patchPolicy"] = json!({"source": "UpdateSource", "checkInterval": "10s"});
    apply_pool(&t, &body).await;
    t.start_operator(&[]);
    let api: Api<WindowsNodePool> = Api::all(t.client.clone());
    let rolled_to = |kb: &'static str, build: &'static str| {
        let (api, pool, t) = (api.clone(), pool.clone(), &t);
        async move {
            wait_for(&format!("the pool resolved to {kb} and every node updated to {build}"), WAIT, || async {
                let st = api.get(&pool).await.ok()?.status?;
                let resolved = st.resolved_patch.as_ref()?;
                let kernels: Vec<String> =
                    t.nodes().await.iter().filter_map(|n| Some(n.status.as_ref()?.node_info.as_ref()?.kernel_version.clone())).collect();
                (resolved.kb == kb
                    && resolved.build.as_deref() == Some(build)
                    && st.nodes.updated == 3
                    && kernels.iter().all(|k| k == build))
                .then_some(st)
            })
            .await
        }
    };
    let st = rolled_to("KB5002762", "10.0.20348.2762").await;
    let condition = st.conditions.iter().find(|c| c.type_ == conditions::PATCH_RESOLVED).expect("a PatchResolved condition");
    assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("True", "Resolved"), "{}", condition.message);

    // Next month: WSUS approves the next update; nobody edits the pool.
    std::fs::write(&approval, format!("10.0.20348.2800 {}", days_ago(2))).unwrap();
    rolled_to("KB5002800", "10.0.20348.2800").await;
    assert_eq!(api.get(&pool).await.unwrap().spec.os.patch_level, "10.0.20348.2700", "the spec is the person's: untouched");
    t.cleanup().await;
}
