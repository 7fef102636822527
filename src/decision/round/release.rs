//! Node patches as JSON: the plan's, and the release that gives a node back
//! (the shell, `controller::nodes`, sends them).

use serde_json::json;

use crate::api::names;
use crate::hns;
use crate::node_record::NodeRecord;
use crate::node_view::node_view;
use crate::report::AgentReport;
use crate::rollout::{HnsReadiness, NodePatch};

/// The JSON merge patch body of a plan's node patch.
pub(crate) fn node_patch_body(p: &NodePatch) -> serde_json::Value {
    let mut meta = serde_json::Map::new();
    if !p.labels.is_empty() {
        meta.insert("labels".into(), json!(p.labels));
    }
    if !p.annotations.is_empty() {
        meta.insert("annotations".into(), json!(p.annotations));
    }
    if let Some(rv) = &p.unless_changed_since {
        meta.insert("resourceVersion".into(), json!(rv));
    }
    let mut body = json!({ "metadata": meta });
    if let Some(u) = p.unschedulable {
        body["spec"] = json!({ "unschedulable": u });
    }
    body
}

/// Give a node back: no pool label, no revision, no rollout state, and winpool's cordon lifted.
pub(crate) fn release_patch(n: &NodeRecord, why: &str) -> NodePatch {
    let view = node_view(n, &AgentReport::default(), HnsReadiness::Unknown);
    let mut p = NodePatch { node: view.name.clone(), reason: why.into(), ..Default::default() };
    for l in [names::LABEL_POOL, names::LABEL_REVISION, names::LABEL_STATE, names::LABEL_CSI_PROXY_HOST] {
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
pub(crate) fn release_body(n: &NodeRecord, p: &NodePatch) -> serde_json::Value {
    let mut body = node_patch_body(p);
    if let Some(new) = hns::taints_update(&n.taints, false) {
        body["spec"]["taints"] = json!(new);
        body["metadata"]["resourceVersion"] = json!(n.resource_version);
    }
    body
}
