//! Which Windows nodes belong to which pool. Pure.
//!
//! A node belongs to a pool when the pool's nodeSelector matches it and it is
//! a Windows node. A node two pools select is touched by neither (both report
//! it); a node whose windows-build label is another release than the pool's is
//! reported and left alone. Rolling such a node would fight another pool or
//! install the wrong OS's updates.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Selector, SelectorExt};

use crate::api::{OsVersion, names};
use crate::status::Conflicts;
use crate::versions::WindowsBuild;

pub struct PoolSelector {
    pub name: String,
    pub os: OsVersion,
    /// `None` when the selector cannot be parsed (reported on the pool; it selects nothing).
    pub selector: Option<Selector>,
}

impl PoolSelector {
    pub fn new(name: &str, os: OsVersion, selector: &LabelSelector) -> Self {
        PoolSelector { name: name.to_string(), os, selector: Selector::try_from(selector.clone()).ok() }
    }

    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        labels.get(names::LABEL_OS).map(String::as_str) == Some("windows") && self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }
}

#[derive(Debug, Default, PartialEq)]
pub struct Membership {
    pub members: Vec<String>,
    pub conflicts: Conflicts,
}

/// Members of `pool` among `nodes` (name, labels), given every pool's selector.
pub fn members_of<'a>(
    pool: &str,
    pools: &[PoolSelector],
    nodes: impl IntoIterator<Item = (&'a str, &'a BTreeMap<String, String>)>,
) -> Membership {
    let Some(me) = pools.iter().find(|p| p.name == pool) else { return Membership::default() };
    let mut out = Membership::default();
    for (name, labels) in nodes {
        if !me.selects(labels) {
            continue;
        }
        let others: Vec<String> = pools.iter().filter(|p| p.name != pool && p.selects(labels)).map(|p| p.name.clone()).collect();
        if !others.is_empty() {
            out.conflicts.multiple_pools.push((name.to_string(), others));
            continue;
        }
        if let Some(build) = labels.get(names::LABEL_WINDOWS_BUILD) {
            let release = build.parse::<WindowsBuild>().ok().and_then(|b| OsVersion::from_build(b.build));
            if release != Some(me.os) {
                out.conflicts.wrong_os.push((name.to_string(), build.clone()));
                continue;
            }
        }
        out.members.push(name.to_string());
    }
    out.members.sort();
    out
}

/// The pools whose selector matches a node: which reconciles a node event triggers.
pub fn pools_selecting<'a>(pools: &'a [PoolSelector], labels: &BTreeMap<String, String>) -> impl Iterator<Item = &'a str> {
    pools.iter().filter(move |p| p.selects(labels)).map(|p| p.name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
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
        ];
        let m = members_of("a", &pools, nodes.iter().map(|(n, l)| (*n, l)));
        assert_eq!(m.members, vec!["no-build-label", "plain"]);
        assert_eq!(m.conflicts.multiple_pools, vec![("both".to_string(), vec!["b".to_string()])]);
        assert_eq!(
            m.conflicts.wrong_os,
            vec![("win19".to_string(), "10.0.17763".to_string()), ("garbage-build".to_string(), "banana".to_string())]
        );
        let b = members_of("b", &pools, nodes.iter().map(|(n, l)| (*n, l)));
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
}
