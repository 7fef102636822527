//! Request-order tests of the reconcile shell (kube-rs controller-rs's
//! `fixtures.rs` pattern): `apply` runs against a recorded API (`fake_api.rs`), a small fake
//! API server that keeps the objects, applies each write the way the real one
//! does (merge patch, JSON patch, apply, create, delete, eviction) and records
//! every request. The tests assert the requests themselves: which writes a
//! round makes, in which order, and that a settled pool costs none. Between
//! rounds the tests play the agent and the kubelet from SPEC §2, not from the
//! operator's code.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use http::{Request, Response};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::Client;
use kube::client::Body;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::fake_api::{Cluster, Recorded};
use super::watch::NodeCacheWriter;
use super::{Context, Settings, apply, claim};
use crate::api::node_record::NodeRecord;
use crate::api::report::WindowsNodeReport;
use crate::api::{WindowsNodePool, names};
use crate::controller::metrics::Metrics;
use crate::decision::hns::HnsTracker;
use crate::decision::membership::MembershipIndex;

/// The operator's context on a recorded API, and the stores a watch would fill.
struct Fixture {
    cluster: Arc<Mutex<Cluster>>,
    log: Arc<Mutex<Vec<Recorded>>>,
    ctx: Context,
    nodes: NodeCacheWriter,
    reports: Writer<WindowsNodeReport>,
    daemonsets: Writer<DaemonSet>,
    configmaps: Writer<ConfigMap>,
    pools: Writer<WindowsNodePool>,
}

impl Fixture {
    /// The pool and its nodes, each with an agent that has reported.
    fn new(pool: WindowsNodePool, nodes: Vec<Node>) -> Self {
        let mut cluster = Cluster::default();
        let rev = crate::decision::revision::revision_of(&pool.spec);
        for n in nodes {
            let name = n.metadata.name.clone().unwrap();
            let mut v = serde_json::to_value(&n).unwrap();
            // What a running agent reports before the node's turn.
            let mut r = report(
                &name,
                json!({"agentVersion": "0.3.0", "observed": {"cniMode": "overlay"},
                "hns": {"loadBalancers": 0, "endpoints": 0, "bootID": "boot-1"}}),
            );
            r["status"]["preflight"] = json!({"revision": rev, "verdict": "Ready"});
            r["status"]["staging"] = json!({"revision": rev, "status": "Staged"});
            cluster.bump(&mut r);
            cluster.reports.insert(name.clone(), r);
            cluster.bump(&mut v);
            cluster.nodes.insert(name, v);
        }
        cluster.pool = Some(pool);
        let cluster = Arc::new(Mutex::new(cluster));
        let log = Arc::new(Mutex::new(Vec::new()));
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let (server_cluster, server_log) = (cluster.clone(), log.clone());
        tokio::spawn(async move {
            while let Some((req, send)) = handle.next_request().await {
                let (parts, body) = req.into_parts();
                let bytes = body.collect_bytes().await.expect("a request body");
                let body: Value = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).expect("a JSON body") };
                let content_type =
                    parts.headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
                let (method, path, query) =
                    (parts.method.to_string(), parts.uri.path().to_string(), parts.uri.query().unwrap_or_default().to_string());
                let (code, answer, before, after) = server_cluster.lock().unwrap().serve(&method, &path, &query, &content_type, &body);
                server_log.lock().unwrap().push(Recorded { method, path, query, content_type, body, before, after });
                let resp = Response::builder().status(code).body(Body::from(serde_json::to_vec(&answer).unwrap())).unwrap();
                send.send_response(resp);
            }
        });
        let client = Client::new(service, "default");
        let (node_store, node_writer) = reflector::store();
        let membership = Arc::new(Mutex::new(MembershipIndex::default()));
        let nodes = NodeCacheWriter { store: node_writer, membership: membership.clone() };
        let (report_store, reports) = reflector::store();
        let (ds_store, daemonsets) = reflector::store();
        let (cm_store, configmaps) = reflector::store();
        let (pool_store, pools) = reflector::store();
        let settings = Settings::example("ghcr.io/winpool/agent:test");
        let metrics = Metrics::new();
        metrics.caches_synced.set(1);
        let mut tracker = HnsTracker::new();
        tracker.service_event(&watcher::Event::InitDone);
        tracker.slice_event(&watcher::Event::InitDone);
        let ctx = Context::new(
            client,
            settings,
            (node_store, report_store, ds_store, cm_store, pool_store),
            metrics,
            Arc::new(Mutex::new(tracker)),
            Default::default(),
            membership,
        );
        Fixture { cluster, log, ctx, nodes, reports, daemonsets, configmaps, pools }
    }

    /// The agents of the pool's nodes preflight the revision the operator
    /// marks as its target, and find their hosts ready for it.
    fn agents_preflight(&self) {
        let mut c = self.cluster.lock().unwrap();
        let targets: Vec<String> = c
            .configmaps
            .values()
            .filter(|cm| cm["metadata"]["labels"][names::LABEL_TARGET] == json!("true"))
            .filter_map(|cm| cm["metadata"]["labels"][names::LABEL_REVISION].as_str().map(str::to_string))
            .collect();
        let [rev] = targets.as_slice() else { return };
        let names: Vec<String> = c.nodes.keys().cloned().collect();
        for name in names {
            let mut r = c.reports.remove(&name).unwrap_or_else(|| report(&name, json!({})));
            if r["status"]["preflight"]["revision"] != json!(rev) {
                r["status"]["preflight"] = json!({"revision": rev, "verdict": "Ready"});
                r["status"]["staging"] = json!({"revision": rev, "status": "Staged"});
                c.bump(&mut r);
            }
            c.reports.insert(name, r);
        }
    }

    /// The watches catch up: every store holds what the API server holds.
    fn sync(&mut self) {
        self.agents_preflight();
        self.sync_without_agents();
    }

    /// The watches catch up before any agent has acted on what changed.
    fn sync_without_agents(&mut self) {
        fn relist<K>(w: &mut Writer<K>, objects: impl Iterator<Item = K>)
        where
            K: kube::runtime::reflector::Lookup + Clone + 'static,
            K::DynamicType: Default + Eq + std::hash::Hash + Clone,
        {
            relist_into(|ev| w.apply_watcher_event(ev), objects);
        }
        fn relist_into<K>(mut apply: impl FnMut(&watcher::Event<K>), objects: impl Iterator<Item = K>) {
            apply(&watcher::Event::Init);
            for o in objects {
                apply(&watcher::Event::InitApply(o));
            }
            apply(&watcher::Event::InitDone);
        }
        let c = self.cluster.lock().unwrap();
        fn parse<K: serde::de::DeserializeOwned>(v: &Value) -> K {
            serde_json::from_value(v.clone()).expect("a stored object")
        }
        relist_into(|ev| self.nodes.apply_watcher_event(ev), c.nodes.values().map(|v| NodeRecord::from(&parse::<Node>(v))));
        relist(&mut self.reports, c.reports.values().map(parse));
        relist(&mut self.daemonsets, c.daemonsets.values().map(parse));
        relist(&mut self.configmaps, c.configmaps.values().map(parse));
        relist(&mut self.pools, c.pool.clone().into_iter());
    }

    /// One reconcile of the pool after the watches caught up; the requests it made.
    async fn round(&mut self) -> Vec<Recorded> {
        self.sync();
        let pool = self.cluster.lock().unwrap().pool.clone().unwrap();
        apply::apply(&pool, &self.ctx).await.expect("the round succeeds");
        let unexpected = std::mem::take(&mut self.cluster.lock().unwrap().unexpected);
        assert!(unexpected.is_empty(), "requests no round should make: {unexpected:#?}");
        std::mem::take(&mut *self.log.lock().unwrap())
    }

    /// The shutdown signal arrives while the next round's first node write is on the wire.
    fn stop_at_first_node_write(&self) {
        self.cluster.lock().unwrap().stop_at_first_node_write = Some(self.ctx.stopping.clone());
    }

    /// One reconcile, which may fail; the requests it made.
    async fn round_may_fail(&mut self) -> (Result<kube::runtime::controller::Action, crate::error::Error>, Vec<Recorded>) {
        self.sync();
        let pool = self.cluster.lock().unwrap().pool.clone().unwrap();
        let r = apply::apply(&pool, &self.ctx).await;
        (r, std::mem::take(&mut *self.log.lock().unwrap()))
    }

    /// One reconcile while the watches lag: the stores still hold what the last sync saw.
    async fn round_before_the_watch_catches_up(&mut self) -> Vec<Recorded> {
        let pool = self.cluster.lock().unwrap().pool.clone().unwrap();
        apply::apply(&pool, &self.ctx).await.expect("the round succeeds");
        std::mem::take(&mut *self.log.lock().unwrap())
    }

    /// As if the pool's last status write were long past: the throttle on
    /// progress-only writes (`PROGRESS_WRITE_INTERVAL`) would let any write through.
    fn status_throttle_expired(&self) {
        self.ctx.clock.advance(crate::decision::status::PROGRESS_WRITE_INTERVAL);
    }

    fn node(&self, name: &str) -> Value {
        self.cluster.lock().unwrap().nodes[name].clone()
    }

    /// Change a node as its agent or kubelet would (not a request of the operator's).
    fn on_node(&self, name: &str, f: impl FnOnce(&mut Value)) {
        let mut c = self.cluster.lock().unwrap();
        let mut n = c.nodes.remove(name).unwrap();
        f(&mut n);
        c.bump(&mut n);
        c.nodes.insert(name.into(), n);
    }

    /// The agent and the kubelet of every node the operator has asked to apply
    /// (revision label set, the agent's report cleared): the update is
    /// installed and the node rebooted (new bootID, the target build and
    /// runtime, HNS reprogrammed), and the agent reports Succeeded while the
    /// kubelet has not posted Ready yet; it does by the next call.
    fn agents_apply(&self) {
        let nodes: Vec<(String, Value)> = self.cluster.lock().unwrap().nodes.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for (name, n) in nodes {
            let Some(rev) = n["metadata"]["labels"][names::LABEL_REVISION].as_str().map(str::to_string) else { continue };
            let started = n["metadata"]["annotations"][names::ANN_STARTED_AT].clone();
            let r = self.cluster.lock().unwrap().reports.get(&name).cloned().unwrap_or_default();
            let answered =
                r["status"]["apply"]["revision"] == json!(rev) && (started.is_null() || r["status"]["apply"]["startedAt"] == started);
            if answered {
                if n["status"]["conditions"][0]["status"] == json!("False") {
                    self.on_node(&name, |n| n["status"]["conditions"][0]["status"] = json!("True"));
                }
                continue;
            }
            let csi = self.csi_proxy_running_for(&rev);
            {
                let mut c = self.cluster.lock().unwrap();
                let mut r = c.reports.remove(&name).unwrap_or_else(|| report(&name, json!({})));
                r["status"]["apply"] =
                    json!({"revision": rev, "status": "Succeeded", "message": "installed KB5044281; rebooted", "startedAt": started});
                r["status"]["hns"] = json!({"loadBalancers": 0, "endpoints": 0, "bootID": "boot-2"});
                if let Some(v) = &csi {
                    r["status"]["observed"]["csiProxyVersion"] = json!(v);
                }
                c.bump(&mut r);
                c.reports.insert(name.clone(), r);
            }
            self.on_node(&name, |n| {
                let info = &mut n["status"]["nodeInfo"];
                info["kernelVersion"] = json!("10.0.20348.2762");
                info["containerRuntimeVersion"] = json!("containerd://1.7.22+azure");
                info["bootID"] = json!("boot-2");
                n["status"]["conditions"][0]["status"] = json!("False");
            });
        }
    }

    /// The CSI Proxy version a node on `rev` runs: the image tag of the CSI
    /// Proxy DaemonSet whose node affinity takes that revision (what the
    /// kubelet would start there), without the tag's `v`.
    fn csi_proxy_running_for(&self, rev: &str) -> Option<String> {
        let c = self.cluster.lock().unwrap();
        c.daemonsets.values().find_map(|d| {
            let spec = &d["spec"]["template"]["spec"];
            let terms =
                spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"].as_array()?;
            let takes = terms.iter().any(|t| {
                t["matchExpressions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|e| e["key"] == names::LABEL_REVISION && e["values"].as_array().is_some_and(|v| v.contains(&json!(rev))))
            });
            let image = spec["containers"][0]["image"].as_str()?;
            takes.then(|| image.rsplit_once(':').map(|(_, t)| t.trim_start_matches('v').to_string())).flatten()
        })
    }

    fn set_pool(&self, pool: WindowsNodePool) {
        let mut c = self.cluster.lock().unwrap();
        let status = c.pool.as_ref().and_then(|p| p.status.clone());
        let mut pool = pool;
        pool.status = status;
        pool.metadata.generation = Some(2);
        c.pool = Some(pool);
    }

    fn add_pod(&self, node: &str, name: &str) {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": name, "namespace": "apps", "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-1", "controller": true }] },
            "spec": { "nodeName": node, "containers": [{ "name": "web", "image": "web:1" }] },
            "status": { "phase": "Running" }
        });
        self.cluster.lock().unwrap().pods.insert(name.into(), pod);
    }

    fn label_pod(&self, name: &str, key: &str, value: &str) {
        self.cluster.lock().unwrap().pods.get_mut(name).expect("the pod exists")["metadata"]["labels"] = json!({ key: value });
    }

    fn remove_pod(&self, name: &str) {
        self.cluster.lock().unwrap().pods.remove(name);
    }

    /// Rounds, at most `max`, until each of `nodes` is in state `want`, its
    /// agent applying between rounds where `agents` says so; their requests.
    async fn rounds_until(&mut self, max: usize, agents: bool, nodes: &[impl AsRef<str>], want: &str) -> Vec<Recorded> {
        let mut all = Vec::new();
        for _ in 0..max {
            all.extend(self.round().await);
            if agents {
                self.agents_apply();
            }
            if nodes.iter().all(|n| state(&self.node(n.as_ref())) == Some(want)) {
                break;
            }
        }
        all
    }

    /// win-a's NodeHnsReady condition.
    fn hns_condition(&self) -> Option<Value> {
        let n = self.node("win-a");
        n["status"]["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == names::NODE_CONDITION_HNS_READY)).cloned()
    }

    fn progressing_reason(&self) -> Option<String> {
        let c = self.cluster.lock().unwrap();
        let status = c.pool.as_ref()?.status.as_ref()?;
        status.conditions.iter().find(|c| c.type_ == crate::api::conditions::PROGRESSING).map(|c| c.reason.clone())
    }
}

fn pool(max_unavailable: i32) -> WindowsNodePool {
    pool_with(max_unavailable, "")
}

fn pool_with(max_unavailable: i32, more: &str) -> WindowsNodePool {
    crate::test_builders::pool("win22")
        .selecting("pool", "win22")
        .with("runtime: {version: 1.7.22, upgrade: InPlace}")
        .max_unavailable(max_unavailable)
        .with(more)
        .uid(Some("uid-win22"))
        .generation(1)
        .finalizer(super::FINALIZER)
        .build()
}

/// A node's WindowsNodeReport, as its agent creates it.
fn report(node: &str, status: Value) -> Value {
    json!({"apiVersion": "winpool.dev/v1alpha1", "kind": "WindowsNodeReport",
        "metadata": {"name": node, "namespace": "winpool-agents",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": format!("uid-{node}")}]},
        "spec": {}, "status": status})
}

fn windows_node(name: &str, selector_label: &str) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": { "name": name, "labels": {
            "kubernetes.io/os": "windows", "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name,
            "node.kubernetes.io/windows-build": "10.0.20348", "pool": selector_label },
            "annotations": {} },
        "spec": {},
        "status": {
            "conditions": [{ "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status" }],
            "nodeInfo": {
                "kernelVersion": "10.0.20348.2700", "containerRuntimeVersion": "containerd://1.7.20+azure", "bootID": "boot-1",
                "machineID": name, "systemUUID": name, "osImage": "Windows Server 2022 Datacenter", "operatingSystem": "windows",
                "architecture": "amd64", "kubeletVersion": "v1.36.3", "kubeProxyVersion": ""
            }
        }
    }))
    .unwrap()
}

fn state(n: &Value) -> Option<&str> {
    n["metadata"]["annotations"][names::ANN_STATE].as_str()
}

fn calls(reqs: &[Recorded]) -> Vec<String> {
    reqs.iter().map(Recorded::call).collect()
}

const DS: &str = "/apis/apps/v1/namespaces/winpool-agents/daemonsets/winpool-win22";
const POD_NETWORK_DS: &str = "/apis/apps/v1/namespaces/winpool-agents/daemonsets/winpool-win22-pod-network";
const CMS: &str = "/api/v1/namespaces/winpool-agents/configmaps";
const STATUS: &str = "/apis/winpool.dev/v1alpha1/windowsnodepools/win22/status";
const POOL: &str = "/apis/winpool.dev/v1alpha1/windowsnodepools/win22";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/default/events";

fn node_path(n: &str) -> String {
    format!("/api/v1/nodes/{n}")
}

/// A leader whose lease ran out on its own clock (frozen past it, or its
/// renewal hung) writes nothing in the round it wakes up in: the same round
/// with a valid lease writes the agent, the revision, the nodes and the status.
#[tokio::test]
async fn a_round_after_the_leader_lease_ran_out_writes_nothing() {
    let nodes = || vec![windows_node("win-a", "win22"), windows_node("win-b", "win22")];
    let mut expired = Fixture::new(pool(1), nodes());
    expired.ctx.lease = Some(crate::controller::lease::LeaseValidity::expired());
    let reqs = expired.round().await;
    let writes: Vec<String> = calls(&reqs).into_iter().filter(|c| !c.starts_with("GET")).collect();
    assert!(writes.is_empty(), "a deposed leader wrote: {writes:#?}");

    let mut leading = Fixture::new(pool(1), nodes());
    let writes: Vec<String> = calls(&leading.round().await).into_iter().filter(|c| !c.starts_with("GET")).collect();
    assert!(writes.len() >= 4, "the same round while leading writes: {writes:#?}");
}

/// With an install id, a pool nobody claimed is claimed first (one patch,
/// guarded by the resourceVersion it was read at); a pool another install
/// claimed gets no request at all, and the claim is said once.
#[tokio::test]
async fn an_install_claims_an_unclaimed_pool_and_leaves_another_installs_pool_alone() {
    let nodes = || vec![windows_node("win-a", "win22")];
    let mut f = Fixture::new(pool(1), nodes());
    f.ctx.settings.install_id = "ops/winpool".into();
    f.sync();
    let p = f.cluster.lock().unwrap().pool.clone().unwrap();
    assert_eq!(claim::settle(&p, &f.ctx).await.expect("claimed"), None, "then the round goes on");
    let reqs = std::mem::take(&mut *f.log.lock().unwrap());
    assert_eq!(calls(&reqs), [format!("PATCH {POOL}")], "one claim, nothing else");
    assert_eq!(reqs[0].body["metadata"]["annotations"][names::ANN_CLAIMED_BY], json!("ops/winpool"));
    assert_eq!(reqs[0].body["metadata"]["resourceVersion"], json!(p.metadata.resource_version), "guarded");

    let mut theirs = pool(1);
    theirs.metadata.annotations = Some([(names::ANN_CLAIMED_BY.to_string(), "team-b/winpool".to_string())].into());
    let mut f = Fixture::new(theirs, nodes());
    f.ctx.settings.install_id = "ops/winpool".into();
    f.sync();
    let p = f.cluster.lock().unwrap().pool.clone().unwrap();
    for _ in 0..2 {
        assert!(claim::settle(&p, &f.ctx).await.expect("left alone").is_some(), "this reconcile ends here");
    }
    let reqs = std::mem::take(&mut *f.log.lock().unwrap());
    let writes: Vec<String> = calls(&reqs).into_iter().filter(|c| !c.contains("/events")).collect();
    assert!(writes.is_empty(), "another install's pool gets no request: {writes:#?}");
    assert_eq!(reqs.iter().filter(|r| r.path.contains("/events")).count(), 1, "said once: {:#?}", calls(&reqs));
}

/// An operator whose clock is ten minutes off the API server's (learnt from
/// its Date header) cordons no node, and says why in the pool's status.
#[tokio::test]
async fn a_round_on_a_clock_far_off_the_api_servers_starts_no_node_and_says_why() {
    let nodes = vec![windows_node("win-a", "win22"), windows_node("win-b", "win22")];
    let mut f = Fixture::new(pool(1), nodes);
    let now = jiff::Timestamp::now();
    let server = (now + jiff::SignedDuration::from_mins(10)).strftime("%a, %d %b %Y %H:%M:%S GMT").to_string();
    let i = std::time::Instant::now();
    f.ctx.clock.learn(i, i, now, &server).expect("a Date header");
    let reqs = f.round().await;
    let starts: Vec<&Recorded> =
        reqs.iter().filter(|r| r.path.starts_with("/api/v1/nodes/") && state(&r.after) == Some("Draining")).collect();
    assert!(starts.is_empty(), "a node started on a skewed clock: {:#?}", calls(&reqs));
    let status = reqs.iter().rev().find(|r| r.path == STATUS).expect("the status is written");
    let progressing = status.body["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Progressing").cloned().unwrap();
    assert_eq!(progressing["reason"], json!("ClockSkewed"), "{progressing}");
    assert!(progressing["message"].as_str().unwrap().contains("behind the API server's"), "{progressing}");
}

/// A pool naming an agent image the operator does not allow: its round
/// writes nothing but its status (Stalled, saying why) and one Event, through
/// the same record as every round, and the next round, with nothing changed,
/// makes no request at all.
#[tokio::test]
async fn a_pool_whose_agent_image_is_refused_writes_only_its_status_and_one_event() {
    let nodes = vec![windows_node("win-a", "win22")];
    let mut f = Fixture::new(pool_with(1, "agent: {image: evil.example/agent:1}"), nodes);
    f.ctx.settings.allowed_agent_images = vec!["ghcr.io/winpool/".into()];
    let reqs = f.round().await;
    assert_eq!(calls(&reqs), [format!("POST {EVENTS}"), format!("APPLY {STATUS}")], "{:#?}", calls(&reqs));
    assert_eq!(reqs[0].body["reason"], json!("AgentImageNotAllowed"));
    let stalled = reqs[1].body["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Stalled").cloned().unwrap();
    assert_eq!((&stalled["status"], &stalled["reason"]), (&json!("True"), &json!("AgentImageNotAllowed")), "{stalled}");
    assert!(stalled["message"].as_str().unwrap().contains("evil.example/agent:1"), "{stalled}");
    assert_eq!(calls(&f.round().await), Vec::<String>::new(), "nothing changed: no request");
}

#[tokio::test]
async fn the_first_round_runs_the_agent_and_writes_the_revision_before_any_node_moves_and_the_status_last() {
    let nodes = vec![windows_node("win-a", "win22"), windows_node("win-b", "win22"), windows_node("win-c", "win22")];
    let mut f = Fixture::new(pool(1), nodes);
    let reqs = f.round().await;
    let got = calls(&reqs);

    assert_eq!(got[0], format!("APPLY {DS}"), "the agent DaemonSet first: {got:#?}");
    assert_eq!(got[1], format!("APPLY {POD_NETWORK_DS}"), "then the pod-network DaemonSet: {got:#?}");
    assert_eq!(got[2], format!("POST {CMS}"), "then the revision's ConfigMap: {got:#?}");
    let cm = &reqs[2].body;
    let rev = cm["metadata"]["labels"][names::LABEL_REVISION].as_str().expect("the ConfigMap names its revision").to_string();
    assert_eq!(cm["metadata"]["name"], json!(format!("winpool-win22-{rev}")));
    assert_eq!(cm["immutable"], json!(true), "a revision's configuration never changes");
    assert_eq!(cm["metadata"]["labels"][names::LABEL_TARGET], json!("true"), "marked as the pool's target: its agents preflight it");

    // Each member joins the pool (its agent starts before its turn); with
    // maxUnavailable 1 exactly one starts, and only after every other node write.
    let node_writes: Vec<&Recorded> =
        reqs.iter().filter(|r| r.path.starts_with("/api/v1/nodes/") && !r.path.ends_with("/status")).collect();
    assert_eq!(node_writes.len(), 3, "one write per node: {got:#?}");
    let starts: Vec<&&Recorded> = node_writes.iter().filter(|r| state(&r.after) == Some("Draining")).collect();
    assert_eq!(starts.len(), 1, "maxUnavailable 1: {got:#?}");
    assert!(std::ptr::eq(*starts[0], *node_writes.last().unwrap()), "the start is the last node write: {got:#?}");
    let start = &starts[0].body;
    assert_eq!(start["spec"]["unschedulable"], json!(true), "a start cordons");
    assert_eq!(start["metadata"]["labels"][names::LABEL_POOL], json!("win22"));
    assert!(start["metadata"]["labels"].get(names::LABEL_REVISION).is_none(), "no revision label before the drain");
    for join in node_writes.iter().filter(|r| state(&r.after) != Some("Draining")) {
        assert_eq!(join.body["metadata"]["labels"][names::LABEL_POOL], json!("win22"), "a join labels the node into its pool");
        assert!(join.body.get("spec").is_none(), "a join does not cordon: {:?}", join.body);
    }
    let first_node = got.iter().position(|c| c.starts_with("PATCH /api/v1/nodes/")).unwrap();
    assert!(got[..first_node].iter().all(|c| !c.contains("/nodes/")), "DaemonSet and ConfigMap before any node: {got:#?}");

    // The status is the round's last write but for the Events of its transitions,
    // which follow it: announced once the status that holds them is written.
    let at = got.iter().position(|c| c == &format!("APPLY {STATUS}")).expect("the status is written");
    assert!(got[at + 1..].iter().all(|c| c == &format!("POST {EVENTS}")) && got.len() > at + 1, "then its Events: {got:#?}");
    let status = &reqs[at].body["status"];
    assert_eq!(status["revision"], json!(rev));
    assert_eq!(status["nodes"]["total"], json!(3));
    for r in reqs.iter().filter(|r| r.is_write() && !r.path.starts_with(EVENTS)) {
        assert!(r.query_has("fieldManager=winpool"), "every write names winpool's field manager: {} ?{}", r.call(), r.query);
    }
    for r in reqs.iter().filter(|r| r.call().starts_with("APPLY")) {
        assert!(r.query_has("force=true"), "server-side apply takes ownership: {}", r.call());
    }
}

#[tokio::test]
async fn every_node_write_is_a_transition_and_a_settled_pool_costs_no_request() {
    let nodes = vec![windows_node("win-a", "win22"), windows_node("win-b", "win22")];
    let mut f = Fixture::new(pool(1), nodes);
    let all = f.rounds_until(40, true, &["win-a", "win-b"], "Updated").await;
    for n in ["win-a", "win-b"] {
        let node = f.node(n);
        assert_eq!(state(&node), Some("Updated"), "{n} finished: {node:#}");
        assert_ne!(node["spec"]["unschedulable"], json!(true), "{n} is uncordoned");
    }

    // Per node: exactly the SPEC §2 path, one node write per step.
    for n in ["win-a", "win-b"] {
        let steps: Vec<(Option<&str>, Option<&str>)> =
            all.iter().filter(|r| r.path == node_path(n)).map(|r| (state(&r.before), state(&r.after))).collect();
        // The first node joins the pool and starts in one write; the others join first, then start.
        let (join, path) = steps.split_at(steps.len().saturating_sub(4));
        assert!(join.is_empty() || join == [(None, None)], "{n}: at most one join write before its turn: {steps:?}");
        assert_eq!(
            path,
            [
                (None, Some("Draining")),
                (Some("Draining"), Some("Applying")),
                (Some("Applying"), Some("Verifying")),
                (Some("Verifying"), Some("Updated")),
            ],
            "{n}: start, drained, reported (not Ready yet), verified"
        );
        // The HNS condition is written only when it changes.
        let hns: Vec<&Recorded> = all.iter().filter(|r| r.path == format!("{}/status", node_path(n))).collect();
        let cond = |v: &Value| {
            v["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == names::NODE_CONDITION_HNS_READY))
                .map(|c| (c["status"].clone(), c["reason"].clone()))
        };
        for r in &hns {
            assert_ne!(cond(&r.before), cond(&r.after), "{n}: a nodes/status write that changes nothing: {:?}", r.body);
            // The counts winpool drops at Applying are not an observation: held cordoned, no write says so.
            assert_ne!(cond(&r.after).map(|c| c.1), Some(json!(crate::decision::hns::reasons::AWAITING_REPORT)), "{n}: {:?}", r.body);
        }
    }

    // Never two nodes in flight with maxUnavailable 1: replayed over the writes in order.
    let mut in_flight = BTreeMap::new();
    for r in all.iter().filter(|r| r.path.starts_with("/api/v1/nodes/") && !r.path.ends_with("/status")) {
        let moving = matches!(state(&r.after), Some("Draining" | "Applying" | "Verifying"));
        in_flight.insert(r.path.clone(), moving);
        assert!(in_flight.values().filter(|m| **m).count() <= 1, "two nodes in flight after {}", r.call());
    }

    // Settled: a round that finds everything as it wants it makes no request at all.
    f.status_throttle_expired();
    let mut settled = f.round().await;
    if !settled.is_empty() {
        // The round that saw the last node Updated may still owe its status and Events.
        assert!(settled.iter().all(|r| r.path == STATUS || r.path == EVENTS), "{:#?}", calls(&settled));
        f.status_throttle_expired();
        settled = f.round().await;
    }
    assert!(settled.is_empty(), "a settled pool costs no request: {:#?}", calls(&settled));
}

#[tokio::test]
async fn a_draining_node_is_listed_then_evicted_and_moves_on_in_one_write_once_empty() {
    let mut f = Fixture::new(pool(1), vec![windows_node("win-a", "win22")]);
    f.round().await; // joins and starts win-a
    assert_eq!(state(&f.node("win-a")), Some("Draining"));
    f.add_pod("win-a", "web-1");

    let reqs = f.round().await;
    let got = calls(&reqs);
    let list = got.iter().position(|c| c == "GET /api/v1/pods").expect("the node's pods are listed");
    let evict = got.iter().position(|c| c == "POST /api/v1/namespaces/apps/pods/web-1/eviction").expect("its pod is evicted");
    assert!(list < evict, "{got:#?}");
    assert!(!got.iter().any(|c| c == &format!("PATCH {}", node_path("win-a"))), "still Draining: no node write: {got:#?}");

    let reqs = f.round().await;
    let moves: Vec<&Recorded> = reqs.iter().filter(|r| r.path == node_path("win-a")).collect();
    assert_eq!(moves.len(), 1, "{:#?}", calls(&reqs));
    let body = &moves[0].body;
    assert_eq!(state(&moves[0].after), Some("Applying"));
    let rev = f.cluster.lock().unwrap().pool.as_ref().unwrap().status.as_ref().unwrap().revision.clone();
    assert_eq!(body["metadata"]["labels"][names::LABEL_REVISION], json!(rev), "the label moves for people and selectors");
    // The request to the agent is the operation, written before the node moves to Applying.
    let got = calls(&reqs);
    let op = got.iter().position(|c| c.starts_with("POST /apis/winpool.dev/v1alpha1/namespaces/") && c.ends_with("/windowsnodeoperations"));
    let node = got.iter().position(|c| c == &format!("PATCH {}", node_path("win-a")));
    assert!(op.is_some() && op < node, "the operation lands before the node's patch: {got:#?}");
    let ops = f.cluster.lock().unwrap().operations.clone();
    let written = ops.values().next().expect("one operation");
    assert_eq!((&written["spec"]["nodeName"], &written["spec"]["revision"]), (&json!("win-a"), &json!(rev)));
    assert_eq!(written["status"]["phase"], json!("Applying"));
    assert!(written["status"]["drainedAt"].is_string(), "drained by winpool: its agent may reboot it: {written:#}");
}

#[tokio::test]
async fn a_pod_gate_is_listed_only_when_a_node_could_start_and_its_pod_holds_the_start() {
    let mut pool = pool(1);
    pool.spec.rollout.health_gates =
        vec![serde_saphyr::from_str("{name: no-backups, kind: Pods, selector: {matchLabels: {app: backup}}}").expect("a gate")];
    pool.spec.rollout.health_gate_interval = Some("200ms".into());
    let mut f = Fixture::new(pool, vec![windows_node("win-a", "win22"), windows_node("win-b", "win22")]);
    f.add_pod("elsewhere", "backup-1");
    f.label_pod("backup-1", "app", "backup");
    let gate_lists = |reqs: &[Recorded]| reqs.iter().filter(|r| r.path == "/api/v1/pods" && r.query.contains("labelSelector=")).count();

    let reqs = f.round().await;
    assert_eq!(gate_lists(&reqs), 1, "a node could start: the gate is asked once: {:#?}", calls(&reqs));
    for n in ["win-a", "win-b"] {
        assert_eq!(state(&f.node(n)), None, "{n} is not started while the pod exists");
    }
    assert_eq!(f.progressing_reason().as_deref(), Some("HealthGateClosed"));

    f.remove_pod("backup-1");
    // What the closed gate saw stands until healthGateInterval: the next round asks nobody and starts nobody.
    let reqs = f.round().await;
    assert_eq!(gate_lists(&reqs), 0, "{:#?}", calls(&reqs));
    assert!(["win-a", "win-b"].iter().all(|n| state(&f.node(n)).is_none()));
    // Past the interval the gate is asked again.
    std::thread::sleep(std::time::Duration::from_millis(250));
    let reqs = f.round().await;
    assert_eq!(gate_lists(&reqs), 1);
    assert_eq!(["win-a", "win-b"].iter().filter(|n| state(&f.node(n)) == Some("Draining")).count(), 1, "the pod is gone: one node starts");

    // Its one slot is taken: no node could start, so the gate is not asked.
    let reqs = f.round().await;
    assert_eq!(gate_lists(&reqs), 0, "{:#?}", calls(&reqs));
}

#[tokio::test]
async fn a_deselected_node_is_given_back_before_anything_else_is_written() {
    let mut f = Fixture::new(pool(1), vec![windows_node("win-a", "win22"), windows_node("win-b", "win22")]);
    f.round().await;
    let started = ["win-a", "win-b"].into_iter().find(|n| state(&f.node(n)) == Some("Draining")).unwrap();
    let other = if started == "win-a" { "win-b" } else { "win-a" };
    // The administrator moves the started node out of the pool mid-drain.
    f.on_node(started, |n| n["metadata"]["labels"]["pool"] = json!("elsewhere"));

    let reqs = f.round().await;
    let got = calls(&reqs);
    assert_eq!(got[0], format!("PATCH {}", node_path(started)), "the release comes first: {got:#?}");
    let release = &reqs[0].body;
    assert_eq!(release["metadata"]["labels"][names::LABEL_POOL], Value::Null, "out of the pool");
    assert_eq!(release["spec"]["unschedulable"], json!(false), "winpool's cordon is lifted");
    assert_eq!(state(&reqs[0].after), None, "no rollout state is left behind");
    assert!(
        reqs.iter().any(|r| r.path == node_path(other) && state(&r.after) == Some("Draining")),
        "its slot goes to the other node in the same round: {got:#?}"
    );
}

#[tokio::test]
async fn csi_proxy_runs_per_revision_from_its_own_daemonset_and_the_old_version_goes_with_the_last_node() {
    let csi = |v: &str| format!("storage: {{csiProxy: {{enabled: true, version: {v}}}}}");
    let mut f = Fixture::new(pool_with(1, &csi("v1.1.2")), vec![windows_node("win-a", "win22"), windows_node("win-b", "win22")]);
    let reqs = f.round().await;
    let got = calls(&reqs);
    let old_ds = "/apis/apps/v1/namespaces/winpool-agents/daemonsets/winpool-win22-csi-proxy-v1-1-2";
    let csi_write = got.iter().position(|c| *c == format!("APPLY {old_ds}")).expect("the CSI Proxy DaemonSet is applied");
    let first_node = got.iter().position(|c| c.starts_with("PATCH /api/v1/nodes/")).unwrap();
    assert!(got.iter().position(|c| *c == format!("POST {CMS}")).unwrap() < csi_write, "{got:#?}");
    assert!(csi_write < first_node, "CSI Proxy is there before any node is labelled for its revision: {got:#?}");
    let image = &reqs[csi_write].body["spec"]["template"]["spec"]["containers"][0]["image"];
    assert_eq!(image, &json!("ghcr.io/kubernetes-sigs/sig-windows/csi-proxy:v1.1.2"), "SIG Windows' HostProcess image of that version");
    roll_out_both(&mut f).await;

    // A new CSI Proxy version is a new revision: a second DaemonSet for the
    // nodes moved to it, the first kept while a node still runs the old revision.
    f.set_pool(pool_with(1, &csi("v1.1.3")));
    let new_ds = "/apis/apps/v1/namespaces/winpool-agents/daemonsets/winpool-win22-csi-proxy-v1-1-3";
    let mut all = Vec::new();
    let mut deleted_while_in_use = None;
    for _ in 0..40 {
        let reqs = f.round().await;
        for r in &reqs {
            if r.call() == format!("DELETE {old_ds}") {
                let old_rev = revisions_in(&r.before);
                let on_old: Vec<String> = ["win-a", "win-b"]
                    .iter()
                    .filter(|n| {
                        f.node(n)["metadata"]["labels"][names::LABEL_REVISION].as_str().is_some_and(|l| old_rev.contains(&l.to_string()))
                    })
                    .map(|n| n.to_string())
                    .collect();
                if !on_old.is_empty() {
                    deleted_while_in_use = Some(on_old);
                }
            }
        }
        all.extend(reqs);
        f.agents_apply();
        let c = f.cluster.lock().unwrap();
        let rev = c.pool.as_ref().unwrap().status.as_ref().unwrap().revision.clone();
        drop(c);
        if ["win-a", "win-b"]
            .iter()
            .all(|n| state(&f.node(n)) == Some("Updated") && f.node(n)["metadata"]["labels"][names::LABEL_REVISION] == json!(rev))
        {
            break;
        }
    }
    let got = calls(&all);
    assert!(got.contains(&format!("APPLY {new_ds}")), "{got:#?}");
    assert_eq!(deleted_while_in_use, None, "the old CSI Proxy DaemonSet went while nodes still ran its revision");
    let settled = f.round().await;
    let got_settled = calls(&settled);
    let c = f.cluster.lock().unwrap();
    assert!(!c.daemonsets.contains_key("winpool-win22-csi-proxy-v1-1-2"), "no node needs v1.1.2 any more: {got:#?} {got_settled:#?}");
    assert!(c.daemonsets.contains_key("winpool-win22-csi-proxy-v1-1-3"));
    for n in ["win-a", "win-b"] {
        assert_eq!(c.reports[n]["status"]["observed"]["csiProxyVersion"], json!("1.1.3"), "{n} runs the new CSI Proxy");
    }
}

/// The revisions a CSI Proxy DaemonSet's node affinity takes.
fn revisions_in(ds: &Value) -> Vec<String> {
    let terms =
        &ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
    terms[0]["matchExpressions"][0]["values"].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_string)).collect()
}

/// A refused eviction is asked again only after a backoff (5 s, as kubectl
/// drain waits, then doubling): the reconciles a draining pool's changes set
/// off in between ask nothing of the API server for that pod.
#[tokio::test]
async fn a_refused_eviction_is_asked_again_only_after_its_backoff() {
    let mut p = pool(1);
    p.spec.rollout.drain.put_back_after = "0s".into();
    let mut f = Fixture::new(p, vec![windows_node("win-a", "win22")]);
    f.round().await; // joins and starts win-a
    assert_eq!(state(&f.node("win-a")), Some("Draining"));
    f.add_pod("win-a", "checkout-1");
    f.cluster.lock().unwrap().budgets.insert("checkout-1".into(), "checkout".into());
    let evictions = |reqs: Vec<Recorded>| calls(&reqs).iter().filter(|c| c.ends_with("/eviction")).count();
    assert_eq!(evictions(f.round().await), 1, "asked, and refused");
    assert_eq!(evictions(f.round().await), 0, "a round a moment later does not ask again");
    f.ctx.clock.advance(std::time::Duration::from_secs(5));
    assert_eq!(evictions(f.round().await), 1, "5 s later it asks again, and is refused again");
    f.ctx.clock.advance(std::time::Duration::from_secs(5));
    assert_eq!(evictions(f.round().await), 0, "the second wait is 10 s");
    f.cluster.lock().unwrap().budgets.clear();
    f.ctx.clock.advance(std::time::Duration::from_secs(5));
    assert_eq!(evictions(f.round().await), 1, "then asked, and evicted");
    assert!(f.cluster.lock().unwrap().pods.is_empty(), "the pod is gone");
}

/// rollout.hnsPacing bounds a round's evictions by the room its budget
/// leaves (a 100 ms budget on Windows Server 2022, 54 ms an eviction: one):
/// the shell asks exactly that many, the rest in later rounds, and an
/// eviction counts against the room until its changes can have been heard.
#[tokio::test]
async fn a_round_asks_only_the_evictions_hns_pacing_leaves_room_for() {
    let mut p = pool(1);
    p.spec.rollout.hns_pacing.budget = "100ms".into();
    let mut f = Fixture::new(p, vec![windows_node("win-a", "win22")]);
    f.round().await; // joins and starts win-a
    assert_eq!(state(&f.node("win-a")), Some("Draining"));
    for pod in ["web-1", "web-2", "web-3"] {
        f.add_pod("win-a", pod);
    }
    let evictions = |reqs: Vec<Recorded>| calls(&reqs).iter().filter(|c| c.ends_with("/eviction")).count();
    assert_eq!(evictions(f.round().await), 1, "room for one");
    assert_eq!(evictions(f.round().await), 0, "the changes it causes are not heard yet: it takes the room");
    f.ctx.clock.advance(std::time::Duration::from_secs(10));
    assert_eq!(evictions(f.round().await), 1, "then one more");
    assert_eq!(f.cluster.lock().unwrap().pods.len(), 1, "one left");
}

#[tokio::test]
async fn a_node_a_budget_blocks_is_put_back_before_its_slot_goes_to_the_next_node() {
    let mut p = pool(1);
    p.spec.rollout.drain.put_back_after = "1ms".into();
    let mut f = Fixture::new(p, vec![windows_node("win-a", "win22"), windows_node("win-b", "win22")]);
    f.round().await; // joins both, starts win-a
    assert_eq!(state(&f.node("win-a")), Some("Draining"));
    f.add_pod("win-a", "checkout-1");
    f.cluster.lock().unwrap().budgets.insert("checkout-1".into(), "checkout".into());

    // The eviction is refused and the budget named: no node write yet.
    let reqs = f.round().await;
    let got = calls(&reqs);
    assert!(got.iter().any(|c| c == "POST /api/v1/namespaces/apps/pods/checkout-1/eviction"), "{got:#?}");
    assert!(!got.iter().any(|c| c.starts_with("PATCH /api/v1/nodes/")), "{got:#?}");

    // Refused for longer than putBackAfter: win-a is put back first, then win-b starts, and nothing is evicted.
    std::thread::sleep(std::time::Duration::from_millis(5));
    let reqs = f.round().await;
    let got = calls(&reqs);
    let back = reqs.iter().position(|r| r.path == node_path("win-a")).expect("win-a is written");
    let start = reqs.iter().position(|r| r.path == node_path("win-b")).expect("win-b is written");
    assert!(back < start, "the put-back lands before the start that takes its slot: {got:#?}");
    let a = &reqs[back];
    assert_eq!(state(&a.after), Some("Pending"));
    assert_eq!(a.body["spec"]["unschedulable"], json!(false), "uncordoned");
    assert_eq!(a.after["metadata"]["annotations"][names::ANN_DRAIN_BLOCKED_BY], json!("apps/checkout"));
    assert!(a.after["metadata"]["labels"].get(names::LABEL_STATE).is_none(), "a Pending node carries no state label");
    assert_eq!(state(&reqs[start].after), Some("Draining"));
    assert!(!got.iter().any(|c| c.ends_with("/eviction")), "a node put back is not evicted: {got:#?}");
    let blocked = reqs.iter().find(|r| r.path == EVENTS && r.body["reason"] == json!("DrainBlocked")).expect("a DrainBlocked Event");
    assert!(blocked.body["note"].as_str().unwrap().contains("apps/checkout"), "{}", blocked.body);
}

/// An agent's report names the boot its HNS counts were read in: once the
/// node has rebooted, the counts of the boot before are no counts (HNS starts
/// empty), so the node awaits its agent, and nothing on the Node is written
/// for it.
#[tokio::test]
async fn counts_of_the_boot_before_a_reboot_are_awaited_anew_without_a_node_write() {
    let mut f = Fixture::new(pool(1), vec![windows_node("win-a", "win22")]);
    let status = format!("{}/status", node_path("win-a"));
    let all = f.rounds_until(6, false, &["win-a"], "Applying").await;
    assert_eq!(state(&f.node("win-a")), Some("Applying"), "{:#?}", calls(&all));
    let cond = |n: &Value| {
        n["status"]["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == names::NODE_CONDITION_HNS_READY)).cloned()
    };
    let before = cond(&f.node("win-a")).expect("the node had its HNS condition before its turn");
    // The node reboots: a new bootID; its agent's counts are still those of boot-1.
    f.on_node("win-a", |n| {
        n["status"]["nodeInfo"]["bootID"] = json!("boot-2");
        n["status"]["conditions"][0]["status"] = json!("False");
    });
    for _ in 0..3 {
        let reqs = f.round().await;
        assert!(
            !reqs.iter().any(|r| r.path == status || r.path == node_path("win-a")),
            "nothing observed, nothing written: {:#?}",
            calls(&reqs)
        );
    }
    assert_eq!(f.hns_condition(), Some(before), "the condition says what it said before the update");
    // The node is back at the target build and its agent reports success, but
    // still with the counts it read before the reboot: not verified.
    let started = f.node("win-a")["metadata"]["annotations"][names::ANN_STARTED_AT].clone();
    let rev = f.node("win-a")["metadata"]["labels"][names::LABEL_REVISION].clone();
    let set_report = |f: &Fixture, boot: &str| {
        let mut c = f.cluster.lock().unwrap();
        let mut r = c.reports.remove("win-a").unwrap();
        r["status"]["apply"] = json!({"revision": rev, "status": "Succeeded", "startedAt": started});
        r["status"]["hns"]["bootID"] = json!(boot);
        c.bump(&mut r);
        c.reports.insert("win-a".into(), r);
    };
    set_report(&f, "boot-1");
    f.on_node("win-a", |n| {
        n["status"]["nodeInfo"]["kernelVersion"] = json!("10.0.20348.2762");
        n["status"]["nodeInfo"]["containerRuntimeVersion"] = json!("containerd://1.7.22+azure");
        n["status"]["conditions"][0]["status"] = json!("True");
    });
    for _ in 0..4 {
        f.round().await;
    }
    assert_eq!(state(&f.node("win-a")), Some("Verifying"), "counts of the boot before do not verify HNS");
    // Its agent reads HNS in the new boot: verified and back in service.
    set_report(&f, "boot-2");
    for _ in 0..4 {
        f.round().await;
    }
    assert_eq!(state(&f.node("win-a")), Some("Updated"));
}

#[tokio::test]
async fn a_condition_written_is_not_written_again_before_the_watch_delivers_it() {
    let mut f = Fixture::new(pool(1), vec![windows_node("win-a", "win22")]);
    for _ in 0..20 {
        f.round().await;
        f.agents_apply();
    }
    assert_eq!(state(&f.node("win-a")), Some("Updated"));
    // The agent's report no longer holds HNS counts: only the node's condition changes.
    {
        let mut c = f.cluster.lock().unwrap();
        let mut r = c.reports.remove("win-a").unwrap();
        r["status"].as_object_mut().unwrap().remove("hns");
        c.bump(&mut r);
        c.reports.insert("win-a".into(), r);
    }
    let status = format!("{}/status", node_path("win-a"));
    let first = f.round().await;
    assert_eq!(first.iter().filter(|r| r.path == status).count(), 1, "counts gone: its condition is written: {:#?}", calls(&first));
    assert!(!first.iter().any(|r| r.path == node_path("win-a")), "and nothing else of the node: {:#?}", calls(&first));
    let again = f.round_before_the_watch_catches_up().await;
    assert!(!again.iter().any(|r| r.path == status), "the same condition again: {:#?}", calls(&again));
}

#[tokio::test]
async fn a_replica_told_to_stop_mid_round_sends_no_further_write_and_the_next_leader_finishes_the_round() {
    // More nodes starting than writes in flight at once, so some are still unsent when the signal comes.
    let names: Vec<String> = (0..100).map(|i| format!("win-{i:03}")).collect();
    assert!(names.len() > super::REQUESTS_IN_FLIGHT);
    let mut f = Fixture::new(pool(100), names.iter().map(|n| windows_node(n, "win22")).collect());
    let before: Vec<Value> = names.iter().map(|n| f.node(n)).collect();
    f.stop_at_first_node_write();
    let stopped = f.round().await;
    let node_writes = |reqs: &[Recorded]| -> Vec<Recorded> {
        reqs.iter().filter(|r| r.is_write() && r.path.starts_with("/api/v1/nodes/")).cloned().collect()
    };
    let first = node_writes(&stopped);
    assert!(!first.is_empty(), "the write that was on the wire lands: {:#?}", calls(&stopped));
    assert!(
        first.len() <= super::REQUESTS_IN_FLIGHT,
        "only the writes already sent when the signal came ({} of 100): {:#?}",
        first.len(),
        calls(&stopped)
    );
    assert!(!stopped.iter().any(|r| r.path == STATUS), "no status for a round half written: {:#?}", calls(&stopped));
    let written: std::collections::BTreeSet<&str> =
        first.iter().map(|w| w.path.trim_start_matches("/api/v1/nodes/").trim_end_matches("/status")).collect();
    let changed: std::collections::BTreeSet<&str> =
        names.iter().zip(&before).filter(|(n, b)| f.node(n) != **b).map(|(n, _)| n.as_str()).collect();
    assert_eq!(changed, written, "the nodes changed are those written, and no other");

    // The next leader: a replica that is not stopping.
    f.ctx.stopping.store(false, Ordering::Relaxed);
    let later = f.rounds_until(4, false, &names, "Draining").await;
    assert!(names.iter().all(|n| state(&f.node(n)) == Some("Draining")), "the next leader starts every node: {:#?}", calls(&later));
    let unversioned = |v: &Value| {
        let mut v = v.clone();
        v["metadata"]["resourceVersion"] = Value::Null;
        v
    };
    for w in node_writes(&later) {
        assert_ne!(unversioned(&w.before), unversioned(&w.after), "a write that repeats what the stopped round wrote: {}", w.call());
    }
    assert!(later.iter().any(|r| r.path == STATUS), "its status is written: {:#?}", calls(&later));
}

#[tokio::test]
async fn a_round_after_the_stop_signal_makes_no_request() {
    let mut f = Fixture::new(pool(2), vec![windows_node("win-a", "win22"), windows_node("win-b", "win22")]);
    f.ctx.stop_writing();
    let reqs = f.round().await;
    assert!(reqs.is_empty(), "a stopping replica neither reads nor writes: {:#?}", calls(&reqs));
    assert!(state(&f.node("win-a")).is_none() && state(&f.node("win-b")).is_none());
}

#[tokio::test]
async fn a_start_whose_answer_was_lost_is_not_made_again_from_a_cache_that_missed_it() {
    let mut f = Fixture::new(pool(1), vec![windows_node("win-a", "win22")]);
    f.cluster.lock().unwrap().lose_answer_to = Some("win-a".into());
    let _ = f.round_may_fail().await;
    let started = f.node("win-a")["metadata"]["annotations"][names::ANN_STARTED_AT].clone();
    assert_eq!(state(&f.node("win-a")), Some("Draining"), "the start landed");

    // The watch has not delivered the start, and the lost answer left no copy of it:
    // the cache still shows win-a idle, so the round decides to start it again.
    let again = f.round_before_the_watch_catches_up().await;
    let writes: Vec<&Recorded> = again.iter().filter(|r| r.path == node_path("win-a")).collect();
    assert_eq!(writes.len(), 1, "the start is sent again: {:#?}", calls(&again));
    assert!(writes[0].after.is_null(), "and refused: the node moved since the cache read it: {:?}", writes[0].body);
    assert_eq!(f.node("win-a")["metadata"]["annotations"][names::ANN_STARTED_AT], started, "one start, not two");
    let node_events: Vec<&Value> =
        again.iter().filter(|r| r.path.starts_with(EVENTS) && r.body["regarding"]["kind"] == "Node").map(|r| &r.body).collect();
    assert!(node_events.is_empty(), "no Event on the Node for a start that did not happen: {node_events:#?}");

    let caught_up = f.round().await;
    assert!(caught_up.iter().all(|r| r.path != node_path("win-a") || state(&r.before) == Some("Draining")), "{:#?}", calls(&caught_up));
}

/// A node given back behind this round's cache (another pool's release, a
/// replica that led before) is not moved on from what the cache still shows:
/// the new revision's retarget of a node the cache has Applying is refused,
/// nothing lands, and the caught-up round sees the node as it is.
#[tokio::test]
async fn a_step_decided_from_a_node_that_changed_since_lands_nowhere_and_is_decided_again() {
    let mut f = Fixture::new(pool(1), vec![windows_node("win-a", "win22")]);
    f.rounds_until(4, false, &["win-a"], "Applying").await;
    assert_eq!(state(&f.node("win-a")), Some("Applying"), "{}", f.node("win-a"));
    let mut next = pool(1);
    next.spec.os.patch_level = "10.0.20348.2800".into();
    f.set_pool(next);
    f.on_node("win-a", |n| {
        for a in [
            names::ANN_STATE,
            names::ANN_STARTED_AT,
            names::ANN_TARGET_REVISION,
            names::ANN_DRAINED_REVISION,
            names::ANN_CORDONED_BY_WINPOOL,
        ] {
            n["metadata"]["annotations"].as_object_mut().unwrap().remove(a);
        }
        for l in [names::LABEL_POOL, names::LABEL_REVISION] {
            n["metadata"]["labels"].as_object_mut().unwrap().remove(l);
        }
        n["spec"]["unschedulable"] = json!(false);
    });

    let stale = f.round_before_the_watch_catches_up().await;
    let writes: Vec<&Recorded> = stale.iter().filter(|r| r.path == node_path("win-a")).collect();
    assert!(!writes.is_empty(), "the round moves win-a on from its cache: {:#?}", calls(&stale));
    assert!(writes.iter().all(|w| w.after.is_null()), "and is refused: win-a changed since: {:#?}", writes);
    assert_eq!(state(&f.node("win-a")), None, "nothing landed on the node given back");

    let caught_up = f.round().await;
    let start = caught_up.iter().find(|r| r.path == node_path("win-a") && state(&r.after) == Some("Draining"));
    assert!(
        start.is_some_and(|s| s.body["spec"]["unschedulable"] == json!(true)),
        "it starts anew, with a cordon: {:#?}",
        calls(&caught_up)
    );
}

/// Rounds, with win-a's and win-b's agents applying, until both are Updated.
async fn roll_out_both(f: &mut Fixture) {
    f.rounds_until(40, true, &["win-a", "win-b"], "Updated").await;
    assert!(["win-a", "win-b"].iter().all(|n| state(&f.node(n)) == Some("Updated")), "the first rollout finished");
}

#[tokio::test]
async fn a_new_revision_is_marked_for_preflight_and_no_node_starts_on_it_before_its_agents_cleared_it() {
    let nodes = vec![windows_node("win-a", "win22"), windows_node("win-b", "win22")];
    let mut f = Fixture::new(pool(2), nodes);
    roll_out_both(&mut f).await;
    let old_cm = f.cluster.lock().unwrap().configmaps.keys().next().cloned().expect("the first revision's ConfigMap");

    // The spec moves on: a new patch level; both nodes are pending again.
    f.cluster.lock().unwrap().pool.as_mut().unwrap().spec.os.patch_level = "10.0.20348.2800".into();
    f.sync_without_agents();
    let reqs = f.round_before_the_watch_catches_up().await;
    let got = calls(&reqs);
    let post = got.iter().position(|c| *c == format!("POST {CMS}")).unwrap_or_else(|| panic!("the new revision's ConfigMap: {got:#?}"));
    let unmark =
        got.iter().position(|c| *c == format!("PATCH {CMS}/{old_cm}")).unwrap_or_else(|| panic!("the old mark comes off: {got:#?}"));
    assert_eq!(reqs[post].body["metadata"]["labels"][names::LABEL_TARGET], json!("true"));
    assert!(reqs[post].body["metadata"]["annotations"][names::ANN_TARGET_SINCE].is_string(), "marked with when");
    assert_eq!(
        reqs[unmark].body,
        json!({"metadata": {"labels": {names::LABEL_TARGET: null}, "annotations": {names::ANN_TARGET_SINCE: null}}}),
        "only the mark changes"
    );
    let new_rev = reqs[post].body["metadata"]["labels"][names::LABEL_REVISION].as_str().unwrap().to_string();
    let started_on_new = |reqs: &[Recorded]| {
        reqs.iter()
            .filter(|r| {
                r.path.starts_with("/api/v1/nodes/")
                    && r.after["metadata"]["annotations"][names::ANN_TARGET_REVISION] == json!(new_rev)
                    && r.before["metadata"]["annotations"][names::ANN_TARGET_REVISION] != json!(new_rev)
            })
            .count()
    };
    assert_eq!(started_on_new(&reqs), 0, "no node starts on a revision its agent has not preflighted: {got:#?}");

    // Its agents clear it (the fixture plays them at the next sync): now nodes start.
    let reqs = f.round().await;
    assert!(started_on_new(&reqs) > 0, "nodes start once cleared: {:#?}", calls(&reqs));
}
