//! The pool's spec as the rollout reads it, parsed once a round: its
//! durations, its target build and its schedule. Every step of the round, the
//! gates' look and the decision alike, reads this one value (a pool with
//! gates and undo used to parse its schedule and durations three times).

use std::time::Duration;

use super::settings::{DEFAULT_DRAIN_TIMEOUT, DEFAULT_HNS_READY_TIMEOUT, DEFAULT_PUT_BACK_AFTER, PhaseBudgets};
use super::{health_gate_interval, hns_pacing_budget, hns_rates, node_timeout, parse_duration, phase_budgets};
use crate::api::WindowsNodePoolSpec;
use crate::decision::hns::ProgrammingRates;
use crate::decision::versions::WindowsBuild;
use crate::decision::window::{Schedule, WindowError};

#[derive(Debug, Clone)]
pub struct PoolRules {
    pub node_timeout: Duration,
    /// rollout.timeouts, for a node whose servicing task beats.
    pub phases: PhaseBudgets,
    pub drain_timeout: Duration,
    pub hns_ready_timeout: Duration,
    /// spec.rollout.soakTime (0: an Updated node is available at once).
    pub soak_time: Duration,
    /// spec.rollout.drain.putBackAfter (0: a blocked node keeps its slot).
    pub put_back_after: Duration,
    /// spec.os.patchLevel; `None` if it does not parse.
    pub target_build: Option<WindowsBuild>,
    /// The maintenance windows and not-allowed dates; `Ok(None)`: none, always open.
    pub schedule: Result<Option<Schedule>, WindowError>,
    pub health_gate_interval: Duration,
    /// rollout.hnsPacing's budget; None with pacing off.
    pub hns_pacing_budget: Option<Duration>,
    pub hns_rates: ProgrammingRates,
}

impl PoolRules {
    pub fn of(spec: &WindowsNodePoolSpec) -> Self {
        #[cfg(test)]
        PARSED.with(|c| c.set(c.get() + 1));
        PoolRules {
            node_timeout: node_timeout(spec),
            phases: phase_budgets(spec),
            drain_timeout: parse_duration(&spec.rollout.drain.timeout).unwrap_or(DEFAULT_DRAIN_TIMEOUT),
            hns_ready_timeout: parse_duration(&spec.hns.ready_timeout).unwrap_or(DEFAULT_HNS_READY_TIMEOUT),
            soak_time: parse_duration(&spec.rollout.soak_time).unwrap_or_default(),
            put_back_after: parse_duration(&spec.rollout.drain.put_back_after).unwrap_or(DEFAULT_PUT_BACK_AFTER),
            target_build: spec.os.patch_level.parse().ok(),
            schedule: Schedule::parse(&spec.rollout),
            health_gate_interval: health_gate_interval(spec),
            hns_pacing_budget: hns_pacing_budget(spec),
            hns_rates: hns_rates(spec),
        }
    }
}

#[cfg(test)]
thread_local! {
    /// How often a spec was parsed into rules on this thread: a round parses its pool once.
    pub static PARSED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A spec's rules for a test's input, kept for the test's life.
#[cfg(test)]
pub fn test_rules(spec: &WindowsNodePoolSpec) -> &'static PoolRules {
    Box::leak(Box::new(PoolRules::of(spec)))
}
