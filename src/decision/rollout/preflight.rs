//! Whether a Pending node's agent has cleared its host for the revision the
//! node would be started with. Pure.
//!
//! The agent judges the pool's target revision on its host before anyone
//! touches the node (update source reachable, room on the system drive, the
//! same release, a runtime and CNI it may keep or give): a node that would
//! fail after its drain is never cordoned.

use super::round::RoundSettings;
use super::{NodeView, Preflight, PreflightVerdict, verify_config};

/// Why a Pending node is not started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreflightHeld {
    /// Its agent has not judged the revision yet (the revision is new, or
    /// the agent has not started on the node).
    Awaited,
    /// Its agent found the host cannot take the revision: the reasons.
    Blocked(String),
}

/// `None` when the node may be started: its preflight passed for this
/// revision, or it already runs the target configuration (it is not
/// cordoned then, so there is nothing to check before).
pub(super) fn held(s: &RoundSettings<'_>, n: &NodeView) -> Option<PreflightHeld> {
    if verify_config(s.spec, n).is_ok() {
        return None;
    }
    match &n.preflight {
        Some(Preflight { revision, verdict }) if *revision == s.rev => match verdict {
            PreflightVerdict::Ready => None,
            PreflightVerdict::Blocked(why) => Some(PreflightHeld::Blocked(why.clone())),
        },
        // An agent answers within seconds of the mark; one silent for a whole
        // nodeTimeout is not running, cannot read its host, or predates
        // preflight. Said as a block, so the pool lists it and says why.
        _ if s.target_marked_at.is_some_and(|at| at < s.now && s.since(Some(at)) > s.node_timeout) => {
            Some(PreflightHeld::Blocked(unanswered(s, n)))
        }
        _ => Some(PreflightHeld::Awaited),
    }
}

/// Why a node whose agent never judged the revision is held.
fn unanswered(s: &RoundSettings<'_>, n: &NodeView) -> String {
    let agent = match &n.agent_version {
        Some(v) => format!("its agent ({v}) runs but has not judged it: too old for preflight, or it cannot read the host (see its log)"),
        None => "no agent has reported on this node: is the agent pod running on it?".to_string(),
    };
    let timeout = jiff::SignedDuration::try_from(s.node_timeout).map(|d| format!("{d:#}")).unwrap_or_default();
    format!("no preflight of revision {} within {timeout} (rollout.nodeTimeout): {agent}", s.rev)
}

/// The nodes as their agents leave them once the preflight of the spec's
/// revision passed (a node with a preflight of its own keeps it).
#[cfg(test)]
pub(crate) fn cleared(spec: &crate::api::WindowsNodePoolSpec, nodes: &[NodeView]) -> Vec<NodeView> {
    let ready = Preflight { revision: crate::revision::revision_of(spec), verdict: PreflightVerdict::Ready };
    nodes.iter().map(|n| NodeView { preflight: n.preflight.clone().or_else(|| Some(ready.clone())), ..n.clone() }).collect()
}
