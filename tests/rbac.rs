//! The operator runs under the chart's own ServiceAccount and RBAC: a full
//! rollout works with exactly those permissions, and taking one rule away
//! fails loudly with a forbidden error that names the resource.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use support::chart::{install_chart_rbac, service_account_kubeconfig};
use support::{TEST_LABEL, TestSpace, install_crd, wait_for};
use winpool::api::WindowsNodePool;
use winpool::api::operation::WindowsNodeOperation;

const WAIT: Duration = Duration::from_secs(240);

fn pool(t: &TestSpace, name: &str, patch: &str) -> serde_json::Value {
    json!({
        "apiVersion": "winpool.dev/v1alpha1", "kind": "WindowsNodePool",
        "metadata": {"name": name, "labels": {TEST_LABEL: t.id}},
        "spec": {
            "nodeSelector": {"matchLabels": {TEST_LABEL: t.id}},
            "os": {"version": "ltsc2022", "patchLevel": patch},
            "rollout": {"maxUnavailable": 2, "nodeTimeout": "3m"},
        }
    })
}

#[tokio::test]
async fn the_operator_rolls_out_with_only_the_charts_permissions() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("rbac").await;
    let release = t.id.clone();
    let fullname = format!("{release}-winpool");
    install_chart_rbac(&t, &release);
    let sa_kubeconfig = service_account_kubeconfig(&t, &fullname);

    t.start_sim(3, &["--apply-time=1s"]);
    support::wait_nodes_ready(&t, 3).await;
    let name = format!("{}-pool", t.id);
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    pools.patch(&name, &PatchParams::apply("winpool-tests").force(), &Patch::Apply(pool(&t, &name, "10.0.20348.2762"))).await.unwrap();
    let lease_ns = format!("--lease-namespace={}", t.namespace);
    let metrics_port = t.start_operator_as("operator", &["--leader-elect=true", &lease_ns], &sa_kubeconfig);
    // A full rollout under the chart's ServiceAccount.
    support::wait_pool_done(&t, &name, 3, WAIT).await;
    // The API server's record of the operator's requests: none refused.
    let operator = format!("system:serviceaccount:{}:{fullname}", t.namespace);
    let audit = support::audit::audit_log();
    let refused = |reqs: Vec<support::audit::Request>| -> Vec<String> {
        reqs.into_iter().filter(|r| r.code == 403).map(|r| format!("{} {} {}/{}", r.verb, r.resource, r.namespace, r.name)).collect()
    };
    let made = support::audit::requests_by(&audit, &operator);
    assert!(made.iter().any(|r| r.resource == "nodes" && r.verb == "patch"), "the audit log records the operator's node writes");
    assert_eq!(refused(made), Vec::<String>::new(), "no permission was missing");
    operations_are_the_operators_alone(&t).await;

    // Take away the one rule that lets it patch nodes: the next rollout fails loudly.
    let roles: Api<ClusterRole> = Api::all(t.client.clone());
    let mut role = roles.get(&fullname).await.unwrap();
    for r in role.rules.iter_mut().flatten() {
        if r.resources.as_ref().is_some_and(|res| res.iter().any(|x| x == "nodes")) {
            r.verbs.retain(|v| v != "patch");
        }
    }
    role.metadata.managed_fields = None;
    roles.replace(&fullname, &Default::default(), &role).await.unwrap();
    pools.patch(&name, &PatchParams::apply("winpool-tests").force(), &Patch::Apply(pool(&t, &name, "10.0.20348.2800"))).await.unwrap();
    let refusal = wait_for("a node patch refused as forbidden", WAIT, || async {
        let reqs = support::audit::requests_by(&audit, &operator);
        reqs.into_iter().find(|r| r.resource == "nodes" && r.verb == "patch" && r.code == 403)
    })
    .await;
    assert!(refusal.name.starts_with(&t.node_prefix()), "one of the pool's nodes: {refusal:?}");
    // It fails loudly: the refusal is counted where alerts look for it.
    wait_for("the failed reconcile in the operator's metrics", WAIT, || async {
        support::metric(metrics_port, "winpool_reconcile_errors_total{reason=\"patch_node\"}").await.filter(|v| *v > 0.0)
    })
    .await;
    // Nothing moved without the permission: read from the Nodes themselves (the
    // failed reconcile wrote no status to read it from).
    for n in t.nodes().await {
        let ann = n.metadata.annotations.clone().unwrap_or_default();
        let node = n.metadata.name.clone().unwrap_or_default();
        assert_eq!(ann.get(winpool::api::names::ANN_STATE).map(String::as_str), Some("Updated"), "{node} still Updated");
        assert!(!ann.contains_key(winpool::api::names::ANN_STARTED_AT), "{node} was not started for the new revision");
        assert_ne!(n.spec.as_ref().and_then(|s| s.unschedulable), Some(true), "{node} not cordoned");
    }
    t.cleanup().await;
    // The chart's cluster-scoped objects outlive the namespaces.
    let _ = roles.delete(&fullname, &Default::default()).await;
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(client.clone());
    let _ = bindings.delete(&fullname, &Default::default()).await;
}

/// The operator wrote one WindowsNodeOperation per node it started; the
/// chart's policy refuses every other writer, the cluster admin included: a
/// forged start, an edit of a real one, and its deletion.
async fn operations_are_the_operators_alone(t: &TestSpace) {
    let ops: Api<WindowsNodeOperation> = Api::namespaced(t.client.clone(), &t.agent_namespace());
    let written = ops.list(&Default::default()).await.unwrap().items;
    let nodes: std::collections::BTreeSet<&str> = written.iter().map(|o| o.spec.node_name.as_str()).collect();
    assert_eq!(nodes.len(), 3, "an operation for each node started: {written:#?}");
    let refused = |r: kube::Result<WindowsNodeOperation>, what: &str| match r {
        Err(kube::Error::Api(s)) => assert!(s.code == 403 && s.message.contains("written by winpool's operator"), "{what}: {s:?}"),
        other => panic!("{what} was not refused: {other:?}"),
    };
    let mut forged = written[0].clone();
    forged.metadata = kube::api::ObjectMeta { name: Some(format!("{}.forged", forged.spec.node_name)), ..Default::default() };
    forged.spec.started_at = "2030-01-01T00:00:00Z".into();
    refused(ops.create(&Default::default(), &forged).await, "a forged start");
    let edit = json!({"status": {"phase": "Applying"}});
    let name = written[0].metadata.name.clone().unwrap();
    refused(ops.patch(&name, &PatchParams::default(), &Patch::Merge(&edit)).await, "an edit of winpool's operation");
    match ops.delete(&name, &Default::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{s:?}"),
        other => panic!("the deletion of an operation was not refused: {other:?}"),
    }
}

/// A health gate's credentials: under the chart's ServiceAccount the operator
/// reads the Secret in its own namespace, and is refused one anywhere else
/// (the chart grants `get` on Secrets in the release namespace only). What
/// the gate saw tells which: past the Secret, the request itself fails (a
/// port nobody listens on); refused, it never gets that far.
#[tokio::test]
async fn gate_credentials_are_read_only_from_the_operators_own_namespace() {
    use k8s_openapi::api::core::v1::{Node, Secret};
    use kube::api::{ObjectMeta, PostParams};
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("rbac-gate-secret").await;
    let release = t.id.clone();
    let fullname = format!("{release}-winpool");
    install_chart_rbac(&t, &release);
    let sa_kubeconfig = service_account_kubeconfig(&t, &fullname);
    // One Pending node that could start, so the gate is evaluated (no agent runs: the test plays its preflight).
    let node = support::windows_node(&t, &format!("{}0", t.node_prefix()), "10.0.20348.2700", "1.7.20");
    Api::<Node>::all(t.client.clone()).create(&PostParams::default(), &node).await.expect("the node");
    // The same Secret in the release namespace and in the agent namespace (the chart made it).
    let agents = t.agent_namespace();
    for ns in [t.namespace.as_str(), agents.as_str()] {
        let s = Secret {
            metadata: ObjectMeta {
                name: Some("prometheus-token".into()),
                labels: Some([(winpool::api::names::LABEL_GATE_CREDENTIALS.to_string(), "true".to_string())].into()),
                ..Default::default()
            },
            string_data: Some([("token".to_string(), "t0ken".to_string())].into()),
            ..Default::default()
        };
        Api::<Secret>::namespaced(t.client.clone(), ns).create(&PostParams::default(), &s).await.expect("the Secret");
    }
    let name = format!("{}-pool", t.id);
    let mut body = pool(&t, &name, "10.0.20348.2762");
    body["spec"]["rollout"]["healthGates"] = json!([{"name": "prom", "kind": "Prometheus",
        "url": format!("https://127.0.0.1:{}", support::free_port()), "query": "up == 0",
        "auth": {"type": "Bearer", "secretName": "prometheus-token"}
    }]);
    // Its agent (played here) found its host ready for the pool's revision, and its update on the node.
    let spec: winpool::api::WindowsNodePoolSpec = serde_json::from_value(body["spec"].clone()).unwrap();
    let rev = winpool::decision::revision::revision_of(&spec);
    let preflight = json!({"preflight": {"revision": rev, "verdict": "Ready"}, "staging": {"revision": rev, "status": "Staged"}});
    t.write_report(&node.metadata.name.clone().unwrap(), preflight).await.expect("the agent's report");
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    pools.patch(&name, &PatchParams::apply("winpool-tests").force(), &Patch::Apply(body)).await.unwrap();
    let gate_message = |want: &'static str| {
        let pools = pools.clone();
        let name = name.clone();
        async move {
            wait_for(&format!("the gate to say {want:?}"), WAIT, || async {
                let st = pools.get(&name).await.ok()?.status?;
                let c = st.conditions.into_iter().find(|c| c.type_ == "Progressing")?;
                (c.reason == "HealthGateClosed" && c.message.contains(want)).then_some(c.message)
            })
            .await
        }
    };

    t.start_operator_as("operator", &[&format!("--secret-namespace={}", t.namespace)], &sa_kubeconfig);
    let msg = gate_message("query failed").await;
    assert!(!msg.contains("credentials"), "the Secret in the release namespace was read: {msg}");

    t.stop("operator");
    t.start_operator_as("operator-elsewhere", &[&format!("--secret-namespace={agents}")], &sa_kubeconfig);
    let msg = gate_message("forbidden").await;
    assert!(msg.starts_with(&format!("gate \"prom\": credentials: reading Secret {agents}/prometheus-token: ")), "{msg}");
    t.cleanup().await;
    support::chart::remove_chart_rbac(&release);
}
