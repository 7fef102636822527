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
use crate::api::report::{ApplyReport, ApplyStatus};
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
    Phase { name: String, status: Box<WindowsNodeOperationStatus> },
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

/// The write `patch` (decided for `node` of `pool`) carries, if any;
/// `apply`: what the node's agent last reported of its install.
pub fn for_patch(
    pool: &WindowsNodePool,
    node: &NodeRecord,
    patch: &NodePatch,
    apply: Option<&ApplyReport>,
    namespace: &str,
    now: Timestamp,
) -> Option<OperationWrite> {
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
                node_created: node.created.map(|t| t.to_string()),
                pool: pool.metadata.name.clone().unwrap_or_default(),
                pool_generation: pool.metadata.generation.unwrap_or_default(),
                revision,
                action: if undo_gate.is_some() { OperationAction::Undo } else { OperationAction::Update },
                started_at,
                install_budget: after(names::ANN_INSTALL_BUDGET),
                undo_gate,
                // Linked when it is created (controller/nodes.rs): the chain reads the cluster.
                previous: None,
                asked_by: asked_by(pool),
            },
        );
        op.metadata.namespace = Some(namespace.to_string());
        op.metadata.labels = Some([(names::LABEL_POOL.to_string(), op.spec.pool.clone())].into());
        op.status = Some(WindowsNodeOperationStatus {
            phase: Some(NodeState::Applying),
            phase_since: Some(now.clone()),
            drained_at: drained.then_some(now),
            build_before: Some(node.kernel_version.clone()).filter(|b| !b.is_empty()),
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
    let mut status = WindowsNodeOperationStatus {
        phase: Some(patch.to),
        phase_since: Some(now.clone()),
        reason: after(names::ANN_FAILURE_REASON).filter(|_| failed),
        message: after(names::ANN_FAILURE_MESSAGE).filter(|_| failed),
        ..Default::default()
    };
    if matches!(patch.to, NodeState::Updated | NodeState::Failed) {
        ended(&mut status, node, patch, apply.filter(|a| a.started_at.as_deref() == Some(started_at)), now);
    }
    Some(OperationWrite::Phase { name: name(&node.name, started_at, revision), status: Box::new(status) })
}

/// What an ended operation records of the host: its build, what its agent
/// installed for this start (a report of an earlier start says nothing of
/// this one), whether it rebooted, and whether it went back in service.
fn ended(status: &mut WindowsNodeOperationStatus, node: &NodeRecord, patch: &NodePatch, apply: Option<&ApplyReport>, now: String) {
    status.build_after = Some(node.kernel_version.clone()).filter(|b| !b.is_empty());
    if let Some(a) = apply {
        status.installed = a.installed.clone();
        // The task's last beat is its end only once it said it installed.
        let installed = matches!(a.status, ApplyStatus::Succeeded | ApplyStatus::Rebooting | ApplyStatus::RebootRequired);
        status.installed_at = a.heartbeat.clone().filter(|_| installed);
    }
    // The boot a start that expects a reboot began from (none for a hotpatch).
    status.reboots = node.annotation(names::ANN_BOOT_ID).map(|at_start| i32::from(at_start != node.boot_id));
    status.returned_at = (patch.unschedulable == Some(false)).then_some(now);
}

/// The field manager of the pool's latest change to its spec: who asked for
/// what the start carries out (winpool itself writes only status and the
/// pause annotation, never the spec).
pub fn asked_by(pool: &WindowsNodePool) -> Option<String> {
    let changes = pool.metadata.managed_fields.iter().flatten();
    let of_spec = changes
        .filter(|m| m.subresource.as_deref().unwrap_or_default().is_empty())
        .filter(|m| m.fields_v1.as_ref().is_some_and(|f| f.0.get("f:spec").is_some()));
    of_spec.max_by_key(|m| m.time.as_ref().map(|t| t.0)).and_then(|m| m.manager.clone())
}

/// A node given back by its pool (deselected, or its pool deleted) ends the
/// operation of its start: its agent no longer works for that pool, and
/// prepares for the next one that selects it.
pub fn released(node: &NodeRecord, now: Timestamp) -> Option<OperationWrite> {
    let (started_at, revision) = (node.annotation(names::ANN_STARTED_AT)?, node.label(names::LABEL_REVISION)?);
    let status = WindowsNodeOperationStatus { phase: Some(NodeState::Pending), phase_since: Some(now.to_string()), ..Default::default() };
    Some(OperationWrite::Phase { name: name(&node.name, started_at, revision), status: Box::new(status) })
}

/// The digest a later operation of the node records of `op`: its name, spec
/// and status as the typed object serializes them (fields in declaration
/// order), so a change of any of them after it was chained shows.
pub fn digest(op: &WindowsNodeOperation) -> String {
    let body = serde_json::json!({ "name": op.metadata.name, "spec": op.spec, "status": op.status });
    sha256_hex(&body.to_string())
}

/// How long a node's ended operations are kept, and how many at most: the
/// record an examiner reads (13 months of monthly patching and more), bounded
/// per node whatever a fleet's retries do.
#[derive(Debug, Clone, PartialEq)]
pub struct Retention {
    pub max_age: std::time::Duration,
    pub per_node: usize,
}

impl Default for Retention {
    fn default() -> Self {
        Retention { max_age: std::time::Duration::from_secs(400 * 86_400), per_node: 64 }
    }
}

/// Which of a node's operations `ops` (all made before the one being made
/// now) go: ended ones started before the retention, and the oldest beyond
/// `per_node` with the new one counted. An operation in flight is never one.
pub fn expired(ops: &[WindowsNodeOperation], keep: &Retention, now: Timestamp) -> Vec<String> {
    let mut ended: Vec<&WindowsNodeOperation> = ops.iter().filter(|o| !in_flight(o)).collect();
    ended.sort_by_key(|o| std::cmp::Reverse(started(o)));
    let cutoff = jiff::SignedDuration::try_from(keep.max_age).ok().and_then(|d| now.checked_sub(d).ok());
    let room = keep.per_node.saturating_sub(1 + (ops.len() - ended.len()));
    let old = |o: &&WindowsNodeOperation| matches!((started(o), cutoff), (Some(s), Some(c)) if s < c);
    ended.iter().enumerate().filter(|(i, o)| *i >= room || old(o)).filter_map(|(_, o)| o.metadata.name.clone()).collect()
}

fn in_flight(op: &WindowsNodeOperation) -> bool {
    matches!(op.status.as_ref().and_then(|s| s.phase), Some(NodeState::Applying | NodeState::Verifying))
}

/// An ended operation as the one JSON line a SIEM keeps: its name, the
/// digest its node's next operation will chain (`sha256`), and its spec and
/// status as the CRD's schema gives them. None while it is in flight.
pub fn record_line(op: &WindowsNodeOperation) -> Option<String> {
    let phase = op.status.as_ref()?.phase?;
    if !matches!(phase, NodeState::Updated | NodeState::Failed | NodeState::Pending) {
        return None;
    }
    let line = serde_json::json!({
        "record": "winpool.dev/v1alpha1/WindowsNodeOperation",
        "name": op.metadata.name,
        "namespace": op.metadata.namespace,
        "sha256": digest(op),
        "spec": op.spec,
        "status": op.status,
    });
    Some(line.to_string())
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
/// an earlier one exists. The oldest record kept may name one that is gone:
/// the retention removed it (a record deleted from the start of a chain
/// looks the same; the SIEM's copy of each record is what shows that).
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
                    // The oldest record kept: the one before it went with the retention.
                    None if i == 0 => {}
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
            for_patch(&pool(), &node, &applying(NodeState::Applying, None), None, "a", Timestamp::UNIX_EPOCH)
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
        assert_eq!(for_patch(&pool(), &node, &same, None, "a", Timestamp::UNIX_EPOCH), None, "a label written again is no retarget");
        // A new start of a node that ran an older revision is a start, not a retarget.
        let Some(OperationWrite::Apply { retargets, .. }) =
            for_patch(&pool(), &node, &applying(NodeState::Draining, None), None, "a", Timestamp::UNIX_EPOCH)
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
        let Some(OperationWrite::Apply { op, .. }) = for_patch(&pool, &node, &applying(NodeState::Draining, None), None, "agents", now)
        else {
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
        let Some(OperationWrite::Apply { op, .. }) = for_patch(&pool, &record(&[]), &p, None, "agents", Timestamp::UNIX_EPOCH) else {
            panic!("no operation for a hotpatch start");
        };
        assert_eq!(op.status.unwrap().drained_at, None);
    }

    #[test]
    fn a_node_at_rest_or_one_whose_start_never_reached_applying_gets_no_new_operation() {
        let pool = pool();
        let started = record(&[(names::ANN_STARTED_AT, "2026-12-07T10:00:00Z")]);
        // A patch without a start to name (a forged Applying state is no patch of winpool's).
        assert_eq!(for_patch(&pool, &record(&[]), &applying(NodeState::Draining, None), None, "a", Timestamp::UNIX_EPOCH), None);
        let put_back = NodePatch { node: "win-0".into(), from: NodeState::Pending, to: NodeState::Draining, ..Default::default() };
        assert_eq!(for_patch(&pool, &started, &put_back, None, "a", Timestamp::UNIX_EPOCH), None);
    }

    #[test]
    fn the_end_of_a_start_moves_its_operation_with_the_failure_said_once() {
        let pool = pool();
        let mut node = record(&[(names::ANN_STARTED_AT, "2026-12-07T10:00:00Z")]);
        node = with_revision(node, "r1");
        let mut p = NodePatch { node: "win-0".into(), from: NodeState::Applying, to: NodeState::Failed, ..Default::default() };
        p.annotations.insert(names::ANN_FAILURE_REASON.into(), Some("NodeTimeout".into()));
        let Some(OperationWrite::Phase { name, status }) = for_patch(&pool, &node, &p, None, "a", Timestamp::UNIX_EPOCH) else {
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

    fn report(started: &str, status: ApplyStatus) -> ApplyReport {
        ApplyReport {
            revision: "r1".into(),
            status,
            message: None,
            started_at: Some(started.into()),
            no_reboot: false,
            heartbeat: Some("2026-12-07T10:40:00Z".into()),
            result_code: None,
            host_build: None,
            installed: vec![crate::api::report::InstalledUpdate {
                kb: "KB5050002".into(),
                title: Some("2026-12 Cumulative Update".into()),
                cve_ids: vec!["CVE-2026-21001".into()],
            }],
        }
    }

    #[test]
    fn an_ended_start_records_the_build_what_was_installed_the_reboot_and_the_return() {
        let mut n = Node::default();
        n.metadata.name = Some("win-0".into());
        n.metadata.labels = Some([(names::LABEL_REVISION.to_string(), "r1".to_string())].into());
        n.metadata.annotations = Some(
            [(names::ANN_STARTED_AT, "2026-12-07T10:00:00Z"), (names::ANN_BOOT_ID, "boot-1")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into(),
        );
        let info = k8s_openapi::api::core::v1::NodeSystemInfo {
            kernel_version: "10.0.20348.2762".into(),
            boot_id: "boot-2".into(),
            ..Default::default()
        };
        n.status = Some(k8s_openapi::api::core::v1::NodeStatus { node_info: Some(info), ..Default::default() });
        let node = NodeRecord::from(&n);
        let mut p = NodePatch {
            node: "win-0".into(),
            from: NodeState::Verifying,
            to: NodeState::Updated,
            unschedulable: Some(false),
            ..Default::default()
        };
        let now: Timestamp = "2026-12-07T11:00:00Z".parse().unwrap();
        let this_start = report("2026-12-07T10:00:00Z", ApplyStatus::Succeeded);
        let Some(OperationWrite::Phase { status, .. }) = for_patch(&pool(), &node, &p, Some(&this_start), "a", now) else {
            panic!("no phase write for an updated node");
        };
        assert_eq!(status.build_after.as_deref(), Some("10.0.20348.2762"));
        assert_eq!(status.installed, this_start.installed);
        assert_eq!(status.installed_at.as_deref(), Some("2026-12-07T10:40:00Z"));
        assert_eq!((status.reboots, status.returned_at.as_deref()), (Some(1), Some("2026-12-07T11:00:00Z")));
        // A report of an earlier start says nothing of this one; a node left cordoned was not returned.
        p.unschedulable = None;
        let earlier = report("2026-11-07T10:00:00Z", ApplyStatus::Succeeded);
        let Some(OperationWrite::Phase { status, .. }) = for_patch(&pool(), &node, &p, Some(&earlier), "a", now) else {
            panic!("no phase write");
        };
        assert_eq!((status.installed.len(), status.installed_at, status.returned_at), (0, None, None));
        // A failed install installed nothing.
        p.to = NodeState::Failed;
        let failed = report("2026-12-07T10:00:00Z", ApplyStatus::Failed);
        let Some(OperationWrite::Phase { status, .. }) = for_patch(&pool(), &node, &p, Some(&failed), "a", now) else {
            panic!("no phase write");
        };
        assert_eq!(status.installed_at, None);
    }

    #[test]
    fn the_start_names_who_last_changed_the_pools_spec() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, Time};
        let entry = |manager: &str, at: &str, fields: serde_json::Value, sub: Option<&str>| ManagedFieldsEntry {
            manager: Some(manager.into()),
            time: Some(Time(at.parse().unwrap())),
            fields_v1: Some(FieldsV1(fields)),
            subresource: sub.map(Into::into),
            ..Default::default()
        };
        let mut p = pool();
        p.metadata.managed_fields = Some(vec![
            entry("kubectl-client-side-apply", "2026-11-01T00:00:00Z", serde_json::json!({"f:spec": {}}), None),
            entry("argocd-controller", "2026-12-01T00:00:00Z", serde_json::json!({"f:spec": {"f:os": {}}}), None),
            entry("winpool", "2026-12-02T00:00:00Z", serde_json::json!({"f:status": {}}), Some("status")),
            entry("kubectl-winpool", "2026-12-03T00:00:00Z", serde_json::json!({"f:metadata": {}}), None),
        ]);
        assert_eq!(asked_by(&p).as_deref(), Some("argocd-controller"));
    }

    fn ended_op(name: &str, started_at: &str, phase: NodeState) -> WindowsNodeOperation {
        let mut o = op(name, started_at, None);
        o.status = Some(WindowsNodeOperationStatus { phase: Some(phase), ..Default::default() });
        o
    }

    #[test]
    fn records_past_the_retention_or_the_bound_go_but_never_one_in_flight() {
        let now: Timestamp = "2026-12-07T00:00:00Z".parse().unwrap();
        let keep = Retention { max_age: std::time::Duration::from_secs(400 * 86_400), per_node: 3 };
        let ancient = ended_op("win-0.old", "2025-01-01T00:00:00Z", NodeState::Updated);
        let stuck = ended_op("win-0.stuck", "2024-01-01T00:00:00Z", NodeState::Applying);
        let recent: Vec<_> =
            (1..=3).map(|m| ended_op(&format!("win-0.m{m}"), &format!("2026-0{m}-01T00:00:00Z"), NodeState::Updated)).collect();
        let mut ops = vec![ancient, stuck];
        ops.extend(recent);
        let mut gone = expired(&ops, &keep, now);
        gone.sort();
        // Room for 3: the new one and the in-flight one leave one: m3.
        assert_eq!(gone, ["win-0.m1", "win-0.m2", "win-0.old"]);
        let roomy = Retention { per_node: 64, ..keep };
        assert_eq!(expired(&ops, &roomy, now), ["win-0.old"], "only what is older than the retention");
    }

    #[test]
    fn an_ended_operation_is_one_json_line_with_the_digest_its_successor_chains() {
        let o = ended_op("win-0.1", "2026-01-01T00:00:00Z", NodeState::Updated);
        let line = record_line(&o).expect("an ended operation has a record line");
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["sha256"], digest(&o));
        assert_eq!(v["spec"]["nodeName"], "win-0");
        assert_eq!(v["status"]["phase"], "Updated");
        assert_eq!(record_line(&ended_op("win-0.2", "2026-02-01T00:00:00Z", NodeState::Verifying)), None, "none while in flight");
    }

    #[test]
    fn the_oldest_record_kept_may_follow_one_the_retention_removed() {
        let a = op("win-0.1", "2026-01-01T00:00:00Z", None);
        let b = op("win-0.2", "2026-02-01T00:00:00Z", Some(&a));
        let c = op("win-0.3", "2026-03-01T00:00:00Z", Some(&b));
        assert_eq!(verify(&[b.clone(), c.clone()]), Vec::<String>::new());
        assert_eq!(verify(&[c]).len(), 0);
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
