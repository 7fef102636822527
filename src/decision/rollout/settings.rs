//! One round of the decision: its settings (the spec parsed in `rules`), and what
//! it has decided so far. The per-node steps in `node`, the starts in `start`
//! and the summary in `summary` all write into the same [`Decided`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;

use super::{DrainMode, HnsWait, NodePatch, NodeState, PoolInput, PoolRules, parse_duration};
use crate::api::{OsVersion, WindowsNodePoolSpec};
use crate::decision::gates::GateResult;
use crate::decision::window::Span;

/// Used when a duration in the spec does not parse (the CRD validates them,
/// but a pool written before a pattern tightened must still be rolled).
const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_secs(1800);
pub(super) const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(600);
pub(super) const DEFAULT_HNS_READY_TIMEOUT: Duration = Duration::from_secs(900);
pub(super) const DEFAULT_PUT_BACK_AFTER: Duration = Duration::from_secs(60);
/// How often a closed health gate is looked at again (rollout.healthGateInterval):
/// nothing the controller watches says when an alert clears or a pod goes.
pub const HEALTH_GATE_INTERVAL: Duration = Duration::from_secs(30);

const DEFAULT_GATE_TIMEOUT: Duration = Duration::from_secs(5);
const DEFAULT_HNS_PACING_BUDGET: Duration = Duration::from_secs(30);

/// rollout.hnsPacing: whether the pool's nodes' estimated programming
/// backlog holds the rollout this round.
fn hns_wait(rules: &PoolRules, backlog: Duration) -> Option<HnsWait> {
    let budget = rules.hns_pacing_budget?;
    (backlog > budget).then_some(HnsWait { backlog, budget })
}

/// rollout.hnsPacing: how many pods this round may evict, so that the
/// changes they cause keep the pool's nodes within the budget. Each eviction
/// changes its Service's EndpointSlice twice (the pod leaves, its
/// replacement arrives), and each change replaces at least one load
/// balancer: two at the release's pace. None with pacing off.
fn hns_eviction_room(rules: &PoolRules, backlog: Duration, unheard: usize) -> Option<usize> {
    let budget = rules.hns_pacing_budget?;
    let per_eviction = 2 * rules.hns_rates.per_load_balancer.as_millis().max(1);
    let room = usize::try_from(budget.saturating_sub(backlog).as_millis() / per_eviction).unwrap_or(usize::MAX);
    Some(room.saturating_sub(unheard))
}

/// How fast the pool's nodes program HNS: its release's default, each rate
/// the pool sets (`rollout.hnsPacing.rates`) instead.
pub fn hns_rates(spec: &WindowsNodePoolSpec) -> crate::decision::hns::ProgrammingRates {
    let default = crate::decision::hns::ProgrammingRates::default_for(spec.os.version);
    let Some(r) = &spec.rollout.hns_pacing.rates else { return default };
    let rate = |set: &Option<String>, default: Duration| set.as_deref().and_then(parse_duration).unwrap_or(default);
    crate::decision::hns::ProgrammingRates {
        per_load_balancer: rate(&r.per_load_balancer, default.per_load_balancer),
        per_remote_endpoint: rate(&r.per_remote_endpoint, default.per_remote_endpoint),
    }
}

/// rollout.hnsPacing's budget; None with pacing off.
pub fn hns_pacing_budget(spec: &WindowsNodePoolSpec) -> Option<Duration> {
    let pacing = &spec.rollout.hns_pacing;
    pacing.enabled.then(|| parse_duration(&pacing.budget).unwrap_or(DEFAULT_HNS_PACING_BUDGET))
}

/// A Prometheus or Alertmanager health gate's request timeout (the controller waits that long).
pub fn gate_timeout(g: &crate::api::HealthGate) -> Duration {
    g.timeout.as_deref().and_then(parse_duration).filter(|d| !d.is_zero()).unwrap_or(DEFAULT_GATE_TIMEOUT)
}

/// spec.rollout.nodeTimeout as a duration. The controller bounds the wait for a
/// fresh HNS report by it too, so the default lives here only.
pub fn node_timeout(spec: &WindowsNodePoolSpec) -> Duration {
    parse_duration(&spec.rollout.node_timeout).unwrap_or(DEFAULT_NODE_TIMEOUT)
}

/// rollout.timeouts, resolved: what a node whose servicing task beats gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseBudgets {
    /// From the start, while the install beats.
    pub install: Duration,
    /// From the install's last beat to Ready and verified.
    pub reboot_to_ready: Duration,
}

impl PhaseBudgets {
    /// An OS release's budgets. A cumulative update on Windows Server 2019 is
    /// one ~1.5 GB package whose CBS install takes up to an hour or more and
    /// whose boot ("Working on updates") runs long; 2022's are smaller, and
    /// 2025's checkpoint updates smaller still. The agent caps its servicing
    /// task at the same budget (the start's ANN_INSTALL_BUDGET).
    pub fn default_for(os: OsVersion) -> Self {
        let (install, reboot) = match os {
            OsVersion::Ltsc2019 => (3 * 3600, 45 * 60),
            OsVersion::Ltsc2022 => (2 * 3600, 30 * 60),
            OsVersion::Ltsc2025 => (90 * 60, 20 * 60),
        };
        PhaseBudgets { install: Duration::from_secs(install), reboot_to_ready: Duration::from_secs(reboot) }
    }
}

/// spec.rollout.timeouts: each set one, else the OS release's default.
pub fn phase_budgets(spec: &WindowsNodePoolSpec) -> PhaseBudgets {
    let default = PhaseBudgets::default_for(spec.os.version);
    let t = &spec.rollout.timeouts;
    let or = |set: &Option<String>, default: Duration| set.as_deref().and_then(parse_duration).unwrap_or(default);
    PhaseBudgets { install: or(&t.install, default.install), reboot_to_ready: or(&t.reboot_to_ready, default.reboot_to_ready) }
}

/// spec.rollout.healthGateInterval as a duration; the shell reuses what a
/// closed gate saw for that long too.
pub fn health_gate_interval(spec: &WindowsNodePoolSpec) -> Duration {
    spec.rollout.health_gate_interval.as_deref().and_then(parse_duration).filter(|d| !d.is_zero()).unwrap_or(HEALTH_GATE_INTERVAL)
}

/// What every step of a round reads: the pool, its target and the clock.
pub(super) struct RoundSettings<'a> {
    pub pool: &'a str,
    pub spec: &'a WindowsNodePoolSpec,
    /// The spec parsed, once a round ([`PoolRules`]).
    pub rules: &'a PoolRules,
    pub existing_revisions: &'a BTreeSet<String>,
    /// The target revision.
    pub rev: String,
    pub now: Timestamp,
    /// The window open now or next, from the rules' schedule.
    pub window: Option<Span>,
    /// The health gates as evaluated this round (empty: not evaluated, nothing holds).
    pub gates: &'a [GateResult],
    /// When the agents were told of the target (its ConfigMap marked).
    pub target_marked_at: Option<Timestamp>,
    pub paused_by_annotation: bool,
    pub bad_update: Option<&'a crate::decision::breaker::BadUpdate>,
    pub ring: Option<&'a crate::decision::ring::RingHold>,
    pub cluster: Option<super::ClusterInFlight>,
    /// Past MAX_CLOCK_SKEW: nothing starts, nothing times out.
    pub clock_skew: Option<jiff::SignedDuration>,
    pub hooks_namespace: Option<&'a str>,
    /// rollout.hnsPacing: the backlog is over the budget (no start, no eviction).
    pub hns_wait: Option<HnsWait>,
    /// rollout.hnsPacing: the pods this round may evict ([`hns_eviction_room`]).
    pub eviction_room: Option<usize>,
}

impl<'a> RoundSettings<'a> {
    pub fn new(pool: &PoolInput<'a>, now: Timestamp) -> Self {
        let (spec, rules) = (pool.spec, pool.rules);
        let window = rules.schedule.as_ref().ok().and_then(|s| s.as_ref()?.at(now));
        RoundSettings {
            pool: pool.name,
            spec,
            rules,
            existing_revisions: pool.existing_revisions,
            rev: pool.rev.to_string(),
            now,
            window,
            gates: pool.gates,
            target_marked_at: pool.target_marked_at,
            paused_by_annotation: pool.paused_by_annotation,
            bad_update: pool.bad_update,
            ring: pool.ring,
            cluster: pool.cluster,
            clock_skew: pool.clock_skew,
            hooks_namespace: pool.hooks_namespace,
            hns_wait: hns_wait(rules, pool.hns_backlog),
            eviction_room: hns_eviction_room(rules, pool.hns_backlog, pool.evictions_unheard),
        }
    }

    /// Whether the windows let nodes start now (a schedule that does not parse does not).
    pub fn window_open(&self) -> bool {
        match &self.rules.schedule {
            Ok(None) => true,
            Ok(Some(_)) => self.window.is_some_and(|w| w.is_open(self.now)),
            Err(_) => false,
        }
    }

    /// Time elapsed since `t`; an unknown time counts as just now.
    pub fn since(&self, t: Option<Timestamp>) -> Duration {
        t.map(|t| self.now.duration_since(t).unsigned_abs()).unwrap_or_default()
    }

    /// How long a start lets a beating install run: rollout.timeouts.install,
    /// never below nodeTimeout (a long nodeTimeout is kept).
    pub fn install_budget(&self) -> Duration {
        self.rules.phases.install.max(self.rules.node_timeout)
    }
}

/// What the round has decided so far.
pub(super) struct Decided<'n> {
    pub patches: Vec<NodePatch>,
    pub drain: Vec<(String, DrainMode)>,
    pub waiting: BTreeMap<String, String>,
    pub warnings: Vec<(String, String)>,
    /// Every member's state once this round's patches land.
    pub states: BTreeMap<&'n str, NodeState>,
    pub config_revisions: BTreeSet<String>,
    /// Nodes whose drain a PodDisruptionBudget blocks: the budget, and for
    /// the ones put back, when they may start again.
    pub blocked: BTreeMap<String, (String, Option<Timestamp>)>,
    /// Pending nodes the pool's containerd may not be given: why.
    pub runtime_refused: BTreeMap<String, String>,
    /// Pending nodes their agent's preflight has not cleared for the revision.
    pub preflight_held: BTreeMap<String, super::preflight::PreflightHeld>,
    /// Members whose revision label winpool did not set (see `tamper`).
    pub tampered: BTreeMap<String, super::Tampering>,
    /// Pending nodes labelled `winpool.dev/hold=true`.
    pub held: BTreeSet<String>,
    /// Hook Jobs to create.
    pub hooks: Vec<super::hooks::HookStart>,
    /// The evictions this round may still ask for (rollout.hnsPacing); None: no bound.
    pub eviction_room: Option<usize>,
    /// Draining nodes whose evictions this round are bounded, and to how many.
    pub eviction_caps: BTreeMap<String, usize>,
}

impl<'n> Decided<'n> {
    pub fn new(rev: &str, eviction_room: Option<usize>) -> Self {
        Decided {
            patches: Vec::new(),
            drain: Vec::new(),
            waiting: BTreeMap::new(),
            warnings: Vec::new(),
            states: BTreeMap::new(),
            config_revisions: BTreeSet::from([rev.to_string()]),
            blocked: BTreeMap::new(),
            runtime_refused: BTreeMap::new(),
            preflight_held: BTreeMap::new(),
            tampered: BTreeMap::new(),
            held: BTreeSet::new(),
            hooks: Vec::new(),
            eviction_room,
            eviction_caps: BTreeMap::new(),
        }
    }

    pub fn wait(&mut self, node: &str, why: impl Into<String>) {
        self.waiting.insert(node.to_string(), why.into());
    }

    pub fn warn(&mut self, node: &str, why: impl Into<String>) {
        self.warnings.push((node.to_string(), why.into()));
    }

    pub fn count(&self, f: impl Fn(NodeState) -> bool) -> usize {
        self.states.values().filter(|s| f(**s)).count()
    }
}
