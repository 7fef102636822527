//! Pod gates, pure: the list request and what the pods found mean.

use std::collections::BTreeMap;

use super::{Failure, Seen};
use crate::api::{GateScope, HealthGate};

/// Pods that have finished hold nothing (kured's blocking-pod check skips them too).
pub const FIELD_SELECTOR: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// A matching pod as the gate needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundPod {
    pub namespace: String,
    pub name: String,
    /// Where it is scheduled; None while it waits for the scheduler.
    pub node: Option<String>,
}

/// The gate's label selector as a list request's `labelSelector`.
pub fn label_selector(gate: &HealthGate) -> Result<String, Failure> {
    let selector = gate.selector.clone().unwrap_or_default();
    let s: kube::core::Selector =
        selector.try_into().map_err(|e| Failure::InvalidSpec(format!("the gate's selector is not a valid selector: {e}")))?;
    if s.selects_all() {
        // `selector: {}` passes the CRD; a gate on every pod is a mistake.
        return Err(Failure::InvalidSpec("the gate's selector selects every pod; name the pods that must hold the rollout".into()));
    }
    Ok(s.to_string())
}

/// What the gate sees in the pods found: any of them (scope Cluster), or
/// the nodes they run on (scope Node; a pod not scheduled yet holds no node).
pub fn seen(scope: GateScope, pods: &[FoundPod]) -> Seen {
    match scope {
        GateScope::Cluster => {
            let mut names: Vec<String> = pods.iter().map(|p| format!("{}/{}", p.namespace, p.name)).collect();
            names.sort();
            Seen::Pods(names)
        }
        GateScope::Node => {
            let mut on: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for p in pods {
                if let Some(node) = &p.node {
                    on.entry(node.clone()).or_default().push(format!("{}/{}", p.namespace, p.name));
                }
            }
            on.values_mut().for_each(|v| v.sort());
            if on.is_empty() { Seen::Open } else { Seen::PodsOnNodes(on) }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

    use super::*;

    fn pod(ns: &str, name: &str, node: Option<&str>) -> FoundPod {
        FoundPod { namespace: ns.into(), name: name.into(), node: node.map(str::to_string) }
    }

    fn gate(selector: LabelSelector) -> HealthGate {
        serde_json::from_value(serde_json::json!({"name": "g", "kind": "Pods", "selector": selector})).unwrap()
    }

    #[test]
    fn pods_close_the_gate_for_the_cluster_or_for_their_nodes() {
        let pods =
            [pod("b", "job", Some("win-2")), pod("a", "backup", Some("win-1")), pod("a", "waiting", None), pod("a", "x", Some("win-1"))];
        assert_eq!(seen(GateScope::Cluster, &pods), Seen::Pods(vec!["a/backup".into(), "a/waiting".into(), "a/x".into(), "b/job".into()]));
        assert_eq!(seen(GateScope::Cluster, &[]), Seen::Pods(vec![]));
        let want: BTreeMap<String, Vec<String>> =
            [("win-1".to_string(), vec!["a/backup".to_string(), "a/x".to_string()]), ("win-2".to_string(), vec!["b/job".to_string()])]
                .into();
        assert_eq!(seen(GateScope::Node, &pods), Seen::PodsOnNodes(want));
        assert_eq!(seen(GateScope::Node, &[pod("a", "unscheduled", None)]), Seen::Open, "an unscheduled pod holds no node");
        assert_eq!(seen(GateScope::Node, &[]), Seen::Open);
    }

    #[test]
    fn the_selector_becomes_a_label_selector_and_an_empty_one_is_refused() {
        let by_labels = LabelSelector { match_labels: Some([("app".to_string(), "backup".to_string())].into()), match_expressions: None };
        assert_eq!(label_selector(&gate(by_labels)).unwrap(), "app=backup");
        let by_expr = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "In".into(),
                values: Some(vec!["batch".into(), "db".into()]),
            }]),
        };
        assert_eq!(label_selector(&gate(by_expr)).unwrap(), "tier in (batch,db)");
        assert!(matches!(label_selector(&gate(LabelSelector::default())), Err(Failure::InvalidSpec(_))));
        let bad = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement { key: "a".into(), operator: "Near".into(), values: None }]),
        };
        assert!(matches!(label_selector(&gate(bad)), Err(Failure::InvalidSpec(_))));
    }
}
