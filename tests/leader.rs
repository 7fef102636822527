//! Two operator replicas: only the Lease holder writes; SIGKILL it mid-rollout
//! and the standby takes over within the lease duration and finishes the job.

mod support;

use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use support::{TEST_LABEL, TestSpace, audit, http_get, install_crd, wait_for};
use winpool::api::{WindowsNodePool, names};

const WAIT: Duration = Duration::from_secs(240);

async fn is_leader(port: u16) -> Option<bool> {
    let (_, body) = http_get(port, "/metrics").await?;
    let line = body.lines().find(|l| l.starts_with("winpool_leader "))?;
    Some(line.trim_end().ends_with(" 1"))
}

/// The replica's own mark in the User-Agent of its requests: `winpool/<v> (<host>-<pid>)`.
fn agent_of(t: &TestSpace, what: &str) -> String {
    format!("-{})", t.pid(what).expect("replica running"))
}

#[tokio::test]
async fn only_the_leader_writes_and_a_standby_takes_over_after_sigkill() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("leader").await;
    t.start_sim(5, &["--apply-time=2s"]);
    support::wait_nodes_ready(&t, 5).await;

    let lease = format!("--lease-name=winpool-{}", t.id);
    let lease_ns = format!("--lease-namespace={}", t.namespace);
    let pa = t.start_operator_named("operator-a", &["--leader-elect=true", &lease, &lease_ns]);
    let pb = t.start_operator_named("operator-b", &["--leader-elect=true", &lease, &lease_ns]);
    let (leader, standby, leader_port, standby_port) = wait_for("exactly one leader", WAIT, || async {
        match (is_leader(pa).await?, is_leader(pb).await?) {
            (true, false) => Some(("operator-a", "operator-b", pa, pb)),
            (false, true) => Some(("operator-b", "operator-a", pb, pa)),
            _ => None,
        }
    })
    .await;

    let pool = format!("{}-pool", t.id);
    let body = json!({
        "apiVersion": "winpool.dev/v1alpha1", "kind": "WindowsNodePool",
        "metadata": {"name": pool, "labels": {TEST_LABEL: t.id}},
        "spec": {
            "nodeSelector": {"matchLabels": {TEST_LABEL: t.id}},
            "os": {"version": "ltsc2022", "patchLevel": "10.0.20348.2762"},
            "rollout": {"maxUnavailable": 1, "nodeTimeout": "3m"},
        }
    });
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    pools.patch(&pool, &PatchParams::apply("winpool-tests").force(), &Patch::Apply(&body)).await.unwrap();

    // Mid-rollout: some node updated, others not yet.
    wait_for("the rollout to be under way", WAIT, || async {
        let st = pools.get(&pool).await.ok()?.status?;
        (st.nodes.updated >= 1 && st.nodes.updated < 5).then_some(())
    })
    .await;
    // From the API server's audit log: the standby has written nothing to this
    // test's nodes, and the leader has.
    let (leader_mark, standby_mark) = (agent_of(&t, leader), agent_of(&t, standby));
    let prefix = t.node_prefix();
    let writes_by = |mark: &str| {
        let all = audit::requests(&audit::audit_log(), &prefix);
        all.into_iter().filter(|r| audit::is_write(r) && r.user_agent.starts_with("winpool/") && r.user_agent.ends_with(mark)).count()
    };
    assert!(writes_by(&leader_mark) > 0, "the leader's writes are in the audit log (User-Agent ending {leader_mark})");
    assert_eq!(writes_by(&standby_mark), 0, "the standby wrote nothing while it was not the leader");

    t.stop(leader); // SIGKILL: no graceful release of the lease.
    let killed_at = Instant::now();
    wait_for("the standby to take the lease", WAIT, || async { is_leader(standby_port).await.filter(|l| *l) }).await;
    let took = killed_at.elapsed();
    assert!(took <= Duration::from_secs(20), "took over in {took:?}, within the 15s lease plus a renew period");
    let _ = leader_port;

    // The rollout completes under the new leader.
    support::wait_pool_done(&t, &pool, 5, WAIT).await;
    for n in t.nodes().await {
        assert_ne!(n.spec.as_ref().and_then(|s| s.unschedulable), Some(true), "{} uncordoned", n.name_any());
        assert_eq!(n.annotations().get(names::ANN_STATE).map(String::as_str), Some("Updated"));
    }
    assert!(writes_by(&standby_mark) > 0, "the new leader wrote");
    let starts = audit::starts_per_node(&audit::requests(&audit::audit_log(), &t.node_prefix()));
    assert_eq!(starts.len(), 5, "every node started: {starts:?}");
    assert!(starts.values().all(|c| *c == 1), "no node started (drained) twice across the two leaders: {starts:?}");
    t.cleanup().await;
}
