//! One reconcile of a live pool: observe → prepare → ask → decide → execute →
//! record. Prepare and decide are pure ([`round::prepare`], [`round::judge`],
//! [`round::gate_look`], [`round::decide_judged`]); everything here reads the
//! cluster, asks the gates, or carries out what the round decided, in the
//! order it says.

use crate::api::EventReason;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use serde_json::json;
use tracing::{debug, info, warn};

use super::agent::{delete_configmap, delete_daemonset, write_configmaps, write_daemonset};
use super::gate_client;
use super::hns_node::{HnsWrites, HnsWritten, ask_hns_repairs, write_hns};
use super::memory::{DueBatch, Outcome, PoolMemory, StatusWrite};
use super::nodes::{patch_node_with, write_nodes};
use super::round::{self, GateLook, Observed, RingObserved, Round};
use super::{Context, Error, api_status, few_at_a_time};
use crate::api::node_record::NodeRecord;
use crate::api::{FIELD_MANAGER, WindowsNodePool, names};
use crate::controller::drain::{self, DrainRules, PodOnNode};
use crate::decision::hns::Limits;
use crate::decision::ring::FollowedMember;
use crate::decision::rollout::{ClusterInFlight, DrainMode, NodeState};
use crate::decision::status::node_batch_events;

pub(super) async fn apply(pool: &WindowsNodePool, ctx: &Context) -> Result<Action, Error> {
    let name = pool.name_any();
    // Deciding on a half-filled cache would report nodes as missing and re-create DaemonSets.
    ctx.caches_ready().await;
    // Nor on half-counted HNS totals: a node would look caught up when it is not.
    if !ctx.hns.lock().expect("hns lock").synced() {
        debug!(pool = %name, "HNS totals not counted yet; waiting");
        return Ok(Action::requeue(Duration::from_millis(200)));
    }
    if ctx.stopping() {
        return Ok(Action::await_change());
    }
    let memory = ctx.take_memory(&name);
    let announced = memory.announced.clone();
    let (result, memory) = run_round(pool, ctx, memory).await;
    // A round that failed before it announced its standing problems leaves them to the next.
    let memory = if result.is_err() { memory.unannounced(announced) } else { memory };
    ctx.keep_memory(&name, memory);
    result
}

/// observe → prepare → ask → decide → execute → record, with the pool's memory in and out.
async fn run_round(pool: &WindowsNodePool, ctx: &Context, memory: PoolMemory) -> (Result<Action, Error>, PoolMemory) {
    let name = pool.name_any();
    let now = ctx.now();
    let fresher = memory.as_last_written(pool);
    let pool = fresher.as_ref().unwrap_or(pool);
    let mut memory = memory;
    if let Some(refused) = round::refused_round(pool, &ctx.settings, &mut memory, now) {
        let r = record_status(pool, ctx, refused, &mut memory).await;
        return (r, memory);
    }
    let boots = memory.recent_boots(crate::decision::hns::CHANGES_KEPT, now);
    let mut seen = match observe(pool, ctx, &boots, now).await {
        Ok(seen) => seen,
        Err(e) => return (Err(e), memory),
    };
    let pool = round::prepare(pool, &mut seen, now);
    let pool = pool.as_ref();
    // Once a round: the gates' look and the decision read the same judgement.
    let judged = round::judge(pool, &seen, &mut memory, now);
    let (asked, starts) = ask(ctx, pool, &seen, &judged, &memory, now).await;
    let (round, mut memory) = round::decide_judged(pool, &ctx.settings, &seen, judged, asked, memory, now);
    for (node, why) in &round.plan.waiting {
        debug!(pool = %name, node = %node, "waiting: {why}");
    }
    let (outcome, written) = execute(pool, ctx, &seen, &round, starts).await;
    let due = memory.settle(&round.plan.revision, round.plan.counts.updating as usize, round.plan.average_node_update, &outcome, now);
    // The patches that landed are announced even when another failed: they happened.
    announce_node_batches(ctx, pool, due).await;
    ctx.metrics.observe_updates(&name, outcome.landed.iter().copied());
    if let Err(e) = written {
        return (Err(e), memory);
    }
    if ctx.stopping() {
        // Part of the round may be unwritten: its status would claim it. The next leader decides again.
        info!(pool = %name, "stopping: the rest of this round is left to the next leader");
        return (Ok(Action::await_change()), memory);
    }
    let r = record(pool, ctx, &seen, round, &mut memory).await;
    (r, memory)
}

/// What the decision needs from outside the pool's caches: the health gates'
/// answers (when `round::gate_look` says to ask them) and, under
/// `--max-nodes-in-flight`, the other pools' nodes in flight, counted while
/// holding the starts lock that stays held until this round's starts landed.
/// It is taken after the gates, whose answers may take seconds.
async fn ask<'c>(
    ctx: &'c Context,
    pool: &WindowsNodePool,
    seen: &Observed,
    judged: &round::Judged<'_>,
    memory: &PoolMemory,
    now: jiff::Timestamp,
) -> (round::Asked, Option<tokio::sync::MutexGuard<'c, ()>>) {
    let mut asked = round::Asked { cluster: seen.cluster, ..Default::default() };
    match round::gate_look(pool, seen, judged, memory, now) {
        GateLook::NotNeeded => {}
        GateLook::Fresh(results) => asked.gates = results,
        GateLook::Ask => (asked.gates, asked.gates_asked) = (gate_client::evaluate(ctx, pool).await, true),
    }
    let starts = match ctx.settings.max_nodes_in_flight {
        0 => None,
        _ => {
            let held = ctx.starts.lock().await;
            asked.cluster = cluster_in_flight(ctx, &pool.name_any(), &ctx.windows_nodes());
            Some(held)
        }
    };
    (asked, starts)
}

/// Carry out the round's writes in the order they must land: deselected nodes
/// are given back first (they hold no slot of the rollout); the agent runs,
/// and every revision a node is asked to run has its ConfigMap and its CSI
/// Proxy DaemonSet, before any node is labelled for it; HNS condition and
/// taint before the node patches (a node whose taint could not be written
/// waits a round); the node patches; the evictions; and last the CSI Proxy
/// DaemonSets and ConfigMaps no node needs any more (and a pod-network
/// DaemonSet turned off). When the replica stops,
/// the rest is left unwritten, as a crash there would leave it; every prefix
/// of this order is one the next round can continue from. Returns what the
/// writes did and the first error.
async fn execute<'r>(
    pool: &WindowsNodePool,
    ctx: &Context,
    seen: &Observed,
    round: &'r Round,
    starts: Option<tokio::sync::MutexGuard<'_, ()>>,
) -> (Outcome<'r>, Result<(), Error>) {
    let mut outcome = Outcome::default();
    let written = execute_into(pool, ctx, seen, round, &mut outcome, starts).await;
    (outcome, written)
}

/// Nodes given back by the pool: each one's operation ends before its Node is released.
async fn release_nodes(ctx: &Context, pool: &str, round: &Round, seen: &Observed) -> Result<(), Error> {
    for (p, body) in &round.releases {
        if ctx.stopping() {
            return Ok(());
        }
        let record = seen.deselected.iter().chain(&seen.members).find(|(n, _)| n.name == p.node);
        let op = record.and_then(|(n, _)| crate::decision::operation::released(n, ctx.now()));
        let written = match &op {
            Some(op) => super::nodes::write_operation(ctx, op).await?,
            None => None,
        };
        if patch_node_with(ctx, pool, p, body.clone()).await? {
            super::nodes::log_record(written.as_ref());
        }
    }
    Ok(())
}

async fn execute_into<'r>(
    pool: &WindowsNodePool,
    ctx: &Context,
    seen: &Observed,
    round: &'r Round,
    outcome: &mut Outcome<'r>,
    starts: Option<tokio::sync::MutexGuard<'_, ()>>,
) -> Result<(), Error> {
    let name = pool.name_any();
    if let Some(pause) = &round.pause {
        if ctx.stopping() {
            return Ok(());
        }
        pause_for_bad_update(pool, ctx, pause).await?;
    }
    release_nodes(ctx, &name, round, seen).await?;
    for (node, status) in &round.held_leaving {
        info!(pool = %name, node = %node, agent = %status, "node no longer selected while its host may still be installing: released once its agent reports a result");
    }
    if ctx.stopping() {
        return Ok(());
    }
    if let Some(agent) = &round.agent {
        write_daemonset(pool, ctx, agent).await?;
    }
    if let Some(pod_network) = &round.pod_network.write {
        write_daemonset(pool, ctx, pod_network).await?;
    }
    write_configmaps(pool, ctx, &round.configmaps).await?;
    for csi in &round.csi_proxy.write {
        write_daemonset(pool, ctx, csi).await?;
    }
    if ctx.stopping() {
        return Ok(());
    }
    let hns = execute_hns_writes(ctx, &name, round).await?;
    if ctx.stopping() {
        return Ok(());
    }
    ask_hns_repairs(ctx, pool, &round.hns_repairs.asks).await?;
    if ctx.stopping() {
        return Ok(());
    }
    let writes = round::node_writes(&round.plan, &hns.behind);
    let records: BTreeMap<&str, &NodeRecord> = seen.members.iter().map(|(n, _)| (n.name.as_str(), n.as_ref())).collect();
    let (landed, written) = write_nodes(ctx, pool, &name, writes.first, &hns.guards, &records).await;
    outcome.landed = landed;
    written?;
    if ctx.stopping() {
        return Ok(());
    }
    let (landed, written) = write_nodes(ctx, pool, &name, writes.then, &hns.guards, &records).await;
    outcome.landed.extend(landed);
    // The starts are in the responses the next pool's count reads (ctx.recent).
    drop(starts);
    written?;
    if ctx.stopping() {
        return Ok(());
    }
    create_hook_jobs(ctx, pool, round).await;
    if ctx.stopping() {
        return Ok(());
    }
    (outcome.drained, outcome.evictions) = execute_drains(ctx, pool, round, seen).await;
    if ctx.stopping() {
        return Ok(());
    }
    delete_unused(ctx, &name, round).await
}

/// The round's last writes: agent objects no node's revision needs any more.
async fn delete_unused(ctx: &Context, name: &str, round: &Round) -> Result<(), Error> {
    for ds in &round.csi_proxy.delete {
        delete_daemonset(ctx, ds).await?;
        info!(pool = %name, daemonset = %ds, "deleted CSI Proxy DaemonSet: no node's revision asks for its version");
    }
    if let Some(ds) = &round.pod_network.delete {
        delete_daemonset(ctx, ds).await?;
        info!(pool = %name, daemonset = %ds, "deleted the pod-network DaemonSet: the operator runs without one");
    }
    for (cm, rev) in &round.stale_configmaps {
        delete_configmap(ctx, cm).await?;
        info!(pool = %name, configmap = %cm, revision = %rev, "deleted revision ConfigMap: no node carries its revision");
    }
    Ok(())
}

/// The round's hook Jobs (`rollout.hooks`). One already there (the cache
/// had not shown it) is the same Job: its name is the start's. A refused
/// create is that node's (it waits for its hook within its nodeTimeout, and
/// is tried again next round), never the pool's: the other nodes' drains go on.
async fn create_hook_jobs(ctx: &Context, pool: &WindowsNodePool, round: &Round) {
    let Some(ns) = &ctx.settings.hooks_namespace else {
        return;
    };
    let api: kube::Api<k8s_openapi::api::batch::v1::Job> = kube::Api::namespaced(ctx.client.clone(), ns);
    // Its pods go with it (background): a hung hook stops with its node's start.
    for job in &round.orphaned_hook_jobs {
        match api.delete(job, &kube::api::DeleteParams::background()).await {
            Ok(_) => info!(pool = %pool.name_any(), job = %job, "deleted a hook Job its node's start no longer waits for"),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                warn!(pool = %pool.name_any(), job = %job, error = %e, "could not delete a hook Job no start waits for; tried again next round")
            }
        }
    }
    for start in &round.plan.hooks {
        let Some(hook) = start.kind.of(&pool.spec) else { continue };
        let job = crate::builders::hook_job::hook_job(pool, hook, start, ns);
        let name = job.name_any();
        match api.create(&crate::api::post_params(), &job).await {
            Ok(_) => {
                ctx.metrics.api_request("create", "jobs", "ok");
                info!(pool = %pool.name_any(), node = %start.node, job = %name, hook = start.kind.field(), "created hook Job");
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => {
                ctx.metrics.api_request("create", "jobs", "error");
                warn!(pool = %pool.name_any(), node = %start.node, job = %name, error = %e, "could not create hook Job");
                let note = format!(
                    "{}: its {} hook Job {name} was refused in namespace {ns}: {e}; tried again next round, within its nodeTimeout",
                    start.node,
                    start.kind.field()
                );
                super::events::node_warning(ctx, pool, &start.node, crate::api::EventReason::HookJobNotCreated, "Hook", note).await;
            }
        }
    }
}

/// Read what the round decides on: the pool's members and its agent objects
/// from the caches, and the pods of its Draining members from the API server.
/// Everything the round reads from the caches and the cluster. `boots` are the
/// members' recent reboots (the pool's memory): each rebooted node's queue
/// programs all that changed while it was away, so the HNS backlog counts them.
async fn observe(pool: &WindowsNodePool, ctx: &Context, boots: &[jiff::Timestamp], now: jiff::Timestamp) -> Result<Observed, Error> {
    let name = pool.name_any();
    let nodes = ctx.windows_nodes();
    let membership = ctx.members_of(&name, &nodes);
    let member_set: BTreeSet<&str> = membership.members.iter().map(String::as_str).collect();
    let members: Vec<_> = nodes
        .iter()
        .filter(|n| member_set.contains(n.name.as_str()))
        .map(|n| (n.clone(), ctx.reports.get(&ObjectRef::new(&n.name).within(&ctx.settings.agent_namespace))))
        .collect();
    let deselected = round::labelled_non_members(&name, &nodes, &membership)
        .map(|n| (n.clone(), ctx.reports.get(&ObjectRef::new(&n.name).within(&ctx.settings.agent_namespace))))
        .collect();
    let limits = Limits::for_pool(&pool.spec.hns, pool.spec.os.version);
    let (totals, awaiting, over_limit, hns_backlog) = {
        let mut t = ctx.hns.lock().expect("hns lock");
        let rates = crate::decision::rollout::hns_rates(&pool.spec);
        let backlog = match boots {
            [] => t.backlog_at(pool.spec.os.version, rates, now),
            _ => t.backlog_with_boots(pool.spec.os.version, rates, boots, now),
        };
        (t.totals(), t.awaiting_load_balancers(), t.services_over(limits.backends_per_service), backlog)
    };
    let rules = DrainRules::of(&pool.spec.rollout.drain);
    let pods_by_node = pods_on_draining(ctx, round::draining(&members), &rules).await?;
    let ds_of_pool: Vec<Arc<DaemonSet>> =
        ctx.daemonsets.state().into_iter().filter(|d| d.labels().get(names::LABEL_POOL) == Some(&name)).collect();
    let cms_of_pool: Vec<Arc<ConfigMap>> =
        ctx.configmaps.state().into_iter().filter(|c| c.labels().get(names::LABEL_POOL) == Some(&name)).collect();
    let existing_revisions: BTreeSet<String> = cms_of_pool.iter().filter_map(|c| c.labels().get(names::LABEL_REVISION).cloned()).collect();
    let (hook_runs, other_hook_jobs) = hook_runs(ctx, &name, &members);
    Ok(Observed {
        members,
        deselected,
        membership,
        rules,
        pods_by_node,
        ds_of_pool,
        cms_of_pool,
        existing_revisions,
        hns_totals: totals,
        hns_awaiting: awaiting,
        hns_over_limit: over_limit,
        hns_backlog,
        hns_limits: limits,
        clock_skew: ctx.clock.skew_past(crate::decision::rollout::MAX_CLOCK_SKEW),
        bad_updates: bad_updates(ctx, &nodes),
        ring: ring_seen(ctx, pool, &nodes),
        cluster: cluster_in_flight(ctx, &name, &nodes),
        hooks_namespace: ctx.settings.hooks_namespace.clone(),
        hook_runs,
        other_hook_jobs,
        patch: None,
    })
}

/// The pool's hook Jobs for each member's current start (its
/// `winpool.dev/started-at`): a Job of an earlier start is history.
fn hook_runs(
    ctx: &Context,
    pool: &str,
    members: &[(Arc<NodeRecord>, Option<Arc<crate::api::report::WindowsNodeReport>>)],
) -> (BTreeMap<String, Vec<crate::decision::rollout::hooks::HookRun>>, Vec<OtherHookJob>) {
    let (mut runs, mut others): (BTreeMap<String, Vec<_>>, Vec<_>) = Default::default();
    let Some(jobs) = &ctx.hook_jobs else {
        return (runs, others);
    };
    let started: BTreeMap<&str, jiff::Timestamp> =
        members.iter().filter_map(|(n, _)| Some((n.name.as_str(), n.annotation(names::ANN_STARTED_AT)?.parse().ok()?))).collect();
    for job in jobs.state().iter().filter(|j| j.labels().get(names::LABEL_POOL).map(String::as_str) == Some(pool)) {
        match crate::builders::hook_job::run_of(job) {
            Some((node, at, run)) if started.get(node.as_str()) == Some(&at) => runs.entry(node).or_default().push(run),
            Some((node, at, run)) => others.push((run.job, node, at, run.outcome)),
            None => {}
        }
    }
    (runs, others)
}

type OtherHookJob = (String, String, jiff::Timestamp, crate::decision::rollout::hooks::HookOutcome);

/// With --max-nodes-in-flight: the nodes of this install's other pools in
/// flight now (our own writes included, taken from their responses).
fn cluster_in_flight(ctx: &Context, pool: &str, nodes: &[Arc<NodeRecord>]) -> Option<ClusterInFlight> {
    let limit = ctx.settings.max_nodes_in_flight as usize;
    if limit == 0 {
        return None;
    }
    let ours: BTreeSet<String> = ctx.pools.state().iter().map(|p| p.name_any()).collect();
    let in_flight = |n: &NodeRecord| n.annotation(names::ANN_STATE).and_then(NodeState::parse).is_some_and(|s| s.in_flight());
    let other_pool = |n: &NodeRecord| n.label(names::LABEL_POOL).is_some_and(|p| p != pool && ours.contains(p));
    let elsewhere = nodes.iter().filter(|n| other_pool(n) && in_flight(n)).count();
    let pools = ctx.pools.state();
    let progressing =
        pools.iter().map(|p| (p.name_any(), crate::decision::rollout::cluster::progressing(p.status.as_ref()))).collect::<Vec<_>>();
    let waiting_ahead = crate::decision::rollout::cluster::waiting_ahead(pool, &progressing);
    Some(ClusterInFlight { limit, elsewhere, waiting_ahead })
}

/// For a pool that follows another: that pool, the nodes labelled for it,
/// and who follows whom (a circle of rings holds every pool in it).
fn ring_seen(ctx: &Context, pool: &WindowsNodePool, nodes: &[Arc<NodeRecord>]) -> RingObserved {
    let Some(f) = &pool.spec.rollout.follows else {
        return RingObserved::default();
    };
    let pools = ctx.pools.state();
    let follows = pools.iter().filter_map(|p| Some((p.name_any(), p.spec.rollout.follows.as_ref()?.pool.clone()))).collect();
    let followed = pools.into_iter().find(|p| p.name_any() == f.pool && p.metadata.deletion_timestamp.is_none());
    let followed_members = match followed {
        Some(_) => nodes.iter().filter(|n| n.label(names::LABEL_POOL) == Some(f.pool.as_str())).map(|n| FollowedMember::of(n)).collect(),
        None => Vec::new(),
    };
    RingObserved { followed, followed_members, follows }
}

/// The updates failing with one code on enough nodes, across every pool's
/// nodes in the cache; only nodes in flight or Failed are looked up further.
fn bad_updates(ctx: &Context, nodes: &[Arc<NodeRecord>]) -> Vec<crate::decision::breaker::BadUpdate> {
    use crate::decision::breaker;
    let threshold = ctx.settings.bad_update_threshold;
    if threshold == 0 {
        return Vec::new();
    }
    let ns = &ctx.settings.agent_namespace;
    let failed: Vec<_> = nodes
        .iter()
        .filter(|n| n.annotation(names::ANN_STATE).and_then(NodeState::parse).is_some_and(|s| s == NodeState::Failed || s.in_flight()))
        .filter_map(|n| {
            let report = ctx.reports.get(&ObjectRef::new(&n.name).within(ns));
            let cm = match (n.label(names::LABEL_POOL), n.label(names::LABEL_REVISION)) {
                (Some(pool), Some(rev)) => {
                    ctx.configmaps.get(&ObjectRef::new(&crate::builders::configmap::configmap_name(pool, rev)).within(ns))
                }
                _ => None,
            };
            breaker::failed_install(n, report.as_deref(), cm.as_deref())
        })
        .collect();
    breaker::tripped(&failed, threshold)
}

/// The pods of every Draining node, a few lists at a time: a wave of a hundred
/// nodes starting together would otherwise cost a hundred round trips in a row
/// on every round, and the whole pool waits for them.
async fn pods_on_draining(ctx: &Context, draining: Vec<String>, rules: &DrainRules) -> Result<BTreeMap<String, Vec<PodOnNode>>, Error> {
    let listed = few_at_a_time(draining, |node| list_pods(&ctx.client, node, rules)).await;
    let mut pods_by_node = BTreeMap::new();
    for (node, pods) in listed {
        let pods = pods.map_err(|source| Error::ListPods { node: node.clone(), source })?;
        ctx.metrics.api_request("list", "pods", "ok");
        pods_by_node.insert(node, pods);
    }
    Ok(pods_by_node)
}

async fn list_pods(client: &kube::Client, node: String, rules: &DrainRules) -> (String, kube::Result<Vec<PodOnNode>>) {
    let pods = drain::pods_on_node(client, &node, rules).await;
    (node, pods)
}

/// The round's HNS condition and taint writes, a few at a time. Returns the
/// nodes whose taint could not be written (a conflict): they wait a round.
/// What the HNS writes left for the node writes: the nodes that wait a round,
/// and the resourceVersions guarded starts must now expect.
#[derive(Default)]
struct HnsOutcome {
    behind: BTreeSet<String>,
    guards: BTreeMap<String, String>,
}

async fn execute_hns_writes(ctx: &Context, pool: &str, round: &Round) -> Result<HnsOutcome, Error> {
    let results = few_at_a_time(round.hns_writes.iter().collect(), |(w, message)| hns_one(ctx, pool, w, message)).await;
    let mut out = HnsOutcome::default();
    for (node, r) in results {
        match r? {
            HnsWritten::Behind => {
                out.behind.insert(node);
            }
            HnsWritten::Done { guard: Some(rv) } => {
                out.guards.insert(node, rv);
            }
            HnsWritten::Done { guard: None } => {}
        }
    }
    Ok(out)
}

async fn hns_one(ctx: &Context, pool: &str, w: &HnsWrites, message: &str) -> (String, Result<HnsWritten, Error>) {
    if ctx.stopping() {
        // Unwritten, like a taint that could not be: the node waits.
        return (w.node.clone(), Ok(HnsWritten::Behind));
    }
    (w.node.clone(), write_hns(ctx, pool, w, message).await)
}

/// This round's evictions (or deletions past drain.timeout), a few nodes at a
/// time. Returns, per node drained, the budget that refused its evictions, if any.
async fn execute_drains(ctx: &Context, pool: &WindowsNodePool, round: &Round, seen: &Observed) -> Drained {
    let name = pool.name_any();
    let rules = &seen.rules;
    let todo: Vec<(&String, DrainMode, &Vec<PodOnNode>, Option<usize>)> = round
        .plan
        .drain
        .iter()
        .filter_map(|(node, mode)| Some((node, *mode, seen.pods_by_node.get(node)?, round.plan.eviction_caps.get(node).copied())))
        .collect();
    let waiting = &round.evictions_waiting;
    let drained = few_at_a_time(todo, |(node, mode, pods, cap)| drain_one(ctx, &name, node, pods, (mode, cap), rules, waiting)).await;
    let (mut nodes, mut evictions) = (Vec::new(), Vec::new());
    for (node, r) in drained.into_iter().flatten() {
        // A node whose refused pods all wait their backoff says nothing new
        // about its budgets: what blocked it still does.
        if r.refused_by.is_some() || r.waited == 0 {
            nodes.push((node.clone(), r.refused_by));
        }
        evictions.extend(r.asked);
    }
    (nodes, evictions)
}

/// Per node drained, the budget that refused it; each eviction asked, and whether refused.
type Drained = (Vec<(String, Option<String>)>, Vec<(String, bool)>);

async fn drain_one<'n>(
    ctx: &Context,
    pool: &str,
    node: &'n String,
    pods: &[PodOnNode],
    (mode, cap): (DrainMode, Option<usize>),
    rules: &DrainRules,
    waiting: &BTreeSet<String>,
) -> Option<(&'n String, drain::DrainRound)> {
    // A drain round not run says nothing about the node's budgets.
    if ctx.stopping() {
        return None;
    }
    let ask = drain::Ask { mode, cap, waiting };
    Some((node, drain::drain_round(&ctx.client, pool, node, pods, rules, ask).await))
}

/// Pause the pool for a bad update (the annotation a resume removes) and say
/// so, naming the update, the code and the nodes.
async fn pause_for_bad_update(pool: &WindowsNodePool, ctx: &Context, pause: &round::BreakerPause) -> Result<(), Error> {
    let name = pool.name_any();
    api_status(ctx)
        .patch(&name, &crate::api::patch_params(), &Patch::Merge(&pause.patch()))
        .await
        .map_err(|source| Error::PausePool { pool: name.clone(), source })?;
    ctx.metrics.api_request("patch", "windowsnodepools", "ok");
    let msg = pause.trip.message();
    warn!(pool = %name, update = %pause.trip.update, code = %pause.trip.code, "{msg}");
    let ev = EventReason::BadUpdateStopped.warning(msg, "Pause");
    ctx.publish(pool, ev).await;
    Ok(())
}

/// The batches of node starts and completions that are due ([`PoolMemory::settle`]).
async fn announce_node_batches(ctx: &Context, pool: &WindowsNodePool, due: Vec<DueBatch>) {
    for (revision, pending) in due {
        let transitions: Vec<(&str, NodeState, NodeState)> = pending.iter().map(|(n, from, to)| (n.as_str(), *from, *to)).collect();
        for (reason, note) in node_batch_events(&transitions, &revision) {
            ctx.publish_fresh(
                pool,
                Event {
                    type_: EventType::Normal,
                    reason: reason.as_str().into(),
                    note: Some(note),
                    action: "Rollout".into(),
                    secondary: None,
                },
            )
            .await;
        }
    }
}

/// Tell what the round did: standing problems, metrics, the status (when the
/// round says so) and then its transitions. Returns when to look again.
async fn record(pool: &WindowsNodePool, ctx: &Context, seen: &Observed, round: Round, memory: &mut PoolMemory) -> Result<Action, Error> {
    let name = pool.name_any();
    for (node, msg) in &round.plan.warnings {
        warn!(pool = %name, node = %node, "{msg}");
    }
    if !seen.membership.conflicts.is_empty() {
        warn!(pool = %name, "{}", seen.membership.conflicts.message(pool.spec.os.version.as_str()));
    }
    let now = ctx.now();
    ctx.metrics.observe_pool(&name, &round.plan, now);
    ctx.metrics.observe_pool_info(&name, pool.spec.os.version.as_str(), &pool.spec.os.patch_level, &round.plan.revision);
    let hns = &pool.spec.hns;
    ctx.metrics.observe_hns(&name, seen.hns_totals, &seen.hns_limits, round.hns_utilization, hns.warn_percent, &round.hns_not_ready);
    let pacing = crate::controller::metrics::HnsPacingSeen {
        backlog: seen.hns_backlog,
        budget: crate::decision::rollout::hns_pacing_budget(&pool.spec),
    };
    ctx.metrics.observe_hns_pacing(&name, pacing);
    ctx.metrics.observe_hns_drift(&name, round.hns_drifted);
    ctx.metrics.observe_hns_repairs(&name, &round.hns_repairs.states);
    record_status(pool, ctx, round, memory).await
}

/// The part of recording every round shares, a refused pool's too: the
/// standing problems announced, the status written (and remembered), then
/// the transitions it holds announced.
async fn record_status(pool: &WindowsNodePool, ctx: &Context, mut round: Round, memory: &mut PoolMemory) -> Result<Action, Error> {
    let name = pool.name_any();
    for ev in std::mem::take(&mut round.announce) {
        // Said once, as the Event is: the log holds what an Event's TTL loses.
        if ev.type_ == EventType::Warning {
            warn!(pool = %name, reason = %ev.reason, "{}", ev.note.as_deref().unwrap_or_default());
        }
        ctx.publish_fresh(pool, ev).await;
    }
    let now = ctx.now();
    let requeue = round::requeue_after(&round, memory, now);
    // The transitions are announced once the status that holds them is written:
    // a failed write leaves both to the next round, which announces them once.
    if round.status_write == StatusWrite::Write {
        let rv = write_status(ctx, &name, &round.status).await?;
        memory.wrote_status(rv, round.status.clone(), now);
        debug!(pool = %name, counts = ?round.status.nodes, "status updated");
    }
    for (transition, note) in round.transitions {
        info!(pool = %name, reason = transition.reason().as_str(), "{note}");
        let type_ = if transition.is_warning() { EventType::Warning } else { EventType::Normal };
        let ev = Event { type_, reason: transition.reason().as_str().into(), note: Some(note), action: "Rollout".into(), secondary: None };
        ctx.publish(pool, ev).await;
    }
    Ok(Action::requeue(requeue))
}

/// Apply the pool's status; the pool's resourceVersion after.
async fn write_status(ctx: &Context, name: &str, status: &crate::api::WindowsNodePoolStatus) -> Result<u64, Error> {
    let body = json!({ "apiVersion": "winpool.dev/v1alpha1", "kind": "WindowsNodePool", "status": status });
    let written = api_status(ctx)
        .patch_status(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body))
        .await
        .map_err(|source| Error::WriteStatus { pool: name.to_string(), source })?;
    ctx.metrics.api_request("apply", "windowsnodepools/status", "ok");
    Ok(crate::api::node_record::revision(written.metadata.resource_version.as_deref()))
}
