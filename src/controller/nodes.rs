//! Writes to Nodes: the plan's patches, and releases.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch};
use kube::runtime::reflector::ObjectRef;
use serde_json::json;
use tracing::{info, warn};

use super::events::node_event;
use super::{Context, Error, few_at_a_time};
use crate::api::WindowsNodePool;
use crate::api::node_record::NodeRecord;
use crate::api::operation::WindowsNodeOperation;
use crate::decision::operation::OperationWrite;
use crate::decision::rollout::NodePatch;
use crate::decision::round::release::node_patch_body;

/// `Ok(true)` when the patch landed; `Ok(false)` when the node is gone or, for a
/// guarded patch, moved since it was decided from (the next round decides again).
pub(super) async fn patch_node_with(ctx: &Context, pool: &str, p: &NodePatch, body: serde_json::Value) -> Result<bool, Error> {
    let api: Api<Node> = Api::all(ctx.client.clone());
    match api.patch(&p.node, &crate::api::patch_params(), &Patch::Merge(body)).await {
        Ok(n) => {
            ctx.metrics.api_request("patch", "nodes", "ok");
            info!(pool, node = %p.node, from = p.from.as_str(), to = p.to.as_str(), cordon = ?p.unschedulable, "{}", p.reason);
            ctx.recent.wrote(n);
            Ok(true)
        }
        // The node vanished: it is no longer a member next round; nothing to undo.
        Err(kube::Error::Api(s)) if s.code == 404 => {
            ctx.metrics.api_request("patch", "nodes", "not_found");
            warn!(pool, node = %p.node, "node disappeared before it could be patched");
            Ok(false)
        }
        Err(kube::Error::Api(s)) if s.code == 409 && p.unless_changed_since.is_some() => {
            ctx.metrics.api_request("patch", "nodes", "conflict");
            info!(pool, node = %p.node, to = p.to.as_str(), "node changed since this round read it: decided again next round");
            Ok(false)
        }
        Err(e) => {
            ctx.metrics.api_request("patch", "nodes", "error");
            Err(Error::PatchNode { node: p.node.clone(), source: e })
        }
    }
}

/// The operation a node's patch carries, written before the patch: its agent
/// acts on the operation alone, and never before winpool's own transition.
/// Returns the operation as written (none: there was none to move on).
pub(super) async fn write_operation(ctx: &Context, op: &OperationWrite) -> Result<Option<WindowsNodeOperation>, Error> {
    let api: Api<WindowsNodeOperation> = Api::namespaced(ctx.client.clone(), &ctx.settings.agent_namespace);
    let r = match op {
        OperationWrite::Apply { op: o, retargets } => create_operation(ctx, &api, o, retargets.as_deref()).await,
        OperationWrite::Phase { name, status } => {
            match api.patch(name, &crate::api::patch_params(), &Patch::Merge(json!({ "status": status }))).await {
                // The start never reached Applying: it has no operation to move on.
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
                r => r.map(Some),
            }
        }
    };
    ctx.metrics.api_request("patch", "windowsnodeoperations", if r.is_ok() { "ok" } else { "error" });
    r.map_err(|source| Error::WriteOperation { name: op.name().to_string(), source })
}

/// A start's operation, created once with the link to the node's operation
/// before it (read now, when that one has ended); written again (a round
/// whose Node patch did not land, a hotpatch drained before its reboot), only
/// its status moves: the chain never changes once made.
async fn create_operation(
    ctx: &Context,
    api: &Api<WindowsNodeOperation>,
    o: &WindowsNodeOperation,
    retargets: Option<&str>,
) -> kube::Result<Option<WindowsNodeOperation>> {
    let node = &o.spec.node_name;
    let name = o.metadata.name.clone().unwrap_or_default();
    let mut o = o.clone();
    if let Some(of_start) = retargets {
        // The same start goes on to a new revision: drained as that start was,
        // and only if winpool made it (a forged Applying has no operation).
        let Some(before) = api.get_opt(of_start).await? else { return Ok(None) };
        let drained = before.status.and_then(|s| s.drained_at);
        o.status.get_or_insert_with(Default::default).drained_at = drained;
    }
    let of_node = api.list(&ListParams::default().fields(&format!("spec.nodeName={node}"))).await?.items;
    o.spec.previous = crate::decision::operation::previous(&of_node, node, &name);
    let written = match api.create(&crate::api::post_params(), &o).await {
        Err(kube::Error::Api(s)) if s.code == 409 => {
            return api.patch(&name, &crate::api::patch_params(), &Patch::Merge(json!({ "status": o.status }))).await.map(Some);
        }
        r => r?,
    };
    // The node's records past the retention go as a new one is made: the
    // list is at hand, and a node that is never started again adds none.
    let keep = &ctx.settings.operation_retention;
    for old in crate::decision::operation::expired(&of_node, keep, ctx.now()) {
        match api.delete(&old, &Default::default()).await {
            Ok(_) => ctx.metrics.api_request("delete", "windowsnodeoperations", "ok"),
            Err(e) => {
                warn!(operation = %old, error = %e, "could not delete an expired operation record; tried again at the node's next start")
            }
        }
    }
    Ok(Some(written))
}

/// One patch of [`write_nodes`]: `Ok(false)` when not sent (the replica is stopping) or not landed.
/// `guard`: the resourceVersion this round's own HNS writes left a guarded node at.
async fn write_one<'p>(
    ctx: &Context,
    pool: &WindowsNodePool,
    name: &str,
    (p, record): (&'p NodePatch, Option<&NodeRecord>),
    guard: Option<&String>,
) -> (&'p NodePatch, Result<bool, Error>) {
    if ctx.stopping() {
        return (p, Ok(false));
    }
    let report = record.and_then(|n| ctx.reports.get(&ObjectRef::new(&n.name).within(&ctx.settings.agent_namespace)));
    let apply = report.as_ref().and_then(|r| r.observations().apply.as_ref());
    let ns = &ctx.settings.agent_namespace;
    let op = record.and_then(|n| crate::decision::operation::for_patch(pool, n, p, apply, ns, ctx.now()));
    let written = match &op {
        Some(op) => match write_operation(ctx, op).await {
            Ok(written) => written,
            Err(e) => return (p, Err(e)),
        },
        None => None,
    };
    let mut body = node_patch_body(p);
    if let (Some(rv), true) = (guard, p.unless_changed_since.is_some()) {
        body["metadata"]["resourceVersion"] = json!(rv);
    }
    let r = patch_node_with(ctx, name, p, body).await;
    if let Ok(true) = r {
        node_event(ctx, pool, p).await;
        log_record(written.as_ref());
    }
    (p, r)
}

/// An ended operation's record, once, as one JSON line on the operator's
/// standard output for a SIEM to keep past the cluster's retention: its
/// transition landed, and is decided no more.
pub(super) fn log_record(written: Option<&WindowsNodeOperation>) {
    if let Some(line) = written.and_then(crate::decision::operation::record_line) {
        println!("{line}");
    }
}

/// Patch these nodes a few at a time: nodes are independent, so a wave of a hundred
/// costs a few round trips, not a hundred. Returns the patches that landed and
/// the first error, after all ran.
pub(super) async fn write_nodes<'p>(
    ctx: &Context,
    pool: &WindowsNodePool,
    name: &str,
    patches: Vec<&'p NodePatch>,
    guards: &BTreeMap<String, String>,
    records: &BTreeMap<&str, &NodeRecord>,
) -> (Vec<&'p NodePatch>, Result<(), Error>) {
    let results: Vec<(&NodePatch, Result<bool, Error>)> =
        few_at_a_time(patches, |p| write_one(ctx, pool, name, (p, records.get(p.node.as_str()).copied()), guards.get(&p.node))).await;
    let mut landed = Vec::with_capacity(results.len());
    let mut first_error = Ok(());
    for (p, r) in results {
        match r {
            Ok(true) => landed.push(p),
            Ok(false) => {}
            Err(e) if first_error.is_ok() => first_error = Err(e),
            Err(_) => {}
        }
    }
    (landed, first_error)
}
