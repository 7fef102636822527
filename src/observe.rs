//! Reading a Node's record into the plain [`NodeView`] the decision works on. Pure.
//!
//! Everything the rollout knows about a node comes from here: labels and
//! annotations winpool and the agent wrote, and what the kubelet reports.
//! Unparseable values become `None` (and are reported by the decision), never
//! a panic.

use jiff::Timestamp;

use crate::api::names;
use crate::node_record::NodeRecord;
use crate::rollout::{HnsReadiness, NodeView};

pub fn node_view(node: &NodeRecord, hns: HnsReadiness) -> NodeView {
    let ann = |k: &str| node.annotation(k);
    let owned = |k: &str| ann(k).map(str::to_string);
    let ts = |k: &str| ann(k).and_then(|v| v.parse::<Timestamp>().ok());
    let nonempty = |v: &str| (!v.is_empty()).then(|| v.to_string());
    NodeView {
        name: node.name.clone(),
        pool_label: node.label(names::LABEL_POOL).map(str::to_string),
        revision_label: node.label(names::LABEL_REVISION).map(str::to_string),
        state_label: node.label(names::LABEL_STATE).map(str::to_string),
        state: owned(names::ANN_STATE),
        state_since: ts(names::ANN_STATE_SINCE),
        started_at: ts(names::ANN_STARTED_AT),
        target_revision: owned(names::ANN_TARGET_REVISION),
        drained_revision: owned(names::ANN_DRAINED_REVISION),
        cordoned_by_winpool: ann(names::ANN_CORDONED_BY_WINPOOL) == Some("true"),
        unschedulable: node.unschedulable,
        ready: node.ready,
        kernel_version: nonempty(&node.kernel_version),
        runtime_version: nonempty(&node.runtime_version),
        boot_id: nonempty(&node.boot_id),
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
        hns_reported: ann(names::ANN_HNS_LOAD_BALANCERS).is_some() && ann(names::ANN_HNS_ENDPOINTS).is_some(),
        resource_version: node.resource_version.clone(),
        runtime_service: owned(names::ANN_RUNTIME_SERVICE),
        csi_proxy_host: owned(names::ANN_CSI_PROXY_HOST).filter(|v| !v.is_empty()),
        csi_proxy_host_label: node.label(names::LABEL_CSI_PROXY_HOST).map(str::to_string),
        preflight: crate::rollout::Preflight::parse(ann(names::ANN_PREFLIGHT), ann(names::ANN_PREFLIGHT_REVISION)),
        agent_version: owned(names::ANN_AGENT_VERSION),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo};

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
        let v = node_view(&(&n).into(), HnsReadiness::Ready);
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
    }

    #[test]
    fn an_empty_node_is_not_ready_and_has_nothing() {
        let v = node_view(&(&Node::default()).into(), HnsReadiness::Unknown);
        assert!(!v.ready && !v.unschedulable && !v.cordoned_by_winpool);
        assert_eq!(v.kernel_version, None);
    }
}
