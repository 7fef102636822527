//! `winpool run`: the reconcile shell around the pure decision.
//!
//! A round of a live pool (`apply`) is observe (reflector caches of Windows
//! Nodes, the agents' reports, agent DaemonSets, revision ConfigMaps and
//! pools, the membership index, plus a pod list for nodes being drained) →
//! decide (`round::judge` once, the health gates' look, then
//! `round::decide_judged`: [`crate::decision::rollout::decide`],
//! [`crate::decision::status::build_status`], the HNS writes, the order of the node
//! writes, the ConfigMaps to delete, the Events; pure) → execute (one merge
//! patch per node that changes, server-side apply of the DaemonSet and status
//! with one field manager, ConfigMaps created once, the Eviction API) → record
//! (Events, metrics, status). Between reconciles the replica keeps only what
//! it can lose: each pool's memory (`round::memory`; a restart costs an early
//! status write or an announcement again), a short-lived copy of nodes just
//! patched (so a reconcile that runs before the watch delivers our own write
//! does not act twice), and the membership index (rebuilt by the next list).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use tracing::{debug, error, info, warn};

use crate::api::node_record::NodeRecord;
use crate::api::report::WindowsNodeReport;
use crate::api::{WindowsNodePool, names};
use crate::controller::metrics::Metrics;
use crate::decision::hns::HnsTracker;
use crate::decision::membership::{Membership, MembershipIndex};

/// The reflector caches a round reads.
type Caches = (Store<NodeRecord>, Store<WindowsNodeReport>, Store<DaemonSet>, Store<ConfigMap>, Store<WindowsNodePool>);
pub use crate::api::names::FINALIZER;
/// Requests in flight at once within one reconcile: node writes, the pod
/// lists of Draining nodes, drains. A wave starts and finishes its nodes in
/// the same few rounds, and every node of the pool waits for those rounds: at
/// 16, a wave of 100 cost seven round trips in a row for its pod lists and
/// seven for its writes on a busy API server; 64 makes it two each. Each is
/// one HTTP/1.1 connection (kube's client speaks no HTTP/2).
const REQUESTS_IN_FLIGHT: usize = 64;

/// `start(item)` for every item, REQUESTS_IN_FLIGHT at a time, each
/// started only when a slot is free; the outputs in completion order. A round
/// that starts 1,000 nodes holds 64 request futures, not 1,000 (boxed up front,
/// they were 8 MiB of winpool's peak heap at 5,000 nodes).
async fn few_at_a_time<I, F, Fut>(items: Vec<I>, start: F) -> Vec<Fut::Output>
where
    F: Fn(I) -> Fut,
    Fut: std::future::Future,
{
    // Not `stream::iter(items).map(start).buffer_unordered(..)`: with futures
    // that borrow the round, the controller's future is then no longer Send
    // ("implementation of FnOnce is not general enough").
    let mut todo = items.into_iter();
    let mut out = Vec::with_capacity(todo.len());
    let mut in_flight = futures::stream::FuturesUnordered::new();
    loop {
        while in_flight.len() < REQUESTS_IN_FLIGHT {
            let Some(item) = todo.next() else { break };
            in_flight.push(start(item));
        }
        let Some(done) = in_flight.next().await else { break };
        out.push(done);
    }
    out
}

pub use crate::error::Error;

mod agent;
mod apply;
mod claim;
mod clock;
mod crds;
pub mod drain;
mod events;
#[cfg(test)]
mod fake_api;
#[cfg(test)]
mod fixtures;
mod gate_client;
mod hns_node;
pub mod lease;
pub mod metrics;
mod nodes;
mod recent;
mod watch;
pub mod write_fence;

use crate::decision::round::memory::{self, PoolMemory};
use crate::decision::round::{self};
pub use agent::{agent_image_allowed, ensure_agent_namespace};
use agent::{delete_configmap, delete_daemonset};
use nodes::patch_node_with;
use recent::RecentWrites;
pub use watch::spawn_hns_watches;
use watch::watch_backoff;

pub use crate::decision::round::Settings;

pub struct Context {
    pub client: Client,
    pub settings: Settings,
    pub nodes: Store<NodeRecord>,
    /// The agents' reports, in the agents' namespace, named after their Nodes.
    pub reports: Store<WindowsNodeReport>,
    pub daemonsets: Store<DaemonSet>,
    pub configmaps: Store<ConfigMap>,
    pub pools: Store<WindowsNodePool>,
    /// Which pools select which nodes, fed by the node cache's writer.
    membership: Arc<Mutex<MembershipIndex>>,
    /// winpool's hook Jobs in --hooks-namespace (None without one).
    pub hook_jobs: Option<Store<Job>>,
    /// Whether the caches above have listed once.
    synced: watch::CachesSynced,
    pub recorder: Recorder,
    /// Who publishes Events (the recorder's, for the Events written without it).
    pub reporter: Reporter,
    pub metrics: Arc<Metrics>,
    /// Nodes as our own last patch returned them, until the watch catches up.
    recent: Arc<RecentWrites>,
    /// Cluster-wide expected HNS load, kept incrementally from Services and EndpointSlices.
    pub hns: Arc<Mutex<HnsTracker>>,
    /// What each pool's rounds carry to the next ([`memory::PoolMemory`]):
    /// taken by a reconcile and put back at its end (the controller never
    /// runs two reconciles of one pool at once).
    memory: Mutex<HashMap<String, PoolMemory>>,
    /// The HTTP client of the Prometheus health gates (its connections are reused).
    gate_http: gate_client::HttpClient,
    /// The round's clock: the API server's (tests move it on).
    clock: clock::Clock,
    /// Set when the replica stops (SIGTERM, or the lease lost). A round stops
    /// before its next write: at 5,000 nodes a round's writes can take half a
    /// minute on a busy API server, past a pod's grace period, and a replica
    /// killed there never releases its lease, so its successor waits out the
    /// lease first. What is not written is what a crash leaves: the next
    /// leader's first round decides it again.
    stopping: Arc<AtomicBool>,
    /// Until when this replica leads (with leader election).
    lease: Option<crate::controller::lease::LeaseValidity>,
    /// With --max-nodes-in-flight, one pool at a time counts the other pools'
    /// nodes in flight and writes its starts: two pools deciding together
    /// would each see the room the other is about to take.
    starts: tokio::sync::Mutex<()>,
}

impl Context {
    fn new(
        client: Client,
        settings: Settings,
        (nodes, reports, daemonsets, configmaps, pools): Caches,
        metrics: Arc<Metrics>,
        hns: Arc<Mutex<HnsTracker>>,
        recent: Arc<RecentWrites>,
        membership: Arc<Mutex<MembershipIndex>>,
    ) -> Self {
        let reporter = Reporter { controller: "winpool".into(), instance: std::env::var("POD_NAME").ok() };
        let synced = watch::caches_synced((nodes.clone(), reports.clone(), daemonsets.clone(), configmaps.clone()), metrics.clone());
        Context {
            synced,
            recorder: Recorder::new(client.clone(), reporter.clone()),
            client,
            settings,
            nodes,
            reports,
            daemonsets,
            configmaps,
            pools,
            membership,
            hook_jobs: None,
            reporter,
            metrics,
            recent,
            hns,
            memory: Mutex::new(HashMap::new()),
            gate_http: gate_client::http_client(),
            clock: clock::Clock::default(),
            stopping: Arc::new(AtomicBool::new(false)),
            lease: None,
            starts: tokio::sync::Mutex::new(()),
        }
    }

    /// No further writes: the replica is stopping.
    fn stop_writing(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    /// The pool's memory, taken out until [`Self::keep_memory`] puts it back.
    fn take_memory(&self, pool: &str) -> PoolMemory {
        self.memory.lock().expect("memory lock").remove(pool).unwrap_or_default()
    }

    fn keep_memory(&self, pool: &str, memory: PoolMemory) {
        self.memory.lock().expect("memory lock").insert(pool.to_string(), memory);
    }

    fn now(&self) -> jiff::Timestamp {
        self.clock.now()
    }

    /// Every cache a round reads has listed once.
    async fn caches_ready(&self) {
        self.synced.wait().await;
    }

    /// No write may go out: the replica is stopping, or its leader lease
    /// has run out on its own clock (a frozen leader that woke up, a renewal
    /// that hangs) whether or not the renewal has said so yet.
    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed) || self.lease.as_ref().is_some_and(|l| !l.valid())
    }

    fn with_lease(mut self, lease: Option<crate::controller::lease::LeaseValidity>) -> Self {
        self.lease = lease;
        self
    }

    fn with_hook_jobs(mut self, jobs: Option<Store<Job>>) -> Self {
        self.hook_jobs = jobs;
        self
    }

    /// The freshest copy of every Windows node: the cache, or our own newer write.
    fn windows_nodes(&self) -> Vec<Arc<NodeRecord>> {
        self.recent.freshest(|| self.nodes.state())
    }

    /// The pool's members among `nodes` (the round's freshest copies), by
    /// the index's selection.
    fn members_of(&self, pool: &str, nodes: &[Arc<NodeRecord>]) -> Membership {
        let by_name: HashMap<&str, &NodeRecord> = nodes.iter().map(|n| (n.name.as_str(), n.as_ref())).collect();
        let mut index = self.membership.lock().expect("membership lock");
        watch::sync_membership(&mut index, &self.pools, &self.nodes);
        index.members_of(pool, |n| by_name.get(n).copied())
    }
}

/// The least time between the starts of two reconciles of one pool. A reconcile
/// reads every member, so it costs O(members); while nodes are in flight their
/// events would start one after another, and winpool's CPU would grow with
/// members × event rate, i.e. quadratically with the pool. Spacing reconciles
/// in proportion to the pool keeps winpool's CPU per second flat (a reconcile
/// costs about 8 µs per member: at most ~16% of a core) and its CPU per rollout
/// linear in the nodes, for at most this much delay per step of a node (250 ms
/// at 5,000 nodes; a Windows update takes minutes). Events arriving meanwhile
/// are folded into the next reconcile.
pub fn reconcile_gap(members: usize) -> Duration {
    Duration::from_micros(50 * members as u64).max(Duration::from_millis(50))
}

async fn reconcile(pool: Arc<WindowsNodePool>, ctx: Arc<Context>) -> Result<Action, Error> {
    let members = pool.status.as_ref().map_or(0, |s| s.nodes.total.max(0) as usize);
    let wait =
        ctx.memory.lock().expect("memory lock").get(&pool.name_any()).and_then(|m| m.reconcile_wait(reconcile_gap(members), ctx.now()));
    if let Some(wait) = wait {
        tokio::time::sleep(wait).await;
    }
    let name = pool.name_any();
    ctx.memory.lock().expect("memory lock").entry(name.clone()).or_default().last_reconcile = Some(ctx.now());
    let started = std::time::Instant::now();
    let api: Api<WindowsNodePool> = Api::all(ctx.client.clone());
    // Before the finalizer helper: another install's pool gets no write at all,
    // not even its finalizer, nor its cleanup.
    if let Some(leave) = claim::settle(&pool, &ctx).await? {
        return Ok(leave);
    }
    let res = finalizer(&api, FINALIZER, pool, |event| async {
        match event {
            Finalizer::Apply(p) => apply::apply(&p, &ctx).await,
            Finalizer::Cleanup(p) => cleanup(&p, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)));
    ctx.metrics.reconcile_duration.observe(started.elapsed().as_secs_f64());
    ctx.metrics.reconciled(&name);
    res
}

async fn cleanup(pool: &WindowsNodePool, ctx: &Context) -> Result<Action, Error> {
    let name = pool.name_any();
    let nodes = ctx.windows_nodes();
    let none = Membership::default();
    let labelled: Vec<_> = round::labelled_non_members(&name, &nodes, &none)
        .map(|n| (n.clone(), ctx.reports.get(&ObjectRef::new(&n.name).within(&ctx.settings.agent_namespace))))
        .collect();
    let leaving = round::leaving(&labelled);
    for (p, body) in round::releases(leaving.free, "pool deleted: node released") {
        patch_node_with(ctx, &name, &p, body).await?;
    }
    // The pool's agents stay until every host they serve has a result.
    if let Some((node, status)) = leaving.held.into_iter().next() {
        return Err(Error::ReleaseHeld { node, status });
    }
    for d in ctx.daemonsets.state().iter().filter(|d| d.labels().get(names::LABEL_POOL) == Some(&name)) {
        delete_daemonset(ctx, &d.name_any()).await?;
    }
    for c in ctx.configmaps.state().iter().filter(|c| c.labels().get(names::LABEL_POOL) == Some(&name)) {
        delete_configmap(ctx, &c.name_any()).await?;
    }
    ctx.metrics.forget_pool(&name);
    ctx.memory.lock().expect("memory lock").remove(&name);
    info!(pool = %name, "pool deleted; its nodes are released, its agent DaemonSet and revision ConfigMaps deleted");
    Ok(Action::await_change())
}

fn api_status(ctx: &Context) -> Api<WindowsNodePool> {
    Api::all(ctx.client.clone())
}

fn error_policy(pool: Arc<WindowsNodePool>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.reconcile_errors.with_label_values(&[err.metric_label()]).inc();
    error!(pool = %pool.name_any(), error = %err, "reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

/// Run the controller until `shutdown` resolves. A reconcile in flight stops
/// before its next write, and the controller waits only for the writes already
/// sent.
pub async fn run(
    client: Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
    lease: Option<crate::controller::lease::LeaseValidity>,
) -> Result<(), Error> {
    crds::spawn_check(client.clone(), metrics.clone());
    ensure_agent_namespace(&client, &settings.agent_namespace).await?;

    let recent = Arc::new(RecentWrites::default());
    let membership = Arc::new(Mutex::new(MembershipIndex::default()));
    let (node_store, nodes) = watch::windows_nodes(&client, recent.clone(), membership.clone());
    let (ds_store, daemonsets) = watch::agent_daemonsets(&client, &settings.agent_namespace);
    let (cm_store, configmaps) = watch::revision_configmaps(&client, &settings.agent_namespace);
    let (report_store, reports) = watch::agent_reports(&client, &settings.agent_namespace);
    let tracker = Arc::new(Mutex::new(HnsTracker::new()));
    spawn_hns_watches(&client, tracker.clone());
    let hns_changed = watch::hns_changes(tracker.clone());
    let (hook_store, hook_jobs) = watch::hook_jobs(&client, settings.hooks_namespace.as_deref());
    let pools_api: Api<WindowsNodePool> = Api::all(client.clone());
    let controller = Controller::new(pools_api.clone(), watch::pools(&settings)).trigger_backoff(watch_backoff());
    let pool_store = controller.store();
    let mapper_pools = pool_store.clone();
    let ring_pools = pool_store.clone();
    let pools_config = watch::pools(&settings);
    let mapper_nodes = node_store.clone();
    let (node_mapper_nodes, node_mapper_index) = (node_store.clone(), membership.clone());
    let ctx = Arc::new(
        Context::new(
            client,
            settings,
            (node_store, report_store, ds_store, cm_store, pool_store),
            metrics.clone(),
            tracker,
            recent,
            membership,
        )
        .with_lease(lease)
        .with_hook_jobs(hook_store),
    );
    let mut clock_learnt = clock::spawn_keeper(ctx.client.clone(), ctx.clone());
    let mut stopped = Box::pin(stop_writing_on(shutdown, ctx.clone()));
    if !clock::learnt_unless_stopped(&mut clock_learnt, &mut stopped).await {
        return Ok(());
    }

    info!("winpool controller starting");
    controller
        .watches_stream(nodes, move |node: Node| watch::pools_of_node(&node_mapper_index, &mapper_pools, &node_mapper_nodes, &node))
        .watches(pools_api, pools_config, move |pool: WindowsNodePool| watch::followers_of(&ring_pools, &pool))
        // Not owns_stream: an owner reference from a namespaced DaemonSet to the
        // cluster-scoped pool maps to a namespaced ObjectRef, which the
        // controller would treat as a second object and reconcile concurrently.
        .watches_stream(daemonsets, |ds: DaemonSet| {
            ds.labels().get(names::LABEL_POOL).map(|p| ObjectRef::<WindowsNodePool>::new(p)).into_iter()
        })
        .watches_stream(reports, move |r: WindowsNodeReport| watch::pool_of_report(&mapper_nodes, &r))
        .watches_stream(configmaps, |cm: ConfigMap| {
            cm.labels().get(names::LABEL_POOL).map(|p| ObjectRef::<WindowsNodePool>::new(p)).into_iter()
        })
        .watches_stream(hook_jobs, |job: Job| job.labels().get(names::LABEL_POOL).map(|p| ObjectRef::<WindowsNodePool>::new(p)).into_iter())
        .reconcile_all_on(hns_changed)
        .graceful_shutdown_on(stopped)
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => debug!(pool = %obj.name, "reconciled"),
                // A watch failed (API server restarting, RBAC changed): it is retried with
                // backoff, and meanwhile changes are not seen, which an operator wants to know.
                Err(kube::runtime::controller::Error::QueueError(e)) => warn!(error = %e, "watch error; retrying"),
                // Reconcile failures are logged by error_policy with their pool.
                Err(e) => debug!(error = %e, "reconcile error"),
            }
        })
        .await;
    info!("winpool controller stopped");
    Ok(())
}

/// Resolves once `shutdown` did; from then on `ctx` writes nothing, even
/// before the controller's own graceful shutdown reaches a round in flight.
fn stop_writing_on(
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ctx: Arc<Context>,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        shutdown.await;
        ctx.stop_writing();
        let _ = tx.send(());
    });
    async move {
        let _ = rx.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconciles_of_a_bigger_pool_are_spaced_further_apart() {
        assert_eq!(reconcile_gap(0), Duration::from_millis(50));
        assert_eq!(reconcile_gap(100), Duration::from_millis(50), "a small pool reacts at once");
        assert_eq!(reconcile_gap(1_000), Duration::from_millis(50));
        assert_eq!(reconcile_gap(5_000), Duration::from_millis(250));
        assert_eq!(reconcile_gap(20_000), Duration::from_secs(1));
    }

    #[test]
    fn a_failed_watch_is_retried_within_seconds_never_after_half_a_minute() {
        let delays: Vec<Duration> = watch_backoff().take(20).collect();
        assert_eq!(delays.len(), 20, "retries forever");
        assert!(delays[0] >= Duration::from_millis(500) && delays[0] <= Duration::from_secs(1), "{delays:?}");
        assert!(delays.iter().all(|d| *d <= Duration::from_secs(6)), "capped at 3 s plus jitter: {delays:?}");
        assert!(delays[10..].iter().all(|d| *d >= Duration::from_secs(3)), "and it gets there: {delays:?}");
    }
}
