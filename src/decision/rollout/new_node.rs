//! New nodes patched before they work: a node that joins a pool below its
//! patch level carries the NoSchedule taint `winpool.dev/unpatched` until it
//! is Updated, so no pod lands on a host that is about to be drained and
//! rebooted. Node images may register with the taint, which closes the moment
//! between the node's registration and winpool's first look; winpool adds it
//! to a node that joined without it. Such a node is out of service, so it is
//! started first and costs the rollout no capacity. Pure.

use jiff::Timestamp;

use super::{NodeState, NodeView, kernel_satisfies};
use crate::versions::WindowsBuild;

/// Whether `n`, in `state` once this round lands, should carry the taint:
/// `Some(true)` to add it, `Some(false)` to remove it, `None` to leave the
/// node's taints as they are. A node counts as new when it carries the taint
/// already or its Node was created after the pool, and winpool never started it.
pub fn unpatched_taint(n: &NodeView, state: NodeState, target: Option<&WindowsBuild>, pool_created: Option<Timestamp>) -> Option<bool> {
    let joined_after = matches!((n.created, pool_created), (Some(node), Some(pool)) if node > pool);
    match state {
        NodeState::Updated => n.unpatched_taint.then_some(false),
        NodeState::Pending if !n.unpatched_taint && n.started_at.is_none() && joined_after && !kernel_satisfies(n, target) => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Option<Timestamp> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn a_node_that_joined_below_the_patch_level_is_tainted_until_it_is_updated() {
        let target: WindowsBuild = "10.0.20348.2762".parse().unwrap();
        let pool = at("2026-12-01T00:00:00Z");
        let joined = NodeView {
            name: "new".into(),
            kernel_version: Some("10.0.20348.2700".into()),
            created: at("2026-12-04T00:00:00Z"),
            ..Default::default()
        };
        assert_eq!(unpatched_taint(&joined, NodeState::Pending, Some(&target), pool), Some(true));
        let tainted = NodeView { unpatched_taint: true, ..joined.clone() };
        assert_eq!(unpatched_taint(&tainted, NodeState::Pending, Some(&target), pool), None, "already tainted");
        assert_eq!(unpatched_taint(&tainted, NodeState::Applying, Some(&target), pool), None, "kept while it updates");
        assert_eq!(unpatched_taint(&tainted, NodeState::Updated, Some(&target), pool), Some(false), "removed once Updated");
        assert_eq!(unpatched_taint(&joined, NodeState::Updated, Some(&target), pool), None);
        // Nodes that were there before the pool, at the level already, or started once are left alone.
        let old = NodeView { created: at("2026-11-01T00:00:00Z"), ..joined.clone() };
        assert_eq!(unpatched_taint(&old, NodeState::Pending, Some(&target), pool), None);
        let patched = NodeView { kernel_version: Some("10.0.20348.2762".into()), ..joined.clone() };
        assert_eq!(unpatched_taint(&patched, NodeState::Pending, Some(&target), pool), None);
        let started = NodeView { started_at: at("2026-12-04T00:01:00Z"), ..joined };
        assert_eq!(unpatched_taint(&started, NodeState::Pending, Some(&target), pool), None);
    }
}
