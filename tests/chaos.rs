//! Chaos soak (issue 10): a rollout over ~50 simulated nodes on its own control
//! plane while, at seeded random moments, the operator is SIGKILLed and
//! restarted, the kube-apiserver is killed and restarted, a node is deleted
//! mid-drain, a node joins the pool, evictions are refused (429) for a while,
//! and the pool's patch level changes mid-rollout. The invariant checker
//! (tests/support/invariants.rs) samples the cluster every 500ms throughout;
//! the rollout must converge with no violation.
//!
//! The test runs its own cluster (`WINPOOL_CLUSTER=chaos`, ports from 26490) so
//! restarting its API server disturbs no other test, and always tears it down.
//!
//!   WINPOOL_CHAOS_SEED=<u64>   replay a run (the seed is printed at the start)
//!   WINPOOL_CHAOS_LONG=1       200 nodes, maxUnavailable 10%, more of every event

#[path = "support/invariants.rs"]
mod invariants;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use invariants::{Checker, Sample};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use support::{TEST_LABEL, TestSpace, install_crd, repo_root, wait_for};
use winpool::api::{OsVersion, WindowsNodePool};

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
    /// A fresh cluster: whatever an earlier run left behind is deleted first.
    fn up() -> Self {
        let _ = cluster_sh("down").status();
        let st = cluster_sh("up").status().expect("hack/cluster.sh runs");
        assert!(st.success(), "WINPOOL_CLUSTER={CLUSTER} hack/cluster.sh up failed; see its output above");
        let out = cluster_sh("kubeconfig").output().expect("hack/cluster.sh kubeconfig runs");
        assert!(out.status.success());
        ChaosCluster { kubeconfig: PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()) }
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
        match cluster_sh("down").status() {
            Ok(s) if s.success() => {}
            other => eprintln!("WINPOOL_CLUSTER={CLUSTER} hack/cluster.sh down failed: {other:?}"),
        }
    }
}

// ---- What the soak does and when. ----

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Chaos {
    /// SIGKILL the operator; a new one starts after `pause`.
    KillOperator {
        pause_ms: u64,
    },
    RestartApiserver,
    /// Delete a node whose state is Draining (waits until there is one).
    DeleteDrainingNode,
    /// A new node matching the pool's selector joins.
    AddNode,
    /// The PDB allows no disruption (evictions return 429) for this long.
    RefuseEvictions {
        for_ms: u64,
    },
    /// Internal: the end of RefuseEvictions.
    AllowEvictions,
    /// A new patch level: a new revision while the old one is still rolling.
    ChangePatchLevel,
}

struct Size {
    nodes: usize,
    max_unavailable: IntOrString,
    replicas: i32,
    /// How many of each event, spread over [5s, horizon).
    events: Vec<(fn(&mut SmallRng) -> Chaos, usize)>,
    horizon: Duration,
    budget: Duration,
}

fn size(long: bool) -> Size {
    let kill = |r: &mut SmallRng| Chaos::KillOperator { pause_ms: r.random_range(0..3000) };
    let refuse = |r: &mut SmallRng| Chaos::RefuseEvictions { for_ms: r.random_range(8000..20000) };
    let api = |_: &mut SmallRng| Chaos::RestartApiserver;
    let del = |_: &mut SmallRng| Chaos::DeleteDrainingNode;
    let add = |_: &mut SmallRng| Chaos::AddNode;
    let change = |_: &mut SmallRng| Chaos::ChangePatchLevel;
    if long {
        Size {
            nodes: 200,
            max_unavailable: IntOrString::String("10%".into()),
            replicas: 30,
            events: vec![(kill, 6), (api, 3), (del, 3), (add, 3), (refuse, 3), (change, 2)],
            horizon: Duration::from_secs(300),
            budget: Duration::from_secs(45 * 60),
        }
    } else {
        Size {
            nodes: 50,
            max_unavailable: IntOrString::Int(5),
            replicas: 10,
            events: vec![(kill, 2), (api, 1), (del, 1), (add, 1), (refuse, 1), (change, 1)],
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

fn pool_manifest(t: &TestSpace, name: &str, patch_revision: u32, max_unavailable: &IntOrString) -> serde_json::Value {
    json!({
        "apiVersion": "winpool.dev/v1alpha1",
        "kind": "WindowsNodePool",
        "metadata": {"name": name, "labels": {TEST_LABEL: t.id}},
        "spec": {
            "nodeSelector": {"matchLabels": {TEST_LABEL: t.id}},
            "os": {"version": "ltsc2022", "patchLevel": patch_level(patch_revision)},
            "runtime": {"name": "containerd", "version": "1.7.22"},
            "rollout": {
                "maxUnavailable": max_unavailable,
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

/// Pods on the pool's nodes behind a PodDisruptionBudget, so drains take a while.
async fn protected_workload(t: &TestSpace, replicas: i32) {
    let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
    let dep = Deployment {
        metadata: ObjectMeta { name: Some("web".into()), ..Default::default() },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector { match_labels: Some(labels.clone()), match_expressions: None },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels.clone()), ..Default::default() }),
                spec: Some(PodSpec {
                    node_selector: Some([(TEST_LABEL.to_string(), t.id.clone())].into()),
                    containers: vec![Container {
                        name: "web".into(),
                        image: Some("mcr.microsoft.com/windows/servercore/iis".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    };
    Api::<Deployment>::namespaced(t.client.clone(), &t.namespace).create(&PostParams::default(), &dep).await.expect("deployment");
    let pdb = PodDisruptionBudget {
        metadata: ObjectMeta { name: Some("web".into()), ..Default::default() },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(normal_min_available(replicas))),
            selector: Some(LabelSelector { match_labels: Some(labels), match_expressions: None }),
            ..Default::default()
        }),
        status: None,
    };
    Api::<PodDisruptionBudget>::namespaced(t.client.clone(), &t.namespace).create(&PostParams::default(), &pdb).await.expect("pdb");
    let deps: Api<Deployment> = Api::namespaced(t.client.clone(), &t.namespace);
    wait_for("the protected workload to be available", Duration::from_secs(120), || async {
        let d = deps.get("web").await.ok()?;
        (d.status?.available_replicas? == replicas).then_some(())
    })
    .await;
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

fn sim_settings(t: &TestSpace) -> winpool::sim::SimSettings {
    winpool::sim::SimSettings {
        nodes: 1,
        name_prefix: t.node_prefix(),
        labels: t.node_labels(),
        os: OsVersion::Ltsc2022,
        build: "10.0.20348.2700".parse().unwrap(),
        containerd: "1.7.20".parse().unwrap(),
        apply_seconds: 1.0,
        fail_rate: 0.0,
        fail_nodes: Default::default(),
        agent_namespace: t.agent_namespace(),
        seed: 1,
        create: true,
        hns: winpool::sim::HnsReport::Off,
        reboot_seconds: 0.0,
    }
}

/// One look at the cluster, or None while the API is away.
async fn sample(t: &TestSpace, pool: &str, at: Duration) -> Option<(Sample, WindowsNodePool, Vec<Node>)> {
    let timeout = Duration::from_secs(5);
    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    let ds: Api<DaemonSet> = Api::namespaced(t.client.clone(), &t.agent_namespace());
    // Nodes first, then DaemonSets: the operator applies a DaemonSet before it labels a node for it.
    let nodes = tokio::time::timeout(timeout, list_nodes(t)).await.ok()?.ok()?;
    let dss = tokio::time::timeout(timeout, ds.list(&ListParams::default())).await.ok()?.ok()?.items;
    let p = tokio::time::timeout(timeout, pools.get(pool)).await.ok()?.ok()?;
    Some((Sample::from_cluster(at, &p, &nodes, &dss), p, nodes))
}

/// `TestSpace::nodes` without the panic: the API server may be away.
async fn list_nodes(t: &TestSpace) -> kube::Result<Vec<Node>> {
    let api: Api<Node> = Api::all(t.client.clone());
    Ok(api.list(&ListParams::default().labels(&format!("{TEST_LABEL}={}", t.id))).await?.items)
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
/// this long without a decision is a stuck reconcile.
const STALL: Duration = Duration::from_secs(30);

/// Whether the rollout is over: every node Updated at the revision of the pool's
/// current spec, uncordoned, the status saying so, and only that revision's DaemonSet left.
fn converged(s: &Sample, pool: &WindowsNodePool, expected_nodes: usize) -> Result<String, String> {
    let rev = winpool::revision::revision_of(&pool.spec);
    let st = pool.status.clone().unwrap_or_default();
    if pool.metadata.generation != st.observed_generation {
        return Err(format!("status is for generation {:?}, spec is {:?}", st.observed_generation, pool.metadata.generation));
    }
    if st.revision.as_deref() != Some(rev.as_str()) {
        return Err(format!("status revision {:?}, spec revision {rev}", st.revision));
    }
    if s.nodes.len() != expected_nodes {
        return Err(format!("{} nodes, expected {expected_nodes}", s.nodes.len()));
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
    if s.daemonset_revisions != BTreeSet::from([rev.clone()]) {
        return Err(format!("DaemonSets {:?}, want only {rev}", s.daemonset_revisions));
    }
    Ok(rev)
}

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn tail(path: &std::path::Path, n: usize) -> String {
    let text = read(path);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The children of the soak: which operator and sim incarnation is current.
struct Fleet {
    operator: usize,
    /// Metrics port of the current operator, and when it started.
    port: u16,
    operator_since: Instant,
    sim: usize,
    operator_names: Vec<String>,
    sim_names: Vec<String>,
    kubeconfig: PathBuf,
    seed: u64,
    nodes: usize,
}

impl Fleet {
    fn start_operator(&mut self, t: &mut TestSpace) {
        self.operator += 1;
        let name = format!("operator-{}", self.operator);
        self.port = t.start_operator_as(&name, &[], &self.kubeconfig);
        self.operator_since = Instant::now();
        self.operator_names.push(name);
    }

    fn start_sim(&mut self, t: &mut TestSpace) {
        self.sim += 1;
        let name = format!("sim-{}", self.sim);
        let seed = format!("--seed={}", self.seed);
        let mut args = vec!["--apply-seconds=1", "--reboot-seconds=0.5", seed.as_str()];
        // Only the first creates the fleet: a restarted sim must not bring back deleted nodes.
        if self.sim > 1 {
            args.push("--no-create");
        }
        t.start_sim_as(&name, self.nodes, &args, &self.kubeconfig);
        self.sim_names.push(name);
    }

    fn operator(&self) -> String {
        format!("operator-{}", self.operator)
    }

    fn sim(&self) -> String {
        format!("sim-{}", self.sim)
    }
}

#[tokio::test]
async fn a_rollout_converges_through_chaos_with_every_invariant_held() {
    let long = std::env::var("WINPOOL_CHAOS_LONG").is_ok_and(|v| !v.is_empty() && v != "0");
    let seed: u64 = match std::env::var("WINPOOL_CHAOS_SEED") {
        Ok(s) => s.trim().parse().unwrap_or_else(|_| panic!("WINPOOL_CHAOS_SEED={s:?} is not a u64")),
        Err(_) => rand::random::<u32>() as u64,
    };
    let size = size(long);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut plan = schedule(&mut rng, &size);
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
    let cluster = ChaosCluster::up();
    let client = support::client_for(&cluster.kubeconfig).await;
    install_crd(&client).await;
    let mut t = TestSpace::with_client("chaos", client).await;
    let mut fleet = Fleet {
        operator: 0,
        port: 0,
        operator_since: Instant::now(),
        sim: 0,
        operator_names: Vec::new(),
        sim_names: Vec::new(),
        kubeconfig: cluster.kubeconfig.clone(),
        seed,
        nodes: size.nodes,
    };
    fleet.start_sim(&mut t);
    wait_for(&format!("{} simulated nodes Ready", size.nodes), Duration::from_secs(180), || async {
        let n = list_nodes(&t).await.ok()?;
        (n.len() == size.nodes && n.iter().all(winpool::observe::is_ready)).then_some(())
    })
    .await;
    protected_workload(&t, size.replicas).await;

    let pool = format!("{}-pool", t.id);
    let mut patch_revision = FIRST_PATCH_REVISION;
    apply_pool(&t, &pool_manifest(&t, &pool, patch_revision, &size.max_unavailable)).await.expect("pool applies");
    fleet.start_operator(&mut t);
    eprintln!("[{}] set up in {:.0}s; rollout starts", t.id, setup.elapsed().as_secs_f64());

    let start = Instant::now();
    let mut checker = Checker::new();
    let mut done: Vec<(Duration, String)> = Vec::new();
    let mut deleted: BTreeSet<String> = BTreeSet::new();
    let mut added: Vec<String> = Vec::new();
    let mut unexpected_exits: Vec<String> = Vec::new();
    let mut last_progress = Duration::ZERO;
    let mut first_converged: Option<Duration> = None;
    let mut api_back_at: Option<Instant> = None;
    let mut longest_gap = Duration::ZERO;
    let mut stalls: BTreeMap<String, String> = BTreeMap::new();
    let nodes_api: Api<Node> = Api::all(t.client.clone());

    let final_rev = loop {
        let now = start.elapsed();
        assert!(
            now < size.budget,
            "seed {seed}: no convergence within {:?}; events done: {done:?}; pending: {plan:?}\n{}",
            size.budget,
            checker.report()
        );
        let sampled = sample(&t, &pool, now).await;
        if let Some((s, _, _)) = &sampled {
            checker.observe(s);
        }

        // Liveness: while nodes are in flight the pool's reconcile must keep running.
        let settled_in = |since: Instant| since.elapsed() > STALL;
        if let Some((s, _, _)) = &sampled
            && s.nodes.iter().any(|n| n.in_flight())
            && settled_in(fleet.operator_since)
            && api_back_at.is_none_or(settled_in)
            && let Some(last) = last_reconcile(fleet.port, &pool).await
        {
            let gap = Duration::from_secs(unix_now().saturating_sub(last).max(0) as u64);
            longest_gap = longest_gap.max(gap);
            if gap > STALL {
                let in_flight: Vec<String> =
                    s.nodes.iter().filter(|n| n.in_flight()).map(|n| format!("{} ({})", n.name, n.state.as_deref().unwrap_or(""))).collect();
                let key = format!("{}@{last}", fleet.operator());
                if !stalls.contains_key(&key) {
                    eprintln!("[chaos {:>6.1}s] {} has not decided for {}s with nodes in flight", now.as_secs_f64(), fleet.operator(), gap.as_secs());
                }
                stalls.insert(
                    key,
                    format!(
                        "{}: no decision for pool {pool} for {}s (until t={:.0}s) while {} nodes were in flight: {}",
                        fleet.operator(),
                        gap.as_secs(),
                        now.as_secs_f64(),
                        in_flight.len(),
                        in_flight.join(", ")
                    ),
                );
            }
        }

        // The children: a process that died by itself is reported and replaced.
        for (what, alive) in [("operator", t.is_running(&fleet.operator())), ("sim", t.is_running(&fleet.sim()))] {
            if alive == Some(false) {
                let name = if what == "operator" { fleet.operator() } else { fleet.sim() };
                let msg = format!("{name} exited by itself at {:.1}s; last lines:\n{}", now.as_secs_f64(), tail(&t.log_path(&name), 8));
                eprintln!("[chaos] {msg}");
                unexpected_exits.push(msg);
                t.stop(&name);
                if what == "operator" {
                    fleet.start_operator(&mut t);
                } else {
                    fleet.start_sim(&mut t);
                }
            }
        }

        // Due events, in order; one that cannot happen yet stays due.
        let mut i = 0;
        while i < plan.len() {
            let (at, what) = plan[i];
            if at > now {
                break;
            }
            let outcome: Option<String> = match what {
                Chaos::KillOperator { pause_ms } => {
                    let old = fleet.operator();
                    t.stop(&old);
                    tokio::time::sleep(Duration::from_millis(pause_ms)).await;
                    fleet.start_operator(&mut t);
                    Some(format!("SIGKILLed {old}, started {} after {pause_ms}ms", fleet.operator()))
                }
                Chaos::RestartApiserver => {
                    let away = tokio::task::spawn_blocking(ChaosCluster::restart_apiserver).await.expect("restart task");
                    api_back_at = Some(Instant::now());
                    Some(format!("kube-apiserver SIGKILLed and the cluster restarted; API away {:.1}s", away.as_secs_f64()))
                }
                Chaos::DeleteDrainingNode => match &sampled {
                    Some((s, _, _)) => {
                        let draining: Vec<&str> =
                            s.nodes.iter().filter(|n| n.state.as_deref() == Some("Draining")).map(|n| n.name.as_str()).collect();
                        if draining.is_empty() {
                            None
                        } else {
                            let victim = draining[rng.random_range(0..draining.len())].to_string();
                            match nodes_api.delete(&victim, &DeleteParams::default()).await {
                                Ok(_) => {
                                    deleted.insert(victim.clone());
                                    Some(format!("deleted {victim} while it was Draining ({} draining)", draining.len()))
                                }
                                Err(e) => {
                                    eprintln!("[chaos] deleting {victim}: {e}; retrying");
                                    None
                                }
                            }
                        }
                    }
                    None => None,
                },
                Chaos::AddNode => {
                    let name = format!("{}extra-{}", t.node_prefix(), added.len());
                    let node = winpool::sim::simulated_node(&sim_settings(&t), &name);
                    match nodes_api.create(&PostParams::default(), &node).await {
                        Ok(_) => {
                            added.push(name.clone());
                            Some(format!("added node {name}"))
                        }
                        Err(kube::Error::Api(e)) if e.code == 409 => {
                            added.push(name.clone());
                            Some(format!("added node {name} (it existed: an earlier create got through)"))
                        }
                        Err(e) => {
                            eprintln!("[chaos] adding {name}: {e}; retrying");
                            None
                        }
                    }
                }
                Chaos::RefuseEvictions { for_ms } => match set_pdb_min_available(&t, size.replicas).await {
                    Ok(()) => {
                        let proof = evictions_refused(&t).await;
                        assert!(proof.is_ok(), "seed {seed}: the PDB did not refuse evictions: {proof:?}");
                        plan.push((now + Duration::from_millis(for_ms), Chaos::AllowEvictions));
                        let draining = sampled
                            .as_ref()
                            .map_or(0, |(s, _, _)| s.nodes.iter().filter(|n| n.state.as_deref() == Some("Draining")).count());
                        Some(format!("PDB minAvailable={} (evictions get 429) for {for_ms}ms; {draining} nodes draining", size.replicas))
                    }
                    Err(e) => {
                        eprintln!("[chaos] tightening the PDB: {e}; retrying");
                        None
                    }
                },
                Chaos::AllowEvictions => match set_pdb_min_available(&t, normal_min_available(size.replicas)).await {
                    Ok(()) => {
                        let draining = sampled
                            .as_ref()
                            .map_or(0, |(s, _, _)| s.nodes.iter().filter(|n| n.state.as_deref() == Some("Draining")).count());
                        Some(format!("PDB relaxed to minAvailable={}; {draining} nodes were draining", normal_min_available(size.replicas)))
                    }
                    Err(_) => None,
                },
                Chaos::ChangePatchLevel => {
                    let next = patch_revision + 38;
                    match apply_pool(&t, &pool_manifest(&t, &pool, next, &size.max_unavailable)).await {
                        Ok(()) => {
                            patch_revision = next;
                            let st = sampled.as_ref().map(|(_, p, _)| p.status.clone().unwrap_or_default().nodes);
                            Some(format!("patchLevel -> {} (status was {st:?})", patch_level(next)))
                        }
                        Err(e) => {
                            eprintln!("[chaos] changing the patch level: {e}; retrying");
                            None
                        }
                    }
                }
            };
            match outcome {
                Some(msg) => {
                    let when = start.elapsed();
                    eprintln!("[chaos {:>6.1}s] {msg}", when.as_secs_f64());
                    done.push((when, msg));
                    plan.remove(i);
                    plan.sort();
                    i = 0;
                }
                None => i += 1,
            }
        }

        let expected = size.nodes + added.len() - deleted.len();
        if let Some((s, p, _)) = &sampled {
            match converged(s, p, expected) {
                Ok(rev) if plan.is_empty() => break rev,
                Ok(_) => {
                    first_converged.get_or_insert(now);
                    // Only a node deletion needs a rollout in flight; give it one by changing the spec again.
                    if plan.iter().all(|(_, w)| *w == Chaos::DeleteDrainingNode) && !plan.iter().any(|(_, w)| *w == Chaos::ChangePatchLevel)
                    {
                        eprintln!("[chaos] converged with a node deletion still due: changing the patch level again");
                        plan.push((now, Chaos::ChangePatchLevel));
                        plan.sort();
                    }
                }
                Err(why) => {
                    if now.saturating_sub(last_progress) >= Duration::from_secs(10) {
                        last_progress = now;
                        let c = p.status.clone().unwrap_or_default().nodes;
                        eprintln!(
                            "[progress {:>6.1}s] {}/{} updated, {} updating, {} pending, {} failed; {} events due; waiting: {why}",
                            now.as_secs_f64(),
                            c.updated,
                            c.total,
                            c.updating,
                            c.pending,
                            c.failed,
                            plan.len()
                        );
                    }
                }
            }
        }
        tokio::time::sleep(SAMPLE_EVERY).await;
    };
    let elapsed = start.elapsed();

    // The end: everything that needed a grace mid-rollout must hold exactly now.
    let (last, _, _) = sample(&t, &pool, start.elapsed()).await.expect("final sample");
    checker.finish(&last);
    let operator_logs: Vec<String> = fleet.operator_names.iter().map(|n| read(&t.log_path(n))).collect();
    checker.check_logs(start.elapsed(), &operator_logs);

    eprintln!(
        "\n==== chaos seed {seed}: converged at revision {final_rev} in {:.0}s after the rollout started ====",
        elapsed.as_secs_f64()
    );
    for (at, msg) in &done {
        eprintln!("  {:>6.1}s  {msg}", at.as_secs_f64());
    }
    eprintln!("  operator incarnations: {}, sim incarnations: {}", fleet.operator, fleet.sim);
    for m in &unexpected_exits {
        eprintln!("  UNEXPECTED EXIT: {m}");
    }
    eprintln!("  longest gap between two decisions with nodes in flight: {}s", longest_gap.as_secs());
    for m in stalls.values() {
        eprintln!("  STALL: {m}");
    }
    eprintln!("  {}", checker.report());

    for (name, text) in fleet.operator_names.iter().zip(&operator_logs) {
        assert!(!text.contains("panicked"), "seed {seed}: {name} panicked:\n{}", tail(&t.log_path(name), 30));
    }
    for name in &fleet.sim_names {
        assert!(!read(&t.log_path(name)).contains("panicked"), "seed {seed}: {name} panicked");
    }
    let kinds: BTreeSet<&str> = done
        .iter()
        .map(|(_, m)| match m {
            m if m.starts_with("SIGKILLed") => "operator killed",
            m if m.starts_with("kube-apiserver") => "apiserver restarted",
            m if m.starts_with("deleted") => "node deleted mid-drain",
            m if m.starts_with("added") => "node added",
            m if m.starts_with("PDB minAvailable") => "evictions refused",
            m if m.starts_with("PDB relaxed") => "evictions allowed",
            m if m.starts_with("patchLevel") => "patch level changed",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds.len(), 7, "seed {seed}: every kind of chaos happened: {kinds:?}");
    // A process that exits when the API is away is restarted (as the kubelet would) and reported above, not failed:
    // the invariants and the convergence are what this test proves.
    checker.assert_clean();
    assert!(stalls.is_empty(), "seed {seed}: the operator stopped reconciling with nodes in flight:\n{}", stalls.values().cloned().collect::<Vec<_>>().join("\n"));
    drop(t);
    drop(cluster);
}
