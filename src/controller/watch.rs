//! What the controller watches, and how it retries.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc::UnboundedReceiver;
use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::DaemonSet;
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
use crate::api::{WindowsNodePool, names};
use crate::daemonset::LABEL_MANAGED_BY;
use crate::hns::HnsTracker;
use crate::membership::{PoolSelector, pools_selecting};
use crate::metrics::Metrics;
use crate::observe::strip;

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
            (&i.kernel_version, &i.container_runtime_version).hash(&mut h);
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

/// Watch config for the big collections (Nodes, Services, EndpointSlices): the
/// initial list is read in pages of 500. A list at resourceVersion "0" (kube's
/// `any_semantic`) is served whole from the API server's cache, limit ignored:
/// at 10,000 EndpointSlices that is one response of tens of MiB, decoded at once,
/// and it set winpool's peak memory. Pages keep the peak at one page; the
/// watcher hands each page's objects on before it asks for the next.
pub(super) fn paged() -> watcher::Config {
    watcher::Config::default().page_size(500)
}

/// Feed Services and EndpointSlices into the HNS tracker. Only the events are
/// used (no store): the tracker keeps a few numbers per object.
pub fn spawn_hns_watches(client: &Client, tracker: Arc<Mutex<HnsTracker>>) {
    let services: Api<Service> = Api::all(client.clone());
    let t = tracker.clone();
    tokio::spawn(async move {
        let mut s = std::pin::pin!(watcher(services, paged()).backoff(watch_backoff()));
        while let Some(ev) = s.next().await {
            match ev {
                Ok(ev) => t.lock().expect("hns lock").service_event(&ev),
                Err(e) => warn!(error = %e, "Service watch error; retrying"),
            }
        }
    });
    let slices: Api<EndpointSlice> = Api::all(client.clone());
    tokio::spawn(async move {
        let mut s = std::pin::pin!(watcher(slices, paged()).backoff(watch_backoff()));
        while let Some(ev) = s.next().await {
            match ev {
                Ok(ev) => tracker.lock().expect("hns lock").slice_event(&ev),
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

/// The Windows Nodes: their cache, and the events that concern a decision.
pub(super) fn windows_nodes(client: &Client) -> (Store<Node>, impl Stream<Item = Result<Node, watcher::Error>> + Send + 'static) {
    let api: Api<Node> = Api::all(client.clone());
    let (store, writer) = reflector::store();
    let stream = watcher(api, paged().labels(&format!("{}=windows", names::LABEL_OS)))
        .backoff(watch_backoff())
        .modify(strip)
        .reflect(writer)
        .touched_objects()
        // The cache sees every update; reconciles are triggered only by the fields a
        // decision reads, not by kubelet heartbeats rewriting condition timestamps.
        .predicate_filter(|n: &Node| node_relevance(n), Default::default());
    (store, stream)
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

/// A node event concerns the pool whose label it carries and every pool that selects it.
pub(super) fn pools_of_node(pools: &Store<WindowsNodePool>, node: &Node) -> Vec<ObjectRef<WindowsNodePool>> {
    let mut names: std::collections::BTreeSet<String> = node.labels().get(names::LABEL_POOL).cloned().into_iter().collect();
    let selectors: Vec<PoolSelector> =
        pools.state().iter().map(|p| PoolSelector::new(&p.name_any(), p.spec.os.version, &p.spec.node_selector)).collect();
    names.extend(pools_selecting(&selectors, node.labels()).map(str::to_string));
    names.into_iter().map(|p| ObjectRef::<WindowsNodePool>::new(&p)).collect()
}

/// Mark the caches synced (a reconcile waits for it) once all three have listed.
pub(super) fn report_synced((nodes, daemonsets, configmaps): (Store<Node>, Store<DaemonSet>, Store<ConfigMap>), metrics: Arc<Metrics>) {
    tokio::spawn(async move {
        let _ = nodes.wait_until_ready().await;
        let _ = daemonsets.wait_until_ready().await;
        let _ = configmaps.wait_until_ready().await;
        metrics.caches_synced.set(1);
        info!("node, DaemonSet and ConfigMap caches synced");
    });
}
