//! winpool: a Kubernetes operator that rolls Windows node pools to a declared
//! configuration and reports whether their Host Network Service can carry the
//! cluster's Services. See docs/ARCHITECTURE.md for how the modules fit.

pub mod api;
pub mod configmap;
#[cfg(test)]
mod contract;
pub mod controller;
pub mod crd;
pub mod csi_proxy;
pub mod daemonset;
pub mod drain;
pub mod error;
pub mod gates;
pub mod hns;
pub mod lease;
pub mod membership;
pub mod metrics;
pub mod migration;
pub mod node_record;
pub mod observe;
pub mod plugin;
pub mod provider;
pub mod report;
pub mod revision;
pub mod rollout;
pub mod status;
pub mod versions;
pub mod window;
