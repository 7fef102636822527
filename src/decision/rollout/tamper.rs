//! Revision labels winpool did not set. The label is the agent's go-signal
//! only together with a start winpool recorded (the agent checks both), but a
//! label someone else set still misleads whoever reads the Node, and a
//! label-syncing controller that keeps setting it is worth a person's look:
//! each one is put back and reported.

use super::{NodeState, NodeView};
use crate::api::report::ApplyStatus;

/// A member's revision label winpool did not set: what was found, and the
/// label winpool last set, which goes back on (`None`: no label).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tampering {
    pub found: String,
    pub restored: Option<String>,
}

/// Whether `n`'s revision label is one winpool set. winpool moves the label
/// only when a node enters Applying, to the target it recorded on the node
/// (`winpool.dev/target-revision`), and the agent then reports on that
/// revision; so a label is winpool's if it names the recorded target or the
/// revision the agent last finished applying (on a node at rest, the revision
/// it was rolled to). An agent's report still in progress proves nothing: an
/// agent older than 0.3 acted on a label alone. While a node drains, its label is still the revision it ran
/// before, whatever a retry left in its record: it is not judged.
pub(super) fn tampering(n: &NodeView) -> Option<Tampering> {
    let found = n.revision_label.as_deref()?;
    let state = n.state.state();
    let target = n.target_revision.as_deref();
    let finished = matches!(n.apply(), Some(ApplyStatus::Succeeded | ApplyStatus::Failed));
    let applied = n.applied_revision.as_deref().filter(|_| finished);
    let (ours, restored) = match state {
        Some(NodeState::Draining) => return None,
        // The agent works on the host now: only the target it was started for.
        Some(NodeState::Applying | NodeState::Verifying) => (target == Some(found), target),
        _ => (target == Some(found) || applied == Some(found), applied),
    };
    (!ours).then(|| Tampering { found: found.to_string(), restored: restored.map(str::to_string) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::agent_report::Reported;

    fn node(state: Option<NodeState>, label: &str, target: Option<&str>, applied: Option<&str>) -> NodeView {
        NodeView {
            name: "n".into(),
            revision_label: Some(label.into()),
            state: state.map(Into::into).unwrap_or_default(),
            target_revision: target.map(Into::into),
            applied_revision: applied.map(Into::into),
            apply_status: applied.map(|_| Reported::Known(ApplyStatus::Succeeded)),
            ..Default::default()
        }
    }

    fn restored(t: Option<Tampering>) -> Option<Option<String>> {
        t.map(|t| t.restored)
    }

    #[test]
    fn a_label_on_a_node_winpool_never_started_is_removed() {
        assert_eq!(restored(tampering(&node(None, "r2", None, None))), Some(None));
        assert_eq!(restored(tampering(&node(Some(NodeState::Pending), "r2", None, None))), Some(None));
    }

    #[test]
    fn a_label_moved_on_a_node_at_rest_goes_back_to_the_revision_it_runs() {
        for state in [None, Some(NodeState::Pending), Some(NodeState::Updated), Some(NodeState::Failed)] {
            assert_eq!(restored(tampering(&node(state, "r2", None, Some("r1")))), Some(Some("r1".into())), "{state:?}");
        }
    }

    #[test]
    fn a_label_moved_while_the_agent_works_goes_back_to_the_recorded_target() {
        for state in [NodeState::Applying, NodeState::Verifying] {
            // The agent's report of the older revision does not make that one ours now.
            assert_eq!(restored(tampering(&node(Some(state), "r1", Some("r2"), Some("r1")))), Some(Some("r2".into())), "{state:?}");
        }
    }

    #[test]
    fn labels_winpool_set_are_left_alone() {
        // Rolled to r1 and at rest; a new revision pending.
        assert_eq!(tampering(&node(Some(NodeState::Updated), "r1", None, Some("r1"))), None);
        // Started for r2 and labelled: the agent has not answered yet.
        assert_eq!(tampering(&node(Some(NodeState::Applying), "r2", Some("r2"), None)), None);
        // Failed (or retried by a person) while the agent had not answered.
        assert_eq!(tampering(&node(Some(NodeState::Failed), "r2", Some("r2"), None)), None);
        assert_eq!(tampering(&node(None, "r2", Some("r2"), None)), None);
        // Draining keeps the label of the revision it ran, whatever it is.
        assert_eq!(tampering(&node(Some(NodeState::Draining), "r0", Some("r2"), Some("r1"))), None);
        // An agent that acted on the label by itself (older than 0.3) does not make it winpool's.
        let acting = NodeView { apply_status: Some(Reported::Known(ApplyStatus::Applying)), ..node(None, "r2", None, Some("r2")) };
        assert_eq!(restored(tampering(&acting)), Some(None));
        // No label at all is not a label someone set.
        assert_eq!(tampering(&NodeView { revision_label: None, ..node(None, "x", None, None) }), None);
    }
}
