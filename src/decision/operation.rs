//! The `WindowsNodeOperation` a node patch carries to the node's agent. Pure.
//!
//! An operation is written only alongside a transition winpool itself
//! decided, never from what a Node carries at rest: a node whose annotations
//! say Applying (written by anyone who may patch Nodes) gets no operation,
//! so its agent does nothing. The operation lands before the Node patch it
//! goes with: an agent never sees a node asked for work that winpool has not
//! drained, and a patch that fails after it is decided again next round
//! (the operation's spec is the same start, so writing it again changes
//! nothing).

use jiff::Timestamp;

use crate::api::node_record::NodeRecord;
use crate::api::operation::{
    OperationAction, PreviousOperation, WindowsNodeOperation, WindowsNodeOperationSpec, WindowsNodeOperationStatus,
};
use crate::api::{NodeState, WindowsNodePool, names};
use crate::decision::rollout::NodePatch;

/// What to write to a node's operation before its patch.
#[derive(Debug, Clone, PartialEq)]
pub enum OperationWrite {
    /// The operation of a start entering Applying: created whole (or the
    /// same again after a round whose Node patch did not land). `retargets`:
    /// the operation of the same start it carries on to a new revision (its
    /// drain too); written only when that one exists, so a start winpool never
    /// made (a forged Applying on a Node) gets none.
    Apply { op: Box<WindowsNodeOperation>, retargets: Option<String> },
    /// The operation of the node's current start moves on: a merge patch of
    /// its status (absent: there is none, the start never reached Applying).
    Phase { name: String, status: WindowsNodeOperationStatus },
}

impl OperationWrite {
    pub fn name(&self) -> &str {
        match self {
            OperationWrite::Apply { op, .. } => op.metadata.name.as_deref().unwrap_or_default(),
            OperationWrite::Phase { name, .. } => name,
        }
    }
}

/// The operation's name: the node, its start and the revision, so a start
/// has one per revision (a spec changed mid-rollout retargets the start to
/// another) and a second write of it is the same object.
pub fn name(node: &str, started_at: &str, revision: &str) -> String {
    // Every digit of the start: a retry may start the node again within the same second.
    let stamp: String = started_at.chars().filter(char::is_ascii_digit).collect();
    let name = format!("{node}.{stamp}.{revision}");
    if name.len() <= 253 {
        return name;
    }
    // A node name near the 253-character limit: a digest keeps it unique.
    let digest = sha256_hex(&name);
    format!("{}.{}", &node[..200], &digest[..16])
}

fn sha256_hex(s: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(s.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// The write `patch` (decided for `node` of `pool`) carries, if any.
pub fn for_patch(pool: &WindowsNodePool, node: &NodeRecord, patch: &NodePatch, namespace: &str, now: Timestamp) -> Option<OperationWrite> {
    // The value of a winpool annotation once the patch landed.
    let after = |k: &str| match patch.annotations.get(k) {
        Some(v) => v.clone(),
        None => node.annotation(k).map(str::to_string),
    };
    let now = now.to_string();
    // A start entering Applying, or one retargeted to another revision while
    // it applies (the same start, a new operation: a spec never changes).
    let in_flight = matches!(patch.from, NodeState::Applying | NodeState::Verifying);
    let retarget = in_flight
        && matches!(patch.labels.get(names::LABEL_REVISION), Some(Some(r)) if Some(r.as_str()) != node.label(names::LABEL_REVISION));
    if patch.to == NodeState::Applying && (patch.from != NodeState::Applying || retarget) {
        let started_at = after(names::ANN_STARTED_AT)?;
        let revision = match patch.labels.get(names::LABEL_REVISION) {
            Some(Some(rev)) => rev.clone(),
            _ => after(names::ANN_TARGET_REVISION).or_else(|| node.label(names::LABEL_REVISION).map(str::to_string))?,
        };
        let undo_gate = after(names::ANN_UNDO);
        let drained = patch.from == NodeState::Draining || (patch.unschedulable == Some(true) && !pool.spec.rollout.drain.enabled);
        let mut op = WindowsNodeOperation::new(
            &name(&node.name, &started_at, &revision),
            WindowsNodeOperationSpec {
                node_name: node.name.clone(),
                node_uid: node.uid.clone(),
                pool: pool.metadata.name.clone().unwrap_or_default(),
                pool_generation: pool.metadata.generation.unwrap_or_default(),
                revision,
                action: if undo_gate.is_some() { OperationAction::Undo } else { OperationAction::Update },
                started_at,
                install_budget: after(names::ANN_INSTALL_BUDGET),
                undo_gate,
                // Linked when it is created (controller/nodes.rs): the chain reads the cluster.
                previous: None,
            },
        );
        op.metadata.namespace = Some(namespace.to_string());
        op.metadata.labels = Some([(names::LABEL_POOL.to_string(), op.spec.pool.clone())].into());
        op.status = Some(WindowsNodeOperationStatus {
            phase: Some(NodeState::Applying),
            phase_since: Some(now.clone()),
            drained_at: drained.then_some(now),
            ..Default::default()
        });
        let retargets = retarget.then(|| node.label(names::LABEL_REVISION).map(|old| name(&node.name, &op.spec.started_at, old))).flatten();
        return Some(OperationWrite::Apply { op: Box::new(op), retargets });
    }
    // Only a start that reached Applying has an operation to move on.
    if !matches!(patch.from, NodeState::Applying | NodeState::Verifying | NodeState::Draining) || patch.to == patch.from {
        return None;
    }
    let started_at = node.annotation(names::ANN_STARTED_AT)?;
    let revision = node.label(names::LABEL_REVISION)?;
    let failed = patch.to == NodeState::Failed;
    Some(OperationWrite::Phase {
        name: name(&node.name, started_at, revision),
        status: WindowsNodeOperationStatus {
            phase: Some(patch.to),
            phase_since: Some(now),
            reason: after(names::ANN_FAILURE_REASON).filter(|_| failed),
            message: after(names::ANN_FAILURE_MESSAGE).filter(|_| failed),
            ..Default::default()
        },
    })
}

/// A node given back by its pool (deselected, or its pool deleted) ends the
/// operation of its start: its agent no longer works for that pool, and
/// prepares for the next one that selects it.
pub fn released(node: &NodeRecord, now: Timestamp) -> Option<OperationWrite> {
    let (started_at, revision) = (node.annotation(names::ANN_STARTED_AT)?, node.label(names::LABEL_REVISION)?);
    let status = WindowsNodeOperationStatus { phase: Some(NodeState::Pending), phase_since: Some(now.to_string()), ..Default::default() };
    Some(OperationWrite::Phase { name: name(&node.name, started_at, revision), status })
}

/// The digest a later operation of the node records of `op`: its name, spec
/// and status as the typed object serializes them (fields in declaration
/// order), so a change of any of them after it was chained shows.
pub fn digest(op: &WindowsNodeOperation) -> String {
    let body = serde_json::json!({ "name": op.metadata.name, "spec": op.spec, "status": op.status });
    sha256_hex(&body.to_string())
}

fn started(op: &WindowsNodeOperation) -> Option<Timestamp> {
    op.spec.started_at.parse().ok()
}

/// The link a new operation `name` of `node` records: the node's operation
/// started last before it, among `ops`.
pub fn previous(ops: &[WindowsNodeOperation], node: &str, name: &str) -> Option<PreviousOperation> {
    let last = ops.iter().filter(|o| o.spec.node_name == node && o.metadata.name.as_deref() != Some(name)).max_by_key(|o| started(o))?;
    Some(PreviousOperation { name: last.metadata.name.clone().unwrap_or_default(), sha256: digest(last) })
}

/// What `kubectl winpool history --verify` finds wrong in `ops`: for each
/// node, in the order its operations started, a link to an operation that is
/// gone or whose digest changed, and an operation that names none although
/// an earlier one exists.
pub fn verify(ops: &[WindowsNodeOperation]) -> Vec<String> {
    let mut by_node: std::collections::BTreeMap<&str, Vec<&WindowsNodeOperation>> = Default::default();
    for o in ops {
        by_node.entry(o.spec.node_name.as_str()).or_default().push(o);
    }
    let mut problems = Vec::new();
    for (node, mut chain) in by_node {
        chain.sort_by_key(|o| started(o));
        for (i, op) in chain.iter().enumerate() {
            let name = op.metadata.name.as_deref().unwrap_or_default();
            match &op.spec.previous {
                None if i > 0 => problems.push(format!(
                    "node {node}: {name} names no operation before it, yet {} started earlier",
                    chain[i - 1].metadata.name.as_deref().unwrap_or_default()
                )),
                None => {}
                Some(link) => match chain.iter().find(|o| o.metadata.name.as_deref() == Some(&link.name)) {
                    None => problems.push(format!("node {node}: {name} follows {}, which is gone (deleted)", link.name)),
                    Some(before) if digest(before) != link.sha256 => {
                        problems.push(format!("node {node}: {} was changed after {name} recorded it", link.name))
                    }
                    Some(_) => {}
                },
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_builders;
    use k8s_openapi::api::core::v1::Node;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn applying(from: NodeState, cordon: Option<bool>) -> NodePatch {
        let mut p = NodePatch { node: "win-0".into(), from, to: NodeState::Applying, unschedulable: cordon, ..Default::default() };
        p.labels.insert(names::LABEL_REVISION.into(), Some("r2".into()));
        p
    }

    fn record(anns: &[(&str, &str)]) -> NodeRecord {
        let annotations = anns.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let meta =
            ObjectMeta { name: Some("win-0".into()), uid: Some("uid-1".into()), annotations: Some(annotations), ..Default::default() };
        NodeRecord::from(&Node { metadata: meta, ..Default::default() })
    }

    fn with_revision(n: NodeRecord, rev: &str) -> NodeRecord {
        let mut node = Node::default();
        node.metadata.name = Some(n.name.clone());
        node.metadata.uid = Some(n.uid.clone());
        node.metadata.labels = Some([(names::LABEL_REVISION.to_string(), rev.to_string())].into());
        node.metadata.annotations =
            Some([(names::ANN_STARTED_AT.to_string(), n.annotation(names::ANN_STARTED_AT).unwrap_or_default().to_string())].into());
        NodeRecord::from(&node)
    }

    #[test]
    fn a_start_retargeted_while_it_applies_gets_an_operation_of_its_new_revision() {
        let node = with_revision(record(&[(names::ANN_STARTED_AT, "2026-12-07T10:00:00Z")]), "r1");
        let Some(OperationWrite::Apply { op, retargets }) =
            for_patch(&pool(), &node, &applying(NodeState::Applying, None), "a", Timestamp::UNIX_EPOCH)
        else {
            panic!("no operation for the retargeted start");
        };
        assert_eq!(
            (op.spec.revision.as_str(), op.spec.started_at.as_str()),
            ("r2", "2026-12-07T10:00:00Z"),
            "the same start, the new revision"
        );
        assert_eq!(retargets.as_deref(), Some("win-0.20261207100000.r1"), "written only over the start's operation, whose drain it keeps");
        let mut same = applying(NodeState::Applying, None);
        same.labels.insert(names::LABEL_REVISION.into(), Some("r1".into()));
        assert_eq!(for_patch(&pool(), &node, &same, "a", Timestamp::UNIX_EPOCH), None, "a label written again is no retarget");
        // A new start of a node that ran an older revision is a start, not a retarget.
        let Some(OperationWrite::Apply { retargets, .. }) =
            for_patch(&pool(), &node, &applying(NodeState::Draining, None), "a", Timestamp::UNIX_EPOCH)
        else {
            panic!("no operation for a drained start");
        };
        assert_eq!(retargets, None);
    }

    fn pool() -> WindowsNodePool {
        test_builders::pool("p").build()
    }

    #[test]
    fn a_start_entering_applying_writes_its_whole_operation_and_names_a_drained_node_drained() {
        let pool = pool();
        let node = record(&[(names::ANN_STARTED_AT, "2026-12-07T10:00:00Z"), (names::ANN_INSTALL_BUDGET, "3600s")]);
        let now: Timestamp = "2026-12-07T10:05:00Z".parse().unwrap();
        let Some(OperationWrite::Apply { op, .. }) = for_patch(&pool, &node, &applying(NodeState::Draining, None), "agents", now) else {
            panic!("no operation for a drained start");
        };
        assert_eq!(op.metadata.name.as_deref(), Some("win-0.20261207100000.r2"));
        assert_eq!(op.metadata.namespace.as_deref(), Some("agents"));
        let s = &op.spec;
        assert_eq!((s.node_name.as_str(), s.node_uid.as_str(), s.pool.as_str(), s.revision.as_str()), ("win-0", "uid-1", "p", "r2"));
        assert_eq!(
            (s.action, s.started_at.as_str(), s.install_budget.as_deref()),
            (OperationAction::Update, "2026-12-07T10:00:00Z", Some("3600s"))
        );
        let st = op.status.as_ref().unwrap();
        assert_eq!((st.phase, st.drained_at.as_deref()), (Some(NodeState::Applying), Some("2026-12-07T10:05:00Z")));
    }

    #[test]
    fn a_start_in_service_is_never_named_drained() {
        let pool = pool();
        let mut p = applying(NodeState::Pending, None);
        p.annotations.insert(names::ANN_STARTED_AT.into(), Some("2026-12-07T10:00:00Z".into()));
        p.annotations.insert(names::ANN_HOTPATCH.into(), Some("true".into()));
        let Some(OperationWrite::Apply { op, .. }) = for_patch(&pool, &record(&[]), &p, "agents", Timestamp::UNIX_EPOCH) else {
            panic!("no operation for a hotpatch start");
        };
        assert_eq!(op.status.unwrap().drained_at, None);
    }

    #[test]
    fn a_node_at_rest_or_one_whose_start_never_reached_applying_gets_no_new_operation() {
        let pool = pool();
        let started = record(&[(names::ANN_STARTED_AT, "2026-12-07T10:00:00Z")]);
        // A patch without a start to name (a forged Applying state is no patch of winpool's).
        assert_eq!(for_patch(&pool, &record(&[]), &applying(NodeState::Draining, None), "a", Timestamp::UNIX_EPOCH), None);
        let put_back = NodePatch { node: "win-0".into(), from: NodeState::Pending, to: NodeState::Draining, ..Default::default() };
        assert_eq!(for_patch(&pool, &started, &put_back, "a", Timestamp::UNIX_EPOCH), None);
    }

    #[test]
    fn the_end_of_a_start_moves_its_operation_with_the_failure_said_once() {
        let pool = pool();
        let mut node = record(&[(names::ANN_STARTED_AT, "2026-12-07T10:00:00Z")]);
        node = with_revision(node, "r1");
        let mut p = NodePatch { node: "win-0".into(), from: NodeState::Applying, to: NodeState::Failed, ..Default::default() };
        p.annotations.insert(names::ANN_FAILURE_REASON.into(), Some("NodeTimeout".into()));
        let Some(OperationWrite::Phase { name, status }) = for_patch(&pool, &node, &p, "a", Timestamp::UNIX_EPOCH) else {
            panic!("no phase write for a failed start");
        };
        assert_eq!(name, "win-0.20261207100000.r1");
        assert_eq!((status.phase, status.reason.as_deref()), (Some(NodeState::Failed), Some("NodeTimeout")));
    }

    fn op(name: &str, started_at: &str, previous: Option<&WindowsNodeOperation>) -> WindowsNodeOperation {
        let mut o = WindowsNodeOperation::new(
            name,
            WindowsNodeOperationSpec {
                node_name: "win-0".into(),
                started_at: started_at.into(),
                revision: "r1".into(),
                ..Default::default()
            },
        );
        o.spec.previous = previous.map(|p| PreviousOperation { name: p.metadata.name.clone().unwrap(), sha256: digest(p) });
        o.status = Some(WindowsNodeOperationStatus { phase: Some(NodeState::Updated), ..Default::default() });
        o
    }

    #[test]
    fn a_nodes_operations_chain_and_an_edited_or_deleted_one_is_found() {
        let a = op("win-0.1", "2026-01-01T00:00:00Z", None);
        let b = op("win-0.2", "2026-02-01T00:00:00Z", Some(&a));
        let c = op("win-0.3", "2026-03-01T00:00:00Z", Some(&b));
        assert_eq!(previous(&[b.clone(), a.clone()], "win-0", "win-0.3").map(|p| p.name), Some("win-0.2".into()));
        assert_eq!(verify(&[c.clone(), a.clone(), b.clone()]), Vec::<String>::new());
        let mut edited = b.clone();
        edited.status.as_mut().unwrap().phase = Some(NodeState::Failed);
        assert_eq!(verify(&[a.clone(), edited, c.clone()]), ["node win-0: win-0.2 was changed after win-0.3 recorded it"]);
        assert_eq!(verify(&[a.clone(), c.clone()]), ["node win-0: win-0.3 follows win-0.2, which is gone (deleted)"]);
        let unlinked = op("win-0.4", "2026-04-01T00:00:00Z", None);
        assert_eq!(verify(&[a, b, c, unlinked]).len(), 1, "a new start that names no earlier one");
    }

    #[test]
    fn a_node_given_back_ends_its_starts_operation() {
        let node = with_revision(record(&[(names::ANN_STARTED_AT, "2026-12-07T10:00:00Z")]), "r1");
        let Some(OperationWrite::Phase { name, status }) = released(&node, Timestamp::UNIX_EPOCH) else {
            panic!("no phase write for a node given back mid-start");
        };
        assert_eq!((name.as_str(), status.phase), ("win-0.20261207100000.r1", Some(NodeState::Pending)));
        assert_eq!(released(&record(&[]), Timestamp::UNIX_EPOCH), None, "a node at rest has no start to end");
    }

    #[test]
    fn a_name_at_the_limit_stays_a_valid_object_name() {
        let long = "n".repeat(253);
        assert!(name(&long, "2026-12-07T10:00:00Z", "r1").len() <= 253);
        assert_ne!(name(&long, "2026-12-07T10:00:00Z", "r1"), name(&long, "2026-12-07T11:00:00Z", "r1"));
        assert_ne!(
            name("win-0", "2026-12-07T10:00:00.25Z", "r1"),
            name("win-0", "2026-12-07T10:00:00.75Z", "r1"),
            "two starts in one second"
        );
    }
}
