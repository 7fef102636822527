//! The rollout decision: pure. Given a pool, its member nodes as plain structs
//! and the clock, say which nodes move to which state, which revision
//! ConfigMaps must exist, and what the pool's status is. No I/O happens here; `controller`
//! observes the cluster into [`NodeView`]s and acts on the returned [`Plan`].
//!
//! Per node: Pending → Draining → Applying → Verifying → Updated, or Failed.
//! Every state lives on the Node itself (annotations written in the same patch
//! as the label or cordon they describe), so a restarted operator re-derives
//! exactly the same plan.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::{FailedNode, NodeCounts, WindowsNodePoolSpec, names};
use crate::revision::revision_of;
use crate::versions::{RuntimeVersion, Version, WindowsBuild};
use crate::window::Window;

/// How many failed nodes the status lists by name; the count is always exact.
pub const MAX_LISTED_FAILED: usize = 20;
/// How often an in-flight rollout is looked at even without a watch event
/// (evictions finishing and timeouts produce no Node event).
pub const IN_FLIGHT_REQUEUE: Duration = Duration::from_secs(5);
pub const IDLE_REQUEUE: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum NodeState {
    #[default]
    Pending,
    Draining,
    Applying,
    Verifying,
    Updated,
    Failed,
}

impl NodeState {
    pub const ALL: [NodeState; 6] =
        [NodeState::Pending, NodeState::Draining, NodeState::Applying, NodeState::Verifying, NodeState::Updated, NodeState::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Pending => "Pending",
            NodeState::Draining => "Draining",
            NodeState::Applying => "Applying",
            NodeState::Verifying => "Verifying",
            NodeState::Updated => "Updated",
            NodeState::Failed => "Failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Between Pending and Updated: counts against maxUnavailable.
    pub fn in_flight(self) -> bool {
        matches!(self, NodeState::Draining | NodeState::Applying | NodeState::Verifying)
    }
}

/// Whether a node's HNS has programmed the cluster's Services (see `hns`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HnsReadiness {
    Ready,
    NotReady,
    /// The agent never reported counts; the rollout does not wait on what it cannot see.
    #[default]
    Unknown,
}

/// A member node as the decision needs it, read from the Node object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeView {
    pub name: String,
    pub pool_label: Option<String>,
    pub revision_label: Option<String>,
    /// Raw value of `winpool.dev/state`; garbage is reported, not trusted.
    pub state: Option<String>,
    pub state_since: Option<Timestamp>,
    pub started_at: Option<Timestamp>,
    pub target_revision: Option<String>,
    pub drained_revision: Option<String>,
    pub cordoned_by_winpool: bool,
    pub unschedulable: bool,
    pub ready: bool,
    pub kernel_version: Option<String>,
    pub runtime_version: Option<String>,
    /// The kubelet's `nodeInfo.bootID`: changes on every reboot.
    pub boot_id: Option<String>,
    /// The bootID when the node started an update that needs a reboot (`winpool.dev/boot-id`).
    pub boot_id_at_start: Option<String>,
    pub applied_revision: Option<String>,
    pub apply_status: Option<String>,
    pub apply_message: Option<String>,
    pub csi_proxy_version: Option<String>,
    pub cni_mode: Option<String>,
    pub failure_reason: Option<String>,
    pub failure_message: Option<String>,
    pub hns: HnsReadiness,
    /// Pods an eviction must still remove; only observed for Draining nodes.
    pub pods_to_evict: usize,
    /// The agent reports HNS counts on this node (both annotations present).
    pub hns_reported: bool,
}

/// Whether winpool keeps this node cordoned past this round: it cordoned the
/// node for an update that is still in flight, and `patch` (this round's write
/// for the node, if any) does not lift the cordon. Such a node needs no HNS
/// taint: the cordon already keeps new pods off, and the uncordon waits for HNS
/// (or adds the taint, see `hns::taint_wanted`), which saves two writes per
/// rebooted node and a conflict with the state write.
pub fn held_cordoned(view: &NodeView, patch: Option<&NodePatch>) -> bool {
    let in_flight = view.state.as_deref().and_then(NodeState::parse).is_some_and(NodeState::in_flight);
    view.cordoned_by_winpool && view.unschedulable && in_flight && patch.is_none_or(|p| p.unschedulable != Some(false))
}

/// A change to one Node. `None` values delete the key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodePatch {
    pub node: String,
    pub labels: BTreeMap<String, Option<String>>,
    pub annotations: BTreeMap<String, Option<String>>,
    pub unschedulable: Option<bool>,
    /// Why, for the log line and the Event.
    pub reason: String,
    pub from: NodeState,
    pub to: NodeState,
}

impl NodePatch {
    fn new(node: &str, from: NodeState, to: NodeState, reason: impl Into<String>) -> Self {
        NodePatch { node: node.to_string(), from, to, reason: reason.into(), ..Default::default() }
    }
    fn label(&mut self, k: &str, v: Option<&str>) -> &mut Self {
        self.labels.insert(k.to_string(), v.map(str::to_string));
        self
    }
    fn ann(&mut self, k: &str, v: Option<&str>) -> &mut Self {
        self.annotations.insert(k.to_string(), v.map(str::to_string));
        self
    }
    fn state(&mut self, to: NodeState, now: Timestamp) -> &mut Self {
        self.to = to;
        let now = now.to_string();
        self.ann(names::ANN_STATE, Some(to.as_str())).ann(names::ANN_STATE_SINCE, Some(&now))
    }
}

/// What to do with a Draining node's pods this round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainMode {
    /// Eviction API: PodDisruptionBudgets hold.
    Evict,
    /// drain.timeout passed and drain.force is set: delete what eviction could not move.
    Delete,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FailedInfo {
    pub node: String,
    pub reason: String,
    pub message: String,
    pub since: Option<Timestamp>,
}

/// Why the rollout is not starting new nodes (when it is not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    PausedBySpec,
    FailureLimit { failed: usize, limit: i32 },
    OutsideWindow { opens: Timestamp },
    BadWindow(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub revision: String,
    pub patches: Vec<NodePatch>,
    pub drain: Vec<(String, DrainMode)>,
    /// Revisions whose ConfigMap must exist (the target, and any still carried by a node).
    pub config_revisions: BTreeSet<String>,
    pub counts: NodeCounts,
    /// Nodes per state after this plan is applied (for metrics).
    pub by_state: BTreeMap<NodeState, usize>,
    pub failed: Vec<FailedInfo>,
    pub hold: Option<Hold>,
    /// Why in-flight nodes are still waiting, node -> what it waits for.
    pub waiting: BTreeMap<String, String>,
    /// Nodes below the target patch level as the kubelet reports it.
    pub behind_patch_level: usize,
    pub requeue_after: Duration,
    /// Problems with individual nodes worth an Event (bogus labels, garbage versions).
    pub warnings: Vec<(String, String)>,
}

/// The pool-level inputs of one decision.
pub struct PoolInput<'a> {
    pub name: &'a str,
    pub spec: &'a WindowsNodePoolSpec,
    /// Revisions whose ConfigMap exists now (a hand-set revision label without one is bogus).
    pub existing_revisions: &'a BTreeSet<String>,
}

/// maxUnavailable resolved against the pool size: percentages round down, but
/// never below one node, so a small pool still moves.
pub fn max_unavailable(v: &IntOrString, total: usize) -> usize {
    let n = match v {
        IntOrString::Int(i) => (*i).max(0) as usize,
        IntOrString::String(s) => {
            let pct: usize = s.trim_end_matches('%').trim().parse().unwrap_or(1).min(100);
            total * pct / 100
        }
    };
    n.max(1)
}

pub fn parse_duration(s: &str) -> Option<Duration> {
    let d: kube::core::Duration = s.parse().ok()?;
    if d.is_negative() { None } else { Some(d.into()) }
}

/// Whether the kubelet and the agent report the pool's configuration on the node.
pub fn verify_config(spec: &WindowsNodePoolSpec, n: &NodeView) -> Result<(), String> {
    let target: WindowsBuild = spec.os.patch_level.parse().map_err(|e| format!("{e}"))?;
    match n.kernel_version.as_deref().map(str::parse::<WindowsBuild>) {
        None => return Err("the kubelet reports no kernelVersion".into()),
        Some(Err(_)) => {
            return Err(format!("the kubelet's kernelVersion {:?} is not a Windows build", n.kernel_version.as_deref().unwrap_or("")));
        }
        Some(Ok(b)) if !b.satisfies(&target) => return Err(format!("kernelVersion {b} is below patch level {target}")),
        Some(Ok(_)) => {}
    }
    if let Some(want) = &spec.runtime.version {
        let want: Version = want.parse().map_err(|e| format!("{e}"))?;
        match n.runtime_version.as_deref().map(str::parse::<RuntimeVersion>) {
            Some(Ok(r)) if r.name == spec.runtime.name && r.version == want => {}
            Some(Ok(r)) => return Err(format!("runtime is {}://{}, want {}://{want}", r.name, r.version, spec.runtime.name)),
            _ => {
                return Err(format!(
                    "runtime version {:?} is not {}://{want}",
                    n.runtime_version.as_deref().unwrap_or(""),
                    spec.runtime.name
                ));
            }
        }
    }
    let csi = &spec.storage.csi_proxy;
    if let (true, Some(want)) = (csi.enabled, &csi.version) {
        let ok = n
            .csi_proxy_version
            .as_deref()
            .and_then(|v| v.parse::<Version>().ok())
            .zip(want.parse::<Version>().ok())
            .is_some_and(|(have, want)| have == want);
        if !ok {
            return Err(format!("agent reports csi-proxy {:?}, want {want}", n.csi_proxy_version.as_deref().unwrap_or("")));
        }
    }
    let cni = spec.networking.cni_mode.as_str();
    if n.cni_mode.as_deref() != Some(cni) {
        return Err(format!("agent reports CNI mode {:?}, want {cni}", n.cni_mode.as_deref().unwrap_or("")));
    }
    Ok(())
}

/// What keeps a node that runs the right configuration from taking traffic.
/// What a node in flight is still waiting for, said the way an operator checks
/// it: the pods left to evict, the agent's report, or which check fails.
fn waiting_for(spec: &WindowsNodePoolSpec, n: &NodeView, rev: &str, state: NodeState) -> String {
    match state {
        NodeState::Draining => format!("waiting for {} pods to be evicted", n.pods_to_evict),
        NodeState::Applying | NodeState::Verifying => match (n.applied_revision.as_deref(), n.apply_status.as_deref()) {
            (Some(r), Some(names::APPLY_SUCCEEDED)) if r == rev => {
                match verify_config(spec, n).and_then(|()| verify_rebooted(n)).and_then(|()| verify_health(n)) {
                    Err(why) => format!("waiting for: {why}"),
                    Ok(()) => "every check passed at the deadline".into(),
                }
            }
            (Some(r), _) if r != rev => format!("waiting for the agent to report revision {rev}; it last reported {r}"),
            (Some(_), Some(status @ (names::APPLY_APPLYING | names::APPLY_REBOOTING))) => {
                format!("waiting for the agent, which reports {status}: {}", n.apply_message.as_deref().unwrap_or("no message"))
            }
            _ => format!("waiting for the agent to report revision {rev}; it has not reported (is its DaemonSet pod running?)"),
        },
        _ => String::new(),
    }
}

/// An update that needed a reboot is done only once the node has rebooted,
/// which the kubelet proves with a new bootID; a report alone does not.
pub fn verify_rebooted(n: &NodeView) -> Result<(), String> {
    match (&n.boot_id_at_start, &n.boot_id) {
        (Some(before), Some(now)) if before == now => Err(format!("the node has not rebooted since the update started (bootID {now})")),
        _ => Ok(()),
    }
}

pub fn verify_health(n: &NodeView) -> Result<(), String> {
    if !n.ready {
        return Err("node is not Ready".into());
    }
    if n.hns == HnsReadiness::NotReady {
        return Err("HNS has not programmed the cluster's Services yet".into());
    }
    Ok(())
}

/// The current state of a node for this revision, derived from what is on it.
fn current_state(n: &NodeView, rev: &str, spec: &WindowsNodePoolSpec) -> NodeState {
    let recorded = n.state.as_deref().and_then(NodeState::parse);
    match recorded {
        Some(s) if s.in_flight() => s,
        Some(NodeState::Failed) if n.target_revision.as_deref() == Some(rev) => NodeState::Failed,
        _ => {
            // Not in flight: Updated only if the node really runs this revision.
            let at_target = n.revision_label.as_deref() == Some(rev)
                && n.applied_revision.as_deref() == Some(rev)
                && n.apply_status.as_deref() == Some(names::APPLY_SUCCEEDED)
                && verify_config(spec, n).is_ok();
            if at_target { NodeState::Updated } else { NodeState::Pending }
        }
    }
}

fn fail(p: &mut NodePatch, n: &NodeView, now: Timestamp, reason: &str, message: &str) {
    p.state(NodeState::Failed, now)
        .ann(names::ANN_FAILURE_REASON, Some(reason))
        .ann(names::ANN_FAILURE_MESSAGE, Some(message))
        .ann(names::ANN_BOOT_ID, None);
    // Never strand a node cordoned: a failed node goes back to service, the
    // failure is reported on the pool and the node waits for a person.
    release_cordon(p, n);
}

/// The agent's report is about the configuration it last applied; a node that
/// (re)enters Applying must be applied anew, even for the same revision (a
/// retry after a failure). The agent starts when the report is gone.
fn ask_agent_anew(p: &mut NodePatch) {
    p.ann(names::ANN_APPLIED_REVISION, None).ann(names::ANN_APPLY_STATUS, None).ann(names::ANN_APPLY_MESSAGE, None);
}

/// Whether the kubelet reports a kernel at or past the target (unknown = no).
fn kernel_satisfies(n: &NodeView, target: Option<&WindowsBuild>) -> bool {
    let b = n.kernel_version.as_deref().and_then(|k| k.parse::<WindowsBuild>().ok());
    matches!((b, target), (Some(b), Some(t)) if b.satisfies(t))
}

fn release_cordon(p: &mut NodePatch, n: &NodeView) {
    if n.cordoned_by_winpool {
        p.unschedulable = Some(false);
        p.ann(names::ANN_CORDONED_BY_WINPOOL, None);
    }
}

pub fn decide(pool: &PoolInput<'_>, nodes: &[NodeView], now: Timestamp) -> Plan {
    let spec = pool.spec;
    let rev = revision_of(spec);
    let total = nodes.len();
    let node_timeout = parse_duration(&spec.rollout.node_timeout).unwrap_or(Duration::from_secs(1800));
    let drain_timeout = parse_duration(&spec.rollout.drain.timeout).unwrap_or(Duration::from_secs(600));
    let hns_ready_timeout = parse_duration(&spec.hns.ready_timeout).unwrap_or(Duration::from_secs(900));
    let target_build: Option<WindowsBuild> = spec.os.patch_level.parse().ok();

    let mut patches = Vec::new();
    let mut drain = Vec::new();
    let mut waiting = BTreeMap::new();
    let mut warnings = Vec::new();
    let mut states: BTreeMap<&str, NodeState> = BTreeMap::new();
    let mut config_revisions = BTreeSet::from([rev.clone()]);

    let since = |t: Option<Timestamp>| -> Duration { t.map(|t| now.duration_since(t).unsigned_abs()).unwrap_or_default() };

    let mut sorted: Vec<&NodeView> = nodes.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));

    for n in &sorted {
        if let Some(raw) = n.state.as_deref().filter(|s| NodeState::parse(s).is_none()) {
            warnings.push((n.name.clone(), format!("ignoring unknown {} value {raw:?}", names::ANN_STATE)));
        }
        if let Some(label) = n.revision_label.as_deref() {
            if pool.existing_revisions.contains(label) {
                config_revisions.insert(label.to_string());
            } else if label != rev {
                warnings.push((
                    n.name.clone(),
                    format!("{} {label:?} names no revision of this pool; the node will be rolled to {rev}", names::LABEL_REVISION),
                ));
            }
        }
        let mut state = current_state(n, &rev, spec);
        let mut p = NodePatch::new(&n.name, state, state, "");
        // The pool label places the pool's agent on the node. It goes on as soon as
        // the node is a member, not when its turn comes: the agent then starts (and
        // reports what HNS holds) long before the node is asked to apply, instead of
        // inside its turn. One write per node per pool, never repeated.
        if n.pool_label.as_deref() != Some(pool.name) {
            p.label(names::LABEL_POOL, Some(pool.name));
            p.reason = "joined pool".into();
        }

        // A node that was Updated (or Failed) for an older revision starts again.
        if state.in_flight() && n.target_revision.as_deref() != Some(rev.as_str()) {
            let past_drain = matches!(state, NodeState::Applying | NodeState::Verifying);
            p.ann(names::ANN_TARGET_REVISION, Some(&rev));
            if past_drain {
                // Already drained and cordoned: go straight to applying the new revision.
                p.label(names::LABEL_REVISION, Some(&rev)).state(NodeState::Applying, now);
                ask_agent_anew(&mut p);
                p.ann(names::ANN_DRAINED_REVISION, Some(&rev));
                state = NodeState::Applying;
            }
            p.reason = format!("spec changed mid-rollout: retargeting to revision {rev}");
            states.insert(&n.name, state);
            patches.push(p);
            continue;
        }

        // A node in flight without a readable start time (a hand-edited or garbage
        // annotation) is timed out rather than trusted: it must never wait forever.
        let started = n.started_at.or(n.state_since);
        if state.in_flight() && (started.is_none() || since(started) > node_timeout) {
            let msg = format!(
                "node did not finish {} within nodeTimeout {}; {}",
                state.as_str().to_lowercase(),
                spec.rollout.node_timeout,
                waiting_for(spec, n, &rev, state)
            );
            fail(&mut p, n, now, "Timeout", &msg);
            p.reason = msg;
            states.insert(&n.name, NodeState::Failed);
            patches.push(p);
            continue;
        }

        match state {
            NodeState::Draining => {
                if n.pods_to_evict == 0 {
                    p.label(names::LABEL_REVISION, Some(&rev)).ann(names::ANN_DRAINED_REVISION, Some(&rev)).state(NodeState::Applying, now);
                    ask_agent_anew(&mut p);
                    p.reason = format!("drained; agent revision {rev} scheduled");
                    state = NodeState::Applying;
                } else if since(n.state_since) > drain_timeout {
                    if spec.rollout.drain.force {
                        drain.push((n.name.clone(), DrainMode::Delete));
                        waiting.insert(n.name.clone(), format!("deleting {} pods after drain timeout (force)", n.pods_to_evict));
                    } else {
                        let msg = format!(
                            "{} pods could not be evicted within drain.timeout {} (a PodDisruptionBudget may block them)",
                            n.pods_to_evict, spec.rollout.drain.timeout
                        );
                        fail(&mut p, n, now, "DrainTimeout", &msg);
                        p.reason = msg;
                        state = NodeState::Failed;
                    }
                } else {
                    drain.push((n.name.clone(), DrainMode::Evict));
                    waiting.insert(n.name.clone(), format!("evicting {} pods", n.pods_to_evict));
                }
            }
            NodeState::Applying | NodeState::Verifying => {
                let reported = n.applied_revision.as_deref() == Some(rev.as_str());
                match (reported, n.apply_status.as_deref()) {
                    (true, Some(names::APPLY_FAILED)) => {
                        let msg = n.apply_message.clone().unwrap_or_else(|| "the agent reported a failure".into());
                        fail(&mut p, n, now, "ApplyFailed", &msg);
                        p.reason = format!("agent failed: {msg}");
                        state = NodeState::Failed;
                    }
                    (true, Some(names::APPLY_SUCCEEDED)) => {
                        match verify_config(spec, n).and_then(|()| verify_rebooted(n)).and_then(|()| verify_health(n)).or_else(|why| {
                            // HNS alone may hold a node only for hns.readyTimeout; then it goes on, reported.
                            let hns_only =
                                verify_config(spec, n).is_ok() && verify_rebooted(n).is_ok() && n.ready && n.hns == HnsReadiness::NotReady;
                            if hns_only && state == NodeState::Verifying && since(n.state_since) > hns_ready_timeout {
                                warnings.push((
                                    n.name.clone(),
                                    format!("HNS not ready after hns.readyTimeout {}; marked Updated anyway", spec.hns.ready_timeout),
                                ));
                                Ok(())
                            } else {
                                Err(why)
                            }
                        }) {
                            Ok(()) => {
                                release_cordon(&mut p, n);
                                p.state(NodeState::Updated, now)
                                    .ann(names::ANN_TARGET_REVISION, None)
                                    .ann(names::ANN_BOOT_ID, None)
                                    .ann(names::ANN_FAILURE_REASON, None)
                                    .ann(names::ANN_FAILURE_MESSAGE, None);
                                p.ann(names::ANN_STARTED_AT, None);
                                p.reason = format!("verified at revision {rev}");
                                state = NodeState::Updated;
                            }
                            Err(why) => {
                                if state == NodeState::Applying {
                                    p.state(NodeState::Verifying, now);
                                    p.reason = "agent applied the revision; verifying".into();
                                    state = NodeState::Verifying;
                                }
                                waiting.insert(n.name.clone(), why);
                            }
                        }
                    }
                    _ => {
                        waiting.insert(n.name.clone(), format!("waiting for the agent to apply revision {rev}"));
                    }
                }
            }
            NodeState::Updated => {
                if n.state.as_deref() != Some(NodeState::Updated.as_str()) {
                    // Found already at target (a new node built from the right image, or
                    // a restart between two writes): record it without rolling it.
                    p.state(NodeState::Updated, now);
                    p.reason = format!("already at revision {rev}");
                }
                if n.cordoned_by_winpool {
                    release_cordon(&mut p, n);
                    p.reason = "uncordoned: rollout of this node is complete".into();
                }
            }
            NodeState::Pending | NodeState::Failed => {}
        }
        states.insert(&n.name, state);
        if !p.labels.is_empty() || !p.annotations.is_empty() || p.unschedulable.is_some() {
            p.to = state;
            patches.push(p);
        }
    }

    // Start new nodes, up to maxUnavailable, when nothing holds the rollout.
    let failed_count = states.values().filter(|s| **s == NodeState::Failed).count();
    let mut in_flight = states.values().filter(|s| s.in_flight()).count();
    let limit = max_unavailable(&spec.rollout.max_unavailable, total);
    let max_failed = spec.rollout.max_failed_nodes;
    let hold = if spec.rollout.paused {
        Some(Hold::PausedBySpec)
    } else if max_failed > 0 && failed_count >= max_failed as usize {
        Some(Hold::FailureLimit { failed: failed_count, limit: max_failed })
    } else {
        match spec.rollout.maintenance_window.as_ref().map(Window::parse) {
            None => None,
            Some(Err(e)) => Some(Hold::BadWindow(e.to_string())),
            Some(Ok(w)) if !w.is_open(now) => Some(Hold::OutsideWindow { opens: w.next_open(now) }),
            Some(Ok(_)) => None,
        }
    };
    // Nodes out of service anyway (NotReady, or cordoned by someone else) count
    // against maxUnavailable like nodes in flight, and are rolled first: rolling
    // them costs no extra capacity.
    let out_of_service = |n: &NodeView| !n.ready || (n.unschedulable && !n.cordoned_by_winpool);
    let mut unavailable_idle =
        sorted.iter().filter(|n| states.get(n.name.as_str()).is_some_and(|s| !s.in_flight()) && out_of_service(n)).count();
    if hold.is_none() {
        let mut candidates: Vec<&&NodeView> = sorted.iter().filter(|n| states.get(n.name.as_str()) == Some(&NodeState::Pending)).collect();
        candidates.sort_by_key(|n| (!out_of_service(n), n.name.as_str()));
        for n in candidates {
            let idle_down = out_of_service(n);
            // Starting a node that is already down adds no unavailability, but
            // in-flight work stays bounded by the limit either way.
            let budget_used = if idle_down { in_flight } else { in_flight + unavailable_idle };
            if budget_used >= limit {
                if !idle_down {
                    break;
                }
                continue;
            }
            let mut p = patches
                .iter()
                .position(|p| p.node == n.name)
                .map(|i| patches.remove(i))
                .unwrap_or_else(|| NodePatch::new(&n.name, NodeState::Pending, NodeState::Pending, ""));
            let now_s = now.to_string();
            if n.pool_label.as_deref() != Some(pool.name) {
                p.label(names::LABEL_POOL, Some(pool.name));
            }
            p.ann(names::ANN_TARGET_REVISION, Some(&rev))
                .ann(names::ANN_STARTED_AT, Some(&now_s))
                .ann(names::ANN_FAILURE_REASON, None)
                .ann(names::ANN_FAILURE_MESSAGE, None);
            // The kubelet and agent already report the target configuration (a node built
            // from the right image, or a revision that changed nothing this node lacks):
            // the agent only has to confirm, so the node keeps serving — no cordon, no drain.
            let at_target = verify_config(spec, n).is_ok();
            // An update below the patch level ends in a reboot: remember the boot it
            // started from, so that only a new bootID counts as having rebooted.
            let below_patch_level = !kernel_satisfies(n, target_build.as_ref());
            if let (true, Some(boot)) = (below_patch_level && !at_target, n.boot_id.as_deref()) {
                p.ann(names::ANN_BOOT_ID, Some(boot));
            }
            if !n.unschedulable && !at_target {
                p.unschedulable = Some(true);
                p.ann(names::ANN_CORDONED_BY_WINPOOL, Some("true"));
            }
            let already_drained = n.drained_revision.as_deref() == Some(rev.as_str());
            let next = if at_target {
                p.label(names::LABEL_REVISION, Some(&rev)).state(NodeState::Applying, now);
                p.reason = format!("already at the target configuration; agent revision {rev} confirms it (no cordon, no drain)");
                NodeState::Applying
            } else if spec.rollout.drain.enabled && !already_drained {
                p.state(NodeState::Draining, now);
                p.reason = format!("cordoned; draining for revision {rev}");
                NodeState::Draining
            } else {
                p.label(names::LABEL_REVISION, Some(&rev)).state(NodeState::Applying, now);
                ask_agent_anew(&mut p);
                p.reason = format!("cordoned; agent revision {rev} scheduled (no drain)");
                NodeState::Applying
            };
            states.insert(&n.name, next);
            if next == NodeState::Draining {
                // Its pods are observed next round; nothing is evicted before the cordon lands.
                waiting.insert(n.name.clone(), "cordoned; drain starts next round".into());
            }
            patches.push(p);
            in_flight += 1;
            if idle_down {
                unavailable_idle -= 1;
            }
        }
    }

    // The HNS counts an agent reported before the update describe the old boot:
    // HNS starts from nothing after the reboot, so they must not make the node look
    // ready. They are dropped when the node starts applying, and the node is marked
    // as awaiting a fresh report; an agent that never reported is not waited for.
    for p in patches.iter_mut() {
        // `sorted` is by name: a lookup per patch, not a scan of the pool.
        let Ok(i) = sorted.binary_search_by(|n| n.name.as_str().cmp(p.node.as_str())) else { continue };
        let n = sorted[i];
        // A node confirmed "already at target" does not reboot: its counts stay valid.
        if p.to == NodeState::Applying && p.from != NodeState::Applying && n.hns_reported && verify_config(spec, n).is_err() {
            p.ann(names::ANN_HNS_LOAD_BALANCERS, None).ann(names::ANN_HNS_ENDPOINTS, None).ann(names::ANN_HNS_AWAITING, Some("true"));
        }
        if matches!(p.to, NodeState::Updated | NodeState::Failed) && p.from != p.to {
            p.ann(names::ANN_HNS_AWAITING, None);
        }
    }

    // Status.
    let mut by_state: BTreeMap<NodeState, usize> = NodeState::ALL.iter().map(|s| (*s, 0)).collect();
    for s in states.values() {
        *by_state.entry(*s).or_default() += 1;
    }
    let count = |s: NodeState| by_state.get(&s).copied().unwrap_or(0) as i32;
    let counts = NodeCounts {
        total: total as i32,
        updated: count(NodeState::Updated),
        updating: count(NodeState::Draining) + count(NodeState::Applying) + count(NodeState::Verifying),
        pending: count(NodeState::Pending),
        failed: count(NodeState::Failed),
    };

    let mut failed: Vec<FailedInfo> = Vec::new();
    for n in &sorted {
        if states.get(n.name.as_str()) != Some(&NodeState::Failed) {
            continue;
        }
        // A node that failed in this very plan carries its reason in the patch.
        let from_patch = patches.iter().find(|p| p.node == n.name && p.to == NodeState::Failed);
        let get = |k: &str, fallback: &Option<String>| {
            from_patch.and_then(|p| p.annotations.get(k).cloned().flatten()).or_else(|| fallback.clone()).unwrap_or_default()
        };
        failed.push(FailedInfo {
            node: n.name.clone(),
            reason: get(names::ANN_FAILURE_REASON, &n.failure_reason),
            message: get(names::ANN_FAILURE_MESSAGE, &n.failure_message),
            since: if from_patch.is_some() { Some(now) } else { n.state_since },
        });
    }

    let behind_patch_level = nodes.iter().filter(|n| !kernel_satisfies(n, target_build.as_ref())).count();

    let requeue_after = if counts.updating > 0 {
        IN_FLIGHT_REQUEUE
    } else if let Some(Hold::OutsideWindow { opens }) = &hold {
        if counts.pending > 0 {
            let d = opens.duration_since(now).unsigned_abs();
            d.clamp(Duration::from_secs(1), IDLE_REQUEUE)
        } else {
            IDLE_REQUEUE
        }
    } else {
        IDLE_REQUEUE
    };

    Plan {
        revision: rev,
        patches,
        drain,
        config_revisions,
        counts,
        by_state,
        failed,
        hold,
        waiting,
        behind_patch_level,
        requeue_after,
        warnings,
    }
}

impl Plan {
    pub fn failed_nodes_status(&self) -> Vec<FailedNode> {
        self.failed
            .iter()
            .take(MAX_LISTED_FAILED)
            .map(|f| FailedNode {
                name: f.node.clone(),
                reason: f.reason.clone(),
                message: f.message.clone(),
                since: f.since.map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
