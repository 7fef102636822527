//! winpool: a Kubernetes operator that rolls Windows node pools to a declared
//! configuration and reports whether their Host Network Service can carry the
//! cluster's Services. See docs/ARCHITECTURE.md for how the modules fit.

pub mod api;
pub mod builders;
#[cfg(test)]
mod contract;
pub mod controller;
pub mod crd;
pub mod decision;
pub mod drain;
pub mod error;
pub mod lease;
pub mod metrics;
pub mod migration;
pub mod node_record;
pub mod plugin;
pub mod provider;
#[cfg(test)]
mod test_builders;
pub mod versions;
pub mod write_fence;

// The layers keep their short paths (`crate::rollout`, `winpool::hns`, ...).
pub use api::report;
pub use builders::{configmap, csi_proxy, daemonset, hook_job, pod_network};
pub use decision::{gates, hns, membership, node_view, revision, rollout, status, window};
