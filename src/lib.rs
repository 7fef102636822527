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
pub mod error;
pub mod plugin;
#[cfg(test)]
mod test_builders;

// The layers keep their short paths (`crate::rollout`, `winpool::hns`, ...).
pub use api::{node_record, report};
pub use builders::{configmap, csi_proxy, daemonset, hook_job, pod_network};
pub use controller::{drain, lease, metrics, write_fence};
pub use decision::{gates, hns, membership, node_view, provider, revision, rollout, status, versions, window};
