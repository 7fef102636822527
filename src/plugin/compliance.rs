//! `kubectl winpool compliance`: per node, what it ran at a time (now, or
//! `--as-of`), from the record alone (the operations winpool wrote and the
//! hash chain keeps): its build, the last update it installed and when,
//! whether a CVE was fixed on it, and how long it had been behind its pool.
//!
//! A node name may have been several hosts (a node re-created, a VM
//! replaced): an operation names the host's UID, and the Nodes of now say
//! since when the current host has been there.

use std::collections::{BTreeMap, HashMap};

use jiff::Timestamp;
use serde::Serialize;

use crate::api::NodeState;
use crate::api::operation::WindowsNodeOperation;
use crate::decision::versions::WindowsBuild;

/// A host of now, as its Node says it: a host that joined before the time
/// asked about and had no operation yet then ran the build its first
/// operation began from (or runs now, if it had none).
#[derive(Debug, Clone, PartialEq)]
pub struct Host {
    pub name: String,
    pub uid: String,
    pub created: Option<Timestamp>,
    pub build: String,
}

/// One node at the time asked about.
#[derive(Serialize, Debug, Clone, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ComplianceRow {
    pub node: String,
    pub uid: String,
    pub pool: String,
    /// The OS build it ran (empty: the record does not say).
    pub build: String,
    /// The last update installed on this host by then (the OS cumulative update when it names one).
    pub last_kb: String,
    pub last_kb_at: String,
    /// With `--cve`: whether its build was at or past the first build any
    /// node reached by installing an update that lists the CVE (cumulative
    /// updates carry the fixes of those before them); absent when no record
    /// lists it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cve_fixed: Option<bool>,
    /// Whole days since a node of its pool first ran a newer build (0: not behind).
    pub days_behind: i64,
}

fn ended_by(op: &WindowsNodeOperation, t: Timestamp) -> Option<Timestamp> {
    let st = op.status.as_ref()?;
    let done = matches!(st.phase?, NodeState::Updated | NodeState::Failed | NodeState::Pending);
    st.phase_since.as_deref()?.parse().ok().filter(|at| done && *at <= t)
}

fn started(op: &WindowsNodeOperation) -> Option<Timestamp> {
    op.spec.started_at.parse().ok()
}

fn build_of(s: &str) -> Option<WindowsBuild> {
    s.parse().ok()
}

/// What the record says of every node `ops` name (and of `hosts`, the
/// Nodes of now) at `t`; with `cve`, whether it was fixed. Sorted by node.
pub fn rows(ops: &[WindowsNodeOperation], hosts: &[Host], t: Timestamp, cve: Option<&str>) -> Vec<ComplianceRow> {
    let mut names: Vec<&str> = ops.iter().map(|o| o.spec.node_name.as_str()).chain(hosts.iter().map(|h| h.name.as_str())).collect();
    names.sort_unstable();
    names.dedup();
    let fixing = cve.map(|id| first_fixing_build(ops, id, t));
    let mut by_name: HashMap<&str, Vec<&WindowsNodeOperation>> = HashMap::new();
    for o in ops {
        by_name.entry(o.spec.node_name.as_str()).or_default().push(o);
    }
    let reached = reached_by(ops, t);
    let mut rows: Vec<ComplianceRow> = names.into_iter().filter_map(|n| at(by_name.remove(n).unwrap_or_default(), hosts, n, t)).collect();
    for r in &mut rows {
        r.days_behind = days_behind(&reached, &r.pool, &r.build, t);
        if let Some(fixing) = fixing {
            r.cve_fixed = fixing.map(|f| build_of(&r.build).is_some_and(|b| b.major == f.major && b.build == f.build && b >= f));
        }
    }
    rows
}

/// The host that was node `name` at `t` (the last to join by then, of the
/// Nodes of now and the hosts the record names), and what it ran: None when
/// the record knows no host of that name then.
fn at<'a>(mut of_name: Vec<&'a WindowsNodeOperation>, hosts: &'a [Host], name: &str, t: Timestamp) -> Option<ComplianceRow> {
    of_name.sort_by_key(|o| started(o));
    let recorded = of_name.iter().map(|o| (o.spec.node_uid.as_str(), o.spec.node_created.as_deref().and_then(|c| c.parse().ok())));
    let current = hosts.iter().filter(|h| h.name == name).map(|h| (h.uid.as_str(), h.created));
    // A host whose joining the record lacks is taken as there from its first start.
    let first_start = |uid: &str| of_name.iter().find(|o| o.spec.node_uid == uid).and_then(|o| started(o));
    let joined = |(uid, created): (&'a str, Option<Timestamp>)| (uid, created.or_else(|| first_start(uid)));
    let (uid, _) = recorded.chain(current).map(joined).filter(|(_, c)| c.is_some_and(|c| c <= t)).max_by_key(|(_, c)| *c)?;
    let of_host: Vec<&&WindowsNodeOperation> = of_name.iter().filter(|o| o.spec.node_uid == uid).collect();
    let pool = of_host.first().map(|o| o.spec.pool.clone()).unwrap_or_default();
    let build = match of_host.iter().rev().find(|o| started(o).is_some_and(|s| s <= t)) {
        Some(o) => {
            let st = o.status.clone().unwrap_or_default();
            if ended_by(o, t).is_some() { st.build_after.or(st.build_before) } else { st.build_before }
        }
        // Not started by then: what its first start began from, else what it runs now.
        None => match of_host.first() {
            Some(o) => o.status.as_ref().and_then(|s| s.build_before.clone()),
            None => hosts.iter().find(|h| h.uid == uid).map(|h| h.build.clone()),
        },
    };
    let mut row =
        ComplianceRow { node: name.to_string(), uid: uid.to_string(), pool, build: build.unwrap_or_default(), ..Default::default() };
    if let Some((o, kb)) = of_host.iter().filter(|o| ended_by(o, t).is_some()).filter_map(|o| Some((o, last_kb(o)?))).next_back() {
        let st = o.status.as_ref().expect("ended");
        row.last_kb = kb;
        row.last_kb_at = st.installed_at.clone().or_else(|| st.phase_since.clone()).unwrap_or_default();
    }
    Some(row)
}

/// The update an operation installed that a person names it by: the one
/// Windows Update lists CVEs for (the OS cumulative update), else the last.
fn last_kb(op: &WindowsNodeOperation) -> Option<String> {
    let installed = &op.status.as_ref()?.installed;
    installed.iter().rev().find(|u| !u.cve_ids.is_empty()).or(installed.last()).map(|u| u.kb.clone())
}

/// The lowest build reached, by `t`, by an Updated operation whose installs
/// list `cve`: None when no record lists it.
fn first_fixing_build(ops: &[WindowsNodeOperation], cve: &str, t: Timestamp) -> Option<WindowsBuild> {
    let lists = |o: &&WindowsNodeOperation| {
        o.status.as_ref().is_some_and(|s| s.installed.iter().any(|u| u.cve_ids.iter().any(|c| c.eq_ignore_ascii_case(cve))))
    };
    let updated =
        |o: &&WindowsNodeOperation| o.status.as_ref().and_then(|s| s.phase) == Some(NodeState::Updated) && ended_by(o, t).is_some();
    ops.iter().filter(updated).filter(lists).filter_map(|o| build_of(o.status.as_ref()?.build_after.as_deref()?)).min()
}

/// Per pool, each build an Updated operation brought a node to by `t`, and when first.
fn reached_by(ops: &[WindowsNodeOperation], t: Timestamp) -> HashMap<&str, BTreeMap<WindowsBuild, Timestamp>> {
    let mut reached: HashMap<&str, BTreeMap<WindowsBuild, Timestamp>> = HashMap::new();
    for o in ops {
        let Some(st) = o.status.as_ref().filter(|s| s.phase == Some(NodeState::Updated)) else { continue };
        let (Some(b), Some(at)) = (st.build_after.as_deref().and_then(build_of), ended_by(o, t)) else { continue };
        let first = reached.entry(o.spec.pool.as_str()).or_default().entry(b).or_insert(at);
        *first = (*first).min(at);
    }
    reached
}

/// Whole days, at `t`, since an operation of `pool` first brought a node to
/// a build newer than `build` of the same release (0: none had, or the build is unknown).
fn days_behind(reached: &HashMap<&str, BTreeMap<WindowsBuild, Timestamp>>, pool: &str, build: &str, t: Timestamp) -> i64 {
    let (Some(mine), Some(builds)) = (build_of(build), reached.get(pool)) else { return 0 };
    let newer = builds.range((std::ops::Bound::Excluded(mine), std::ops::Bound::Unbounded)).filter(|(b, _)| b.build == mine.build);
    newer.map(|(_, at)| *at).min().map_or(0, |since| (t.duration_since(since).as_secs() / 86_400).max(0))
}

pub fn table(rows: &[ComplianceRow], cve: Option<&str>) -> String {
    let dash = |s: &str| if s.is_empty() { "-".to_string() } else { s.to_string() };
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut c =
                vec![dash(&r.node), dash(&r.pool), dash(&r.build), dash(&r.last_kb), dash(&r.last_kb_at), r.days_behind.to_string()];
            if cve.is_some() {
                c.push(r.cve_fixed.map_or("unknown".to_string(), |f| if f { "yes" } else { "no" }.to_string()));
            }
            c
        })
        .collect();
    let fixed = format!("{} FIXED", cve.unwrap_or_default());
    let mut headers = vec!["NODE", "POOL", "BUILD", "LAST KB", "INSTALLED", "DAYS BEHIND"];
    if cve.is_some() {
        headers.push(&fixed);
    }
    super::table::columns(&headers, &cells)
}

/// A Node of now as [`rows`] reads it.
pub fn host(node: &k8s_openapi::api::core::v1::Node) -> Option<Host> {
    let info = node.status.as_ref()?.node_info.as_ref()?;
    // Only what its kubelet says is Windows: the record is of Windows hosts.
    (info.operating_system == "windows").then(|| Host {
        name: node.metadata.name.clone().unwrap_or_default(),
        uid: node.metadata.uid.clone().unwrap_or_default(),
        created: node.metadata.creation_timestamp.as_ref().map(|t| t.0),
        build: info.kernel_version.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::operation::{WindowsNodeOperationSpec, WindowsNodeOperationStatus};
    use crate::api::report::InstalledUpdate;
    use rand::{Rng, SeedableRng};

    /// A host as the simulated fleet knows it: when it joined, the build its
    /// image had, and each build change with its time: the truth compliance
    /// is judged against, kept apart from the operations written of it.
    struct SimHost {
        name: String,
        uid: String,
        joined: Timestamp,
        builds: Vec<(Timestamp, String)>,
    }

    impl SimHost {
        fn build_at(&self, t: Timestamp) -> &str {
            &self.builds.iter().rev().find(|(at, _)| *at <= t).expect("joined").1
        }
    }

    fn day(d: i64) -> Timestamp {
        "2026-09-01T00:00:00Z".parse::<Timestamp>().unwrap() + jiff::SignedDuration::from_hours(24 * d)
    }

    fn op(h: &SimHost, start: Timestamp, end: Timestamp, before: &str, after: &str, phase: NodeState, kb: &str) -> WindowsNodeOperation {
        let mut o = WindowsNodeOperation::new(
            &format!("{}.{}", h.name, start.as_second()),
            WindowsNodeOperationSpec {
                node_name: h.name.clone(),
                node_uid: h.uid.clone(),
                node_created: Some(h.joined.to_string()),
                pool: "p".into(),
                started_at: start.to_string(),
                ..Default::default()
            },
        );
        let installed = (phase == NodeState::Updated)
            .then(|| InstalledUpdate { kb: kb.into(), title: None, cve_ids: vec![format!("CVE-2026-{kb}")] })
            .into_iter()
            .collect();
        o.status = Some(WindowsNodeOperationStatus {
            phase: Some(phase),
            phase_since: Some(end.to_string()),
            build_before: Some(before.into()),
            build_after: Some(after.into()),
            installed,
            ..Default::default()
        });
        o
    }

    /// Three months of monthly patches on 12 nodes, a few failing and a few
    /// replaced by new hosts (a newer or older image) mid-month.
    fn fleet(rng: &mut rand::rngs::SmallRng) -> (Vec<SimHost>, Vec<WindowsNodeOperation>) {
        let (mut hosts, mut ops): (Vec<SimHost>, Vec<WindowsNodeOperation>) = (Vec::new(), Vec::new());
        for i in 0..12 {
            let mut h = SimHost {
                name: format!("win-{i}"),
                uid: format!("uid-{i}-a"),
                joined: day(-30),
                builds: vec![(day(-30), "10.0.20348.2700".into())],
            };
            for month in 0..3i64 {
                if rng.random_bool(0.2) {
                    // Replaced mid-month by a host of another image, before this month's start.
                    let old = std::mem::replace(
                        &mut h,
                        SimHost {
                            name: format!("win-{i}"),
                            uid: format!("uid-{i}-{month}"),
                            joined: day(30 * month + 3),
                            builds: Vec::new(),
                        },
                    );
                    let image = format!("10.0.20348.{}", 2700 + 10 * rng.random_range(0..=month as u32 + 1));
                    h.builds.push((h.joined, image));
                    hosts.push(old);
                }
                let start = day(30 * month + 10) + jiff::SignedDuration::from_mins(37 * i);
                let end = start + jiff::SignedDuration::from_mins(50);
                let before = h.build_at(start).to_string();
                let target = format!("10.0.20348.{}", 2710 + 10 * month);
                if before >= target {
                    continue;
                }
                let failed = rng.random_bool(0.15);
                let after = if failed { before.clone() } else { target.clone() };
                ops.push(op(
                    &h,
                    start,
                    end,
                    &before,
                    &after,
                    if failed { NodeState::Failed } else { NodeState::Updated },
                    &format!("KB50{month}"),
                ));
                if !failed {
                    h.builds.push((end, target));
                }
            }
            hosts.push(h);
        }
        (hosts, ops)
    }

    #[test]
    fn as_of_any_time_the_record_says_what_each_host_ran() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let (sim, ops) = fleet(&mut rng);
        // The Nodes of now: each name's last host.
        let now_hosts: Vec<Host> = sim
            .iter()
            .filter(|h| sim.iter().filter(|o| o.name == h.name).all(|o| o.joined <= h.joined))
            .map(|h| Host { name: h.name.clone(), uid: h.uid.clone(), created: Some(h.joined), build: h.build_at(day(120)).into() })
            .collect();
        assert!(sim.len() > now_hosts.len(), "the seed replaces hosts");
        // A host replaced before winpool ever started it left no trace: no record says what it ran.
        let known = |h: &SimHost| ops.iter().any(|o| o.spec.node_uid == h.uid) || now_hosts.iter().any(|n| n.uid == h.uid);
        let mut asked = 0;
        while asked < 100 {
            let name = format!("win-{}", rng.random_range(0..12));
            let t = day(0) + jiff::SignedDuration::from_mins(rng.random_range(0..120 * 24 * 60));
            let truth = sim.iter().filter(|h| h.name == name && h.joined <= t).max_by_key(|h| h.joined).expect("a host then");
            if !known(truth) {
                continue;
            }
            asked += 1;
            let rows = rows(&ops, &now_hosts, t, None);
            let row = rows.iter().find(|r| r.node == name).expect("every node has a row");
            assert_eq!((row.uid.as_str(), row.build.as_str()), (truth.uid.as_str(), truth.build_at(t)), "{name} at {t}");
        }
    }

    #[test]
    fn a_cve_is_fixed_on_a_node_at_or_past_the_first_build_whose_update_listed_it_and_days_behind_count_from_the_first_newer_build() {
        let h = |n: &str| SimHost { name: n.into(), uid: format!("{n}-uid"), joined: day(0), builds: vec![] };
        let ops = vec![
            op(&h("a"), day(10), day(10), "10.0.20348.2700", "10.0.20348.2710", NodeState::Updated, "KB1"),
            op(&h("b"), day(11), day(11), "10.0.20348.2700", "10.0.20348.2700", NodeState::Failed, "KB1"),
            op(&h("a"), day(40), day(40), "10.0.20348.2710", "10.0.20348.2720", NodeState::Updated, "KB2"),
            op(&h("c"), day(44), day(46), "10.0.20348.2700", "10.0.20348.2720", NodeState::Updated, "KB2"),
        ];
        let rows = rows(&ops, &[], day(45), Some("CVE-2026-KB1"));
        let (a, b) = (&rows[0], &rows[1]);
        assert_eq!((a.cve_fixed, a.last_kb.as_str(), a.days_behind), (Some(true), "KB2", 0), "a later cumulative update carries the fix");
        assert_eq!((b.cve_fixed, b.build.as_str(), b.days_behind), (Some(false), "10.0.20348.2700", 35));
        let c = &rows[2];
        assert_eq!((c.build.as_str(), c.last_kb.as_str()), ("10.0.20348.2700", ""), "mid-install: the build it began from");
        let unknown = super::rows(&ops, &[], day(45), Some("CVE-1999-0001"));
        assert_eq!(unknown[0].cve_fixed, None, "no record lists it: not said either way");
        let before = super::rows(&ops, &[], day(5), Some("CVE-2026-KB1"));
        assert_eq!((before[0].build.as_str(), before[0].cve_fixed, before[0].last_kb.as_str()), ("10.0.20348.2700", None, ""));
    }
}
