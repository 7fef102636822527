//! HNS readiness against the real control plane: the pool's capacity condition
//! from the cluster's Services and EndpointSlices, the Node condition and
//! taint while a rebooted node's HNS catches up, and rollout gating on it.

use crate::support;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{TEST_LABEL, TestSpace, audit, install_crd, wait_for};
use winpool::api::{WindowsNodePool, names};

const WAIT: Duration = Duration::from_secs(180);

/// A selector-less Service with a hand-made EndpointSlice of `ready` addresses.
async fn service_with_endpoints(t: &TestSpace, name: &str, ready: &[&str]) {
    let svc = Service {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(ServiceSpec { ports: Some(vec![ServicePort { port: 80, ..Default::default() }]), ..Default::default() }),
        status: None,
    };
    Api::<Service>::namespaced(t.client.clone(), &t.namespace).create(&PostParams::default(), &svc).await.unwrap();
    let slice = EndpointSlice {
        metadata: ObjectMeta {
            name: Some(format!("{name}-1")),
            labels: Some([("kubernetes.io/service-name".to_string(), name.to_string())].into()),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        endpoints: Some(
            ready
                .iter()
                .map(|a| Endpoint {
                    addresses: vec![a.to_string()],
                    conditions: Some(EndpointConditions { ready: Some(true), ..Default::default() }),
                    ..Default::default()
                })
                .collect(),
        ),
        // As the EndpointSlice controller writes them: kube-proxy programs a Service
        // port only for endpoints of the slice port with the same name ("" here).
        ports: Some(vec![EndpointPort { name: Some(String::new()), port: Some(80), protocol: Some("TCP".into()), ..Default::default() }]),
    };
    Api::<EndpointSlice>::namespaced(t.client.clone(), &t.namespace).create(&PostParams::default(), &slice).await.unwrap();
}

fn has_hns_taint(n: &Node) -> bool {
    n.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|t| t.iter().any(|t| t.key == names::TAINT_HNS_NOT_READY))
}

fn hns_condition(n: &Node) -> Option<String> {
    n.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == names::NODE_CONDITION_HNS_READY).map(|c| c.status.clone())
}

#[tokio::test]
async fn capacity_readiness_taint_and_gating_follow_the_clusters_services() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("hns").await;
    service_with_endpoints(&t, "web", &["10.77.0.1", "10.77.0.2", "10.77.0.3"]).await;
    t.start_sim(3, &["--apply-time=1s", "--hns=auto", "--hns-sync-time=4s"]);
    support::wait_nodes_ready(&t, 3).await;

    let pool = format!("{}-pool", t.id);
    let body = json!({
        "apiVersion": "winpool.dev/v1alpha1", "kind": "WindowsNodePool",
        "metadata": {"name": pool, "labels": {TEST_LABEL: t.id}},
        "spec": {
            "nodeSelector": {"matchLabels": {TEST_LABEL: t.id}},
            "os": {"version": "ltsc2022", "patchLevel": "10.0.20348.2762"},
            "hns": {"maxLoadBalancers": 1, "maxBackendsPerService": 2, "tolerancePercent": 0},
            // Paused until the fresh nodes' HNS has caught up with the cluster's
            // Services (their agents start before the nodes' turn, HNS fills up
            // after their boot): the rollout then meets HNS behind its own cordon.
            "rollout": {"maxUnavailable": 3, "nodeTimeout": "3m", "paused": true},
        }
    });
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    pools.patch(&pool, &PatchParams::apply("winpool-tests").force(), &Patch::Apply(&body)).await.unwrap();
    t.start_operator(&[]);

    // Capacity: more load balancers than the limit of 1, and "web" has 3 backends > 2.
    let st = wait_for("HNSCapacity Exceeded naming the service", WAIT, || async {
        let st = pools.get(&pool).await.ok()?.status?;
        let hns = st.hns.clone()?;
        (hns.state == winpool::decision::hns::CapacityState::Exceeded
            && hns.services_over_backend_limit.iter().any(|s| s.ends_with("/web")))
        .then_some(st)
    })
    .await;
    let hns = st.hns.unwrap();
    assert!(hns.expected_load_balancers >= 2, "{hns:?}");
    assert_eq!(hns.limit_load_balancers, 1);
    assert!(hns.services_over_backend_limit.contains(&format!("{}/web", t.namespace)), "{hns:?}");
    let cond = st.conditions.iter().find(|c| c.type_ == "HNSCapacity").unwrap();
    assert_eq!((cond.status.as_str(), cond.reason.as_str()), ("False", "Exceeded"));
    assert!(cond.message.contains("load balancers"), "{}", cond.message);

    wait_for("every fresh node's HNS caught up, untainted", WAIT, || async {
        let nodes = t.nodes().await;
        (nodes.len() == 3 && nodes.iter().all(|n| hns_condition(n).as_deref() == Some("True") && !has_hns_taint(n))).then_some(())
    })
    .await;
    let mut resumed = body.clone();
    resumed["spec"]["rollout"]["paused"] = json!(false);
    pools.patch(&pool, &PatchParams::apply("winpool-tests").force(), &Patch::Apply(&resumed)).await.unwrap();

    // Readiness: after its update each node reports zero counts and is NotReady, then
    // catches up; the rollout waits for that. Winpool holds the node cordoned meanwhile,
    // which keeps pods off without a taint write; a NotReady node is never schedulable
    // without the taint.
    let mut held_seen = BTreeSet::new();
    let started = std::time::Instant::now();
    loop {
        for n in t.nodes().await {
            if hns_condition(&n).as_deref() == Some("False") {
                let cordoned = n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
                assert!(cordoned || has_hns_taint(&n), "{}: HNS not ready, yet schedulable and untainted", n.name_any());
                assert_ne!(n.annotations().get(names::ANN_STATE).map(String::as_str), Some("Updated"), "gated until HNS is ready");
                if cordoned && !has_hns_taint(&n) {
                    held_seen.insert(n.name_any());
                }
            }
        }
        let st = pools.get(&pool).await.unwrap().status.unwrap();
        if st.nodes.updated == 3 {
            break;
        }
        assert!(started.elapsed() < WAIT, "rollout did not finish: {:?}", st.nodes);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(!held_seen.is_empty(), "rebooted nodes waited for HNS behind winpool's cordon");
    let first_revision = pools.get(&pool).await.unwrap().status.unwrap().revision.unwrap_or_default();
    for n in t.nodes().await {
        assert!(!has_hns_taint(&n), "{} untainted once caught up", n.name_any());
        assert_eq!(hns_condition(&n).as_deref(), Some("True"), "{}", n.name_any());
    }

    // HNS slower than hns.readyTimeout: the node is uncordoned anyway, and then the
    // taint is what keeps pods off until HNS catches up.
    t.stop("sim");
    t.start_sim(3, &["--apply-time=1s", "--hns=auto", "--hns-sync-time=25s"]);
    let mut body = resumed.clone();
    body["spec"]["os"]["patchLevel"] = json!("10.0.20348.2800");
    body["spec"]["hns"]["readyTimeout"] = json!("2s");
    pools.patch(&pool, &PatchParams::apply("winpool-tests").force(), &Patch::Apply(&body)).await.unwrap();
    let mut tainted_seen = BTreeSet::new();
    let started = std::time::Instant::now();
    loop {
        let nodes = t.nodes().await;
        for n in &nodes {
            if hns_condition(n).as_deref() == Some("False") {
                let cordoned = n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
                assert!(cordoned || has_hns_taint(n), "{}: HNS not ready, yet schedulable and untainted", n.name_any());
                if !cordoned {
                    tainted_seen.insert(n.name_any());
                }
            }
        }
        let st = pools.get(&pool).await.unwrap().status.unwrap();
        let caught_up = nodes.iter().all(|n| hns_condition(n).as_deref() == Some("True") && !has_hns_taint(n));
        if st.nodes.updated == 3 && st.revision.as_deref() != Some(first_revision.as_str()) && caught_up {
            break;
        }
        assert!(started.elapsed() < WAIT, "second rollout did not finish and catch up: {:?}", st.nodes);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(!tainted_seen.is_empty(), "nodes uncordoned after hns.readyTimeout carried the taint until HNS caught up");

    // A new Service raises the expected counts: nodes fall behind, then the sim catches them up.
    service_with_endpoints(&t, "api", &["10.77.1.1"]).await;
    wait_for("nodes to report the new totals and stay ready", WAIT, || async {
        let lb = pools.get(&pool).await.ok()?.status?.hns?.expected_load_balancers;
        let nodes = t.nodes().await;
        let reports = t.reports().await;
        nodes
            .iter()
            .all(|n| {
                let reported = reports.get(&n.name_any()).and_then(|r| r.hns_load_balancers);
                reported == Some(lb as i64) && hns_condition(n).as_deref() == Some("True")
            })
            .then_some(())
    })
    .await;
    t.cleanup().await;
}

/// `kubectl apply` of a Service, as a person runs it: whether it passed, and
/// what kubectl printed (admission warnings come on stderr).
fn kubectl_apply(t: &TestSpace, manifest: &serde_json::Value, dry_run: bool) -> (bool, String) {
    let file = std::env::temp_dir().join(format!("{}-{}.json", t.id, manifest["metadata"]["name"].as_str().unwrap()));
    std::fs::write(&file, manifest.to_string()).unwrap();
    let mut cmd = std::process::Command::new(support::tool("kubectl"));
    cmd.arg("--kubeconfig").arg(support::kubeconfig()).args(["apply", "-n", &t.namespace, "-f"]).arg(&file);
    if dry_run {
        cmd.arg("--dry-run=server");
    }
    let out = cmd.output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// The chart's HNS admission policy (hnsAdmission) for this test's namespace, applied.
fn apply_hns_admission(t: &TestSpace, release: &str, action: &str) {
    let sets = [
        "hnsAdmission.enabled=true".into(),
        format!("hnsAdmission.action={action}"),
        format!("hnsAdmission.namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name={}", t.namespace),
        format!("hnsAdmission.poolSelector.matchLabels.{TEST_LABEL}={}", t.id),
    ];
    support::chart::apply_chart_templates(t, release, &sets, &["hns-admission-policy"]);
}

fn service(name: &str, headless: bool) -> serde_json::Value {
    let mut spec = json!({"ports": [{"port": 80}]});
    if headless {
        spec["clusterIP"] = json!("None");
    }
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec})
}

/// A Service over a pool's room for HNS load balancers (its status.hns, as
/// the operator keeps it) draws a warning at `kubectl apply` naming the pool
/// and the numbers (Warn), or is refused (Deny); a headless Service, which
/// adds none, passes.
#[tokio::test]
async fn a_service_past_a_pools_hns_headroom_is_warned_of_or_refused_at_apply() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("hns-admission").await;
    let release = format!("{}-r", t.id);
    let pool = format!("{}-pool", t.id);
    // A limit of one load balancer: the cluster's Services (the kubernetes
    // Service at least) already fill it, whatever other tests add meanwhile.
    let mut m = support::pool_manifest(&t, &pool, "10.0.20348.2762", json!({}));
    m["spec"]["hns"] = json!({"maxLoadBalancers": 1});
    support::apply_pool(&t, &m).await;
    apply_hns_admission(&t, &release, "Warn");
    t.start_operator(&[]);
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    let hns = wait_for("the pool to count its HNS load", WAIT, || async { pools.get(&pool).await.ok()?.status?.hns }).await;
    assert!(hns.limit_load_balancers == 1 && hns.expected_load_balancers >= 1, "{hns:?}");

    // A policy takes effect a moment after it is created: probed with server-side dry runs.
    wait_for("the policy to warn", WAIT, || async {
        kubectl_apply(&t, &service("probe", false), true).1.contains("Warning").then_some(())
    })
    .await;
    let (ok, said) = kubectl_apply(&t, &service("web", false), false);
    assert!(ok, "Warn lets it through: {said}");
    assert!(said.contains("adds 1 HNS load balancers") && said.contains(&format!("pool {pool} has room for 0 more")), "{said}");
    let (ok, said) = kubectl_apply(&t, &service("headless", true), false);
    assert!(ok && !said.contains("Warning"), "a headless Service adds no load balancer: {said}");
    // "web" has no pods: on no node yet, but its load balancer is on its way and counted so.
    wait_for("the pool to count web's load balancer as awaited", WAIT, || async {
        (pools.get(&pool).await.ok()?.status?.hns?.awaiting_load_balancers >= 1).then_some(())
    })
    .await;

    apply_hns_admission(&t, &release, "Deny");
    wait_for("the policy to refuse", WAIT, || async { (!kubectl_apply(&t, &service("probe", false), true).0).then_some(()) }).await;
    let (ok, said) = kubectl_apply(&t, &service("api", false), false);
    assert!(!ok && said.contains(&format!("pool {pool} has room for 0 more")) && said.contains("of its 1 in use"), "{said}");
    assert!(Api::<Service>::namespaced(t.client.clone(), &t.namespace).get_opt("api").await.unwrap().is_none(), "not created");
    // A change is judged on what it adds: an external IP adds one per port; a label adds nothing.
    let mut grown = service("web", false);
    grown["spec"]["externalIPs"] = json!(["192.0.2.10"]);
    let (ok, said) = kubectl_apply(&t, &grown, false);
    assert!(!ok && said.contains("adds 1 HNS load balancers"), "an update that grows past the room: {said}");
    let mut labelled = service("web", false);
    labelled["metadata"]["labels"] = json!({"tier": "web"});
    let (ok, said) = kubectl_apply(&t, &labelled, false);
    assert!(ok && !said.contains("Warning"), "an update that adds nothing passes: {said}");

    let _ = std::process::Command::new(support::tool("kubectl"))
        .arg("--kubeconfig")
        .arg(support::kubeconfig())
        .args(["delete", "validatingadmissionpolicy,validatingadmissionpolicybinding", &format!("{release}-winpool-hns-headroom")])
        .output();
    t.cleanup().await;
}

/// rollout.hnsPacing on the real control plane. A burst of changes to the
/// EndpointSlices of 20 one-port Services (each replaces its Service's load
/// balancer and moves two remote endpoints: 600 + 2 × 24 ms on Windows Server
/// 2019, the published pace; kube-proxy programs a Service once per sync,
/// so they are 20 different Services) puts about 13 s of programming in
/// front of every WS2019 node's HNS. A pool of such nodes with a 4 s budget,
/// unpaused right after the burst, says it waits for HNS and starts its first
/// node no earlier than 20 × 648 ms − 4 s = 8.96 s after the burst began (the
/// API server's record of the start), then rolls out.
#[tokio::test]
async fn a_rollout_waits_until_the_nodes_hns_can_program_a_burst_of_changes() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("hns-pacing").await;
    for i in 0..20 {
        service_with_endpoints(&t, &format!("burst-{i}"), &[&format!("10.78.{i}.1")]).await;
    }
    t.start_sim(2, &["--os=ltsc2019", "--build=10.0.17763.6293", "--apply-time=0.5s", "--reboot-time=0.5s", "--hns=auto"]);
    support::wait_nodes_ready(&t, 2).await;
    let pool = format!("{}-pool", t.id);
    let mut body = support::pool_manifest(&t, &pool, "10.0.17763.6414", json!({"hnsPacing": {"budget": "4s"}, "paused": true}));
    body["spec"]["os"]["version"] = json!("ltsc2019");
    support::apply_pool(&t, &body).await;
    t.start_operator(&[]);
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    // The operator's watches hold the Service: what changes from now on is a change.
    wait_for("the pool's status to count the Service", WAIT, || async {
        (pools.get(&pool).await.ok()?.status?.hns?.expected_load_balancers >= 20).then_some(())
    })
    .await;

    let slices: Api<EndpointSlice> = Api::namespaced(t.client.clone(), &t.namespace);
    let began = jiff::Timestamp::now();
    for i in 0..20 {
        let endpoints = json!([{"addresses": [format!("10.78.{i}.2")], "conditions": {"ready": true}}]);
        slices.patch(&format!("burst-{i}-1"), &PatchParams::default(), &Patch::Merge(json!({"endpoints": endpoints}))).await.unwrap();
    }
    body["spec"]["rollout"]["paused"] = json!(false);
    support::apply_pool(&t, &body).await;

    wait_for("Progressing to say the rollout waits for HNS", WAIT, || async {
        let c = pools.get(&pool).await.ok()?.status?.conditions.into_iter().find(|c| c.type_ == "Progressing")?;
        (c.reason == "WaitingForHNS").then_some(())
    })
    .await;
    wait_for("every node Updated", WAIT, || async {
        let st = pools.get(&pool).await.ok()?.status?;
        assert_eq!(st.nodes.failed, 0, "{:?}", st.failed_nodes);
        (st.nodes.updated == 2).then_some(())
    })
    .await;

    let first_start = audit::requests(&audit::audit_log(), &t.node_prefix())
        .into_iter()
        .filter(|r| r.resource == "nodes" && r.verb == "patch" && r.code == 200 && r.user_agent.starts_with("winpool/"))
        .filter(|r| r.body["metadata"]["annotations"][names::ANN_STARTED_AT].is_string())
        .filter_map(|r| r.at)
        .min()
        .expect("the API server recorded the nodes' starts");
    let waited = first_start.duration_since(began);
    eprintln!("[{}] the first node started {waited:#} after the burst began", t.id);
    assert!(
        waited >= jiff::SignedDuration::from_millis(8_960),
        "the first node started {waited:#} after the burst began; the backlog allowed none before 8.96s"
    );
    t.cleanup().await;
}

/// The HNS of 3 nodes of 12 collapses (`hns-collapse`: its load balancers
/// drop to 3 of the 12 or more the cluster needs while the node runs,
/// kubernetes#110849) 15 s after it
/// caught up. Each of the 3 turns WindowsHNSReady=False with reason
/// Collapsed within 60 s of the collapse (the fleet's record of when it
/// struck against the condition's transition), is tainted, and has a Warning
/// Event naming it; none of the other 9 is ever said to have collapsed or
/// drifted, and they stay ready.
#[tokio::test]
async fn a_collapsed_hns_is_named_tainted_and_announced_within_a_minute_on_those_nodes_only() {
    let (mut t, collapsing, stats, pool, metrics) = collapsing_fleet("hns-collapse", 79, 12, &[2, 5, 9], &[], json!({})).await;

    let nodes: Api<Node> = Api::all(t.client.clone());
    let transitions = wait_for("the 3 nodes' HNS said Collapsed and tainted", WAIT, || async {
        let mut at = Vec::new();
        for name in &collapsing {
            let n = nodes.get(name).await.ok()?;
            let c = n.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == names::NODE_CONDITION_HNS_READY)?.clone();
            if c.status != "False" || c.reason.as_deref() != Some("Collapsed") || !has_hns_taint(&n) {
                return None;
            }
            at.push((name.clone(), c.last_transition_time?.0));
        }
        Some(at)
    })
    .await;
    for n in t.nodes().await.iter().filter(|n| !collapsing.contains(&n.name_any())) {
        assert_eq!(hns_condition(n).as_deref(), Some("True"), "{} never collapsed", n.name_any());
        assert!(!has_hns_taint(n), "{} is not tainted", n.name_any());
    }
    let said = wait_for("a Warning Event for each collapsed node", WAIT, || async {
        let said: BTreeSet<String> = support::pool_events(&t, &pool)
            .await
            .iter()
            .filter(|e| matches!(e.reason.as_deref(), Some("HNSCollapsed" | "HNSDrifted")))
            .filter_map(|e| e.related.as_ref()?.name.clone())
            .collect();
        (said.len() >= collapsing.len()).then_some(said)
    })
    .await;
    assert_eq!(said, collapsing.iter().cloned().collect::<BTreeSet<_>>(), "a Warning Event for each collapsed node, and for no other");
    // Timed from each agent's first read of the collapsed counts: once per node, each within the minute.
    let series = |s: &str| format!("winpool_hns_loss_detection_seconds_{s}{{pool=\"{pool}\",reason=\"Collapsed\"}}");
    let (count, sum) = (support::metric(metrics, &series("count")).await, support::metric(metrics, &series("sum")).await);
    eprintln!("[{}] loss detection: {count:?} nodes, {sum:?} s in all", t.id);
    assert_eq!(count, Some(3.0), "one detection per collapsed node");
    assert!(sum.is_some_and(|s| (0.0..=180.0).contains(&s)), "detections within a minute each: {sum:?} s in all");

    assert!(t.terminate("sim").is_some_and(|s| s.success()), "the fleet stops cleanly on SIGTERM");
    let machines: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    for (node, condition_at) in transitions {
        let m = machines.iter().find(|m| m["node"] == node.as_str()).unwrap_or_else(|| panic!("{node} in {machines:?}"));
        let struck: jiff::Timestamp = m["hnsFaultAt"].as_str().unwrap_or_else(|| panic!("{node}: {m}")).parse().unwrap();
        // The condition's time has whole seconds: a second's slack below.
        let took = condition_at.duration_since(struck);
        eprintln!("[{}] {node}: collapse seen {took:#} after it struck", t.id);
        assert!(
            took > jiff::SignedDuration::from_secs(-1) && took <= jiff::SignedDuration::from_secs(60),
            "{node}: said {took:#} after the collapse"
        );
    }
    for m in machines.iter().filter(|m| !collapsing.contains(&m["node"].as_str().unwrap_or_default().to_string())) {
        assert!(m["hnsFaultAt"].is_null(), "no fault on {m}");
    }
    t.cleanup().await;
}

/// A fleet of `nodes` whose HNS programs 12 one-endpoint Services (10.<octet>.i.1), the nodes
/// `collapsing` (indices) collapsing 15 s after they caught up, a paused pool of them with
/// `hns` as its spec.hns, and the operator: the space, the collapsing nodes' names, the
/// fleet's stats file, the pool's name and the operator's metrics port.
async fn collapsing_fleet(
    name: &str,
    octet: u8,
    nodes: usize,
    collapsing: &[usize],
    sim_args: &[&str],
    hns: serde_json::Value,
) -> (TestSpace, Vec<String>, std::path::PathBuf, String, u16) {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new(name).await;
    for i in 0..12 {
        service_with_endpoints(&t, &format!("web-{i}"), &[&format!("10.{octet}.{i}.1")]).await;
    }
    let prefix = t.node_prefix();
    let collapsing: Vec<String> = collapsing.iter().map(|i| format!("{prefix}{i}")).collect();
    let stats = t.log_path("stats").with_extension("json");
    let faults = format!("--host-faults=hns-collapse@{}", collapsing.join("+"));
    let stats_file = format!("--stats-file={}", stats.display());
    let mut args = vec!["--hns=auto", "--hns-fault-after=15s", &faults, &stats_file];
    args.extend_from_slice(sim_args);
    t.start_sim(nodes, &args);
    support::wait_nodes_ready(&t, nodes).await;
    let pool = format!("{}-pool", t.id);
    let mut body = support::pool_manifest(&t, &pool, "10.0.20348.2762", json!({"paused": true}));
    body["spec"]["hns"] = hns;
    support::apply_pool(&t, &body).await;
    let metrics = t.start_operator(&[]);
    (t, collapsing, stats, pool, metrics)
}

/// With `hns.repair` on, 3 of 20 nodes whose HNS collapses are each asked to
/// restart kube-proxy in their current boot (the annotation names the boot),
/// their agents restart its Windows service (the fleet's machine records it)
/// and report it, and each is back to `WindowsHNSReady=True` and untainted;
/// none of the other 17 is asked, restarted, tainted or said not ready.
#[tokio::test]
async fn a_collapsed_hns_is_repaired_by_a_kube_proxy_restart_when_the_pool_asks_for_it() {
    // onprem: kube-proxy is a Windows service of its own.
    collapsed_hns_repaired("hns-repair", 81, 20, &[3, 8, 14], "onprem").await;
}

/// The same where kube-proxy runs in a HostProcess pod (kind's nodes, built
/// by sig-windows-tools): the agents end its process, the kubelet starts the
/// container again, and the 2 collapsed nodes of 8 are ready again.
#[tokio::test]
async fn a_collapsed_hns_is_repaired_where_kube_proxy_runs_in_a_pod() {
    collapsed_hns_repaired("hns-repair-pod", 82, 8, &[2, 5], "kind").await;
}

/// A fleet of `nodes` of `profile` whose `collapsing` collapse, a pool with
/// `hns.repair` on: each collapsed node asked once, restarted, ready again;
/// no other asked, restarted or tainted.
async fn collapsed_hns_repaired(name: &str, octet: u8, nodes: usize, collapsing: &[usize], profile: &str) {
    let profile = format!("--host-profile={profile}");
    let (mut t, collapsing, stats, pool, _) =
        collapsing_fleet(name, octet, nodes, collapsing, &[&profile], json!({"repair": {"enabled": true}})).await;

    let nodes: Api<Node> = Api::all(t.client.clone());
    let reports: Api<winpool::api::report::WindowsNodeReport> = Api::namespaced(t.client.clone(), &t.agent_namespace());
    let ready_at = wait_for("the 3 nodes asked, restarted, ready and untainted again", WAIT, || async {
        let mut at = std::collections::BTreeMap::new();
        for name in &collapsing {
            let n = nodes.get(name).await.ok()?;
            let boot = n.status.as_ref()?.node_info.as_ref()?.boot_id.clone();
            let repair = reports.get(name).await.ok()?.status?.hns_repair?;
            let asked = n.annotations().get(names::ANN_HNS_REPAIR) == Some(&boot);
            let restarted = repair.boot_id == boot && repair.result == winpool::api::report::HnsRepairResult::Restarted;
            if !asked || !restarted || hns_condition(&n).as_deref() != Some("True") || has_hns_taint(&n) {
                return None;
            }
            let c = n.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == names::NODE_CONDITION_HNS_READY)?.clone();
            at.insert(name.clone(), c.last_transition_time?.0);
        }
        Some(at)
    })
    .await;
    for n in t.nodes().await.iter().filter(|n| !collapsing.contains(&n.name_any())) {
        assert_eq!(hns_condition(n).as_deref(), Some("True"), "{} never collapsed", n.name_any());
        assert!(!has_hns_taint(n), "{} is not tainted", n.name_any());
        assert!(!n.annotations().contains_key(names::ANN_HNS_REPAIR), "{} is not asked", n.name_any());
    }
    let asked: BTreeSet<String> = support::pool_events(&t, &pool)
        .await
        .iter()
        .filter(|e| e.reason.as_deref() == Some("HNSRepairAsked"))
        .filter_map(|e| e.related.as_ref()?.name.clone())
        .collect();
    assert_eq!(asked, collapsing.iter().cloned().collect::<BTreeSet<_>>(), "an Event for each ask, and no other");

    assert!(t.terminate("sim").is_some_and(|s| s.success()), "the fleet stops cleanly on SIGTERM");
    let machines: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    for m in &machines {
        let node = m["node"].as_str().unwrap_or_default().to_string();
        let (struck, restarted) = (&m["hnsFaultAt"], &m["kubeProxyRestartedAt"]);
        if collapsing.contains(&node) {
            let struck: jiff::Timestamp = struck.as_str().unwrap_or_else(|| panic!("{m}")).parse().unwrap();
            let restarted: jiff::Timestamp = restarted.as_str().unwrap_or_else(|| panic!("{m}")).parse().unwrap();
            let ready = ready_at[&node];
            eprintln!(
                "[{}] {node}: kube-proxy restarted {:#} after the collapse, ready again {:#} after the restart",
                t.id,
                restarted.duration_since(struck),
                ready.duration_since(restarted)
            );
            assert!(ready > struck, "{node}: ready again after the collapse");
            assert!(restarted > struck, "{node}: restarted after the collapse");
        } else {
            assert!(struck.is_null() && restarted.is_null(), "nothing struck or restarted on {m}");
        }
    }
    t.cleanup().await;
}
