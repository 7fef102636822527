//! The text output of `status` and `plan`: a header of `KEY: value` lines,
//! then columns padded like kubectl's (three spaces between columns, absent
//! values as `<none>`).

use jiff::Timestamp;

use super::age;
use super::output::{PlanReport, PoolRow, StatusReport};

const NONE: &str = "<none>";

/// Columns aligned like `kubectl get`: each but the last padded to its widest cell.
pub fn columns(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}   ", w = widths[i]));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

fn or_none(v: &Option<String>) -> String {
    v.clone().filter(|s| !s.is_empty()).unwrap_or_else(|| NONE.to_string())
}

/// `kubectl winpool list`; `wide` adds the OS, the revision and the Progressing message.
pub fn pools(rows: &[PoolRow], wide: bool) -> String {
    if rows.is_empty() {
        return "No WindowsNodePool found.\n".into();
    }
    let mut header = vec!["NAME", "PATCH", "NODES", "UPDATED", "FAILED", "PAUSED", "REASON"];
    if wide {
        header.extend(["OS", "REVISION", "MESSAGE"]);
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let c = &r.counts;
            let mut row = vec![
                r.name.clone(),
                r.patch_level.clone(),
                c.total.to_string(),
                c.updated.to_string(),
                c.failed.to_string(),
                r.paused.to_string(),
                or_none(&r.reason),
            ];
            if wide {
                row.extend([r.os.clone(), or_none(&r.revision), or_none(&r.message)]);
            }
            row
        })
        .collect();
    columns(&header, &cells)
}

pub const STATUS_COLUMNS: [&str; 7] = ["NODE", "STATE", "SINCE", "REVISION", "PATCH", "HNS", "MESSAGE"];

pub fn status(r: &StatusReport, now: Timestamp) -> String {
    let c = &r.counts;
    let mut out = format!(
        "Pool:         {}\nRevision:     {} (patch level {})\nNodes:        {} total, {} updated, {} updating, {} pending, {} failed\n",
        r.pool, r.revision, r.patch_level, c.total, c.updated, c.updating, c.pending, c.failed
    );
    if r.paused {
        out.push_str(&format!("Paused:       true ({})\n", r.paused_by.as_deref().unwrap_or("spec.rollout.paused")));
    }
    match &r.progressing {
        Some(p) => out.push_str(&format!("Progressing:  {} {}: {}\n", p.status, p.reason, p.message)),
        None => out.push_str("Progressing:  <none> (the operator has not reported on this pool yet)\n"),
    }
    if let Some(c) = &r.conflicts {
        out.push_str(&format!("Left alone:   {c}\n"));
    }
    if let Some(m) = &r.provider_managed {
        out.push_str(&format!("Managed:      {m}\n"));
    }
    if let Some((opens, closes)) = &r.next_window {
        out.push_str(&format!("Window:       {opens} to {closes}\n"));
    }
    if let Some(eta) = &r.estimated_completion {
        out.push_str(&format!("Done by:      ~{eta} (estimate)\n"));
    }
    for (node, budget) in &r.drain_blocked {
        out.push_str(&format!("Drain blocked: {node} by PodDisruptionBudget {budget}\n"));
    }
    out.push('\n');
    if r.nodes.is_empty() {
        out.push_str("No Windows node matches the pool's nodeSelector.\n");
        return out;
    }
    let rows: Vec<Vec<String>> = r
        .nodes
        .iter()
        .map(|n| {
            let since = n.since.as_deref().and_then(|s| s.parse::<Timestamp>().ok()).map(|t| age::since(t, now));
            vec![
                n.name.clone(),
                n.state.clone(),
                or_none(&since),
                or_none(&n.revision),
                or_none(&n.patch),
                n.hns.clone(),
                n.message.clone().unwrap_or_default(),
            ]
        })
        .collect();
    out.push_str(&columns(&STATUS_COLUMNS, &rows));
    out
}

fn list(names: &[String]) -> String {
    if names.is_empty() { NONE.to_string() } else { names.join(", ") }
}

pub fn plan(r: &PlanReport) -> String {
    let mut out = format!("Pool:            {}\nRevision:        {}\nMaxUnavailable:  {}\n", r.pool, r.revision, r.max_unavailable);
    if r.out_of_service > 0 {
        let what = "not Ready, or cordoned by someone else; they count against maxUnavailable";
        out.push_str(&format!("OutOfService:    {} ({what})\n", r.out_of_service));
    }
    out.push_str(&format!("Held:            {}\n", r.hold.as_deref().unwrap_or("no: nodes start as slots free")));
    let window = match &r.window {
        None => "none (nodes start at any time)".to_string(),
        Some(w) if w.open => w.closes.as_ref().map_or("open now".to_string(), |c| format!("open now; closes at {c}")),
        Some(w) => match (&w.opens, &w.error) {
            (_, Some(e)) => format!("invalid: {e}"),
            (Some(opens), None) => format!("closed; opens at {opens}"),
            (None, None) => "closed; none opens within 400 days".to_string(),
        },
    };
    out.push_str(&format!("Window:          {window}\n"));
    out.push_str(&format!("Updated:         {}\n", list(&r.updated)));
    let failed: Vec<String> = r.failed.iter().map(|f| format!("{} ({}: {})", f.name, f.reason, f.message)).collect();
    out.push_str(&format!("Failed:          {}\n\n", list(&failed)));
    if !r.in_flight.is_empty() {
        let rows: Vec<Vec<String>> =
            r.in_flight.iter().map(|n| vec![n.name.clone(), n.state.clone(), n.waiting_for.clone().unwrap_or_default()]).collect();
        out.push_str(&columns(&["IN FLIGHT", "STATE", "WAITING FOR"], &rows));
        out.push('\n');
    }
    for (node, why) in &r.runtime_refused {
        out.push_str(&format!("Never started:   {node} {why}\n"));
    }
    for (node, why) in &r.preflight_blocked {
        out.push_str(&format!("Blocked by its agent's preflight: {node}: {why}\n"));
    }
    if !r.held.is_empty() {
        out.push_str(&format!("Never started while labelled {}=true: {}\n", crate::api::names::LABEL_HOLD, r.held.join(", ")));
    }
    if !r.runtime_refused.is_empty() || !r.preflight_blocked.is_empty() || !r.held.is_empty() {
        out.push('\n');
    }
    if r.waves.is_empty() {
        out.push_str(&match r.pending {
            0 => "No node is pending.\n".to_string(),
            n => format!("{n} pending, none of them can start: see Held.\n"),
        });
        return out;
    }
    let mut rows = Vec::new();
    for (i, wave) in r.waves.iter().enumerate() {
        for n in wave {
            let how = if r.hotpatch.contains(n) { "hotpatch (in service)" } else { "drained" };
            rows.push(vec![(i + 1).to_string(), n.clone(), how.to_string()]);
        }
    }
    out.push_str(&columns(&["WAVE", "NODE", "UPDATE"], &rows));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::NodeCounts;
    use crate::plugin::output::{ConditionSummary, FailedNodeReport, InFlightNode, NodeRow, WindowReport};

    fn now() -> Timestamp {
        "2026-12-01T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn columns_are_padded_to_the_widest_cell_and_the_last_is_not() {
        let t = columns(&["A", "BB", "C"], &[vec!["xxx".into(), "y".into(), "z z".into()], vec!["x".into(), "".into(), "".into()]]);
        assert_eq!(t, "A     BB   C\nxxx   y    z z\nx\n");
    }

    #[test]
    fn the_status_table_has_a_row_per_node_in_the_documented_columns() {
        let r = StatusReport {
            pool: "win22".into(),
            revision: "5f1c9a2e".into(),
            patch_level: "10.0.20348.2762".into(),
            paused: true,
            paused_by: Some("spec.rollout.paused".into()),
            counts: NodeCounts { total: 2, updated: 1, updating: 0, pending: 0, failed: 1 },
            progressing: Some(ConditionSummary {
                status: "False".into(),
                reason: "Paused".into(),
                message: "rollout.paused is true; 0 nodes pending".into(),
            }),
            conflicts: None,
            provider_managed: None,
            estimated_completion: Some("2026-12-01T13:00:00Z".into()),
            next_window: Some(("2026-12-05T02:00:00Z".into(), "2026-12-05T06:00:00Z".into())),
            drain_blocked: vec![("win-3".into(), "shop/checkout".into())],
            nodes: vec![
                NodeRow {
                    name: "win-0".into(),
                    state: "Updated".into(),
                    since: Some("2026-12-01T11:55:00Z".into()),
                    revision: Some("5f1c9a2e".into()),
                    patch: Some("20348.2762".into()),
                    hns: "True".into(),
                    message: None,
                },
                NodeRow {
                    name: "win-10".into(),
                    state: "Failed".into(),
                    since: Some("2026-12-01T09:30:00Z".into()),
                    revision: None,
                    patch: Some("20348.2700".into()),
                    hns: "Unknown".into(),
                    message: Some("ApplyFailed: servicing exited 0x800f0922".into()),
                },
            ],
        };
        let want = "\
Pool:         win22
Revision:     5f1c9a2e (patch level 10.0.20348.2762)
Nodes:        2 total, 1 updated, 0 updating, 0 pending, 1 failed
Paused:       true (spec.rollout.paused)
Progressing:  False Paused: rollout.paused is true; 0 nodes pending
Window:       2026-12-05T02:00:00Z to 2026-12-05T06:00:00Z
Done by:      ~2026-12-01T13:00:00Z (estimate)
Drain blocked: win-3 by PodDisruptionBudget shop/checkout

NODE     STATE     SINCE   REVISION   PATCH        HNS       MESSAGE
win-0    Updated   5m      5f1c9a2e   20348.2762   True
win-10   Failed    150m    <none>     20348.2700   Unknown   ApplyFailed: servicing exited 0x800f0922
";
        assert_eq!(status(&r, now()), want);
    }

    #[test]
    fn a_pool_the_operator_has_not_seen_says_so() {
        let r = StatusReport {
            pool: "p".into(),
            revision: "r".into(),
            patch_level: "10.0.20348.2762".into(),
            paused: false,
            paused_by: None,
            counts: NodeCounts::default(),
            progressing: None,
            conflicts: None,
            provider_managed: None,
            estimated_completion: None,
            next_window: None,
            drain_blocked: vec![],
            nodes: vec![],
        };
        let want = "\
Pool:         p
Revision:     r (patch level 10.0.20348.2762)
Nodes:        0 total, 0 updated, 0 updating, 0 pending, 0 failed
Progressing:  <none> (the operator has not reported on this pool yet)

No Windows node matches the pool's nodeSelector.
";
        assert_eq!(status(&r, now()), want);
    }

    #[test]
    fn the_plan_shows_the_hold_the_window_and_one_row_per_node_of_each_wave() {
        let r = PlanReport {
            pool: "win22".into(),
            revision: "5f1c9a2e".into(),
            max_unavailable: 2,
            out_of_service: 1,
            hold: Some("rollout.paused is true".into()),
            pending: 5,
            window: Some(WindowReport { open: false, opens: Some("2026-12-05T02:00:00Z".into()), closes: None, error: None }),
            in_flight: vec![InFlightNode { name: "a".into(), state: "Applying".into(), waiting_for: Some("the agent".into()) }],
            updated: vec!["u".into()],
            failed: vec![FailedNodeReport { name: "f".into(), reason: "Timeout".into(), message: "slow".into() }],
            order: vec!["b".into(), "c".into(), "d".into()],
            waves: vec![vec!["b".into()], vec!["c".into(), "d".into()]],
            runtime_refused: vec![("e".into(), "runs containerd 1.7.20+azure, the pool asks 1.7.22, and …".into())],
            preflight_blocked: vec![],
            held: vec!["h".into()],
            hotpatch: vec!["c".into()],
        };
        let want = "\
Pool:            win22
Revision:        5f1c9a2e
MaxUnavailable:  2
OutOfService:    1 (not Ready, or cordoned by someone else; they count against maxUnavailable)
Held:            rollout.paused is true
Window:          closed; opens at 2026-12-05T02:00:00Z
Updated:         u
Failed:          f (Timeout: slow)

IN FLIGHT   STATE      WAITING FOR
a           Applying   the agent

Never started:   e runs containerd 1.7.20+azure, the pool asks 1.7.22, and …
Never started while labelled winpool.dev/hold=true: h

WAVE   NODE   UPDATE
1      b      drained
2      c      hotpatch (in service)
2      d      drained
";
        assert_eq!(plan(&r), want);
    }
}
