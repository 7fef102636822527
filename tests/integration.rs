//! The integration tests, one binary: each file beside this one is a module
//! (run one with `cargo test --test integration rollout::`). One binary links
//! winpool and its dependencies once instead of once per file, and the test
//! threads (hack/test.sh: --test-threads) are shared by all files, so a slow
//! file no longer leaves the others waiting behind it. Most need the local
//! control plane (hack/cluster.sh); layers, fuzz_parsers and release do not.

mod support;

mod agent_identity;
mod api;
mod chaos;
mod cluster;
mod fuzz_parsers;
mod health_gates;
mod hns;
mod hostile;
mod image;
mod layers;
mod leader;
mod plugin;
mod prometheus;
mod rbac;
mod release;
mod rollout;
mod shutdown;
mod windows_host;
