//! Which Windows nodes belong to which pool. Pure.
//!
//! A node belongs to a pool when the pool's nodeSelector matches it and it is
//! a Windows node. A node two pools select is touched by neither (both report
//! it); a node another pool still holds (its `winpool.dev/pool` label names
//! that pool, which gives it back only once its agent reported a result) is
//! left alone until given back; a node whose windows-build label is another
//! release than the pool's is reported and left alone. Rolling such a node
//! would fight another pool or install the wrong OS's updates.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Expression, Selector};

use crate::api::{OsVersion, names};
use crate::decision::provider::ManagedNodes;
use crate::decision::status::Conflicts;
use crate::decision::versions::WindowsBuild;

mod index;
pub use index::{MembershipIndex, PoolEntry};

/// A node's labels, however they are held: the cache keeps compact records
/// ([`crate::api::node_record::NodeRecord`]), a watch event carries a Node's map.
pub trait LabelLookup {
    fn label(&self, key: &str) -> Option<&str>;

    /// Its kubelet reports Windows (`status.nodeInfo.operatingSystem`); a
    /// bare label map does not say, so it is no member of any pool.
    fn kubelet_windows(&self) -> bool {
        false
    }
}

impl LabelLookup for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl LabelLookup for crate::api::node_record::NodeRecord {
    fn label(&self, key: &str) -> Option<&str> {
        crate::api::node_record::NodeRecord::label(self, key)
    }

    fn kubelet_windows(&self) -> bool {
        self.windows
    }
}

#[derive(Debug, PartialEq)]
pub struct PoolSelector {
    pub name: String,
    pub os: OsVersion,
    /// kube's parse of the nodeSelector, every expression of which must hold;
    /// `None` when it cannot be parsed (reported on the pool; it selects nothing).
    pub selector: Option<Vec<Expression>>,
}

impl PoolSelector {
    pub fn new(name: &str, os: OsVersion, selector: &LabelSelector) -> Self {
        let selector = Selector::try_from(selector.clone()).ok().map(|s| s.into_iter().collect());
        PoolSelector { name: name.to_string(), os, selector }
    }

    pub fn selects(&self, labels: &(impl LabelLookup + ?Sized)) -> bool {
        labels.label(names::LABEL_OS) == Some("windows") && self.selector.as_ref().is_some_and(|s| s.iter().all(|e| holds(e, labels)))
    }
}

/// One expression of a label selector, with the meaning kube's `SelectorExt` gives it.
fn holds(e: &Expression, labels: &(impl LabelLookup + ?Sized)) -> bool {
    match e {
        Expression::In(key, values) => labels.label(key).is_some_and(|v| values.contains(v)),
        Expression::NotIn(key, values) => labels.label(key).is_none_or(|v| !values.contains(v)),
        Expression::Exists(key) => labels.label(key).is_some(),
        Expression::DoesNotExist(key) => labels.label(key).is_none(),
        Expression::Equal(key, value) => labels.label(key) == Some(value.as_str()),
        Expression::NotEqual(key, value) => labels.label(key) != Some(value.as_str()),
    }
}

#[derive(Debug, Default, PartialEq)]
pub struct Membership {
    pub members: Vec<String>,
    pub conflicts: Conflicts,
    /// Members whose provider may reimage them.
    pub managed: ManagedNodes,
}

/// Members of `pool` among `nodes` (name, labels), given every pool's selector.
pub fn members_of<'a, L: LabelLookup + ?Sized + 'a>(
    pool: &str,
    pools: &[PoolSelector],
    nodes: impl IntoIterator<Item = (&'a str, &'a L)>,
) -> Membership {
    let Some(me) = pools.iter().find(|p| p.name == pool) else { return Membership::default() };
    let mut out = Membership::default();
    for (name, labels) in nodes {
        if !me.selects(labels) {
            continue;
        }
        let others: Vec<String> = pools.iter().filter(|p| p.name != pool && p.selects(labels)).map(|p| p.name.clone()).collect();
        judge(me, name, labels, others, |p| pools.iter().any(|o| o.name == p), &mut out);
    }
    out.members.sort();
    out
}

/// A node `me` selects, judged into `out`: a member, or the conflict that
/// keeps it out. `others` are the other pools that select it; `is_pool`
/// says whether a name is a pool this replica reconciles.
fn judge(
    me: &PoolSelector,
    name: &str,
    labels: &(impl LabelLookup + ?Sized),
    others: Vec<String>,
    is_pool: impl Fn(&str) -> bool,
    out: &mut Membership,
) {
    // Labelled Windows, but its kubelet says otherwise: a Linux node (a
    // control plane too) that someone labelled; draining it would take the
    // operator's rights to a node that is no pool's.
    if !labels.kubelet_windows() {
        out.conflicts.not_windows.push(name.to_string());
        return;
    }
    if !others.is_empty() {
        out.conflicts.multiple_pools.push((name.to_string(), others));
        return;
    }
    // Its state, cordon and agent are that pool's until it gives the node
    // back: judged here, the node's in-flight state would be taken for
    // this pool's own, and moved on without a drain of its own.
    if let Some(holder) = labels.label(names::LABEL_POOL).filter(|p| *p != me.name && is_pool(p)) {
        out.conflicts.held_elsewhere.push((name.to_string(), holder.to_string()));
        return;
    }
    if let Some(build) = labels.label(names::LABEL_WINDOWS_BUILD) {
        let release = build.parse::<WindowsBuild>().ok().and_then(|b| OsVersion::from_build(b.build));
        if release != Some(me.os) {
            out.conflicts.wrong_os.push((name.to_string(), build.to_string()));
            return;
        }
    }
    out.managed.count(labels);
    out.members.push(name.to_string());
}

/// The pools whose selector matches a node: which reconciles a node event triggers.
pub fn pools_selecting<'a, L: LabelLookup + ?Sized>(pools: &'a [PoolSelector], labels: &'a L) -> impl Iterator<Item = &'a str> {
    pools.iter().filter(move |p| p.selects(labels)).map(|p| p.name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::node_record::NodeRecord;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// A node as the cache holds it, its kubelet reporting `os`.
    fn record(name: &str, labels: &BTreeMap<String, String>, os: &str) -> NodeRecord {
        use k8s_openapi::api::core::v1::{Node, NodeStatus, NodeSystemInfo};
        let mut n = Node::default();
        (n.metadata.name, n.metadata.labels) = (Some(name.into()), Some(labels.clone()));
        let info = NodeSystemInfo { operating_system: os.into(), ..Default::default() };
        n.status = Some(NodeStatus { node_info: Some(info), ..Default::default() });
        NodeRecord::from(&n)
    }

    fn sel(pairs: &[(&str, &str)]) -> LabelSelector {
        LabelSelector { match_labels: Some(labels(pairs)), match_expressions: None }
    }

    #[test]
    fn membership_table() {
        let pools = vec![
            PoolSelector::new("a", OsVersion::Ltsc2022, &sel(&[("pool", "a")])),
            PoolSelector::new("b", OsVersion::Ltsc2022, &sel(&[("team", "x")])),
        ];
        let win22 = [("kubernetes.io/os", "windows"), ("node.kubernetes.io/windows-build", "10.0.20348")];
        let nodes: Vec<(&str, BTreeMap<String, String>)> = vec![
            ("plain", labels(&[win22[0], win22[1], ("pool", "a")])),
            ("no-build-label", labels(&[win22[0], ("pool", "a")])),
            ("linux", labels(&[("kubernetes.io/os", "linux"), ("pool", "a")])),
            ("both", labels(&[win22[0], win22[1], ("pool", "a"), ("team", "x")])),
            ("win19", labels(&[win22[0], ("node.kubernetes.io/windows-build", "10.0.17763"), ("pool", "a")])),
            ("garbage-build", labels(&[win22[0], ("node.kubernetes.io/windows-build", "banana"), ("pool", "a")])),
            ("other", labels(&[win22[0], win22[1], ("pool", "z")])),
            ("moving", labels(&[win22[0], win22[1], ("pool", "a"), (names::LABEL_POOL, "b")])),
            ("stale-label", labels(&[win22[0], win22[1], ("pool", "a"), (names::LABEL_POOL, "deleted-long-ago")])),
            ("ours", labels(&[win22[0], win22[1], ("pool", "a"), (names::LABEL_POOL, "a")])),
        ];
        // As the cache holds them: each kubelet reports the OS its label names,
        // but for one Linux node (a control plane) that someone labelled Windows.
        let records: Vec<NodeRecord> = nodes.iter().map(|(n, l)| record(n, l, l.get("kubernetes.io/os").unwrap())).collect();
        let mut records = records;
        records.push(record("linux-labelled-windows", &labels(&[win22[0], ("pool", "a")]), "linux"));
        let m = members_of("a", &pools, records.iter().map(|r| (r.name.as_str(), r)));
        assert_eq!(m.members, vec!["no-build-label", "ours", "plain", "stale-label"]);
        assert_eq!(m.conflicts.held_elsewhere, vec![("moving".to_string(), "b".to_string())], "b still holds it");
        assert_eq!(m.conflicts.multiple_pools, vec![("both".to_string(), vec!["b".to_string()])]);
        assert_eq!(
            m.conflicts.wrong_os,
            vec![("win19".to_string(), "10.0.17763".to_string()), ("garbage-build".to_string(), "banana".to_string())]
        );
        assert_eq!(m.conflicts.not_windows, vec!["linux-labelled-windows"], "its label is no proof");
        assert!(members_of("a", &pools, nodes.iter().map(|(n, l)| (*n, l))).members.is_empty(), "labels alone prove no Windows");
        let b = members_of("b", &pools, records.iter().map(|r| (r.name.as_str(), r)));
        assert!(b.members.is_empty());
        assert_eq!(b.conflicts.multiple_pools.len(), 1);
        let hit: Vec<&str> = pools_selecting(&pools, &nodes[3].1).collect();
        assert_eq!(hit, vec!["a", "b"]);
    }

    #[test]
    fn match_expressions_work_and_windows_is_always_implied() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
        let s = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "size".into(),
                operator: "In".into(),
                values: Some(vec!["l".into(), "xl".into()]),
            }]),
        };
        let p = PoolSelector::new("p", OsVersion::Ltsc2025, &s);
        assert!(p.selects(&labels(&[("kubernetes.io/os", "windows"), ("size", "xl")])));
        assert!(!p.selects(&labels(&[("kubernetes.io/os", "windows"), ("size", "s")])));
        assert!(!p.selects(&labels(&[("size", "xl")])));
        let bad = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement { key: "k".into(), operator: "Near".into(), values: None }]),
        };
        assert!(!PoolSelector::new("q", OsVersion::Ltsc2025, &bad).selects(&labels(&[("kubernetes.io/os", "windows")])));
    }

    /// Every operator means what kube's own matcher says it means, on labels
    /// that have the key with a listed value, with another value, and not at all.
    #[test]
    fn each_selector_operator_matches_as_kube_matches() {
        use kube::core::SelectorExt;
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<std::collections::BTreeSet<_>>();
        let expressions = [
            Expression::In("size".into(), set(&["l", "xl"])),
            Expression::NotIn("size".into(), set(&["l", "xl"])),
            Expression::Exists("size".into()),
            Expression::DoesNotExist("size".into()),
            Expression::Equal("size".into(), "xl".into()),
            Expression::NotEqual("size".into(), "xl".into()),
        ];
        let nodes = [labels(&[("size", "xl")]), labels(&[("size", "s")]), labels(&[("team", "x")])];
        for e in &expressions {
            for l in &nodes {
                assert_eq!(holds(e, l), e.matches(l), "{e} on {l:?}");
            }
        }
    }
}
