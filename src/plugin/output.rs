//! What `kubectl winpool status` and `plan` report, built purely from the pool,
//! every pool (for membership) and the Windows nodes, with the operator's own
//! code: `membership::members_of` picks the members, `node_view::node_view`
//! reads them, `rollout::current_state` gives each node's state,
//! `rollout::preview` (the decision as if nothing held the rollout) the next
//! wave, `rollout::start_order` the order of the rest.
//!
//! [`StatusReport`] and [`PlanReport`] are the stable `-o json|yaml` shapes
//! (camelCase; absent values are omitted). Times are RFC 3339 UTC.

use std::collections::BTreeSet;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use serde::{Deserialize, Serialize};

use crate::api::node_record::NodeRecord;
use crate::api::report::WindowsNodeReport;
use crate::api::{NodeCounts, WindowsNodePool, conditions, names};
use crate::decision::agent_report::AgentReport;
use crate::decision::membership::{PoolSelector, members_of};
use crate::decision::node_view::node_view;
use crate::decision::revision::revision_of;
use crate::decision::rollout::{self, HnsReadiness, NodeState, NodeView, PoolInput};
use crate::decision::versions::WindowsBuild;
use crate::decision::window::Schedule;

/// `kubectl winpool status <pool> -o json|yaml`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    pub pool: String,
    /// The revision the pool's spec hashes to: the one the node states are about.
    pub revision: String,
    /// spec.os.patchLevel: the minimum build.revision.
    pub patch_level: String,
    /// spec.rollout.paused, or the annotation winpool.dev/paused.
    pub paused: bool,
    /// Which of the two pauses it (spec.rollout.paused wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_by: Option<String>,
    /// The counts the operator last wrote (status.nodes).
    pub counts: NodeCounts,
    /// The operator's Progressing condition, if it wrote one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressing: Option<ConditionSummary>,
    /// Nodes the pool selects but leaves alone (selected by two pools, another Windows release).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflicts: Option<String>,
    /// Members whose provider may reimage them, undoing in-place patches (condition ProviderManaged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_managed: Option<String>,
    /// The operator's estimate of when the rollout is done (status.estimatedCompletionTime).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_completion: Option<String>,
    /// The maintenance window open now or next (status.nextWindowStart/End).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_window: Option<(String, String)>,
    /// Nodes whose drain a PodDisruptionBudget blocks: node and budget (status.drainBlockedNodes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drain_blocked: Vec<(String, String)>,
    /// One entry per member node, by name.
    pub nodes: Vec<NodeRow>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConditionSummary {
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// One member node in `status`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeRow {
    pub name: String,
    /// Pending, Draining, Applying, Verifying, Updated or Failed, derived as the operator derives it.
    pub state: String,
    /// winpool.dev/state-since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// The winpool.dev/revision label: the revision the node is asked to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The node's build.revision (e.g. 20348.2762) from the kubelet's kernelVersion,
    /// else the build alone from its node.kubernetes.io/windows-build label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// The WindowsHNSReady condition: True, False or Unknown.
    pub hns: String,
    /// A failed node's failure reason and message, else the agent's apply-message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `kubectl winpool plan <pool> -o json|yaml`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlanReport {
    pub pool: String,
    pub revision: String,
    /// spec.rollout.maxUnavailable resolved against the pool's size.
    pub max_unavailable: usize,
    /// Nodes out of service (not Ready, or cordoned by someone else) that are
    /// not in flight: they count against maxUnavailable.
    #[serde(default)]
    pub out_of_service: usize,
    /// What holds the rollout now (no new node starts), if anything: a
    /// pause, a window, or pending nodes that are all held, refused or
    /// blocked, as the operator's Progressing condition says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<String>,
    /// Pending nodes, as status.nodes.pending counts them: the ones in
    /// `order` and the ones held, refused or blocked.
    #[serde(default)]
    pub pending: usize,
    /// The maintenance window, when the pool has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowReport>,
    /// Nodes between Pending and Updated, with what each waits for.
    pub in_flight: Vec<InFlightNode>,
    pub updated: Vec<String>,
    pub failed: Vec<FailedNodeReport>,
    /// Every Pending node in the order the operator starts them.
    pub order: Vec<String>,
    /// `order` in groups: the first is exactly what the operator starts in its
    /// next round once nothing holds it; each later one is maxUnavailable
    /// nodes. Empty when no node is Pending.
    pub waves: Vec<Vec<String>>,
    /// Pending nodes never started: they would need a containerd the pool
    /// does not allow replacing (spec.runtime.upgrade); node and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runtime_refused: Vec<(String, String)>,
    /// Pending nodes their agent's preflight blocks for this revision: never
    /// cordoned until it passes; node and the agent's reasons.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preflight_blocked: Vec<(String, String)>,
    /// Pending nodes a person holds (`winpool.dev/hold=true`): never started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<String>,
    /// Pending nodes whose staged update is a hotpatch the pool installs in
    /// service (`rollout.hotpatch`): no cordon, no drain, no reboot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hotpatch: Vec<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WindowReport {
    pub open: bool,
    /// When the window open now opened, or when the next opens (after
    /// rollout.notAllowedDates), and when it closes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opens: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closes: Option<String>,
    /// Why the window cannot be read, if it cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InFlightNode {
    pub name: String,
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FailedNodeReport {
    pub name: String,
    pub reason: String,
    pub message: String,
}

/// The pool's members, read as the operator reads them.
pub struct Members {
    pub views: Vec<NodeView>,
    /// The same nodes, in the order of `views`.
    pub nodes: Vec<Node>,
    pub conflicts: Option<String>,
    /// As the operator's ProviderManaged condition says it.
    pub provider_managed: Option<String>,
}

/// The members of `pool` among `nodes`, judged against every pool (a node two
/// pools select belongs to neither), as `membership::members_of` judges them.
pub fn members(pool: &WindowsNodePool, pools: &[WindowsNodePool], nodes: &[Node], reports: &[WindowsNodeReport]) -> Members {
    let selectors: Vec<PoolSelector> = pools
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() || p.name_any() == pool.name_any())
        .map(|p| PoolSelector::new(&p.name_any(), p.spec.os.version, &p.spec.node_selector))
        .collect();
    let records: Vec<NodeRecord> = nodes.iter().map(NodeRecord::from).collect();
    let m = members_of(&pool.name_any(), &selectors, records.iter().map(|r| (r.name.as_str(), r)));
    let wanted: BTreeSet<&str> = m.members.iter().map(String::as_str).collect();
    let mut picked: Vec<Node> = nodes.iter().filter(|n| wanted.contains(n.name_any().as_str())).cloned().collect();
    picked.sort_by_key(|n| n.name_any());
    let conflicts = (!m.conflicts.is_empty()).then(|| m.conflicts.message(pool.spec.os.version.as_str()));
    let provider_managed = (!m.managed.is_empty()).then(|| m.managed.message(m.members.len()));
    let views = picked
        .iter()
        .map(|n| NodeView {
            zone: crate::decision::node_view::zone_of(&NodeRecord::from(n), &pool.spec.rollout),
            ..view(n, report_of(n, reports))
        })
        .collect();
    Members { views, nodes: picked, conflicts, provider_managed }
}

/// A node's view with the HNS readiness the operator last judged (its
/// WindowsHNSReady condition): the plugin does not recount the cluster's Services.
pub fn view(node: &Node, report: Option<&WindowsNodeReport>) -> NodeView {
    let hns = match hns_condition(node).as_str() {
        "True" => HnsReadiness::Ready,
        "False" => HnsReadiness::NotReady,
        _ => HnsReadiness::Unknown,
    };
    let record = NodeRecord::from(node);
    node_view(&record, &AgentReport::of(report), hns)
}

/// The report of `node`'s agent: the one named after it.
pub fn report_of<'a>(node: &Node, reports: &'a [WindowsNodeReport]) -> Option<&'a WindowsNodeReport> {
    reports.iter().find(|r| r.metadata.name == node.metadata.name)
}

fn hns_condition(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == names::NODE_CONDITION_HNS_READY))
        .map_or_else(|| "Unknown".to_string(), |c| c.status.clone())
}

/// build.revision from the kubelet's kernelVersion (`10.0.20348.2762` → `20348.2762`),
/// else the build from the windows-build label.
fn patch_of(node: &Node, v: &NodeView) -> Option<String> {
    let from_kernel = v.kernel_version.as_deref().and_then(|k| k.parse::<WindowsBuild>().ok()).filter(|b| b.revision.is_some());
    let b = from_kernel.or_else(|| node.labels().get(names::LABEL_WINDOWS_BUILD).and_then(|l| l.parse().ok()))?;
    Some(match b.revision {
        Some(r) => format!("{}.{r}", b.build),
        None => b.build.to_string(),
    })
}

fn state_of(v: &NodeView, rev: &str, pool: &WindowsNodePool) -> NodeState {
    rollout::current_state(v, rev, &pool.spec)
}

/// `spec.rollout.paused` or the annotation that pauses the pool, if either does.
fn pause_source(pool: &WindowsNodePool) -> Option<String> {
    match (pool.spec.rollout.paused, pool.paused_by_annotation()) {
        (true, _) => Some("spec.rollout.paused".into()),
        (false, true) => Some(names::ANN_PAUSED.into()),
        (false, false) => None,
    }
}

pub fn status_report(pool: &WindowsNodePool, m: &Members) -> StatusReport {
    let resolved = crate::decision::patch_policy::as_resolved(pool);
    let pool = resolved.as_ref();
    let rev = revision_of(&pool.spec);
    let status = pool.status.clone().unwrap_or_default();
    let progressing = status.conditions.iter().find(|c| c.type_ == conditions::PROGRESSING).map(|c| ConditionSummary {
        status: c.status.clone(),
        reason: c.reason.clone(),
        message: c.message.clone(),
    });
    let nodes = m
        .views
        .iter()
        .zip(&m.nodes)
        .map(|(v, n)| {
            let state = state_of(v, &rev, pool);
            let message = match state {
                NodeState::Failed => Some(format!(
                    "{}: {}",
                    v.failure_reason.as_deref().unwrap_or("Failed"),
                    v.failure_message.as_deref().unwrap_or("no message")
                )),
                _ => v.apply_message.clone().filter(|s| !s.is_empty()),
            };
            NodeRow {
                name: v.name.clone(),
                state: state.as_str().to_string(),
                since: v.state_since.map(|t| t.to_string()),
                revision: v.revision_label.clone(),
                patch: patch_of(n, v),
                hns: hns_condition(n),
                message,
            }
        })
        .collect();
    StatusReport {
        pool: pool.name_any(),
        revision: rev,
        patch_level: pool.spec.os.patch_level.clone(),
        paused: pool.paused(),
        paused_by: pause_source(pool),
        progressing,
        conflicts: m.conflicts.clone(),
        provider_managed: m.provider_managed.clone(),
        estimated_completion: status.estimated_completion_time.as_ref().map(|t| t.0.to_string()),
        next_window: status
            .next_window_start
            .as_ref()
            .map(|s| (s.0.to_string(), status.next_window_end.as_ref().map_or_else(|| "-".to_string(), |e| e.0.to_string()))),
        drain_blocked: status.drain_blocked_nodes.iter().map(|b| (b.name.clone(), b.pod_disruption_budget.clone())).collect(),
        counts: status.nodes,
        nodes,
    }
}

/// One line of `kubectl winpool list`: a pool as its status says it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolRow {
    pub name: String,
    pub os: String,
    pub patch_level: String,
    /// The revision the operator last reported (status.revision).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    pub counts: NodeCounts,
    pub paused: bool,
    /// The Progressing condition's reason and message, if the operator wrote one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Every pool, by name.
pub fn list_report(pools: &[WindowsNodePool]) -> Vec<PoolRow> {
    let mut rows: Vec<PoolRow> = pools
        .iter()
        .map(|p| {
            let status = p.status.clone().unwrap_or_default();
            let progressing = status.conditions.iter().find(|c| c.type_ == conditions::PROGRESSING);
            PoolRow {
                name: p.name_any(),
                os: p.spec.os.version.as_str().to_string(),
                patch_level: p.spec.os.patch_level.clone(),
                revision: status.revision.clone(),
                counts: status.nodes.clone(),
                paused: p.paused(),
                reason: progressing.map(|c| c.reason.clone()),
                message: progressing.map(|c| c.message.clone()),
            }
        })
        .collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    rows
}

/// The maintenance windows at `now`: the one open, or the next; `None`
/// when the pool has neither windows nor not-allowed dates.
pub fn window_report(pool: &WindowsNodePool, now: Timestamp) -> Option<WindowReport> {
    match Schedule::parse(&pool.spec.rollout) {
        Ok(None) => None,
        Ok(Some(s)) => {
            let span = s.at(now);
            Some(WindowReport {
                open: span.is_some_and(|w| w.is_open(now)),
                opens: span.and_then(|w| w.known_start()).map(|t| t.to_string()),
                closes: span.and_then(|w| w.known_end()).map(|t| t.to_string()),
                error: None,
            })
        }
        Err(e) => Some(WindowReport { open: false, opens: None, closes: None, error: Some(e.to_string()) }),
    }
}

/// A pause the operator's bad-update breaker wrote, as the operator says it
/// (the pool's Paused condition): the plan reads one pool, not the
/// cluster's failed installs the breaker counted.
fn breaker_hold(pool: &WindowsNodePool, hold: &rollout::Hold) -> Option<String> {
    if *hold != rollout::Hold::PausedByAnnotation {
        return None;
    }
    let paused = pool.status.as_ref()?.conditions.iter().find(|c| c.type_ == crate::api::conditions::PAUSED)?;
    (paused.status == "True" && paused.reason == "BadUpdate").then(|| format!("paused by the bad-update breaker: {}", paused.message))
}

/// What only the operator sees holds the pool, as it says it (the pool's
/// Progressing condition): the pool it follows (the plan reads one pool, not
/// that one), and its nodes' HNS backlog (estimated from the Service and
/// EndpointSlice watches the operator keeps).
fn operator_hold(pool: &WindowsNodePool) -> Option<String> {
    use crate::decision::status::Progress;
    let progressing = pool.status.as_ref()?.conditions.iter().find(|c| c.type_ == crate::api::conditions::PROGRESSING)?;
    match Progress::parse(&progressing.reason)? {
        Progress::AwaitingFollowedPool if pool.spec.rollout.follows.is_some() => Some(progressing.message.clone()),
        Progress::WaitingForHNS => Some(progressing.message.clone()),
        _ => None,
    }
}

pub fn plan_report(pool: &WindowsNodePool, m: &Members, now: Timestamp) -> PlanReport {
    let resolved = crate::decision::patch_policy::as_resolved(pool);
    let pool = resolved.as_ref();
    let name = pool.name_any();
    let rev = revision_of(&pool.spec);
    let rules = crate::decision::rollout::PoolRules::of(&pool.spec);
    let existing = BTreeSet::new();
    let average = pool.status.as_ref().and_then(|s| s.average_node_update_seconds).map(|s| std::time::Duration::from_secs(s.max(0) as u64));
    let input = PoolInput {
        name: &name,
        spec: &pool.spec,
        rev: &rev,
        rules: &rules,
        existing_revisions: &existing,
        average_node_update: average,
        target_marked_at: None,
        gates: &[],
        paused_by_annotation: pool.paused_by_annotation(),
        // The breaker counts the whole cluster's nodes, which a plan of one pool does not read.
        bad_update: None,
        clock_skew: None,
        // The same: the operator's word on the ring stands in for it (operator_hold).
        ring: None,
        // Other pools' nodes in flight are the operator's to count.
        cluster: None,
        // Hook Jobs are the operator's to read: a plan shows a node awaiting its hook.
        hooks_namespace: Some("(the operator's hooks namespace)"),
        // The operator's estimate (operator_hold).
        hns_backlog: std::time::Duration::ZERO,
        evictions_unheard: 0,
    };
    let preview = rollout::preview(&input, &m.views, now);
    let limit = preview.unavailable.max_unavailable;
    let states: Vec<(&NodeView, NodeState)> = m.views.iter().map(|v| (v, state_of(v, &rev, pool))).collect();
    let in_state = |want: NodeState| states.iter().filter(move |(_, s)| *s == want).map(|(v, _)| *v);

    let blocked: std::collections::BTreeMap<&String, &String> = preview.preflight_blocked().collect();
    let refused =
        |v: &&NodeView| preview.runtime_refused.contains_key(&v.name) || blocked.contains_key(&v.name) || preview.held.contains(&v.name);
    let order: Vec<String> =
        rollout::start_order(in_state(NodeState::Pending).filter(|v| !refused(v))).into_iter().map(|v| v.name.clone()).collect();
    let starting: BTreeSet<&str> =
        preview.patches.iter().filter(|p| p.from == NodeState::Pending && p.to != NodeState::Pending).map(|p| p.node.as_str()).collect();
    let hotpatch = in_state(NodeState::Pending).filter(|v| rollout::hotpatchable(&pool.spec, &rev, v)).map(|v| v.name.clone()).collect();
    let pending = in_state(NodeState::Pending).count();
    // Every pending node held, refused or blocked: what Progressing says of it.
    let standstill = crate::decision::status::standstill(&preview, pending).map(|s| format!("{}: {}", s.reason.as_str(), s.message));
    PlanReport {
        pool: name.clone(),
        revision: rev,
        max_unavailable: limit,
        out_of_service: preview.unavailable.out_of_service,
        hold: preview
            .hold
            .as_ref()
            .map(|h| breaker_hold(pool, h).unwrap_or_else(|| h.to_string()))
            .or_else(|| operator_hold(pool))
            .or(standstill),
        pending,
        window: window_report(pool, now),
        in_flight: in_flight(&states, &preview.waiting),
        updated: in_state(NodeState::Updated).map(|v| v.name.clone()).collect(),
        failed: in_state(NodeState::Failed).map(failed_report).collect(),
        waves: waves(&order, &starting, limit),
        order,
        runtime_refused: preview.runtime_refused.iter().map(|(n, why)| (n.clone(), why.clone())).collect(),
        preflight_blocked: blocked.iter().map(|(n, why)| (n.to_string(), why.to_string())).collect(),
        held: preview.held.iter().cloned().collect(),
        hotpatch,
    }
}

/// The nodes in flight, with what each waits for this round.
fn in_flight(states: &[(&NodeView, NodeState)], waiting: &std::collections::BTreeMap<String, String>) -> Vec<InFlightNode> {
    let node = |(v, s): &(&NodeView, NodeState)| InFlightNode {
        name: v.name.clone(),
        state: s.as_str().to_string(),
        waiting_for: waiting.get(&v.name).cloned(),
    };
    states.iter().filter(|(_, s)| s.in_flight()).map(node).collect()
}

fn failed_report(v: &NodeView) -> FailedNodeReport {
    FailedNodeReport {
        name: v.name.clone(),
        reason: v.failure_reason.clone().unwrap_or_default(),
        message: v.failure_message.clone().unwrap_or_default(),
    }
}

/// `order` in waves: first the nodes starting next (kept in `order`'s order),
/// then the rest in groups of `limit`.
pub fn waves(order: &[String], starting: &BTreeSet<&str>, limit: usize) -> Vec<Vec<String>> {
    let first: Vec<String> = order.iter().filter(|n| starting.contains(n.as_str())).cloned().collect();
    let rest: Vec<String> = order.iter().filter(|n| !starting.contains(n.as_str())).cloned().collect();
    let mut out = Vec::new();
    if !first.is_empty() {
        out.push(first);
    }
    out.extend(rest.chunks(limit.max(1)).map(<[String]>::to_vec));
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::WindowsNodePoolSpec;

    const SPEC: &str =
        "nodeSelector: {matchLabels: {pool: a}}\nos: {version: ltsc2022, patchLevel: 10.0.20348.2762}\nrollout: {maxUnavailable: 2}";

    fn pool(name: &str, spec: &str) -> WindowsNodePool {
        let spec: WindowsNodePoolSpec = serde_saphyr::from_str(spec).unwrap();
        WindowsNodePool::new(name, spec)
    }

    fn now() -> Timestamp {
        "2026-12-01T12:00:00Z".parse().unwrap()
    }

    fn pending(name: &str) -> NodeView {
        // Its agent's preflight of the pool's revision passed.
        let rev = revision_of(&pool("a", SPEC).spec);
        let preflight = rollout::Preflight { revision: rev.clone(), verdict: rollout::PreflightVerdict::Ready };
        let staging = rollout::Staging { revision: rev, state: rollout::StagingState::Staged, reboot_free: false };
        NodeView {
            name: name.into(),
            pool_label: Some("a".into()),
            ready: true,
            kernel_version: Some("10.0.20348.2700".into()),
            cni_mode: Some(crate::decision::agent_report::Reported::parse("overlay")),
            preflight: Some(preflight),
            staging: Some(staging),
            ..Default::default()
        }
    }

    fn members_of_views(views: Vec<NodeView>) -> Members {
        let nodes = views.iter().map(|_| Node::default()).collect();
        Members { views, nodes, conflicts: None, provider_managed: None }
    }

    fn first_wave_of_decide(p: &WindowsNodePool, views: &[NodeView]) -> Vec<String> {
        let existing = BTreeSet::new();
        let plan = rollout::decide(&PoolInput::of_spec("a", &p.spec, &existing), views, now());
        plan.patches.iter().filter(|p| p.from == NodeState::Pending && p.to != NodeState::Pending).map(|p| p.node.clone()).collect()
    }

    #[test]
    fn nodes_out_of_service_go_first_then_by_name_in_waves_of_max_unavailable() {
        let p = pool("a", SPEC);
        let mut views: Vec<NodeView> = ["n5", "n1", "n3", "n2", "n4"].into_iter().map(pending).collect();
        views[4].ready = false; // n4 is down anyway: rolling it first costs no capacity
        let r = plan_report(&p, &members_of_views(views.clone()), now());
        assert_eq!(r.order, ["n4", "n1", "n2", "n3", "n5"]);
        assert_eq!(r.waves, [vec!["n4", "n1"], vec!["n2", "n3"], vec!["n5"]]);
        assert_eq!(r.max_unavailable, 2);
        assert_eq!(r.out_of_service, 0, "n4 starts first: in flight, it is no longer counted apart");
        assert_eq!(r.hold, None);
        assert_eq!(r.waves[0], first_wave_of_decide(&p, &views), "the first wave is what the operator starts");
    }

    /// The HNS backlog is the operator's estimate: the plan says what the
    /// operator's Progressing says of it, and nothing when it says otherwise.
    #[test]
    fn the_plan_shows_the_operators_word_on_waiting_for_hns() {
        let mut p = pool("a", SPEC);
        let waiting = "2 nodes pending; each Windows node's HNS has an estimated 95s of Service and EndpointSlice changes to program, over rollout.hnsPacing.budget 30s";
        let progressing = |reason: &str| crate::api::WindowsNodePoolStatus {
            conditions: vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                type_: crate::api::conditions::PROGRESSING.into(),
                status: "False".into(),
                reason: reason.into(),
                message: waiting.into(),
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()),
                observed_generation: None,
            }],
            ..Default::default()
        };
        let views: Vec<NodeView> = ["n1", "n2"].into_iter().map(pending).collect();
        p.status = Some(progressing("WaitingForHNS"));
        assert_eq!(plan_report(&p, &members_of_views(views.clone()), now()).hold.as_deref(), Some(waiting));
        p.status = Some(progressing("NodesUpdating"));
        assert_eq!(plan_report(&p, &members_of_views(views), now()).hold, None);
    }

    /// Every pending node blocked by its agent: the plan counts them pending
    /// and says what stops them as the operator's Progressing does.
    #[test]
    fn the_plan_and_the_status_agree_on_pending_nodes_their_agents_block() {
        let p = pool("a", SPEC);
        let blocked = |name: &str| NodeView {
            preflight: Some(rollout::Preflight {
                revision: revision_of(&p.spec),
                verdict: rollout::PreflightVerdict::Blocked("networking.kubeProxy.enableDSR: kube-proxy runs without DSR".into()),
            }),
            ..pending(name)
        };
        let views: Vec<NodeView> = ["n1", "n2"].into_iter().map(blocked).collect();
        let r = plan_report(&p, &members_of_views(views.clone()), now());
        let existing = BTreeSet::new();
        let decided = rollout::decide(&PoolInput::of_spec("a", &p.spec, &existing), &views, now());
        let status = crate::decision::status::build_status(&p.spec, &decided, &Default::default(), None, None, None, now());
        let progressing = status.conditions.iter().find(|c| c.type_ == conditions::PROGRESSING).unwrap();
        assert_eq!(r.pending as i32, status.nodes.pending);
        let (pending, why) = progressing.message.split_once("; ").unwrap();
        assert_eq!((r.hold, pending), (Some(format!("{}: {why}", progressing.reason)), "2 pending"));
        let text = crate::plugin::table::plan(&plan_report(&p, &members_of_views(views), now()));
        assert!(!text.contains("No node is pending") && text.contains("2 pending, none of them can start"), "{text}");
    }

    fn in_flight(p: &WindowsNodePool, name: &str) -> NodeView {
        let rev = revision_of(&p.spec);
        let mut busy = pending(name);
        busy.state = crate::decision::rollout::NodeState::Applying.into();
        busy.state_since = Some(now());
        busy.started_at = Some(now());
        busy.target_revision = Some(rev.clone());
        busy.revision_label = Some(rev);
        busy
    }

    #[test]
    fn an_updated_node_that_went_down_is_counted_out_of_service_and_takes_a_slot() {
        let p = pool("a", SPEC);
        let rev = revision_of(&p.spec);
        let mut down = pending("n0");
        down.ready = false;
        down.state = crate::decision::rollout::NodeState::Updated.into();
        down.state_since = Some(now());
        down.revision_label = Some(rev.clone());
        down.applied_revision = Some(rev);
        down.apply_status = Some(crate::decision::agent_report::Reported::Known(crate::api::report::ApplyStatus::Succeeded));
        down.kernel_version = Some("10.0.20348.2762".into());
        let mut views = vec![down];
        views.extend(["n1", "n2", "n3"].into_iter().map(pending));
        let r = plan_report(&p, &members_of_views(views.clone()), now());
        assert_eq!(r.updated, ["n0"]);
        assert_eq!(r.out_of_service, 1);
        assert_eq!(r.waves, [vec!["n1"], vec!["n2", "n3"]], "one slot of two is taken");
        assert_eq!(r.waves[0], first_wave_of_decide(&p, &views));
    }

    #[test]
    fn a_node_in_flight_takes_a_slot_of_the_first_wave() {
        let p = pool("a", SPEC);
        let mut views = vec![in_flight(&p, "n0")];
        views.extend(["n1", "n2", "n3"].into_iter().map(pending));
        let r = plan_report(&p, &members_of_views(views.clone()), now());
        assert_eq!(r.in_flight.len(), 1);
        assert_eq!((r.in_flight[0].name.as_str(), r.in_flight[0].state.as_str()), ("n0", "Applying"));
        assert!(r.in_flight[0].waiting_for.as_deref().is_some_and(|w| w.contains("agent")), "{:?}", r.in_flight[0]);
        assert_eq!(r.waves, [vec!["n1"], vec!["n2", "n3"]]);
        assert_eq!(r.waves[0], first_wave_of_decide(&p, &views));
    }

    #[test]
    fn a_pool_the_bad_update_breaker_paused_says_so_in_its_plan() {
        let mut p = pool("a", SPEC);
        p.metadata.annotations = Some([(names::ANN_PAUSED.to_string(), "true".to_string())].into());
        let views: Vec<NodeView> = ["n1", "n2"].into_iter().map(pending).collect();
        assert_eq!(
            plan_report(&p, &members_of_views(views.clone()), now()).hold.as_deref(),
            Some("paused by the annotation winpool.dev/paused (kubectl winpool resume)")
        );
        let said = "the update to 10.0.20348.2762 failed with 0x800F0922 on 3 nodes across pools (a/n0, b/m0, b/m1)";
        let paused = serde_json::json!({"conditions": [{"type": "Paused", "status": "True", "reason": "BadUpdate", "message": said,
            "lastTransitionTime": "2026-12-04T10:00:00Z"}]});
        p.status = Some(serde_json::from_value(paused).unwrap());
        let r = plan_report(&p, &members_of_views(views), now());
        assert_eq!(r.hold, Some(format!("paused by the bad-update breaker: {said}")));
    }

    #[test]
    fn a_held_rollout_says_why_and_still_shows_the_wave_that_starts_when_it_lifts() {
        let p = pool("a", &SPEC.replace("maxUnavailable: 2}", "maxUnavailable: 2, paused: true}"));
        assert!(p.spec.rollout.paused);
        // Paused with a node in flight: it finishes, and takes one of the two slots until then.
        let mut views = vec![in_flight(&p, "n0")];
        views.extend(["n1", "n2", "n3"].into_iter().map(pending));
        let r = plan_report(&p, &members_of_views(views.clone()), now());
        assert_eq!(r.hold.as_deref(), Some("rollout.paused is true"));
        assert!(first_wave_of_decide(&p, &views).is_empty(), "the operator starts nothing while paused");
        assert_eq!(r.waves, [vec!["n1"], vec!["n2", "n3"]]);
        let mut unpaused = p.clone();
        unpaused.spec.rollout.paused = false;
        assert_eq!(r.waves[0], first_wave_of_decide(&unpaused, &views), "the wave the operator starts once resumed");
    }

    #[test]
    fn updated_and_failed_nodes_are_listed_and_not_planned() {
        let p = pool(
            "a",
            "nodeSelector: {}\nos: {version: ltsc2022, patchLevel: 10.0.20348.2762}\nrollout: {maxUnavailable: 1, maxFailedNodes: 1}",
        );
        let rev = revision_of(&p.spec);
        let mut done = pending("done");
        done.kernel_version = Some("10.0.20348.2762".into());
        done.revision_label = Some(rev.clone());
        done.applied_revision = Some(rev.clone());
        done.apply_status = Some(crate::decision::agent_report::Reported::Known(crate::api::report::ApplyStatus::Succeeded));
        done.state = crate::decision::rollout::NodeState::Updated.into();
        let mut bad = pending("bad");
        bad.state = crate::decision::rollout::NodeState::Failed.into();
        bad.target_revision = Some(rev.clone());
        bad.failure_reason = Some("ApplyFailed".into());
        bad.failure_message = Some("0x800f0922".into());
        let r = plan_report(&p, &members_of_views(vec![done, bad, pending("next")]), now());
        assert_eq!(r.updated, ["done"]);
        assert_eq!(r.failed, [FailedNodeReport { name: "bad".into(), reason: "ApplyFailed".into(), message: "0x800f0922".into() }]);
        assert_eq!(r.order, ["next"]);
        assert_eq!(r.hold.as_deref(), Some("1 failed nodes reached maxFailedNodes 1"));
    }

    #[test]
    fn the_window_says_when_it_opens() {
        let p = pool(
            "a",
            "nodeSelector: {}\nos: {version: ltsc2022, patchLevel: 10.0.20348.2762}\nrollout: {maintenanceWindows: [{days: [Sat], start: '02:00', end: '06:00'}]}",
        );
        // 2026-12-01 is a Tuesday.
        let w = window_report(&p, now()).unwrap();
        let closes = Some("2026-12-05T06:00:00Z".into());
        assert_eq!(w, WindowReport { open: false, opens: Some("2026-12-05T02:00:00Z".into()), closes, error: None });
        let r = plan_report(&p, &members_of_views(vec![pending("n1")]), now());
        assert_eq!(r.hold.as_deref(), Some("outside the maintenance windows; the next opens at 2026-12-05T02:00:00Z"));
        assert_eq!(window_report(&pool("a", SPEC), now()), None);
    }

    fn node(name: &str, labels: &[(&str, &str)], annotations: &[(&str, &str)], kernel: &str, hns: Option<&str>) -> Node {
        let map = |kv: &[(&str, &str)]| kv.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>();
        let mut conditions = vec![json!({"type": "Ready", "status": "True"})];
        if let Some(s) = hns {
            conditions.push(json!({"type": "WindowsHNSReady", "status": s}));
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": map(labels), "annotations": map(annotations)},
            "status": {"conditions": conditions, "nodeInfo": {
                "kernelVersion": kernel, "containerRuntimeVersion": "", "bootID": "", "machineID": "", "systemUUID": "",
                "kubeletVersion": "", "kubeProxyVersion": "", "operatingSystem": "windows", "architecture": "amd64", "osImage": ""
            }}
        }))
        .unwrap()
    }

    /// An AKS node pool's nodes: the status says, once, that AKS may reimage them.
    #[test]
    fn status_says_when_the_provider_manages_the_nodes_image() {
        let a = pool("a", SPEC);
        let win = [("kubernetes.io/os", "windows"), ("pool", "a")];
        let aks = ("kubernetes.azure.com/node-image-version", "AKSWindows-2022-containerd-20348.2762.241009");
        let nodes = vec![node("aks-0", &[win[0], win[1], aks], &[], "", None), node("own-0", &win, &[], "", None)];
        let r = status_report(&a, &members(&a, std::slice::from_ref(&a), &nodes, &[]));
        let notice = r.provider_managed.clone().expect("a notice");
        assert!(notice.starts_with("1 of 2 nodes are AKS nodes (kubernetes.azure.com/node-image-version)"), "{notice}");
        assert!(notice.contains("nodeOSUpgradeChannel to None or Unmanaged") && notice.ends_with("see docs/clusters.md"), "{notice}");
        let text = crate::plugin::table::status(&r, Timestamp::UNIX_EPOCH);
        assert!(text.contains(&format!("\nManaged:      {notice}\n")), "{text}");
        let plain = status_report(&a, &members(&a, std::slice::from_ref(&a), &nodes[1..], &[]));
        assert_eq!(plain.provider_managed, None);
    }

    #[test]
    fn status_lists_the_members_with_their_state_patch_hns_and_message() {
        let a = pool("a", SPEC);
        let b = pool("b", "nodeSelector: {matchLabels: {team: x}}\nos: {version: ltsc2022, patchLevel: 10.0.20348.2762}");
        let rev = revision_of(&a.spec);
        let win = [("kubernetes.io/os", "windows"), ("pool", "a")];
        let nodes = vec![
            node(
                "w-applying",
                &[win[0], win[1], ("winpool.dev/pool", "a"), ("winpool.dev/revision", &rev)],
                &[
                    ("winpool.dev/state", "Applying"),
                    ("winpool.dev/state-since", "2026-12-01T11:58:00Z"),
                    ("winpool.dev/target-revision", &rev),
                ],
                "10.0.20348.2700",
                Some("True"),
            ),
            node(
                "w-failed",
                &[win[0], win[1], ("node.kubernetes.io/windows-build", "10.0.20348")],
                &[
                    ("winpool.dev/state", "Failed"),
                    ("winpool.dev/target-revision", &rev),
                    ("winpool.dev/failure-reason", "Timeout"),
                    ("winpool.dev/failure-message", "too slow"),
                ],
                "",
                Some("False"),
            ),
            node("w-both", &[win[0], win[1], ("team", "x")], &[], "10.0.20348.2762", None),
            node("linux", &[("kubernetes.io/os", "linux"), ("pool", "a")], &[], "", None),
        ];
        // Its agent's word on the install, from its report.
        let apply = serde_json::json!({"apply": {"revision": rev, "status": "Applying", "message": "installing KB5044281"}});
        let report = crate::api::report::WindowsNodeReport::reported("w-applying", serde_json::from_value(apply).unwrap());
        let m = members(&a, &[a.clone(), b], &nodes, &[report]);
        let r = status_report(&a, &m);
        assert_eq!(r.revision, rev);
        assert!(r.conflicts.as_deref().is_some_and(|c| c.contains("w-both (also b)")), "{:?}", r.conflicts);
        let want = vec![
            NodeRow {
                name: "w-applying".into(),
                state: "Applying".into(),
                since: Some("2026-12-01T11:58:00Z".into()),
                revision: Some(rev.clone()),
                patch: Some("20348.2700".into()),
                hns: "True".into(),
                message: Some("installing KB5044281".into()),
            },
            NodeRow {
                name: "w-failed".into(),
                state: "Failed".into(),
                since: None,
                revision: None,
                patch: Some("20348".into()),
                hns: "False".into(),
                message: Some("Timeout: too slow".into()),
            },
        ];
        assert_eq!(r.nodes, want);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["nodes"][1]["state"], "Failed");
        assert!(json["nodes"][1].get("since").is_none(), "absent values are omitted: {json}");
        assert_eq!(json["patchLevel"], "10.0.20348.2762");
    }
}
