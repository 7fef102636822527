//! Health gates (`spec.rollout.healthGates`), the pure part: what a gate saw
//! and what that means for the rollout. Evaluating a gate is I/O (the
//! Prometheus HTTP API, a pod list); the controller does it in its observe
//! step (`controller::gates`) and hands the results here as plain data, so
//! the decision (`rollout::start`) stays a function of its inputs.
//!
//! A gate that cannot be evaluated is closed: a rollout must not proceed
//! because the monitoring that would stop it is down.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

pub mod pods;
pub mod prometheus;

/// How many names (series, alerts, pods, nodes) a message shows; the count is always exact.
const SHOWN: usize = 5;

/// One gate's evaluation this round, in the order of the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateResult {
    pub gate: String,
    pub seen: Seen,
}

/// What a gate saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Nothing that closes it.
    Open,
    /// The query returned series: how many, and the first few as PromQL selectors.
    Series { total: usize, shown: Vec<String> },
    /// Firing alerts whose name matches: how many, and their names (each once, sorted).
    Alerts { total: usize, names: Vec<String> },
    /// Pods matching the selector (scope Cluster), as namespace/name, sorted.
    Pods(Vec<String>),
    /// Scope Node: node -> the matching pods on it. Only these nodes are held.
    PodsOnNodes(BTreeMap<String, Vec<String>>),
    /// The gate could not be evaluated; it counts as closed.
    Failed(Failure),
}

/// Why a gate could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    Timeout(Duration),
    /// Connecting or talking to the endpoint failed.
    Unreachable(String),
    /// No authority the gate trusts signs the server's certificate.
    Untrusted(String),
    /// Not a success, and not a Prometheus API error either. Its body is
    /// never shown: a gate's URL may reach any service the operator can,
    /// and status is read by whoever reads the pool.
    HttpStatus {
        code: u16,
    },
    /// Prometheus answered with `"status": "error"`.
    Prometheus {
        error_type: String,
        error: String,
    },
    /// Not what the Prometheus HTTP API answers.
    BadResponse(String),
    /// The query's result is not an instant vector (a scalar or a string has no series).
    NotAVector(String),
    /// The credentials could not be read.
    Auth(String),
    /// The certificate authorities to trust could not be read.
    Trust(String),
    /// A value in the gate's spec that only the controller can check.
    InvalidSpec(String),
    /// The pods could not be listed.
    ListPods(String),
}

impl Seen {
    /// What kind of thing the gate saw, for telling a gate that fails apart
    /// from one that sees what it watches for (each is announced once).
    pub fn kind(&self) -> &'static str {
        match self {
            Seen::Open => "open",
            Seen::Series { .. } => "series",
            Seen::Alerts { .. } => "alerts",
            Seen::Pods(_) => "pods",
            Seen::PodsOnNodes(_) => "pods-on-nodes",
            Seen::Failed(_) => "failed",
        }
    }
}

impl GateResult {
    /// Whether the gate holds the whole rollout (a node-scope gate holds only its nodes).
    pub fn closes_pool(&self) -> bool {
        match &self.seen {
            Seen::Open | Seen::PodsOnNodes(_) => false,
            Seen::Series { total, .. } | Seen::Alerts { total, .. } => *total > 0,
            Seen::Pods(pods) => !pods.is_empty(),
            Seen::Failed(_) => true,
        }
    }

    /// Whether the gate keeps `node` from starting (scope Node).
    pub fn holds_node(&self, node: &str) -> bool {
        matches!(&self.seen, Seen::PodsOnNodes(on) if on.contains_key(node))
    }
}

/// How long gates that all saw nothing may be believed: a node about to
/// start is started on a fresh look, not on one from minutes ago.
pub const OPEN_RESULTS_FOR: Duration = Duration::from_secs(5);

/// Whether what the gates saw `age` ago still stands. A reconcile runs on
/// every node event; without this a closed gate (or a slot that frees while
/// they are open) would ask Prometheus on each. A closed gate is looked at
/// again after healthGateInterval, as the requeue does.
pub fn still_fresh(results: &[GateResult], age: Duration, interval: Duration) -> bool {
    let any_closed = results.iter().any(|g| g.seen != Seen::Open);
    age < if any_closed { interval } else { OPEN_RESULTS_FOR }
}

/// The first gate (in spec order) that holds the whole rollout.
pub fn first_closed(results: &[GateResult]) -> Option<&GateResult> {
    results.iter().find(|g| g.closes_pool())
}

/// The first gate that holds `node`, if any.
pub fn holding_node<'r>(results: &'r [GateResult], node: &str) -> Option<&'r GateResult> {
    results.iter().find(|g| g.holds_node(node))
}

/// `a, b, c and 2 more`.
fn shown(names: &[String], total: usize) -> String {
    let mut s = names.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if total > SHOWN.min(names.len()) {
        s.push_str(&format!(" and {} more", total - SHOWN.min(names.len())));
    }
    s
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl fmt::Display for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Seen::Open => f.write_str("open"),
            Seen::Series { total, shown: s } => write!(f, "query returned {}: {}", plural(*total, "series", "series"), shown(s, *total)),
            Seen::Alerts { total, names } => {
                write!(f, "{} firing: {}", plural(*total, "alert", "alerts"), shown(names, names.len()))
            }
            Seen::Pods(pods) => write!(f, "{} match: {}", plural(pods.len(), "pod", "pods"), shown(pods, pods.len())),
            Seen::PodsOnNodes(on) => {
                let nodes: Vec<String> = on.iter().map(|(n, pods)| format!("{n} ({})", shown(pods, pods.len()))).collect();
                write!(f, "matching pods run on {}: {}", plural(on.len(), "node", "nodes"), shown(&nodes, nodes.len()))
            }
            Seen::Failed(e) => e.fmt(f),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Timeout(d) => write!(f, "query failed: timeout after {}", humantime(*d)),
            Failure::Unreachable(e) | Failure::Untrusted(e) => write!(f, "query failed: {e}"),
            Failure::HttpStatus { code } => write!(f, "query failed: HTTP {code}"),
            Failure::Prometheus { error_type, error } => write!(f, "query failed: Prometheus says {error_type}: {error}"),
            Failure::BadResponse(e) => write!(f, "query failed: not a Prometheus API answer: {e}"),
            Failure::NotAVector(t) => write!(f, "query failed: it returns a {t}, not series; write an instant vector query"),
            Failure::Auth(e) => write!(f, "credentials: {e}"),
            Failure::Trust(e) => write!(f, "certificate authorities: {e}"),
            Failure::InvalidSpec(e) => f.write_str(e),
            Failure::ListPods(e) => write!(f, "listing pods failed: {e}"),
        }
    }
}

/// A duration as a person writes it in the spec: `5s`, `1.5s`, `250ms`.
fn humantime(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// Cut what a server sent to a size a condition message can carry.
pub(crate) fn snippet(s: &str) -> String {
    const MAX: usize = 200;
    let s = s.trim();
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_results_stand_for_seconds_and_closed_ones_until_the_interval() {
        let interval = Duration::from_secs(30);
        let open = [gate(Seen::Open)];
        let closed = [gate(Seen::Open), gate(Seen::Pods(vec!["ns/backup".into()]))];
        assert!(still_fresh(&open, Duration::from_secs(4), interval));
        assert!(!still_fresh(&open, OPEN_RESULTS_FOR, interval), "a start is decided on a fresh look");
        assert!(still_fresh(&closed, Duration::from_secs(29), interval));
        assert!(!still_fresh(&closed, interval, interval), "looked at again after the interval");
        assert!(!still_fresh(&[], Duration::from_secs(5), interval));
    }

    fn gate(seen: Seen) -> GateResult {
        GateResult { gate: "g".into(), seen }
    }

    #[test]
    fn what_a_gate_saw_decides_whether_it_holds_the_pool_or_a_node() {
        let on_node = Seen::PodsOnNodes([("win-1".to_string(), vec!["ns/backup".to_string()])].into());
        // (seen, holds the pool, holds win-1, holds win-2)
        let cases = [
            (Seen::Open, false, false, false),
            (Seen::Series { total: 0, shown: vec![] }, false, false, false),
            (Seen::Series { total: 1, shown: vec!["up".into()] }, true, false, false),
            (Seen::Alerts { total: 0, names: vec![] }, false, false, false),
            (Seen::Alerts { total: 2, names: vec!["A".into()] }, true, false, false),
            (Seen::Pods(vec![]), false, false, false),
            (Seen::Pods(vec!["ns/p".into()]), true, false, false),
            (on_node, false, true, false),
            (Seen::Failed(Failure::Timeout(Duration::from_secs(5))), true, false, false),
            (Seen::Failed(Failure::Unreachable("refused".into())), true, false, false),
        ];
        for (seen, pool, n1, n2) in cases {
            let g = gate(seen.clone());
            assert_eq!((g.closes_pool(), g.holds_node("win-1"), g.holds_node("win-2")), (pool, n1, n2), "{seen:?}");
        }
    }

    #[test]
    fn the_first_closed_gate_in_spec_order_is_the_one_named() {
        let results = [
            GateResult { gate: "open".into(), seen: Seen::Open },
            GateResult { gate: "node".into(), seen: Seen::PodsOnNodes([("a".to_string(), vec![])].into()) },
            GateResult { gate: "alerts".into(), seen: Seen::Alerts { total: 1, names: vec!["X".into()] } },
            GateResult { gate: "down".into(), seen: Seen::Failed(Failure::Unreachable("x".into())) },
        ];
        assert_eq!(first_closed(&results).map(|g| g.gate.as_str()), Some("alerts"));
        assert_eq!(holding_node(&results, "a").map(|g| g.gate.as_str()), Some("node"));
        assert_eq!(holding_node(&results, "b"), None);
        assert_eq!(first_closed(&results[..2]), None);
    }

    #[test]
    fn messages_say_what_the_gate_saw() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cases = [
            (Seen::Alerts { total: 2, names: names(&["KubeNodeNotReady", "X"]) }, "2 alerts firing: KubeNodeNotReady, X"),
            (Seen::Alerts { total: 3, names: names(&["A"]) }, "3 alerts firing: A"),
            (Seen::Series { total: 1, shown: names(&["up{job=\"a\"}"]) }, "query returned 1 series: up{job=\"a\"}"),
            (Seen::Series { total: 7, shown: names(&["a", "b", "c", "d", "e"]) }, "query returned 7 series: a, b, c, d, e and 2 more"),
            (Seen::Pods(names(&["ns/a"])), "1 pod match: ns/a"),
            (Seen::Failed(Failure::Timeout(Duration::from_secs(5))), "query failed: timeout after 5s"),
            (Seen::Failed(Failure::Timeout(Duration::from_millis(250))), "query failed: timeout after 250ms"),
            (Seen::Failed(Failure::HttpStatus { code: 503 }), "query failed: HTTP 503"),
            (
                Seen::Failed(Failure::Prometheus { error_type: "bad_data".into(), error: "parse error".into() }),
                "query failed: Prometheus says bad_data: parse error",
            ),
        ];
        for (seen, want) in cases {
            assert_eq!(seen.to_string(), want);
        }
        let on = Seen::PodsOnNodes([("w1".to_string(), names(&["ns/a", "ns/b"]))].into());
        assert_eq!(on.to_string(), "matching pods run on 1 node: w1 (ns/a, ns/b)");
    }

    #[test]
    fn snippets_are_cut_on_a_character_boundary() {
        let long = "é".repeat(300);
        let s = snippet(&long);
        assert_eq!(s.chars().count(), 201, "200 characters and the ellipsis");
        assert_eq!(snippet("  short \n"), "short");
    }
}
