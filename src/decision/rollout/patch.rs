//! The patch of one Node that a round decides, and the steps every state
//! shares when it writes one: failing a node, asking its agent anew, lifting
//! winpool's cordon.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;

use super::{FailureReason, NodeState, NodeView, clipped};
use crate::api::names;
use crate::api::report::ApplyStatus;

/// A change to one Node. `None` values delete the key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodePatch {
    pub node: String,
    pub labels: BTreeMap<String, Option<String>>,
    pub annotations: BTreeMap<String, Option<String>>,
    pub unschedulable: Option<bool>,
    /// Why, for the log line and the Event.
    pub reason: String,
    pub from: NodeState,
    pub to: NodeState,
    /// A node this patch marks Updated after a rollout: how long it took from
    /// its start (winpool_node_update_duration_seconds, the estimate in status).
    pub took: Option<Duration>,
    /// The Updated node was hotpatched: updated in service, never cordoned,
    /// drained or rebooted (winpool_nodes_hotpatched_total).
    pub hotpatched: bool,
    /// Land only on the Node as it was decided from (its resourceVersion). A start
    /// carries it: if the start's answer is lost (an API server restart) and the
    /// cache still shows the node idle, the next round's start is refused with a
    /// conflict instead of cordoning and draining the node a second time.
    pub unless_changed_since: Option<String>,
}

impl NodePatch {
    pub(super) fn new(node: &str, from: NodeState, to: NodeState, reason: impl Into<String>) -> Self {
        NodePatch { node: node.to_string(), from, to, reason: reason.into(), ..Default::default() }
    }
    pub(super) fn label(&mut self, k: &str, v: Option<&str>) -> &mut Self {
        self.labels.insert(k.to_string(), v.map(str::to_string));
        self
    }
    pub(super) fn ann(&mut self, k: &str, v: Option<&str>) -> &mut Self {
        self.annotations.insert(k.to_string(), v.map(str::to_string));
        self
    }
    pub(super) fn state(&mut self, to: NodeState, now: Timestamp) -> &mut Self {
        self.to = to;
        let now = now.to_string();
        self.label(names::LABEL_STATE, to.label()).ann(names::ANN_STATE, Some(to.as_str())).ann(names::ANN_STATE_SINCE, Some(&now))
    }
}

/// Whether winpool keeps this node cordoned past this round: it cordoned the
/// node for an update that is still in flight, and `patch` (this round's write
/// for the node, if any) does not lift the cordon. Such a node needs no HNS
/// taint: the cordon already keeps new pods off, and the uncordon waits for HNS
/// (or adds the taint, see `hns::taint_wanted`), which saves two writes per
/// rebooted node and a conflict with the state write.
pub fn held_cordoned(view: &NodeView, patch: Option<&NodePatch>) -> bool {
    let in_flight = view.state.in_flight();
    view.cordoned_by_winpool && view.unschedulable && in_flight && patch.is_none_or(|p| p.unschedulable != Some(false))
}

pub(super) fn fail(p: &mut NodePatch, n: &NodeView, now: Timestamp, reason: FailureReason, message: &str) {
    mark_failed(p, now, reason, message);
    // Never strand a node cordoned: a failed node goes back to service, the
    // failure is reported on the pool and the node waits for a person.
    release_cordon(p, n);
}

/// A node that runs out of time while its host may still be installing is
/// Failed but stays cordoned: back in service it would take workloads with a
/// half-staged update, and its agent would then refuse the reboot. The cordon
/// is lifted in the Failed state once the agent reports a final result
/// ([`may_be_installing`]).
pub(super) fn fail_kept_cordoned(p: &mut NodePatch, now: Timestamp, reason: FailureReason, message: &str) {
    mark_failed(p, now, reason, message);
}

/// Whether the node's host may still be installing: its agent's last word on
/// the start in flight is Applying or Rebooting. Returns that word.
pub fn may_be_installing(n: &NodeView) -> Option<ApplyStatus> {
    let status = n.apply().filter(|s| matches!(s, ApplyStatus::Applying | ApplyStatus::Rebooting | ApplyStatus::RebootRequired))?;
    (n.applied_revision.is_some() && n.applied_revision == n.target_revision).then_some(status)
}

fn mark_failed(p: &mut NodePatch, now: Timestamp, reason: FailureReason, message: &str) {
    let message = clipped(message);
    p.state(NodeState::Failed, now)
        .ann(names::ANN_FAILURE_REASON, Some(reason.as_str()))
        .ann(names::ANN_FAILURE_MESSAGE, Some(&message))
        .ann(names::ANN_BOOT_ID, None);
}

/// Only the undo's own start takes an update off: any other start, and a
/// retarget, installs.
pub(super) fn not_an_undo(p: &mut NodePatch, n: &NodeView) {
    if n.undo.is_some() {
        p.ann(names::ANN_UNDO, None);
    }
}

pub(super) fn release_cordon(p: &mut NodePatch, n: &NodeView) {
    if n.cordoned_by_winpool {
        p.unschedulable = Some(false);
        p.ann(names::ANN_CORDONED_BY_WINPOOL, None);
    }
}
