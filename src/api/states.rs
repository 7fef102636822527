//! The states winpool writes into the API (`winpool.dev/state` on a Node,
//! `status.hns.state` and `updatingNodes[].state` on a pool): schema types, so
//! the status types need nothing from the decision that computes them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use strum::{EnumString, IntoStaticStr, VariantArray};

/// Where a node is in its update (`winpool.dev/state`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    Serialize,
    Deserialize,
    JsonSchema,
    IntoStaticStr,
    EnumString,
    VariantArray,
)]
pub enum NodeState {
    #[default]
    Pending,
    Draining,
    Applying,
    Verifying,
    Updated,
    Failed,
}

impl NodeState {
    /// Every state, in the order of an update.
    pub const ALL: &'static [NodeState] = NodeState::VARIANTS;

    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The `winpool.dev/state` label value for a recorded state: Failed only.
    /// A label change makes the DaemonSet controller (and the scheduler)
    /// re-evaluate the node against every DaemonSet; mirroring each state was
    /// four label changes per node per rollout and cost the control plane 10-30%
    /// more CPU at 1,000 nodes (docs/BENCHMARKS.md). A failure is rare, and
    /// the one a person looks for with a selector; nodes in flight are in
    /// status.updatingNodes.
    pub fn label(self) -> Option<&'static str> {
        (self == NodeState::Failed).then(|| self.as_str())
    }

    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }

    /// Between Pending and Updated: counts against maxUnavailable.
    pub fn in_flight(self) -> bool {
        matches!(self, NodeState::Draining | NodeState::Applying | NodeState::Verifying)
    }
}

/// `status.hns.state` and the `HNSCapacity` reason; ordered by severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize, JsonSchema)]
pub enum CapacityState {
    #[default]
    WithinLimits,
    NearLimit,
    Exceeded,
}

impl CapacityState {
    /// Const: the `HNSCapacity` reasons are constants made from it.
    pub const fn as_str(self) -> &'static str {
        match self {
            CapacityState::WithinLimits => "WithinLimits",
            CapacityState::NearLimit => "NearLimit",
            CapacityState::Exceeded => "Exceeded",
        }
    }
}
