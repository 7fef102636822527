//! New nodes patched before they work: a node that joins a pool below its
//! patch level carries the NoSchedule taint `winpool.dev/unpatched` until it
//! is Updated, so no pod lands on a host that is about to be drained and
//! rebooted. Node images may register with the taint, which closes the moment
//! between the node's registration and winpool's first look; winpool adds it
//! to a node that joined without it. Such a node is out of service, so it is
//! started first and costs the rollout no capacity. Pure.
//!
//! "Joined" means: its Node was created after the pool's target was set (the
//! revision ConfigMap marked). A node that served before this month's patch
//! level was set is rolled the normal way, drained in its turn: tainting the
//! fleet each Patch Tuesday would take every pending node out of service.

use jiff::Timestamp;

use super::{NodeState, NodeView, kernel_satisfies};
use crate::decision::versions::WindowsBuild;

/// Whether `n`, in `state` once this round lands, should carry the taint:
/// `Some(true)` to add it, `Some(false)` to remove it, `None` to leave the
/// node's taints as they are. A node counts as new when its Node was created
/// after `target_since` (when the pool's target revision was marked; unknown:
/// none is new).
pub fn unpatched_taint(n: &NodeView, state: NodeState, target: Option<&WindowsBuild>, target_since: Option<Timestamp>) -> Option<bool> {
    let joined_after = matches!((n.created, target_since), (Some(node), Some(since)) if node > since);
    match state {
        NodeState::Updated => n.unpatched_taint.then_some(false),
        NodeState::Pending if !n.unpatched_taint && joined_after && !kernel_satisfies(n, target) => Some(true),
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
        let pool = at("2026-12-01T00:00:00Z"); // when this month's target was marked // this month's target was marked
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
        // Nodes that served before this patch level was set, or run it already, are left alone:
        // next month, every node this month's joined is older than the new target.
        let old = NodeView { created: at("2026-11-01T00:00:00Z"), ..joined.clone() };
        assert_eq!(unpatched_taint(&old, NodeState::Pending, Some(&target), pool), None);
        let next_month = at("2027-01-13T00:00:00Z");
        assert_eq!(unpatched_taint(&joined, NodeState::Pending, Some(&target), next_month), None);
        let patched = NodeView { kernel_version: Some("10.0.20348.2762".into()), ..joined.clone() };
        assert_eq!(unpatched_taint(&patched, NodeState::Pending, Some(&target), pool), None);
        assert_eq!(unpatched_taint(&joined, NodeState::Pending, Some(&target), None), None, "a target not marked yet: none is new");
    }
}
