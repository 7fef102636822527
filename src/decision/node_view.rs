//! Reading a Node's record into the plain [`NodeView`] the decision works on. Pure.
//!
//! Everything the rollout knows about a node comes from here: labels and
//! annotations winpool and the agent wrote, and what the kubelet reports.
//! Unparseable values become `None` (and are reported by the decision), never
//! a panic.

use jiff::Timestamp;

use crate::api::names;
use crate::api::node_record::NodeRecord;
use crate::decision::agent_report::AgentReport;
use crate::decision::rollout::{HnsReadiness, NodeView, Recorded};

/// The view of `node` with its agent's `report` (see [`AgentReport::of`]).
/// The node's domain for `rollout.maxUnavailablePerZone`: the value of the
/// pool's topologyKey label (default a zone), when the pool bounds by zone.
pub fn zone_of(node: &NodeRecord, rollout: &crate::api::RolloutSpec) -> Option<String> {
    rollout.max_unavailable_per_zone.as_ref()?;
    let key = rollout.topology_key.as_deref().unwrap_or(crate::api::DEFAULT_TOPOLOGY_KEY);
    node.label(key).map(str::to_string)
}

pub fn node_view(node: &NodeRecord, report: &AgentReport, hns: HnsReadiness) -> NodeView {
    let ann = |k: &str| node.annotation(k);
    let owned = |k: &str| ann(k).map(str::to_string);
    let ts = |k: &str| ann(k).and_then(|v| v.parse::<Timestamp>().ok());
    let nonempty = |v: &str| (!v.is_empty()).then(|| v.to_string());
    // An apply result answers one start of the node: a node started since
    // (a new revision, a retry of the same one) has no result yet. A node at
    // rest names no start, and its last result stands.
    let current_start =
        report.answers_start.is_none() || ann(names::ANN_STARTED_AT).is_none_or(|s| Some(s) == report.answers_start.as_deref());
    let apply = |v: &Option<String>| v.clone().filter(|_| current_start);
    // HNS starts empty after a reboot: counts read in an earlier boot are no count of this one.
    let hns_current = report.hns_boot_id.as_deref().is_none_or(|b| b == node.boot_id);
    NodeView {
        name: node.name.clone(),
        unpatched_taint: node.taints.iter().any(|t| t.key == names::TAINT_UNPATCHED && t.effect == "NoSchedule"),
        created: node.created,
        pool_label: node.label(names::LABEL_POOL).map(str::to_string),
        revision_label: node.label(names::LABEL_REVISION).map(str::to_string),
        state_label: node.label(names::LABEL_STATE).map(str::to_string),
        state: Recorded::parse(ann(names::ANN_STATE)),
        state_since: ts(names::ANN_STATE_SINCE),
        started_at: ts(names::ANN_STARTED_AT),
        target_revision: owned(names::ANN_TARGET_REVISION),
        drained_revision: owned(names::ANN_DRAINED_REVISION),
        cordoned_by_winpool: ann(names::ANN_CORDONED_BY_WINPOOL) == Some("true"),
        hotpatch: ann(names::ANN_HOTPATCH) == Some("true"),
        undo: owned(names::ANN_UNDO),
        unschedulable: node.unschedulable,
        ready: node.ready,
        kernel_version: nonempty(&node.kernel_version),
        runtime_version: nonempty(&node.runtime_version),
        boot_id: nonempty(&node.boot_id),
        boot_id_at_start: owned(names::ANN_BOOT_ID),
        applied_revision: apply(&report.applied_revision),
        apply_status: report.apply_status.clone().filter(|_| current_start),
        apply_message: apply(&report.apply_message),
        apply_heartbeat: apply(&report.heartbeat).and_then(|v| v.parse::<Timestamp>().ok()),
        apply_no_reboot: current_start && report.no_reboot,
        apply_host_build: apply(&report.host_build),
        csi_proxy_version: report.csi_proxy_version.clone(),
        cni_mode: report.cni_mode.clone(),
        failure_reason: owned(names::ANN_FAILURE_REASON),
        failure_message: owned(names::ANN_FAILURE_MESSAGE),
        hns,
        pods_to_evict: 0,
        drain_block: None,
        drain_held: None,
        hook_runs: Vec::new(),
        drain_blocked_by: owned(names::ANN_DRAIN_BLOCKED_BY),
        drain_blocked_since: ts(names::ANN_DRAIN_BLOCKED_SINCE),
        held_by_label: node.label(names::LABEL_HOLD) == Some("true"),
        zone: None,
        hns_reported: report.hns_load_balancers.is_some() && report.hns_endpoints.is_some(),
        hns_load_balancers: report.hns_load_balancers.filter(|_| hns_current),
        hns_endpoints: report.hns_endpoints.filter(|_| hns_current),
        resource_version: node.resource_version.clone(),
        runtime_service: report.runtime_service.clone(),
        csi_proxy_host: report.csi_proxy_host.clone().filter(|v| !v.is_empty()),
        csi_proxy_host_label: node.label(names::LABEL_CSI_PROXY_HOST).map(str::to_string),
        preflight: report.preflight.clone(),
        staging: report.staging.clone(),
        agent_version: report.agent_version.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nodes_zone_is_its_topology_label_when_the_pool_bounds_by_zone() {
        let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({"metadata": {"name": "n",
            "labels": {"topology.kubernetes.io/zone": "eastus-1", "rack": "r7"}}}))
        .unwrap();
        let record = NodeRecord::from(&node);
        let rollout = |y: &str| -> crate::api::RolloutSpec { serde_saphyr::from_str(y).unwrap() };
        assert_eq!(zone_of(&record, &rollout("{}")), None, "no per-zone bound: no zone");
        assert_eq!(zone_of(&record, &rollout("{maxUnavailablePerZone: 1}")).as_deref(), Some("eastus-1"));
        assert_eq!(zone_of(&record, &rollout("{maxUnavailablePerZone: 1, topologyKey: rack}")).as_deref(), Some("r7"));
        assert_eq!(zone_of(&record, &rollout("{maxUnavailablePerZone: 1, topologyKey: row}")), None);
    }
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
        let record = NodeRecord::from(&n);
        let report = AgentReport {
            applied_revision: Some("r1".into()),
            apply_status: Some(crate::decision::agent_report::Reported::Known(crate::api::report::ApplyStatus::Succeeded)),
            answers_start: Some("garbage".into()),
            ..Default::default()
        };
        let v = node_view(&record, &report, HnsReadiness::Ready);
        assert_eq!(v.name, "win-1");
        assert_eq!(v.pool_label.as_deref(), Some("p"));
        assert_eq!(v.revision_label.as_deref(), Some("r1"));
        assert_eq!(v.state, Recorded::State(crate::decision::rollout::NodeState::Applying));
        assert_eq!(v.state_since, Some("2026-11-29T12:00:00Z".parse().unwrap()));
        assert_eq!(v.started_at, None, "garbage timestamps read as absent");
        assert!(v.cordoned_by_winpool && v.unschedulable && v.ready);
        assert_eq!(v.kernel_version.as_deref(), Some("10.0.20348.2762"));
        assert_eq!(v.runtime_version.as_deref(), Some("containerd://1.7.22"));
        assert_eq!(v.apply(), Some(crate::api::report::ApplyStatus::Succeeded));
        // The node was started again since the result: it answers no start the Node names.
        let earlier = AgentReport { answers_start: Some("2026-11-29T11:00:00Z".into()), ..report };
        let v = node_view(&record, &earlier, HnsReadiness::Ready);
        assert_eq!((v.apply(), v.applied_revision), (None, None), "a result for an earlier start is no result for this one");
    }

    #[test]
    fn an_empty_node_is_not_ready_and_has_nothing() {
        let v = node_view(&(&Node::default()).into(), &AgentReport::default(), HnsReadiness::Unknown);
        assert!(!v.ready && !v.unschedulable && !v.cordoned_by_winpool);
        assert_eq!(v.kernel_version, None);
    }
}
