//! The rollout's invariants (issue 10), checked on samples of the cluster.
//!
//! A test samples the nodes of a pool, the pool and the revision ConfigMaps every
//! few hundred milliseconds while it disturbs the cluster, and feeds each
//! [`Sample`] to a [`Checker`]. The checks themselves are pure functions over
//! plain structs, so the tests at the bottom can plant a bug in a hand-made
//! state and see it caught.
//!
//! Invariants:
//! - at most maxUnavailable nodes unavailable at once (cordoned by winpool, or
//!   Draining/Applying/Verifying), maxUnavailable resolved like the operator does;
//! - no node drained twice for one revision;
//! - no node left cordoned by winpool once its own rollout is over, nor while
//!   the pool says it is done or paused with nothing in flight;
//! - no node whose revision label names a revision ConfigMap that does not exist;
//! - at the end, the pool's status counts agree with the nodes.
//!
//! Two samples of the API are never one snapshot: nodes, the pool and the
//! ConfigMaps are listed one after the other while the operator writes. A check
//! that relates two objects (a node and a ConfigMap, a node and the pool's
//! status) only reports a violation that persists across two consecutive samples
//! at least [`GRACE`] apart; a check on one object (its state annotation and its
//! cordon are written in one patch) reports at once.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use winpool::api::report::WindowsNodeReport;
use winpool::api::{NodeCounts, WindowsNodePool, conditions, names};

/// How long a violation between two objects must persist before it counts.
///
/// The operator writes a revision's ConfigMap before it labels any node for
/// it, and deletes a ConfigMap only after no node carries its revision; but a
/// sample lists nodes and ConfigMaps in two requests, so a node can be seen
/// moving off a revision whose ConfigMap the next request no longer finds.
/// Likewise the pool's status and its nodes are read apart. A real violation
/// persists; the race between two reads does not survive a second sample.
pub const GRACE: Duration = Duration::from_secs(1);

const IN_FLIGHT: [&str; 3] = ["Draining", "Applying", "Verifying"];

/// One node, as the invariants need it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeSample {
    pub name: String,
    pub pool_label: Option<String>,
    pub revision_label: Option<String>,
    pub state: Option<String>,
    pub started_at: Option<String>,
    pub target_revision: Option<String>,
    pub drained_revision: Option<String>,
    /// `winpool.dev/cordoned: "true"`.
    pub cordoned_by_winpool: bool,
    pub unschedulable: bool,
    /// The node's agent reports Applying, Rebooting or RebootRequired for the
    /// start in flight (its WindowsNodeReport): the host may still be
    /// installing, or holds an update that waits for its reboot.
    pub agent_installing: bool,
    /// `winpool.dev/drain-blocked-by`: a PodDisruptionBudget held its drain
    /// past putBackAfter and winpool put it back to start again later.
    pub drain_blocked_by: Option<String>,
}

impl NodeSample {
    pub fn from_node(n: &Node, reports: &[WindowsNodeReport]) -> Self {
        let ann = |k: &str| n.annotations().get(k).cloned();
        let (target, started) = (ann(names::ANN_TARGET_REVISION), ann(names::ANN_STARTED_AT));
        let agent_installing =
            reports.iter().filter(|r| r.name_any() == n.name_any()).filter_map(|r| r.observations().apply.as_ref()).any(|a| {
                matches!(a.status.as_str(), "Applying" | "Rebooting" | "RebootRequired")
                    && Some(&a.revision) == target.as_ref()
                    && (a.started_at.is_none() || a.started_at == started)
            });
        NodeSample {
            name: n.name_any(),
            pool_label: n.labels().get(names::LABEL_POOL).cloned(),
            revision_label: n.labels().get(names::LABEL_REVISION).cloned(),
            state: ann(names::ANN_STATE),
            started_at: ann(names::ANN_STARTED_AT),
            target_revision: ann(names::ANN_TARGET_REVISION),
            drained_revision: ann(names::ANN_DRAINED_REVISION),
            cordoned_by_winpool: ann(names::ANN_CORDONED_BY_WINPOOL).as_deref() == Some("true"),
            unschedulable: n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false),
            agent_installing,
            drain_blocked_by: ann(names::ANN_DRAIN_BLOCKED_BY),
        }
    }

    /// Failed, and kept cordoned by winpool because its host may still be installing.
    pub fn held_mid_install(&self) -> bool {
        self.state.as_deref() == Some("Failed") && self.agent_installing
    }

    pub fn in_flight(&self) -> bool {
        self.state.as_deref().is_some_and(|s| IN_FLIGHT.contains(&s))
    }

    /// Cordoned, and by winpool.
    pub fn winpool_cordoned(&self) -> bool {
        self.cordoned_by_winpool && self.unschedulable
    }

    /// Taken out of service by the rollout.
    pub fn unavailable(&self) -> bool {
        self.in_flight() || self.winpool_cordoned()
    }

    fn state_str(&self) -> &str {
        self.state.as_deref().unwrap_or("<none>")
    }
}

/// The pool, as the invariants need it.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolSample {
    pub name: String,
    pub generation: Option<i64>,
    pub observed_generation: Option<i64>,
    pub revision: Option<String>,
    pub counts: NodeCounts,
    /// Condition Ready is True.
    pub ready: bool,
    /// Condition Paused is True (by spec or by the failure limit).
    pub paused: bool,
    pub max_unavailable: IntOrString,
}

impl PoolSample {
    pub fn from_pool(p: &WindowsNodePool) -> Self {
        let st = p.status.clone().unwrap_or_default();
        let is = |t: &str| st.conditions.iter().any(|c| c.type_ == t && c.status == "True");
        PoolSample {
            name: p.name_any(),
            generation: p.metadata.generation,
            observed_generation: st.observed_generation,
            revision: st.revision.clone(),
            counts: st.nodes.clone(),
            ready: is(conditions::READY),
            paused: is(conditions::PAUSED),
            max_unavailable: p.spec.rollout.max_unavailable.clone(),
        }
    }

    /// The operator says the rollout of the current spec is over, or held with nothing in flight.
    pub fn settled(&self) -> bool {
        let current = self.observed_generation.is_some() && self.observed_generation == self.generation;
        current && self.counts.updating == 0 && (self.ready || self.paused)
    }
}

/// One look at the cluster: the pool's nodes, the pool, and its revision ConfigMaps' revisions.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// When, since the checker's epoch (only differences matter).
    pub at: Duration,
    pub pool: PoolSample,
    pub nodes: Vec<NodeSample>,
    /// Revisions (label `winpool.dev/revision`) of the pool's revision ConfigMaps that exist and are not being deleted.
    pub config_revisions: BTreeSet<String>,
}

impl Sample {
    pub fn from_cluster(
        at: Duration,
        pool: &WindowsNodePool,
        nodes: &[Node],
        configmaps: &[ConfigMap],
        reports: &[WindowsNodeReport],
    ) -> Self {
        let name = pool.name_any();
        let config_revisions = configmaps
            .iter()
            .filter(|d| d.metadata.deletion_timestamp.is_none())
            .filter(|d| d.labels().get(names::LABEL_POOL) == Some(&name))
            .filter_map(|d| d.labels().get(names::LABEL_REVISION).cloned())
            .collect();
        Sample {
            at,
            pool: PoolSample::from_pool(pool),
            nodes: nodes.iter().map(|n| NodeSample::from_node(n, reports)).collect(),
            config_revisions,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    TooManyUnavailable,
    DrainedTwice,
    StrandedCordon,
    MissingConfigMap,
    StatusMismatch,
    /// A Node written by an agent's identity (it has no right to any).
    AgentWroteNode,
    /// winpool uncordoned a node whose agent reported it installing or rebooting.
    UncordonedMidInstall,
    /// winpool evicted a pod from a node it had not put in Draining.
    EvictedOffDrain,
    /// An operator replica wrote while another held the leader Lease.
    WroteWithoutLease,
    /// A replica deposed (frozen, cut off) still ran after the standby took the Lease.
    DeposedLeaderStayed,
    /// A replica leading with its clock skewed past the bound started a node or failed one.
    ActedOnSkewedClock,
    /// A replica leading with a skewed clock held the rollout without saying why.
    SkewUnsaid,
    /// The leader lost its Lease while API Priority and Fairness refused the operator's other writes.
    LeaseLostUnderThrottle,
    /// winpool set a node Applying that it had not cordoned and drained since it was last uncordoned or given back.
    AppliedUndrained,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub at: Duration,
    pub kind: Kind,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[t={:.1}s] {:?}: {}", self.at.as_secs_f64(), self.kind, self.message)
    }
}

// ---- The checks: pure functions of one sample. ----

/// More nodes out of service than maxUnavailable (resolved against the pool size
/// like the operator: a percentage rounds down, never below one node).
pub fn too_many_unavailable(nodes: &[NodeSample], max_unavailable: &IntOrString) -> Option<String> {
    let limit = allowed_unavailable(max_unavailable, nodes.len());
    let out: Vec<String> = nodes.iter().filter(|n| n.unavailable()).map(|n| format!("{} ({})", n.name, n.state_str())).collect();
    (out.len() > limit).then(|| {
        format!(
            "{} of {} nodes unavailable, maxUnavailable {} allows {limit}: {}",
            out.len(),
            nodes.len(),
            match max_unavailable {
                IntOrString::Int(i) => i.to_string(),
                IntOrString::String(s) => s.clone(),
            },
            out.join(", ")
        )
    })
}

/// maxUnavailable as the API documents it (`spec.rollout.maxUnavailable`: a
/// number of nodes, or a percentage of the pool rounded down but at least one
/// node), resolved here rather than by the operator's own function.
fn allowed_unavailable(max: &IntOrString, pool: usize) -> usize {
    match max {
        IntOrString::Int(i) => usize::try_from(*i).unwrap_or(0),
        IntOrString::String(s) => {
            let pct: usize = s.trim_end_matches('%').parse().unwrap_or_else(|_| panic!("maxUnavailable {s:?} is not a percentage"));
            (pool * pct / 100).max(1)
        }
    }
}

/// Nodes cordoned by winpool although their own rollout is not in flight:
/// the cordon and the state are written in one patch, so this is never a race.
/// A Failed node whose agent still reports an install in flight is held, not
/// stranded: back in service it would run half-patched.
pub fn stranded_cordons(nodes: &[NodeSample]) -> Vec<(String, String)> {
    nodes
        .iter()
        .filter(|n| n.winpool_cordoned() && !n.in_flight() && !n.held_mid_install())
        .map(|n| (n.name.clone(), format!("{} is cordoned by winpool but its state is {}", n.name, n.state_str())))
        .collect()
}

/// Nodes cordoned by winpool while the pool says its rollout is done or paused with nothing in flight.
pub fn cordoned_while_settled(nodes: &[NodeSample], pool: &PoolSample) -> Vec<(String, String)> {
    if !pool.settled() {
        return Vec::new();
    }
    let why = if pool.ready { "done" } else { "paused" };
    nodes
        .iter()
        .filter(|n| n.winpool_cordoned() && !n.held_mid_install())
        .map(|n| (n.name.clone(), format!("{} is still cordoned by winpool although the rollout is {why} ({})", n.name, n.state_str())))
        .collect()
}

/// A Draining node whose drained-revision already is its target: it is being drained a second time.
pub fn draining_an_already_drained_revision(nodes: &[NodeSample]) -> Vec<(String, String)> {
    nodes
        .iter()
        .filter(|n| n.state.as_deref() == Some("Draining"))
        .filter(|n| n.target_revision.is_some() && n.target_revision == n.drained_revision)
        .map(|n| {
            let rev = n.target_revision.clone().unwrap_or_default();
            (
                format!("{}/{rev}", n.name),
                format!("{} is Draining for revision {rev}, which its drained-revision says was drained already", n.name),
            )
        })
        .collect()
}

/// (node, revision) pairs whose revision label names no existing revision ConfigMap of the pool.
pub fn missing_configs(nodes: &[NodeSample], pool: &str, config_revisions: &BTreeSet<String>) -> Vec<(String, String)> {
    nodes
        .iter()
        .filter(|n| n.pool_label.as_deref() == Some(pool))
        .filter_map(|n| n.revision_label.as_ref().map(|r| (n, r)))
        .filter(|(_, r)| !config_revisions.contains(*r))
        .map(|(n, r)| (n.name.clone(), r.clone()))
        .collect()
}

/// Whether the pool's status counts agree with what the nodes say. Only meaningful
/// once the rollout has converged: mid-rollout the two are read apart.
pub fn status_disagreements(nodes: &[NodeSample], pool: &PoolSample) -> Vec<String> {
    let mut out = Vec::new();
    let rev = pool.revision.as_deref();
    let mut want = NodeCounts { total: nodes.len() as i32, ..Default::default() };
    for n in nodes {
        match n.state.as_deref() {
            Some("Updated") if rev.is_some() && n.revision_label.as_deref() == rev => want.updated += 1,
            Some("Failed") => want.failed += 1,
            _ if n.in_flight() => want.updating += 1,
            _ => want.pending += 1,
        }
    }
    if pool.counts != want {
        out.push(format!("pool {} reports {:?}, its nodes say {:?}", pool.name, pool.counts, want));
    }
    if pool.observed_generation != pool.generation {
        out.push(format!(
            "pool {} status is for generation {:?}, the spec is generation {:?}",
            pool.name, pool.observed_generation, pool.generation
        ));
    }
    let complete = want.total > 0 && want.updated == want.total;
    if pool.ready != complete {
        out.push(format!("pool {} says Ready={} but {} of {} nodes are Updated", pool.name, pool.ready, want.updated, want.total));
    }
    out
}

/// (node, revision) pairs drained more than once (`audit::drains_per_node`).
pub fn drained_twice(drains: &BTreeMap<(String, String), usize>) -> Vec<String> {
    drains.iter().filter(|(_, c)| **c > 1).map(|((n, r), c)| format!("{n} was cordoned and drained {c} times for revision {r}")).collect()
}

// ---- The stateful checker. ----

/// Keys that must stay present over consecutive samples at least `GRACE` apart before they count.
#[derive(Debug, Default)]
struct Persisting {
    since: BTreeMap<String, Duration>,
}

impl Persisting {
    /// Feed this sample's keys; returns those present in this and the previous samples since ≥ GRACE ago.
    fn update(&mut self, at: Duration, keys: impl IntoIterator<Item = String>) -> Vec<String> {
        let keys: BTreeSet<String> = keys.into_iter().collect();
        self.since.retain(|k, _| keys.contains(k));
        let mut out = Vec::new();
        for k in keys {
            let first = *self.since.entry(k.clone()).or_insert(at);
            if at.saturating_sub(first) >= GRACE {
                out.push(k);
            }
        }
        out
    }
}

/// Feeds on samples, keeps what must be remembered between them, and collects violations.
#[derive(Debug, Default)]
pub struct Checker {
    /// (node, target revision) -> started-at when first seen Draining.
    drains: BTreeMap<(String, String), String>,
    missing_cm: Persisting,
    settled_cordons: Persisting,
    reported: BTreeSet<(Kind, String)>,
    pub violations: Vec<Violation>,
    pub samples: usize,
    /// The most nodes seen unavailable at once.
    pub peak_unavailable: usize,
}

impl Checker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Record once per (kind, key): a standing problem is one violation, not one per sample.
    fn record(&mut self, at: Duration, kind: Kind, key: String, message: String) {
        if self.reported.insert((kind, key)) {
            self.violations.push(Violation { at, kind, message });
        }
    }

    /// Check one sample taken during the rollout.
    pub fn observe(&mut self, s: &Sample) {
        self.samples += 1;
        let at = s.at;
        self.peak_unavailable = self.peak_unavailable.max(s.nodes.iter().filter(|n| n.unavailable()).count());

        if let Some(msg) = too_many_unavailable(&s.nodes, &s.pool.max_unavailable) {
            self.record(at, Kind::TooManyUnavailable, msg.clone(), msg);
        }

        // Put back (Pending, a budget named): its next start is the retry
        // drain.putBackAfter promises, not a second drain. The retry waits
        // putBackAfter, so a sample always sees the node put back. So is a
        // Failed node's: only a person's retry starts it again (the soak's
        // waits RETRY_AFTER, so a sample sees it Failed).
        let retried_later = |n: &&NodeSample| {
            (n.state.as_deref() == Some("Pending") && n.drain_blocked_by.is_some()) || n.state.as_deref() == Some("Failed")
        };
        for n in s.nodes.iter().filter(retried_later) {
            self.drains.retain(|(node, _), _| *node != n.name);
        }
        for n in s.nodes.iter().filter(|n| n.state.as_deref() == Some("Draining")) {
            let (Some(rev), Some(started)) = (&n.target_revision, &n.started_at) else { continue };
            let key = (n.name.clone(), rev.clone());
            match self.drains.get(&key) {
                None => {
                    self.drains.insert(key, started.clone());
                }
                Some(first) if first != started => {
                    let msg = format!("{} drained twice for revision {rev}: started at {first}, again at {started}", n.name);
                    self.record(at, Kind::DrainedTwice, format!("{}/{rev}/{started}", n.name), msg);
                }
                Some(_) => {}
            }
        }
        for (key, msg) in draining_an_already_drained_revision(&s.nodes) {
            self.record(at, Kind::DrainedTwice, key, msg);
        }

        for (node, msg) in stranded_cordons(&s.nodes) {
            self.record(at, Kind::StrandedCordon, format!("{node}/{msg}"), msg);
        }
        let settled = cordoned_while_settled(&s.nodes, &s.pool);
        let persisted = self.settled_cordons.update(at, settled.iter().map(|(n, _)| n.clone()));
        for (node, msg) in settled.into_iter().filter(|(n, _)| persisted.contains(n)) {
            self.record(at, Kind::StrandedCordon, format!("settled/{node}"), msg);
        }

        let missing = missing_configs(&s.nodes, &s.pool.name, &s.config_revisions);
        let persisted = self.missing_cm.update(at, missing.iter().map(|(n, r)| format!("{n} -> {r}")));
        for (node, rev) in missing {
            let key = format!("{node} -> {rev}");
            if persisted.contains(&key) {
                let msg = format!(
                    "{node} carries {}={rev} but the pool has no ConfigMap for that revision (has {:?})",
                    names::LABEL_REVISION,
                    s.config_revisions
                );
                self.record(at, Kind::MissingConfigMap, key, msg);
            }
        }
    }

    /// Check the final sample, after the test saw the rollout converge: everything
    /// that needed a grace mid-rollout must now hold exactly.
    pub fn finish(&mut self, s: &Sample) {
        self.observe(s);
        let at = s.at;
        for n in s.nodes.iter().filter(|n| (n.winpool_cordoned() || n.cordoned_by_winpool) && !n.held_mid_install()) {
            let msg = format!("{} is still marked cordoned by winpool after the rollout ({})", n.name, n.state_str());
            self.record(at, Kind::StrandedCordon, format!("final/{}", n.name), msg);
        }
        for (node, rev) in missing_configs(&s.nodes, &s.pool.name, &s.config_revisions) {
            let msg = format!("{node} carries revision {rev} but the pool has no ConfigMap for it at the end");
            self.record(at, Kind::MissingConfigMap, format!("final/{node}"), msg);
        }
        for msg in status_disagreements(&s.nodes, &s.pool) {
            self.record(at, Kind::StatusMismatch, msg.clone(), msg);
        }
    }

    /// Drains as the API server recorded them (`audit::drains_per_node`):
    /// complements sampling, since a drain that starts and ends between two
    /// samples still shows there.
    pub fn check_drains(&mut self, at: Duration, drains: &BTreeMap<(String, String), usize>) {
        for msg in drained_twice(drains) {
            self.record(at, Kind::DrainedTwice, format!("audit/{msg}"), msg);
        }
    }

    /// maxUnavailable replayed from every node write the API server completed
    /// (`audit::in_flight_peak`), not sampled: a start and a finish between two
    /// samples still count. `pool_size` resolves a percentage (the pool's
    /// largest size: nodes come and go in the soak).
    pub fn check_in_flight_replayed(
        &mut self,
        at: Duration,
        peak: &(usize, Vec<String>, Option<jiff::Timestamp>),
        max_unavailable: &IntOrString,
        pool_size: usize,
    ) {
        let limit = allowed_unavailable(max_unavailable, pool_size);
        if peak.0 > limit {
            let when = peak.2.map(|t| t.to_string()).unwrap_or_default();
            let msg = format!("audit: {} nodes in flight at {when} ({}), maxUnavailable allows {limit}", peak.0, peak.1.join(", "));
            self.record(at, Kind::TooManyUnavailable, "audit/in-flight".into(), msg);
        }
    }

    /// Node writes by the agents' identity, from the audit log: there must be none.
    pub fn check_agent_node_writes(&mut self, at: Duration, writes: &[crate::support::audit::Request]) {
        for w in writes {
            let msg = format!("audit: {} {} {}/{} by {} ({})", w.verb, w.resource, w.subresource, w.name, w.user, w.code);
            self.record(at, Kind::AgentWroteNode, format!("audit/{}/{}", w.verb, w.name), msg);
        }
    }

    /// Uncordons and evictions replayed from the audit log
    /// (`audit::uncordons_mid_install`, `audit::evictions_off_drain`): each
    /// violation found, recorded.
    pub fn check_replayed(&mut self, at: Duration, kind: Kind, violations: &[String]) {
        for msg in violations {
            self.record(at, kind, format!("audit/{msg}"), format!("audit: {msg}"));
        }
    }

    /// A violation the soak saw happen, outside the samples and the audit log.
    pub fn check_seen(&mut self, at: Duration, kind: Kind, violation: Option<String>) {
        if let Some(msg) = violation {
            self.record(at, kind, msg.clone(), msg);
        }
    }

    pub fn kinds(&self) -> BTreeSet<Kind> {
        self.violations.iter().map(|v| v.kind).collect()
    }

    pub fn report(&self) -> String {
        if self.violations.is_empty() {
            return format!("invariants held over {} samples (peak unavailable {})", self.samples, self.peak_unavailable);
        }
        let mut s = format!("{} invariant violations over {} samples:\n", self.violations.len(), self.samples);
        for v in &self.violations {
            s.push_str(&format!("  {v}\n"));
        }
        s
    }

    pub fn assert_clean(&self) {
        assert!(self.violations.is_empty(), "{}", self.report());
    }
}

#[cfg(test)]
mod tests {
    //! The checker on hand-made states: a good rollout passes, each planted bug is caught.
    use super::*;

    const POOL: &str = "p";

    fn node(name: &str, state: &str, rev: &str) -> NodeSample {
        let in_flight = IN_FLIGHT.contains(&state);
        NodeSample {
            name: name.into(),
            pool_label: Some(POOL.into()),
            revision_label: Some(rev.into()),
            state: Some(state.into()),
            started_at: in_flight.then(|| "2026-11-29T12:00:00Z".into()),
            target_revision: in_flight.then(|| rev.into()),
            drained_revision: None,
            cordoned_by_winpool: in_flight,
            unschedulable: in_flight,
            agent_installing: false,
            drain_blocked_by: None,
        }
    }

    fn pool(mu: IntOrString, nodes: &[NodeSample], rev: &str) -> PoolSample {
        let count = |s: &str| nodes.iter().filter(|n| n.state.as_deref() == Some(s)).count() as i32;
        let updating = nodes.iter().filter(|n| n.in_flight()).count() as i32;
        let counts = NodeCounts {
            total: nodes.len() as i32,
            updated: count("Updated"),
            updating,
            pending: count("Pending"),
            failed: count("Failed"),
        };
        PoolSample {
            name: POOL.into(),
            generation: Some(1),
            observed_generation: Some(1),
            revision: Some(rev.into()),
            ready: counts.updated == counts.total,
            paused: false,
            counts,
            max_unavailable: mu,
        }
    }

    fn sample(at_ms: u64, nodes: Vec<NodeSample>, mu: IntOrString, ds: &[&str]) -> Sample {
        Sample {
            at: Duration::from_millis(at_ms),
            pool: pool(mu, &nodes, "r1"),
            nodes,
            config_revisions: ds.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_good_rollout_passes() {
        let mut c = Checker::new();
        let two = IntOrString::Int(2);
        c.observe(&sample(
            0,
            vec![node("a", "Draining", "r1"), node("b", "Applying", "r1"), node("c", "Pending", "r0")],
            two.clone(),
            &["r0", "r1"],
        ));
        c.observe(&sample(
            500,
            vec![node("a", "Applying", "r1"), node("b", "Updated", "r1"), node("c", "Draining", "r1")],
            two.clone(),
            &["r0", "r1"],
        ));
        // r0's DaemonSet went away once no node carried it.
        c.finish(&sample(1000, vec![node("a", "Updated", "r1"), node("b", "Updated", "r1"), node("c", "Updated", "r1")], two, &["r1"]));
        c.assert_clean();
        assert_eq!(c.peak_unavailable, 2);
    }

    #[test]
    fn planted_bug_too_many_unavailable_is_caught() {
        // 10% of 30 nodes is 3; four are out.
        let mut nodes: Vec<NodeSample> = (0..30).map(|i| node(&format!("n{i}"), "Pending", "r1")).collect();
        for n in nodes.iter_mut().take(3) {
            *n = node(&n.name.clone(), "Applying", "r1");
        }
        let pct = IntOrString::String("10%".into());
        assert_eq!(too_many_unavailable(&nodes, &pct), None, "three of thirty is within 10%");
        // The fourth is not in flight, but winpool's cordon is still on it: it counts.
        nodes[3].cordoned_by_winpool = true;
        nodes[3].unschedulable = true;
        let mut c = Checker::new();
        c.observe(&sample(0, nodes, pct, &["r1"]));
        assert!(c.kinds().contains(&Kind::TooManyUnavailable), "{}", c.report());
        // Percentages never resolve below one node; a small pool still moves one at a time, not two.
        let small = vec![node("a", "Draining", "r1"), node("b", "Verifying", "r1"), node("c", "Pending", "r1")];
        assert!(too_many_unavailable(&small, &IntOrString::String("10%".into())).is_some());
        assert!(too_many_unavailable(&small[..1], &IntOrString::String("10%".into())).is_none());
    }

    #[test]
    fn planted_bug_drained_twice_is_caught() {
        let mut c = Checker::new();
        let mu = IntOrString::Int(5);
        let first = node("a", "Draining", "r1");
        c.observe(&sample(0, vec![first.clone()], mu.clone(), &["r1"]));
        c.observe(&sample(500, vec![node("a", "Applying", "r1")], mu.clone(), &["r1"]));
        // The same node cordoned and drained again for the same revision: a new started-at.
        let mut again = first.clone();
        again.started_at = Some("2026-11-29T12:03:00Z".into());
        c.observe(&sample(1000, vec![again.clone()], mu.clone(), &["r1"]));
        assert_eq!(c.kinds(), BTreeSet::from([Kind::DrainedTwice]), "{}", c.report());

        // Put back by a budget in between (Pending, the budget named): the second start is the retry.
        let mut c = Checker::new();
        c.observe(&sample(0, vec![first.clone()], mu.clone(), &["r1"]));
        let mut put_back = node("a", "Pending", "r1");
        put_back.drain_blocked_by = Some("ns/web".into());
        c.observe(&sample(500, vec![put_back], mu.clone(), &["r1"]));
        c.observe(&sample(60_500, vec![again.clone()], mu.clone(), &["r1"]));
        c.assert_clean();

        // Failed in between: the second start is a person's retry.
        let mut c = Checker::new();
        c.observe(&sample(0, vec![first.clone()], mu.clone(), &["r1"]));
        c.observe(&sample(500, vec![node("a", "Failed", "r1")], mu.clone(), &["r1"]));
        c.observe(&sample(4_000, vec![again], mu.clone(), &["r1"]));
        c.assert_clean();

        // Draining for a revision its drained-revision already names.
        let mut c = Checker::new();
        let mut d = node("b", "Draining", "r2");
        d.drained_revision = Some("r2".into());
        c.observe(&sample(0, vec![d], mu.clone(), &["r2"]));
        assert_eq!(c.kinds(), BTreeSet::from([Kind::DrainedTwice]), "{}", c.report());

        // A drain for a new revision, and a retarget mid-drain (same started-at), are fine.
        let mut c = Checker::new();
        c.observe(&sample(0, vec![node("a", "Draining", "r1")], mu.clone(), &["r1"]));
        let mut retarget = node("a", "Draining", "r2");
        retarget.revision_label = Some("r1".into());
        c.observe(&sample(500, vec![retarget], mu.clone(), &["r1", "r2"]));
        c.assert_clean();

        // The API server's record: one drain per (node, revision) is right, two is the bug.
        let drains = |n2: usize| {
            BTreeMap::from([(("n1".into(), "aaa".into()), 1), (("n2".into(), "aaa".into()), n2), (("n1".into(), "bbb".into()), 1)])
        };
        let mut c = Checker::new();
        c.check_drains(Duration::ZERO, &drains(1));
        c.assert_clean();
        c.check_drains(Duration::ZERO, &drains(2));
        assert_eq!(c.violations.len(), 1, "{}", c.report());
        assert!(c.violations[0].message.contains("n2 was cordoned and drained 2 times for revision aaa"), "{}", c.report());
    }

    #[test]
    fn planted_bug_stranded_cordon_is_caught() {
        let mu = IntOrString::Int(5);
        // Updated, but winpool's cordon is still on: caught at once, mid-rollout.
        let mut stuck = node("a", "Updated", "r1");
        stuck.cordoned_by_winpool = true;
        stuck.unschedulable = true;
        let mut c = Checker::new();
        c.observe(&sample(0, vec![stuck.clone(), node("b", "Draining", "r1")], mu.clone(), &["r1"]));
        assert_eq!(c.kinds(), BTreeSet::from([Kind::StrandedCordon]), "{}", c.report());

        // An administrator's cordon is not winpool's: not a violation.
        let mut admin = node("c", "Updated", "r1");
        admin.unschedulable = true;
        let mut c = Checker::new();
        c.finish(&sample(0, vec![admin], mu.clone(), &["r1"]));
        c.assert_clean();

        // Paused with nothing in flight (the operator's own status says so) but a node still
        // cordoned in a state that claims it is in flight: the operator's status and nodes disagree.
        let mut paused = pool(mu.clone(), &[], "r1");
        paused.paused = true;
        paused.ready = false;
        paused.counts = NodeCounts { total: 2, updated: 1, updating: 0, pending: 1, failed: 0 };
        let nodes = vec![node("a", "Updated", "r1"), node("d", "Verifying", "r1")];
        let mut c = Checker::new();
        for at in [0, 600, 1200] {
            c.observe(&Sample {
                at: Duration::from_millis(at),
                pool: paused.clone(),
                nodes: nodes.clone(),
                config_revisions: ["r1".to_string()].into(),
            });
        }
        assert_eq!(c.kinds(), BTreeSet::from([Kind::StrandedCordon]), "{}", c.report());
        assert!(c.violations[0].message.contains("paused"), "{}", c.report());

        // Failed and kept cordoned while its agent reports an install in flight:
        // held, not stranded; once the agent reports a result, stranded.
        let mut held = node("e", "Failed", "r1");
        (held.cordoned_by_winpool, held.unschedulable, held.agent_installing) = (true, true, true);
        let mut c = Checker::new();
        c.finish(&sample(0, vec![held.clone()], mu.clone(), &["r1"]));
        c.assert_clean();
        held.agent_installing = false;
        let mut c = Checker::new();
        c.observe(&sample(0, vec![held], mu.clone(), &["r1"]));
        assert_eq!(c.kinds(), BTreeSet::from([Kind::StrandedCordon]), "{}", c.report());
    }

    #[test]
    fn planted_bug_missing_daemonset_is_caught_after_the_grace() {
        let mu = IntOrString::Int(5);
        let nodes = vec![node("a", "Updated", "r1"), node("b", "Applying", "r2")];
        let mut c = Checker::new();
        // One sample without r2's DaemonSet: could be two reads racing the operator.
        c.observe(&sample(0, nodes.clone(), mu.clone(), &["r1"]));
        c.observe(&sample(500, nodes.clone(), mu.clone(), &["r1"]));
        assert!(c.violations.is_empty(), "within the grace: {}", c.report());
        // It comes back: the race resolved, the clock restarts.
        c.observe(&sample(900, nodes.clone(), mu.clone(), &["r1", "r2"]));
        c.observe(&sample(1500, nodes.clone(), mu.clone(), &["r1"]));
        c.observe(&sample(2000, nodes.clone(), mu.clone(), &["r1"]));
        assert!(c.violations.is_empty(), "{}", c.report());
        // Still missing a second later: a real violation.
        c.observe(&sample(2600, nodes.clone(), mu.clone(), &["r1"]));
        assert_eq!(c.kinds(), BTreeSet::from([Kind::MissingConfigMap]), "{}", c.report());
        assert!(c.violations[0].message.contains("b carries winpool.dev/revision=r2"), "{}", c.report());
        // A node of another pool is none of this pool's business.
        let mut other = node("x", "Updated", "zz");
        other.pool_label = Some("other".into());
        assert!(missing_configs(&[other], POOL, &BTreeSet::new()).is_empty());
    }

    #[test]
    fn planted_bug_status_counts_disagree_is_caught() {
        let mu = IntOrString::Int(5);
        let nodes = vec![node("a", "Updated", "r1"), node("b", "Updated", "r1"), node("c", "Failed", "r1")];
        let mut s = sample(0, nodes, mu, &["r1"]);
        let mut c = Checker::new();
        c.finish(&s);
        c.assert_clean();
        // The operator claims all three updated and Ready; the nodes say one failed.
        s.pool.counts = NodeCounts { total: 3, updated: 3, updating: 0, pending: 0, failed: 0 };
        s.pool.ready = true;
        let mut c = Checker::new();
        c.finish(&s);
        assert_eq!(c.kinds(), BTreeSet::from([Kind::StatusMismatch]), "{}", c.report());
        assert_eq!(c.violations.len(), 2, "counts and Ready both wrong: {}", c.report());
        // A node Updated at an older revision is pending for the pool's revision.
        let mut old = node("d", "Updated", "r0");
        old.revision_label = Some("r0".into());
        let p = pool(IntOrString::Int(1), &[old.clone()], "r1");
        assert_eq!(status_disagreements(&[old], &p).len(), 2, "counted updated though at r0, and Ready");
    }

    #[test]
    fn every_planted_bug_in_one_bad_cluster_state_is_caught() {
        // One hand-made bad cluster: every invariant broken at once, all five caught.
        let mu = IntOrString::Int(1);
        let mut cordoned_updated = node("a", "Updated", "r1");
        cordoned_updated.cordoned_by_winpool = true;
        cordoned_updated.unschedulable = true;
        let mut redrain = node("b", "Draining", "r1");
        redrain.drained_revision = Some("r1".into());
        let ghost = node("c", "Applying", "ghost");
        let nodes = vec![cordoned_updated, redrain, ghost];
        let mut c = Checker::new();
        for at in [0, 600, 1200] {
            c.observe(&sample(at, nodes.clone(), mu.clone(), &["r1"]));
        }
        let mut last = sample(1800, nodes, mu, &["r1"]);
        last.pool.counts.updated = 3;
        c.finish(&last);
        assert_eq!(
            c.kinds(),
            BTreeSet::from([
                Kind::TooManyUnavailable,
                Kind::DrainedTwice,
                Kind::StrandedCordon,
                Kind::MissingConfigMap,
                Kind::StatusMismatch
            ]),
            "{}",
            c.report()
        );
    }

    fn write(verb: &str, node: &str, state: Option<&str>, user_agent: &str) -> crate::support::audit::Request {
        crate::support::audit::Request {
            verb: verb.into(),
            resource: "nodes".into(),
            subresource: String::new(),
            namespace: String::new(),
            name: node.into(),
            user: "someone".into(),
            user_agent: user_agent.into(),
            code: 200,
            body: serde_json::json!({ "metadata": { "annotations": { "winpool.dev/state": state } } }),
            at: None,
            received: None,
        }
    }

    /// Replayed from the audit log: a node deleted mid-flight leaves the flight (its name
    /// starting again is a new node), another tool's patch moves nothing, and a peak over
    /// maxUnavailable is a violation.
    #[test]
    fn in_flight_replayed_from_the_audit_log() {
        use crate::support::audit::in_flight_peak;
        let w = |verb, node, state| write(verb, node, state, "winpool/0.9");
        let log = vec![
            w("patch", "a", Some("Draining")),
            w("patch", "b", Some("Draining")),
            w("delete", "a", None),
            w("patch", "c", Some("Draining")),
            write("patch", "d", Some("Applying"), "kubectl/v1.36"),
            w("patch", "b", Some("Updated")),
            w("patch", "a", Some("Draining")),
        ];
        let peak = in_flight_peak(&log);
        assert_eq!((peak.0, peak.1.clone()), (2, vec!["a".to_string(), "b".to_string()]));
        let mut c = Checker::default();
        c.check_in_flight_replayed(Duration::ZERO, &peak, &IntOrString::Int(2), 3);
        assert!(c.violations.is_empty(), "{}", c.report());
        c.check_in_flight_replayed(Duration::ZERO, &peak, &IntOrString::Int(1), 3);
        assert_eq!(c.kinds(), BTreeSet::from([Kind::TooManyUnavailable]));
    }

    /// A write answered 504 (the API server stopped waiting for etcd, which
    /// may still commit it) is replayed as landed; one refused (409, 429)
    /// is not. Seen: a node's finish answered 504 across an API server
    /// restart, the node idle after, and a replay that kept it in flight.
    #[test]
    fn a_write_answered_504_is_replayed_as_landed() {
        use crate::support::audit::in_flight_peak;
        let w = |node, state, code| {
            let mut r = write("patch", node, Some(state), "winpool/0.9");
            r.code = code;
            r
        };
        let log = vec![
            w("a", "Draining", 200),
            w("a", "Updated", 504),
            w("b", "Draining", 200),
            w("c", "Draining", 409),
            w("d", "Draining", 429),
        ];
        assert_eq!(in_flight_peak(&log).0, 1, "a finished (504), b alone in flight; c and d were refused");
    }

    /// A 504 is settled by the operator's next decision on the node: a start
    /// answered 504 then started again did not land; one followed by its next
    /// step did; a finish answered 504 then started again landed, one
    /// followed by a step in flight did not. Seen (seed 14): a leader
    /// SIGKILLed with starts on the wire, the next leader starting others.
    #[test]
    fn a_write_answered_504_is_settled_by_what_the_operator_did_next() {
        use crate::support::audit::{in_flight_peak, settled};
        let w = |node, state, code, start: bool| {
            let mut r = write("patch", node, Some(state), "winpool/0.9");
            r.code = code;
            if start {
                r.body["metadata"]["annotations"]["winpool.dev/started-at"] = serde_json::json!("t");
            }
            r
        };
        let log = settled(vec![
            w("lost", "Draining", 504, true),
            w("kept", "Draining", 504, true),
            w("done", "Draining", 200, true),
            w("done", "Updated", 504, false),
            w("stuck", "Draining", 200, true),
            w("stuck", "Pending", 504, false),
            w("kept", "Applying", 200, false),
            w("lost", "Draining", 200, true),
            w("done", "Draining", 200, true),
            w("stuck", "Applying", 200, false),
            w("alone", "Updated", 504, false),
        ]);
        let codes: Vec<u16> = log.iter().map(|r| r.code).collect();
        assert_eq!(codes, [0, 200, 200, 200, 200, 0, 200, 200, 200, 200, 504]);
        assert_eq!(in_flight_peak(&log).0, 4, "lost's first start never landed: lost, kept, done, stuck at most");
    }
    #[allow(clippy::too_many_arguments)]
    fn req(
        resource: &str,
        sub: &str,
        verb: &str,
        ns: &str,
        name: &str,
        ua: &str,
        code: u16,
        body: serde_json::Value,
    ) -> crate::support::audit::Request {
        crate::support::audit::Request {
            verb: verb.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
            user: "someone".into(),
            user_agent: ua.into(),
            code,
            body,
            at: None,
            received: None,
        }
    }

    fn node_patch(node: &str, body: serde_json::Value) -> crate::support::audit::Request {
        req("nodes", "", "patch", "", node, "winpool/0.9", 200, body)
    }

    fn start(node: &str, started_at: &str) -> crate::support::audit::Request {
        let ann =
            serde_json::json!({"winpool.dev/state": "Draining", "winpool.dev/started-at": started_at, "winpool.dev/target-revision": "r1"});
        node_patch(node, serde_json::json!({"metadata": {"annotations": ann}, "spec": {"unschedulable": true}}))
    }

    fn to_state(node: &str, state: &str, uncordon: bool) -> crate::support::audit::Request {
        let mut body = serde_json::json!({"metadata": {"annotations": {"winpool.dev/state": state}}});
        if uncordon {
            body["spec"] = serde_json::json!({"unschedulable": false});
        }
        node_patch(node, body)
    }

    /// The agent's write of its report's status as it makes it: a JSON patch of the status subresource.
    fn report(node: &str, status: &str, started_at: &str) -> crate::support::audit::Request {
        let value = serde_json::json!({"apply": {"revision": "r1", "status": status, "startedAt": started_at}});
        let ops = serde_json::json!([{"op": "add", "path": "/status", "value": value}]);
        req("windowsnodereports", "status", "patch", "agents", node, "winpool-agent/0.9", 200, ops)
    }

    /// Replayed: a node started twice for one revision is counted twice,
    /// unless a put-back (Pending, the blocking budget named) or a failure
    /// (then a person's retry) came between.
    #[test]
    fn a_second_drain_is_counted_unless_a_put_back_or_a_failure_came_between() {
        use crate::support::audit::drains_per_node;
        let key = ("a".to_string(), "r1".to_string());
        let twice = vec![start("a", "t1"), to_state("a", "Pending", true), start("a", "t2")];
        assert_eq!(drains_per_node(&twice).get(&key), Some(&2));
        let mut put_back = to_state("a", "Pending", true);
        put_back.body["metadata"]["annotations"]["winpool.dev/drain-blocked-by"] = serde_json::json!("ns/web");
        let retried = vec![start("a", "t1"), put_back, start("a", "t2")];
        assert_eq!(drains_per_node(&retried).get(&key), Some(&1));
        let failed = vec![start("a", "t1"), to_state("a", "Failed", true), start("a", "t2")];
        assert_eq!(drains_per_node(&failed).get(&key), Some(&1));
    }

    /// Replayed: a node set Applying after its own cordon and drain passes;
    /// one uncordoned between (by `kubectl uncordon`, whose patch removes
    /// the field, or by a merge patch to false) is caught.
    #[test]
    fn an_applying_node_uncordoned_since_its_drain_is_caught() {
        use crate::support::audit::applied_undrained;
        let applying = || to_state("a", "Applying", false);
        let kubectl = |unschedulable: serde_json::Value| {
            let body = serde_json::json!({"spec": {"unschedulable": unschedulable}});
            req("nodes", "", "patch", "", "a", "kubectl/v1.34.1", 200, body)
        };
        let (judged, bad) = applied_undrained(&[start("a", "t1"), applying()]);
        assert_eq!((judged, bad.len()), (1, 0), "{bad:?}");
        for uncordon in [serde_json::Value::Null, serde_json::json!(false)] {
            let (judged, bad) = applied_undrained(&[start("a", "t1"), kubectl(uncordon.clone()), applying()]);
            assert_eq!((judged, bad.len()), (1, 1), "uncordoned with {uncordon}: {bad:?}");
        }
        let (_, bad) = applied_undrained(&[start("a", "t1"), kubectl(serde_json::json!(true)), applying()]);
        assert!(bad.is_empty(), "a cordon is no uncordon: {bad:?}");
    }

    /// Replayed: an uncordon after the agent's result passes; one while the
    /// agent reports Rebooting for the start in flight is caught; a report of
    /// an earlier start does not count, nor does a refused patch.
    #[test]
    fn an_uncordon_while_the_agent_installs_is_caught_in_the_audit_log() {
        use crate::support::audit::uncordons_mid_install;
        let good = vec![
            start("a", "t1"),
            report("a", "Applying", "t1"),
            to_state("a", "Applying", false),
            report("a", "Rebooting", "t1"),
            report("a", "Succeeded", "t1"),
            to_state("a", "Updated", true),
        ];
        assert_eq!(uncordons_mid_install(&good), (1, vec![]));
        let mut bad = good.clone();
        bad.insert(4, to_state("a", "Failed", true));
        let (judged, found) = uncordons_mid_install(&bad);
        assert_eq!((judged, found.len()), (2, 1), "{found:?}");
        assert!(found[0].contains("a uncordoned") && found[0].contains("Rebooting"), "{found:?}");
        let mut refused = bad.clone();
        refused[4].code = 409;
        assert_eq!(uncordons_mid_install(&refused).1, Vec::<String>::new(), "a refused patch uncordoned nothing");
        // The agent's Applying answers start t1; the node was started again since (t2).
        let stale = vec![start("b", "t1"), report("b", "Applying", "t1"), start("b", "t2"), to_state("b", "Failed", true)];
        assert_eq!(uncordons_mid_install(&stale), (1, vec![]));
        let mut c = Checker::default();
        c.check_replayed(Duration::ZERO, Kind::UncordonedMidInstall, &found);
        assert_eq!(c.kinds(), BTreeSet::from([Kind::UncordonedMidInstall]));
    }

    /// Replayed: evictions from a Draining node pass, refused ones included;
    /// one from a node that moved on, or that winpool never started, is
    /// caught, whether the pod was bound by the scheduler or placed by name;
    /// a pod of a deleted node is not judged.
    #[test]
    fn an_eviction_from_a_node_not_draining_is_caught_in_the_audit_log() {
        use crate::support::audit::evictions_off_drain;
        let bind = |pod: &str, node: &str| {
            req("pods", "binding", "create", "ns", pod, "kube-scheduler/v1", 201, serde_json::json!({"target": {"name": node}}))
        };
        let placed = |pod: &str, node: &str| {
            req("pods", "", "create", "ns", pod, "kubectl/v1", 201, serde_json::json!({"spec": {"nodeName": node}}))
        };
        let evict = |pod: &str, code: u16| req("pods", "eviction", "create", "ns", pod, "winpool/0.9", code, serde_json::json!({}));
        let good = vec![
            bind("p1", "a"),
            placed("p2", "a"),
            start("a", "t1"),
            evict("p1", 429),
            evict("p1", 201),
            evict("p2", 201),
            to_state("a", "Applying", false),
        ];
        assert_eq!(evictions_off_drain(&good), (3, vec![]));
        let mut late = good.clone();
        late.push(evict("p2", 201));
        let (judged, found) = evictions_off_drain(&late);
        assert_eq!((judged, found.len()), (4, 1), "{found:?}");
        assert!(found[0].contains("ns/p2 evicted from a while it was Applying"), "{found:?}");
        let never = vec![placed("p3", "b"), evict("p3", 201)];
        assert_eq!(evictions_off_drain(&never).1.len(), 1, "b was never started");
        let gone = vec![
            bind("p4", "c"),
            start("c", "t1"),
            req("nodes", "", "delete", "", "c", "kubectl/v1", 200, serde_json::json!({})),
            evict("p4", 404),
        ];
        assert_eq!(evictions_off_drain(&gone), (0, vec![]));
        let mut c = Checker::default();
        c.check_replayed(Duration::ZERO, Kind::EvictedOffDrain, &found);
        assert_eq!(c.kinds(), BTreeSet::from([Kind::EvictedOffDrain]));
    }
    /// Replayed: the leader's writes pass, and so does a write it sent before
    /// the standby took the lease but that completed after; a write the
    /// deposed leader sent after the take is caught, and so is a standby's
    /// write before it ever held the lease. Other replicas are not judged.
    #[test]
    fn a_write_by_a_replica_without_the_lease_is_caught_in_the_audit_log() {
        use crate::support::audit::writes_without_the_lease;
        let t = |s: u64| Some(jiff::Timestamp::from_second(1_800_000_000 + s as i64).unwrap());
        let by = |who: &str, resource: &str, name: &str, verb: &str, received: u64, done: u64| {
            let mut r = req(resource, "", verb, "ns", name, &format!("winpool/0.2.0 ({who})"), 200, serde_json::json!({}));
            (r.received, r.at) = (t(received), t(done));
            r
        };
        let lease = |who: &str, at: u64| by(who, "leases", "winpool-leader", "update", at, at);
        let good = vec![
            lease("a", 0),
            by("a", "nodes", "n1", "patch", 1, 1),
            lease("a", 5),
            by("b", "leases", "winpool-leader", "get", 6, 6),
            lease("b", 21),
            by("a", "nodes", "n2", "patch", 19, 22),
            by("b", "nodes", "n2", "patch", 23, 23),
            by("c", "nodes", "n3", "patch", 24, 24),
        ];
        assert_eq!(writes_without_the_lease(&good, "ns", "winpool-leader"), (3, vec![]));
        let mut resumed = good.clone();
        resumed.push(by("a", "nodes", "n4", "patch", 30, 30));
        let (judged, found) = writes_without_the_lease(&resumed, "ns", "winpool-leader");
        assert_eq!((judged, found.len()), (4, 1), "{found:?}");
        assert!(found[0].starts_with("a patch nodes") && found[0].contains("while b held the lease"), "{found:?}");
        let mut eager = good.clone();
        eager.insert(2, by("b", "nodes", "n5", "patch", 2, 2));
        let (_, found) = writes_without_the_lease(&eager, "ns", "winpool-leader");
        assert_eq!(found.len(), 1, "the standby wrote while a held the lease: {found:?}");
    }

    /// A skewed replica's start and its failing a node are caught; its other
    /// node writes (a finish, a verify) and a true-clocked replica's start are not.
    #[test]
    fn a_start_or_a_failure_by_a_skewed_replica_is_caught_in_the_audit_log() {
        use crate::support::audit::starts_and_failures_by;
        let patch = |who: &str, ann: serde_json::Value| {
            req(
                "nodes",
                "",
                "patch",
                "",
                "n1",
                &format!("winpool/0.2.0 ({who})"),
                200,
                serde_json::json!({"metadata": {"annotations": ann}}),
            )
        };
        let log = vec![
            patch("true-1", serde_json::json!({"winpool.dev/started-at": "x", "winpool.dev/state": "Draining"})),
            patch("skewed-2", serde_json::json!({"winpool.dev/state": "Updated"})),
            patch("skewed-2", serde_json::json!({"winpool.dev/state": "Verifying"})),
        ];
        let skewed = vec!["skewed-2".to_string()];
        assert_eq!(starts_and_failures_by(&log, &skewed), Vec::<String>::new());
        let mut bad = log.clone();
        bad.push(patch("skewed-2", serde_json::json!({"winpool.dev/started-at": "y", "winpool.dev/state": "Draining"})));
        bad.push(patch("skewed-2", serde_json::json!({"winpool.dev/state": "Failed"})));
        let found = starts_and_failures_by(&bad, &skewed);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("started n1") && found[1].contains("failed n1"), "{found:?}");
    }

    /// Nodes moved to a second pool leave the first's flight when they move
    /// (their later writes are the second pool's), so neither pool's replay
    /// counts the other's nodes.
    #[test]
    fn nodes_moved_to_another_pool_are_replayed_in_the_pool_they_are_in() {
        use crate::support::audit::{in_flight_peak, split_at_move};
        let t = |s: i64| Some(jiff::Timestamp::from_second(1_800_000_000 + s).unwrap());
        let at = |mut r: crate::support::audit::Request, s: i64| {
            (r.received, r.at) = (t(s), t(s));
            r
        };
        let w = |node, state, s| at(write("patch", node, Some(state), "winpool/0.9"), s);
        let log =
            vec![w("a", "Draining", 1), w("m", "Applying", 2), w("b", "Draining", 10), w("m", "Draining", 11), w("c", "Draining", 12)];
        let (to, from) = split_at_move(&log, &BTreeSet::from(["m".to_string()]), t(5).unwrap());
        assert_eq!(in_flight_peak(&log).0, 4, "one replay of both pools counts m in both");
        assert_eq!(in_flight_peak(&from).0, 3, "m left the first pool at 5: a, b, c");
        assert_eq!(in_flight_peak(&to).0, 1, "m alone in the second");
        assert_eq!(to.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["m"]);
    }

    /// A node set Applying after its own drain passes, and so does a new
    /// revision mid-install; one set Applying after it was given back
    /// (another pool's stale view of it), or after an uncordon, is caught.
    #[test]
    fn a_node_set_applying_without_a_drain_of_its_own_is_caught_in_the_audit_log() {
        use crate::support::audit::applied_undrained;
        let w = |node, state: Option<&str>| write("patch", node, state, "winpool/0.9");
        let good = vec![w("a", Some("Draining")), w("a", Some("Applying")), w("a", Some("Applying")), w("a", Some("Verifying"))];
        assert_eq!(applied_undrained(&good), (2, vec![]));
        let mut released = vec![w("b", Some("Draining")), w("b", Some("Applying")), w("b", None)];
        released[2].body["metadata"]["annotations"]["winpool.dev/state"] = serde_json::Value::Null;
        released.push(w("b", Some("Applying")));
        let (judged, found) = applied_undrained(&released);
        assert_eq!((judged, found.len()), (2, 1), "{found:?}");
        assert!(found[0].starts_with("b set Applying"), "{found:?}");
        let mut uncordoned = vec![w("c", Some("Draining"))];
        let mut u = write("patch", "c", Some("Draining"), "kubectl/1.36");
        u.body = serde_json::json!({"spec": {"unschedulable": false}});
        uncordoned.push(u);
        uncordoned.push(w("c", Some("Applying")));
        assert_eq!(applied_undrained(&uncordoned).1.len(), 1, "a person uncordoned it mid-drain");
    }
}
