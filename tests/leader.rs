//! Two operator replicas: only the Lease holder writes. Killed, frozen or
//! partitioned from the API server mid-rollout, the leader is replaced by the
//! standby, which finishes the job; the API server's audit log shows no write
//! by a replica that did not hold the Lease, and no node started twice.

use crate::support;

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use support::partition::Partition;
use support::{TEST_LABEL, TestSpace, audit, install_crd, is_leader, wait_for};
use winpool::api::{WindowsNodePool, names};

const WAIT: Duration = Duration::from_secs(240);

/// The replica's own mark in the User-Agent of its requests: `winpool/<v> (<host>-<pid>)`.
fn agent_of(t: &TestSpace, what: &str) -> String {
    format!("-{})", t.pid(what).expect("replica running"))
}

/// Two replicas electing a leader on the test's own Lease (`winpool-<id>` in
/// its namespace): (leader, standby, leader's port, standby's port).
async fn two_replicas(t: &mut TestSpace) -> (&'static str, &'static str, u16, u16) {
    let lease = format!("--lease-name=winpool-{}", t.id);
    let lease_ns = format!("--lease-namespace={}", t.namespace);
    let pa = t.start_operator_named("operator-a", &["--leader-elect=true", &lease, &lease_ns]);
    let pb = t.start_operator_named("operator-b", &["--leader-elect=true", &lease, &lease_ns]);
    wait_for("exactly one leader", WAIT, || async {
        match (is_leader(pa).await?, is_leader(pb).await?) {
            (true, false) => Some(("operator-a", "operator-b", pa, pb)),
            (false, true) => Some(("operator-b", "operator-a", pb, pa)),
            _ => None,
        }
    })
    .await
}

/// A test space of 5 simulated nodes, Ready, whose installs take 2 s.
async fn five_nodes(name: &str) -> TestSpace {
    install_crd(&support::client().await).await;
    let mut t = TestSpace::new(name).await;
    t.start_sim(5, &["--apply-time=2s"]);
    support::wait_nodes_ready(&t, 5).await;
    t
}

/// The test's pool, every node to a new patch level, `max_unavailable` at a time.
async fn roll(t: &TestSpace, max_unavailable: i32) -> (String, Api<WindowsNodePool>) {
    let pool = format!("{}-pool", t.id);
    let body = json!({
        "apiVersion": "winpool.dev/v1alpha1", "kind": "WindowsNodePool",
        "metadata": {"name": pool, "labels": {TEST_LABEL: t.id}},
        "spec": {
            "nodeSelector": {"matchLabels": {TEST_LABEL: t.id}},
            "os": {"version": "ltsc2022", "patchLevel": "10.0.20348.2762"},
            "rollout": {"maxUnavailable": max_unavailable, "nodeTimeout": "3m"},
        }
    });
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    pools.patch(&pool, &PatchParams::apply("winpool-tests").force(), &Patch::Apply(&body)).await.unwrap();
    (pool, pools)
}

#[tokio::test]
async fn only_the_leader_writes_and_a_standby_takes_over_after_sigkill() {
    let mut t = five_nodes("leader").await;

    let (leader, standby, leader_port, standby_port) = two_replicas(&mut t).await;
    let (pool, pools) = roll(&t, 1).await;

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

/// The leader frozen (SIGSTOP) past its lease, as a VM paused or a process
/// starved: the standby takes over. Resumed (SIGCONT), the old leader finds
/// its renew deadline passed on its monotonic clock and steps down; the API
/// server's audit log shows no write it sent after the standby took the
/// Lease, and the rollout finishes with no node started twice.
#[tokio::test]
async fn a_frozen_leader_that_resumes_writes_nothing_after_the_standby_took_over() {
    let mut t = five_nodes("leader-freeze").await;
    let (leader, _, _, standby_port) = two_replicas(&mut t).await;
    let (pool, pools) = roll(&t, 2).await;
    wait_for("the rollout to be under way", WAIT, || async {
        let st = pools.get(&pool).await.ok()?.status?;
        (st.nodes.updating >= 1 && st.nodes.updated < 5).then_some(())
    })
    .await;

    let pid = t.pid(leader).expect("the leader runs") as libc::pid_t;
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    wait_for("the standby to take the lease", WAIT, || async { is_leader(standby_port).await.filter(|l| *l) }).await;
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let resumed = Instant::now();
    let (stepped_down, step_down_took) = loop {
        if let Some(status) = t.exit_status(leader) {
            break (status, resumed.elapsed());
        }
        assert!(resumed.elapsed() < WAIT, "the resumed leader never stepped down");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(stepped_down.code(), Some(75), "it exits as having lost the lease: {stepped_down:?}");

    support::wait_pool_done(&t, &pool, 5, WAIT).await;
    let lease = format!("winpool-{}", t.id);
    let (judged, without) = audit::writes_without_the_lease(&audit::requests_by_replicas(&audit::audit_log()), &t.namespace, &lease);
    assert!(judged > 0 && without.is_empty(), "{judged} writes judged; without the lease: {without:#?}");
    let starts = audit::starts_per_node(&audit::requests(&audit::audit_log(), &t.node_prefix()));
    assert!(starts.len() == 5 && starts.values().all(|c| *c == 1), "each node started once across the two leaders: {starts:?}");
    eprintln!("[{}] frozen leader resumed and stepped down in {step_down_took:?}; {judged} writes replayed, none without the lease", t.id);
    t.cleanup().await;
}

/// The leader cut off from the API server mid-rollout by a partition that
/// black-holes (bytes dropped both ways, connections held open, never
/// reset): its renewals hang, each is cut off at what is left of the renew
/// deadline, and it exits as having lost the lease before the standby could
/// take it. Healed after the standby took over, the network would carry
/// whatever the old leader still sent: the audit log shows nothing, and the
/// rollout finishes with no node started twice.
#[tokio::test]
async fn a_leader_partitioned_from_the_api_server_steps_down_before_the_standby_takes_over() {
    let mut t = five_nodes("leader-cut").await;
    let partition = Partition::to_api_server_of(&support::kubeconfig()).await;
    let via_proxy = partition.kubeconfig(&support::kubeconfig(), &t.id);
    let lease = format!("winpool-{}", t.id);
    let election = [format!("--lease-name={lease}"), format!("--lease-namespace={}", t.namespace), "--leader-elect=true".into()];
    let election: Vec<&str> = election.iter().map(String::as_str).collect();
    let cut_off_port = t.start_operator_as("operator-a", &election, &via_proxy);
    wait_for("the replica behind the partition to lead", WAIT, || async { is_leader(cut_off_port).await.filter(|l| *l) }).await;
    let standby_port = t.start_operator_named("operator-b", &election);
    let (pool, pools) = roll(&t, 2).await;
    wait_for("the rollout to be under way", WAIT, || async {
        let st = pools.get(&pool).await.ok()?.status?;
        (st.nodes.updating >= 1 && st.nodes.updated < 5).then_some(())
    })
    .await;

    partition.cut();
    let cut_at = Instant::now();
    let (status, exited_at) = loop {
        if let Some(status) = t.exit_status("operator-a") {
            break (status, jiff::Timestamp::now());
        }
        assert!(cut_at.elapsed() < WAIT, "the partitioned leader never stepped down");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let step_down_took = cut_at.elapsed();
    assert_eq!(status.code(), Some(75), "it exits as having lost the lease: {status:?}");
    wait_for("the standby to take the lease", WAIT, || async { is_leader(standby_port).await.filter(|l| *l) }).await;
    partition.heal();
    let leases: Api<Lease> = Api::namespaced(t.client.clone(), &t.namespace);
    let taken_at = leases.get(&lease).await.unwrap().spec.and_then(|s| s.acquire_time).expect("the standby's acquireTime").0;
    assert!(exited_at < taken_at, "the cut-off leader was gone ({exited_at}) before the standby took the lease ({taken_at})");

    support::wait_pool_done(&t, &pool, 5, WAIT).await;
    let (judged, without) = audit::writes_without_the_lease(&audit::requests_by_replicas(&audit::audit_log()), &t.namespace, &lease);
    assert!(judged > 0 && without.is_empty(), "{judged} writes judged; without the lease: {without:#?}");
    let starts = audit::starts_per_node(&audit::requests(&audit::audit_log(), &t.node_prefix()));
    assert!(starts.len() == 5 && starts.values().all(|c| *c == 1), "each node started once across the two leaders: {starts:?}");
    eprintln!(
        "[{}] partitioned leader stepped down {step_down_took:?} after the cut, {:?} before the standby took over; {judged} writes replayed",
        t.id,
        (taken_at - exited_at)
    );
    t.cleanup().await;
}

/// The chart's server-side fence (`leaderElection.serverSideFence`): the
/// operator's ServiceAccount, with a token bound to a pod that does not hold
/// the Lease, has its Node write refused by the API server; the same write
/// from the pod that holds it lands.
#[tokio::test]
async fn the_api_server_refuses_a_node_write_from_a_replica_that_does_not_hold_the_lease() {
    use k8s_openapi::api::core::v1::{Node, Pod};
    let client = support::client().await;
    install_crd(&client).await;
    let t = TestSpace::new("lease-fence").await;
    let release = format!("{}-r", t.id);
    let lease = format!("{}-lease", t.id);
    let identity = ["serviceaccount", "clusterrole", "clusterrolebinding", "lease-fence-policy"];
    let sets = [format!("leaderElection.leaseName={lease}"), "leaderElection.serverSideFence=true".into()];
    support::chart::apply_chart_templates(&t, &release, &sets, &identity);
    let sa = format!("{release}-winpool");
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), &t.namespace);
    for name in ["replica-a", "replica-b"] {
        // Never scheduled (no node matches): a token only needs the pod to exist,
        // and a pod on another test's node would hold up that node's drain.
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"serviceAccountName": sa,
            "nodeSelector": {"winpool-test/nowhere": "true"},
            "automountServiceAccountToken": false, "containers": [{"name": "operator", "image": "ghcr.io/winpool/winpool:test"}]}}))
        .unwrap();
        pods.create(&Default::default(), &pod).await.unwrap();
    }
    let leases: Api<Lease> = Api::namespaced(t.client.clone(), &t.namespace);
    let held: Lease = serde_json::from_value(json!({"metadata": {"name": lease}, "spec": {"holderIdentity": "replica-a"}})).unwrap();
    leases.create(&Default::default(), &held).await.unwrap();
    let node = format!("{}fence", t.node_prefix());
    Api::<Node>::all(t.client.clone()).create(&Default::default(), &support::windows_node(&t, &node, "6.1.0", "1.7.22")).await.unwrap();

    let as_replica = |pod: &'static str| {
        let token = support::chart::run(
            std::process::Command::new(support::tool("kubectl")).arg("--kubeconfig").arg(support::kubeconfig()).args([
                "create",
                "token",
                &sa,
                "-n",
                &t.namespace,
                "--duration=1h",
                "--bound-object-kind=Pod",
                &format!("--bound-object-name={pod}"),
            ]),
        );
        async move { Api::<Node>::all(support::client_with_token(&support::kubeconfig(), token.trim()).await) }
    };
    let (leader, deposed) = (as_replica("replica-a").await, as_replica("replica-b").await);
    let label = |v: &str| Patch::Merge(json!({"metadata": {"labels": {"winpool-test/fence": v}}}));
    // A policy takes effect a moment after it is made: until the deposed
    // replica's write is refused, the last answer says why not.
    let deadline = Instant::now() + WAIT;
    let refused = loop {
        match deposed.patch(&node, &PatchParams::default(), &label("b")).await {
            Err(kube::Error::Api(s)) => break s,
            other => assert!(Instant::now() < deadline, "the fence never refused the deposed replica; its last write: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(
        refused.code == 403
            && refused.message.contains("replica-b does not hold the Lease")
            && refused.message.contains("(replica-a does)"),
        "{refused:?}"
    );
    leader.patch(&node, &PatchParams::default(), &label("a")).await.expect("the Lease holder's write lands");

    support::chart::remove_chart_rbac(&release);
    t.cleanup().await;
}
