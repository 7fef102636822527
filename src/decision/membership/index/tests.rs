use std::cell::Cell;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::*;
use crate::api::{OsVersion, names};
use crate::decision::membership::members_of;

const WIN22: [(&str, &str); 2] = [("kubernetes.io/os", "windows"), ("node.kubernetes.io/windows-build", "10.0.20348")];

/// A node whose kubelet reports the OS its label names.
fn node(name: &str, pairs: &[(&str, &str)]) -> NodeRecord {
    use k8s_openapi::api::core::v1::{NodeStatus, NodeSystemInfo};
    let labels: std::collections::BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let os = labels.get("kubernetes.io/os").cloned().unwrap_or_default();
    NodeRecord::from(&Node {
        metadata: ObjectMeta { name: Some(name.into()), labels: Some(labels), ..Default::default() },
        status: Some(NodeStatus { node_info: Some(NodeSystemInfo { operating_system: os, ..Default::default() }), ..Default::default() }),
        ..Default::default()
    })
}

fn win22(name: &str, extra: &[(&str, &str)]) -> NodeRecord {
    node(name, &[WIN22.as_slice(), extra].concat())
}

fn selector(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector { match_labels: Some(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()), match_expressions: None }
}

/// Pools as the shell hands them over: name, generation, selector.
fn sync(index: &mut MembershipIndex, pools: &[(&str, Option<i64>, LabelSelector)], cache: &[NodeRecord]) {
    let parse: Vec<Box<dyn Fn() -> PoolSelector>> = pools
        .iter()
        .map(|(name, _, sel)| {
            let (name, sel) = (name.to_string(), sel.clone());
            Box::new(move || PoolSelector::new(&name, OsVersion::Ltsc2022, &sel)) as Box<dyn Fn() -> PoolSelector>
        })
        .collect();
    let entries =
        pools.iter().zip(&parse).map(|((name, generation, _), f)| PoolEntry { name, generation: *generation, selector: f.as_ref() });
    index.sync_pools(entries, || cache.iter().cloned().map(Arc::new).collect::<Vec<_>>());
}

fn members(index: &MembershipIndex, pool: &str, cache: &[NodeRecord]) -> Membership {
    index.members_of(pool, |n| cache.iter().find(|r| r.name == n))
}

fn selecting(index: &MembershipIndex, node: &str) -> Vec<String> {
    index.pools_selecting(node).map(str::to_string).collect()
}

fn apply(index: &mut MembershipIndex, n: &NodeRecord) {
    index.node_event(&watcher::Event::Apply(n.clone()), Vec::new);
}

/// The membership table of `membership.rs`, reached through the index's
/// events: the same members and conflicts, whichever came first, the nodes
/// or the pools.
#[test]
fn the_index_judges_the_membership_table_as_the_scan_does_in_either_order() {
    let cache = vec![
        win22("plain", &[("pool", "a")]),
        node("no-build-label", &[WIN22[0], ("pool", "a")]),
        node("linux", &[("kubernetes.io/os", "linux"), ("pool", "a")]),
        win22("both", &[("pool", "a"), ("team", "x")]),
        node("win19", &[WIN22[0], ("node.kubernetes.io/windows-build", "10.0.17763"), ("pool", "a")]),
        win22("other", &[("pool", "z")]),
        win22("moving", &[("pool", "a"), (names::LABEL_POOL, "b")]),
        win22("stale-label", &[("pool", "a"), (names::LABEL_POOL, "deleted-long-ago")]),
    ];
    let pools = [("a", Some(1), selector(&[("pool", "a")])), ("b", Some(1), selector(&[("team", "x")]))];
    let mut nodes_first = MembershipIndex::default();
    for n in &cache {
        apply(&mut nodes_first, n);
    }
    sync(&mut nodes_first, &pools, &cache);
    let mut pools_first = MembershipIndex::default();
    sync(&mut pools_first, &pools, &[]);
    for n in &cache {
        apply(&mut pools_first, n);
    }
    for index in [&nodes_first, &pools_first] {
        let a = members(index, "a", &cache);
        assert_eq!(a.members, ["no-build-label", "plain", "stale-label"]);
        assert_eq!(a.conflicts.multiple_pools, [("both".to_string(), vec!["b".to_string()])]);
        assert_eq!(a.conflicts.held_elsewhere, [("moving".to_string(), "b".to_string())]);
        assert_eq!(a.conflicts.wrong_os, [("win19".to_string(), "10.0.17763".to_string())]);
        assert_eq!(selecting(index, "both"), ["a", "b"]);
        assert!(selecting(index, "linux").is_empty(), "a Linux node is in no pool");
        assert!(selecting(index, "other").is_empty());
        let b = members(index, "b", &cache);
        assert!(b.members.is_empty());
        assert_eq!(b.conflicts.multiple_pools, [("both".to_string(), vec!["a".to_string()])]);
    }
    let scan: Vec<PoolSelector> = pools.iter().map(|(n, _, s)| PoolSelector::new(n, OsVersion::Ltsc2022, s)).collect();
    assert_eq!(members(&nodes_first, "a", &cache), members_of("a", &scan, cache.iter().map(|r| (r.name.as_str(), r))));
}

#[test]
fn a_relabelled_node_moves_between_pools_and_a_deleted_one_leaves() {
    let pools = [("a", Some(1), selector(&[("pool", "a")])), ("b", Some(1), selector(&[("pool", "b")]))];
    let mut index = MembershipIndex::default();
    sync(&mut index, &pools, &[]);
    let first = win22("n", &[("pool", "a")]);
    apply(&mut index, &first);
    assert_eq!(selecting(&index, "n"), ["a"]);
    let moved = win22("n", &[("pool", "b")]);
    apply(&mut index, &moved);
    assert_eq!(selecting(&index, "n"), ["b"]);
    assert!(members(&index, "a", std::slice::from_ref(&moved)).members.is_empty(), "a no longer selects it");
    assert_eq!(members(&index, "b", std::slice::from_ref(&moved)).members, ["n"]);
    index.node_event(&watcher::Event::Delete(moved.clone()), Vec::new);
    assert!(selecting(&index, "n").is_empty());
    assert!(members(&index, "b", std::slice::from_ref(&moved)).members.is_empty(), "a deleted node is no member, even with a stale copy");
}

/// A relist replaces what the index holds at its end, as the node cache
/// does: until then the old selection stands; a node deleted while the
/// watch was down (no Delete event) is gone once the relist ends.
#[test]
fn a_relist_replaces_the_selection_at_its_end() {
    let pools = [("a", Some(1), selector(&[("pool", "a")]))];
    let mut index = MembershipIndex::default();
    sync(&mut index, &pools, &[]);
    let (kept, gone) = (win22("kept", &[("pool", "a")]), win22("gone", &[("pool", "a")]));
    apply(&mut index, &kept);
    apply(&mut index, &gone);
    index.node_event(&watcher::Event::Init, Vec::new);
    index.node_event(&watcher::Event::InitApply(kept.clone()), Vec::new);
    assert_eq!(selecting(&index, "gone"), ["a"], "mid-relist, the last complete view");
    index.node_event(&watcher::Event::InitDone, || vec![Arc::new(kept.clone())]);
    assert_eq!(selecting(&index, "kept"), ["a"]);
    assert!(selecting(&index, "gone").is_empty());
    assert_eq!(members(&index, "a", &[kept, gone]).members, ["kept"]);
}

/// A pool first seen while the node cache is being listed (the operator's
/// start: the pools' cache may fill before the nodes') is matched against
/// the cache as it still is, empty; the list's end matches it against every
/// node listed. Not so, a node no event touched later stayed in no pool.
#[test]
fn a_pool_known_mid_relist_selects_the_nodes_the_relist_brings() {
    let n = win22("quiet", &[("pool", "a")]);
    let mut index = MembershipIndex::default();
    index.node_event(&watcher::Event::Init, Vec::new);
    index.node_event(&watcher::Event::InitApply(n.clone()), Vec::new);
    sync(&mut index, &[("a", Some(1), selector(&[("pool", "a")]))], &[]);
    index.node_event(&watcher::Event::InitDone, || vec![Arc::new(n.clone())]);
    assert_eq!(selecting(&index, "quiet"), ["a"]);
    assert_eq!(members(&index, "a", &[n]).members, ["quiet"]);
}

/// A pool's selector is parsed again only when its generation moved; a new
/// selector re-matches every node; a pool no longer reconciled selects nothing.
#[test]
fn a_pool_is_matched_again_only_when_its_spec_changed() {
    let cache = vec![win22("x", &[("size", "l")]), win22("y", &[("size", "s")])];
    let mut index = MembershipIndex::default();
    for n in &cache {
        apply(&mut index, n);
    }
    let parsed = Cell::new(0);
    let sync_counting = |index: &mut MembershipIndex, generation: i64, size: &str| {
        let sel = selector(&[("size", size)]);
        let parse = || {
            parsed.set(parsed.get() + 1);
            PoolSelector::new("p", OsVersion::Ltsc2022, &sel)
        };
        let entry = PoolEntry { name: "p", generation: Some(generation), selector: &parse };
        index.sync_pools([entry], || cache.iter().cloned().map(Arc::new).collect::<Vec<_>>());
    };
    sync_counting(&mut index, 1, "l");
    assert_eq!(members(&index, "p", &cache).members, ["x"]);
    sync_counting(&mut index, 1, "l");
    sync_counting(&mut index, 1, "l");
    assert_eq!(parsed.get(), 1, "an unchanged generation is not parsed again");
    sync_counting(&mut index, 2, "s");
    assert_eq!(parsed.get(), 2);
    assert_eq!(members(&index, "p", &cache).members, ["y"]);
    // Another spec change keeps the selector: parsed once at its generation, then no more.
    sync_counting(&mut index, 3, "s");
    sync_counting(&mut index, 3, "s");
    assert_eq!(parsed.get(), 3, "a generation whose selector did not change is remembered");
    assert_eq!(members(&index, "p", &cache).members, ["y"]);
    assert!(selecting(&index, "x").is_empty(), "x left with the old selector");
    index.sync_pools(std::iter::empty(), Vec::new);
    assert!(selecting(&index, "y").is_empty(), "a pool no longer reconciled selects nothing");
    assert_eq!(members(&index, "p", &cache), Membership::default());
}
