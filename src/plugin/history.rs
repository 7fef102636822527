//! `kubectl winpool history`: what winpool did to which node and when, from
//! its WindowsNodeOperations (one per start, written by the operator alone),
//! and `--verify`, which checks each node's chain of them.

use kube::Client;
use kube::api::{Api, ListParams};
use serde::Serialize;

use super::PluginError;
use crate::api::operation::WindowsNodeOperation;

/// One start of one node, as `history` prints it.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HistoryRow {
    pub node: String,
    pub pool: String,
    pub action: String,
    pub revision: String,
    pub started_at: String,
    pub phase: String,
    pub since: String,
    pub reason: String,
    pub asked_by: String,
    pub build_before: String,
    pub build_after: String,
    /// What the agent installed, `KB5050002 KB5050003`.
    pub installed: String,
    /// The CVE IDs Windows Update listed for it, space-separated.
    pub cve_ids: String,
    pub drained_at: String,
    pub installed_at: String,
    pub returned_at: String,
}

/// Which operations: a pool's (`POOL`) or a node's (`node/NAME`); all when none.
pub fn selects(target: Option<&str>, op: &WindowsNodeOperation) -> bool {
    match target {
        None => true,
        Some(t) => match t.strip_prefix("node/") {
            Some(node) => op.spec.node_name == node,
            None => op.spec.pool == t,
        },
    }
}

/// The rows of `ops` that `target` selects, started at or after `since`, oldest start first.
pub fn rows(ops: &[WindowsNodeOperation], target: Option<&str>, since: Option<jiff::Timestamp>) -> Vec<HistoryRow> {
    let recent = |o: &&WindowsNodeOperation| since.is_none_or(|t| o.spec.started_at.parse::<jiff::Timestamp>().is_ok_and(|s| s >= t));
    let mut rows: Vec<HistoryRow> = ops
        .iter()
        .filter(|o| selects(target, o))
        .filter(recent)
        .map(|o| {
            let st = o.status.clone().unwrap_or_default();
            let joined = |f: &dyn Fn(&crate::api::report::InstalledUpdate) -> Vec<String>| {
                st.installed.iter().flat_map(f).collect::<Vec<_>>().join(" ")
            };
            HistoryRow {
                asked_by: o.spec.asked_by.clone().unwrap_or_default(),
                build_before: st.build_before.clone().unwrap_or_default(),
                build_after: st.build_after.clone().unwrap_or_default(),
                installed: joined(&|u| vec![u.kb.clone()]),
                cve_ids: joined(&|u| u.cve_ids.clone()),
                drained_at: st.drained_at.clone().unwrap_or_default(),
                installed_at: st.installed_at.clone().unwrap_or_default(),
                returned_at: st.returned_at.clone().unwrap_or_default(),
                node: o.spec.node_name.clone(),
                pool: o.spec.pool.clone(),
                action: format!("{:?}", o.spec.action),
                revision: o.spec.revision.clone(),
                started_at: o.spec.started_at.clone(),
                phase: st.phase.map(|p| p.as_str().to_string()).unwrap_or_default(),
                since: st.phase_since.unwrap_or_default(),
                reason: st.reason.unwrap_or_default(),
            }
        })
        .collect();
    rows.sort_by(|a, b| (&a.started_at, &a.node).cmp(&(&b.started_at, &b.node)));
    rows
}

pub fn table(rows: &[HistoryRow]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let build = if r.build_after.is_empty() || r.build_after == r.build_before {
                r.build_before.clone()
            } else {
                format!("{} -> {}", r.build_before, r.build_after)
            };
            [&r.node, &r.pool, &r.action, &r.revision, &r.started_at, &r.phase, &r.since, &build, &r.installed, &r.reason]
                .map(|c| if c.is_empty() { "-".to_string() } else { c.to_string() })
                .to_vec()
        })
        .collect();
    let headers = ["NODE", "POOL", "ACTION", "REVISION", "STARTED", "PHASE", "SINCE", "BUILD", "INSTALLED", "REASON"];
    super::table::columns(&headers, &cells)
}

/// Every operation in the cluster (they live in each install's agents' namespace),
/// a page at a time: a fleet's year of records is tens of thousands of objects,
/// which the API server would otherwise hold in one answer.
pub async fn read(client: &Client) -> Result<Vec<WindowsNodeOperation>, PluginError> {
    let api: Api<WindowsNodeOperation> = Api::all(client.clone());
    let mut all = Vec::new();
    let mut page = ListParams::default().limit(500);
    loop {
        let list = api.list(&page).await.map_err(|e| PluginError::from_kube(e, "windowsnodeoperations", ""))?;
        all.extend(list.items);
        match list.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(next) => page = page.continue_token(&next),
            None => return Ok(all),
        }
    }
}

/// `--verify`: the chains of the selected nodes are whole, or what is wrong with them.
pub fn verify(ops: &[WindowsNodeOperation], target: Option<&str>) -> Result<String, PluginError> {
    let nodes: std::collections::BTreeSet<&str> = ops.iter().filter(|o| selects(target, o)).map(|o| o.spec.node_name.as_str()).collect();
    let of_nodes: Vec<WindowsNodeOperation> = ops.iter().filter(|o| nodes.contains(o.spec.node_name.as_str())).cloned().collect();
    match crate::decision::operation::verify(&of_nodes) {
        problems if problems.is_empty() => Ok(format!("{} operations of {} nodes: every chain is whole\n", of_nodes.len(), nodes.len())),
        problems => Err(PluginError::Refused(format!("the record was changed:\n{}", problems.join("\n")))),
    }
}
