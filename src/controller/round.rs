//! The whole decision of one reconcile, pure: which nodes are released, the
//! rollout plan, the pool's status, the agent DaemonSet and revision
//! ConfigMap writes, the HNS condition and taint writes, the order of the node
//! writes, the revision ConfigMaps no longer needed and the
//! Events. The shell in `apply` executes it and decides nothing itself.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::runtime::events::{Event, EventType};

use super::Settings;
use super::agent::{AgentWrite, ConfigMapWrites, agent_write, configmap_writes, hold_agent_roll};
use super::csi_proxy::{CsiProxyWrites, csi_proxy_writes};
use super::events::node_ref;
use super::hns_node::{HnsNode, HnsWrites, hns_writes_for};
use super::nodes::release_patch;
use crate::api::{WindowsNodePool, WindowsNodePoolStatus, names};
use crate::drain::PodOnNode;
use crate::gates::GateResult;
use crate::hns::{self, Limits};
use crate::membership::Membership;
use crate::node_record::NodeRecord;
use crate::rollout::{HnsReadiness, Hold, NodePatch, NodeState, NodeView, Plan, PoolInput, decide, held_cordoned};
use crate::status::{build_status, transition_events};

/// What one reconcile read: the cluster as the decision sees it.
pub(super) struct Observed<'a> {
    /// Nodes labelled for the pool that it no longer selects, each with its
    /// release ([`releases`]) and the merge patch body that gives it back.
    pub releases: Vec<(NodePatch, serde_json::Value)>,
    pub membership: Membership,
    pub views: Vec<NodeView>,
    /// In the order of `views`.
    pub hns_nodes: Vec<HnsNode<'a>>,
    /// The pods of every Draining member.
    pub pods_by_node: BTreeMap<String, Vec<PodOnNode>>,
    pub ds_of_pool: Vec<Arc<DaemonSet>>,
    pub cms_of_pool: Vec<Arc<ConfigMap>>,
    /// Revisions known to the cluster: their ConfigMaps, and the per-revision
    /// DaemonSets of the earlier layout, whose configuration moves into ConfigMaps.
    pub existing_revisions: BTreeSet<String>,
    /// Cluster-wide expected HNS load balancers and endpoints.
    pub hns_totals: (i64, i64),
    /// Services with more backends than a node's HNS takes, and how many.
    pub hns_over_limit: (Vec<String>, usize),
    pub hns_limits: Limits,
    /// The pool's moving average of node update times.
    pub average_node_update: Option<std::time::Duration>,
    /// The health gates, evaluated only when a node could start (else empty).
    pub gates: Vec<GateResult>,
}

pub(super) struct Round {
    /// Deselected nodes given back, before anything else is written.
    pub releases: Vec<(NodePatch, serde_json::Value)>,
    pub plan: Plan,
    /// Written before any node is labelled for the revisions they carry.
    pub agent: Option<AgentWrite>,
    pub configmaps: ConfigMapWrites,
    /// Written with the ConfigMaps; deleted with the stale ConfigMaps, last.
    pub csi_proxy: CsiProxyWrites,
    pub status: WindowsNodePoolStatus,
    /// Each with the message its condition carries, for the log line.
    pub hns_writes: Vec<(HnsWrites, String)>,
    /// Members whose HNS is not ready (for metrics).
    pub hns_not_ready: Vec<String>,
    pub hns_utilization: f64,
    /// Revision ConfigMaps no node carries any more: (name, revision).
    pub stale_configmaps: Vec<(String, String)>,
    /// The pool's standing problems, keyed so each is announced once.
    pub problems: Vec<(String, Event)>,
    /// Condition flips and the like, as (reason, note).
    pub transitions: Vec<(String, String)>,
}

/// The node writes in two phases: every write that finishes or moves a node
/// lands before any write that starts one, so the cluster never holds more
/// nodes in flight than the plan allowed, even for the milliseconds between
/// two parallel writes.
pub(super) fn node_write_phases(plan: &Plan) -> (Vec<&NodePatch>, Vec<&NodePatch>) {
    let (starts, others) = plan.patches.iter().partition(|p| p.from == NodeState::Pending && p.to != NodeState::Pending);
    (others, starts)
}

/// Nodes no longer selected by the pool (or all of them, when the pool is
/// deleted: no members) go back to their owners: each node that carries the
/// pool's label but is not a member, with its release.
pub(super) fn releases<'n>(
    pool: &str,
    nodes: &'n [Arc<NodeRecord>],
    membership: &Membership,
    why: &str,
) -> Vec<(&'n NodeRecord, NodePatch)> {
    let members: BTreeSet<&str> = membership.members.iter().map(String::as_str).collect();
    nodes
        .iter()
        .filter(|n| n.label(names::LABEL_POOL) == Some(pool))
        .filter(|n| !members.contains(n.name.as_str()))
        .map(|n| (n.as_ref(), release_patch(n, why)))
        .collect()
}

/// When `rev`'s ConfigMap was marked as the pool's target; `None` while it
/// is not (or carries no time: marked by an older winpool, not judged late).
fn target_marked_at(cms_of_pool: &[Arc<ConfigMap>], rev: &str) -> Option<Timestamp> {
    cms_of_pool
        .iter()
        .filter(|c| c.labels().get(names::LABEL_REVISION).map(String::as_str) == Some(rev))
        .filter(|c| c.labels().get(names::LABEL_TARGET).map(String::as_str) == Some("true"))
        .find_map(|c| c.annotations().get(names::ANN_TARGET_SINCE)?.parse().ok())
}

pub(super) fn decide_round(pool: &WindowsNodePool, settings: &Settings, seen: &Observed<'_>, now: Timestamp) -> Round {
    let name = pool.name_any();
    let spec = &pool.spec;
    let input = PoolInput {
        name: &name,
        spec,
        existing_revisions: &seen.existing_revisions,
        gates: &seen.gates,
        average_node_update: seen.average_node_update,
        target_marked_at: target_marked_at(&seen.cms_of_pool, &crate::revision::revision_of(spec)),
        paused_by_annotation: pool.paused_by_annotation(),
    };
    let plan = decide(&input, &seen.views, now);
    let capacity = hns::capacity(seen.hns_totals, &seen.hns_limits, spec.hns.warn_percent, seen.hns_over_limit.clone());
    let status = build_status(spec, &plan, &seen.membership, Some(capacity), pool.status.as_ref(), pool.metadata.generation, now);
    let transitions = transition_events(pool.status.as_ref(), &status);
    Round {
        releases: seen.releases.clone(),
        agent: hold_agent_roll(
            agent_write(pool, settings, &seen.ds_of_pool),
            plan.by_state.get(&NodeState::Applying).copied().unwrap_or(0),
        ),
        configmaps: configmap_writes(pool, &settings.agent_namespace, &plan, &seen.cms_of_pool, &seen.ds_of_pool, now),
        csi_proxy: csi_proxy_writes(pool, settings, &plan, &seen.cms_of_pool, &seen.ds_of_pool),
        hns_writes: hns_writes(seen, &plan, spec.hns.taint_when_not_ready, now),
        hns_not_ready: seen.hns_nodes.iter().filter(|h| h.readiness == HnsReadiness::NotReady).map(|h| h.node.name.clone()).collect(),
        hns_utilization: seen.hns_limits.utilization(seen.hns_totals),
        stale_configmaps: stale_configmaps(&seen.cms_of_pool, &plan),
        problems: problems(pool, &plan, &seen.membership),
        transitions,
        status,
        plan,
    }
}

/// The writes that bring each member's HNS condition and taint in step with
/// the same observation the plan was made from: a node is never Updated while
/// still tainted, and never loses its taint before it is.
fn hns_writes(seen: &Observed<'_>, plan: &Plan, taint_when_not_ready: bool, now: Timestamp) -> Vec<(HnsWrites, String)> {
    let patch_of: HashMap<&str, &NodePatch> = plan.patches.iter().map(|p| (p.node.as_str(), p)).collect();
    seen.hns_nodes
        .iter()
        .zip(&seen.views)
        .filter_map(|(h, v)| {
            let patch = patch_of.get(v.name.as_str()).copied();
            let held = held_cordoned(v, patch);
            let mut w = hns_writes_for(h, held, taint_when_not_ready, now)?;
            // They land before the node's guarded start and move its resourceVersion:
            // guarded by the same version, they hand the start the one they leave.
            w.unless_changed_since = patch.and_then(|p| p.unless_changed_since.clone());
            Some((w, h.message.clone()))
        })
        .collect()
}

fn stale_configmaps(cms_of_pool: &[Arc<ConfigMap>], plan: &Plan) -> Vec<(String, String)> {
    cms_of_pool
        .iter()
        .map(|c| (c.name_any(), c.labels().get(names::LABEL_REVISION).cloned().unwrap_or_default()))
        .filter(|(_, rev)| !plan.config_revisions.contains(rev))
        .collect()
}

/// Node values the plan ignored, the health gate that holds the rollout, and
/// nodes the pool selects but leaves alone.
fn problems(pool: &WindowsNodePool, plan: &Plan, membership: &Membership) -> Vec<(String, Event)> {
    let mut problems = Vec::new();
    for (node, msg) in &plan.warnings {
        let ev = Event {
            type_: EventType::Warning,
            reason: "NodeIgnoredValue".into(),
            note: Some(format!("{node}: {msg}")),
            action: "Observe".into(),
            secondary: Some(node_ref(node)),
        };
        problems.push((format!("{node}:{msg}"), ev));
    }
    // Keyed by the node and the revision: said once while the node stays
    // blocked for it, whatever the wording of the agent's reasons does.
    for (node, why) in plan.preflight_blocked() {
        let ev = Event {
            type_: EventType::Warning,
            reason: "PreflightBlocked".into(),
            note: Some(format!("{node} is not started for revision {}: its agent's preflight found {why}", plan.revision)),
            action: "Preflight".into(),
            secondary: Some(node_ref(node)),
        };
        problems.push((format!("preflight:{node}:{}", plan.revision), ev));
    }
    if let Some(Hold::HealthGateClosed { gate, seen }) = &plan.hold {
        // Keyed by the gate and the kind of thing it saw, not the details:
        // which alerts fire may change while it stays closed, but a gate
        // that could not be read and then sees firing alerts is news.
        let ev = Event {
            type_: EventType::Warning,
            reason: "HealthGateClosed".into(),
            note: Some(format!("no new node starts: gate \"{gate}\": {seen}")),
            action: "Rollout".into(),
            secondary: None,
        };
        problems.push((format!("health-gate:{gate}:{}", seen.kind()), ev));
    }
    if !membership.conflicts.is_empty() {
        let msg = membership.conflicts.message(pool.spec.os.version.as_str());
        let ev = Event {
            type_: EventType::Warning,
            reason: "NodesLeftAlone".into(),
            note: Some(msg.clone()),
            action: "Select".into(),
            secondary: None,
        };
        problems.push((msg, ev));
    }
    problems
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::api::WindowsNodePoolSpec;
    use crate::daemonset::{AgentDrift, AgentSettings, agent_daemonset};

    fn pool() -> WindowsNodePool {
        let spec: WindowsNodePoolSpec =
            serde_yaml::from_str("nodeSelector: {}\nos: {version: ltsc2022, patchLevel: 10.0.20348.2762}\nruntime: {version: 1.7.22}")
                .unwrap();
        let mut p = WindowsNodePool::new("p", spec);
        p.metadata.uid = Some("uid-1".into());
        p
    }

    fn settings() -> Settings {
        Settings {
            agent_namespace: "winpool-agents".into(),
            agent: AgentSettings {
                image: "winpool/agent:dev".into(),
                hns_interval: "15s".into(),
                max_attempts: 3,
                pod: Default::default(),
            },
            pool_selector: None,
            allowed_agent_images: Vec::new(),
            csi_proxy_repository: crate::csi_proxy::DEFAULT_REPOSITORY.into(),
            secret_namespace: "winpool-system".into(),
        }
    }

    fn node(name: &str, pool: Option<&str>, cordoned_by_winpool: bool) -> Arc<NodeRecord> {
        let mut n = k8s_openapi::api::core::v1::Node {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            ..Default::default()
        };
        if let Some(p) = pool {
            n.metadata.labels = Some([(names::LABEL_POOL.to_string(), p.to_string())].into());
        }
        if cordoned_by_winpool {
            n.metadata.annotations = Some([(names::ANN_CORDONED_BY_WINPOOL.to_string(), "true".to_string())].into());
            n.spec = Some(k8s_openapi::api::core::v1::NodeSpec { unschedulable: Some(true), ..Default::default() });
        }
        Arc::new(NodeRecord::from(&n))
    }

    fn patch(node: &str, from: NodeState, to: NodeState) -> NodePatch {
        NodePatch { node: node.into(), from, to, ..Default::default() }
    }

    #[test]
    fn only_nodes_labelled_for_the_pool_and_no_longer_selected_are_released() {
        let nodes = vec![node("a", Some("p"), false), node("b", Some("p"), true), node("c", Some("q"), false), node("d", None, false)];
        let membership = Membership { members: vec!["a".into()], ..Default::default() };
        let released = releases("p", &nodes, &membership, "released");
        assert_eq!(released.iter().map(|(n, _)| n.name.as_str()).collect::<Vec<_>>(), ["b"]);
        let p = &released[0].1;
        assert_eq!(p.labels.get(names::LABEL_POOL), Some(&None), "the pool label goes");
        assert_eq!(p.unschedulable, Some(false), "winpool's cordon is lifted");
    }

    #[test]
    fn a_closed_gate_is_a_standing_problem_announced_again_only_when_what_it_sees_changes_kind() {
        use crate::gates::{Failure, Seen};
        let (pool, existing) = (pool(), BTreeSet::new());
        let node = NodeView { name: "a".into(), ready: true, ..Default::default() };
        let problems_with = |seen: Seen| {
            let gates = [GateResult { gate: "alerts".into(), seen }];
            let input = PoolInput {
                name: "p",
                spec: &pool.spec,
                existing_revisions: &existing,
                target_marked_at: None,
                gates: &gates,
                average_node_update: None,
                paused_by_annotation: false,
            };
            problems(&pool, &decide(&input, std::slice::from_ref(&node), Timestamp::UNIX_EPOCH), &Membership::default())
        };
        let firing = |names: &[&str]| Seen::Alerts { total: names.len(), names: names.iter().map(|s| s.to_string()).collect() };
        let one = problems_with(firing(&["A"]));
        assert_eq!(one.len(), 1);
        let (key, ev) = &one[0];
        assert_eq!((ev.reason.as_str(), ev.type_), ("HealthGateClosed", EventType::Warning));
        assert_eq!(ev.note.as_deref(), Some("no new node starts: gate \"alerts\": 1 alert firing: A"));
        assert_eq!(&problems_with(firing(&["A", "B"]))[0].0, key, "other alerts, same problem: not announced again");
        let failed = problems_with(Seen::Failed(Failure::Timeout(std::time::Duration::from_secs(5))));
        assert_ne!(&failed[0].0, key, "a gate that cannot be read is news");
        assert!(problems_with(firing(&[])).is_empty(), "an open gate is no problem");
    }

    #[test]
    fn writes_that_finish_or_move_a_node_come_before_writes_that_start_one() {
        let existing = BTreeSet::new();
        let input = PoolInput {
            name: "p",
            spec: &pool().spec,
            existing_revisions: &existing,
            target_marked_at: None,
            gates: &[],
            average_node_update: None,
            paused_by_annotation: false,
        };
        let mut plan = decide(&input, &[], Timestamp::UNIX_EPOCH);
        plan.patches = vec![
            patch("a", NodeState::Pending, NodeState::Draining),
            patch("b", NodeState::Draining, NodeState::Applying),
            patch("c", NodeState::Pending, NodeState::Pending),
            patch("d", NodeState::Verifying, NodeState::Updated),
        ];
        let (first, then) = node_write_phases(&plan);
        let names = |v: Vec<&NodePatch>| v.into_iter().map(|p| p.node.clone()).collect::<Vec<_>>();
        assert_eq!(names(first), ["b", "c", "d"], "in the plan's order");
        assert_eq!(names(then), ["a"]);
    }

    #[test]
    fn the_agent_daemonset_is_applied_when_missing_replaced_when_edited_and_left_when_current() {
        let (pool, settings) = (pool(), settings());
        let wanted = agent_daemonset(&pool, &settings.agent_namespace, &settings.agent);

        let missing = agent_write(&pool, &settings, &[]).expect("a missing DaemonSet is written");
        assert_eq!((missing.drift, missing.replace), (AgentDrift::Missing, false));
        assert_eq!(missing.daemonset.metadata.resource_version, None, "applied, not guarded");

        let mut current = wanted.clone();
        current.metadata.resource_version = Some("7".into());
        assert!(agent_write(&pool, &settings, &[Arc::new(current.clone())]).is_none(), "up to date: no write");

        let mut edited = current;
        edited.spec.as_mut().unwrap().template.spec.as_mut().unwrap().node_selector.as_mut().unwrap().insert("x".into(), "y".into());
        let put_back = agent_write(&pool, &settings, &[Arc::new(edited)]).expect("a hand edit is put back");
        assert_eq!((put_back.drift, put_back.replace), (AgentDrift::HandEdited, true));
        assert_eq!(put_back.daemonset.metadata.resource_version.as_deref(), Some("7"), "guarded by what was judged");
        assert_eq!(put_back.daemonset.spec, wanted.spec, "replaced whole by what winpool wants");
    }

    #[test]
    fn an_agent_roll_waits_while_a_node_is_applying_but_a_missing_or_edited_daemonset_does_not() {
        let (pool, settings) = (pool(), settings());
        let mut old = agent_daemonset(&pool, &settings.agent_namespace, &settings.agent);
        old.metadata.annotations.as_mut().unwrap().insert(crate::daemonset::ANN_SPEC_HASH.into(), "an older agent".into());
        let outdated = || agent_write(&pool, &settings, &[Arc::new(old.clone())]);
        assert_eq!(outdated().map(|w| w.drift), Some(AgentDrift::Outdated));
        assert!(hold_agent_roll(outdated(), 1).is_none(), "held while a node is Applying");
        assert!(hold_agent_roll(outdated(), 0).is_some(), "rolled once none is");
        assert!(hold_agent_roll(agent_write(&pool, &settings, &[]), 3).is_some(), "a missing DaemonSet is written at once");
    }

    #[test]
    fn the_target_revision_gets_its_configmap_once() {
        let (pool, settings) = (pool(), settings());
        let existing = BTreeSet::new();
        let plan = decide(
            &PoolInput {
                name: "p",
                spec: &pool.spec,
                existing_revisions: &existing,
                target_marked_at: None,
                gates: &[],
                average_node_update: None,
                paused_by_annotation: false,
            },
            &[],
            Timestamp::UNIX_EPOCH,
        );
        let writes = configmap_writes(&pool, &settings.agent_namespace, &plan, &[], &[], Timestamp::UNIX_EPOCH);
        assert_eq!(writes.create.iter().map(|(r, _)| r.as_str()).collect::<Vec<_>>(), [plan.revision.as_str()]);
        let cm = Arc::new(writes.create[0].1.clone());
        let again = configmap_writes(&pool, &settings.agent_namespace, &plan, std::slice::from_ref(&cm), &[], Timestamp::UNIX_EPOCH);
        assert!(again.create.is_empty() && again.delete_legacy.is_empty());
        assert!(stale_configmaps(&[cm], &plan).is_empty(), "the target's ConfigMap is not stale");
    }

    #[test]
    fn the_target_mark_moves_with_the_spec_off_the_old_revision_first() {
        let (pool, settings) = (pool(), settings());
        let existing = BTreeSet::new();
        let plan_of = |pool: &WindowsNodePool| {
            let input = PoolInput {
                name: "p",
                spec: &pool.spec,
                existing_revisions: &existing,
                target_marked_at: None,
                gates: &[],
                average_node_update: None,
                paused_by_annotation: false,
            };
            decide(&input, &[], Timestamp::UNIX_EPOCH)
        };
        let plan = plan_of(&pool);
        let first = configmap_writes(&pool, &settings.agent_namespace, &plan, &[], &[], Timestamp::UNIX_EPOCH);
        let old = Arc::new(first.create[0].1.clone());
        assert_eq!(old.labels().get(names::LABEL_TARGET).map(String::as_str), Some("true"), "created with the mark");
        assert!(first.mark.is_empty());
        assert_eq!(target_marked_at(std::slice::from_ref(&old), &plan.revision), Some(Timestamp::UNIX_EPOCH), "and when");
        assert_eq!(target_marked_at(std::slice::from_ref(&old), "another"), None);

        let mut newer = pool.clone();
        newer.spec.os.patch_level = "10.0.20348.2800".into();
        let plan = plan_of(&newer);
        let w = configmap_writes(&newer, &settings.agent_namespace, &plan, std::slice::from_ref(&old), &[], Timestamp::UNIX_EPOCH);
        assert_eq!(w.create[0].1.labels().get(names::LABEL_TARGET).map(String::as_str), Some("true"), "the new target's is marked");
        assert_eq!(w.mark, [(old.name_any(), false)], "the old target's mark comes off");

        // The spec goes back: the old ConfigMap (still there for a node on it) is marked again.
        let unmarked = {
            let mut c = (*old).clone();
            c.labels_mut().remove(names::LABEL_TARGET);
            Arc::new(c)
        };
        let newer_cm = Arc::new(w.create[0].1.clone());
        let back =
            configmap_writes(&pool, &settings.agent_namespace, &plan_of(&pool), &[unmarked, newer_cm.clone()], &[], Timestamp::UNIX_EPOCH);
        assert!(back.create.is_empty());
        assert_eq!(back.mark, [(newer_cm.name_any(), false), (old.name_any(), true)], "off the newer first, then on the old");
    }
}
