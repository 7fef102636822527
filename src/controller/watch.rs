//! What the controller watches, and how it retries.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Client;
use kube::api::Api;
use kube::runtime::utils::ResetTimerBackoff;
use kube::runtime::{WatchStreamExt, watcher};
use tracing::warn;

use crate::api::names;
use crate::hns::HnsTracker;

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
