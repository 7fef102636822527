//! Test harness: the real local control plane (hack/cluster.sh), one client
//! per test, a label space and namespace per test, the winpool binary run as
//! the operator, and `hack/sim.sh` (the agent's own code) as the simulated fleet.
//!
//! A test never passes without a control plane: when a tool is missing it
//! fails and says which command builds it.
#![allow(dead_code)]

pub mod alertmanager;
pub mod audit;
pub mod chart;
pub mod http;
pub mod invariants;
pub mod partition;
pub mod prometheus;
pub mod skewed_clock;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cluster_script() -> PathBuf {
    repo_root().join("hack/cluster.sh")
}

/// Fail with the command that fixes it when the locally built tools are missing.
fn check_tools() {
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}/hack/lib.sh; for t in etcd kube-apiserver kube-controller-manager kube-scheduler kwok kwokctl kubectl; do p=$(tool_path $t); [[ -x $p ]] || echo \"$t ($p)\"; done",
            repo_root().display()
        ))
        .output()
        .expect("bash runs");
    let missing = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        missing.is_empty(),
        "the local control plane's tools are missing: {missing}\nbuild them with: hack/build-tools.sh (a cold build takes ~15-25 minutes)"
    );
}

static KUBECONFIG: OnceLock<PathBuf> = OnceLock::new();
static START_LOCK: Mutex<()> = Mutex::new(());

/// The admin kubeconfig of the local control plane, starting it if it is not up.
pub fn kubeconfig() -> PathBuf {
    let _g = START_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    KUBECONFIG
        .get_or_init(|| {
            check_tools();
            let up = Command::new(cluster_script()).arg("status").stdout(Stdio::null()).stderr(Stdio::null()).status();
            if !matches!(up, Ok(s) if s.success()) {
                let st = Command::new(cluster_script()).arg("up").status().expect("hack/cluster.sh runs");
                assert!(st.success(), "hack/cluster.sh up failed; see its output above");
            }
            let out = Command::new(cluster_script()).arg("kubeconfig").output().expect("hack/cluster.sh kubeconfig runs");
            assert!(out.status.success(), "hack/cluster.sh kubeconfig failed: {}", String::from_utf8_lossy(&out.stderr));
            PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        })
        .clone()
}

pub fn tool(name: &str) -> PathBuf {
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("source {}/hack/lib.sh; tool_path {name}", repo_root().display()))
        .output()
        .expect("bash runs");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

pub async fn client() -> Client {
    let path = kubeconfig();
    let kc = Kubeconfig::read_from(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.expect("valid kubeconfig");
    Client::try_from(cfg).expect("client")
}

/// Install (or update) the CRDs (pools, the agents' reports) from the Rust
/// types and wait until they are served.
pub async fn install_crd(client: &Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in winpool::crd::all() {
        let name = crd.metadata.name.clone().unwrap();
        api.patch(&name, &PatchParams::apply("winpool-tests").force(), &Patch::Apply(&crd)).await.expect("CRD applies");
        wait_for("the CRD to be established", Duration::from_secs(30), || {
            let api = api.clone();
            let name = name.clone();
            async move {
                let c = api.get(&name).await.ok()?;
                c.status?.conditions?.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
            }
        })
        .await;
    }
}

/// Poll `f` until it yields Some, or fail naming what was awaited.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Wait until the pool says its rollout is done: all `total` nodes updated at
/// its current generation, and Ready. The suite's one "rollout finished".
pub async fn wait_pool_done(t: &TestSpace, pool: &str, total: i32, timeout: Duration) -> winpool::api::WindowsNodePool {
    let api: Api<winpool::api::WindowsNodePool> = Api::all(t.client.clone());
    wait_for(&format!("pool {pool} to report all {total} nodes updated and Ready"), timeout, || async {
        let p = api.get(pool).await.ok()?;
        let st = p.status.as_ref()?;
        let ready = st.conditions.iter().any(|c| c.type_ == winpool::api::conditions::READY && c.status == "True");
        let done = st.nodes.total == total && st.nodes.updated == total && st.observed_generation == p.metadata.generation;
        (done && ready).then_some(p)
    })
    .await
}

/// A test's own space: an id, a namespace, and the label `winpool-test=<id>` on its nodes.
pub struct TestSpace {
    pub id: String,
    pub client: Client,
    pub namespace: String,
    children: Vec<(String, Child)>,
    /// The cluster whose agent identity (cluster-scoped policy and roles) this test installed.
    identity_on: Option<PathBuf>,
}

pub const TEST_LABEL: &str = "winpool-test";

impl TestSpace {
    /// A test space on the shared control plane.
    pub async fn new(name: &str) -> Self {
        Self::with_client(name, client().await).await
    }

    pub fn node_prefix(&self) -> String {
        format!("{}-", self.id)
    }

    /// Labels every node of this test carries, so nothing else selects them.
    pub fn node_labels(&self) -> BTreeMap<String, String> {
        [(TEST_LABEL.to_string(), self.id.clone())].into()
    }

    /// The label selector of this test's nodes.
    pub fn selector(&self) -> String {
        format!("{TEST_LABEL}={}", self.id)
    }

    pub fn agent_namespace(&self) -> String {
        format!("{}-agents", self.namespace)
    }

    fn spawn(&mut self, what: &str, args: &[String]) {
        self.spawn_with_kubeconfig(what, args, &kubeconfig());
    }

    pub fn spawn_with_kubeconfig(&mut self, what: &str, args: &[String], kubeconfig: &Path) {
        self.spawn_program(what, Path::new(env!("CARGO_BIN_EXE_winpool")), args, kubeconfig, &[]);
    }

    fn spawn_program(&mut self, what: &str, program: &Path, args: &[String], kubeconfig: &Path, env: &[(String, String)]) {
        let log_path = self.log_path(what);
        std::fs::create_dir_all(log_path.parent().expect("log dir")).ok();
        let log = std::fs::File::create(&log_path).expect("log file");
        let tmp = self.temp_dir();
        std::fs::create_dir_all(&tmp).ok();
        let child = Command::new(program)
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("TMPDIR", &tmp)
            .env("RUST_LOG", std::env::var("WINPOOL_TEST_LOG").unwrap_or_else(|_| "info,kube=warn".into()))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(log.try_clone().expect("log fd"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {} as {what}: {e}", program.display()));
        eprintln!("[{}] started {what} (log: {})", self.id, log_path.display());
        self.children.push((what.to_string(), child));
    }

    /// Run the operator for this test's pools only (pools labelled winpool-test=<id>).
    pub fn start_operator(&mut self, extra: &[&str]) -> u16 {
        self.start_operator_named("operator", extra)
    }

    pub fn start_operator_named(&mut self, what: &str, extra: &[&str]) -> u16 {
        self.start_operator_as(what, extra, &kubeconfig())
    }

    /// The operator with another identity's kubeconfig (e.g. the chart's ServiceAccount).
    pub fn start_operator_as(&mut self, what: &str, extra: &[&str], kubeconfig: &Path) -> u16 {
        self.start_operator_with_env(what, extra, kubeconfig, &[])
    }

    /// The operator with environment variables of its own (as the chart's `extraEnv` sets them).
    pub fn start_operator_with_env(&mut self, what: &str, extra: &[&str], kubeconfig: &Path, env: &[(String, String)]) -> u16 {
        let port = free_port();
        let mut args: Vec<String> = vec![
            "run".into(),
            format!("--metrics-addr=127.0.0.1:{port}"),
            format!("--agent-namespace={}", self.agent_namespace()),
            format!("--pool-selector={TEST_LABEL}={}", self.id),
        ];
        if !extra.iter().any(|e| e.starts_with("--leader-elect")) {
            args.push("--leader-elect=false".into());
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        self.spawn_program(what, Path::new(env!("CARGO_BIN_EXE_winpool")), &args, kubeconfig, env);
        port
    }

    /// The simulated fleet (`hack/sim.sh`): this test's nodes, each with the real
    /// agent code on a fake host, authenticated as the agent of its node.
    pub fn start_sim(&mut self, nodes: usize, extra: &[&str]) {
        self.start_sim_as("sim", nodes, extra, &kubeconfig());
    }

    /// The children's TMPDIR (the fleet's machines live there): removed with
    /// the test, since a child killed with SIGKILL never removes its own.
    pub fn temp_dir(&self) -> PathBuf {
        std::env::temp_dir().join(format!("winpool-test-{}", self.id))
    }

    pub fn log_path(&self, what: &str) -> PathBuf {
        repo_root().join("target-test-logs").join(format!("{}-{what}.log", self.id))
    }

    pub fn stop(&mut self, what: &str) {
        for (w, c) in self.children.iter_mut() {
            if w == what {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        self.children.retain(|(w, _)| w != what);
    }

    /// Stop the child started as `what` as its supervisor would, with SIGTERM,
    /// and wait for it (it may write what it holds on the way out).
    pub fn terminate(&mut self, what: &str) -> Option<std::process::ExitStatus> {
        let (_, c) = self.children.iter_mut().find(|(w, _)| w == what)?;
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
        let status = c.wait().ok();
        self.children.retain(|(w, _)| w != what);
        status
    }

    pub async fn nodes(&self) -> Vec<Node> {
        let api: Api<Node> = Api::all(self.client.clone());
        api.list(&ListParams::default().labels(&format!("{TEST_LABEL}={}", self.id))).await.expect("list nodes").items
    }

    /// What each node's agent reports (its WindowsNodeReport), by node.
    pub async fn reports(&self) -> std::collections::BTreeMap<String, winpool::decision::agent_report::AgentReport> {
        let api: Api<winpool::api::report::WindowsNodeReport> = Api::namespaced(self.client.clone(), &self.agent_namespace());
        let list = api.list(&ListParams::default()).await.expect("list reports").items;
        list.iter().map(|r| (kube::ResourceExt::name_any(r), winpool::decision::agent_report::AgentReport::from_object(r))).collect()
    }

    /// Plays `node`'s agent: its report (created when missing, in the agent
    /// namespace, made when missing) takes `status` as a merge patch of its
    /// status. An error is the API server's answer (a value the schema refuses).
    pub async fn write_report(&self, node: &str, status: serde_json::Value) -> Result<(), kube::Error> {
        let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.agent_namespace()}});
        let _ = Api::<Namespace>::all(self.client.clone()).create(&PostParams::default(), &serde_json::from_value(ns).unwrap()).await;
        let api: Api<winpool::api::report::WindowsNodeReport> = Api::namespaced(self.client.clone(), &self.agent_namespace());
        if api.get_opt(node).await?.is_none() {
            let new = winpool::api::report::WindowsNodeReport::new(node, Default::default());
            match api.create(&PostParams::default(), &new).await {
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                r => {
                    r?;
                }
            }
        }
        api.patch_status(node, &PatchParams::default(), &Patch::Merge(serde_json::json!({"status": status}))).await.map(|_| ())
    }

    /// Delete everything the test made. Leftovers would only cost memory: the
    /// cluster is torn down at the end of the suite.
    pub async fn cleanup(mut self) {
        for (_, c) in self.children.iter_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.children.clear();
        let _ = std::fs::remove_dir_all(self.temp_dir());
        let nodes: Api<Node> = Api::all(self.client.clone());
        let _ =
            nodes.delete_collection(&DeleteParams::default(), &ListParams::default().labels(&format!("{TEST_LABEL}={}", self.id))).await;
        let ns: Api<Namespace> = Api::all(self.client.clone());
        let _ = ns.delete(&self.namespace, &DeleteParams::default()).await;
        let _ = ns.delete(&self.agent_namespace(), &DeleteParams::default()).await;
        if let Some(kubeconfig) = self.identity_on.take() {
            remove_agent_identity(&kubeconfig, &self.agent_namespace());
        }
    }
}

impl Drop for TestSpace {
    fn drop(&mut self) {
        for (_, c) in self.children.iter_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(self.temp_dir());
        // A failed test's own output is all CI keeps: the end of each
        // component's log says why, where the log file is gone with the clone.
        if std::thread::panicking() {
            for (what, _) in &self.children {
                let text = std::fs::read_to_string(self.log_path(what)).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = &lines[lines.len().saturating_sub(LOG_TAIL)..];
                eprintln!("[{}] the last {} lines of {what}'s log:\n{}", self.id, tail.len(), tail.join("\n"));
            }
        }
    }
}

/// How much of each component's log a failed test prints.
const LOG_TAIL: usize = 40;

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

pub fn examples_dir() -> PathBuf {
    repo_root().join("examples")
}

pub fn read_yaml_files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .expect("examples dir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| {
            let s = std::fs::read_to_string(&p).expect("read example");
            (p, s)
        })
        .collect();
    v.sort();
    v
}

/// Whether the operator replica serving metrics on `port` leads (None: no answer).
pub async fn is_leader(port: u16) -> Option<bool> {
    let (_, body) = http_get(port, "/metrics").await?;
    let line = body.lines().find(|l| l.starts_with("winpool_leader "))?;
    Some(line.trim_end().ends_with(" 1"))
}

/// GET a path of a server on loopback (the operator's admin server).
pub async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    http::get_local(port, path).await
}

/// The value of one series on the operator's /metrics page (`name{labels}` exactly as printed).
pub async fn metric(port: u16, series: &str) -> Option<f64> {
    let (_, body) = http_get(port, "/metrics").await?;
    body.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

/// A client for another control plane's admin kubeconfig (e.g. the chaos test's own cluster).
/// It does not retry 429/503/504 by itself (kube's default does, for minutes): a test
/// that provokes them wants to see them.
pub async fn client_for(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).unwrap_or_else(|e| panic!("reading {}: {e}", kubeconfig.display()));
    let mut cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.expect("valid kubeconfig");
    cfg.default_retry = false;
    Client::try_from(cfg).expect("client")
}

impl TestSpace {
    /// A test space on the control plane `client` talks to, which need not be the shared
    /// one: children must then be started with that cluster's kubeconfig
    /// (`start_operator_as`, `start_sim_as`, `spawn_with_kubeconfig`).
    pub async fn with_client(name: &str, client: Client) -> Self {
        let base: String = name.replace('_', "-").chars().take(34).collect();
        let id = format!("{base}-{:04x}", rand::random::<u16>());
        let namespace = format!("t-{id}");
        let ns_api: Api<Namespace> = Api::all(client.clone());
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.clone()),
                labels: Some([(TEST_LABEL.to_string(), id.clone())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        match ns_api.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("creating namespace {namespace}: {e}"),
        }
        TestSpace { id, client, namespace, children: Vec::new(), identity_on: None }
    }

    /// `start_sim` with another kubeconfig, logged as `what` (so a restarted sim keeps the old log).
    /// The agents' identity (ServiceAccount, RBAC, admission policy) is installed
    /// first, from the chart, in this test's agent namespace.
    pub fn start_sim_as(&mut self, what: &str, nodes: usize, extra: &[&str], kubeconfig: &Path) {
        install_agent_identity(kubeconfig, &self.agent_namespace());
        self.identity_on = Some(kubeconfig.to_path_buf());
        let labels = self.node_labels().iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
        let mut args: Vec<String> = vec![
            format!("--nodes={nodes}"),
            format!("--name-prefix={}", self.node_prefix()),
            format!("--labels={labels}"),
            format!("--agent-namespace={}", self.agent_namespace()),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        self.spawn_program(what, &repo_root().join("hack/sim.sh"), &args, kubeconfig, &[]);
    }

    /// The process id of the child started as `what`.
    pub fn pid(&self, what: &str) -> Option<u32> {
        self.children.iter().find(|(w, _)| w == what).map(|(_, c)| c.id())
    }

    /// How the child started as `what` exited, if it did.
    pub fn exit_status(&mut self, what: &str) -> Option<std::process::ExitStatus> {
        let (_, c) = self.children.iter_mut().find(|(w, _)| w == what)?;
        c.try_wait().ok().flatten()
    }

    /// Whether the child started as `what` is still running (None: no such child).
    pub fn is_running(&mut self, what: &str) -> Option<bool> {
        let (_, c) = self.children.iter_mut().find(|(w, _)| w == what)?;
        Some(matches!(c.try_wait(), Ok(None)))
    }
}

/// A pool over this test's nodes (ltsc2022, patch level `patch`, containerd 1.7.22),
/// labelled so that only this test's operator reconciles it. `rollout` overrides
/// the defaults (maxUnavailable 2, nodeTimeout 3m, drain timeout 1m) key by key.
pub fn pool_manifest(t: &TestSpace, name: &str, patch: &str, rollout: serde_json::Value) -> serde_json::Value {
    let mut r = serde_json::json!({"maxUnavailable": 2, "nodeTimeout": "3m", "drain": {"timeout": "1m"}});
    if let (Some(r), Some(extra)) = (r.as_object_mut(), rollout.as_object()) {
        for (k, v) in extra {
            r.insert(k.clone(), v.clone());
        }
    }
    serde_json::json!({
        "apiVersion": "winpool.dev/v1alpha1",
        "kind": "WindowsNodePool",
        "metadata": {"name": name, "labels": {TEST_LABEL: t.id}},
        "spec": {
            "nodeSelector": {"matchLabels": {TEST_LABEL: t.id}},
            "os": {"version": "ltsc2022", "patchLevel": patch},
            "runtime": {"name": "containerd", "version": "1.7.22"},
            "rollout": r,
        }
    })
}

/// Create or update a pool by server-side apply.
pub async fn apply_pool(t: &TestSpace, body: &serde_json::Value) {
    let api: Api<winpool::api::WindowsNodePool> = Api::all(t.client.clone());
    let name = body["metadata"]["name"].as_str().expect("pool name");
    api.patch(name, &PatchParams::apply("winpool-tests").force(), &Patch::Apply(body)).await.expect("pool applies");
}

/// The kubelet's Ready condition is True.
pub fn node_ready(n: &Node) -> bool {
    n.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Wait until exactly `n` of this test's nodes exist and are Ready.
pub async fn wait_nodes_ready(t: &TestSpace, n: usize) {
    wait_for(&format!("{n} simulated nodes Ready"), Duration::from_secs(180), || async {
        let nodes = t.nodes().await;
        (nodes.len() == n && nodes.iter().all(node_ready)).then_some(())
    })
    .await;
}

/// Wait until the agents of all `nodes` nodes have staged an update
/// (`rollout.staging`, on by default). Only staged nodes start, in whatever
/// order their agents finish downloading: a test that depends on the order
/// in which nodes start (the pool's order) resumes its paused pool, or reads
/// its plan, once every node's update is staged.
pub async fn wait_all_staged(t: &TestSpace, nodes: usize) {
    wait_for("every node's update staged", Duration::from_secs(180), || async {
        let reports = t.reports().await;
        let staged = |r: &winpool::decision::agent_report::AgentReport| {
            r.staging.as_ref().is_some_and(|s| s.state == winpool::decision::rollout::StagingState::Staged)
        };
        (reports.len() == nodes && reports.values().all(staged)).then_some(())
    })
    .await;
}

/// A Windows Server 2022 node in this test's label space that kwok keeps
/// Ready, for tests that drive a node by hand (no agent runs on it).
pub fn windows_node(t: &TestSpace, name: &str, kernel: &str, containerd: &str) -> k8s_openapi::api::core::v1::Node {
    let mut labels = t.node_labels();
    labels.insert("kubernetes.io/os".into(), "windows".into());
    labels.insert("kubernetes.io/arch".into(), "amd64".into());
    labels.insert("kubernetes.io/hostname".into(), name.into());
    let build = kernel.rsplit_once('.').map_or(kernel, |(b, _)| b);
    labels.insert("node.kubernetes.io/windows-build".into(), build.into());
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "status": {
            "allocatable": {"cpu": "4", "memory": "15Gi", "pods": "110"},
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "False", "reason": "Registering"}],
            "nodeInfo": {
                "architecture": "amd64", "operatingSystem": "windows", "osImage": "Windows Server 2022 Datacenter",
                "kernelVersion": kernel, "containerRuntimeVersion": format!("containerd://{containerd}"),
                "kubeletVersion": "v1.36.3", "kubeProxyVersion": "", "bootID": format!("boot-{name}"),
                "machineID": "", "systemUUID": ""
            },
        },
    }))
    .expect("a valid Node")
}

/// A Deployment of `replicas` pods on the test's nodes behind a PodDisruptionBudget
/// of `min_available`, so drains must evict through the Eviction API and wait.
/// Returns once every replica is available.
pub async fn protected_workload(t: &TestSpace, replicas: i32, min_available: i32) {
    use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
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
    let deps: Api<Deployment> = Api::namespaced(t.client.clone(), &t.namespace);
    deps.create(&PostParams::default(), &dep).await.expect("deployment");
    create_pdb(t, "web", labels, min_available).await;
    wait_for("the protected workload to be available", Duration::from_secs(120), || async {
        let d = deps.get("web").await.ok()?;
        (d.status?.available_replicas? == replicas).then_some(())
    })
    .await;
}

/// One pod named `name`, labelled `app=<name>`, on `node`, owned by a
/// controller as a workload's pod is (a drain evicts it without `force`).
/// Returns once it runs.
pub async fn pod_on_node(t: &TestSpace, node: &str, name: &str) {
    // Its controller is a ConfigMap: an owner the garbage collector finds
    // alive and that, unlike a ReplicaSet, never adopts or replaces the pod.
    let owners: Api<ConfigMap> = Api::namespaced(t.client.clone(), &t.namespace);
    let owner = ConfigMap { metadata: ObjectMeta { name: Some(format!("{name}-owner")), ..Default::default() }, ..Default::default() };
    let owner = owners.create(&PostParams::default(), &owner).await.expect("the pod's owner");
    let controller = k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: kube::ResourceExt::name_any(&owner),
        uid: kube::ResourceExt::uid(&owner).expect("a created object has a uid"),
        controller: Some(true),
        ..Default::default()
    };
    bare_pod_on_node(t, node, name, vec![controller]).await;
}

/// One pod named `name`, labelled `app=<name>`, on `node`, with these owners
/// (none: a pod no controller recreates). Returns once it runs.
pub async fn bare_pod_on_node(
    t: &TestSpace,
    node: &str,
    name: &str,
    owners: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>,
) {
    use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("app".to_string(), name.to_string())].into()),
            owner_references: Some(owners).filter(|o| !o.is_empty()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            containers: vec![Container {
                name: "c".into(),
                image: Some("mcr.microsoft.com/windows/nanoserver".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    };
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), &t.namespace);
    pods.create(&PostParams::default(), &pod).await.expect("pod");
    wait_for(&format!("pod {name} Running"), Duration::from_secs(120), || async {
        (pods.get(name).await.ok()?.status?.phase.as_deref() == Some("Running")).then_some(())
    })
    .await;
}

/// One pod named `name` on `node` that a PodDisruptionBudget forbids evicting.
/// Returns once it runs and the PDB counts it.
pub async fn unevictable_pod(t: &TestSpace, node: &str, name: &str) {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    pod_on_node(t, node, name).await;
    let labels: BTreeMap<String, String> = [("app".to_string(), name.to_string())].into();
    create_pdb(t, name, labels, 1).await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(t.client.clone(), &t.namespace);
    wait_for(&format!("pod {name}'s PDB to count it"), Duration::from_secs(120), || async {
        (pdbs.get(name).await.ok()?.status?.current_healthy == Some(1)).then_some(())
    })
    .await;
}

async fn create_pdb(t: &TestSpace, name: &str, labels: BTreeMap<String, String>, min_available: i32) {
    use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let pdb = PodDisruptionBudget {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(min_available)),
            selector: Some(LabelSelector { match_labels: Some(labels), match_expressions: None }),
            ..Default::default()
        }),
        status: None,
    };
    Api::<PodDisruptionBudget>::namespaced(t.client.clone(), &t.namespace).create(&PostParams::default(), &pdb).await.expect("pdb");
}

/// Give `agent_namespace` on the cluster of `kubeconfig` the identity the chart gives
/// winpool's agents (ServiceAccount winpool-agent, its RBAC and the own-node admission
/// policy), by hack/agent-identity.sh. The policy and the cluster roles are
/// cluster-scoped: remove them with `remove_agent_identity`.
pub fn install_agent_identity(kubeconfig: &Path, agent_namespace: &str) {
    agent_identity_script(kubeconfig, &[agent_namespace]).unwrap_or_else(|e| panic!("{e}"));
}

/// Undo `install_agent_identity` (the namespace stays). A cleanup: it reports a
/// failure instead of panicking, so that it can run while a failed test unwinds.
pub fn remove_agent_identity(kubeconfig: &Path, agent_namespace: &str) {
    if let Err(e) = agent_identity_script(kubeconfig, &["--delete", agent_namespace]) {
        eprintln!("removing the agent identity of {agent_namespace}: {e}");
    }
}

fn agent_identity_script(kubeconfig: &Path, args: &[&str]) -> Result<(), String> {
    let script = repo_root().join("hack/agent-identity.sh");
    let out = Command::new(&script).args(args).env("KUBECONFIG", kubeconfig).output().map_err(|e| format!("{}: {e}", script.display()))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "hack/agent-identity.sh {} failed:\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// A client for the cluster of `kubeconfig` that authenticates with `token` alone: the
/// server URL and CA come from the kubeconfig, its client certificate does not.
pub async fn client_with_token(kubeconfig: &Path, token: &str) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).unwrap_or_else(|e| panic!("reading {}: {e}", kubeconfig.display()));
    let mut cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.expect("valid kubeconfig");
    // AuthInfo holds the certificate, key, token and exec plugin; only the token is kept.
    cfg.auth_info = serde_json::from_value(serde_json::json!({ "token": token })).expect("token auth info");
    // A refusal is what the tests look for; retrying it would only slow them down.
    cfg.default_retry = false;
    Client::try_from(cfg).expect("client")
}

/// The Events whose `regarding` is the pool `pool` (empty while the API cannot be read).
pub async fn pool_events(t: &TestSpace, pool: &str) -> Vec<k8s_openapi::api::events::v1::Event> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(t.client.clone());
    let list = events.list(&Default::default()).await.map(|l| l.items).unwrap_or_default();
    list.into_iter().filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pool)).collect()
}
