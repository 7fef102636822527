//! winpool: a Kubernetes operator that rolls Windows node pools to a declared
//! configuration and reports whether their Host Network Service can carry the
//! cluster's Services. See docs/ARCHITECTURE.md for how the modules fit.

pub mod api;
pub mod rollout;
pub mod window;
pub mod crd;
pub mod revision;
pub mod versions;
