//! Reading a Node into the plain [`NodeView`] the decision works on. Pure.
//!
//! Everything the rollout knows about a node comes from here: labels and
//! annotations winpool and the agent wrote, and what the kubelet reports.
//! Unparseable values become `None` (and are reported by the decision), never
//! a panic.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;

use crate::api::names;
use crate::rollout::{HnsReadiness, NodeView};

fn ann<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

pub fn is_ready(node: &Node) -> bool {
    node.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub fn node_view(node: &Node, hns: HnsReadiness) -> NodeView {
    let owned = |k: &str| ann(node, k).map(str::to_string);
    let ts = |k: &str| ann(node, k).and_then(|v| v.parse::<Timestamp>().ok());
    let info = node.status.as_ref().and_then(|s| s.node_info.as_ref());
    NodeView {
        name: node.metadata.name.clone().unwrap_or_default(),
        pool_label: label(node, names::LABEL_POOL).map(str::to_string),
        revision_label: label(node, names::LABEL_REVISION).map(str::to_string),
        state_label: label(node, names::LABEL_STATE).map(str::to_string),
        state: owned(names::ANN_STATE),
        state_since: ts(names::ANN_STATE_SINCE),
        started_at: ts(names::ANN_STARTED_AT),
        target_revision: owned(names::ANN_TARGET_REVISION),
        drained_revision: owned(names::ANN_DRAINED_REVISION),
        cordoned_by_winpool: ann(node, names::ANN_CORDONED_BY_WINPOOL) == Some("true"),
        unschedulable: node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false),
        ready: is_ready(node),
        kernel_version: info.map(|i| i.kernel_version.clone()).filter(|v| !v.is_empty()),
        runtime_version: info.map(|i| i.container_runtime_version.clone()).filter(|v| !v.is_empty()),
        boot_id: info.map(|i| i.boot_id.clone()).filter(|v| !v.is_empty()),
        boot_id_at_start: owned(names::ANN_BOOT_ID),
        applied_revision: owned(names::ANN_APPLIED_REVISION),
        apply_status: owned(names::ANN_APPLY_STATUS),
        apply_message: owned(names::ANN_APPLY_MESSAGE),
        csi_proxy_version: owned(names::ANN_CSI_PROXY_VERSION),
        cni_mode: owned(names::ANN_CNI_MODE),
        failure_reason: owned(names::ANN_FAILURE_REASON),
        failure_message: owned(names::ANN_FAILURE_MESSAGE),
        hns,
        pods_to_evict: 0,
        drain_block: None,
        drain_blocked_by: owned(names::ANN_DRAIN_BLOCKED_BY),
        drain_blocked_since: ts(names::ANN_DRAIN_BLOCKED_SINCE),
        hns_reported: ann(node, names::ANN_HNS_LOAD_BALANCERS).is_some() && ann(node, names::ANN_HNS_ENDPOINTS).is_some(),
    }
}

/// A watched Node with what winpool never reads removed, so 5,000 nodes stay small in memory.
/// What stays: name, labels, winpool's and kwok's annotations, resourceVersion,
/// spec.unschedulable and taints, the Ready and WindowsHNSReady conditions, the
/// kernel and runtime versions and the boot ID.
pub fn strip(node: &mut Node) {
    let meta = &mut node.metadata;
    meta.managed_fields = None;
    meta.owner_references = None;
    meta.finalizers = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.retain(|k, _| k.starts_with("winpool.dev/") || k.starts_with("kwok.x-k8s.io/"));
    }
    if let Some(spec) = node.spec.as_mut() {
        spec.pod_cidr = None;
        spec.pod_cidrs = None;
        spec.provider_id = None;
        spec.config_source = None;
    }
    if let Some(s) = node.status.as_mut() {
        s.images = None;
        s.volumes_attached = None;
        s.volumes_in_use = None;
        s.config = None;
        s.features = None;
        s.runtime_handlers = None;
        s.addresses = None;
        s.allocatable = None;
        s.capacity = None;
        s.daemon_endpoints = None;
        s.declared_features = None;
        s.phase = None;
        if let Some(c) = s.conditions.as_mut() {
            c.retain(|c| c.type_ == "Ready" || c.type_ == names::NODE_CONDITION_HNS_READY);
            // Two of a kubelet's six or more: the rest of the capacity was 0.6 KiB per cached node.
            c.shrink_to_fit();
        }
        if let Some(i) = s.node_info.as_mut() {
            *i = k8s_openapi::api::core::v1::NodeSystemInfo {
                kernel_version: std::mem::take(&mut i.kernel_version),
                container_runtime_version: std::mem::take(&mut i.container_runtime_version),
                boot_id: std::mem::take(&mut i.boot_id),
                ..Default::default()
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo};

    #[test]
    fn a_node_reads_into_a_view() {
        let mut n = Node::default();
        n.metadata.name = Some("win-1".into());
        n.metadata.labels =
            Some([("winpool.dev/pool".to_string(), "p".to_string()), ("winpool.dev/revision".to_string(), "r1".to_string())].into());
        n.metadata.annotations = Some(
            [
                ("winpool.dev/state", "Applying"),
                ("winpool.dev/state-since", "2026-11-29T12:00:00Z"),
                ("winpool.dev/started-at", "garbage"),
                ("winpool.dev/cordoned", "true"),
                ("winpool.dev/applied-revision", "r1"),
                ("winpool.dev/apply-status", "Succeeded"),
                ("unrelated", "x"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
        n.spec = Some(NodeSpec { unschedulable: Some(true), ..Default::default() });
        n.status = Some(NodeStatus {
            conditions: Some(vec![NodeCondition { type_: "Ready".into(), status: "True".into(), ..Default::default() }]),
            node_info: Some(NodeSystemInfo {
                kernel_version: "10.0.20348.2762".into(),
                container_runtime_version: "containerd://1.7.22".into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        let v = node_view(&n, HnsReadiness::Ready);
        assert_eq!(v.name, "win-1");
        assert_eq!(v.pool_label.as_deref(), Some("p"));
        assert_eq!(v.revision_label.as_deref(), Some("r1"));
        assert_eq!(v.state.as_deref(), Some("Applying"));
        assert_eq!(v.state_since, Some("2026-11-29T12:00:00Z".parse().unwrap()));
        assert_eq!(v.started_at, None, "garbage timestamps read as absent");
        assert!(v.cordoned_by_winpool && v.unschedulable && v.ready);
        assert_eq!(v.kernel_version.as_deref(), Some("10.0.20348.2762"));
        assert_eq!(v.runtime_version.as_deref(), Some("containerd://1.7.22"));
        assert_eq!(v.apply_status.as_deref(), Some("Succeeded"));

        strip(&mut n);
        let a = n.metadata.annotations.unwrap();
        assert!(a.contains_key("winpool.dev/state") && !a.contains_key("unrelated"));
    }

    #[test]
    fn an_empty_node_is_not_ready_and_has_nothing() {
        let v = node_view(&Node::default(), HnsReadiness::Unknown);
        assert!(!v.ready && !v.unschedulable && !v.cordoned_by_winpool);
        assert_eq!(v.kernel_version, None);
    }
}
