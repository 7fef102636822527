//! Whether a Pending node's agent has cleared its host for the revision the
//! node would be started with. Pure.
//!
//! The agent judges the pool's target revision on its host before anyone
//! touches the node (update source reachable, room on the system drive, the
//! same release, a runtime and CNI it may keep or give): a node that would
//! fail after its drain is never cordoned.

use super::settings::RoundSettings;
use super::{NodeView, Preflight, PreflightVerdict, Staging, StagingState, verify_config};

/// Why a Pending node is not started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreflightHeld {
    /// Its agent has not judged the revision yet (the revision is new, or
    /// the agent has not started on the node).
    Awaited,
    /// Its agent found the host cannot take the revision: the reasons.
    Blocked(String),
    /// Its agent cleared it and is downloading the update, which the pool
    /// asks to be on the node before its drain (`rollout.staging`).
    Staging,
}

/// `None` when the node may be started: its preflight passed for this
/// revision (and, where the pool stages, its update is on the node), or it
/// already runs the target configuration (it is not cordoned then, so there
/// is nothing to check before).
pub(super) fn held(s: &RoundSettings<'_>, n: &NodeView) -> Option<PreflightHeld> {
    if verify_config(s.spec, n).is_ok() {
        return None;
    }
    match &n.preflight {
        Some(Preflight { revision, verdict }) if *revision == s.rev => match verdict {
            PreflightVerdict::Ready if s.spec.rollout.staging => staging_held(s, n),
            PreflightVerdict::Ready => None,
            PreflightVerdict::Blocked(why) => Some(PreflightHeld::Blocked(why.clone())),
        },
        // An agent answers within seconds of the mark; one silent for a whole
        // nodeTimeout is not running, cannot read its host, or predates
        // preflight. Said as a block, so the pool lists it and says why.
        _ if s.target_marked_at.is_some_and(|at| at < s.now && s.since(Some(at)) > s.rules.node_timeout) => {
            Some(PreflightHeld::Blocked(unanswered(s, n)))
        }
        _ => Some(PreflightHeld::Awaited),
    }
}

/// A cleared node of a pool that stages: held until its agent says the
/// update is on the node. A failed download holds it, named (the agent
/// tries again): the drain would only meet the same failure.
fn staging_held(s: &RoundSettings<'_>, n: &NodeView) -> Option<PreflightHeld> {
    match &n.staging {
        Some(Staging { revision, state, .. }) if *revision == s.rev => match state {
            StagingState::Staged => None,
            StagingState::Running => Some(PreflightHeld::Staging),
            StagingState::Failed(why) => {
                Some(PreflightHeld::Blocked(format!("the download of its update before the drain failed (rollout.staging): {why}")))
            }
        },
        // The agent stages as soon as it cleared the node; one that does not
        // within a whole nodeTimeout of the mark predates staging or was
        // set up without it.
        _ if s.target_marked_at.is_some_and(|at| at < s.now && s.since(Some(at)) > s.rules.node_timeout) => {
            Some(PreflightHeld::Blocked(format!(
                "its agent cleared revision {} but has not staged its update: is the agent older than rollout.staging, or its DaemonSet not rolled yet? (rollout.staging: false starts nodes without it)",
                s.rev
            )))
        }
        _ => Some(PreflightHeld::Staging),
    }
}

/// Why a node whose agent never judged the revision is held.
fn unanswered(s: &RoundSettings<'_>, n: &NodeView) -> String {
    let agent = match &n.agent_version {
        Some(v) => format!("its agent ({v}) runs but has not judged it: too old for preflight, or it cannot read the host (see its log)"),
        None => "no agent has reported on this node: is the agent pod running on it?".to_string(),
    };
    let timeout = jiff::SignedDuration::try_from(s.rules.node_timeout).map(|d| format!("{d:#}")).unwrap_or_default();
    format!("no preflight of revision {} within {timeout} (rollout.nodeTimeout): {agent}", s.rev)
}

/// The nodes as their agents leave them once the preflight of the spec's
/// revision passed and its update is staged (a node with a preflight or a
/// staging of its own keeps it).
#[cfg(test)]
pub(crate) fn cleared(spec: &crate::api::WindowsNodePoolSpec, nodes: &[NodeView]) -> Vec<NodeView> {
    let rev = crate::decision::revision::revision_of(spec);
    let ready = Preflight { revision: rev.clone(), verdict: PreflightVerdict::Ready };
    let staged = Staging { revision: rev, state: StagingState::Staged, reboot_free: false };
    nodes
        .iter()
        .map(|n| NodeView {
            preflight: n.preflight.clone().or_else(|| Some(ready.clone())),
            staging: n.staging.clone().or_else(|| Some(staged.clone())),
            ..n.clone()
        })
        .collect()
}
