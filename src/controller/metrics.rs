//! Prometheus metrics and the admin HTTP endpoint (`/metrics`, `/healthz`, `/readyz`).
//!
//! Per-pool series only; label sets are bounded by the number of pools and the
//! six node states. The admin server is hyper's HTTP/1.1 server (already in the
//! tree through kube) with one small routing function.

use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use jiff::Timestamp;
use prometheus::{
    Encoder, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};
use tokio::net::TcpListener;
use tracing::{info, warn};

use crate::decision::rollout::{Hold, NodeState, Plan};
use crate::decision::round::hns_repair::RepairState;

pub struct Metrics {
    pub registry: Registry,
    pub reconcile_duration: Histogram,
    pub reconcile_errors: IntCounterVec,
    pub api_requests: IntCounterVec,
    pub leader: IntGauge,
    pub caches_synced: IntGauge,
    /// What keeps the caches from syncing that a person must fix (a CRD
    /// not installed, with the command that installs it); `/readyz` says it.
    pub not_ready_because: std::sync::Mutex<Vec<String>>,
    /// Pools with nodes in flight, and when a reconcile of each last ended
    /// (on the monotonic clock): `/healthz` fails when one is wedged.
    in_flight: std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>,
    node_update_duration: HistogramVec,
    nodes_hotpatched: IntCounterVec,
    hns_loss_detection: HistogramVec,
    build_info: IntGaugeVec,
    pool: PoolGauges,
    hns: HnsGauges,
}

/// A pool's rollout, one series per pool (and per state or pause reason).
struct PoolGauges {
    nodes: IntGaugeVec,
    nodes_desired: IntGaugeVec,
    nodes_updated: IntGaugeVec,
    rollout_in_progress: IntGaugeVec,
    rollout_paused: IntGaugeVec,
    window_open: IntGaugeVec,
    drain_blocked: IntGaugeVec,
    preflight_blocked: IntGaugeVec,
    preflight_awaited: IntGaugeVec,
    health_gate_closed: IntGaugeVec,
    behind_patch_level: IntGaugeVec,
    patch_overdue: IntGaugeVec,
    held_nodes: IntGaugeVec,
    last_reconcile: IntGaugeVec,
    /// Always 1; its labels say what the pool asks for.
    info: IntGaugeVec,
    /// The info labels each pool's series carries now (replaced when they change).
    info_labels: std::sync::Mutex<std::collections::HashMap<String, [String; 3]>>,
}

/// A pool's HNS load and limits, and the bounded per-node readiness series.
struct HnsGauges {
    expected_lb: IntGaugeVec,
    limit_lb: IntGaugeVec,
    expected_ep: IntGaugeVec,
    limit_ep: IntGaugeVec,
    utilization: GaugeVec,
    warn_ratio: GaugeVec,
    not_ready: IntGaugeVec,
    node_ready: IntGaugeVec,
    backlog: GaugeVec,
    pacing_budget: GaugeVec,
    drifted: IntGaugeVec,
    repairs: IntGaugeVec,
    /// Nodes with a winpool_node_hns_ready series, per pool, so recovered ones are removed.
    series: std::sync::Mutex<std::collections::HashMap<String, Vec<String>>>,
}

/// The pool's estimated HNS programming backlog, and its pacing budget (None: pacing off).
#[derive(Debug, Clone, Copy, Default)]
pub struct HnsPacingSeen {
    pub backlog: std::time::Duration,
    pub budget: Option<std::time::Duration>,
}

/// The `reason` label values of `winpool_pool_rollout_paused`.
const PAUSE_REASONS: [&str; 4] = ["spec", "annotation", "failures", "bad_update"];

/// How long a pool with nodes in flight may go without a reconcile ending
/// before `/healthz` fails: such a pool is reconciled at least every 5 s
/// while it works (or its reconcile errors and is retried as often), so
/// this is a reconcile that hangs, never one that is slow.
pub const WEDGED_AFTER: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// Per-node HNS series are exported only for nodes that are not ready, and at most this many per pool.
pub const MAX_NODE_SERIES_PER_POOL: usize = 50;

fn register<M: prometheus::core::Collector + Clone + 'static>(r: &Registry, m: Result<M, prometheus::Error>) -> M {
    let m = m.expect("valid metric");
    r.register(Box::new(m.clone())).expect("metric registered once");
    m
}

fn float_gauge_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
    register(r, GaugeVec::new(Opts::new(name, help), labels))
}

fn gauge_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    register(r, IntGaugeVec::new(Opts::new(name, help), labels))
}

impl PoolGauges {
    fn register(r: &Registry) -> Self {
        let pool = &["pool"];
        PoolGauges {
            nodes: gauge_vec(r, "winpool_pool_nodes", "Nodes of a pool by rollout state.", &["pool", "state"]),
            nodes_desired: gauge_vec(r, "winpool_pool_nodes_desired", "Nodes in the pool; all should reach the target revision.", pool),
            nodes_updated: gauge_vec(r, "winpool_pool_nodes_updated", "Nodes verified at the pool's target revision.", pool),
            rollout_in_progress: gauge_vec(r, "winpool_pool_rollout_in_progress", "1 while nodes are being updated.", pool),
            rollout_paused: gauge_vec(
                r,
                "winpool_pool_rollout_paused",
                "1 when the rollout is paused, by spec.rollout.paused, the winpool.dev/paused annotation or maxFailedNodes (reason).",
                &["pool", "reason"],
            ),
            window_open: gauge_vec(
                r,
                "winpool_pool_window_open",
                "1 while the pool's maintenance windows let nodes start (always, without windows).",
                pool,
            ),
            drain_blocked: gauge_vec(
                r,
                "winpool_pool_nodes_drain_blocked",
                "Nodes whose drain a PodDisruptionBudget blocks (Draining, or put back to be tried again).",
                pool,
            ),
            preflight_blocked: gauge_vec(
                r,
                "winpool_pool_nodes_preflight_blocked",
                "Pending nodes whose agent's preflight blocks the pool's revision: they are not cordoned until it passes.",
                pool,
            ),
            preflight_awaited: gauge_vec(
                r,
                "winpool_pool_nodes_preflight_awaited",
                "Pending nodes whose agent has not judged the pool's revision yet (no agent running, an agent that predates preflight, a host it cannot read).",
                pool,
            ),
            health_gate_closed: gauge_vec(
                r,
                "winpool_pool_health_gate_closed",
                "1 while a health gate (spec.rollout.healthGates) keeps new nodes from starting; the condition names it.",
                pool,
            ),
            behind_patch_level: gauge_vec(
                r,
                "winpool_pool_nodes_behind_patch_level",
                "Nodes whose kubelet-reported build is below the pool's patchLevel.",
                pool,
            ),
            patch_overdue: gauge_vec(r, "winpool_pool_nodes_patch_overdue", "Nodes below patchLevel past compliance.deadline.", pool),
            held_nodes: gauge_vec(
                r,
                "winpool_pool_nodes_held",
                "Pending nodes labelled winpool.dev/hold=true, which winpool never starts.",
                pool,
            ),
            last_reconcile: gauge_vec(
                r,
                "winpool_pool_last_reconcile_timestamp_seconds",
                "Unix time of the pool's last successful decision.",
                pool,
            ),
            info: gauge_vec(
                r,
                "winpool_pool_info",
                "Always 1: the pool's Windows Server release, target patch level and revision, to join onto its other series.",
                &["pool", "os_version", "patch_level", "revision"],
            ),
            info_labels: Default::default(),
        }
    }
}

impl HnsGauges {
    fn register(r: &Registry) -> Self {
        let pool = &["pool"];
        HnsGauges {
            expected_lb: gauge_vec(
                r,
                "winpool_pool_hns_expected_load_balancers",
                "HNS load-balancer policies every node of the pool should hold.",
                pool,
            ),
            limit_lb: gauge_vec(
                r,
                "winpool_pool_hns_limit_load_balancers",
                "The pool's load-balancer limit (spec.hns or the OS default).",
                pool,
            ),
            expected_ep: gauge_vec(
                r,
                "winpool_pool_hns_expected_endpoints",
                "HNS remote endpoints every node of the pool should hold.",
                pool,
            ),
            limit_ep: gauge_vec(r, "winpool_pool_hns_limit_endpoints", "The pool's endpoint limit (spec.hns or the OS default).", pool),
            utilization: float_gauge_vec(
                r,
                "winpool_pool_hns_utilization_ratio",
                "Expected HNS load over the limit: the larger of the two ratios.",
                pool,
            ),
            warn_ratio: float_gauge_vec(
                r,
                "winpool_pool_hns_warn_ratio",
                "spec.hns.warnPercent / 100: where HNSCapacity turns NearLimit.",
                pool,
            ),
            not_ready: gauge_vec(r, "winpool_pool_nodes_hns_not_ready", "Nodes of the pool whose HNS has not caught up.", pool),
            backlog: float_gauge_vec(
                r,
                "winpool_pool_hns_programming_backlog_seconds",
                "Estimated time a node of the pool's release needs to program the Service and EndpointSlice changes heard so far.",
                pool,
            ),
            drifted: gauge_vec(
                r,
                "winpool_pool_nodes_hns_drifted",
                "Nodes of the pool whose HNS lost what it held in this boot (WindowsHNSReady reason Collapsed or Drifted).",
                pool,
            ),
            repairs: gauge_vec(
                r,
                "winpool_pool_nodes_hns_repair",
                "Nodes of the pool by where the kube-proxy restart winpool asked in their current boot stands (hns.repair): Asked, Restarted, Failed, Unsupported.",
                &["pool", "state"],
            ),
            pacing_budget: float_gauge_vec(
                r,
                "winpool_pool_hns_pacing_budget_seconds",
                "rollout.hnsPacing.budget: the backlog over which the rollout waits (absent with pacing off).",
                pool,
            ),
            node_ready: gauge_vec(
                r,
                "winpool_node_hns_ready",
                "0 for a node whose HNS has not caught up; exported only for such nodes, at most 50 per pool.",
                &["pool", "node"],
            ),
            series: Default::default(),
        }
    }
}

impl Metrics {
    pub fn new() -> Arc<Self> {
        let r = Registry::new();
        // CPU, resident memory, open file descriptors of the operator itself.
        r.register(Box::new(prometheus::process_collector::ProcessCollector::for_self())).expect("process collector registered once");
        let buckets = vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
        let duration = HistogramOpts::new("winpool_reconcile_duration_seconds", "Time one pool reconcile takes, observe to act.");
        // Seconds on kwok, half an hour to hours on a real node with a cumulative update.
        let node_update = HistogramOpts::new(
            "winpool_node_update_duration_seconds",
            "Time from a node's start (drain) to Updated, per pool, for nodes updated by a rollout.",
        )
        .buckets(vec![10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0, 5400.0, 7200.0, 10800.0]);
        // The agent reads HNS every 15 s; a collapse is said in the round its report lands, a drift after a minute's grace.
        let hns_loss = HistogramOpts::new(
            "winpool_hns_loss_detection_seconds",
            "Time from an agent's first read of HNS counts showing a loss to winpool's WindowsHNSReady saying it (Collapsed or Drifted), per pool and reason.",
        )
        .buckets(vec![1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0]);
        let requests = Opts::new("winpool_kube_api_requests_total", "Kubernetes API requests winpool made, by verb, resource and outcome.");
        let m = Metrics {
            reconcile_duration: register(&r, Histogram::with_opts(duration.buckets(buckets))),
            reconcile_errors: register(
                &r,
                IntCounterVec::new(Opts::new("winpool_reconcile_errors_total", "Failed reconciles by reason."), &["reason"]),
            ),
            api_requests: register(&r, IntCounterVec::new(requests, &["verb", "resource", "outcome"])),
            leader: register(&r, IntGauge::new("winpool_leader", "1 when this replica holds the leader lease and may write.")),
            caches_synced: register(&r, IntGauge::new("winpool_caches_synced", "1 once the node and DaemonSet caches have synced.")),
            not_ready_because: std::sync::Mutex::new(Vec::new()),
            in_flight: Default::default(),
            node_update_duration: register(&r, HistogramVec::new(node_update, &["pool"])),
            nodes_hotpatched: register(
                &r,
                IntCounterVec::new(
                    Opts::new(
                        "winpool_nodes_hotpatched_total",
                        "Nodes a rollout updated in service with a hotpatch (no cordon, drain or reboot), per pool.",
                    ),
                    &["pool"],
                ),
            ),
            hns_loss_detection: register(&r, HistogramVec::new(hns_loss, &["pool", "reason"])),
            build_info: gauge_vec(&r, "winpool_build_info", "Always 1; the version label says which winpool runs.", &["version"]),
            pool: PoolGauges::register(&r),
            hns: HnsGauges::register(&r),
            registry: r,
        };
        m.build_info.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        // A counter series that first appears at 1 is invisible to rate(): start every reason at 0.
        for r in crate::error::Error::METRIC_LABELS {
            m.reconcile_errors.with_label_values(&[r]);
        }
        Arc::new(m)
    }

    pub fn api_request(&self, verb: &str, resource: &str, outcome: &str) {
        self.api_requests.with_label_values(&[verb, resource, outcome]).inc();
    }

    /// Nodes whose Updated write landed this round.
    pub fn observe_updates<'p>(&self, pool: &str, landed: impl IntoIterator<Item = &'p crate::decision::rollout::NodePatch>) {
        for p in landed {
            if let Some(took) = p.took {
                self.node_update_duration.with_label_values(&[pool]).observe(took.as_secs_f64());
            }
            if p.hotpatched {
                self.nodes_hotpatched.with_label_values(&[pool]).inc();
            }
        }
    }

    pub fn observe_pool(&self, pool: &str, plan: &Plan, now: Timestamp) {
        // Every pool's update histogram exists from its first round, at 0: a
        // series that first appears with a count of 1 is invisible to rate(),
        // and a pool with no update yet would have no panel at all.
        self.node_update_duration.with_label_values(&[pool]);
        self.nodes_hotpatched.with_label_values(&[pool]);
        for reason in [crate::decision::hns::reasons::COLLAPSED, crate::decision::hns::reasons::DRIFTED] {
            self.hns_loss_detection.with_label_values(&[pool, reason]);
        }
        for &s in NodeState::ALL {
            let n = plan.by_state.get(&s).copied().unwrap_or(0) as i64;
            self.pool.nodes.with_label_values(&[pool, s.as_str()]).set(n);
        }
        self.pool.nodes_desired.with_label_values(&[pool]).set(plan.counts.total as i64);
        self.pool.nodes_updated.with_label_values(&[pool]).set(plan.counts.updated as i64);
        self.pool.rollout_in_progress.with_label_values(&[pool]).set((plan.counts.updating > 0) as i64);
        {
            let mut in_flight = self.in_flight.lock().expect("in-flight lock");
            if plan.counts.updating > 0 {
                in_flight.entry(pool.to_string()).or_insert_with(std::time::Instant::now);
            } else {
                in_flight.remove(pool);
            }
        }
        let reason = match plan.hold {
            Some(Hold::PausedBySpec) => Some("spec"),
            Some(Hold::PausedByAnnotation) => Some("annotation"),
            Some(Hold::FailureLimit { .. }) => Some("failures"),
            Some(Hold::BadUpdate(_)) => Some("bad_update"),
            _ => None,
        };
        for r in PAUSE_REASONS {
            self.pool.rollout_paused.with_label_values(&[pool, r]).set((reason == Some(r)) as i64);
        }
        let gate_closed = matches!(plan.hold, Some(Hold::HealthGateClosed { .. }));
        self.pool.health_gate_closed.with_label_values(&[pool]).set(gate_closed as i64);
        self.pool.behind_patch_level.with_label_values(&[pool]).set(plan.behind_patch_level as i64);
        self.pool.patch_overdue.with_label_values(&[pool]).set(plan.patch_overdue as i64);
        self.pool.held_nodes.with_label_values(&[pool]).set(plan.held.len() as i64);
        self.pool.window_open.with_label_values(&[pool]).set(plan.window_open as i64);
        self.pool.drain_blocked.with_label_values(&[pool]).set(plan.blocked.len() as i64);
        self.pool.preflight_blocked.with_label_values(&[pool]).set(plan.preflight_blocked().count() as i64);
        let awaited = plan.preflight_awaited();
        self.pool.preflight_awaited.with_label_values(&[pool]).set(awaited as i64);
        self.pool.last_reconcile.with_label_values(&[pool]).set(now.as_second());
    }

    /// The pool's `winpool_pool_info` series; a change of target replaces it,
    /// so a pool never has two.
    pub fn observe_pool_info(&self, pool: &str, os_version: &str, patch_level: &str, revision: &str) {
        let now = [os_version.to_string(), patch_level.to_string(), revision.to_string()];
        let mut seen = self.pool.info_labels.lock().expect("info lock");
        if let Some(old) = seen.get(pool).filter(|old| **old != now) {
            let _ = self.pool.info.remove_label_values(&[pool, &old[0], &old[1], &old[2]]);
        }
        self.pool.info.with_label_values(&[pool, os_version, patch_level, revision]).set(1);
        seen.insert(pool.to_string(), now);
    }

    pub fn observe_hns(
        &self,
        pool: &str,
        totals: (i64, i64),
        limits: &crate::decision::hns::Limits,
        utilization: f64,
        warn_percent: i32,
        not_ready: &[String],
    ) {
        self.hns.expected_lb.with_label_values(&[pool]).set(totals.0);
        self.hns.limit_lb.with_label_values(&[pool]).set(limits.load_balancers);
        self.hns.expected_ep.with_label_values(&[pool]).set(totals.1);
        self.hns.limit_ep.with_label_values(&[pool]).set(limits.endpoints);
        self.hns.utilization.with_label_values(&[pool]).set(utilization);
        self.hns.warn_ratio.with_label_values(&[pool]).set(warn_percent as f64 / 100.0);
        self.hns.not_ready.with_label_values(&[pool]).set(not_ready.len() as i64);
        let shown: Vec<String> = not_ready.iter().take(MAX_NODE_SERIES_PER_POOL).cloned().collect();
        let mut series = self.hns.series.lock().expect("series lock");
        for old in series.get(pool).into_iter().flatten() {
            if !shown.contains(old) {
                let _ = self.hns.node_ready.remove_label_values(&[pool, old]);
            }
        }
        for n in &shown {
            self.hns.node_ready.with_label_values(&[pool, n]).set(0);
        }
        series.insert(pool.to_string(), shown);
    }

    /// A node whose WindowsHNSReady now says that HNS lost what it held
    /// (`reason`), `after` the agent read the counts that show it.
    pub fn observe_hns_loss_detected(&self, pool: &str, reason: &str, after: std::time::Duration) {
        self.hns_loss_detection.with_label_values(&[pool, reason]).observe(after.as_secs_f64());
    }

    /// The pool's nodes whose HNS lost what it held.
    pub fn observe_hns_drift(&self, pool: &str, drifted: usize) {
        self.hns.drifted.with_label_values(&[pool]).set(drifted as i64);
    }

    /// The pool's members by where their kube-proxy restart stands in their current boot.
    pub(crate) fn observe_hns_repairs(&self, pool: &str, states: &std::collections::BTreeMap<RepairState, usize>) {
        for s in RepairState::all() {
            self.hns.repairs.with_label_values(&[pool, s.as_str()]).set(states.get(&s).copied().unwrap_or(0) as i64);
        }
    }

    /// The pool's estimated HNS programming backlog, and its pacing budget.
    pub fn observe_hns_pacing(&self, pool: &str, pacing: HnsPacingSeen) {
        self.hns.backlog.with_label_values(&[pool]).set(pacing.backlog.as_secs_f64());
        match pacing.budget {
            Some(b) => self.hns.pacing_budget.with_label_values(&[pool]).set(b.as_secs_f64()),
            None => {
                let _ = self.hns.pacing_budget.remove_label_values(&[pool]);
            }
        }
    }

    /// A reconcile of `pool` ended, well or not: the operator is not wedged on it.
    pub fn reconciled(&self, pool: &str) {
        if let Some(last) = self.in_flight.lock().expect("in-flight lock").get_mut(pool) {
            *last = std::time::Instant::now();
        }
    }

    /// The pools with nodes in flight that no reconcile has reached for
    /// WEDGED_AFTER, with how long: a leader stuck there would strand their
    /// nodes cordoned, and a restart (the liveness probe) is the way out.
    fn wedged(&self, now: std::time::Instant) -> Vec<(String, std::time::Duration)> {
        if self.leader.get() != 1 {
            return Vec::new();
        }
        let in_flight = self.in_flight.lock().expect("in-flight lock");
        let mut out: Vec<_> = in_flight
            .iter()
            .map(|(pool, last)| (pool.clone(), now.saturating_duration_since(*last)))
            .filter(|(_, since)| *since > WEDGED_AFTER)
            .collect();
        out.sort();
        out
    }

    /// A deleted pool's series go away instead of freezing at their last value.
    pub fn forget_pool(&self, pool: &str) {
        self.in_flight.lock().expect("in-flight lock").remove(pool);
        for &s in NodeState::ALL {
            let _ = self.pool.nodes.remove_label_values(&[pool, s.as_str()]);
        }
        for g in [
            &self.pool.nodes_desired,
            &self.pool.nodes_updated,
            &self.pool.rollout_in_progress,
            &self.pool.window_open,
            &self.pool.drain_blocked,
            &self.pool.preflight_blocked,
            &self.pool.preflight_awaited,
            &self.pool.health_gate_closed,
            &self.pool.behind_patch_level,
            &self.pool.patch_overdue,
            &self.pool.held_nodes,
            &self.pool.last_reconcile,
        ] {
            let _ = g.remove_label_values(&[pool]);
        }
        for r in PAUSE_REASONS {
            let _ = self.pool.rollout_paused.remove_label_values(&[pool, r]);
        }
        if let Some(old) = self.pool.info_labels.lock().expect("info lock").remove(pool) {
            let _ = self.pool.info.remove_label_values(&[pool, &old[0], &old[1], &old[2]]);
        }
        let _ = self.node_update_duration.remove_label_values(&[pool]);
        let _ = self.nodes_hotpatched.remove_label_values(&[pool]);
        for reason in [crate::decision::hns::reasons::COLLAPSED, crate::decision::hns::reasons::DRIFTED] {
            let _ = self.hns_loss_detection.remove_label_values(&[pool, reason]);
        }
        for g in
            [&self.hns.expected_lb, &self.hns.limit_lb, &self.hns.expected_ep, &self.hns.limit_ep, &self.hns.not_ready, &self.hns.drifted]
        {
            let _ = g.remove_label_values(&[pool]);
        }
        for g in [&self.hns.utilization, &self.hns.warn_ratio, &self.hns.backlog, &self.hns.pacing_budget] {
            let _ = g.remove_label_values(&[pool]);
        }
        for s in RepairState::all() {
            let _ = self.hns.repairs.remove_label_values(&[pool, s.as_str()]);
        }
        for n in self.hns.series.lock().expect("series lock").remove(pool).into_iter().flatten() {
            let _ = self.hns.node_ready.remove_label_values(&[pool, &n]);
        }
    }

    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut buf).expect("text encoding never fails");
        String::from_utf8(buf).expect("metrics are UTF-8")
    }
}

/// What the admin server answers on `path`: (status, content type, body).
fn respond(path: &str, metrics: &Metrics) -> (StatusCode, &'static str, String) {
    match path {
        "/metrics" => (StatusCode::OK, "text/plain; version=0.0.4", metrics.render()),
        "/healthz" => match metrics.wedged(std::time::Instant::now()).as_slice() {
            [] => (StatusCode::OK, "text/plain", "ok\n".into()),
            wedged => {
                let body = wedged.iter().fold(String::new(), |body, (pool, since)| {
                    body + &format!("pool {pool} has nodes in flight and no reconcile of it has ended for {}s\n", since.as_secs())
                });
                (StatusCode::SERVICE_UNAVAILABLE, "text/plain", body)
            }
        },
        // A standby is a warm replica ready to take over: ready, reporting winpool_leader 0.
        "/readyz" if metrics.leader.get() == 0 => (StatusCode::OK, "text/plain", "ok (standby)\n".into()),
        "/readyz" if metrics.caches_synced.get() == 1 => (StatusCode::OK, "text/plain", "ok\n".into()),
        "/readyz" => {
            let why = metrics.not_ready_because.lock().expect("readiness reasons").clone();
            let body = why.iter().fold("caches not synced\n".to_string(), |body, why| body + why + "\n");
            (StatusCode::SERVICE_UNAVAILABLE, "text/plain", body)
        }
        _ => (StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
    }
}

/// Serve `/metrics`, `/healthz` (alive) and `/readyz` (caches synced; a
/// non-leader replica is ready too: it is a warm standby).
pub async fn serve(addr: std::net::SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    info!(%addr, "admin server listening (/metrics, /healthz, /readyz)");
    loop {
        let (sock, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "admin accept failed");
                continue;
            }
        };
        let metrics = metrics.clone();
        let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
            let (status, ctype, body) = respond(req.uri().path(), &metrics);
            let resp = Response::builder().status(status).header(hyper::header::CONTENT_TYPE, ctype).body(Full::new(Bytes::from(body)));
            async move { resp }
        });
        tokio::spawn(async move {
            // A scraper that never finishes its request does not hold a task forever.
            let conn = hyper::server::conn::http1::Builder::new()
                .header_read_timeout(std::time::Duration::from_secs(5))
                .timer(hyper_util::rt::TokioTimer::new())
                .serve_connection(hyper_util::rt::TokioIo::new(sock), service);
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "admin connection ended with an error");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(port: u16, path: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("admin server accepts");
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.unwrap();
        let text = String::from_utf8_lossy(&buf).to_string();
        let code = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).expect("a status line");
        (code, text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
    }

    #[tokio::test]
    async fn the_admin_server_answers_metrics_health_and_readiness() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let m = Metrics::new();
        tokio::spawn(serve(([127, 0, 0, 1], port).into(), m.clone()));
        let mut tries = 0;
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            tries += 1;
            assert!(tries < 500, "the admin server never listened");
            tokio::task::yield_now().await;
        }
        let (code, body) = get(port, "/metrics").await;
        assert_eq!(code, 200);
        assert!(body.contains("winpool_reconcile_errors_total{reason=\"patch_node\"} 0"), "every error label exists at 0");
        assert!(body.contains("process_resident_memory_bytes"), "the process collector is registered");
        assert_eq!(get(port, "/healthz").await.0, 200);
        m.leader.set(1);
        m.not_ready_because.lock().unwrap().push("the CRD windowsnodereports.winpool.dev is not installed: …".into());
        let (code, body) = get(port, "/readyz").await;
        assert_eq!(code, 503);
        assert!(body.contains("caches not synced") && body.contains("windowsnodereports.winpool.dev"), "{body}");
        assert_eq!(get(port, "/readyz").await.0, 503, "a leader whose caches are not synced is not ready");
        m.caches_synced.set(1);
        assert_eq!(get(port, "/readyz?verbose").await.0, 200);
        assert_eq!(get(port, "/nope").await.0, 404);
    }

    #[test]
    fn healthz_fails_while_a_pool_with_nodes_in_flight_goes_unreconciled() {
        let m = Metrics::new();
        let long_ago = std::time::Instant::now().checked_sub(WEDGED_AFTER + std::time::Duration::from_secs(5)).expect("a monotonic past");
        m.in_flight.lock().unwrap().insert("win22".into(), long_ago);
        assert_eq!(respond("/healthz", &m).0, StatusCode::OK, "a standby reconciles nothing: never wedged");
        m.leader.set(1);
        let (code, _, body) = respond("/healthz", &m);
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("pool win22 has nodes in flight") && body.contains("has ended for 60"), "{body}");
        m.reconciled("win22");
        assert_eq!(respond("/healthz", &m).0, StatusCode::OK, "a reconcile that ended, well or not, is not wedged");
        m.in_flight.lock().unwrap().insert("win22".into(), long_ago);
        m.forget_pool("win22");
        assert_eq!(respond("/healthz", &m).0, StatusCode::OK, "a deleted pool is not waited for");
        // A pool with nothing in flight may rest for ever.
        m.reconciled("idle");
        assert_eq!(respond("/healthz", &m).0, StatusCode::OK);
    }

    #[test]
    fn a_pool_has_one_info_series_replaced_when_its_target_changes_and_none_once_deleted() {
        let m = Metrics::new();
        let info = |m: &Metrics| m.render().lines().filter(|l| l.starts_with("winpool_pool_info{")).map(String::from).collect::<Vec<_>>();
        m.observe_pool_info("p", "ltsc2022", "10.0.20348.2762", "aaa");
        m.observe_pool_info("p", "ltsc2022", "10.0.20348.2762", "aaa");
        m.observe_pool_info("q", "ltsc2019", "10.0.17763.6414", "ccc");
        m.observe_pool_info("p", "ltsc2022", "10.0.20348.2800", "bbb");
        assert_eq!(
            info(&m),
            [
                r#"winpool_pool_info{os_version="ltsc2019",patch_level="10.0.17763.6414",pool="q",revision="ccc"} 1"#,
                r#"winpool_pool_info{os_version="ltsc2022",patch_level="10.0.20348.2800",pool="p",revision="bbb"} 1"#,
            ]
        );
        m.forget_pool("p");
        assert_eq!(info(&m).len(), 1, "{:?}", info(&m));
    }

    /// docs/METRICS.md is the reference users build dashboards and alerts
    /// from: every series the operator registers has a row there, and every
    /// row names a series it registers.
    #[test]
    fn every_metric_is_documented_and_every_documented_metric_exists() {
        fn names<'a>(text: &'a str, prefix: &str) -> std::collections::BTreeSet<&'a str> {
            text.split(prefix)
                .skip(1)
                .filter_map(|rest| rest.split(|c: char| !(c.is_ascii_lowercase() || c == '_')).next())
                .filter(|n| !n.is_empty())
                .collect()
        }
        let registered = names(include_str!("metrics.rs"), "\"winpool_");
        let documented = names(include_str!("../../docs/METRICS.md"), "| `winpool_");
        assert!(registered.len() > 20, "{registered:?}");
        assert_eq!(registered, documented, "src/controller/metrics.rs and docs/METRICS.md disagree");
    }
}
