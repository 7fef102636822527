//! `kubectl winpool retry <node>`: what OPERATIONS.md documents as the retry of
//! a Failed node. The operator keeps a Failed node Failed while its recorded
//! `winpool.dev/state` says so for the pool's revision (`rollout::current_state`);
//! without it the node is Pending and starts again when a slot is free, and
//! its start clears the failure annotations and the agent's report, so the
//! agent applies afresh. So the retry removes `winpool.dev/state` (and its
//! `state-since`) in one JSON patch that first tests the state is still
//! `Failed`: a node the operator moved meanwhile is not touched.

use serde_json::{Value, json};

use crate::api::{WindowsNodePool, names};
use crate::decision::revision::revision_of;
use crate::decision::rollout::{NodeState, NodeView, current_state};

/// Why `node` may not be retried, if it may not. `pool` is the pool its
/// `winpool.dev/pool` label names, if that pool exists.
pub fn refusal(view: &NodeView, pool: Option<&WindowsNodePool>) -> Option<String> {
    let node = &view.name;
    let Some(pool_name) = view.pool_label.as_deref() else {
        return Some(format!("node {node} is not in a winpool pool (it has no {} label)", names::LABEL_POOL));
    };
    let Some(pool) = pool else {
        return Some(format!(
            "node {node} is not in a winpool pool: its {} label names pool {pool_name}, which does not exist",
            names::LABEL_POOL
        ));
    };
    let pool = crate::decision::patch_policy::as_resolved(pool);
    match current_state(view, &revision_of(&pool.spec), &pool.spec) {
        NodeState::Failed => None,
        state => Some(format!("node {node} is {} in pool {pool_name}, not Failed: only a Failed node can be retried", state.as_str())),
    }
}

/// A JSON pointer to a metadata key (`/` is `~1`, `~` is `~0`).
fn pointer_in(map: &str, key: &str) -> String {
    format!("/metadata/{map}/{}", key.replace('~', "~0").replace('/', "~1"))
}

fn pointer(key: &str) -> String {
    pointer_in("annotations", key)
}

/// The JSON patch of the retry: test that the node is still Failed, then
/// remove its state (and state-since and the state label, when it has them).
pub fn patch(view: &NodeView) -> Value {
    let mut ops = vec![
        json!({"op": "test", "path": pointer(names::ANN_STATE), "value": NodeState::Failed.as_str()}),
        json!({"op": "remove", "path": pointer(names::ANN_STATE)}),
    ];
    if view.state_since.is_some() {
        ops.push(json!({"op": "remove", "path": pointer(names::ANN_STATE_SINCE)}));
    }
    if view.state_label.is_some() {
        ops.push(json!({"op": "remove", "path": pointer_in("labels", names::LABEL_STATE)}));
    }
    Value::Array(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> WindowsNodePool {
        crate::test_builders::pool("p").uid(None).build()
    }

    fn failed_node(pool: &WindowsNodePool) -> NodeView {
        NodeView {
            name: "win-1".into(),
            pool_label: Some("p".into()),
            state: crate::decision::rollout::NodeState::Failed.into(),
            state_since: Some("2026-12-01T10:00:00Z".parse().unwrap()),
            state_label: Some("Failed".into()),
            target_revision: Some(revision_of(&pool.spec)),
            failure_reason: Some("ApplyFailed".into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_failed_node_of_the_pools_revision_may_be_retried() {
        let p = pool();
        assert_eq!(refusal(&failed_node(&p), Some(&p)), None);
    }

    #[test]
    fn a_node_that_is_not_failed_is_refused_naming_its_state() {
        let p = pool();
        for state in ["Applying", "Updated", "Pending"] {
            let mut v = failed_node(&p);
            v.state = crate::decision::rollout::Recorded::parse(Some(state));
            let msg = refusal(&v, Some(&p)).expect("refused");
            // An Updated annotation without the revision on the node is Pending for the operator.
            let shown = if state == "Applying" { "Applying" } else { "Pending" };
            assert_eq!(msg, format!("node win-1 is {shown} in pool p, not Failed: only a Failed node can be retried"));
        }
    }

    #[test]
    fn a_node_failed_for_an_older_revision_is_pending_already_and_refused() {
        let p = pool();
        let mut v = failed_node(&p);
        v.target_revision = Some("old".into());
        assert!(refusal(&v, Some(&p)).unwrap().contains("is Pending"));
    }

    #[test]
    fn a_node_outside_any_pool_is_refused() {
        let p = pool();
        let mut v = failed_node(&p);
        v.pool_label = None;
        assert_eq!(refusal(&v, Some(&p)).unwrap(), "node win-1 is not in a winpool pool (it has no winpool.dev/pool label)");
        let v = failed_node(&p);
        assert_eq!(
            refusal(&v, None).unwrap(),
            "node win-1 is not in a winpool pool: its winpool.dev/pool label names pool p, which does not exist"
        );
    }

    #[test]
    fn the_patch_tests_the_state_then_removes_it_and_its_time() {
        let p = pool();
        let v = failed_node(&p);
        assert_eq!(
            patch(&v),
            json!([
                {"op": "test", "path": "/metadata/annotations/winpool.dev~1state", "value": "Failed"},
                {"op": "remove", "path": "/metadata/annotations/winpool.dev~1state"},
                {"op": "remove", "path": "/metadata/annotations/winpool.dev~1state-since"},
                {"op": "remove", "path": "/metadata/labels/winpool.dev~1state"},
            ])
        );
        let mut v = v;
        v.state_since = None;
        v.state_label = None;
        assert_eq!(patch(&v).as_array().unwrap().len(), 2, "no state-since, nothing to remove");
    }
}
