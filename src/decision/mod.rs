//! The decision: pure functions from what a round observed to what it does.
//! Nothing here reads the network or the clock; everything is table-tested.
//!
//! - [`rollout`]: each member's next step and the starts (the plan).
//! - [`status`]: the pool's status and conditions from the plan.
//! - [`hns`]: whether a node's HNS carries the cluster's Services, and the pool's capacity.
//! - [`drain`]: which pods a drain must evict and what holds them.
//! - [`gates`]: what a health gate's answer means.
//! - [`membership`]: which nodes a pool selects.
//! - [`breaker`]: one update failing with one code on enough nodes pauses every pool targeting it.
//! - [`ring`]: a pool that follows another starts only what soaked there.
//! - [`claim`]: which install of winpool a pool belongs to.
//! - [`operation`]: the WindowsNodeOperation a node's transition carries to its agent.
//! - [`node_view`]: a Node and its agent's report read into the view the rollout decides on.
//! - [`window`]: maintenance windows and not-allowed dates.
//! - [`allowed_url`]: whether a URL lies under a prefix the cluster admin allowed, as a URL.
//! - [`round`]: one reconcile of a pool decided whole: what it observed, the plan, the writes and their order, what it remembers.
//! - [`revision`]: the node-level configuration a spec asks for, and its hash.

pub mod agent_report;
pub mod allowed_url;
pub mod breaker;
pub mod claim;
pub mod drain;
pub mod gates;
pub mod hns;
pub mod membership;
pub mod node_view;
pub mod operation;
pub mod patch_policy;
pub mod provider;
pub mod revision;
pub mod ring;
pub mod rollout;
pub mod round;
pub mod status;
pub mod versions;
pub mod window;
