//! What the API server itself recorded: its audit log (hack/audit-policy.yaml
//! keeps node patches with their body). Invariants read from here never come
//! from the operator's own code or log text: a second drain, a write by a
//! standby, are seen as the requests they are.

use std::collections::{BTreeMap, BTreeSet};
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
    /// When the API server received it (requestReceivedTimestamp).
    pub received: Option<jiff::Timestamp>,
}

/// Every completed request on objects whose name starts with `name_prefix`.
pub fn requests(audit: &Path, name_prefix: &str) -> Vec<Request> {
    settled(completed(audit, &[name_prefix]).filter(|r| r.name.starts_with(name_prefix)).collect())
}

/// Every completed request on a test's nodes and reports (named with
/// `name_prefix`) and on its pods (in `namespace`), in the order the API
/// server completed them: what the replays below read.
pub fn requests_of_test(audit: &Path, name_prefix: &str, namespace: &str) -> Vec<Request> {
    let in_ns = format!("\"namespace\":\"{namespace}\"");
    settled(completed(audit, &[name_prefix, &in_ns]).filter(|r| r.name.starts_with(name_prefix) || r.namespace == namespace).collect())
}

/// `requests` with each of winpool's node patches answered 504 settled by
/// what the operator did next. Every node patch winpool makes carries the
/// resourceVersion it was decided from, so its next successful patch of that
/// node with a state was decided from what the node really was: a start
/// there means the node was not in flight, so a start answered 504 before it
/// did not land and a finish (out of flight) answered 504 before it did; any
/// other next step means the reverse. A landed one reads as 200, one that did
/// not as 0; one with no such next patch stays 504 (it may have landed).
/// Seen: a leader SIGKILLed with four starts on the wire, answered 504 (its
/// context canceled) and never applied; the next leader started four other
/// nodes, and a replay that took the four as landed counted 8 in flight of 5.
pub fn settled(mut requests: Vec<Request>) -> Vec<Request> {
    let state = |r: &Request| r.body["metadata"]["annotations"]["winpool.dev/state"].as_str().map(str::to_string);
    let is_start = |r: &Request| r.body["metadata"]["annotations"]["winpool.dev/started-at"].is_string();
    let node_patch =
        |r: &Request| r.resource == "nodes" && r.subresource.is_empty() && r.verb == "patch" && r.user_agent.starts_with("winpool/");
    for i in 0..requests.len() {
        let r = &requests[i];
        let Some(to) = state(r).filter(|_| r.code == 504 && node_patch(r)) else { continue };
        let next = requests[i + 1..].iter().filter(|n| n.resource == "nodes" && n.subresource.is_empty() && n.name == r.name).find(|n| {
            matches!(n.verb.as_str(), "delete" | "create") || (node_patch(n) && (200..300).contains(&n.code) && state(n).is_some())
        });
        let Some(next) = next.filter(|n| n.verb == "patch") else { continue };
        let landed = if is_start(r) {
            !is_start(next)
        } else if !matches!(to.as_str(), "Draining" | "Applying" | "Verifying") {
            is_start(next)
        } else {
            continue;
        };
        requests[i].code = if landed { 200 } else { 0 };
    }
    requests
}

/// Every completed request an operator replica made (User-Agent
/// `winpool/<version> (<identity>)`), whichever test's.
pub fn requests_by_replicas(audit: &Path) -> Vec<Request> {
    completed(audit, &["\"userAgent\":\"winpool/"]).filter(|r| replica(r).is_some()).collect()
}

/// The operator replica that made a request: the identity in its User-Agent.
fn replica(r: &Request) -> Option<&str> {
    let (_, id) = r.user_agent.strip_prefix("winpool/")?.split_once(" (")?;
    id.strip_suffix(')')
}

/// Every completed request `user` made (`system:serviceaccount:<ns>:<name>`).
pub fn requests_by(audit: &Path, user: &str) -> Vec<Request> {
    completed(audit, &[user]).filter(|r| r.user == user).collect()
}

/// The completed requests of the log lines that mention one of `needles` (a
/// cheap filter before parsing: the log holds the whole suite's requests).
fn completed(audit: &Path, needles: &[&str]) -> impl Iterator<Item = Request> {
    let text = std::fs::read_to_string(audit).unwrap_or_else(|e| panic!("reading {}: {e}", audit.display()));
    let lines: Vec<Value> =
        text.lines().filter(|l| needles.iter().any(|n| l.contains(n))).filter_map(|l| serde_json::from_str::<Value>(l).ok()).collect();
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
            received: e["requestReceivedTimestamp"].as_str().and_then(|t| t.parse().ok()),
        }
    })
}

/// Whether a request may have changed the cluster: it succeeded, or the API
/// server answered 504, having given up waiting for etcd, which may still
/// commit the write (seen: a node's finish answered 504 across an API server
/// restart, and the operator found the node idle after). Replays take such a
/// write as landed.
pub fn may_have_landed(r: &Request) -> bool {
    (200..300).contains(&r.code) || r.code == 504
}

pub fn is_write(r: &Request) -> bool {
    matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete" | "deletecollection")
}

/// Successful node patches that started a node's update (they set
/// `winpool.dev/started-at`), per node: a node started twice for one
/// revision was drained twice.
pub fn starts_per_node(requests: &[Request]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for r in
        requests.iter().filter(|r| r.resource == "nodes" && r.subresource.is_empty() && r.verb == "patch" && (200..300).contains(&r.code))
    {
        if r.body["metadata"]["annotations"]["winpool.dev/started-at"].is_string() {
            *out.entry(r.name.clone()).or_default() += 1;
        }
    }
    out
}

/// Successful node patches that started a drain (a start: `started-at` set,
/// the state Draining), per (node, revision the start targets). One per pair
/// is right; two are the same node cordoned and drained twice for one
/// revision. A put-back (back to Pending, `drain-blocked-by` naming the
/// budget that held the drain past putBackAfter) makes the next start the
/// retry it promises: the node's count starts again. So does a failure: only
/// a person's retry (`kubectl winpool retry`) starts a Failed node again for
/// its revision, and one uncordoned since must be drained again. Read from the API
/// server's record, so a rewording of the operator's logs cannot hide it.
pub fn drains_per_node(requests: &[Request]) -> BTreeMap<(String, String), usize> {
    let mut out: BTreeMap<(String, String), usize> = BTreeMap::new();
    for r in
        requests.iter().filter(|r| r.resource == "nodes" && r.subresource.is_empty() && r.verb == "patch" && (200..300).contains(&r.code))
    {
        let a = &r.body["metadata"]["annotations"];
        if (a["winpool.dev/state"] == "Pending" && a["winpool.dev/drain-blocked-by"].is_string()) || a["winpool.dev/state"] == "Failed" {
            out.retain(|(node, _), _| *node != r.name);
            continue;
        }
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
    for r in requests.iter().filter(|r| r.resource == "nodes" && r.subresource.is_empty() && may_have_landed(r)) {
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

/// What the replays know of one node at a point of the log: winpool's last
/// word on it (state, start, target) and its agent's last report.
#[derive(Debug, Default)]
struct NodeAt {
    state: Option<String>,
    started_at: Option<String>,
    target: Option<String>,
    /// The report's `status.apply`: status, revision, startedAt.
    apply: Option<(String, String, Option<String>)>,
    /// Deleted (its name may come back as a new Node).
    deleted: bool,
}

impl NodeAt {
    /// The agent reports Applying or Rebooting for the start in flight (as
    /// the operator reads a report: same target, same start when it names one).
    fn installing(&self) -> Option<&str> {
        let (status, revision, started_at) = self.apply.as_ref()?;
        let this_start = Some(revision) == self.target.as_ref() && (started_at.is_none() || started_at == &self.started_at);
        (matches!(status.as_str(), "Applying" | "Rebooting") && this_start).then_some(status.as_str())
    }
}

/// The log replayed in completion order: each node's record moved by
/// winpool's node patches, its agent's report writes and its deletion, and
/// each pod's node learnt from its binding (or its create, for a pod placed
/// by name). `judge` sees every request, refused ones too, with the state
/// just before it; only requests that succeeded move the state.
fn replay(requests: &[Request], mut judge: impl FnMut(&Request, &BTreeMap<String, NodeAt>, &BTreeMap<(String, String), String>)) {
    let mut nodes: BTreeMap<String, NodeAt> = BTreeMap::new();
    let mut pods: BTreeMap<(String, String), String> = BTreeMap::new();
    for r in requests {
        judge(r, &nodes, &pods);
        if !may_have_landed(r) {
            continue;
        }
        match (r.resource.as_str(), r.subresource.as_str(), r.verb.as_str()) {
            ("nodes", "", "delete") => {
                nodes.insert(r.name.clone(), NodeAt { deleted: true, ..NodeAt::default() });
            }
            ("nodes", "", "patch") if r.user_agent.starts_with("winpool/") => {
                let n = nodes.entry(r.name.clone()).or_default();
                if n.deleted {
                    *n = NodeAt::default();
                }
                let ann = &r.body["metadata"]["annotations"];
                for (key, field) in [
                    ("winpool.dev/state", &mut n.state),
                    ("winpool.dev/started-at", &mut n.started_at),
                    ("winpool.dev/target-revision", &mut n.target),
                ] {
                    if let Some(v) = ann.get(key) {
                        *field = v.as_str().map(str::to_string);
                    }
                }
            }
            ("windowsnodereports", "status", "patch") => {
                if let Some(apply) = report_apply(&r.body) {
                    nodes.entry(r.name.clone()).or_default().apply = apply;
                }
            }
            ("pods", "binding", "create") => {
                if let Some(node) = r.body["target"]["name"].as_str() {
                    pods.insert((r.namespace.clone(), r.name.clone()), node.to_string());
                }
            }
            ("pods", "", "create") => {
                if let Some(node) = r.body["spec"]["nodeName"].as_str() {
                    pods.insert((r.namespace.clone(), r.name.clone()), node.to_string());
                }
            }
            _ => {}
        }
    }
}

/// The `apply` a write of a report's status carries: the agent's JSON patch
/// setting `/status`, or a merge patch's `status`. `Some(None)`: the write
/// clears it.
fn report_apply(body: &Value) -> Option<Option<(String, String, Option<String>)>> {
    let written = match body {
        Value::Array(ops) => ops.iter().find(|op| op["path"] == "/status").map(|op| &op["value"])?,
        _ => body.get("status")?,
    };
    let a = &written["apply"];
    let s = |k: &str| a[k].as_str().map(str::to_string);
    Some(s("status").map(|status| (status, s("revision").unwrap_or_default(), s("startedAt"))))
}

/// winpool's uncordons of a node whose agent reported, last, that it is
/// installing or rebooting for the start in flight: the node would take
/// workloads with a half-staged update. Returns how many uncordons were
/// judged, and each violation.
pub fn uncordons_mid_install(requests: &[Request]) -> (usize, Vec<String>) {
    let (mut judged, mut bad) = (0, Vec::new());
    replay(requests, |r, nodes, _| {
        let uncordon =
            r.resource == "nodes" && r.verb == "patch" && r.user_agent.starts_with("winpool/") && may_have_landed(r) && uncordons(&r.body);
        if !uncordon {
            return;
        }
        judged += 1;
        if let Some(status) = nodes.get(&r.name).and_then(NodeAt::installing) {
            bad.push(format!("{} uncordoned at {:?} while its agent reports {status}", r.name, r.at.map(|t| t.to_string())));
        }
    });
    (judged, bad)
}

/// A node patch that uncordons: `unschedulable: false` (a merge patch, as
/// winpool sends), or the field removed (`null`: the strategic merge patch
/// `kubectl uncordon` sends, since the field is omitted when false).
pub fn uncordons(body: &Value) -> bool {
    matches!(body["spec"].get("unschedulable"), Some(Value::Bool(false) | Value::Null))
}

/// winpool's patches that set a node Applying (its agent may then install
/// and reboot) when the node was not cordoned and drained by winpool since
/// it was last uncordoned, given back, or created: an install with the
/// workloads still on it. A retarget of a node already Applying (a new
/// revision mid-install) keeps its drain. Returns how many such patches
/// were judged, and each violation.
pub fn applied_undrained(requests: &[Request]) -> (usize, Vec<String>) {
    let mut drained: BTreeSet<String> = BTreeSet::new();
    let (mut judged, mut bad) = (0, Vec::new());
    let patches = requests.iter().filter(|r| r.resource == "nodes" && r.subresource.is_empty() && may_have_landed(r));
    for r in patches {
        if r.verb == "delete" || r.verb == "create" {
            drained.remove(&r.name);
            continue;
        }
        if r.verb != "patch" {
            continue;
        }
        let a = &r.body["metadata"]["annotations"];
        // Uncordoned (by anyone), or given back (its state removed).
        if uncordons(&r.body) || a.get("winpool.dev/state").is_some_and(Value::is_null) {
            drained.remove(&r.name);
        }
        if !r.user_agent.starts_with("winpool/") {
            continue;
        }
        if a["winpool.dev/state"] == "Draining" {
            drained.insert(r.name.clone());
        }
        if a["winpool.dev/state"] == "Applying" {
            judged += 1;
            if !drained.contains(&r.name) {
                bad.push(format!(
                    "{} set Applying at {:?} with no cordon and drain of its own since it was last given back or uncordoned",
                    r.name,
                    r.received.map(|t| t.to_string())
                ));
            }
        }
    }
    (judged, bad)
}

/// winpool's evictions (asked, whatever the answer) of a pod whose node was
/// not Draining by winpool's last patch when the API server took the request.
/// A pod whose node was deleted, or whose placement the log does not show, is
/// not judged. Returns how many evictions were judged, and each violation.
pub fn evictions_off_drain(requests: &[Request]) -> (usize, Vec<String>) {
    let (mut judged, mut bad) = (0, Vec::new());
    replay(requests, |r, nodes, pods| {
        if r.subresource != "eviction" || r.verb != "create" || !r.user_agent.starts_with("winpool/") {
            return;
        }
        let Some(node) = pods.get(&(r.namespace.clone(), r.name.clone())) else { return };
        let state = match nodes.get(node) {
            Some(at) if at.deleted => return,
            Some(at) => at.state.as_deref(),
            None => None,
        };
        judged += 1;
        if state != Some("Draining") {
            let state = state.unwrap_or("<no state>");
            bad.push(format!(
                "pod {}/{} evicted from {node} while it was {state} ({:?})",
                r.namespace,
                r.name,
                r.at.map(|t| t.to_string())
            ));
        }
    });
    (judged, bad)
}

/// The requests on `moved` nodes received from `at` on (for the pool they
/// moved to), and the others (for the pool they left), where each moved node
/// leaves at `at`, as if deleted: its later writes are the other pool's.
pub fn split_at_move(requests: &[Request], moved: &BTreeSet<String>, at: jiff::Timestamp) -> (Vec<Request>, Vec<Request>) {
    let after = |r: &Request| moved.contains(&r.name) && r.received.is_some_and(|t| t >= at);
    let to: Vec<Request> = requests.iter().filter(|r| after(r)).cloned().collect();
    let mut from: Vec<Request> = Vec::new();
    let mut left = false;
    for r in requests.iter().filter(|r| !after(r)) {
        if !left && r.at.is_some_and(|t| t >= at) {
            left = true;
            from.extend(moved.iter().map(|n| left_the_pool(n, at)));
        }
        from.push(r.clone());
    }
    if !left {
        from.extend(moved.iter().map(|n| left_the_pool(n, at)));
    }
    (to, from)
}

/// A node's leaving, written as the delete [`in_flight_peak`] takes it for.
fn left_the_pool(node: &str, at: jiff::Timestamp) -> Request {
    Request {
        verb: "delete".into(),
        resource: "nodes".into(),
        subresource: String::new(),
        namespace: String::new(),
        name: node.into(),
        user: String::new(),
        user_agent: String::new(),
        code: 200,
        body: Value::Null,
        at: Some(at),
        received: Some(at),
    }
}

/// Node patches by the replicas `identities` (each `<host>-<pid>`, as their
/// User-Agent says) that started a node (set `started-at`) or failed one (set
/// the state Failed): what a replica whose clock is past the skew bound must
/// never do, since its node timeouts and windows would be judged wrongly.
pub fn starts_and_failures_by(requests: &[Request], identities: &[String]) -> Vec<String> {
    let by = |r: &Request| replica(r).is_some_and(|id| identities.iter().any(|i| i == id));
    requests
        .iter()
        .filter(|r| by(r) && r.resource == "nodes" && r.subresource.is_empty() && r.verb == "patch" && may_have_landed(r))
        .filter_map(|r| {
            let a = &r.body["metadata"]["annotations"];
            let what = if a["winpool.dev/started-at"].is_string() {
                "started"
            } else if a["winpool.dev/state"] == "Failed" {
                "failed"
            } else {
                return None;
            };
            Some(format!("{} {what} {} at {:?}", replica(r).unwrap_or("?"), r.name, r.received.map(|t| t.to_string())))
        })
        .collect()
}

/// Writes by a replica that did not hold the Lease `namespace/lease` when the
/// API server received them: a standby's, or a deposed leader's after
/// another replica took the Lease (a frozen leader resumed, a partitioned one
/// healed). The holder is the last replica whose write of the Lease
/// succeeded; a write received before the holder took it is its
/// predecessor's, whenever it completed. Only replicas that held this Lease
/// at some point are judged (other tests' operators share the log). Returns
/// how many writes were judged, and each violation.
pub fn writes_without_the_lease(requests: &[Request], namespace: &str, lease: &str) -> (usize, Vec<String>) {
    let is_lease = |r: &Request| r.resource == "leases" && r.namespace == namespace && r.name == lease;
    let took = |r: &Request| is_lease(r) && is_write(r) && may_have_landed(r);
    let electors: std::collections::BTreeSet<&str> = requests.iter().filter(|r| took(r)).filter_map(replica).collect();
    let (mut judged, mut bad) = (0, Vec::new());
    let mut holder: Option<(&str, Option<jiff::Timestamp>)> = None;
    for r in requests {
        let Some(id) = replica(r).filter(|id| electors.contains(id)) else { continue };
        if took(r) {
            if holder.is_none_or(|(h, _)| h != id) {
                holder = Some((id, r.at));
            }
            continue;
        }
        if is_lease(r) || !is_write(r) {
            continue;
        }
        judged += 1;
        let after_the_take = |since: Option<jiff::Timestamp>| match (r.received, since) {
            (Some(received), Some(since)) => received >= since,
            _ => true,
        };
        match holder {
            Some((h, _)) if h == id => {}
            Some((_, since)) if !after_the_take(since) => {}
            other => bad.push(format!(
                "{id} {} {} {}/{} ({}) received at {:?} while {} held the lease",
                r.verb,
                r.resource,
                r.namespace,
                r.name,
                r.code,
                r.received.map(|t| t.to_string()),
                other.map_or("no one", |(h, _)| h)
            )),
        }
    }
    (judged, bad)
}
