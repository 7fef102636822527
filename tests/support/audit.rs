//! What the API server itself recorded: its audit log (hack/audit-policy.yaml
//! keeps node patches with their body). Invariants read from here never come
//! from the operator's own code or log text: a second drain, a write by a
//! standby, are seen as the requests they are.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::kubeconfig;

/// The audit log of the shared local control plane.
pub fn audit_log() -> PathBuf {
    kubeconfig().parent().expect("cluster dir").join("logs/audit.log")
}

/// A completed request, as the audit log has it.
#[derive(Debug, Clone)]
pub struct Request {
    pub verb: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// Who made it (`system:serviceaccount:<ns>:<name>`).
    pub user: String,
    pub user_agent: String,
    pub code: u16,
    /// The request body, where the policy records it (node patches).
    pub body: Value,
    /// When the API server completed it (stageTimestamp).
    pub at: Option<jiff::Timestamp>,
}

/// Every completed request on objects whose name starts with `name_prefix`.
pub fn requests(audit: &Path, name_prefix: &str) -> Vec<Request> {
    completed(audit, name_prefix).filter(|r| r.name.starts_with(name_prefix)).collect()
}

/// Every completed request `user` made (`system:serviceaccount:<ns>:<name>`).
pub fn requests_by(audit: &Path, user: &str) -> Vec<Request> {
    completed(audit, user).filter(|r| r.user == user).collect()
}

/// The completed requests of the log lines that mention `needle` (a cheap
/// filter before parsing: the log holds the whole suite's requests).
fn completed(audit: &Path, needle: &str) -> impl Iterator<Item = Request> {
    let text = std::fs::read_to_string(audit).unwrap_or_else(|e| panic!("reading {}: {e}", audit.display()));
    let lines: Vec<Value> = text.lines().filter(|l| l.contains(needle)).filter_map(|l| serde_json::from_str::<Value>(l).ok()).collect();
    lines.into_iter().filter(|e| e["stage"] == "ResponseComplete").map(|e| {
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        Request {
            verb: s(&e["verb"]),
            resource: s(&e["objectRef"]["resource"]),
            subresource: s(&e["objectRef"]["subresource"]),
            namespace: s(&e["objectRef"]["namespace"]),
            name: s(&e["objectRef"]["name"]),
            user: s(&e["user"]["username"]),
            user_agent: s(&e["userAgent"]),
            code: e["responseStatus"]["code"].as_u64().unwrap_or_default() as u16,
            body: e["requestObject"].clone(),
            at: e["stageTimestamp"].as_str().and_then(|t| t.parse().ok()),
        }
    })
}

pub fn is_write(r: &Request) -> bool {
    matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete" | "deletecollection")
}

/// Successful node patches that started a node's update (they set
/// `winpool.dev/started-at`), per node: a node started twice for one
/// revision was drained twice.
pub fn starts_per_node(requests: &[Request]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for r in requests.iter().filter(|r| r.resource == "nodes" && r.subresource.is_empty() && r.verb == "patch" && r.code == 200) {
        if r.body["metadata"]["annotations"]["winpool.dev/started-at"].is_string() {
            *out.entry(r.name.clone()).or_default() += 1;
        }
    }
    out
}

/// Successful node patches that started a drain (a start: `started-at` set,
/// the state Draining), per (node, revision the start targets). One per pair
/// is right; two are the same node cordoned and drained twice for one
/// revision. Read from the API server's record, so a rewording of the
/// operator's logs cannot hide it.
pub fn drains_per_node(requests: &[Request]) -> BTreeMap<(String, String), usize> {
    let mut out = BTreeMap::new();
    for r in requests.iter().filter(|r| r.resource == "nodes" && r.subresource.is_empty() && r.verb == "patch" && r.code == 200) {
        let a = &r.body["metadata"]["annotations"];
        if a["winpool.dev/started-at"].is_string() && a["winpool.dev/state"] == "Draining" {
            let rev = a["winpool.dev/target-revision"].as_str().unwrap_or("?").to_string();
            *out.entry((r.name.clone(), rev)).or_default() += 1;
        }
    }
    out
}

/// The most nodes winpool had in flight (Draining, Applying, Verifying) at
/// once, replayed from its successful node patches in the order the API
/// server completed them.
pub fn max_in_flight(requests: &[Request]) -> usize {
    in_flight_peak(requests).0
}

/// [`max_in_flight`], and the nodes in flight when the peak was first
/// reached, with when. A deleted Node leaves the flight (its name may come
/// back as a new Node).
pub fn in_flight_peak(requests: &[Request]) -> (usize, Vec<String>, Option<jiff::Timestamp>) {
    let mut in_flight = std::collections::BTreeSet::new();
    let mut peak: (usize, Vec<String>, Option<jiff::Timestamp>) = (0, Vec::new(), None);
    for r in requests.iter().filter(|r| r.resource == "nodes" && r.subresource.is_empty() && (200..300).contains(&r.code)) {
        match r.verb.as_str() {
            "delete" => {
                in_flight.remove(&r.name);
            }
            "patch" if r.user_agent.starts_with("winpool/") => match r.body["metadata"]["annotations"]["winpool.dev/state"].as_str() {
                Some("Draining" | "Applying" | "Verifying") => {
                    in_flight.insert(r.name.clone());
                }
                Some(_) => {
                    in_flight.remove(&r.name);
                }
                None => {}
            },
            _ => {}
        }
        if in_flight.len() > peak.0 {
            peak = (in_flight.len(), in_flight.iter().cloned().collect(), r.at);
        }
    }
    peak
}

/// Every Node write (patch, update, status, create, delete) an identity made:
/// what the agent's must never have.
pub fn node_writes_by(audit: &Path, user: &str) -> Vec<Request> {
    requests_by(audit, user).into_iter().filter(|r| r.resource == "nodes" && is_write(r)).collect()
}

/// Eviction requests for pod `namespace/pod` that a PodDisruptionBudget refused (429).
pub fn refused_evictions(audit: &Path, namespace: &str, pod: &str) -> usize {
    requests(audit, pod)
        .iter()
        .filter(|r| r.subresource == "eviction" && r.namespace == namespace && r.name == pod && r.code == 429)
        .count()
}
