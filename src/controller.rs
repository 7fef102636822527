//! `winpool run`: the reconcile shell around the pure decision.
//!
//! A round of a live pool (`apply`) is observe (reflector caches of Windows
//! Nodes, agent DaemonSets, revision ConfigMaps and pools, plus a pod list for
//! nodes being drained) → decide (`round::decide_round`: [`crate::rollout::decide`],
//! [`crate::status::build_status`], the HNS writes, the order of the node
//! writes, the ConfigMaps to delete, the Events; pure) → execute (one merge
//! patch per node that changes, server-side apply of the DaemonSet and status
//! with one field manager, ConfigMaps created once, the Eviction API) → record
//! (Events, metrics, status). Nothing is remembered between reconciles that is
//! not on the cluster, except a short-lived copy of nodes just patched, so a
//! reconcile that runs before the watch delivers our own write does not act
//! twice.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::utils::ResetTimerBackoff;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tracing::{debug, error, info, warn};

use crate::api::{FIELD_MANAGER, WindowsNodePool, names};
use crate::configmap::revision_configmap;
use crate::daemonset::{AgentDrift, AgentSettings, LABEL_MANAGED_BY, agent_daemonset, drift, legacy_config, legacy_revision};
use crate::hns::{self, AwaitingReport, HnsTracker};
use crate::membership::{PoolSelector, pools_selecting};
use crate::metrics::Metrics;
use crate::observe::{node_view, strip};
use crate::revision::NodeConfig;
use crate::rollout::{HnsReadiness, NodePatch, NodeState, Plan};

pub const FINALIZER: &str = "winpool.dev/release-nodes";
/// Node writes in flight at once within one reconcile.
const NODE_WRITE_CONCURRENCY: usize = 16;

pub use crate::error::Error;

mod apply;
mod round;

#[derive(Debug, Clone)]
pub struct Settings {
    pub agent_namespace: String,
    pub agent: AgentSettings,
    /// Only pools matching this label selector are reconciled (sharding, canaries, tests).
    pub pool_selector: Option<String>,
    /// Image prefixes a pool's spec.agent.image may use; empty allows any.
    pub allowed_agent_images: Vec<String>,
}

/// Whoever can create a pool can run an image as SYSTEM on its nodes: the
/// operator only runs agent images the cluster admin allowed.
pub fn agent_image_allowed(image: &str, allowed: &[String]) -> bool {
    image.is_empty() || allowed.is_empty() || allowed.iter().any(|p| image.starts_with(p.as_str()))
}

/// How long node starts and completions gather before they are announced.
const NODE_EVENT_INTERVAL: Duration = Duration::from_secs(5);

/// What a pool's rounds carry over to the next one. Lost on restart, which
/// costs at most one early status write and the announcement of a few seconds.
struct PoolProgress {
    last_reconcile: Option<std::time::Instant>,
    last_status_write: Option<std::time::Instant>,
    pending: Vec<(String, NodeState, NodeState)>,
    pending_revision: String,
    pending_since: std::time::Instant,
}

impl Default for PoolProgress {
    fn default() -> Self {
        PoolProgress {
            last_reconcile: None,
            last_status_write: None,
            pending: Vec::new(),
            pending_revision: String::new(),
            pending_since: std::time::Instant::now(),
        }
    }
}

pub struct Context {
    pub client: Client,
    pub settings: Settings,
    pub nodes: Store<Node>,
    pub daemonsets: Store<DaemonSet>,
    pub configmaps: Store<ConfigMap>,
    pub pools: Store<WindowsNodePool>,
    pub recorder: Recorder,
    /// Who publishes Events (the recorder's, for the Events written without it).
    pub reporter: Reporter,
    pub metrics: Arc<Metrics>,
    /// Nodes as our own last patch returned them, until the watch catches up.
    recent: Mutex<HashMap<String, Arc<Node>>>,
    /// Cluster-wide expected HNS load, kept incrementally from Services and EndpointSlices.
    pub hns: Arc<Mutex<HnsTracker>>,
    /// Per pool: when its status was last written and the node transitions not yet announced.
    progress: Mutex<HashMap<String, PoolProgress>>,
    /// What was last reported as an Event per pool, so a standing problem is not re-announced every round.
    announced: Mutex<HashMap<String, BTreeSet<String>>>,
}

fn rv(n: &Node) -> u64 {
    n.metadata.resource_version.as_deref().and_then(|v| v.parse().ok()).unwrap_or(0)
}

impl Context {
    /// The freshest copy of every Windows node: the cache, or our own newer write.
    fn windows_nodes(&self) -> Vec<Arc<Node>> {
        let mut recent = self.recent.lock().expect("recent lock");
        let mut out = Vec::new();
        for n in self.nodes.state() {
            let name = n.name_any();
            match recent.get(&name) {
                Some(mine) if rv(mine) > rv(&n) => {
                    debug!(node = %name, cached = rv(&n), ours = rv(mine), "cache behind our own write; using it");
                    out.push(mine.clone());
                }
                Some(mine) => {
                    debug!(node = %name, cached = rv(&n), ours = rv(mine), cached_rv = ?n.metadata.resource_version, "cache caught up");
                    recent.remove(&name);
                    out.push(n);
                }
                None => out.push(n),
            }
        }
        out
    }

    fn pool_selectors(&self) -> Vec<PoolSelector> {
        self.pools
            .state()
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| PoolSelector::new(&p.name_any(), p.spec.os.version, &p.spec.node_selector))
            .collect()
    }

    /// Announce each of the pool's standing problems once. This round's keys
    /// replace the last round's, so a problem that clears and comes back is
    /// announced again, and nothing accumulates for problems long gone.
    async fn announce_standing(&self, pool: &WindowsNodePool, problems: Vec<(String, Event)>) {
        let fresh = {
            let mut announced = self.announced.lock().expect("announced lock");
            let before = announced.remove(&pool.name_any()).unwrap_or_default();
            let (fresh, standing) = standing_news(&before, problems);
            if !standing.is_empty() {
                announced.insert(pool.name_any(), standing);
            }
            fresh
        };
        for ev in fresh {
            self.publish(pool, ev).await;
        }
    }

    /// Publish an Event that is never folded into an earlier one: kube's recorder
    /// keys a series on (reason, regarding, related), not the note, so a second
    /// batch Event would only bump the first one's count and keep its note. It
    /// also keeps nothing in memory.
    async fn publish_fresh(&self, pool: &WindowsNodePool, ev: Event) {
        let now = Timestamp::now();
        let name = pool.name_any();
        let event = k8s_openapi::api::events::v1::Event {
            // The reason keeps two Events of one round apart even within a clock tick.
            metadata: ObjectMeta {
                name: Some(format!("{name}.{}.{:x}", ev.reason.to_lowercase(), now.as_nanosecond())),
                ..Default::default()
            },
            event_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(now)),
            action: Some(ev.action),
            reason: Some(ev.reason),
            note: ev.note,
            regarding: Some(pool.object_ref(&())),
            related: ev.secondary,
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(self.reporter.instance.clone().unwrap_or_else(|| self.reporter.controller.clone())),
            type_: Some(match ev.type_ {
                EventType::Normal => "Normal".into(),
                EventType::Warning => "Warning".into(),
            }),
            ..Default::default()
        };
        // Like the recorder: a cluster-scoped object's Events go to "default".
        let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(self.client.clone(), "default");
        if let Err(e) = api.create(&crate::api::post_params(), &event).await {
            warn!(pool = %name, error = %e, "could not publish event");
        }
    }

    async fn publish(&self, pool: &WindowsNodePool, ev: Event) {
        if let Err(e) = self.recorder.publish(&ev, &pool.object_ref(&())).await {
            warn!(pool = %pool.name_any(), error = %e, "could not publish event");
        }
    }
}

fn node_patch_body(p: &NodePatch) -> serde_json::Value {
    let mut meta = serde_json::Map::new();
    if !p.labels.is_empty() {
        meta.insert("labels".into(), json!(p.labels));
    }
    if !p.annotations.is_empty() {
        meta.insert("annotations".into(), json!(p.annotations));
    }
    let mut body = json!({ "metadata": meta });
    if let Some(u) = p.unschedulable {
        body["spec"] = json!({ "unschedulable": u });
    }
    body
}

async fn patch_node(ctx: &Context, pool: &str, p: &NodePatch) -> Result<(), Error> {
    patch_node_with(ctx, pool, p, node_patch_body(p)).await
}

async fn patch_node_with(ctx: &Context, pool: &str, p: &NodePatch, body: serde_json::Value) -> Result<(), Error> {
    let api: Api<Node> = Api::all(ctx.client.clone());
    match api.patch(&p.node, &crate::api::patch_params(), &Patch::Merge(body)).await {
        Ok(mut n) => {
            ctx.metrics.api_request("patch", "nodes", "ok");
            info!(pool, node = %p.node, from = p.from.as_str(), to = p.to.as_str(), cordon = ?p.unschedulable, "{}", p.reason);
            strip(&mut n);
            ctx.recent.lock().expect("recent lock").insert(p.node.clone(), Arc::new(n));
            Ok(())
        }
        // The node vanished: it is no longer a member next round; nothing to undo.
        Err(kube::Error::Api(s)) if s.code == 404 => {
            ctx.metrics.api_request("patch", "nodes", "not_found");
            warn!(pool, node = %p.node, "node disappeared before it could be patched");
            Ok(())
        }
        Err(e) => {
            ctx.metrics.api_request("patch", "nodes", "error");
            Err(Error::PatchNode { node: p.node.clone(), source: e })
        }
    }
}

/// Give a node back: no pool label, no revision, no rollout state, and winpool's cordon lifted.
fn release_patch(n: &Node, why: &str) -> NodePatch {
    let view = node_view(n, HnsReadiness::Unknown);
    let mut p = NodePatch { node: view.name.clone(), reason: why.into(), ..Default::default() };
    for l in [names::LABEL_POOL, names::LABEL_REVISION] {
        p.labels.insert(l.into(), None);
    }
    for a in [
        names::ANN_STATE,
        names::ANN_STATE_SINCE,
        names::ANN_STARTED_AT,
        names::ANN_TARGET_REVISION,
        names::ANN_DRAINED_REVISION,
        names::ANN_FAILURE_REASON,
        names::ANN_FAILURE_MESSAGE,
        names::ANN_CORDONED_BY_WINPOOL,
        names::ANN_HNS_AWAITING,
    ] {
        p.annotations.insert(a.into(), None);
    }
    if view.cordoned_by_winpool {
        p.unschedulable = Some(false);
    }
    p
}

/// The release patch plus the HNS taint removed, as one JSON merge patch body.
fn release_body(n: &Node, p: &NodePatch) -> serde_json::Value {
    let mut body = node_patch_body(p);
    let taints = n.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    if let Some(new) = hns::taints_update(&taints, false) {
        body["spec"]["taints"] = json!(new);
        body["metadata"]["resourceVersion"] = json!(n.metadata.resource_version);
    }
    body
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
    let last = ctx.progress.lock().expect("progress lock").get(&pool.name_any()).and_then(|p| p.last_reconcile);
    if let Some(wait) = last.and_then(|at| reconcile_gap(members).checked_sub(at.elapsed())) {
        tokio::time::sleep(wait).await;
    }
    ctx.progress.lock().expect("progress lock").entry(pool.name_any()).or_default().last_reconcile = Some(std::time::Instant::now());
    let started = std::time::Instant::now();
    let api: Api<WindowsNodePool> = Api::all(ctx.client.clone());
    let res = finalizer(&api, FINALIZER, pool, |event| async {
        match event {
            Finalizer::Apply(p) => apply::apply(&p, &ctx).await,
            Finalizer::Cleanup(p) => cleanup(&p, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)));
    ctx.metrics.reconcile_duration.observe(started.elapsed().as_secs_f64());
    res
}

async fn cleanup(pool: &WindowsNodePool, ctx: &Context) -> Result<Action, Error> {
    let name = pool.name_any();
    for n in ctx.windows_nodes() {
        if n.labels().get(names::LABEL_POOL) == Some(&name) {
            let p = release_patch(&n, "pool deleted: node released");
            patch_node_with(ctx, &name, &p, release_body(&n, &p)).await?;
        }
    }
    for d in ctx.daemonsets.state().iter().filter(|d| d.labels().get(names::LABEL_POOL) == Some(&name)) {
        delete_daemonset(ctx, &d.name_any()).await?;
    }
    for c in ctx.configmaps.state().iter().filter(|c| c.labels().get(names::LABEL_POOL) == Some(&name)) {
        delete_configmap(ctx, &c.name_any()).await?;
    }
    ctx.metrics.forget_pool(&name);
    ctx.progress.lock().expect("progress lock").remove(&name);
    ctx.announced.lock().expect("announced lock").remove(&name);
    info!(pool = %name, "pool deleted; its nodes are released, its agent DaemonSet and revision ConfigMaps deleted");
    Ok(Action::await_change())
}

/// The pool's agent DaemonSet, applied when it is missing, when winpool's own
/// wish changed (a new agent image or setting: that rolls the agents and
/// nothing else), or when someone edited what winpool sets (put back, with a
/// Warning Event, so a hand edit never silently decides what runs as SYSTEM).
/// Per-revision DaemonSets of the earlier layout go once the pool's own exists:
/// their nodes keep their configuration (its ConfigMap is written from them
/// first) and are not drained.
async fn ensure_agent(pool: &WindowsNodePool, ctx: &Context, ds_of_pool: &[Arc<DaemonSet>]) -> Result<(), Error> {
    let wanted = agent_daemonset(pool, &ctx.settings.agent_namespace, &ctx.settings.agent);
    let ds_name = wanted.metadata.name.clone().unwrap_or_default();
    let current = ds_of_pool.iter().find(|d| d.metadata.name.as_deref() == Some(ds_name.as_str()));
    let drift = drift(current.map(|d| d.as_ref()), &wanted);
    if drift == AgentDrift::UpToDate {
        return Ok(());
    }
    let ds_api: Api<DaemonSet> = Api::namespaced(ctx.client.clone(), &ctx.settings.agent_namespace);
    match (drift, current) {
        // Server-side apply cannot take away what another manager added (a
        // nodeSelector key, an env var): a hand edit is replaced whole.
        (AgentDrift::HandEdited, Some(live)) => {
            let mut whole = wanted.clone();
            whole.metadata.resource_version = live.metadata.resource_version.clone();
            ds_api
                .replace(&ds_name, &crate::api::post_params(), &whole)
                .await
                .map_err(|source| Error::ApplyAgent { name: ds_name.clone(), source })?;
            ctx.metrics.api_request("replace", "daemonsets", "ok");
        }
        _ => {
            ds_api
                .patch(&ds_name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&wanted))
                .await
                .map_err(|source| Error::ApplyAgent { name: ds_name.clone(), source })?;
            ctx.metrics.api_request("apply", "daemonsets", "ok");
        }
    }
    if drift == AgentDrift::HandEdited {
        let msg = format!(
            "agent DaemonSet {ds_name} was edited by hand; winpool put back what it sets (change the pool or winpool's agent settings instead)"
        );
        warn!(pool = %pool.name_any(), daemonset = %ds_name, "{msg}");
        let ev = Event {
            type_: EventType::Warning,
            reason: "AgentDaemonSetReverted".into(),
            note: Some(msg),
            action: "Apply".into(),
            secondary: None,
        };
        ctx.publish(pool, ev).await;
    } else {
        info!(pool = %pool.name_any(), daemonset = %ds_name, ?drift, "applied agent DaemonSet");
    }
    Ok(())
}

/// Create the ConfigMap of every revision the plan needs that has none: the
/// target's from the spec, an earlier revision's from the per-revision
/// DaemonSet that still describes it. Earlier-layout DaemonSets are deleted
/// once their configuration is safe in a ConfigMap.
async fn ensure_configmaps(
    pool: &WindowsNodePool,
    ctx: &Context,
    plan: &Plan,
    cms_of_pool: &[Arc<ConfigMap>],
    ds_of_pool: &[Arc<DaemonSet>],
) -> Result<(), Error> {
    let mut have: BTreeSet<String> = cms_of_pool.iter().filter_map(|c| c.labels().get(names::LABEL_REVISION).cloned()).collect();
    let ns = &ctx.settings.agent_namespace;
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), ns);
    let target = NodeConfig::from_spec(&pool.spec);
    let missing: Vec<&String> = plan.config_revisions.iter().filter(|r| !have.contains(*r)).collect();
    for rev in missing {
        let cfg = if *rev == plan.revision {
            Some(target.clone())
        } else {
            ds_of_pool.iter().filter(|d| legacy_revision(d) == Some(rev.as_str())).find_map(|d| legacy_config(d))
        };
        let Some(cfg) = cfg else { continue };
        let cm = revision_configmap(pool, rev, &cfg, ns);
        let pp = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        match api.create(&pp, &cm).await {
            Ok(_) => info!(pool = %pool.name_any(), revision = %rev, "created revision ConfigMap"),
            // Immutable and named by its revision: one that exists is this one.
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(source) => return Err(Error::CreateConfigMap { name: cm.metadata.name.clone().unwrap_or_default(), source }),
        }
        ctx.metrics.api_request("create", "configmaps", "ok");
        have.insert(rev.clone());
    }
    // An earlier-layout DaemonSet goes only once nothing needs its configuration
    // or that configuration is in a ConfigMap (one whose environment could not be
    // read stays, and its nodes keep their agent).
    let replaced = |rev: &str| have.contains(rev) || !plan.config_revisions.contains(rev);
    let legacy = ds_of_pool.iter().filter(|d| d.metadata.deletion_timestamp.is_none());
    for d in legacy.filter(|d| legacy_revision(d).is_some_and(replaced)) {
        delete_daemonset(ctx, &d.name_any()).await?;
        info!(pool = %pool.name_any(), daemonset = %d.name_any(), "deleted per-revision agent DaemonSet of the earlier layout");
    }
    Ok(())
}

async fn delete_daemonset(ctx: &Context, name: &str) -> Result<(), Error> {
    delete_in_agent_namespace::<DaemonSet>(ctx, name, "daemonsets").await
}

async fn delete_configmap(ctx: &Context, name: &str) -> Result<(), Error> {
    delete_in_agent_namespace::<ConfigMap>(ctx, name, "configmaps").await
}

/// Delete one of winpool's objects in the agents namespace; one already gone is fine.
async fn delete_in_agent_namespace<K>(ctx: &Context, name: &str, resource: &'static str) -> Result<(), Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &ctx.settings.agent_namespace);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(source) => return Err(Error::Delete { resource, name: name.to_string(), source }),
    }
    ctx.metrics.api_request("delete", resource, "ok");
    Ok(())
}

/// Patch these nodes a few at a time: nodes are independent, so a wave of a hundred
/// costs a few round trips, not a hundred. Returns the patches that landed and
/// the first error, after all ran.
async fn write_nodes<'p>(
    ctx: &Context,
    pool: &WindowsNodePool,
    name: &str,
    patches: Vec<&'p NodePatch>,
) -> (Vec<&'p NodePatch>, Result<(), Error>) {
    let mut writes = Vec::new();
    for p in patches {
        writes.push(Box::pin(async move {
            let r = patch_node(ctx, name, p).await;
            if r.is_ok() {
                node_failed_event(ctx, pool, p).await;
            }
            (p, r)
        }));
    }
    let results: Vec<(&NodePatch, Result<(), Error>)> =
        futures::stream::iter(writes).buffer_unordered(NODE_WRITE_CONCURRENCY).collect().await;
    let mut landed = Vec::with_capacity(results.len());
    let mut first_error = Ok(());
    for (p, r) in results {
        match r {
            Ok(()) => landed.push(p),
            Err(e) if first_error.is_ok() => first_error = Err(e),
            Err(_) => {}
        }
    }
    (landed, first_error)
}

fn json_patch(v: serde_json::Value) -> json_patch::Patch {
    serde_json::from_value(v).expect("a well-formed JSON patch")
}

struct HnsNode<'a> {
    node: &'a Node,
    readiness: HnsReadiness,
    reason: &'static str,
    message: String,
}

fn hns_readiness(
    n: &Node,
    v: &crate::rollout::NodeView,
    totals: (i64, i64),
    spec: &crate::api::HnsSpec,
    grace: jiff::SignedDuration,
    now: Timestamp,
) -> (HnsReadiness, &'static str, String) {
    let ann = |k: &str| n.annotations().get(k).map(String::as_str);
    // Right after the update the agent has not reported yet: within nodeTimeout, missing counts mean "not yet".
    // Only a node whose earlier counts winpool dropped at the update is awaited; an agent that
    // never reported leaves the node Unknown, never tainted and never gating.
    let awaiting = match v.state.as_deref().and_then(NodeState::parse) {
        Some(NodeState::Applying | NodeState::Verifying) if ann(names::ANN_HNS_AWAITING) == Some("true") => {
            Some(AwaitingReport { since: v.started_at.unwrap_or(now), grace })
        }
        _ => None,
    };
    let tolerance = spec.tolerance_percent.clamp(0, 100) as u8;
    hns::node_readiness(ann(names::ANN_HNS_LOAD_BALANCERS), ann(names::ANN_HNS_ENDPOINTS), totals, tolerance, awaiting, now)
}

async fn refuse_agent_image(pool: &WindowsNodePool, ctx: &Context, now: Timestamp) -> Result<Action, Error> {
    let name = pool.name_any();
    let msg = format!(
        "spec.agent.image {:?} is not in the operator's allowed agent images ({}); nothing is rolled until it is",
        pool.spec.agent.image,
        ctx.settings.allowed_agent_images.join(", ")
    );
    let mut status = pool.status.clone().unwrap_or_default();
    let conds = vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: crate::api::conditions::READY.into(),
            status: "False".into(),
            reason: "AgentImageNotAllowed".into(),
            message: msg.clone(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now),
            observed_generation: pool.metadata.generation,
        },
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: crate::api::conditions::PROGRESSING.into(),
            status: "False".into(),
            reason: "AgentImageNotAllowed".into(),
            message: msg.clone(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now),
            observed_generation: pool.metadata.generation,
        },
    ];
    let mut rest: Vec<_> = status.conditions.iter().filter(|c| c.type_ != "Ready" && c.type_ != "Progressing").cloned().collect();
    let mut merged = crate::status::merge_conditions(&status.conditions, conds, pool.metadata.generation, now);
    merged.append(&mut rest);
    status.conditions = merged;
    status.observed_generation = pool.metadata.generation;
    let ev = Event {
        type_: EventType::Warning,
        reason: "AgentImageNotAllowed".into(),
        note: Some(msg.clone()),
        action: "Validate".into(),
        secondary: None,
    };
    ctx.announce_standing(pool, vec![(msg.clone(), ev)]).await;
    if pool.status.as_ref() != Some(&status) {
        warn!(pool = %name, "{msg}");
        let body = json!({ "apiVersion": "winpool.dev/v1alpha1", "kind": "WindowsNodePool", "status": status });
        api_status(ctx)
            .patch_status(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body))
            .await
            .map_err(|source| Error::WriteStatus { pool: name.clone(), source })?;
    }
    Ok(Action::requeue(Duration::from_secs(300)))
}

/// The writes that bring one node's WindowsHNSReady condition and hns-not-ready
/// taint in step with its readiness; `None` when both already are (most nodes,
/// most rounds), so a round costs no future and no request for them.
/// `held_cordoned`: see [`crate::rollout::held_cordoned`].
fn hns_writes_for(h: &HnsNode<'_>, held_cordoned: bool, taint_when_not_ready: bool, now: Timestamp) -> Option<HnsWrites> {
    let previous = h
        .node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == names::NODE_CONDITION_HNS_READY));
    let cond = hns::node_condition(h.readiness, h.reason, &h.message, previous, now);
    // No condition already says "unknown": a node whose agent never reported costs no write.
    let pointless = previous.is_none() && h.readiness == HnsReadiness::Unknown;
    let condition = (previous != Some(&cond) && !pointless).then_some(cond);
    let taints = h.node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default();
    let wanted = hns::taint_wanted(h.readiness, taint_when_not_ready, held_cordoned);
    let taint = wanted.and_then(|w| hns::taints_update(taints, w)).and_then(|new| {
        let added = new.len() > taints.len();
        // JSON patch ops touch only our taint, so the node lifecycle controller's
        // taints are never overwritten by a stale copy; only an empty list is
        // written whole, guarded by its resourceVersion.
        let patch = match (added, taints.iter().position(|t| t.key == names::TAINT_HNS_NOT_READY)) {
            (true, _) if taints.is_empty() => {
                Patch::Merge(json!({ "metadata": { "resourceVersion": h.node.metadata.resource_version }, "spec": { "taints": new } }))
            }
            (true, _) => Patch::Json(json_patch(json!([{ "op": "add", "path": "/spec/taints/-", "value": hns::hns_taint() }]))),
            (false, Some(i)) => Patch::Json(json_patch(json!([
                { "op": "test", "path": format!("/spec/taints/{i}/key"), "value": names::TAINT_HNS_NOT_READY },
                { "op": "remove", "path": format!("/spec/taints/{i}") },
            ]))),
            (false, None) => return None,
        };
        Some((added, patch))
    });
    (condition.is_some() || taint.is_some()).then(|| HnsWrites { node: h.node.name_any(), condition, taint })
}

struct HnsWrites {
    node: String,
    condition: Option<k8s_openapi::api::core::v1::NodeCondition>,
    /// Whether the taint is added, and the patch that does it.
    taint: Option<(bool, Patch<serde_json::Value>)>,
}

/// Write one node's HNS condition and taint. False when the taint could not be written this round.
async fn write_hns(ctx: &Context, pool: &str, w: &HnsWrites, message: &str) -> Result<bool, Error> {
    let name = w.node.clone();
    let api: Api<Node> = Api::all(ctx.client.clone());
    if let Some(cond) = &w.condition {
        let (status, reason) = (cond.status.clone(), cond.reason.clone().unwrap_or_default());
        let body = json!({ "status": { "conditions": [cond] } });
        match api.patch_status(&name, &crate::api::patch_params(), &Patch::Strategic(body)).await {
            Ok(_) => {
                ctx.metrics.api_request("patch", "nodes/status", "ok");
                info!(pool, node = %name, status = %status, reason = %reason, "{} {message}", names::NODE_CONDITION_HNS_READY);
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(Error::PatchNode { node: name.clone(), source: e }),
        }
    }
    if let Some((added, patch)) = &w.taint {
        let added = *added;
        match api.patch(&name, &crate::api::patch_params(), patch).await {
            Ok(mut n) => {
                ctx.metrics.api_request("patch", "nodes", "ok");
                info!(pool, node = %name, taint = names::TAINT_HNS_NOT_READY, added, "{}", if added { "tainted: HNS not ready" } else { "untainted: HNS ready" });
                strip(&mut n);
                ctx.recent.lock().expect("recent lock").insert(name, Arc::new(n));
            }
            // Conflict, a failed test op (the list moved) or a duplicate: the next round sees the fresh list.
            Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409 | 422) => {
                ctx.metrics.api_request("patch", "nodes", "conflict");
                debug!(pool, node = %name, code = s.code, "taint update deferred: {}", s.message);
                return Ok(false);
            }
            Err(e) => return Err(Error::PatchNode { node: name, source: e }),
        }
    }
    Ok(true)
}

/// A node that failed gets its own Event, on the pool and on the Node: each
/// failure needs a look. Starts and completions are announced per round
/// ([`crate::status::node_batch_events`]).
async fn node_failed_event(ctx: &Context, pool: &WindowsNodePool, p: &NodePatch) {
    if p.to != NodeState::Failed || p.from == NodeState::Failed {
        return;
    }
    // The node is the Event's related object: the recorder folds Events with the same
    // reason, regarding and related object into one series, so without it every
    // node's Event would be counted under the first node's note.
    let ev = || Event {
        type_: EventType::Warning,
        reason: "NodeFailed".into(),
        note: Some(format!("{}: {}", p.node, p.reason)),
        action: "Rollout".into(),
        secondary: Some(node_ref(&p.node)),
    };
    ctx.publish(pool, ev()).await;
    if let Err(e) = ctx.recorder.publish(&ev(), &node_ref(&p.node)).await {
        warn!(node = %p.node, error = %e, "could not publish event");
    }
}

/// The Events of this round's standing problems that were not standing last
/// round, and the keys now standing. Pure.
fn standing_news(before: &BTreeSet<String>, problems: Vec<(String, Event)>) -> (Vec<Event>, BTreeSet<String>) {
    let standing: BTreeSet<String> = problems.iter().map(|(k, _)| k.clone()).collect();
    let fresh = problems.into_iter().filter(|(k, _)| !before.contains(k)).map(|(_, ev)| ev).collect();
    (fresh, standing)
}

fn node_ref(node: &str) -> k8s_openapi::api::core::v1::ObjectReference {
    k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(node.to_string()),
        ..Default::default()
    }
}

fn api_status(ctx: &Context) -> Api<WindowsNodePool> {
    Api::all(ctx.client.clone())
}

fn error_policy(pool: Arc<WindowsNodePool>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.reconcile_errors.with_label_values(&[err.metric_label()]).inc();
    error!(pool = %pool.name_any(), error = %err, "reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

/// The agents' namespace holds only winpool's HostProcess DaemonSets, so only it is privileged.
pub async fn ensure_agent_namespace(client: &Client, ns: &str) -> Result<(), Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    let failed = |source| Error::AgentNamespace { name: ns.to_string(), source };
    if api.get_opt(ns).await.map_err(failed)?.is_some() {
        return Ok(());
    }
    let obj = Namespace {
        metadata: ObjectMeta {
            name: Some(ns.into()),
            labels: Some(
                [
                    ("pod-security.kubernetes.io/enforce".to_string(), "privileged".to_string()),
                    (LABEL_MANAGED_BY.to_string(), "winpool".to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&crate::api::post_params(), &obj).await {
        Ok(_) => info!(namespace = ns, "created agent namespace (pod-security enforce=privileged)"),
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(source) => return Err(failed(source)),
    }
    Ok(())
}

/// A hash of what a decision reads from a Node.
fn node_relevance(n: &Node) -> Option<u64> {
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
fn watch_backoff() -> ResetTimerBackoff<watcher::ExponentialBackoff> {
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
fn paged() -> watcher::Config {
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

/// Run the controller until `shutdown` resolves; in-flight reconciles finish first.
pub async fn run(
    client: Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    ensure_agent_namespace(&client, &settings.agent_namespace).await?;

    let pools_api: Api<WindowsNodePool> = Api::all(client.clone());
    let mut pool_cfg = watcher::Config::default().any_semantic();
    if let Some(sel) = &settings.pool_selector {
        pool_cfg = pool_cfg.labels(sel);
    }
    let node_api: Api<Node> = Api::all(client.clone());
    let (node_store, node_writer) = reflector::store();
    let nodes = watcher(node_api, paged().labels(&format!("{}=windows", names::LABEL_OS)))
        .backoff(watch_backoff())
        .modify(strip)
        .reflect(node_writer)
        .touched_objects()
        // The cache sees every update; reconciles are triggered only by the fields a
        // decision reads, not by kubelet heartbeats rewriting condition timestamps.
        .predicate_filter(|n: &Node| node_relevance(n), Default::default());
    let ds_api: Api<DaemonSet> = Api::namespaced(client.clone(), &settings.agent_namespace);
    let (ds_store, ds_writer) = reflector::store();
    let daemonsets = watcher(ds_api, watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}=winpool")).any_semantic())
        .backoff(watch_backoff())
        .modify(|d: &mut DaemonSet| d.metadata.managed_fields = None)
        .reflect(ds_writer)
        .touched_objects();
    let cm_api: Api<ConfigMap> = Api::namespaced(client.clone(), &settings.agent_namespace);
    let (cm_store, cm_writer) = reflector::store();
    let configmaps = watcher(cm_api, watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}=winpool")).any_semantic())
        .backoff(watch_backoff())
        .modify(|c: &mut ConfigMap| {
            // Only names and labels are read: the data is the agents'.
            c.metadata.managed_fields = None;
            c.data = None;
        })
        .reflect(cm_writer)
        .touched_objects();

    let tracker = Arc::new(Mutex::new(HnsTracker::new()));
    spawn_hns_watches(&client, tracker.clone());
    let (hns_changed_tx, hns_changed_rx) = futures::channel::mpsc::unbounded::<()>();
    {
        // Expected HNS counts move with every Service and endpoint: look every few
        // seconds and, when they moved, let every pool re-judge capacity and readiness.
        let tracker = tracker.clone();
        tokio::spawn(async move {
            let mut last = (-1, -1);
            loop {
                tokio::time::sleep(Duration::from_secs(5)).await;
                let now = tracker.lock().expect("hns lock").totals();
                if now != last {
                    last = now;
                    if hns_changed_tx.unbounded_send(()).is_err() {
                        return;
                    }
                }
            }
        });
    }
    let controller = Controller::new(pools_api, pool_cfg).trigger_backoff(watch_backoff());
    let pool_store = controller.store();
    let mapper_pools = pool_store.clone();
    let reporter = Reporter { controller: "winpool".into(), instance: std::env::var("POD_NAME").ok() };
    let ctx = Arc::new(Context {
        client: client.clone(),
        settings,
        nodes: node_store.clone(),
        daemonsets: ds_store.clone(),
        configmaps: cm_store.clone(),
        pools: pool_store,
        recorder: Recorder::new(client.clone(), reporter.clone()),
        reporter,
        metrics: metrics.clone(),
        recent: Mutex::new(HashMap::new()),
        hns: tracker,
        progress: Mutex::new(HashMap::new()),
        announced: Mutex::new(HashMap::new()),
    });

    let ready_metrics = metrics.clone();
    let (ns, ds, cm) = (node_store.clone(), ds_store.clone(), cm_store.clone());
    tokio::spawn(async move {
        let _ = ns.wait_until_ready().await;
        let _ = ds.wait_until_ready().await;
        let _ = cm.wait_until_ready().await;
        ready_metrics.caches_synced.set(1);
        info!("node, DaemonSet and ConfigMap caches synced");
    });

    info!("winpool controller starting");
    controller
        .watches_stream(nodes, move |node: Node| {
            // A node event concerns the pool whose label it carries and every pool that selects it.
            let mut pools: BTreeSet<String> = node.labels().get(names::LABEL_POOL).cloned().into_iter().collect();
            let selectors: Vec<PoolSelector> =
                mapper_pools.state().iter().map(|p| PoolSelector::new(&p.name_any(), p.spec.os.version, &p.spec.node_selector)).collect();
            pools.extend(pools_selecting(&selectors, node.labels()).map(str::to_string));
            pools.into_iter().map(|p| ObjectRef::<WindowsNodePool>::new(&p))
        })
        // Not owns_stream: an owner reference from a namespaced DaemonSet to the
        // cluster-scoped pool maps to a namespaced ObjectRef, which the
        // controller would treat as a second object and reconcile concurrently.
        .watches_stream(daemonsets, |ds: DaemonSet| {
            ds.labels().get(names::LABEL_POOL).map(|p| ObjectRef::<WindowsNodePool>::new(p)).into_iter()
        })
        .watches_stream(configmaps, |cm: ConfigMap| {
            cm.labels().get(names::LABEL_POOL).map(|p| ObjectRef::<WindowsNodePool>::new(p)).into_iter()
        })
        .reconcile_all_on(hns_changed_rx)
        .graceful_shutdown_on(shutdown)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_images_are_checked_against_the_allow_list() {
        let allowed = vec!["registry.corp/winpool/".to_string(), "mcr.microsoft.com/".to_string()];
        let cases = [
            ("", true),
            ("registry.corp/winpool/agent:1", true),
            ("mcr.microsoft.com/windows/agent", true),
            ("evil.example.com/agent:1", false),
            ("registry.corp/winpoolx/agent", false),
        ];
        for (image, want) in cases {
            assert_eq!(agent_image_allowed(image, &allowed), want, "{image}");
        }
        assert!(agent_image_allowed("anything", &[]), "no allow-list: any image");
    }

    #[test]
    fn a_standing_problem_is_announced_once_and_again_after_it_cleared() {
        let ev = |note: &str| Event {
            type_: EventType::Warning,
            reason: "NodesLeftAlone".into(),
            note: Some(note.into()),
            action: "Select".into(),
            secondary: None,
        };
        let notes = |evs: Vec<Event>| evs.into_iter().filter_map(|e| e.note).collect::<Vec<_>>();
        let (fresh, standing) = standing_news(&BTreeSet::new(), vec![("a".into(), ev("a"))]);
        assert_eq!(notes(fresh), ["a"]);
        let (fresh, standing) = standing_news(&standing, vec![("a".into(), ev("a")), ("b".into(), ev("b"))]);
        assert_eq!(notes(fresh), ["b"], "a still stands: not again");
        let (fresh, standing) = standing_news(&standing, vec![]);
        assert!(fresh.is_empty() && standing.is_empty(), "cleared problems are forgotten");
        let (fresh, _) = standing_news(&standing, vec![("a".into(), ev("a"))]);
        assert_eq!(notes(fresh), ["a"], "a came back: announced again");
    }

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
