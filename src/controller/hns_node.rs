//! A member's HNS readiness as the Node shows it: the WindowsHNSReady
//! condition and the hns-not-ready taint.

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, Patch};
use serde_json::json;
use tracing::{debug, info};

use super::{Context, Error};
use crate::api::{WindowsNodePool, names};
pub(crate) use crate::decision::round::hns_node::{HnsWrites, TaintChange, json_patch};
use crate::decision::round::hns_repair::RepairAsk;

/// What [`write_hns`] did to one node.
pub(super) enum HnsWritten {
    /// Its taint could not be written (or a guarded write found the node moved): it waits a round.
    Behind,
    /// Written or nothing to write; for guarded writes, the resourceVersion they left the node at.
    Done { guard: Option<String> },
}

/// A patch that lands only on this resourceVersion.
fn guarded(patch: &Patch<serde_json::Value>, rv: &str) -> Patch<serde_json::Value> {
    match patch {
        Patch::Merge(body) => {
            let mut body = body.clone();
            body["metadata"]["resourceVersion"] = json!(rv);
            Patch::Merge(body)
        }
        Patch::Json(ops) => {
            let mut all = json_patch(json!([{ "op": "test", "path": "/metadata/resourceVersion", "value": rv }])).0;
            all.extend(ops.0.iter().cloned());
            Patch::Json(json_patch::Patch(all))
        }
        other => unreachable!("HNS taint writes are merge or JSON patches: {other:?}"),
    }
}

/// What a taint write did, said for the log.
fn taint_news(change: &TaintChange) -> &'static str {
    let has = |list: &[&str], key: &str| list.contains(&key);
    match (has(&change.added, names::TAINT_UNPATCHED), has(&change.removed, names::TAINT_UNPATCHED)) {
        (true, _) => "tainted: joined below the pool's patch level",
        (_, true) => "untainted: updated to the pool's patch level",
        _ if has(&change.added, names::TAINT_HNS_NOT_READY) => "tainted: HNS not ready",
        _ => "untainted: HNS ready",
    }
}

/// Write one node's HNS condition and taint.
pub(super) async fn write_hns(ctx: &Context, pool: &str, w: &HnsWrites, message: &str) -> Result<HnsWritten, Error> {
    let name = w.node.clone();
    let api: Api<Node> = Api::all(ctx.client.clone());
    let mut guard = w.unless_changed_since.clone();
    if let Some(cond) = &w.condition {
        let (status, reason) = (cond.status.clone(), cond.reason.clone().unwrap_or_default());
        let mut body = json!({ "status": { "conditions": [cond] } });
        if let Some(rv) = &guard {
            body["metadata"] = json!({ "resourceVersion": rv });
        }
        match api.patch_status(&name, &crate::api::patch_params(), &Patch::Strategic(body)).await {
            Ok(n) => {
                ctx.metrics.api_request("patch", "nodes/status", "ok");
                info!(pool, node = %name, status = %status, reason = %reason, "{} {message}", names::NODE_CONDITION_HNS_READY);
                if let Some((lost, after)) = w.loss_detected {
                    ctx.metrics.observe_hns_loss_detected(pool, lost, after);
                }
                if guard.is_some() {
                    guard = n.metadata.resource_version.clone();
                }
                // The next round must see this condition even if the watch has not
                // delivered it yet, or it writes the same condition again.
                ctx.recent.wrote(n);
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(kube::Error::Api(s)) if s.code == 409 && guard.is_some() => {
                ctx.metrics.api_request("patch", "nodes/status", "conflict");
                return Ok(HnsWritten::Behind);
            }
            Err(e) => return Err(Error::PatchNode { node: name.clone(), source: e }),
        }
    }
    if let Some((change, patch)) = &w.taint {
        let patch = match &guard {
            Some(rv) => guarded(patch, rv),
            None => patch.clone(),
        };
        match api.patch(&name, &crate::api::patch_params(), &patch).await {
            Ok(n) => {
                ctx.metrics.api_request("patch", "nodes", "ok");
                info!(pool, node = %name, added = ?change.added, removed = ?change.removed, "{}", taint_news(change));
                if guard.is_some() {
                    guard = n.metadata.resource_version.clone();
                }
                ctx.recent.wrote(n);
            }
            // Conflict, a failed test op (the list moved) or a duplicate: the next round sees the fresh list.
            Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409 | 422) => {
                ctx.metrics.api_request("patch", "nodes", "conflict");
                debug!(pool, node = %name, code = s.code, "taint update deferred: {}", s.message);
                return Ok(HnsWritten::Behind);
            }
            Err(e) => return Err(Error::PatchNode { node: name, source: e }),
        }
    }
    Ok(HnsWritten::Done { guard })
}

/// Ask each member's agent to restart kube-proxy in its current boot (the
/// round's [`RepairAsk`]s), and announce each ask that landed.
pub(super) async fn ask_hns_repairs(ctx: &Context, pool: &WindowsNodePool, asks: &[RepairAsk]) -> Result<(), Error> {
    let api: Api<Node> = Api::all(ctx.client.clone());
    for ask in asks {
        match api.patch(&ask.node, &crate::api::patch_params(), &Patch::Merge(&ask.body)).await {
            Ok(n) => {
                ctx.metrics.api_request("patch", "nodes", "ok");
                info!(pool = %pool.name_any(), node = %ask.node, "asked the node's agent to restart kube-proxy: its HNS lost what it held in this boot");
                ctx.recent.wrote(n);
                ctx.publish_fresh(pool, ask.event()).await;
            }
            Err(kube::Error::Api(s)) if s.code == 404 => ctx.metrics.api_request("patch", "nodes", "not_found"),
            Err(e) => {
                ctx.metrics.api_request("patch", "nodes", "error");
                return Err(Error::PatchNode { node: ask.node.clone(), source: e });
            }
        }
    }
    Ok(())
}
