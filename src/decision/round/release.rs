//! Node patches as JSON: the plan's, and the release that gives a node back
//! (the shell, `controller::nodes`, sends them).

use serde_json::json;

use crate::api::names;
use crate::api::node_record::NodeRecord;
use crate::decision::agent_report::AgentReport;
use crate::decision::hns;
use crate::decision::node_view::node_view;
use crate::decision::rollout::{HnsReadiness, NodePatch};

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
        names::ANN_INSTALL_BUDGET,
        names::ANN_HOTPATCH,
        names::ANN_UNDO,
        names::ANN_TARGET_REVISION,
        names::ANN_DRAINED_REVISION,
        names::ANN_FAILURE_REASON,
        names::ANN_FAILURE_MESSAGE,
        names::ANN_CORDONED_BY_WINPOOL,
        names::ANN_HNS_REPAIR,
        names::ANN_HNS_REPAIR_ASKED_AT,
    ] {
        p.annotations.insert(a.into(), None);
    }
    if view.cordoned_by_winpool {
        p.unschedulable = Some(false);
    }
    p
}

/// The release patch plus winpool's taints removed (HNS, and unpatched: a
/// node the pool lets go must not stay out of service for a pool that no
/// longer rolls it), as one JSON merge patch body.
pub(crate) fn release_body(n: &NodeRecord, p: &NodePatch) -> serde_json::Value {
    let mut body = node_patch_body(p);
    let unpatched = |t: &k8s_openapi::api::core::v1::Taint| t.key == names::TAINT_UNPATCHED && t.effect == "NoSchedule";
    let without_hns = hns::taints_update(&n.taints, false);
    let kept = without_hns.as_deref().unwrap_or(&n.taints);
    if without_hns.is_some() || kept.iter().any(unpatched) {
        let new: Vec<_> = kept.iter().filter(|t| !unpatched(t)).cloned().collect();
        body["spec"]["taints"] = json!(new);
        body["metadata"]["resourceVersion"] = json!(n.resource_version);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Node, Taint};

    /// A released node keeps every taint but winpool's own.
    #[test]
    fn a_released_node_loses_winpool_s_taints_and_keeps_the_others() {
        let t = |key: &str| Taint { key: key.into(), effect: "NoSchedule".into(), value: None, time_added: None };
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "win-0", "resourceVersion": "9"},
            "spec": {"taints": [t("dedicated"), t(names::TAINT_UNPATCHED), t(names::TAINT_HNS_NOT_READY)]},
        }))
        .unwrap();
        let record = NodeRecord::from(&node);
        let body = release_body(&record, &release_patch(&record, "released"));
        assert_eq!(body["spec"]["taints"], json!([{"key": "dedicated", "effect": "NoSchedule"}]));
        assert_eq!(body["metadata"]["resourceVersion"], "9", "the whole list, behind the version it was read at");
    }
}
