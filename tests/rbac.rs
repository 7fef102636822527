//! The operator runs under the chart's own ServiceAccount and RBAC: a full
//! rollout works with exactly those permissions, and taking one rule away
//! fails loudly with a forbidden error that names the resource.

mod support;

use std::time::Duration;

use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use support::chart::{install_chart_rbac, service_account_kubeconfig};
use support::{TEST_LABEL, TestSpace, install_crd, wait_for};
use winpool::api::WindowsNodePool;

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

    t.start_sim(3, &["--apply-seconds=1"]);
    support::wait_nodes_ready(&t, 3).await;
    let name = format!("{}-pool", t.id);
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    pools.patch(&name, &PatchParams::apply("winpool-tests").force(), &Patch::Apply(pool(&t, &name, "10.0.20348.2762"))).await.unwrap();
    let lease_ns = format!("--lease-namespace={}", t.namespace);
    t.start_operator_as("operator", &["--leader-elect=true", &lease_ns], &sa_kubeconfig);
    wait_for("a full rollout under the chart's ServiceAccount", WAIT, || async {
        let st = pools.get(&name).await.ok()?.status?;
        (st.nodes.total == 3 && st.nodes.updated == 3).then_some(())
    })
    .await;
    let log = std::fs::read_to_string(t.log_path("operator")).unwrap();
    assert!(!log.contains("forbidden"), "no permission was missing:\n{log}");

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
    let line = wait_for("a forbidden error naming nodes", WAIT, || async {
        let log = std::fs::read_to_string(t.log_path("operator")).ok()?;
        log.lines().find(|l| l.contains("forbidden") && l.contains("cannot patch resource \\\"nodes\\\"")).map(str::to_string)
    })
    .await;
    assert!(line.contains("reconcile failed"), "{line}");
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
