//! The Windows host as it is, not as a kind fake: the simulated fleet plays
//! named faults of real nodes (`hack/sim.sh --host-faults`), the real agent
//! meets them, and the rollout is judged from the API server (the pool's
//! status, the Nodes) and from the machines themselves (the fleet's
//! `--stats-file`, written when it stops), never from logs.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::Api;
use serde::Deserialize;
use serde_json::json;
use support::{TestSpace, apply_pool, install_crd, pool_manifest, wait_for, wait_nodes_ready};
use winpool::api::report::{StagingStatusValue, WindowsNodeReport};
use winpool::api::{WindowsNodePool, names};

const WAIT: Duration = Duration::from_secs(240);

/// The reasons the agent may give for a reboot (agent/internal/decide/reboot.go),
/// each a signal an install can clear.
const REBOOT_REASONS: [&str; 3] = ["the update's install asked for a reboot", "CBS RebootPending", "Windows Update RebootRequired"];

/// One machine's record, as the fleet writes it.
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
struct MachineStats {
    node: String,
    build: String,
    installs: usize,
    reboots: usize,
    reboot_reasons: Vec<String>,
    agent_restarts: usize,
    runtime_swaps: usize,
    rollbacks: usize,
    update_downloads: usize,
    background_downloads: usize,
    hotpatches: usize,
    undos: usize,
}

fn read_stats(path: &Path) -> Vec<MachineStats> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
}

/// A fleet of `nodes` with `fleet_args` (made from the node name prefix; its statistics go to the returned
/// path when it stops), a pool over them asking for patch level .2762 (one
/// failure pauses it), and the operator: the rollout is under way.
async fn rolling_on(nodes: usize, name: &str, fleet_args: impl FnOnce(&str) -> Vec<String>) -> (TestSpace, PathBuf, String) {
    rolling_with(nodes, name, fleet_args, json!({})).await
}

/// [`rolling_on`] with more of the pool's spec (`runtime`, `storage`: replaced whole).
async fn rolling_with(
    nodes: usize,
    name: &str,
    fleet_args: impl FnOnce(&str) -> Vec<String>,
    spec: serde_json::Value,
) -> (TestSpace, PathBuf, String) {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new(name).await;
    let stats = t.log_path("stats").with_extension("json");
    let mut args = fleet_args(&t.node_prefix());
    args.push(format!("--stats-file={}", stats.display()));
    t.start_sim(nodes, &args.iter().map(String::as_str).collect::<Vec<_>>());
    wait_nodes_ready(&t, nodes).await;
    let pool = format!("{}-pool", t.id);
    let mut manifest = pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxFailedNodes": 1}));
    for (k, v) in spec.as_object().expect("spec fields") {
        manifest["spec"][k] = v.clone();
    }
    apply_pool(&t, &manifest).await;
    t.start_operator(&[]);
    (t, stats, pool)
}

/// Waits until the pool's `nodes` are all Updated; a failed node fails the test at once.
async fn all_updated(t: &TestSpace, pool: &str, nodes: i32) {
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    let st = wait_for("every node Updated", WAIT, || async {
        let st = pools.get(pool).await.ok()?.status?;
        (st.nodes.updated == nodes || st.nodes.failed > 0).then_some(st)
    })
    .await;
    assert_eq!((st.nodes.updated, st.nodes.failed), (nodes, 0), "{:?}", st.failed_nodes);
}

/// Reads that fail for a moment, a file rename put back at every boot, an
/// update that lands past the build asked for, reboots that show as
/// Ready=Unknown, an agent restarted in the middle of every install, a
/// kubernetes Service unreachable for minutes after every boot (the agent
/// reaches the API server where its kubelet does), a
/// servicing stack update that needs its own reboot on two nodes: a 6-node
/// pool still rolls out, each node installs once (twice with the SSU; the
/// restarted agent waits for the servicing task it finds), no node reboots
/// more than twice, and every reboot names a reason an install can clear.
#[tokio::test]
async fn a_pool_rolls_out_on_hostile_hosts_installing_once_and_naming_every_reboot() {
    let ssu_first = |prefix: &str| [format!("{prefix}4"), format!("{prefix}5")];
    let (mut t, stats, pool) = rolling_on(6, "hostile-host", |prefix| {
        let faults = "read-errors,pending-renames,overshoot,reboot-unknown,agent-restart,slow-api";
        let faults = format!("--host-faults={faults},ssu-first@{}", ssu_first(prefix).join("+"));
        vec!["--apply-time=0.5s".into(), "--reboot-time=0.5s".into(), faults]
    })
    .await;
    let ssu_first = ssu_first(&t.node_prefix());
    all_updated(&t, &pool, 6).await;
    for n in t.nodes().await {
        let kernel = n.status.as_ref().and_then(|s| s.node_info.as_ref()).map(|i| i.kernel_version.clone());
        assert_eq!(kernel.as_deref(), Some("10.0.20348.2767"), "{}: the update overshot to .2767, past the patch level", n.name_any());
    }

    assert!(t.terminate("sim").is_some_and(|s| s.success()), "the fleet stops cleanly on SIGTERM");
    let machines = read_stats(&stats);
    assert_eq!(machines.len(), 6, "{machines:?}");
    for m in &machines {
        // A servicing stack update first is one more install and reboot; the agent's restarts add none.
        let (installs, reboots) = if ssu_first.contains(&m.node) { (2, 2) } else { (1, 1) };
        assert_eq!((m.installs, m.reboots), (installs, reboots), "{}: {m:?}", m.node);
        assert!(m.agent_restarts >= 1, "{}: the agent-restart fault never restarted the agent: {m:?}", m.node);
        assert_eq!(m.reboot_reasons.len(), m.reboots, "{m:?}");
        assert!(m.reboot_reasons.iter().all(|r| REBOOT_REASONS.contains(&r.as_str())), "{}: reasons {:?}", m.node, m.reboot_reasons);
        assert_eq!(m.build, "10.0.20348.2767", "{m:?}");
    }
    t.cleanup().await;
}

/// Staging, a pool's default: each node's cumulative update is downloaded at
/// background priority while the node still serves, the operator cordons a
/// node only once its agent reports the update Staged, and the install after
/// the drain downloads nothing. With `staging: false` the install
/// downloads it, after the drain.
#[tokio::test]
async fn a_staged_update_is_downloaded_before_the_drain_and_never_after() {
    let fleet = |_: &str| ["--apply-time=0.5s", "--download-time=2s", "--reboot-time=0.5s"].map(String::from).to_vec();
    let (mut staged, staged_stats, staged_pool) = rolling_on(3, "staged", fleet).await;
    let (mut plain, plain_stats, plain_pool) =
        rolling_with(3, "unstaged", fleet, json!({"rollout": {"maxFailedNodes": 1, "staging": false}})).await;
    all_updated(&staged, &staged_pool, 3).await;
    all_updated(&plain, &plain_pool, 3).await;

    let reports: Api<WindowsNodeReport> = Api::namespaced(staged.client.clone(), &staged.agent_namespace());
    for r in reports.list(&Default::default()).await.unwrap() {
        let s =
            r.status.as_ref().and_then(|s| s.staging.as_ref()).unwrap_or_else(|| panic!("{}: no staging in {:?}", r.name_any(), r.status));
        assert_eq!(s.status, StagingStatusValue::Staged, "{}: {s:?}", r.name_any());
        assert!(s.items.iter().any(|i| i.name.starts_with("KB5050002: ") && i.bytes > 0), "{}: staged {:?}", r.name_any(), s.items);
    }
    for (t, stats, background) in [(&mut staged, staged_stats, 1), (&mut plain, plain_stats, 0)] {
        assert!(t.terminate("sim").is_some_and(|s| s.success()), "the fleet stops cleanly on SIGTERM");
        let machines = read_stats(&stats);
        assert_eq!(machines.len(), 3, "{machines:?}");
        for m in &machines {
            assert_eq!((m.update_downloads, m.background_downloads, m.installs), (1, background, 1), "{}: {m:?}", m.node);
        }
    }
    staged.cleanup().await;
    plain.cleanup().await;
}

/// Windows Server 2025 nodes enrolled in hotpatching, in a pool that takes
/// hotpatches: the first month is a quarterly baseline (every node drained
/// and rebooted), the second a hotpatch, installed on three nodes without
/// cordon, drain or reboot; on the fourth it asks for a reboot after all, and
/// that node alone is cordoned, drained and rebooted. The kubelets read the
/// build once per boot, as Windows' does (kubelet-stale-kernel): a hotpatched
/// node is verified by the build its agent read from the host. Judged from
/// the audit log (winpool's cordons) and the machines (reboots, hotpatches).
#[tokio::test]
async fn a_hotpatch_pool_updates_in_service_and_drains_only_for_a_reboot() {
    let spec = |patch: &str| {
        json!({"os": {"version": "ltsc2025", "patchLevel": patch},
            "rollout": {"maxUnavailable": 4, "maxFailedNodes": 1, "nodeTimeout": "3m", "drain": {"timeout": "1m"}, "hotpatch": true}})
    };
    let (mut t, stats, pool) = rolling_with(
        4,
        "hotpatch",
        |prefix| {
            ["--os=ltsc2025", "--build=10.0.26100.2000", "--hotpatch=enrolled", "--apply-time=0.5s", "--reboot-time=0.5s"]
                .map(String::from)
                .into_iter()
                .chain([format!("--host-faults=hotpatch-reboots@{prefix}3,kubelet-stale-kernel")])
                .collect()
        },
        spec("10.0.26100.2100"),
    )
    .await;
    support::wait_pool_done(&t, &pool, 4, WAIT).await;
    let month_two = jiff::Timestamp::now();
    let mut manifest = pool_manifest(&t, &pool, "10.0.26100.2200", json!({}));
    for (k, v) in spec("10.0.26100.2200").as_object().unwrap() {
        manifest["spec"][k] = v.clone();
    }
    apply_pool(&t, &manifest).await;
    support::wait_pool_done(&t, &pool, 4, WAIT).await;

    let prefix = t.node_prefix();
    let mut cordoned: Vec<String> = support::audit::requests(&support::audit::audit_log(), &prefix)
        .into_iter()
        .filter(|r| r.resource == "nodes" && r.at.is_some_and(|at| at > month_two) && r.body["spec"]["unschedulable"] == json!(true))
        .map(|r| r.name.trim_start_matches(&prefix).to_string())
        .collect();
    cordoned.dedup();
    assert_eq!(cordoned, ["3"], "in the hotpatch month only the node whose hotpatch asked for a reboot is cordoned");
    assert!(t.terminate("sim").is_some_and(|s| s.success()), "the fleet stops cleanly on SIGTERM");
    for m in read_stats(&stats) {
        let want = if m.node.ends_with('3') { (2, 0) } else { (1, 1) };
        assert_eq!((m.reboots, m.hotpatches), want, "{}: a baseline's reboot, then a hotpatch (or its reboot): {m:?}", m.node);
        assert_eq!(m.build, "10.0.26100.2200", "{m:?}");
    }
    t.cleanup().await;
}

/// `rollout.undo: true`: a node that a Node-scope gate holds while it
/// soaks after its update is cordoned and drained again, its agent takes the
/// cumulative update off (DISM /Remove-Package in the servicing task) and
/// reboots it onto the build below, and the node ends Failed UpdateUndone,
/// uncordoned; the other node, healthy, stays Updated on the new build.
#[tokio::test]
async fn a_node_unhealthy_in_its_soak_has_its_update_taken_off() {
    let (mut t, stats, pool) = rolling_with(
        2,
        "undo",
        |_| ["--apply-time=0.3s", "--reboot-time=0.3s"].map(String::from).to_vec(),
        json!({"os": {"version": "ltsc2022", "patchLevel": "10.0.20348.2762"},
            "rollout": {"maxUnavailable": 2, "maxFailedNodes": 2, "soakTime": "1h", "undo": true, "healthGateInterval": "1s",
                "healthGates": [{"name": "checkout-health", "kind": "Pods", "selector": {"matchLabels": {"app": "checkout-crashing"}}, "scope": "Node"}]}}),
    )
    .await;
    all_updated(&t, &pool, 2).await;
    let sick = format!("{}0", t.node_prefix());
    support::pod_on_node(&t, &sick, "checkout-crashing").await;

    let nodes: Api<Node> = Api::all(t.client.clone());
    let (reason, message, unschedulable) = wait_for("the node's update to be taken off", WAIT, || async {
        let n = nodes.get(&sick).await.ok()?;
        let a = n.annotations();
        (a.get(names::ANN_STATE)? == "Failed").then(|| {
            let unschedulable = n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
            (
                a.get(names::ANN_FAILURE_REASON).cloned().unwrap_or_default(),
                a.get(names::ANN_FAILURE_MESSAGE).cloned().unwrap_or_default(),
                unschedulable,
            )
        })
    })
    .await;
    assert_eq!(reason, "UpdateUndone", "{message}");
    assert!(
        message.contains("checkout-health") && message.contains("took the cumulative update of build 10.0.20348.2762 off"),
        "{message}"
    );
    assert!(!unschedulable, "an undone node goes back into service on the build below");
    assert!(t.terminate("sim").is_some_and(|s| s.success()), "the fleet stops cleanly on SIGTERM");
    for m in read_stats(&stats) {
        let want = if m.node == sick { (1, 2, "10.0.20348.2700") } else { (0, 1, "10.0.20348.2762") };
        assert_eq!((m.undos, m.reboots, m.build.as_str()), want, "{m:?}");
    }
    t.cleanup().await;
}

/// An update that always lands below the patch level: the node ends Failed,
/// naming the build it reached and the one asked, after the attempts the
/// agent allows (three installs, a reboot each), never in a loop.
#[tokio::test]
async fn an_update_that_lands_short_fails_the_node_naming_both_builds_within_the_caps() {
    let (mut t, stats, _) =
        rolling_on(1, "undershoot", |_| ["--apply-time=0.2s", "--reboot-time=0.2s", "--host-faults=undershoot"].map(String::from).to_vec())
            .await;
    let nodes: Api<Node> = Api::all(t.client.clone());
    let node = format!("{}0", t.node_prefix());
    let message = wait_for("the node to fail", WAIT, || async {
        let n = nodes.get(&node).await.ok()?;
        (n.annotations().get(names::ANN_STATE)? == "Failed")
            .then(|| n.annotations().get(names::ANN_FAILURE_MESSAGE).cloned().unwrap_or_default())
    })
    .await;
    assert!(
        message.contains("still at build 10.0.20348.2761 after 3 update attempts (target 10.0.20348.2762)"),
        "the failure names the build reached and the one asked: {message}"
    );

    assert!(t.terminate("sim").is_some_and(|s| s.success()), "the fleet stops cleanly on SIGTERM");
    let machines = read_stats(&stats);
    let [m] = machines.as_slice() else { panic!("{machines:?}") };
    assert_eq!((m.installs, m.reboots), (3, 3), "three attempts, a reboot each: {m:?}");
    assert!(m.reboot_reasons.iter().all(|r| r == REBOOT_REASONS[0]), "{m:?}");
    t.cleanup().await;
}

/// AKS and on-prem nodes as their images build them: containerd under NSSM
/// as a vendor build (AKS) or upstream (on-prem), and CSI Proxy as a host
/// service (`csi-proxy` under NSSM, `csiproxy`) whose binary says no version.
/// With failing reads, renames put back at every boot, an overshooting
/// update, Unknown reboots, agent restarts mid-install and a kubernetes
/// Service unreachable after every boot, a 6-node pool that keeps
/// the image's containerd and wants CSI Proxy rolls out: no runtime swapped,
/// the host CSI Proxy counts (its version unknown), winpool's CSI Proxy
/// DaemonSet runs beside it on no node, every reboot has its reason.
async fn image_built_nodes_roll_out_on_hostile_hosts(profile: &str, containerd: &str) {
    image_built_nodes_roll_out(profile, containerd, true).await;
}

/// The same rollout on an image with (`host_csi`) or without a CSI Proxy host service.
async fn image_built_nodes_roll_out(profile: &str, containerd: &str, host_csi: bool) {
    let (mut t, stats, pool) = rolling_with(
        6,
        &format!("{profile}-host"),
        |_| {
            let faults = "--host-faults=read-errors,pending-renames,overshoot,reboot-unknown,agent-restart,slow-api";
            vec!["--apply-time=0.5s".into(), "--reboot-time=0.5s".into(), format!("--host-profile={profile}"), faults.into()]
        },
        json!({
            "runtime": {"name": "containerd", "version": containerd},
            "storage": {"csiProxy": {"enabled": true, "version": "v1.1.3"}},
        }),
    )
    .await;
    all_updated(&t, &pool, 6).await;
    let names: Vec<String> = t.nodes().await.iter().map(|n| n.name_any()).collect();
    for n in t.nodes().await {
        let want = host_csi.then_some("true");
        assert_eq!(n.labels().get(names::LABEL_CSI_PROXY_HOST).map(String::as_str), want, "{}", n.name_any());
    }
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::all(t.client.clone());
    let csi = pods.list(&kube::api::ListParams::default().labels("app.kubernetes.io/name=winpool-csi-proxy")).await.expect("pods list");
    let beside: Vec<String> = csi
        .items
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some_and(|n| names.contains(n)))
        .map(|p| p.name_any())
        .collect();
    if host_csi {
        assert!(beside.is_empty(), "winpool's CSI Proxy beside the host's: {beside:?}");
    } else {
        assert_eq!(beside.len(), names.len(), "winpool's CSI Proxy on each node of an image without one: {beside:?}");
    }

    assert!(t.terminate("sim").is_some_and(|s| s.success()), "the fleet stops cleanly on SIGTERM");
    let machines = read_stats(&stats);
    assert_eq!(machines.len(), 6, "{machines:?}");
    for m in &machines {
        assert_eq!((m.installs, m.reboots, m.runtime_swaps), (1, 1, 0), "{}: {m:?}", m.node);
        assert!(m.reboot_reasons.iter().all(|r| REBOOT_REASONS.contains(&r.as_str())), "{}: reasons {:?}", m.node, m.reboot_reasons);
    }
    t.cleanup().await;
}

#[tokio::test]
async fn aks_nodes_roll_out_on_hostile_hosts_keeping_the_images_runtime_and_csi_proxy() {
    image_built_nodes_roll_out_on_hostile_hosts("aks", "1.7.20").await;
}

#[tokio::test]
async fn onprem_nodes_roll_out_on_hostile_hosts_keeping_the_host_csi_proxy() {
    image_built_nodes_roll_out_on_hostile_hosts("onprem", "1.7.20").await;
}

/// Behind WSUS (the policy names the server; preflight dials it) with update
/// titles in German: the cumulative update is still the one installed.
#[tokio::test]
async fn onprem_wsus_nodes_roll_out_on_hostile_hosts_with_localized_titles() {
    image_built_nodes_roll_out_on_hostile_hosts("onprem-wsus", "1.7.20").await;
}

/// EKS: kubelet and kube-proxy under EKS's own service host, the VPC CNI's
/// L2Bridge network with the pool's CNI mode left unset, no CSI Proxy on the host.
#[tokio::test]
async fn eks_nodes_roll_out_on_hostile_hosts() {
    image_built_nodes_roll_out("eks", "1.7.20", false).await;
}

/// The pilot of a first week (issue 44): ten nodes of the AKS image and ten
/// of an on-prem image behind WSUS (German titles), one pool each with only
/// `os.version` and `os.patchLevel` set (no runtime version, no CNI mode, as
/// `docs/clusters.md` tells a new user), meeting what that week brings:
/// reads that fail, agents restarted mid-install, a UPS on battery on every
/// node, Windows Update busy at an install and WSUS answering 503 to a
/// download (both on one node: two transient failures, then the third
/// attempt), a proxy resetting a download, CBS asking for one more reboot
/// after the target, an install longer than the pool's nodeTimeout (its
/// task beats). All twenty Updated, none Failed, each within the attempts
/// and with every reboot named. The AKS pool stages (the default): its
/// failed downloads are met, and tried again, before the drain; the WSUS
/// pool does not (`staging: false`): its installs meet them.
#[tokio::test]
async fn a_pilot_of_ten_aks_and_ten_wsus_nodes_survives_its_first_week() {
    let ((mut aks, aks_stats, aks_pool), (mut wsus, wsus_stats, wsus_pool)) =
        tokio::join!(pilot_pool("pilot-aks", "aks", true), pilot_pool("pilot-wsus", "onprem-wsus", false));
    tokio::join!(all_updated(&aks, &aks_pool, 10), all_updated(&wsus, &wsus_pool, 10));
    for (t, stats, staged) in [(&mut aks, aks_stats, true), (&mut wsus, wsus_stats, false)] {
        assert!(t.terminate("sim").is_some_and(|s| s.success()), "the fleet stops cleanly on SIGTERM");
        let machines = read_stats(&stats);
        assert_eq!(machines.len(), 10, "{machines:?}");
        for m in &machines {
            let node = m.node.trim_start_matches(&t.node_prefix());
            // Node 5 meets two transient failures, nodes 1, 2, 3 one each;
            // staged, the download's (2, 3 and one of 5's) are the staging's.
            let installs = match node {
                "5" if staged => 2,
                "5" => 3,
                "1" => 2,
                "2" | "3" if !staged => 2,
                _ => 1,
            };
            // Nodes 4 and 8 reboot once more for CBS.
            let reboots = if matches!(node, "4" | "8") { 2 } else { 1 };
            assert_eq!((m.installs, m.reboots, m.runtime_swaps), (installs, reboots, 0), "{m:?}");
            assert!(m.reboot_reasons.iter().all(|r| REBOOT_REASONS.contains(&r.as_str())), "{}: reasons {:?}", m.node, m.reboot_reasons);
        }
        let total = |f: fn(&MachineStats) -> usize| machines.iter().map(f).sum::<usize>();
        eprintln!(
            "pilot {}: 10 Updated, {} installs, {} reboots, {} agent restarts",
            t.node_prefix(),
            total(|m| m.installs),
            total(|m| m.reboots),
            total(|m| m.agent_restarts)
        );
    }
    aks.cleanup().await;
    wsus.cleanup().await;
}

/// A pilot pool of ten nodes of `profile` with the first week's faults.
async fn pilot_pool(name: &str, profile: &str, staging: bool) -> (TestSpace, PathBuf, String) {
    rolling_with(
        10,
        name,
        |prefix| {
            let n = |i: &[usize]| i.iter().map(|i| format!("{prefix}{i}")).collect::<Vec<_>>().join("+");
            // AKS's image removes its HNS network at every boot.
            let hns_reset = if profile == "aks" { "aks-hns-reset," } else { "" };
            let faults = format!(
                "--host-faults={hns_reset}read-errors,agent-restart,on-battery,wu-busy@{},wsus-503@{},download-reset@{},pending-after-target@{},slow-servicing@{}",
                n(&[1, 5]),
                n(&[2, 5]),
                n(&[3]),
                n(&[4, 8]),
                n(&[6])
            );
            let fixed = ["--apply-time=0.5s", "--reboot-time=0.5s", "--transient-retry-after=0.3s"];
            fixed.iter().map(|a| a.to_string()).chain([format!("--host-profile={profile}"), faults]).collect()
        },
        // Shorter than slow-servicing's 75 s install.
        json!({"runtime": {"name": "containerd"},
            "rollout": {"maxUnavailable": 2, "maxFailedNodes": 1, "nodeTimeout": "60s", "drain": {"timeout": "1m"}, "staging": staging}}),
    )
    .await
}

/// A two-phase update: the boot that lands the target leaves CBS asking for
/// one more reboot. Each node is rebooted again while it is drained, naming
/// CBS, and only then Updated (Windows would otherwise reboot it later, in
/// service and outside the pool's window).
#[tokio::test]
async fn a_two_phase_update_reboots_again_before_the_node_is_updated() {
    let (mut t, stats, pool) = rolling_on(3, "two-phase", |_| {
        ["--apply-time=0.2s", "--reboot-time=0.2s", "--host-faults=pending-after-target"].map(String::from).to_vec()
    })
    .await;
    all_updated(&t, &pool, 3).await;
    assert!(t.terminate("sim").is_some_and(|s| s.success()), "the fleet stops cleanly on SIGTERM");
    for m in read_stats(&stats) {
        assert_eq!((m.installs, m.reboots), (1, 2), "{m:?}");
        assert_eq!(m.reboot_reasons, ["the update's install asked for a reboot", "CBS RebootPending"], "{m:?}");
        assert_eq!(m.build, "10.0.20348.2762", "{m:?}");
    }
    t.cleanup().await;
}

/// AKS nodes run Azure CNI's L2Bridge network in every CNI mode: a pool that
/// asks for overlay is blocked on every node by its agent's preflight, saying
/// what it found, and no node is cordoned (left unset, as docs/clusters.md
/// tells AKS users, the pool rolls out: the test above).
#[tokio::test]
async fn an_aks_pool_that_asks_for_overlay_is_blocked_in_preflight_naming_l2bridge() {
    let (mut t, _stats, pool) = rolling_with(
        2,
        "aks-overlay",
        |_| ["--apply-time=0.2s", "--reboot-time=0.2s", "--host-profile=aks"].map(String::from).to_vec(),
        json!({"networking": {"cniMode": "overlay"}, "runtime": {"name": "containerd", "version": "1.7.20"}}),
    )
    .await;
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    let st = wait_for("both nodes blocked by preflight", WAIT, || async {
        let st = pools.get(&pool).await.ok()?.status?;
        (st.preflight_blocked_nodes.len() == 2).then_some(st)
    })
    .await;
    for b in &st.preflight_blocked_nodes {
        assert!(b.reason.contains("HNS network is l2bridge, the pool asks for overlay"), "{}: {}", b.name, b.reason);
    }
    for n in t.nodes().await {
        assert!(!n.annotations().contains_key(names::ANN_STARTED_AT), "{} was started", n.name_any());
        assert_ne!(n.spec.as_ref().and_then(|s| s.unschedulable), Some(true), "{} was cordoned", n.name_any());
    }
    assert!(t.terminate("sim").is_some_and(|s| s.success()), "the fleet stops cleanly on SIGTERM");
    t.cleanup().await;
}

/// An AKS node's containerd (a vendor build under NSSM) is its image's: a
/// pool asking for another is refused with a condition and no node is
/// cordoned. Told `runtime.upgrade: InPlace`, winpool replaces it; the new
/// one crash-loops under its wrapper, the upgrade task puts the old one back
/// and the node fails naming containerd, still running the old version.
#[tokio::test]
async fn a_runtime_change_on_aks_is_refused_until_in_place_and_a_crash_looping_runtime_is_rolled_back() {
    let (mut t, stats, pool) = rolling_with(
        1,
        "aks-runtime",
        |_| ["--apply-time=0.2s", "--reboot-time=0.2s", "--host-profile=aks", "--host-faults=runtime-crashloop"].map(String::from).to_vec(),
        json!({"runtime": {"name": "containerd", "version": "1.7.22"}}),
    )
    .await;
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    let progressing = |p: &WindowsNodePool| {
        p.status.as_ref()?.conditions.iter().find(|c| c.type_ == "Progressing").map(|c| (c.reason.clone(), c.message.clone()))
    };
    let (_, message) = wait_for("the runtime change refused", WAIT, || async {
        progressing(&pools.get(&pool).await.ok()?).filter(|(reason, _)| reason == "RuntimeUpgradeRefused")
    })
    .await;
    assert!(message.contains("1.7.20+azure") && message.contains("runtime.upgrade: InPlace"), "{message}");
    let node_name = format!("{}0", t.node_prefix());
    let nodes: Api<Node> = Api::all(t.client.clone());
    let n = nodes.get(&node_name).await.expect("the node");
    assert!(n.annotations().get(names::ANN_STATE).is_none(), "never started: {:?}", n.annotations());
    assert_ne!(n.spec.as_ref().and_then(|s| s.unschedulable), Some(true), "never cordoned");

    let mut manifest = pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxFailedNodes": 1}));
    manifest["spec"]["runtime"] = json!({"name": "containerd", "version": "1.7.22", "upgrade": "InPlace"});
    apply_pool(&t, &manifest).await;
    let failed = wait_for("the node to fail", WAIT, || async {
        let n = nodes.get(&node_name).await.ok()?;
        (n.annotations().get(names::ANN_STATE)? == "Failed").then_some(n)
    })
    .await;
    let message = failed.annotations().get(names::ANN_FAILURE_MESSAGE).cloned().unwrap_or_default();
    assert!(message.contains("containerd"), "the failure names containerd: {message}");
    let runtime = failed.status.as_ref().and_then(|s| s.node_info.as_ref()).map(|i| i.container_runtime_version.clone());
    assert_eq!(runtime.as_deref(), Some("containerd://1.7.20+azure"), "the old runtime runs");

    assert!(t.terminate("sim").is_some_and(|s| s.success()), "the fleet stops cleanly on SIGTERM");
    let machines = read_stats(&stats);
    let [m] = machines.as_slice() else { panic!("{machines:?}") };
    assert!(m.runtime_swaps >= 1 && m.rollbacks == m.runtime_swaps, "every swap rolled back: {m:?}");
    t.cleanup().await;
}

/// RKE2: containerd, the kubelet and kube-proxy are child processes of the
/// `rke2` service (no containerd service; the agent finds containerd's
/// version over CRI). A runtime change is refused even with `InPlace` (RKE2
/// puts its own containerd back at its next start), naming RKE2, and no node
/// is cordoned; with `runtime.version` at what RKE2 carries, the OS rollout
/// goes through, one install and one reboot a node, no swap.
#[tokio::test]
async fn rke2_nodes_roll_out_the_os_and_a_runtime_change_is_refused_even_in_place() {
    let (mut t, stats, pool) = rolling_with(
        3,
        "rke2",
        |_| ["--apply-time=0.2s", "--reboot-time=0.2s", "--host-profile=rke2"].map(String::from).to_vec(),
        json!({"runtime": {"name": "containerd", "version": "1.7.22", "upgrade": "InPlace"}}),
    )
    .await;
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    let (_, message) = wait_for("the runtime change refused", WAIT, || async {
        let p = pools.get(&pool).await.ok()?;
        let c = p.status?.conditions.into_iter().find(|c| c.type_ == "Progressing")?;
        (c.reason == "RuntimeUpgradeRefused").then_some((c.reason, c.message))
    })
    .await;
    assert!(message.contains("1.7.20-k3s1") && message.contains("child of the rke2 service"), "{message}");
    let nodes: Api<Node> = Api::all(t.client.clone());
    for n in t.nodes().await {
        let n = nodes.get(&n.name_any()).await.expect("the node");
        assert!(n.annotations().get(names::ANN_STATE).is_none(), "{}: never started: {:?}", n.name_any(), n.annotations());
        assert_ne!(n.spec.as_ref().and_then(|s| s.unschedulable), Some(true), "{}: never cordoned", n.name_any());
    }

    let mut manifest = pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxFailedNodes": 1}));
    manifest["spec"]["runtime"] = json!({"name": "containerd", "version": "1.7.20-k3s1"});
    apply_pool(&t, &manifest).await;
    all_updated(&t, &pool, 3).await;
    assert!(t.terminate("sim").is_some_and(|s| s.success()), "the fleet stops cleanly on SIGTERM");
    for m in read_stats(&stats) {
        assert_eq!((m.installs, m.reboots, m.runtime_swaps), (1, 1, 0), "{}: {m:?}", m.node);
    }
    t.cleanup().await;
}

/// Two of six nodes cannot reach their update source: their agents'
/// preflight blocks them, so they are never cordoned nor drained, the pool
/// lists them with the agent's reason and says it is blocked, and the other
/// four roll out.
#[tokio::test]
async fn nodes_whose_update_source_is_unreachable_are_never_cordoned_and_the_rest_roll_out() {
    // The agent names each Windows Update host it could not reach.
    let says: Vec<String> = ["slscr.update.microsoft.com", "fe3cr.delivery.mp.microsoft.com"]
        .iter()
        .map(|host| format!("update source Windows Update ({host}) cannot be reached"))
        .collect();
    two_of_six_blocked_in_preflight("source-unreachable", "kind", &says.iter().map(String::as_str).collect::<Vec<_>>()).await;
}

/// Two of six nodes behind a WSUS that has not approved the month's
/// cumulative update for them: their agents' search finds nothing the
/// install would take, so they are never cordoned, the pool lists them
/// saying what to approve, and the other four roll out.
#[tokio::test]
async fn nodes_whose_wsus_does_not_offer_the_update_are_never_cordoned_and_the_rest_roll_out() {
    two_of_six_blocked_in_preflight(
        "wsus-unapproved",
        "onprem-wsus",
        &["nothing the install would take (the search before the drain)", "approve the cumulative update that reaches 10.0.20348.2762"],
    )
    .await;
}

/// Two of six nodes behind a firewall that lets the Windows Update service
/// hosts through and drops where its payloads come from: the search would
/// work and the download, after the drain, would not. Their preflight names
/// the payload host; they are never cordoned, and the other four roll out.
#[tokio::test]
async fn nodes_that_reach_windows_update_but_not_its_payloads_are_never_cordoned() {
    two_of_six_blocked_in_preflight(
        "payload-blocked",
        "kind",
        &["update source Windows Update payloads (download.windowsupdate.com) cannot be reached", "a firewall drops it"],
    )
    .await;
}

/// Two of six nodes whose WinHTTP proxy asks for authentication, which the
/// Windows Update client (SYSTEM) never gives: their preflight says so for
/// each host it asked a tunnel to; never cordoned, the other four roll out.
#[tokio::test]
async fn nodes_whose_proxy_wants_credentials_are_never_cordoned() {
    two_of_six_blocked_in_preflight(
        "proxy-auth",
        "kind",
        &[
            "Windows Update payloads (download.windowsupdate.com) via WinHTTP proxy proxy.corp.example:3128",
            "the proxy asks for authentication (HTTP 407), which the Windows Update client (SYSTEM) never gives",
        ],
    )
    .await;
}

/// A pool asking `networking.kubeProxy.enableDSR` on six nodes whose
/// kube-proxy runs with it (the fleet's `--kube-proxy-dsr`) but on two
/// (`no-dsr`): those two are blocked before their cordon, saying that none
/// of their load balancers has Direct Server Return and that winpool does not
/// set kube-proxy's flags; the four others roll out.
#[tokio::test]
async fn nodes_whose_kube_proxy_runs_without_dsr_are_never_cordoned_for_a_pool_that_asks_for_it() {
    two_of_six_blocked_with(
        "no-dsr",
        "kind",
        &["--kube-proxy-dsr", "--hns=40,80"],
        json!({"networking": {"kubeProxy": {"enableDSR": true}}}),
        &["none of the 40 HNS load balancers has Direct Server Return", "--enable-dsr=true"],
    )
    .await;
}

/// Six nodes of `profile`, `fault` on two of them (with `read-errors` on
/// all): those two are blocked by their agents' preflight, the reason
/// saying each of `says`, never started nor cordoned, nothing installed;
/// the other four are Updated.
async fn two_of_six_blocked_in_preflight(fault: &str, profile: &str, says: &[&str]) {
    two_of_six_blocked_with(fault, profile, &[], json!({}), says).await;
}

/// [`two_of_six_blocked_in_preflight`] with more fleet flags and more of the pool's spec.
async fn two_of_six_blocked_with(fault: &str, profile: &str, fleet_args: &[&str], spec: serde_json::Value, says: &[&str]) {
    let blocked = |prefix: &str| [format!("{prefix}1"), format!("{prefix}4")];
    let (mut t, stats, pool) = rolling_with(
        6,
        fault,
        |prefix| {
            let faults = format!("--host-faults=read-errors,{fault}@{}", blocked(prefix).join("+"));
            let mut args = vec!["--apply-time=0.3s".into(), "--reboot-time=0.3s".into(), format!("--host-profile={profile}"), faults];
            args.extend(fleet_args.iter().map(|a| a.to_string()));
            args
        },
        spec,
    )
    .await;
    let blocked = blocked(&t.node_prefix());
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    let st = wait_for("four nodes Updated and the rollout blocked by preflight", WAIT, || async {
        let st = pools.get(&pool).await.ok()?.status?;
        let progressing = st.conditions.iter().find(|c| c.type_ == "Progressing")?;
        let settled = st.nodes.updated == 4 && progressing.reason == "PreflightBlocked";
        (settled || st.nodes.failed > 0 || st.nodes.updated > 4).then_some(st)
    })
    .await;
    assert_eq!((st.nodes.updated, st.nodes.pending, st.nodes.failed), (4, 2, 0), "{st:?}");
    let listed: Vec<&str> = st.preflight_blocked_nodes.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(listed, blocked.iter().map(String::as_str).collect::<Vec<_>>(), "the pool lists the blocked nodes");
    for b in &st.preflight_blocked_nodes {
        for part in says {
            assert!(b.reason.contains(part), "{}: {} does not say {part:?}", b.name, b.reason);
        }
    }
    for n in t.nodes().await {
        let name = n.name_any();
        let started = n.annotations().contains_key(names::ANN_STARTED_AT);
        let cordoned = n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
        if blocked.contains(&name) {
            assert!(!started && !cordoned, "{name} was started or cordoned despite its preflight: {:?}", n.annotations());
        } else {
            assert_eq!(n.annotations().get(names::ANN_STATE).map(String::as_str), Some("Updated"), "{name}");
        }
    }

    assert!(t.terminate("sim").is_some_and(|s| s.success()), "the fleet stops cleanly on SIGTERM");
    for m in read_stats(&stats) {
        let installs = if blocked.contains(&m.node) { 0 } else { 1 };
        assert_eq!((m.installs, m.reboots), (installs, installs), "{m:?}");
    }
    t.cleanup().await;
}
