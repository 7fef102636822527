//! `hack/bench.sh --phases compliance`: how long `kubectl winpool compliance`
//! takes to answer, once its records are read, over a fleet's year of them
//! (5,000 nodes, 13 operations each: monthly patching and a retry), and the
//! bytes one ended operation takes as JSON (what etcd stores of it, without
//! its managedFields). Prints `key value` lines for the bench's report.

use std::time::Instant;

use jiff::{SignedDuration, Timestamp};
use winpool::api::NodeState;
use winpool::api::operation::{PreviousOperation, WindowsNodeOperation, WindowsNodeOperationSpec, WindowsNodeOperationStatus};
use winpool::api::report::InstalledUpdate;
use winpool::plugin::compliance::rows;

fn main() {
    let nodes: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(5000);
    let year: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let mut ops = Vec::with_capacity(nodes * 13);
    for n in 0..nodes {
        for m in 0..13i64 {
            let start = year + SignedDuration::from_hours(24 * (28 * m + 10)) + SignedDuration::from_secs(n as i64 * 7);
            let end = start + SignedDuration::from_mins(45);
            let mut o = WindowsNodeOperation::new(
                &format!("win-{n:05}.{}.r{m:02}abcdef", start.as_second()),
                WindowsNodeOperationSpec {
                    node_name: format!("win-{n:05}"),
                    node_uid: format!("6c1f0e5a-0000-4000-8000-{n:012}"),
                    node_created: Some("2025-12-01T00:00:00Z".into()),
                    pool: format!("pool-{}", n % 10),
                    pool_generation: m + 1,
                    revision: format!("r{m:02}abcdef"),
                    started_at: start.to_string(),
                    install_budget: Some("18000s".into()),
                    previous: (m > 0).then(|| PreviousOperation { name: format!("win-{n:05}.prev"), sha256: "a".repeat(64) }),
                    asked_by: Some("argocd-controller".into()),
                    ..Default::default()
                },
            );
            o.metadata.namespace = Some("winpool-agents".into());
            o.status = Some(WindowsNodeOperationStatus {
                phase: Some(NodeState::Updated),
                phase_since: Some(end.to_string()),
                drained_at: Some((start + SignedDuration::from_mins(5)).to_string()),
                build_before: Some(format!("10.0.20348.{}", 2700 + 10 * m)),
                build_after: Some(format!("10.0.20348.{}", 2710 + 10 * m)),
                installed: vec![InstalledUpdate {
                    kb: format!("KB50{m:05}"),
                    title: Some(format!(
                        "2026-{:02} Cumulative Update for Microsoft server operating system version 21H2 for x64-based Systems (KB50{m:05})",
                        m % 12 + 1
                    )),
                    cve_ids: (0..40).map(|c| format!("CVE-2026-{m:02}{c:03}")).collect(),
                }],
                installed_at: Some((start + SignedDuration::from_mins(30)).to_string()),
                reboots: Some(1),
                returned_at: Some(end.to_string()),
                ..Default::default()
            });
            ops.push(o);
        }
    }
    let bytes = serde_json::to_vec(&ops[1]).unwrap().len();
    let t = Instant::now();
    let answer = rows(&ops, &[], year + SignedDuration::from_hours(24 * 365), Some("CVE-2026-05001"));
    let took = t.elapsed();
    assert_eq!(answer.len(), nodes);
    println!("compliance_nodes {nodes}");
    println!("compliance_records {}", ops.len());
    println!("compliance_seconds {:.3}", took.as_secs_f64());
    println!("record_bytes {bytes}");
    println!("record_bytes_per_node_year {}", bytes * 13);
}
