//! One reconcile of a live pool: observe → decide → execute → record. The
//! decision is [`round::decide_round`], pure; everything here reads the
//! cluster or carries out what the round decided, in the order it says.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use serde_json::json;
use tracing::{debug, info, warn};

use super::agent::{agent_image_allowed, delete_configmap, delete_daemonset, refuse_agent_image, write_configmaps, write_daemonset};
use super::gates;
use super::hns_node::{HnsNode, HnsWrites, HnsWritten, hns_readiness, within_catch_up_grace, write_hns};
use super::nodes::{patch_node_with, release_body, write_nodes};
use super::round::{self, Observed, Round};
use super::{Context, Error, NODE_EVENT_INTERVAL, api_status, few_at_a_time};
use crate::api::{FIELD_MANAGER, WindowsNodePool, names};
use crate::daemonset::legacy_revision;
use crate::drain::{self, DrainRules, PodOnNode};
use crate::hns::Limits;
use crate::membership::members_of;
use crate::node_record::NodeRecord;
use crate::observe::node_view;
use crate::report::AgentReport;
use crate::rollout::{DrainBlock, DrainMode, HnsReadiness, NodePatch, NodeState, PoolInput, could_start, fold_average, node_timeout};
use crate::status::{PROGRESS_WRITE_INTERVAL, node_batch_events, only_progress_changed};

pub(super) async fn apply(pool: &WindowsNodePool, ctx: &Context) -> Result<Action, Error> {
    let name = pool.name_any();
    // Deciding on a half-filled cache would report nodes as missing and re-create DaemonSets.
    // Nor on half-counted HNS totals: a node would look caught up when it is not.
    if ctx.metrics.caches_synced.get() != 1 || !ctx.hns.lock().expect("hns lock").synced() {
        debug!(pool = %name, "caches not synced yet; waiting");
        return Ok(Action::requeue(Duration::from_millis(200)));
    }
    if ctx.stopping() {
        return Ok(Action::await_change());
    }
    let fresher = ctx.as_last_written(pool);
    let pool = fresher.as_ref().unwrap_or(pool);
    let now = Timestamp::now();
    if !agent_image_allowed(&pool.spec.agent.image, &ctx.settings.allowed_agent_images) {
        return refuse_agent_image(pool, ctx, now).await;
    }
    let nodes = ctx.windows_nodes();
    let selectors = ctx.pool_selectors();
    let membership = members_of(&name, &selectors, nodes.iter().map(|n| (n.name.as_str(), n.as_ref())));
    let seen = observe(pool, ctx, &nodes, membership, now).await?;
    let round = round::decide_round(pool, &ctx.settings, &seen, now);
    for (node, why) in &round.plan.waiting {
        debug!(pool = %name, node = %node, "waiting: {why}");
    }
    execute(pool, ctx, &seen, &round, now).await?;
    if ctx.stopping() {
        // Part of the round may be unwritten: its status would claim it. The next leader decides again.
        info!(pool = %name, "stopping: the rest of this round is left to the next leader");
        return Ok(Action::await_change());
    }
    record(pool, ctx, &seen, round, now).await
}

/// Carry out the round's writes in the order they must land: deselected nodes
/// are given back first (they hold no slot of the rollout); the agent runs,
/// and every revision a node is asked to run has its ConfigMap and its CSI
/// Proxy DaemonSet, before any node is labelled for it; HNS condition and
/// taint before the node patches (a node whose taint could not be written
/// waits a round); the node patches; the evictions; and last the CSI Proxy
/// DaemonSets and ConfigMaps no node needs any more. When the replica stops,
/// the rest is left unwritten, as a crash there would leave it; every prefix
/// of this order is one the next round can continue from.
async fn execute(pool: &WindowsNodePool, ctx: &Context, seen: &Observed<'_>, round: &Round, now: Timestamp) -> Result<(), Error> {
    let name = pool.name_any();
    for (p, body) in &round.releases {
        if ctx.stopping() {
            return Ok(());
        }
        patch_node_with(ctx, &name, p, body.clone()).await?;
    }
    if ctx.stopping() {
        return Ok(());
    }
    if let Some(agent) = &round.agent {
        write_daemonset(pool, ctx, agent).await?;
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
    let (landed, written) = execute_node_writes(ctx, pool, round, &hns).await;
    // The patches that landed are announced even when another failed: they happened.
    announce_node_batches(ctx, pool, round, &landed).await;
    ctx.metrics.observe_updates(&name, landed.iter().copied());
    {
        let mut progress = ctx.progress.lock().expect("progress lock");
        let pr = progress.entry(name.clone()).or_default();
        let seed = pr.average_node_update.or(round.plan.average_node_update);
        pr.average_node_update = fold_average(seed, landed.iter().filter_map(|p| p.took));
    }
    written?;
    if ctx.stopping() {
        return Ok(());
    }
    execute_drains(ctx, pool, round, seen, now).await;
    if ctx.stopping() {
        return Ok(());
    }
    for ds in &round.csi_proxy.delete {
        delete_daemonset(ctx, ds).await?;
        info!(pool = %name, daemonset = %ds, "deleted CSI Proxy DaemonSet: no node's revision asks for its version");
    }
    for (cm, rev) in &round.stale_configmaps {
        delete_configmap(ctx, cm).await?;
        info!(pool = %name, configmap = %cm, revision = %rev, "deleted revision ConfigMap: no node carries its revision");
    }
    Ok(())
}

/// Read the pool's members into plain structs: their views, HNS readiness, the
/// pods of the Draining ones, the pool's agent objects, and its health gates
/// when a node could start.
async fn observe<'a>(
    pool: &WindowsNodePool,
    ctx: &Context,
    nodes: &'a [Arc<NodeRecord>],
    membership: crate::membership::Membership,
    now: Timestamp,
) -> Result<Observed<'a>, Error> {
    let name = pool.name_any();
    let member_set: BTreeSet<&str> = membership.members.iter().map(String::as_str).collect();
    let limits = Limits::for_pool(&pool.spec.hns, pool.spec.os.version);
    let (totals, over_limit) = {
        let t = ctx.hns.lock().expect("hns lock");
        (t.totals(), t.services_over(limits.backends_per_service))
    };
    let grace = jiff::SignedDuration::try_from(node_timeout(&pool.spec)).unwrap_or(jiff::SignedDuration::from_mins(30));
    let mut views = Vec::with_capacity(member_set.len());
    let mut hns_nodes = Vec::new();
    for n in nodes.iter().filter(|n| member_set.contains(n.name.as_str())) {
        let object = ctx.reports.get(&ObjectRef::new(&n.name).within(&ctx.settings.agent_namespace));
        let mut v = node_view(n, &AgentReport::of(n, object.as_deref()), HnsReadiness::Unknown);
        let (mut readiness, mut reason, mut message) = hns_readiness(n, &v, totals, &pool.spec.hns, grace, now);
        {
            let mut behind = ctx.hns_behind.lock().expect("hns behind lock");
            if readiness == HnsReadiness::NotReady {
                let since = *behind.entry(n.name.clone()).or_insert(now);
                let in_flight = v.state.as_deref().and_then(NodeState::parse).is_some_and(NodeState::in_flight);
                if let Some(kept) =
                    n.hns_condition.as_ref().filter(|_| within_catch_up_grace(n.hns_condition.as_ref(), in_flight, readiness, since, now))
                {
                    // Still within its grace: judged as its condition says, so nothing is written.
                    (readiness, reason, message) =
                        (HnsReadiness::Ready, crate::hns::reasons::CAUGHT_UP, kept.message.clone().unwrap_or_default());
                }
            } else {
                behind.remove(&n.name);
            }
        }
        v.hns = readiness;
        hns_nodes.push(HnsNode { node: n, readiness, reason, message });
        views.push(v);
    }
    let rules = DrainRules::of(&pool.spec.rollout.drain);
    let pods_by_node = pods_on_draining(ctx, &views, &rules).await?;
    {
        let mut blocks = ctx.drain_blocks.lock().expect("drain blocks lock");
        for v in views.iter_mut() {
            if let Some(pods) = pods_by_node.get(&v.name) {
                v.pods_to_evict = drain::remaining(pods, &rules, now);
                v.drain_held = drain::first_held(pods, &rules);
                v.drain_block = blocks.get(&v.name).cloned();
            } else {
                // Not Draining (any more): what blocked its last drain is history.
                blocks.remove(&v.name);
            }
        }
    }
    let ds_of_pool: Vec<Arc<DaemonSet>> =
        ctx.daemonsets.state().into_iter().filter(|d| d.labels().get(names::LABEL_POOL) == Some(&name)).collect();
    let cms_of_pool: Vec<Arc<ConfigMap>> =
        ctx.configmaps.state().into_iter().filter(|c| c.labels().get(names::LABEL_POOL) == Some(&name)).collect();
    let existing_revisions: BTreeSet<String> = cms_of_pool
        .iter()
        .filter_map(|c| c.labels().get(names::LABEL_REVISION).cloned())
        .chain(ds_of_pool.iter().filter_map(|d| legacy_revision(d).map(str::to_string)))
        .collect();
    // Gates cost requests (and a reconcile waits for them): only when a node could start.
    let input = PoolInput {
        name: &name,
        spec: &pool.spec,
        existing_revisions: &existing_revisions,
        target_marked_at: None,
        gates: &[],
        average_node_update: None,
        paused_by_annotation: pool.paused_by_annotation(),
    };
    let gates = if !pool.spec.rollout.health_gates.is_empty() && could_start(&input, &views, now) {
        gates::evaluate_fresh(ctx, pool).await
    } else {
        Vec::new()
    };
    let deselected = round::releases(&name, nodes, &membership, "no longer selected by the pool: node released")
        .into_iter()
        .map(|(n, p)| {
            let body = release_body(n, &p);
            (p, body)
        })
        .collect();
    Ok(Observed {
        releases: deselected,
        membership,
        views,
        hns_nodes,
        pods_by_node,
        ds_of_pool,
        cms_of_pool,
        existing_revisions,
        hns_totals: totals,
        hns_over_limit: over_limit,
        hns_limits: limits,
        average_node_update: ctx
            .progress
            .lock()
            .expect("progress lock")
            .get(&name)
            .and_then(|p| p.average_node_update)
            .or_else(|| pool.status.as_ref()?.average_node_update_seconds.map(|s| Duration::from_secs(s.max(0) as u64))),
        gates,
    })
}

/// The pods of every Draining node, a few lists at a time: a wave of a hundred
/// nodes starting together would otherwise cost a hundred round trips in a row
/// on every round, and the whole pool waits for them.
async fn pods_on_draining(
    ctx: &Context,
    views: &[crate::rollout::NodeView],
    rules: &DrainRules,
) -> Result<BTreeMap<String, Vec<PodOnNode>>, Error> {
    let draining: Vec<String> =
        views.iter().filter(|v| v.state.as_deref() == Some(NodeState::Draining.as_str())).map(|v| v.name.clone()).collect();
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

/// The plan's node patches, in the round's two phases. A node held back a round
/// (its taint is behind) is not written, and frees no slot: nobody new starts
/// this round either; nor after a failed write. Returns the patches that
/// landed and the first error.
async fn execute_node_writes<'r>(
    ctx: &Context,
    pool: &WindowsNodePool,
    round: &'r Round,
    hns: &HnsOutcome,
) -> (Vec<&'r NodePatch>, Result<(), Error>) {
    let name = pool.name_any();
    let (others, starts) = round::node_write_phases(&round.plan);
    let ready = |phase: Vec<&'r NodePatch>| phase.into_iter().filter(|p| !hns.behind.contains(&p.node)).collect::<Vec<_>>();
    let (mut landed, mut written) = write_nodes(ctx, pool, &name, ready(others), &hns.guards).await;
    if written.is_ok() && hns.behind.is_empty() && !ctx.stopping() {
        let (more, r) = write_nodes(ctx, pool, &name, ready(starts), &hns.guards).await;
        landed.extend(more);
        written = r;
    }
    (landed, written)
}

/// This round's evictions (or deletions past drain.timeout), a few nodes at a
/// time. Which budget refused a node's evictions, and since when, is kept for
/// the next decision.
async fn execute_drains(ctx: &Context, pool: &WindowsNodePool, round: &Round, seen: &Observed<'_>, now: Timestamp) {
    let name = pool.name_any();
    let rules = DrainRules::of(&pool.spec.rollout.drain);
    let todo: Vec<(&String, DrainMode, &Vec<PodOnNode>)> =
        round.plan.drain.iter().filter_map(|(node, mode)| Some((node, *mode, seen.pods_by_node.get(node)?))).collect();
    let refused = few_at_a_time(todo, |(node, mode, pods)| drain_one(ctx, &name, node, pods, mode, &rules)).await;
    let mut blocks = ctx.drain_blocks.lock().expect("drain blocks lock");
    for (node, budget) in refused.into_iter().flatten() {
        match budget {
            Some(budget) => {
                let b = blocks.entry(node.clone()).or_insert_with(|| DrainBlock { budget: budget.clone(), since: now });
                b.budget = budget;
            }
            None => {
                blocks.remove(node);
            }
        }
    }
}

async fn drain_one<'n>(
    ctx: &Context,
    pool: &str,
    node: &'n String,
    pods: &[PodOnNode],
    mode: DrainMode,
    rules: &DrainRules,
) -> Option<(&'n String, Option<String>)> {
    // A drain round not run says nothing about the node's budgets.
    if ctx.stopping() {
        return None;
    }
    Some((node, drain::drain_round(&ctx.client, pool, node, pods, mode, rules).await))
}

/// Starts and completions are announced together every few seconds, or as soon as
/// nothing is left in flight: one pair of Events per interval, not per round.
async fn announce_node_batches(ctx: &Context, pool: &WindowsNodePool, round: &Round, landed: &[&NodePatch]) {
    let due = {
        let mut progress = ctx.progress.lock().expect("progress lock");
        let pr = progress.entry(pool.name_any()).or_default();
        let mut due = Vec::new();
        if pr.pending_revision != round.plan.revision && !pr.pending.is_empty() {
            due.push((std::mem::take(&mut pr.pending_revision), std::mem::take(&mut pr.pending)));
        }
        if pr.pending.is_empty() {
            pr.pending_since = std::time::Instant::now();
        }
        pr.pending_revision.clone_from(&round.plan.revision);
        pr.pending.extend(landed.iter().map(|p| (p.node.clone(), p.from, p.to)));
        let quiet = round.plan.counts.updating == 0;
        if !pr.pending.is_empty() && (quiet || pr.pending_since.elapsed() >= NODE_EVENT_INTERVAL) {
            due.push((pr.pending_revision.clone(), std::mem::take(&mut pr.pending)));
        }
        due
    };
    for (revision, pending) in due {
        let transitions: Vec<(&str, NodeState, NodeState)> = pending.iter().map(|(n, from, to)| (n.as_str(), *from, *to)).collect();
        for (reason, note) in node_batch_events(&transitions, &revision) {
            ctx.publish_fresh(
                pool,
                Event { type_: EventType::Normal, reason: reason.into(), note: Some(note), action: "Rollout".into(), secondary: None },
            )
            .await;
        }
    }
}

/// Tell what the round did: standing problems, metrics, condition flips, and
/// the status (only when it changed, and progress alone at most every
/// PROGRESS_WRITE_INTERVAL). Returns when to look again.
async fn record(pool: &WindowsNodePool, ctx: &Context, seen: &Observed<'_>, round: Round, now: Timestamp) -> Result<Action, Error> {
    let name = pool.name_any();
    for (node, msg) in &round.plan.warnings {
        warn!(pool = %name, node = %node, "{msg}");
    }
    if !seen.membership.conflicts.is_empty() {
        warn!(pool = %name, "{}", seen.membership.conflicts.message(pool.spec.os.version.as_str()));
    }
    ctx.announce_standing(pool, round.problems).await;
    ctx.metrics.observe_pool(&name, &round.plan, now);
    ctx.metrics.observe_pool_info(&name, pool.spec.os.version.as_str(), &pool.spec.os.patch_level, &round.plan.revision);
    let hns = &pool.spec.hns;
    ctx.metrics.observe_hns(&name, seen.hns_totals, &seen.hns_limits, round.hns_utilization, hns.warn_percent, &round.hns_not_ready);
    let mut requeue = round.plan.requeue_after;
    if ctx.progress.lock().expect("progress lock").get(&name).is_some_and(|p| !p.pending.is_empty()) {
        requeue = requeue.min(NODE_EVENT_INTERVAL);
    }
    // The transitions are announced once the status that holds them is written:
    // a failed write leaves both to the next round, which announces them once.
    if let Some(wait) = write_status(pool, ctx, &round.status).await? {
        // Only the progress moved and it was written a moment ago: the next round writes it.
        requeue = requeue.min(wait.max(Duration::from_millis(100)));
    }
    for (reason, note) in round.transitions {
        info!(pool = %name, reason = %reason, "{note}");
        let type_ = if reason == "RolloutPaused" || reason == "HNSCapacity" { EventType::Warning } else { EventType::Normal };
        ctx.publish(pool, Event { type_, reason, note: Some(note), action: "Rollout".into(), secondary: None }).await;
    }
    Ok(Action::requeue(requeue))
}

/// Write the status if it changed. When only the progress moved and it was
/// written less than PROGRESS_WRITE_INTERVAL ago, nothing is written and the
/// wait until it may be is returned.
async fn write_status(
    pool: &WindowsNodePool,
    ctx: &Context,
    status: &crate::api::WindowsNodePoolStatus,
) -> Result<Option<Duration>, Error> {
    if pool.status.as_ref() == Some(status) {
        return Ok(None);
    }
    let name = pool.name_any();
    let last = ctx.progress.lock().expect("progress lock").get(&name).and_then(|p| p.last_status_write);
    let wait = match (pool.status.as_ref(), last) {
        (Some(prev), Some(at)) if only_progress_changed(prev, status) => PROGRESS_WRITE_INTERVAL.checked_sub(at.elapsed()),
        _ => None,
    };
    if wait.is_some() {
        return Ok(wait);
    }
    let body = json!({ "apiVersion": "winpool.dev/v1alpha1", "kind": "WindowsNodePool", "status": status });
    let written = api_status(ctx)
        .patch_status(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body))
        .await
        .map_err(|source| Error::WriteStatus { pool: name.clone(), source })?;
    ctx.metrics.api_request("apply", "windowsnodepools/status", "ok");
    let mut progress = ctx.progress.lock().expect("progress lock");
    let p = progress.entry(name.clone()).or_default();
    p.last_status_write = Some(std::time::Instant::now());
    p.written_status = Some((crate::node_record::revision(written.metadata.resource_version.as_deref()), status.clone()));
    drop(progress);
    debug!(pool = %name, counts = ?status.nodes, "status updated");
    Ok(None)
}
