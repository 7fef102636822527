//! Chaos soak (issue 10): a rollout over ~50 simulated nodes on its own control
//! plane, driven by two operator replicas electing a leader, while, at seeded
//! random moments, the leader is SIGKILLed (a new replica starts), frozen
//! (SIGSTOP) past its lease, or partitioned from the API server (its own TCP
//! proxy black-holes it) until the standby leads, the kube-apiserver is killed
//! and restarted, a node is deleted
//! mid-drain and another mid-apply, a node joins the pool, the agent pod of a node that is applying
//! is deleted (its agent stops mid-apply; the DaemonSet's new pod carries on),
//! evictions are refused (429) for a while, one node's first install fails
//! (it is retried as an admin would, with the JSON patch `kubectl winpool retry` sends),
//! the rollout is paused and resumed, and the pool's patch level changes
//! mid-rollout. The invariant checker (tests/support/invariants.rs) samples the
//! cluster every 500ms throughout; the rollout must converge with no violation,
//! and the operator must keep deciding while nodes are in flight (liveness,
//! read from its metrics). At the end the API server's audit log is replayed:
//! maxUnavailable over every node write it completed (a start and a finish
//! between two samples count too), no node drained twice for one revision,
//! no Node write by an agent's identity, no uncordon while an agent installs,
//! no eviction off a Draining node, no node set Applying without a drain of its
//! own since it was last uncordoned (a retried node included), and no write by
//! a replica while another held the Lease.
//!
//! The test runs its own cluster (`WINPOOL_CLUSTER=chaos`, ports from 26490) so
//! restarting its API server disturbs no other test, and always tears it down.
//!
//!   WINPOOL_CHAOS_SEED=<u64>       replay a run (the seed is printed at the start)
//!   WINPOOL_CHAOS_LONG=1           200 nodes, maxUnavailable 10%, more of every event
//!   WINPOOL_CHAOS_FLOW_CONTROL=0   install the chart without its FlowSchemas (to see the
//!                                  throttle take the leader's Lease without them)
//!   WINPOOL_CHAOS_FULL_RESTART=1   restart the API server with `hack/cluster.sh up`,
//!                                  which restarts kwok too (see `restart_apiserver`)
//!
//! A replica that exits with 75 (it lost the lease) is replaced, as the
//! Deployment would, and listed at the end; any other exit fails the soak.

use crate::support;
use crate::support::invariants;
use crate::support::skewed_clock;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use invariants::{Checker, Kind, Sample};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use support::partition::Partition;
use support::{TEST_LABEL, TestSpace, install_crd, repo_root, wait_for};
use winpool::api::WindowsNodePool;
use winpool::api::report::WindowsNodeReport;

const CLUSTER: &str = "chaos";
const PORT_BASE: &str = "26490";
const SAMPLE_EVERY: Duration = Duration::from_millis(500);
const FIRST_PATCH_REVISION: u32 = 2762;

// ---- The chaos cluster: up at the start, down at the end, also when the test fails. ----

fn cluster_sh(arg: &str) -> Command {
    let mut c = Command::new(repo_root().join("hack/cluster.sh"));
    c.arg(arg).env("WINPOOL_CLUSTER", CLUSTER).env("WINPOOL_PORT_BASE", PORT_BASE);
    c
}

struct ChaosCluster {
    kubeconfig: PathBuf,
}

impl ChaosCluster {
    /// A fresh cluster: whatever an earlier run left behind is deleted first. The
    /// guard exists before `up` runs, so a failing `up` is cleaned up too.
    fn up() -> Self {
        let mut guard = ChaosCluster { kubeconfig: PathBuf::new() };
        let _ = cluster_sh("down").status();
        let st = cluster_sh("up").status().expect("hack/cluster.sh runs");
        assert!(st.success(), "WINPOOL_CLUSTER={CLUSTER} hack/cluster.sh up failed; see its output above");
        let out = cluster_sh("kubeconfig").output().expect("hack/cluster.sh kubeconfig runs");
        assert!(out.status.success());
        guard.kubeconfig = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        guard
    }

    fn cluster_dir() -> PathBuf {
        let state = std::env::var_os("WINPOOL_STATE").map(PathBuf::from).unwrap_or_else(|| repo_root().join(".state"));
        state.join("clusters").join(CLUSTER)
    }

    /// SIGKILL the kube-apiserver and start it again with the same command line,
    /// environment and log; etcd, the controller-manager, the scheduler and kwok
    /// keep running and reconnect. Returns how long the API was away.
    ///
    /// With WINPOOL_CHAOS_FULL_RESTART=1, `hack/cluster.sh up` restarts the whole
    /// (now unhealthy) cluster instead, as an operator of a real cluster might. That
    /// restarts kwok too, which then cannot renew its node leases until they expire
    /// (200s): the simulated fleet freezes (no heartbeats, no pod status) and the
    /// node lifecycle controller marks every node unreachable. Harsher, and slower.
    fn restart_apiserver() -> Duration {
        let started = Instant::now();
        let dir = Self::cluster_dir();
        let pid_file = dir.join("pids/kube-apiserver.pid");
        let pid = std::fs::read_to_string(&pid_file).expect("kube-apiserver pid file");
        let pid = pid.trim().to_string();
        assert!(!pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()), "bad pid {pid:?}");
        let proc = PathBuf::from("/proc").join(&pid);
        let split = |b: Vec<u8>| -> Vec<String> {
            b.split(|c| *c == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect()
        };
        let cmdline = split(std::fs::read(proc.join("cmdline")).expect("kube-apiserver cmdline"));
        let environ: Vec<(String, String)> = split(std::fs::read(proc.join("environ")).unwrap_or_default())
            .into_iter()
            .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
            .collect();
        let cwd = std::fs::read_link(proc.join("cwd")).unwrap_or_else(|_| dir.clone());
        assert!(cmdline.first().is_some_and(|c| c.ends_with("kube-apiserver")), "pid {pid} is not the apiserver: {cmdline:?}");

        let st = Command::new("kill").args(["-9", &pid]).status().expect("kill runs");
        assert!(st.success(), "kill -9 {pid}");
        let full = std::env::var("WINPOOL_CHAOS_FULL_RESTART").is_ok_and(|v| !v.is_empty() && v != "0");
        // Let the operator and the sim notice the API is gone before it comes back.
        std::thread::sleep(Duration::from_millis(1500));
        if full {
            let st = cluster_sh("up").status().expect("hack/cluster.sh runs");
            assert!(st.success(), "restarting the chaos cluster failed; see its output above");
            return started.elapsed();
        }
        // Detached (re-parented to init, like kwokctl's own children), appending to its log.
        let log = dir.join("logs/kube-apiserver.log");
        let out = Command::new("sh")
            .arg("-c")
            .arg(r#"log="$1"; shift; "$@" >>"$log" 2>&1 </dev/null & echo $!"#)
            .arg("sh")
            .arg(&log)
            .args(&cmdline)
            .current_dir(cwd)
            .env_clear()
            .envs(environ)
            .output()
            .expect("sh runs");
        let new_pid = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(out.status.success() && !new_pid.is_empty(), "restarting kube-apiserver: {out:?}");
        std::fs::write(&pid_file, &new_pid).expect("pid file");
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if cluster_sh("status").stdout(std::process::Stdio::null()).status().is_ok_and(|s| s.success()) {
                return started.elapsed();
            }
            assert!(Instant::now() < deadline, "kube-apiserver (pid {new_pid}) not ready 90s after its restart; see {}", log.display());
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for ChaosCluster {
    fn drop(&mut self) {
        // A failed soak keeps the API server's record of it: `down` deletes the cluster's directory.
        if std::thread::panicking() {
            let kept = repo_root().join("target-test-logs").join(format!("chaos-audit-{}.log", std::process::id()));
            match std::fs::copy(Self::cluster_dir().join("logs/audit.log"), &kept) {
                Ok(_) => eprintln!("the chaos cluster's audit log is kept in {}", kept.display()),
                Err(e) => eprintln!("could not keep the chaos cluster's audit log: {e}"),
            }
        }
        match cluster_sh("down").status() {
            Ok(s) if s.success() => {}
            other => eprintln!("WINPOOL_CLUSTER={CLUSTER} hack/cluster.sh down failed: {other:?}"),
        }
    }
}

// ---- What the soak does and when. ----

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Chaos {
    /// SIGKILL the leading replica; a new one starts after `pause`.
    KillOperator {
        pause_ms: u64,
    },
    /// SIGSTOP the leader past its lease; SIGCONT once the standby leads.
    FreezeLeader,
    /// Black-hole the leader's connections to the API server; heal once the standby leads.
    PartitionLeader,
    /// The standby is replaced by a replica whose wall clock is CLOCK_AHEAD
    /// ahead, and the leader is killed, so it leads for this long: it must
    /// start nothing and time nothing out, and say so on the pool.
    SkewedLeader {
        for_ms: u64,
    },
    /// Internal: the end of SkewedLeader (a true-clocked replica takes over).
    TrueLeader,
    /// A slow node whose agent is installing, and two others, are labelled
    /// into a second pool (another patch level, maxUnavailable 1), which the
    /// pool still selects too for a while: two pools select them.
    SecondPool,
    /// Internal: the pool's selector is narrowed to leave them to the second pool.
    NarrowSelector,
    /// API Priority and Fairness throttles the writes of the operator's
    /// ServiceAccount for this long (a level with no seats of its own,
    /// refusing with 429 what it cannot run), its Lease's excepted by the
    /// chart's leader-election FlowSchema: the leader must keep its Lease.
    ThrottleOperator {
        for_ms: u64,
    },
    /// Internal: the end of ThrottleOperator.
    Unthrottle,
    RestartApiserver,
    /// Delete a node whose state is Draining (waits until there is one).
    DeleteDrainingNode,
    /// Delete a node whose state is Applying (waits until there is one): a
    /// cloud's scale-in, or a person, removes it mid-install; the rollout
    /// goes on without it.
    DeleteApplyingNode,
    /// A new node matching the pool's selector joins.
    AddNode,
    /// Delete the agent pod of a node whose state is Applying (waits until there is one):
    /// the agent dies mid-apply, the DaemonSet starts a new pod, whose agent must carry on.
    KillAgent,
    /// The PDB allows no disruption (evictions return 429) for this long.
    RefuseEvictions {
        for_ms: u64,
    },
    /// Internal: the end of RefuseEvictions.
    AllowEvictions,
    /// A new patch level: a new revision while the old one is still rolling.
    ChangePatchLevel,
    /// rollout.paused for this long: nodes in flight finish, none starts, none stays cordoned.
    Pause {
        for_ms: u64,
    },
    /// Internal: the end of Pause.
    Resume,
}

/// Draws one event (its random parameters) from the soak's generator.
type MakeChaos = fn(&mut SmallRng) -> Chaos;

struct Size {
    nodes: usize,
    max_unavailable: IntOrString,
    replicas: i32,
    /// How many of each event, spread over [5s, horizon).
    events: Vec<(MakeChaos, usize)>,
    horizon: Duration,
    budget: Duration,
}

fn size(long: bool) -> Size {
    let kill = |r: &mut SmallRng| Chaos::KillOperator { pause_ms: r.random_range(0..3000) };
    let refuse = |r: &mut SmallRng| Chaos::RefuseEvictions { for_ms: r.random_range(8000..20000) };
    let api = |_: &mut SmallRng| Chaos::RestartApiserver;
    let del = |_: &mut SmallRng| Chaos::DeleteDrainingNode;
    let del_applying = |_: &mut SmallRng| Chaos::DeleteApplyingNode;
    let add = |_: &mut SmallRng| Chaos::AddNode;
    let agent = |_: &mut SmallRng| Chaos::KillAgent;
    let change = |_: &mut SmallRng| Chaos::ChangePatchLevel;
    let pause = |r: &mut SmallRng| Chaos::Pause { for_ms: r.random_range(8000..20000) };
    let freeze = |_: &mut SmallRng| Chaos::FreezeLeader;
    let cut = |_: &mut SmallRng| Chaos::PartitionLeader;
    let skew = |r: &mut SmallRng| Chaos::SkewedLeader { for_ms: r.random_range(10000..20000) };
    let second = |_: &mut SmallRng| Chaos::SecondPool;
    let throttle = |r: &mut SmallRng| Chaos::ThrottleOperator { for_ms: r.random_range(20000..30000) };
    if long {
        Size {
            nodes: 200,
            max_unavailable: IntOrString::String("10%".into()),
            replicas: 30,
            events: vec![
                (kill, 6),
                (api, 3),
                (del, 3),
                (del_applying, 2),
                (add, 3),
                (agent, 4),
                (refuse, 3),
                (change, 2),
                (pause, 2),
                (freeze, 2),
                (cut, 2),
                (skew, 2),
                (second, 1),
                (throttle, 2),
            ],
            horizon: Duration::from_secs(300),
            budget: Duration::from_secs(45 * 60),
        }
    } else {
        Size {
            nodes: 50,
            max_unavailable: IntOrString::Int(5),
            replicas: 10,
            events: vec![
                (kill, 2),
                (api, 1),
                (del, 1),
                (del_applying, 1),
                (add, 1),
                (agent, 2),
                (refuse, 1),
                (change, 1),
                (pause, 1),
                (freeze, 1),
                (cut, 1),
                (skew, 1),
                (second, 1),
                (throttle, 1),
            ],
            horizon: Duration::from_secs(60),
            budget: Duration::from_secs(12 * 60),
        }
    }
}

fn schedule(rng: &mut SmallRng, size: &Size) -> Vec<(Duration, Chaos)> {
    let mut out = Vec::new();
    for (make, n) in &size.events {
        for _ in 0..*n {
            let at = Duration::from_millis(rng.random_range(5000..size.horizon.as_millis() as u64));
            out.push((at, make(rng)));
        }
    }
    out.sort();
    out
}

fn patch_level(revision: u32) -> String {
    format!("10.0.20348.{revision}")
}

/// The label the soak puts on the nodes it moves to a second pool.
const GROUP_LABEL: &str = "chaos.winpool.dev/group";

/// Which of the test's nodes a pool selects.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Selects {
    All,
    AllButGroup,
    Group,
}

impl Selects {
    fn selector(self, t: &TestSpace) -> serde_json::Value {
        match self {
            Selects::All => json!({"matchLabels": {TEST_LABEL: t.id}}),
            Selects::AllButGroup => json!({
                "matchLabels": {TEST_LABEL: t.id},
                "matchExpressions": [{"key": GROUP_LABEL, "operator": "NotIn", "values": ["b"]}],
            }),
            Selects::Group => json!({"matchLabels": {TEST_LABEL: t.id, GROUP_LABEL: "b"}}),
        }
    }

    /// Whether the pool's sample holds `n`: the main pool's stops holding
    /// the group once it is labelled (while both pools select it, the
    /// second pool's checks judge it).
    fn holds(self, n: &Node) -> bool {
        let grouped = n.labels().get(GROUP_LABEL).is_some_and(|g| g == "b");
        match self {
            Selects::All => true,
            Selects::AllButGroup => !grouped,
            Selects::Group => grouped,
        }
    }
}

fn pool_manifest(
    t: &TestSpace,
    name: &str,
    selects: Selects,
    patch_revision: u32,
    max_unavailable: &IntOrString,
    paused: bool,
) -> serde_json::Value {
    json!({
        "apiVersion": "winpool.dev/v1alpha1",
        "kind": "WindowsNodePool",
        "metadata": {"name": name, "labels": {TEST_LABEL: t.id}},
        "spec": {
            "nodeSelector": selects.selector(t),
            "os": {"version": "ltsc2022", "patchLevel": patch_level(patch_revision)},
            "runtime": {"name": "containerd", "version": "1.7.22"},
            "rollout": {
                "maxUnavailable": max_unavailable,
                "paused": paused,
                // Long enough that an API server restart or a refused eviction never fails a node.
                "nodeTimeout": "15m",
                "maxFailedNodes": 1,
                "drain": {"timeout": "10m"},
            },
        }
    })
}

async fn apply_pool(t: &TestSpace, body: &serde_json::Value) -> kube::Result<()> {
    let api: Api<WindowsNodePool> = Api::all(t.client.clone());
    let name = body["metadata"]["name"].as_str().unwrap();
    api.patch(name, &PatchParams::apply("winpool-tests").force(), &Patch::Apply(body)).await.map(|_| ())
}

/// Two pods of the workload may be disrupted at once in normal times.
fn normal_min_available(replicas: i32) -> i32 {
    (replicas - 2).max(0)
}

async fn set_pdb_min_available(t: &TestSpace, min: i32) -> kube::Result<()> {
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(t.client.clone(), &t.namespace);
    pdbs.patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"minAvailable": min}}))).await.map(|_| ())
}

/// Prove the PDB now refuses evictions: wait until the disruption controller has
/// caught up, then a dry-run eviction of a workload pod must get 429.
async fn evictions_refused(t: &TestSpace) -> Result<(), String> {
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(t.client.clone(), &t.namespace);
    let start = Instant::now();
    loop {
        let p = pdbs.get("web").await.map_err(|e| e.to_string())?;
        let st = p.status.clone().unwrap_or_default();
        if st.observed_generation == p.metadata.generation && st.disruptions_allowed == Some(0) {
            break;
        }
        if start.elapsed() > Duration::from_secs(15) {
            return Err(format!("PDB never reported 0 disruptions allowed: {st:?}"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), &t.namespace);
    let list = pods.list(&ListParams::default().labels("app=web")).await.map_err(|e| e.to_string())?;
    let Some(pod) = list.items.iter().find(|p| p.metadata.deletion_timestamp.is_none()) else {
        return Err("no workload pod to try".into());
    };
    let dry = EvictParams { post_options: PostParams { dry_run: true, ..Default::default() }, ..Default::default() };
    match pods.evict(&pod.name_any(), &dry).await {
        Err(kube::Error::Api(e)) if e.code == 429 => Ok(()),
        other => Err(format!("a dry-run eviction of {} was not refused: {other:?}", pod.name_any())),
    }
}

/// Delete the agent pod on `node` at once (no grace: the agent dies mid-step),
/// or None when there is none yet (the event stays due).
async fn kill_agent_pod(t: &TestSpace, node: &str) -> Option<String> {
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), &t.agent_namespace());
    let lp = ListParams::default().labels("app.kubernetes.io/name=winpool-agent").fields(&format!("spec.nodeName={node}"));
    let pod = pods.list(&lp).await.ok()?.items.into_iter().find(|p| p.metadata.deletion_timestamp.is_none())?;
    let name = pod.name_any();
    match pods.delete(&name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await {
        Ok(_) => Some(format!("deleted agent pod {name} of {node} while it was Applying")),
        Err(e) => {
            eprintln!("[chaos] deleting agent pod {name}: {e}; retrying");
            None
        }
    }
}

/// One look at the cluster, or None while the API is away.
async fn sample(t: &TestSpace, pool: &str, selects: Selects, at: Duration) -> Option<(Sample, WindowsNodePool, Vec<Node>)> {
    let timeout = Duration::from_secs(5);
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), &t.agent_namespace());
    // Nodes first, then ConfigMaps: the operator writes a ConfigMap before it labels a node for it.
    let mut nodes = tokio::time::timeout(timeout, list_nodes(t)).await.ok()?.ok()?;
    nodes.retain(|n| selects.holds(n));
    let cms = tokio::time::timeout(timeout, cms.list(&ListParams::default())).await.ok()?.ok()?.items;
    let reports: Api<WindowsNodeReport> = Api::namespaced(t.client.clone(), &t.agent_namespace());
    let reports = tokio::time::timeout(timeout, reports.list(&ListParams::default())).await.ok()?.ok()?.items;
    let p = tokio::time::timeout(timeout, pools.get(pool)).await.ok()?.ok()?;
    Some((Sample::from_cluster(at, &p, &nodes, &cms, &reports), p, nodes))
}

/// `TestSpace::nodes` without the panic: the API server may be away.
async fn list_nodes(t: &TestSpace) -> kube::Result<Vec<Node>> {
    let api: Api<Node> = Api::all(t.client.clone());
    Ok(api.list(&ListParams::default().labels(&format!("{TEST_LABEL}={}", t.id))).await?.items)
}

/// What the audit log says about refused evictions (dry runs are the test's own):
/// attempts answered 429, and how many followed the previous attempt on the same
/// pod within 100ms, which no reconcile round does (they are seconds apart) but
/// kube's default client retry (5ms, 10ms, 20ms, ... backoff) does.
fn eviction_retries(audit: &std::path::Path) -> String {
    let mut by_pod: BTreeMap<String, Vec<jiff::Timestamp>> = BTreeMap::new();
    for line in read(audit).lines().filter(|l| l.contains("\"subresource\":\"eviction\"") && !l.contains("dryRun")) {
        let Ok(e) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if e["responseStatus"]["code"] != 429 {
            continue;
        }
        let (Some(pod), Some(t)) = (e["objectRef"]["name"].as_str(), e["requestReceivedTimestamp"].as_str()) else { continue };
        if let Ok(t) = t.parse() {
            by_pod.entry(pod.to_string()).or_default().push(t);
        }
    }
    let total: usize = by_pod.values().map(Vec::len).sum();
    let mut quick = 0;
    let mut longest: (usize, String, f64) = (0, String::new(), 0.0);
    for (pod, ts) in by_pod.iter_mut() {
        ts.sort();
        let mut burst = (1, ts.first().copied());
        for w in ts.windows(2) {
            let gap = w[1].duration_since(w[0]).as_secs_f64();
            if gap < 0.1 {
                quick += 1;
            }
            // A burst: attempts each within 30s of the previous, as a backoff's are.
            if gap < 30.0 {
                burst.0 += 1;
            } else {
                burst = (1, Some(w[1]));
            }
            if burst.0 > longest.0 {
                let span = burst.1.map(|b| w[1].duration_since(b).as_secs_f64()).unwrap_or(0.0);
                longest = (burst.0, pod.clone(), span);
            }
        }
    }
    format!(
        "evictions refused (429) by the API: {total} on {} pods; {quick} of them within 100ms of the previous one on the same pod; longest run: {} attempts on {} over {:.0}s",
        by_pod.len(),
        longest.0,
        longest.1,
        longest.2
    )
}

/// Unix time of the operator's last decision for `pool`, from its metrics.
async fn last_reconcile(port: u16, pool: &str) -> Option<i64> {
    let (_, body) = tokio::time::timeout(Duration::from_secs(2), support::http_get(port, "/metrics")).await.ok()??;
    let key = format!("winpool_pool_last_reconcile_timestamp_seconds{{pool=\"{pool}\"}} ");
    body.lines().find_map(|l| l.strip_prefix(key.as_str())).and_then(|v| v.trim().parse::<f64>().ok()).map(|f| f as i64)
}

fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// With nodes in flight the operator decides at least every 5s (IN_FLIGHT_REQUEUE);
/// this long without a decision is a stuck reconcile, not a slow one. (A refused
/// eviction currently holds a reconcile for as long as the PDB refuses, because kube's
/// client retries 429 by itself; tests/hostile.rs has the focused repro of that bug. The
/// longest gap is printed at the end of every run.)
const STALL: Duration = Duration::from_secs(60);
/// The longest a spec change may go unobserved, or nodes in flight may all stand still,
/// API server restarts and refused evictions included. Today an API server restart can
/// blind the operator's watches for 30-60s (see the report of issue 10); beyond this
/// bound the rollout is stuck, not slow.
const PROGRESS: Duration = Duration::from_secs(120);
/// The operator's exit status after losing its leader lease (src/main.rs).
const EXIT_LOST_LEASE: i32 = 75;
/// How long a freshly started operator, or one whose API server just came back, may take to resume.
const RESUME: Duration = Duration::from_secs(10);

/// Whether the rollout is over: every node Updated at the revision of the pool's
/// current spec, uncordoned, the status saying so, and only that revision's ConfigMap left.
/// The sample holds the nodes the pool selects, by the test's own reading of its selector.
fn converged(s: &Sample, pool: &WindowsNodePool) -> Result<String, String> {
    let expected_nodes = s.nodes.len();
    let rev = winpool::decision::revision::revision_of(&pool.spec);
    let st = pool.status.clone().unwrap_or_default();
    if pool.metadata.generation != st.observed_generation {
        return Err(format!("status is for generation {:?}, spec is {:?}", st.observed_generation, pool.metadata.generation));
    }
    if st.revision.as_deref() != Some(rev.as_str()) {
        return Err(format!("status revision {:?}, spec revision {rev}", st.revision));
    }
    let behind: Vec<&str> = s
        .nodes
        .iter()
        .filter(|n| n.state.as_deref() != Some("Updated") || n.revision_label.as_deref() != Some(rev.as_str()) || n.unschedulable)
        .map(|n| n.name.as_str())
        .collect();
    if !behind.is_empty() {
        return Err(format!("{} nodes not Updated at {rev}", behind.len()));
    }
    if !s.pool.ready || st.nodes.updated as usize != expected_nodes || st.nodes.total as usize != expected_nodes {
        return Err(format!("pool status not yet complete: {:?}, Ready={}", st.nodes, s.pool.ready));
    }
    if s.config_revisions != BTreeSet::from([rev.clone()]) {
        return Err(format!("revision ConfigMaps {:?}, want only {rev}", s.config_revisions));
    }
    Ok(rev)
}

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The last `n` log lines, without a backtrace's frames.
fn tail(path: &std::path::Path, n: usize) -> String {
    let text = read(path);
    let frame = |l: &str| {
        let t = l.trim_start();
        t.starts_with("at ") || t.split_once(": ").is_some_and(|(k, _)| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
    };
    let lines: Vec<&str> = text.lines().filter(|l| !frame(l)).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// One operator replica of the soak. Each reaches the API server through a
/// partition of its own, so the leader, whichever it is, can be cut off.
struct Replica {
    name: String,
    port: u16,
    partition: Partition,
}

/// The children of the soak: two operator replicas electing a leader on the
/// test's Lease, and the current sim incarnation.
struct Fleet {
    started: usize,
    replicas: Vec<Replica>,
    /// The replica last seen leading, and since when: its silence counts from then.
    leader: Option<(String, Instant)>,
    sim: usize,
    operator_names: Vec<String>,
    sim_names: Vec<String>,
    kubeconfig: PathBuf,
    /// The chart's ServiceAccount for the operator (its RBAC, its FlowSchemas), with a bound token.
    operator_kubeconfig: PathBuf,
    lease: String,
    seed: u64,
    nodes: usize,
}

impl Fleet {
    async fn start_operator(&mut self, t: &mut TestSpace) {
        self.start_operator_with(t, &[]).await;
    }

    async fn start_operator_with(&mut self, t: &mut TestSpace, env: &[(String, String)]) {
        self.started += 1;
        let name = format!("operator-{}", self.started);
        let partition = Partition::to_api_server_of(&self.operator_kubeconfig).await;
        let kubeconfig = partition.kubeconfig(&self.operator_kubeconfig, &format!("{}-{name}", t.id));
        let election = [format!("--lease-name={}", self.lease), format!("--lease-namespace={}", t.namespace), "--leader-elect=true".into()];
        let election: Vec<&str> = election.iter().map(String::as_str).collect();
        let port = t.start_operator_with_env(&name, &election, &kubeconfig, env);
        self.replicas.push(Replica { name: name.clone(), port, partition });
        self.operator_names.push(name);
    }

    /// The live replica the Lease names as its holder (its identity ends in
    /// its pid), and its metrics port; None between leaders or while the API
    /// server is away. The Lease, not a replica's own word: a deposed leader
    /// may still believe it leads.
    async fn find_leader(&mut self, t: &TestSpace) -> Option<(String, u16)> {
        let leases: Api<Lease> = Api::namespaced(t.client.clone(), &t.namespace);
        let holder = leases.get_opt(&self.lease).await.ok()??.spec?.holder_identity?;
        let r = self.replicas.iter().find(|r| t.pid(&r.name).is_some_and(|pid| holder.ends_with(&format!("-{pid}"))))?;
        if self.leader.as_ref().is_none_or(|(l, _)| *l != r.name) {
            self.leader = Some((r.name.clone(), Instant::now()));
        }
        Some((r.name.clone(), r.port))
    }

    /// A replica that exited (75, having lost the lease) is replaced, as the Deployment would.
    fn forget(&mut self, name: &str) {
        self.replicas.retain(|r| r.name != name);
        if self.leader.as_ref().is_some_and(|(l, _)| l == name) {
            self.leader = None;
        }
    }

    fn start_sim(&mut self, t: &mut TestSpace) {
        self.sim += 1;
        let name = format!("sim-{}", self.sim);
        let seed = format!("--seed={}", self.seed);
        let prefix = t.node_prefix();
        let slow = format!("--host-faults=slow-servicing@{},install-fails-once@{prefix}{FAILS_ONCE}", slow_nodes(&prefix).join("+"));
        let mut args = vec!["--apply-time=1s", "--reboot-time=0.5s", seed.as_str(), slow.as_str()];
        // Only the first creates the fleet: a restarted sim must not bring back deleted nodes.
        if self.sim > 1 {
            args.push("--no-create");
        }
        t.start_sim_as(&name, self.nodes, &args, &self.kubeconfig);
        self.sim_names.push(name);
    }

    fn sim(&self) -> String {
        format!("sim-{}", self.sim)
    }
}

/// The nodes whose install takes 75 s (the fleet's slow-servicing fault: a
/// Windows Server 2019 cumulative update), so that a node can be moved to a
/// second pool while its agent is surely installing.
fn slow_nodes(prefix: &str) -> Vec<String> {
    [3, 17, 29, 44].iter().map(|i| format!("{prefix}{i}")).collect()
}

/// The node whose first install fails (the fleet's install-fails-once): the
/// soak retries it as an admin does, and its retry must drain it again, as it
/// was uncordoned when it failed. One: the pool tolerates one failed node
/// (maxFailedNodes 1) before it pauses itself.
const FAILS_ONCE: usize = 8;

/// How long a Failed node stays Failed before the soak retries it.
const RETRY_AFTER: Duration = Duration::from_secs(3);

/// How long a leader stays frozen or cut off at most: past the 15 s lease,
/// the standby has taken over.
const LEADER_LOST_FOR: Duration = Duration::from_secs(60);

/// Waits until a replica other than `old` holds the Lease.
async fn another_leads(t: &TestSpace, fleet: &mut Fleet, old: &str) -> Option<String> {
    let since = Instant::now();
    while since.elapsed() < LEADER_LOST_FOR {
        if let Some((l, _)) = fleet.find_leader(t).await.filter(|(l, _)| l != old) {
            return Some(l);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}

/// How long a deposed leader may run on once the standby holds the Lease:
/// frozen, it exits at its first look at its clock; cut off, it was gone
/// before the standby could take over.
const DEPOSED_EXIT: Duration = Duration::from_secs(10);

/// The replica `old`, deposed, exits by itself (75: the main loop replaces
/// it); one that stays is a violation, killed and replaced here so the soak
/// goes on to its end, where the violation fails it.
async fn deposed_leader_exits(t: &mut TestSpace, fleet: &mut Fleet, old: &str) -> Option<String> {
    let since = Instant::now();
    while since.elapsed() < DEPOSED_EXIT {
        if t.is_running(old) != Some(true) {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    t.stop(old);
    fleet.forget(old);
    fleet.start_operator(t).await;
    Some(format!("{old} still ran {DEPOSED_EXIT:?} after another replica took the Lease"))
}

/// SIGSTOP the leader until the standby has taken the lease, then SIGCONT:
/// it must step down (exit 75) and write nothing meanwhile.
async fn freeze_leader(t: &mut TestSpace, fleet: &mut Fleet, checker: &mut Checker, at: Duration) -> Option<String> {
    let (leader, _) = fleet.find_leader(t).await?;
    let pid = t.pid(&leader)? as libc::pid_t;
    let frozen = Instant::now();
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let next = another_leads(t, fleet, &leader).await;
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let next = next.unwrap_or_else(|| panic!("no replica took over from the frozen {leader} in {LEADER_LOST_FOR:?}"));
    checker.check_seen(at, Kind::DeposedLeaderStayed, deposed_leader_exits(t, fleet, &leader).await);
    Some(format!("froze leader {leader} (SIGSTOP) until {next} took the lease {:.1}s later, then SIGCONT", frozen.elapsed().as_secs_f64()))
}

/// Black-hole the leader's connections until the standby has taken the lease, then heal.
async fn partition_leader(t: &mut TestSpace, fleet: &mut Fleet, checker: &mut Checker, at: Duration) -> Option<String> {
    let (leader, _) = fleet.find_leader(t).await?;
    let cut = Instant::now();
    fleet.replicas.iter().find(|r| r.name == leader)?.partition.cut();
    let next = another_leads(t, fleet, &leader).await;
    if let Some(r) = fleet.replicas.iter().find(|r| r.name == leader) {
        r.partition.heal();
    }
    let next = next.unwrap_or_else(|| panic!("no replica took over from the partitioned {leader} in {LEADER_LOST_FOR:?}"));
    checker.check_seen(at, Kind::DeposedLeaderStayed, deposed_leader_exits(t, fleet, &leader).await);
    Some(format!(
        "partitioned leader {leader} from the API server until {next} took the lease {:.1}s later, then healed",
        cut.elapsed().as_secs_f64()
    ))
}

/// How far ahead a skewed replica's wall clock runs: past MAX_CLOCK_SKEW
/// (2 min), and past the pool's nodeTimeout (15 min), so a replica that
/// trusted its clock would time out every node in flight.
const CLOCK_AHEAD: Duration = Duration::from_secs(20 * 60);
/// How long a skewed leader may leave a pool with nodes pending and none in
/// flight without saying, in its Progressing condition, that its clock holds it.
const SAY_SKEW_WITHIN: Duration = Duration::from_secs(30);

/// The second pool, once the soak made it: the nodes moved to it, when, and its own checks.
struct SecondPool {
    name: String,
    group: BTreeSet<String>,
    /// When the group was labelled (this host's clock, which the API server's audit log shares).
    moved_at: jiff::Timestamp,
    checker: Checker,
    /// When the soak last said what the second pool waits for.
    last_printed: Option<Instant>,
}

/// How many of the second pool's nodes may be out of service at once.
const SECOND_MAX_UNAVAILABLE: IntOrString = IntOrString::Int(1);

/// A throttle of the operator's writes, while it lasts.
struct Throttle {
    leader: String,
    /// When it began (this host's clock, which the audit log shares), and the lease exits seen by then.
    at: jiff::Timestamp,
    since: Instant,
    exits: usize,
    /// When the audit log was last read for a refusal (the throttle lasts until it has refused one).
    looked: Option<Instant>,
    /// The other clients of the operator's flow that keep its level busy.
    flood: Vec<tokio::task::JoinHandle<()>>,
}

/// How many clients share the throttled level with the operator: the level
/// runs about one request at a time, so a lone operator writing one node at
/// a time was seen refused nothing in 90 s.
const FLOOD_CLIENTS: usize = 4;

/// How long a flood client waits between sending two bytes of its body, and
/// after a refusal before it asks again.
const TRICKLE_EVERY: Duration = Duration::from_millis(100);

/// Keep the operator's flow busy as another client of the same
/// ServiceAccount would, without costing the API server anything: a
/// dry-run ConfigMap create (it passes APF like any write and changes
/// nothing) whose body goes out a byte every TRICKLE_EVERY, so a request
/// admitted holds the level's seat for seconds while the server waits for
/// its body; refused (429), it asks again. Writes that were quick to run
/// (four clients of empty creates) left the seat free often enough for a
/// Lease renewal sharing it to get through every time; big ones (512 KiB)
/// kept it busy by loading this host's two cores, so a lost Lease could not
/// be told from a starved one.
async fn flood(server: String, tls: std::sync::Arc<rustls::ClientConfig>, token: String, namespace: String) {
    use futures::StreamExt;
    use http_body_util::StreamBody;
    use hyper::body::Frame;
    let https = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config((*tls).clone()).https_only().enable_http1().build();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(https);
    let body: &'static [u8] = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"chaos-flood-"}}"#;
    let url = format!("{server}/api/v1/namespaces/{namespace}/configmaps?dryRun=All");
    loop {
        let bytes = futures::stream::iter(body.iter().copied()).then(|b| async move {
            tokio::time::sleep(TRICKLE_EVERY).await;
            Ok::<_, std::convert::Infallible>(Frame::data(bytes::Bytes::from(vec![b])))
        });
        let req = hyper::Request::post(&url)
            .header(hyper::header::AUTHORIZATION, format!("Bearer {token}"))
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::CONTENT_LENGTH, body.len())
            .body(StreamBody::new(bytes.boxed()))
            .expect("a request");
        if !client.request(req).await.is_ok_and(|res| res.status().is_success()) {
            tokio::time::sleep(TRICKLE_EVERY).await;
        }
    }
}

/// What the flood needs of a kubeconfig the soak wrote: the server, a TLS
/// configuration that trusts its CA, and the token.
fn flood_credentials(kubeconfig: &std::path::Path) -> (String, std::sync::Arc<rustls::ClientConfig>, String) {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let text = read(kubeconfig);
    let value = |key: &str| {
        let line = text.lines().find_map(|l| l.trim().strip_prefix(key)).unwrap_or_else(|| panic!("{key} in {}", kubeconfig.display()));
        line.trim().to_string()
    };
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(value("certificate-authority:")).expect("the cluster's CA") {
        roots.add(c.expect("the cluster's CA PEM")).expect("the cluster's CA");
    }
    let tls = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    (value("server:"), std::sync::Arc::new(tls), value("token:"))
}

/// How long after an API server restart the operator's watches may still be
/// blind (see PROGRESS): a throttle then would refuse nothing.
const WATCHES_BACK: Duration = Duration::from_secs(60);
/// A throttle that has refused none of the operator's writes goes on, up to this long.
const THROTTLE_AT_MOST: Duration = Duration::from_secs(90);

/// The FlowSchema and PriorityLevelConfiguration (one name) that throttle
/// `user`'s writes: a level with no seats of its own that borrows none,
/// rejecting what it cannot run (the API server still runs about one request
/// of it at a time: in a run, 17 of 116 node patches were refused). Precedence
/// 7500: after the chart's leader-election schema (7000), which keeps the
/// Lease's requests out.
fn throttle_objects(name: &str, sa_namespace: &str, sa: &str) -> (PriorityLevelConfiguration, FlowSchema) {
    let level = json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name},
        "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 0, "lendablePercent": 0, "borrowingLimitPercent": 0,
            "limitResponse": {"type": "Reject"},
        }},
    });
    let schema = json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": name},
        "spec": {
            "priorityLevelConfiguration": {"name": name},
            "matchingPrecedence": 7500,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{
                "subjects": [{"kind": "ServiceAccount", "serviceAccount": {"name": sa, "namespace": sa_namespace}}],
                "resourceRules": [{
                    "verbs": ["create", "update", "patch", "delete"], "apiGroups": ["*"], "resources": ["*"],
                    "clusterScope": true, "namespaces": ["*"],
                }],
            }],
        },
    });
    (serde_json::from_value(level).expect("a PriorityLevelConfiguration"), serde_json::from_value(schema).expect("a FlowSchema"))
}

/// The replica leading with a skewed clock, while it leads.
struct Skewed {
    name: String,
    since: Instant,
    /// Since when the pool has had nodes pending, none in flight, and no ClockSkewed reason.
    silent_since: Option<Instant>,
    said: bool,
}

/// The Lease's holder identity (`<host>-<pid>`), as the audit log's User-Agents carry it.
async fn lease_holder(t: &TestSpace, lease: &str) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(t.client.clone(), &t.namespace);
    leases.get_opt(lease).await.ok()??.spec?.holder_identity
}

/// A node sample, the pool, and the Nodes, as `sample` returns them.
type Sampled = Option<(Sample, WindowsNodePool, Vec<Node>)>;

/// How the rollout moved, from samples: how long a spec change went
/// unobserved, and how long nodes sat in flight with none of them changing
/// state (each bounded by PROGRESS).
#[derive(Default)]
struct Progress {
    unobserved_since: Option<Duration>,
    longest_unobserved: (Duration, Duration),
    frozen: (Vec<(String, Option<String>)>, Duration),
    longest_freeze: (Duration, Duration),
    last_printed: Duration,
}

impl Progress {
    fn observe(&mut self, s: &Sample, p: &WindowsNodePool, now: Duration) {
        let observed = p.status.as_ref().and_then(|st| st.observed_generation) == p.metadata.generation;
        let since = if observed { None } else { Some(*self.unobserved_since.get_or_insert(now)) };
        self.unobserved_since = since;
        if let Some(since) = since
            && now - since > self.longest_unobserved.0
        {
            self.longest_unobserved = (now - since, now);
        }
        let fingerprint: Vec<(String, Option<String>)> = s.nodes.iter().map(|n| (n.name.clone(), n.state.clone())).collect();
        if fingerprint != self.frozen.0 || !s.nodes.iter().any(|n| n.in_flight()) {
            self.frozen = (fingerprint, now);
        } else if now - self.frozen.1 > self.longest_freeze.0 {
            self.longest_freeze = (now - self.frozen.1, now);
        }
    }
}

/// Whether the leader keeps deciding while nodes are in flight (from its metrics).
#[derive(Default)]
struct Liveness {
    longest_gap: Duration,
    longest_gap_at: Duration,
    stalls: BTreeMap<String, String>,
}

/// The soak's state: the cluster's children, the plan of events, what the
/// events changed, and what the checks saw.
struct Soak {
    t: TestSpace,
    fleet: Fleet,
    size: Size,
    seed: u64,
    rng: SmallRng,
    plan: Vec<(Duration, Chaos)>,
    pool: String,
    patch_revision: u32,
    paused: bool,
    start: Instant,
    checker: Checker,
    done: Vec<(Duration, String)>,
    deleted: BTreeSet<String>,
    added: Vec<String>,
    lease_exits: Vec<String>,
    api_back_at: Option<Instant>,
    progress: Progress,
    liveness: Liveness,
    skewed: Option<Skewed>,
    /// The Lease identities of every replica that led with a skewed clock.
    skewed_identities: Vec<String>,
    /// What the main pool selects, and whose nodes its sample holds.
    main_selects: Selects,
    samples_group: bool,
    second: Option<SecondPool>,
    throttled: Option<Throttle>,
    /// The operator's requests APF refused while throttled (429), over all throttles.
    throttle_refusals: usize,
    /// Failed nodes, since when the soak has seen them Failed.
    failed_since: BTreeMap<String, Duration>,
    /// The nodes the soak retried, in order.
    retried: Vec<String>,
}

impl Soak {
    /// The plan drawn from `seed`, the fleet Ready, the workload and the pool in place, two replicas started.
    async fn set_up(cluster: &ChaosCluster, long: bool, seed: u64) -> Soak {
        let size = size(long);
        let mut rng = SmallRng::seed_from_u64(seed);
        let plan = schedule(&mut rng, &size);
        eprintln!(
            "chaos seed {seed} ({} nodes, maxUnavailable {:?}; replay with WINPOOL_CHAOS_SEED={seed}{})",
            size.nodes,
            size.max_unavailable,
            if long { " WINPOOL_CHAOS_LONG=1" } else { "" }
        );
        for (at, what) in &plan {
            eprintln!("  planned at {:>5.1}s: {what:?}", at.as_secs_f64());
        }
        let setup = Instant::now();
        let client = support::client_for(&cluster.kubeconfig).await;
        install_crd(&client).await;
        let mut t = TestSpace::with_client("chaos", client).await;
        let lease = format!("winpool-{}", t.id);
        // The operator goes through the doors the chart gives it: its RBAC, and
        // its FlowSchemas (WINPOOL_CHAOS_FLOW_CONTROL=0 leaves them out).
        let flow_control = std::env::var("WINPOOL_CHAOS_FLOW_CONTROL").map_or(true, |v| v != "0");
        let sets = [format!("leaderElection.leaseName={lease}"), format!("flowControl.create={flow_control}")];
        support::chart::install_chart_on(&cluster.kubeconfig, &t, &t.id, &sets);
        let operator_kubeconfig = support::chart::service_account_kubeconfig_on(&cluster.kubeconfig, &t, &format!("{}-winpool", t.id));
        let mut fleet = Fleet {
            started: 0,
            replicas: Vec::new(),
            leader: None,
            sim: 0,
            operator_names: Vec::new(),
            sim_names: Vec::new(),
            kubeconfig: cluster.kubeconfig.clone(),
            operator_kubeconfig,
            lease,
            seed,
            nodes: size.nodes,
        };
        fleet.start_sim(&mut t);
        wait_for(&format!("{} simulated nodes Ready", size.nodes), Duration::from_secs(180), || async {
            let n = list_nodes(&t).await.ok()?;
            (n.len() == size.nodes && n.iter().all(support::node_ready)).then_some(())
        })
        .await;
        support::protected_workload(&t, size.replicas, normal_min_available(size.replicas)).await;
        let pool = format!("{}-pool", t.id);
        apply_pool(&t, &pool_manifest(&t, &pool, Selects::All, FIRST_PATCH_REVISION, &size.max_unavailable, false))
            .await
            .expect("pool applies");
        fleet.start_operator(&mut t).await;
        fleet.start_operator(&mut t).await;
        eprintln!("[{}] set up in {:.0}s; rollout starts", t.id, setup.elapsed().as_secs_f64());
        Soak {
            t,
            fleet,
            size,
            seed,
            rng,
            plan,
            pool,
            patch_revision: FIRST_PATCH_REVISION,
            paused: false,
            start: Instant::now(),
            checker: Checker::new(),
            done: Vec::new(),
            deleted: BTreeSet::new(),
            added: Vec::new(),
            lease_exits: Vec::new(),
            api_back_at: None,
            progress: Progress::default(),
            liveness: Liveness::default(),
            skewed: None,
            skewed_identities: Vec::new(),
            main_selects: Selects::All,
            samples_group: false,
            second: None,
            throttled: None,
            throttle_refusals: 0,
            failed_since: BTreeMap::new(),
            retried: Vec::new(),
        }
    }

    /// Samples, checks and runs due events until the rollout converged with
    /// every event done; returns the revision it converged at.
    /// Err: no convergence within the budget (the audit log is replayed all the same).
    async fn run(&mut self) -> Result<String, String> {
        loop {
            let now = self.start.elapsed();
            if now >= self.size.budget {
                let (budget, done, plan) = (self.size.budget, &self.done, &self.plan);
                return Err(format!("seed {}: no convergence within {budget:?}; events done: {done:?}; pending: {plan:?}", self.seed));
            }
            let sampled = sample(&self.t, &self.pool, self.main_sample(), now).await;
            if let Some((s, p, _)) = &sampled {
                self.checker.observe(s);
                self.progress.observe(s, p, now);
            }
            let second = self.sample_second(now).await;
            self.check_liveness(&sampled, now).await;
            self.watch_skewed(&sampled, now);
            self.replace_exited().await;
            self.run_due_events(&sampled, now).await;
            self.retry_failed(&[&sampled, &second], now).await;
            if let Some(rev) = self.converged(&sampled, now).filter(|_| self.second_converged(&second)) {
                return Ok(rev);
            }
            tokio::time::sleep(SAMPLE_EVERY).await;
        }
    }

    /// Liveness: while nodes are in flight the leader's reconcile must keep running.
    async fn check_liveness(&mut self, sampled: &Sampled, now: Duration) {
        let settled_in = |since: Instant| since.elapsed() > RESUME;
        let leading = self.fleet.find_leader(&self.t).await;
        let (Some((s, _, _)), Some((leader, port)), Some((_, leading_since))) = (sampled, &leading, self.fleet.leader.clone()) else {
            return;
        };
        if !s.nodes.iter().any(|n| n.in_flight()) || !settled_in(leading_since) || !self.api_back_at.is_none_or(settled_in) {
            return;
        }
        // No decision yet counts from when this replica was first seen leading.
        let started_unix = unix_now() - leading_since.elapsed().as_secs() as i64;
        let last = last_reconcile(*port, &self.pool).await.unwrap_or(started_unix);
        let gap = Duration::from_secs(unix_now().saturating_sub(last).max(0) as u64);
        let l = &mut self.liveness;
        if gap > l.longest_gap {
            (l.longest_gap, l.longest_gap_at) = (gap, now);
        }
        if gap <= STALL {
            return;
        }
        let in_flight: Vec<String> =
            s.nodes.iter().filter(|n| n.in_flight()).map(|n| format!("{} ({})", n.name, n.state.as_deref().unwrap_or(""))).collect();
        let key = format!("{leader}@{last}");
        if !l.stalls.contains_key(&key) {
            eprintln!("[chaos {:>6.1}s] {leader} has not decided for {}s with nodes in flight", now.as_secs_f64(), gap.as_secs());
        }
        let stall = format!(
            "{leader}: no decision for pool {} for {}s (until t={:.0}s) while {} nodes were in flight: {}",
            self.pool,
            gap.as_secs(),
            now.as_secs_f64(),
            in_flight.len(),
            in_flight.join(", ")
        );
        l.stalls.insert(key, stall);
    }

    /// The children. An operator replica may exit by itself for one reason
    /// only: it lost the leader lease (exit status 75, by design: frozen,
    /// partitioned, or the API away; the Deployment restarts it as a
    /// follower, and so does this test). Any other exit fails the test. The
    /// time said is when the exit was found, which a long event may delay.
    async fn replace_exited(&mut self) {
        let children: Vec<String> = self.fleet.replicas.iter().map(|r| r.name.clone()).chain([self.fleet.sim()]).collect();
        for name in children {
            if self.t.is_running(&name) != Some(false) {
                continue;
            }
            let status = self.t.exit_status(&name);
            let msg = format!(
                "{name} found exited ({status:?}) at {:.1}s; last lines:\n{}",
                self.start.elapsed().as_secs_f64(),
                tail(&self.t.log_path(&name), 8)
            );
            eprintln!("[chaos] {msg}");
            let lost_lease = name.starts_with("operator-") && status.and_then(|s| s.code()) == Some(EXIT_LOST_LEASE);
            assert!(lost_lease, "seed {}: {msg}", self.seed);
            self.lease_exits.push(msg);
            self.t.stop(&name);
            self.fleet.forget(&name);
            self.fleet.start_operator(&mut self.t).await;
        }
    }

    /// Due events, in order; one that cannot happen yet stays due.
    async fn run_due_events(&mut self, sampled: &Sampled, now: Duration) {
        let mut i = 0;
        while i < self.plan.len() {
            let (at, what) = self.plan[i];
            if at > now {
                break;
            }
            // A leader event needs a standby: one deposed by the event before is replaced first.
            self.replace_exited().await;
            match self.happen(what, sampled, now).await {
                Some(msg) => {
                    let when = self.start.elapsed();
                    eprintln!("[chaos {:>6.1}s] {msg}", when.as_secs_f64());
                    self.done.push((when, msg));
                    self.plan.remove(i);
                    self.plan.sort();
                    i = 0;
                }
                None => i += 1,
            }
        }
    }

    /// Makes `what` happen; None when it cannot yet (retried next sample).
    async fn happen(&mut self, what: Chaos, sampled: &Sampled, now: Duration) -> Option<String> {
        let draining = || sampled.as_ref().map_or(0, |(s, _, _)| s.nodes.iter().filter(|n| n.state.as_deref() == Some("Draining")).count());
        let in_flight = || sampled.as_ref().is_some_and(|(s, _, _)| s.nodes.iter().any(|n| n.in_flight()));
        match what {
            // The leader must be the same before and after a throttle: nothing else moves it meanwhile.
            Chaos::KillOperator { .. }
            | Chaos::FreezeLeader
            | Chaos::PartitionLeader
            | Chaos::SkewedLeader { .. }
            | Chaos::TrueLeader
            | Chaos::RestartApiserver
                if self.throttled.is_some() =>
            {
                None
            }
            // One skewed leader at a time: its TrueLeader ends it.
            Chaos::SkewedLeader { .. } if self.skewed.is_some() => None,
            Chaos::KillOperator { pause_ms } => {
                let (old, _) = self.fleet.find_leader(&self.t).await?;
                self.t.stop(&old);
                self.fleet.forget(&old);
                tokio::time::sleep(Duration::from_millis(pause_ms)).await;
                self.fleet.start_operator(&mut self.t).await;
                Some(format!("SIGKILLed leader {old}, started operator-{} after {pause_ms}ms", self.fleet.started))
            }
            Chaos::FreezeLeader => freeze_leader(&mut self.t, &mut self.fleet, &mut self.checker, now).await,
            Chaos::PartitionLeader => partition_leader(&mut self.t, &mut self.fleet, &mut self.checker, now).await,
            Chaos::SkewedLeader { for_ms } => self.skew_leader(for_ms, now).await,
            Chaos::TrueLeader => self.true_leader().await,
            // Only worth it while the operator has writes to make: nodes in
            // flight, and its watches not blind from an API server restart.
            Chaos::ThrottleOperator { .. }
                if self.skewed.is_some() || !in_flight() || self.api_back_at.is_some_and(|t| t.elapsed() < WATCHES_BACK) =>
            {
                None
            }
            Chaos::ThrottleOperator { for_ms } => self.throttle(for_ms, now).await,
            Chaos::Unthrottle => self.unthrottle(now).await,
            Chaos::SecondPool => self.second_pool(sampled, now).await,
            Chaos::NarrowSelector => self.narrow_selector(sampled).await,
            Chaos::RestartApiserver => {
                let away = tokio::task::spawn_blocking(ChaosCluster::restart_apiserver).await.expect("restart task");
                self.api_back_at = Some(Instant::now());
                Some(format!("kube-apiserver SIGKILLed and restarted; API away {:.1}s", away.as_secs_f64()))
            }
            Chaos::DeleteDrainingNode => self.delete_a_node_in(sampled, "Draining").await,
            Chaos::DeleteApplyingNode => self.delete_a_node_in(sampled, "Applying").await,
            Chaos::KillAgent => {
                let (s, _, _) = sampled.as_ref()?;
                let applying: Vec<&str> =
                    s.nodes.iter().filter(|n| n.state.as_deref() == Some("Applying")).map(|n| n.name.as_str()).collect();
                if applying.is_empty() {
                    return None;
                }
                let victim = applying[self.rng.random_range(0..applying.len())].to_string();
                kill_agent_pod(&self.t, &victim).await
            }
            Chaos::AddNode => self.add_node().await,
            // Only worth it while a drain is under way: wait for one.
            Chaos::RefuseEvictions { .. } if draining() == 0 => None,
            Chaos::RefuseEvictions { for_ms } => match set_pdb_min_available(&self.t, self.size.replicas).await {
                Ok(()) => {
                    let proof = evictions_refused(&self.t).await;
                    assert!(proof.is_ok(), "seed {}: the PDB did not refuse evictions: {proof:?}", self.seed);
                    self.plan.push((now + Duration::from_millis(for_ms), Chaos::AllowEvictions));
                    Some(format!(
                        "PDB minAvailable={} (evictions get 429) for {for_ms}ms; {} nodes draining",
                        self.size.replicas,
                        draining()
                    ))
                }
                Err(e) => {
                    eprintln!("[chaos] tightening the PDB: {e}; retrying");
                    None
                }
            },
            Chaos::AllowEvictions => {
                let min = normal_min_available(self.size.replicas);
                set_pdb_min_available(&self.t, min).await.ok()?;
                Some(format!("PDB relaxed to minAvailable={min}; {} nodes were draining", draining()))
            }
            Chaos::ChangePatchLevel => {
                let next = self.patch_revision + 38;
                if let Err(e) = self.apply_main(next, self.paused).await {
                    eprintln!("[chaos] changing the patch level: {e}; retrying");
                    return None;
                }
                self.patch_revision = next;
                let st = sampled.as_ref().map(|(_, p, _)| p.status.clone().unwrap_or_default().nodes);
                Some(format!("patchLevel -> {} (status was {st:?})", patch_level(next)))
            }
            Chaos::Pause { for_ms } => {
                self.apply_main(self.patch_revision, true).await.ok()?;
                self.paused = true;
                self.plan.push((now + Duration::from_millis(for_ms), Chaos::Resume));
                Some(format!("rollout paused for {for_ms}ms"))
            }
            Chaos::Resume => {
                self.apply_main(self.patch_revision, false).await.ok()?;
                self.paused = false;
                let st = sampled.as_ref().map(|(_, p, _)| p.status.clone().unwrap_or_default().nodes);
                Some(format!("rollout resumed (status was {st:?})"))
            }
        }
    }

    /// Replace the standby with a replica whose clock runs CLOCK_AHEAD ahead,
    /// then SIGKILL the leader: the skewed replica, alone, takes the Lease.
    /// A true-clocked standby starts once it leads, to take over at the end.
    async fn skew_leader(&mut self, for_ms: u64, now: Duration) -> Option<String> {
        let (old, _) = self.fleet.find_leader(&self.t).await?;
        let standbys: Vec<String> = self.fleet.replicas.iter().map(|r| r.name.clone()).filter(|n| *n != old).collect();
        for s in &standbys {
            self.t.stop(s);
            self.fleet.forget(s);
        }
        self.fleet.start_operator_with(&mut self.t, &skewed_clock::env(CLOCK_AHEAD.as_secs() as i64)).await;
        let name = format!("operator-{}", self.fleet.started);
        let took = Instant::now();
        self.t.stop(&old);
        self.fleet.forget(&old);
        let next = another_leads(&self.t, &mut self.fleet, &old).await;
        assert_eq!(next.as_deref(), Some(name.as_str()), "seed {}: the skewed replica, alone, did not take the Lease", self.seed);
        let identity = lease_holder(&self.t, &self.fleet.lease).await?;
        self.skewed_identities.push(identity);
        self.fleet.start_operator(&mut self.t).await;
        self.skewed = Some(Skewed { name: name.clone(), since: Instant::now(), silent_since: None, said: false });
        self.plan.push((now + Duration::from_millis(for_ms), Chaos::TrueLeader));
        Some(format!(
            "skewed clock: {name}, {}s ahead, leads {:.1}s after {old} was SIGKILLed (standbys {standbys:?} stopped first)",
            CLOCK_AHEAD.as_secs(),
            took.elapsed().as_secs_f64()
        ))
    }

    /// While a skewed replica leads: once nodes are pending and none is in
    /// flight, the pool must say within SAY_SKEW_WITHIN that the clock holds it.
    fn watch_skewed(&mut self, sampled: &Sampled, now: Duration) {
        let (Some(sk), Some((s, p, _))) = (self.skewed.as_mut(), sampled) else { return };
        let progressing = p.status.as_ref().and_then(|st| st.conditions.iter().find(|c| c.type_ == "Progressing"));
        if progressing.is_some_and(|c| c.reason == "ClockSkewed") {
            sk.said = true;
            sk.silent_since = None;
            return;
        }
        let pending = p.status.as_ref().is_some_and(|st| st.nodes.pending > 0);
        if !pending || s.nodes.iter().any(|n| n.in_flight()) {
            sk.silent_since = None;
            return;
        }
        let since = *sk.silent_since.get_or_insert_with(Instant::now);
        if since.elapsed() > SAY_SKEW_WITHIN {
            let msg = format!(
                "{} led with a clock {}s ahead; nodes pending, none in flight for {:.0}s, and the pool's Progressing says {:?}",
                sk.name,
                CLOCK_AHEAD.as_secs(),
                since.elapsed().as_secs_f64(),
                progressing.map(|c| (&c.reason, &c.message))
            );
            sk.silent_since = None;
            self.checker.check_seen(now, Kind::SkewUnsaid, Some(msg));
        }
    }

    /// SIGKILL the skewed leader; the true-clocked standby takes over.
    /// A true-clocked replica takes its place, so the next leader event finds a standby
    /// (in a long soak, a freeze found none and no one could take over).
    async fn true_leader(&mut self) -> Option<String> {
        let sk = self.skewed.take()?;
        self.t.stop(&sk.name);
        self.fleet.forget(&sk.name);
        self.fleet.start_operator(&mut self.t).await;
        Some(format!(
            "true clock again: SIGKILLed the skewed {} after {:.1}s, started operator-{} (the pool said ClockSkewed: {})",
            sk.name,
            sk.since.elapsed().as_secs_f64(),
            self.fleet.started,
            sk.said
        ))
    }

    /// Whose nodes the main pool's sample holds: all, until a group is labelled for the second pool.
    fn main_sample(&self) -> Selects {
        if self.samples_group { Selects::AllButGroup } else { Selects::All }
    }

    async fn apply_main(&self, patch_revision: u32, paused: bool) -> kube::Result<()> {
        let m = pool_manifest(&self.t, &self.pool, self.main_selects, patch_revision, &self.size.max_unavailable, paused);
        apply_pool(&self.t, &m).await
    }

    /// The second pool's sample, judged by its own checker.
    async fn sample_second(&mut self, now: Duration) -> Sampled {
        let name = self.second.as_ref()?.name.clone();
        let sampled = sample(&self.t, &name, Selects::Group, now).await;
        if let (Some(sp), Some((s, _, _))) = (self.second.as_mut(), &sampled) {
            sp.checker.observe(s);
        }
        sampled
    }

    /// The admin's part: a node the operator failed is retried with the JSON
    /// patch `kubectl winpool retry` sends (it tests the state is still
    /// Failed and removes it), once it has been Failed for RETRY_AFTER.
    async fn retry_failed(&mut self, sampled: &[&Sampled], now: Duration) {
        let failed: BTreeMap<String, &Node> = sampled
            .iter()
            .filter_map(|s| s.as_ref())
            .flat_map(|(_, _, nodes)| nodes.iter())
            .filter(|n| n.annotations().get(winpool::api::names::ANN_STATE).map(String::as_str) == Some("Failed"))
            .map(|n| (n.name_any(), n))
            .collect();
        self.failed_since.retain(|n, _| failed.contains_key(n));
        for (name, node) in failed {
            let since = *self.failed_since.entry(name.clone()).or_insert(now);
            if now.saturating_sub(since) < RETRY_AFTER {
                continue;
            }
            let ops = winpool::plugin::retry::patch(&winpool::plugin::output::view(node, None));
            let patch = Patch::Json::<()>(serde_json::from_value(ops).expect("a JSON patch"));
            match Api::<Node>::all(self.t.client.clone()).patch(&name, &PatchParams::default(), &patch).await {
                Ok(_) => {
                    eprintln!("[chaos {:>6.1}s] retried Failed node {name}", now.as_secs_f64());
                    self.retried.push(name.clone());
                }
                // Moved by the operator meanwhile (the test op failed), gone, or the API server away: looked at again next sample.
                Err(e) => eprintln!("[chaos] retrying {name}: {e}"),
            }
            self.failed_since.remove(&name);
        }
    }

    /// Whether the second pool, if there is one, rolled all its nodes to its own revision.
    fn second_converged(&mut self, sampled: &Sampled) -> bool {
        let Some(sp) = &mut self.second else { return true };
        let Some((s, p, _)) = sampled else { return false };
        match converged(s, p) {
            Ok(_) => true,
            Err(why) => {
                if sp.last_printed.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                    sp.last_printed = Some(Instant::now());
                    eprintln!("[second pool] waiting: {why}");
                }
                false
            }
        }
    }

    /// Label a slow node whose agent is installing, and two others, into a
    /// second pool that rolls another patch level; the main pool still
    /// selects them until NarrowSelector, five seconds on. The install
    /// outlasts both: the main pool must hold the node until its agent
    /// reports a result, and only then give it up.
    async fn second_pool(&mut self, sampled: &Sampled, now: Duration) -> Option<String> {
        let (s, _, _) = sampled.as_ref()?;
        let slow = slow_nodes(&self.t.node_prefix());
        let applying: Vec<&str> = s
            .nodes
            .iter()
            .filter(|n| n.state.as_deref() == Some("Applying") && n.agent_installing && slow.contains(&n.name))
            .map(|n| n.name.as_str())
            .collect();
        if applying.is_empty() {
            return None;
        }
        let first = applying[self.rng.random_range(0..applying.len())].to_string();
        let mut group = BTreeSet::from([first.clone()]);
        while group.len() < 3.min(s.nodes.len()) {
            group.insert(s.nodes[self.rng.random_range(0..s.nodes.len())].name.clone());
        }
        let moved_at = jiff::Timestamp::now();
        let nodes: Api<Node> = Api::all(self.t.client.clone());
        for n in &group {
            // Labels only: a node half-labelled by a failed try is labelled again, or stays in the main pool.
            if let Err(e) =
                nodes.patch(n, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {GROUP_LABEL: "b"}}}))).await
            {
                eprintln!("[chaos] labelling {n} into the second pool: {e}; retrying");
                return None;
            }
        }
        self.samples_group = true;
        let name = format!("{}-second", self.pool);
        let revision = self.patch_revision + 19;
        let m = pool_manifest(&self.t, &name, Selects::Group, revision, &SECOND_MAX_UNAVAILABLE, false);
        while let Err(e) = apply_pool(&self.t, &m).await {
            eprintln!("[chaos] creating the second pool: {e}; retrying");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        self.second = Some(SecondPool { name: name.clone(), group: group.clone(), moved_at, checker: Checker::new(), last_printed: None });
        self.plan.push((now + Duration::from_secs(5), Chaos::NarrowSelector));
        Some(format!(
            "second pool {name} (patchLevel {}) selects {group:?}, {first} of them installing; {} selects them too",
            patch_level(revision),
            self.pool
        ))
    }

    /// The main pool's selector leaves the group to the second pool.
    async fn narrow_selector(&mut self, sampled: &Sampled) -> Option<String> {
        let group = &self.second.as_ref()?.group;
        self.main_selects = Selects::AllButGroup;
        if let Err(e) = self.apply_main(self.patch_revision, self.paused).await {
            eprintln!("[chaos] narrowing the selector: {e}; retrying");
            self.main_selects = Selects::All;
            return None;
        }
        let in_flight = sampled.as_ref().map(|(s, _, _)| s.nodes.iter().filter(|n| n.in_flight()).count());
        Some(format!("selector of {} narrowed: {group:?} left it for the second pool ({in_flight:?} of its nodes in flight)", self.pool))
    }

    /// The operator's ServiceAccount (namespace, name), as the chart names it.
    fn operator_account(&self) -> (String, String) {
        (self.t.namespace.clone(), format!("{}-winpool", self.t.id))
    }

    /// Every write of the operator's ServiceAccount refused by APF, its
    /// Lease's excepted (the chart's leader-election FlowSchema).
    async fn throttle(&mut self, for_ms: u64, now: Duration) -> Option<String> {
        let (leader, _) = self.fleet.find_leader(&self.t).await?;
        let (ns, sa) = self.operator_account();
        let (level, schema) = throttle_objects(&format!("{}-throttle", self.t.id), &ns, &sa);
        let at = jiff::Timestamp::now();
        let levels: Api<PriorityLevelConfiguration> = Api::all(self.t.client.clone());
        let schemas: Api<FlowSchema> = Api::all(self.t.client.clone());
        let created = async {
            levels.create(&PostParams::default(), &level).await?;
            schemas.create(&PostParams::default(), &schema).await
        };
        if let Err(e) = created.await {
            eprintln!("[chaos] throttling the operator: {e}; retrying");
            let _ = levels.delete(&level.name_any(), &DeleteParams::default()).await;
            return None;
        }
        let (server, tls, token) = flood_credentials(&self.fleet.operator_kubeconfig);
        let flood =
            (0..FLOOD_CLIENTS).map(|_| tokio::spawn(flood(server.clone(), tls.clone(), token.clone(), self.t.agent_namespace()))).collect();
        self.throttled =
            Some(Throttle { leader: leader.clone(), at, since: Instant::now(), exits: self.lease_exits.len(), looked: None, flood });
        self.plan.push((now + Duration::from_millis(for_ms), Chaos::Unthrottle));
        Some(format!(
            "throttled the operator's writes (APF: a level with no seats of its own, 429 for what it cannot run, shared with {FLOOD_CLIENTS} other clients) for {for_ms}ms; leader {leader}"
        ))
    }

    /// The operator's requests APF refused since the throttle began (an
    /// eviction's 429 is a PodDisruptionBudget's, not counted).
    fn refused_since(&self, at: jiff::Timestamp) -> usize {
        let (ns, sa) = self.operator_account();
        let user = format!("system:serviceaccount:{ns}:{sa}");
        let log = ChaosCluster::cluster_dir().join("logs/audit.log");
        let by_apf = |r: &&support::audit::Request| {
            r.code == 429 && r.user_agent.starts_with("winpool/") && r.subresource != "eviction" && r.received.is_some_and(|t| t >= at)
        };
        support::audit::requests_by(&log, &user).iter().filter(by_apf).count()
    }

    /// Lift the throttle once it has refused a write (or THROTTLE_AT_MOST
    /// passed): the leader then must be the one from before, never having lost its Lease.
    async fn unthrottle(&mut self, now: Duration) -> Option<String> {
        let th = self.throttled.as_ref()?;
        if th.since.elapsed() < THROTTLE_AT_MOST {
            if th.looked.is_some_and(|l| l.elapsed() < Duration::from_secs(3)) {
                return None;
            }
            let at = th.at;
            let refused = self.refused_since(at);
            self.throttled.as_mut()?.looked = Some(Instant::now());
            if refused == 0 {
                return None;
            }
        }
        let name = format!("{}-throttle", self.t.id);
        let schemas: Api<FlowSchema> = Api::all(self.t.client.clone());
        let levels: Api<PriorityLevelConfiguration> = Api::all(self.t.client.clone());
        for e in [schemas.delete(&name, &DeleteParams::default()).await.err(), levels.delete(&name, &DeleteParams::default()).await.err()] {
            match e {
                None => {}
                Some(kube::Error::Api(s)) if s.code == 404 => {}
                Some(e) => {
                    eprintln!("[chaos] lifting the throttle: {e}; retrying");
                    return None;
                }
            }
        }
        let th = self.throttled.take()?;
        th.flood.iter().for_each(|f| f.abort());
        // A replica that exited by now (the leader, its Lease lost at the
        // throttle's end) is counted before the exits are compared.
        self.replace_exited().await;
        let leader = self.fleet.find_leader(&self.t).await.map(|(l, _)| l);
        let exits = self.lease_exits.len() - th.exits;
        let lost = leader.as_deref() != Some(th.leader.as_str()) || exits > 0;
        let refused = self.refused_since(th.at);
        self.throttle_refusals += refused;
        let lasted = th.since.elapsed().as_secs_f64();
        self.checker.check_seen(
            now,
            Kind::LeaseLostUnderThrottle,
            lost.then(|| format!("{} led when the operator's writes were throttled; {lasted:.0}s later {leader:?} leads, {exits} replicas having lost the lease", th.leader)),
        );
        Some(format!(
            "unthrottled after {lasted:.1}s: {refused} of the operator's requests refused 429; leader {leader:?}, was {}",
            th.leader
        ))
    }

    /// Deletes a node whose state is `state` (waits until there is one).
    async fn delete_a_node_in(&mut self, sampled: &Sampled, state: &str) -> Option<String> {
        let (s, _, _) = sampled.as_ref()?;
        let matching: Vec<&str> = s.nodes.iter().filter(|n| n.state.as_deref() == Some(state)).map(|n| n.name.as_str()).collect();
        if matching.is_empty() {
            return None;
        }
        let victim = matching[self.rng.random_range(0..matching.len())].to_string();
        match Api::<Node>::all(self.t.client.clone()).delete(&victim, &DeleteParams::default()).await {
            Ok(_) => {
                self.deleted.insert(victim.clone());
                Some(format!("deleted {victim} while it was {state} ({} {})", matching.len(), state.to_lowercase()))
            }
            Err(e) => {
                eprintln!("[chaos] deleting {victim}: {e}; retrying");
                None
            }
        }
    }

    /// A new node matching the pool's selector joins.
    async fn add_node(&mut self) -> Option<String> {
        let name = format!("{}extra-{}", self.t.node_prefix(), self.added.len());
        let node = support::windows_node(&self.t, &name, "10.0.20348.2700", "1.7.20");
        let msg = match Api::<Node>::all(self.t.client.clone()).create(&PostParams::default(), &node).await {
            Ok(_) => format!("added node {name}"),
            Err(kube::Error::Api(e)) if e.code == 409 => format!("added node {name} (it existed: an earlier create got through)"),
            Err(e) => {
                eprintln!("[chaos] adding {name}: {e}; retrying");
                return None;
            }
        };
        self.added.push(name);
        Some(msg)
    }

    /// The revision, once the rollout converged with no event left. Converged
    /// with only drain-time events due (deleting a draining node, killing an
    /// applying agent, refusing evictions need an update under way), it
    /// starts another update by changing the spec again.
    fn converged(&mut self, sampled: &Sampled, now: Duration) -> Option<String> {
        let (s, p, _) = sampled.as_ref()?;
        // A node deleted mid-install may come back (its kubelet registers it
        // again after the reboot, as a real one does): the pool rolls it too.
        match converged(s, p) {
            Ok(rev) if self.plan.is_empty() => return Some(rev),
            Ok(_) => {
                let needs_drain = |w: &Chaos| {
                    matches!(w, Chaos::DeleteDrainingNode | Chaos::KillAgent | Chaos::RefuseEvictions { .. } | Chaos::SecondPool)
                };
                if self.plan.iter().all(|(at, w)| *at <= now && needs_drain(w)) {
                    eprintln!("[chaos] converged with {} drain-time events due: changing the patch level again", self.plan.len());
                    self.plan.push((now, Chaos::ChangePatchLevel));
                    self.plan.sort();
                }
            }
            Err(why) if now.saturating_sub(self.progress.last_printed) >= Duration::from_secs(10) => {
                self.progress.last_printed = now;
                let c = p.status.clone().unwrap_or_default().nodes;
                eprintln!(
                    "[progress {:>6.1}s] {}/{} updated, {} updating, {} pending, {} failed; {} events left; waiting: {why}",
                    now.as_secs_f64(),
                    c.updated,
                    c.total,
                    c.updating,
                    c.pending,
                    c.failed,
                    self.plan.len()
                );
            }
            Err(_) => {}
        }
        None
    }

    /// The end: what needed a grace mid-rollout holds exactly now, and the
    /// API server's audit log is replayed. Returns the evictions judged.
    async fn replay(&mut self) -> usize {
        let at = self.start.elapsed();
        let (last, _, _) = sample(&self.t, &self.pool, self.main_sample(), at).await.expect("final sample");
        self.checker.finish(&last);
        let log_path = ChaosCluster::cluster_dir().join("logs/audit.log");
        let mut audit = support::audit::requests(&log_path, &self.t.node_prefix());
        self.checker.check_drains(at, &support::audit::drains_per_node(&audit));
        if let Some(sp) = self.second.as_mut() {
            let (second_audit, main_audit) = support::audit::split_at_move(&audit, &sp.group, sp.moved_at);
            audit = main_audit;
            let (last, _, _) = sample(&self.t, &sp.name, Selects::Group, at).await.expect("final sample of the second pool");
            sp.checker.finish(&last);
            let peak = support::audit::in_flight_peak(&second_audit);
            sp.checker.check_in_flight_replayed(at, &peak, &SECOND_MAX_UNAVAILABLE, sp.group.len());
            eprintln!("  audit replay: at most {} nodes of the second pool in flight ({})", peak.0, peak.1.join(", "));
        }
        let peak = support::audit::in_flight_peak(&audit);
        self.checker.check_in_flight_replayed(at, &peak, &self.size.max_unavailable, self.size.nodes + self.added.len());
        eprintln!("  audit replay: at most {} nodes in flight ({})", peak.0, peak.1.join(", "));
        let agent = format!("system:serviceaccount:{}:winpool-agent", self.t.agent_namespace());
        self.checker.check_agent_node_writes(at, &support::audit::node_writes_by(&log_path, &agent));
        let log = support::audit::requests_of_test(&log_path, &self.t.node_prefix(), &self.t.namespace);
        let (uncordons, mid_install) = support::audit::uncordons_mid_install(&log);
        self.checker.check_replayed(at, Kind::UncordonedMidInstall, &mid_install);
        let (applied, undrained) = support::audit::applied_undrained(&log);
        self.checker.check_replayed(at, Kind::AppliedUndrained, &undrained);
        eprintln!("  audit replay: {applied} nodes set Applying, {} with no drain of their own", undrained.len());
        let (evictions, off_drain) = support::audit::evictions_off_drain(&log);
        self.checker.check_replayed(at, Kind::EvictedOffDrain, &off_drain);
        let by_replicas = support::audit::requests_by_replicas(&log_path);
        let (replica_writes, without_lease) = support::audit::writes_without_the_lease(&by_replicas, &self.t.namespace, &self.fleet.lease);
        self.checker.check_replayed(at, Kind::WroteWithoutLease, &without_lease);
        let on_skew = support::audit::starts_and_failures_by(&by_replicas, &self.skewed_identities);
        self.checker.check_replayed(at, Kind::ActedOnSkewedClock, &on_skew);
        eprintln!("  audit replay: {replica_writes} writes by operator replicas, {} without the lease", without_lease.len());
        let node_patches = by_replicas.iter().filter(|r| r.resource == "nodes" && r.subresource.is_empty() && r.verb == "patch");
        let (patches, stale) = node_patches.fold((0, 0), |(n, s), r| (n + 1, s + usize::from(r.code == 409)));
        eprintln!("  audit replay: {patches} node patches by replicas, {stale} refused 409 (decided from a view the Node had moved past)");
        eprintln!(
            "  audit replay: {uncordons} uncordons ({} while an agent installed), {evictions} evictions ({} from a node not Draining)",
            mid_install.len(),
            off_drain.len()
        );
        evictions
    }

    fn print_report(&self, final_rev: &str, elapsed: Duration) {
        let seed = self.seed;
        eprintln!(
            "\n==== chaos seed {seed}: converged at revision {final_rev} in {:.0}s after the rollout started ====",
            elapsed.as_secs_f64()
        );
        for (at, msg) in &self.done {
            eprintln!("  {:>6.1}s  {msg}", at.as_secs_f64());
        }
        eprintln!("  operator replicas started: {}, sim incarnations: {}", self.fleet.started, self.fleet.sim);
        eprintln!("  Failed nodes retried: {:?}", self.retried);
        for m in &self.lease_exits {
            eprintln!("  lost the lease: {m}");
        }
        let (l, p) = (&self.liveness, &self.progress);
        eprintln!(
            "  longest gap between two decisions with nodes in flight: {}s (seen at t={:.0}s)",
            l.longest_gap.as_secs(),
            l.longest_gap_at.as_secs_f64()
        );
        eprintln!(
            "  longest a spec change went unobserved: {}s (until t={:.0}s); longest with nodes in flight and none changing state: {}s (until t={:.0}s)",
            p.longest_unobserved.0.as_secs(),
            p.longest_unobserved.1.as_secs_f64(),
            p.longest_freeze.0.as_secs(),
            p.longest_freeze.1.as_secs_f64()
        );
        eprintln!("  {}", eviction_retries(&ChaosCluster::cluster_dir().join("logs/audit.log")));
        for m in l.stalls.values() {
            eprintln!("  STALL: {m}");
        }
        eprintln!("  {}", self.checker.report());
    }

    /// Nothing panicked, every kind of event happened, every invariant held,
    /// and the rollout never stood still past its bounds.
    fn assert_clean(&self, evictions: usize) {
        let seed = self.seed;
        for name in &self.fleet.operator_names {
            assert!(
                !read(&self.t.log_path(name)).contains("panicked"),
                "seed {seed}: {name} panicked:\n{}",
                tail(&self.t.log_path(name), 30)
            );
        }
        for name in &self.fleet.sim_names {
            assert!(!read(&self.t.log_path(name)).contains("panicked"), "seed {seed}: {name} panicked");
        }
        let kinds = kinds_of(&self.done);
        assert_eq!(kinds.len(), 19, "seed {seed}: every kind of chaos happened: {kinds:?}");
        self.checker.assert_clean();
        assert!(evictions > 0, "seed {seed}: the replay judged no eviction: the audit log places none of the drained pods");
        assert!(self.throttle_refusals > 0, "seed {seed}: the throttle refused none of the operator's writes: it tested nothing");
        let fails_once = format!("{}{FAILS_ONCE}", self.t.node_prefix());
        assert!(
            !self.retried.is_empty() || self.deleted.contains(&fails_once),
            "seed {seed}: {fails_once} (install-fails-once) was never Failed and retried: the retry's drain was not tested"
        );
        let stalls = &self.liveness.stalls;
        assert!(
            stalls.is_empty(),
            "seed {seed}: the operator stopped reconciling with nodes in flight:\n{}",
            stalls.values().cloned().collect::<Vec<_>>().join("\n")
        );
        let p = &self.progress;
        for (what, (d, at)) in [("a spec change went unobserved", p.longest_unobserved), ("nodes in flight stood still", p.longest_freeze)]
        {
            assert!(d <= PROGRESS, "seed {seed}: {what} for {}s (until t={:.0}s), more than {PROGRESS:?}", d.as_secs(), at.as_secs_f64());
        }
    }
}

/// The kind of each event, by how its message starts (the first prefix that fits).
const KINDS: &[(&str, &str)] = &[
    ("SIGKILLed", "leader killed"),
    ("froze leader", "leader frozen"),
    ("partitioned leader", "leader partitioned"),
    ("skewed clock", "leader's clock skewed"),
    ("true clock", "leader's clock true"),
    ("second pool", "second pool"),
    ("selector of", "selector narrowed"),
    ("throttled", "operator throttled"),
    ("unthrottled", "operator unthrottled"),
    ("kube-apiserver", "apiserver restarted"),
    ("deleted agent pod", "agent pod deleted"),
    ("added", "node added"),
    ("PDB minAvailable", "evictions refused"),
    ("PDB relaxed", "evictions allowed"),
    ("patchLevel", "patch level changed"),
    ("rollout paused", "paused"),
    ("rollout resumed", "resumed"),
    ("deleted", "node deleted"),
];

/// The kinds of event that happened, by their messages.
fn kinds_of(done: &[(Duration, String)]) -> BTreeSet<&'static str> {
    done.iter()
        .map(|(_, m)| match KINDS.iter().find(|(prefix, _)| m.starts_with(prefix)).map_or("other", |(_, kind)| *kind) {
            "node deleted" if m.contains("Draining") => "node deleted mid-drain",
            "node deleted" => "node deleted mid-apply",
            kind => kind,
        })
        .collect()
}

#[tokio::test]
async fn a_rollout_converges_through_chaos_with_every_invariant_held() {
    let long = std::env::var("WINPOOL_CHAOS_LONG").is_ok_and(|v| !v.is_empty() && v != "0");
    let seed: u64 = match std::env::var("WINPOOL_CHAOS_SEED") {
        Ok(s) => s.trim().parse().unwrap_or_else(|_| panic!("WINPOOL_CHAOS_SEED={s:?} is not a u64")),
        Err(_) => rand::random::<u32>() as u64,
    };
    let cluster = ChaosCluster::up();
    let mut soak = Soak::set_up(&cluster, long, seed).await;
    let converged = soak.run().await;
    let elapsed = soak.start.elapsed();
    let evictions = soak.replay().await;
    soak.print_report(converged.as_deref().unwrap_or("<none: not converged>"), elapsed);
    if let Err(why) = converged {
        panic!("{why}\n{}", soak.checker.report());
    }
    soak.assert_clean(evictions);
    drop(soak);
    drop(cluster);
}
