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
