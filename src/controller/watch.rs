//! What the controller watches, and how it retries.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc::UnboundedReceiver;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Client;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::utils::ResetTimerBackoff;
use kube::runtime::{WatchStreamExt, watcher};
use tracing::{info, warn};

use super::Settings;
use super::recent::RecentWrites;
use crate::api::node_record::{NodeRecord, record_event};
use crate::api::report::WindowsNodeReport;
use crate::api::{WindowsNodePool, names};
use crate::builders::daemonset::LABEL_MANAGED_BY;
use crate::controller::metrics::Metrics;
use crate::decision::hns::HnsTracker;
use crate::decision::membership::{MembershipIndex, PoolEntry, PoolSelector};

/// A hash of what a decision reads from a Node.
pub(super) fn node_relevance(n: &Node) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    n.metadata.name.hash(&mut h);
    n.metadata.labels.hash(&mut h);
    n.metadata.annotations.iter().flatten().filter(|(k, _)| k.starts_with("winpool.dev/")).for_each(|kv| kv.hash(&mut h));
    if let Some(spec) = &n.spec {
        spec.unschedulable.hash(&mut h);
        for t in spec.taints.iter().flatten() {
            (&t.key, &t.effect).hash(&mut h);
        }
    }
    if let Some(st) = &n.status {
        for c in st.conditions.iter().flatten().filter(|c| c.type_ == "Ready" || c.type_ == names::NODE_CONDITION_HNS_READY) {
            (&c.type_, &c.status, &c.reason).hash(&mut h);
        }
        if let Some(i) = &st.node_info {
            // A new boot ID alone is a reboot a Verifying node waits for.
            (&i.kernel_version, &i.container_runtime_version, &i.boot_id).hash(&mut h);
        }
    }
    Some(h.finish())
}

/// Retry a failed watch after 0.5 s, doubling up to 3 s, plus a random jitter of
/// up to as much again (so at most 6 s; kube's default goes up to 30 s plus
/// jitter): after an API-server restart every watch fails a few times, and with
/// the default a pool's spec change was seen up to a minute late. Five watches
/// retrying every few seconds cost the API server nothing worth saving.
pub(super) fn watch_backoff() -> ResetTimerBackoff<watcher::ExponentialBackoff> {
    let retry = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(Duration::from_secs(3))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times();
    ResetTimerBackoff::new(watcher::ExponentialBackoff::from(retry), Duration::from_secs(60))
}

/// The initial state of a big collection (Nodes, Services, EndpointSlices),
/// then its changes. Streamed where the API server can (WatchList,
/// `sendInitialEvents`: the initial objects arrive one event at a time from its
/// watch cache), so winpool never holds more than one of them undecoded; on an
/// API server that refuses it (Kubernetes 1.30 to 1.33 keep the WatchList gate
/// off and answer 422), paged lists of 500, for good. A list at
/// resourceVersion "0" (kube's `any_semantic`) would be served whole, limit
/// ignored: at 10,000 EndpointSlices one response of tens of MiB decoded at once.
pub(super) fn big_collection<K>(api: Api<K>, cfg: watcher::Config) -> BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
{
    enum Mode<K: 'static> {
        // What the paged fallback starts from, boxed: needed once at most.
        Streaming(BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>, Box<(Api<K>, watcher::Config)>),
        Paged(BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>),
    }
    let streaming = watcher(api.clone(), cfg.clone().streaming_lists()).boxed();
    futures::stream::unfold(Mode::Streaming(streaming, Box::new((api, cfg))), |mode| async move {
        match mode {
            Mode::Streaming(mut s, fallback) => match s.next().await? {
                Err(e) if streaming_refused(&e) => {
                    warn!(resource = %K::plural(&Default::default()), error = %e,
                        "the API server does not stream initial lists (WatchList); listing in pages instead");
                    let (api, cfg) = *fallback;
                    let mut paged = watcher(api, cfg.page_size(500)).boxed();
                    let first = paged.next().await?;
                    Some((first, Mode::Paged(paged)))
                }
                item => Some((item, Mode::Streaming(s, fallback))),
            },
            Mode::Paged(mut s) => {
                let item = s.next().await?;
                Some((item, Mode::Paged(s)))
            }
        }
    })
    .boxed()
}

/// A watch with `sendInitialEvents` refused as invalid: the API server has no WatchList.
fn streaming_refused(e: &watcher::Error) -> bool {
    matches!(e, watcher::Error::WatchStartFailed(kube::Error::Api(s)) if s.code == 422 || s.code == 400)
}

/// Feed Services and EndpointSlices into the HNS tracker. Only the events are
/// used (no store): the tracker keeps a few numbers per object.
pub fn spawn_hns_watches(client: &Client, tracker: Arc<Mutex<HnsTracker>>) {
    let services: Api<Service> = Api::all(client.clone());
    let t = tracker.clone();
    tokio::spawn(async move {
        let mut s = std::pin::pin!(big_collection(services, watcher::Config::default()).backoff(watch_backoff()));
        while let Some(ev) = s.next().await {
            match ev {
                Ok(ev) => {
                    let mut t = t.lock().expect("hns lock");
                    t.service_event(&ev);
                    t.charge(jiff::Timestamp::now());
                }
                Err(e) => warn!(error = %e, "Service watch error; retrying"),
            }
        }
    });
    let slices: Api<EndpointSlice> = Api::all(client.clone());
    tokio::spawn(async move {
        let mut s = std::pin::pin!(big_collection(slices, watcher::Config::default()).backoff(watch_backoff()));
        while let Some(ev) = s.next().await {
            match ev {
                Ok(ev) => {
                    let mut t = tracker.lock().expect("hns lock");
                    t.slice_event(&ev);
                    t.charge(jiff::Timestamp::now());
                }
                Err(e) => warn!(error = %e, "EndpointSlice watch error; retrying"),
            }
        }
    });
}

/// The pools this replica reconciles.
pub(super) fn pools(settings: &Settings) -> watcher::Config {
    let cfg = watcher::Config::default().any_semantic();
    match &settings.pool_selector {
        Some(sel) => cfg.labels(sel),
        None => cfg,
    }
}

/// The Windows Nodes: their cache (records of what a decision reads, not
/// Nodes), and the events that concern a decision. Each Node decoded from the
/// watch lives only until its event has passed the predicate and the mapper.
pub(super) fn windows_nodes(
    client: &Client,
    recent: Arc<RecentWrites>,
    membership: Arc<Mutex<MembershipIndex>>,
) -> (Store<NodeRecord>, impl Stream<Item = Result<Node, watcher::Error>> + Send + 'static) {
    let api: Api<Node> = Api::all(client.clone());
    let (store, writer) = reflector::store::<NodeRecord>();
    let mut cache = NodeCacheWriter { store: writer, membership };
    let stream = big_collection(api, watcher::Config::default().labels(&format!("{}=windows", names::LABEL_OS)))
        .backoff(watch_backoff())
        .inspect_ok(move |ev| {
            cache.apply_watcher_event(&record_event(ev));
            recent.delivered(ev);
        })
        .touched_objects()
        // The cache sees every update; reconciles are triggered only by the fields a
        // decision reads, not by kubelet heartbeats rewriting condition timestamps.
        .predicate_filter(|n: &Node| node_relevance(n), Default::default());
    (store, stream)
}

/// The node cache and the membership index, fed the same events in the same
/// order (the cache first: a pool synced in between reads the newer node,
/// and the index's own event for it then changes nothing; a relist's end
/// hands the index the cache's new contents).
pub(super) struct NodeCacheWriter {
    pub store: reflector::store::Writer<NodeRecord>,
    pub membership: Arc<Mutex<MembershipIndex>>,
}

impl NodeCacheWriter {
    pub fn apply_watcher_event(&mut self, ev: &watcher::Event<NodeRecord>) {
        self.store.apply_watcher_event(ev);
        let cache = self.store.as_reader();
        self.membership.lock().expect("membership lock").node_event(ev, || cache.state());
    }
}

/// Bring the membership index up to the pools this replica reconciles, none
/// being deleted; a new or changed pool is matched against the node cache.
pub(super) fn sync_membership(index: &mut MembershipIndex, pools: &Store<WindowsNodePool>, nodes: &Store<NodeRecord>) {
    let pools = pools.state();
    let live: Vec<&Arc<WindowsNodePool>> = pools.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
    let parse: Vec<_> = live.iter().map(|p| move || PoolSelector::new(&p.name_any(), p.spec.os.version, &p.spec.node_selector)).collect();
    let entries = live.iter().zip(&parse).map(|(p, parse)| PoolEntry {
        name: p.metadata.name.as_deref().unwrap_or_default(),
        generation: p.metadata.generation,
        selector: parse,
    });
    index.sync_pools(entries, || nodes.state());
}

/// winpool's agent DaemonSets in the agents' namespace.
pub(super) fn agent_daemonsets(
    client: &Client,
    ns: &str,
) -> (Store<DaemonSet>, impl Stream<Item = Result<DaemonSet, watcher::Error>> + Send + 'static) {
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), ns);
    let (store, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}=winpool")).any_semantic())
        .backoff(watch_backoff())
        .modify(|d: &mut DaemonSet| d.metadata.managed_fields = None)
        .reflect(writer)
        .touched_objects();
    (store, stream)
}

/// winpool's hook Jobs (`rollout.hooks`) in --hooks-namespace; without one, no cache and no events.
pub(super) fn hook_jobs(client: &Client, ns: Option<&str>) -> (Option<Store<Job>>, BoxStream<'static, Result<Job, watcher::Error>>) {
    let Some(ns) = ns else {
        return (None, futures::stream::pending().boxed());
    };
    let api: Api<Job> = Api::namespaced(client.clone(), ns);
    let (store, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}=winpool")).any_semantic())
        .backoff(watch_backoff())
        .modify(|j: &mut Job| {
            j.metadata.managed_fields = None;
            // The pod template is ours and not read back.
            if let Some(spec) = j.spec.as_mut() {
                spec.template = Default::default();
            }
        })
        .reflect(writer)
        .touched_objects();
    (Some(store), stream.boxed())
}

/// The agents' reports in the agents' namespace, without their managedFields.
pub(super) fn agent_reports(
    client: &Client,
    ns: &str,
) -> (Store<WindowsNodeReport>, impl Stream<Item = Result<WindowsNodeReport, watcher::Error>> + Send + 'static) {
    let api: Api<WindowsNodeReport> = Api::namespaced(client.clone(), ns);
    let (store, writer) = reflector::store();
    let stream = big_collection(api, watcher::Config::default())
        .backoff(watch_backoff())
        .modify(crate::api::report::trim)
        .reflect(writer)
        .touched_objects();
    (store, stream)
}

/// A report concerns the pool of its node (a node in no pool yet waits for
/// its label, whose event is the Node's).
pub(super) fn pool_of_report(nodes: &Store<NodeRecord>, report: &WindowsNodeReport) -> Option<ObjectRef<WindowsNodePool>> {
    let node = nodes.get(&ObjectRef::new(&report.name_any()))?;
    node.label(names::LABEL_POOL).map(ObjectRef::new)
}

/// winpool's revision ConfigMaps in the agents' namespace.
pub(super) fn revision_configmaps(
    client: &Client,
    ns: &str,
) -> (Store<ConfigMap>, impl Stream<Item = Result<ConfigMap, watcher::Error>> + Send + 'static) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let (store, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}=winpool")).any_semantic())
        .backoff(watch_backoff())
        .modify(|c: &mut ConfigMap| {
            // A few per pool: their data (the CSI Proxy version a revision asks for) stays.
            c.metadata.managed_fields = None;
        })
        .reflect(writer)
        .touched_objects();
    (store, stream)
}

/// Expected HNS counts move with every Service and endpoint: look every few
/// seconds and, when they moved, signal so every pool re-judges capacity and
/// readiness.
pub(super) fn hns_changes(tracker: Arc<Mutex<HnsTracker>>) -> UnboundedReceiver<()> {
    let (tx, rx) = futures::channel::mpsc::unbounded::<()>();
    tokio::spawn(async move {
        let mut last = (-1, -1);
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            let now = tracker.lock().expect("hns lock").totals();
            if now != last {
                last = now;
                if tx.unbounded_send(()).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// A pool's change concerns every pool that follows it (rollout.follows):
/// its status and its nodes are their gate.
pub(super) fn followers_of(pools: &Store<WindowsNodePool>, pool: &WindowsNodePool) -> Vec<ObjectRef<WindowsNodePool>> {
    let name = pool.name_any();
    let follows = |p: &WindowsNodePool| p.spec.rollout.follows.as_ref().is_some_and(|f| f.pool == name);
    pools.state().iter().filter(|p| follows(p)).map(|p| ObjectRef::from_obj(p.as_ref())).collect()
}

/// A node event concerns the pool whose label it carries and every pool that
/// selects it, by the labels it carries (a deleted node's too), matched
/// against the index's parsed selectors.
pub(super) fn pools_of_node(
    membership: &Mutex<MembershipIndex>,
    pools: &Store<WindowsNodePool>,
    nodes: &Store<NodeRecord>,
    node: &Node,
) -> Vec<ObjectRef<WindowsNodePool>> {
    let mut names: std::collections::BTreeSet<String> = node.labels().get(names::LABEL_POOL).cloned().into_iter().collect();
    let mut index = membership.lock().expect("membership lock");
    sync_membership(&mut index, pools, nodes);
    names.extend(index.pools_matching(node.labels()));
    names.into_iter().map(|p| ObjectRef::<WindowsNodePool>::new(&p)).collect()
}

/// Whether every cache a round reads has listed once, heard by any number of
/// waiters. kube's `Store::wait_until_ready` wakes only the task that polled it
/// last (its `DelayedInit` polls a oneshot receiver, which keeps one waker):
/// with two pools reconciling at start-up, all but one waited for ever, and
/// /readyz with them. So one task waits on the stores, the only one that
/// ever does, and everyone else waits on this.
#[derive(Clone)]
pub(crate) struct CachesSynced(tokio::sync::watch::Receiver<bool>);

impl CachesSynced {
    pub async fn wait(&self) {
        let mut synced = self.0.clone();
        // An error is the task gone with the runtime: nothing left to wait for.
        let _ = synced.wait_for(|s| *s).await;
    }
}

/// Wait on the caches once, then tell every waiter and mark the replica ready.
pub(super) fn caches_synced(
    (nodes, reports, daemonsets, configmaps): (Store<NodeRecord>, Store<WindowsNodeReport>, Store<DaemonSet>, Store<ConfigMap>),
    metrics: Arc<Metrics>,
) -> CachesSynced {
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let _ = nodes.wait_until_ready().await;
        let _ = reports.wait_until_ready().await;
        let _ = daemonsets.wait_until_ready().await;
        let _ = configmaps.wait_until_ready().await;
        metrics.caches_synced.set(1);
        let _ = tx.send(true);
        info!("node, report, DaemonSet and ConfigMap caches synced");
    });
    CachesSynced(rx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::json;

    #[tokio::test]
    async fn every_waiter_hears_that_the_caches_synced_not_only_the_last_one_to_ask() {
        let (nodes, mut w_nodes) = reflector::store::<NodeRecord>();
        let (reports, mut w_reports) = reflector::store::<WindowsNodeReport>();
        let (daemonsets, mut w_daemonsets) = reflector::store::<DaemonSet>();
        let (configmaps, mut w_configmaps) = reflector::store::<ConfigMap>();
        let metrics = Metrics::new();
        let synced = caches_synced((nodes, reports, daemonsets, configmaps), metrics.clone());
        // Two pools' first reconciles and one more, all asking before any cache has listed.
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let s = synced.clone();
                tokio::spawn(async move { s.wait().await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(metrics.caches_synced.get(), 0, "not ready before the caches list");
        w_nodes.apply_watcher_event(&watcher::Event::Init);
        w_nodes.apply_watcher_event(&watcher::Event::InitDone);
        w_reports.apply_watcher_event(&watcher::Event::Init);
        w_reports.apply_watcher_event(&watcher::Event::InitDone);
        w_daemonsets.apply_watcher_event(&watcher::Event::Init);
        w_daemonsets.apply_watcher_event(&watcher::Event::InitDone);
        w_configmaps.apply_watcher_event(&watcher::Event::Init);
        w_configmaps.apply_watcher_event(&watcher::Event::InitDone);
        for (i, w) in waiters.into_iter().enumerate() {
            tokio::time::timeout(Duration::from_secs(5), w).await.unwrap_or_else(|_| panic!("waiter {i} never woke")).unwrap();
        }
        assert_eq!(metrics.caches_synced.get(), 1, "and /readyz says ready");
    }

    fn node(name: &str) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "resourceVersion": "5"}})
    }

    /// The first events of `big_collection` over Nodes against an API server
    /// that streams initial lists or refuses them, and the requests it made.
    async fn first_events(streams: bool) -> (Vec<String>, Vec<String>) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        tokio::spawn(async move {
            while let Some((req, send)) = handle.next_request().await {
                let query = req.uri().query().unwrap_or_default().to_string();
                seen.lock().unwrap().push(query.clone());
                let streamed = query.contains("sendInitialEvents=true");
                let (code, body) = match (streamed, streams, query.contains("watch=true")) {
                    (true, false, _) => (
                        422,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 422, "reason": "Invalid",
                               "message": "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"})
                        .to_string(),
                    ),
                    (true, true, _) => {
                        let end = json!({"type": "BOOKMARK", "object": {"apiVersion": "v1", "kind": "Node",
                            "metadata": {"resourceVersion": "5", "annotations": {"k8s.io/initial-events-end": "true"}}}});
                        (200, format!("{}\n{}\n", json!({"type": "ADDED", "object": node("win-a")}), end))
                    }
                    (false, _, false) => (
                        200,
                        json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "5"}, "items": [node("win-a")]})
                            .to_string(),
                    ),
                    // The watch after a paged list: no change yet.
                    (false, _, true) => continue,
                };
                send.send_response(Response::builder().status(code).body(Body::from(body.into_bytes())).unwrap());
            }
        });
        let api: Api<Node> = Api::all(Client::new(service, "default"));
        let mut events = Vec::new();
        let mut s = big_collection(api, watcher::Config::default());
        while let Some(ev) = s.next().await {
            let done = matches!(ev, Ok(watcher::Event::InitDone));
            events.push(match ev {
                Ok(watcher::Event::Init) => "Init".to_string(),
                Ok(watcher::Event::InitApply(n)) => format!("InitApply {}", n.name_any()),
                Ok(watcher::Event::InitDone) => "InitDone".to_string(),
                other => format!("{other:?}"),
            });
            if done || events.len() == 10 {
                break;
            }
        }
        let requests = requests.lock().unwrap().clone();
        (events, requests)
    }

    #[tokio::test]
    async fn the_initial_state_is_streamed_where_the_api_server_streams_it() {
        let (events, requests) = first_events(true).await;
        assert_eq!(events, ["Init", "InitApply win-a", "InitDone"]);
        assert_eq!(requests.len(), 1, "one watch, no list: {requests:?}");
        assert!(requests[0].contains("watch=true") && requests[0].contains("sendInitialEvents=true"), "{requests:?}");
    }

    #[tokio::test]
    async fn an_api_server_without_watch_list_is_listed_in_pages_instead() {
        let (events, requests) = first_events(false).await;
        // The refusal is no error for the caller: the paged list follows at once.
        assert_eq!(events, ["Init", "InitApply win-a", "InitDone"]);
        assert!(requests[0].contains("sendInitialEvents=true"), "{requests:?}");
        assert!(!requests[1].contains("watch=true") && requests[1].contains("limit=500"), "a page of 500: {requests:?}");
    }

    /// The production Node watch fills the cache with records of the watched
    /// Nodes, marks it ready at the end of the initial list, and retires our
    /// own copy of a node once the watch has delivered it.
    #[tokio::test]
    async fn the_node_watch_fills_the_cache_with_records_and_retires_our_copies() {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        tokio::spawn(async move {
            while let Some((req, send)) = handle.next_request().await {
                if !req.uri().query().unwrap_or_default().contains("sendInitialEvents=true") {
                    continue; // the watch after the initial list: nothing new
                }
                let win_a = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "win-a", "resourceVersion": "5",
                    "labels": {"kubernetes.io/os": "windows"}, "annotations": {"winpool.dev/state": "Cordoned", "other": "x"}}});
                let end = json!({"type": "BOOKMARK", "object": {"apiVersion": "v1", "kind": "Node",
                    "metadata": {"resourceVersion": "5", "annotations": {"k8s.io/initial-events-end": "true"}}}});
                let body = format!("{}\n{}\n", json!({"type": "ADDED", "object": win_a}), end);
                send.send_response(Response::builder().body(Body::from(body.into_bytes())).unwrap());
            }
        });
        let recent = Arc::new(RecentWrites::default());
        let mut ours = Node::default();
        ours.metadata.name = Some("win-a".into());
        ours.metadata.resource_version = Some("5".into());
        recent.wrote(ours);
        // A pool known before the watch starts, selecting every Windows node:
        // the watch's node must reach the membership index too.
        let membership = Arc::new(Mutex::new(MembershipIndex::default()));
        let every = || PoolSelector::new("p", crate::api::OsVersion::Ltsc2022, &Default::default());
        membership.lock().unwrap().sync_pools([PoolEntry { name: "p", generation: Some(1), selector: &every }], Vec::new);
        let (store, stream) = windows_nodes(&Client::new(service, "default"), recent.clone(), membership.clone());
        tokio::spawn(stream.for_each(|_| async {}));
        tokio::time::timeout(Duration::from_secs(10), store.wait_until_ready()).await.expect("the cache syncs").unwrap();
        let cached = store.state();
        assert_eq!(cached.len(), 1);
        assert_eq!((cached[0].name.as_str(), cached[0].annotation("winpool.dev/state")), ("win-a", Some("Cordoned")));
        assert_eq!(cached[0].annotation("other"), None);
        assert_eq!(membership.lock().unwrap().pools_selecting("win-a").collect::<Vec<_>>(), ["p"]);
        // The relist's node reached the store at InitDone; the first round retires our copy.
        recent.freshest(|| store.state());
        assert_eq!(recent.len(), 0);
    }
}
