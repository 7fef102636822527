//! Which pools select which Windows nodes, kept as the Node watch delivers
//! them instead of found again by a scan. Pure: the shell feeds it the Node
//! watch's events (the same ones, in the same order, as the node cache) and
//! the pools it reconciles; the mapper, `observe` and the plugin's scan agree
//! on what a member is because they judge it with the same function.
//!
//! Without it, every Node event parsed every pool's selector to find the
//! pools to wake, and every round matched every Windows node against every
//! pool's selector (nodes × pools). With it, a Node event matches the node
//! against each pool once, a pool's change matches it against every node
//! once, and a round reads its pool's selected nodes.
//!
//! Selection is by the labels the watch delivered. The labels it reads are
//! the ones people and node provisioning set; what winpool writes (its pool
//! label, its states) is judged by the round from the freshest copy, its
//! own write included.

use std::collections::{BTreeMap, BTreeSet};

use kube::runtime::watcher;

use super::{LabelLookup, Membership, PoolSelector, judge};
use crate::api::node_record::NodeRecord;

/// A pool as the index knows it: its selector and what it selects.
struct Indexed {
    /// The pool's metadata.generation when its selector was read: an
    /// unchanged generation is an unchanged spec, so nothing is parsed again.
    generation: Option<i64>,
    selector: PoolSelector,
    nodes: BTreeSet<String>,
}

/// A pool the shell reconciles, as [`MembershipIndex::sync_pools`] reads it.
pub struct PoolEntry<'a> {
    pub name: &'a str,
    pub generation: Option<i64>,
    /// Parsed only when the generation moved (or is unknown).
    pub selector: &'a dyn Fn() -> PoolSelector,
}

#[derive(Default)]
pub struct MembershipIndex {
    pools: BTreeMap<String, Indexed>,
    /// Node -> the pools whose selector matches it; a node no pool selects
    /// is not kept (a pool added later is matched against the node cache).
    nodes: BTreeMap<String, BTreeSet<String>>,
}

impl MembershipIndex {
    /// One Node watch event, as the node cache applies it, after the cache.
    /// A relist replaces what the index holds at its end, as the cache
    /// does: `listed` is then the cache's whole new contents, matched
    /// against the pools known by then (one may have come mid-relist, when
    /// the cache still held the old list). Until then the old view stands.
    pub fn node_event<N>(&mut self, ev: &watcher::Event<NodeRecord>, listed: impl FnOnce() -> N)
    where
        N: IntoIterator<Item = std::sync::Arc<NodeRecord>>,
    {
        match ev {
            watcher::Event::Apply(n) => {
                let selected = self.pools_matching(n);
                self.set_node(&n.name, selected);
            }
            watcher::Event::Delete(n) => self.set_node(&n.name, BTreeSet::new()),
            watcher::Event::Init | watcher::Event::InitApply(_) => {}
            watcher::Event::InitDone => {
                self.nodes.clear();
                for pool in self.pools.values_mut() {
                    pool.nodes.clear();
                }
                for n in listed() {
                    let selected = self.pools_matching(n.as_ref());
                    self.set_node(&n.name, selected);
                }
            }
        }
    }

    /// Bring the pools up to those given (the ones this replica reconciles,
    /// none being deleted): a new pool, or one whose spec changed, is matched
    /// against every node `all_nodes` returns, called only then.
    pub fn sync_pools<'a, N>(&mut self, pools: impl IntoIterator<Item = PoolEntry<'a>>, all_nodes: impl FnOnce() -> N)
    where
        N: IntoIterator<Item = std::sync::Arc<NodeRecord>>,
    {
        let mut wanted = BTreeSet::new();
        let mut changed = Vec::new();
        for p in pools {
            wanted.insert(p.name.to_string());
            let known = self.pools.get(p.name);
            if known.is_some_and(|k| k.generation.is_some() && k.generation == p.generation) {
                continue;
            }
            let selector = (p.selector)();
            // Another spec change (a patch level): the same selection, now
            // known at this generation, so it is not parsed again.
            if let Some(k) = self.pools.get_mut(p.name).filter(|k| k.selector == selector) {
                k.generation = p.generation;
                continue;
            }
            changed.push((p.generation, selector));
        }
        let gone: Vec<String> = self.pools.keys().filter(|p| !wanted.contains(*p)).cloned().collect();
        for p in gone.iter().chain(changed.iter().map(|(_, s)| &s.name)) {
            self.forget_pool(p);
        }
        if changed.is_empty() {
            return;
        }
        let added: Vec<&str> = changed.iter().map(|(_, s)| s.name.as_str()).collect();
        let mut selected: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for n in all_nodes() {
            let these: BTreeSet<String> = changed.iter().filter(|(_, s)| s.selects(n.as_ref())).map(|(_, s)| s.name.clone()).collect();
            for p in &these {
                selected.entry(p.clone()).or_default().insert(n.name.clone());
            }
            let mut pools = self.nodes.remove(&n.name).unwrap_or_default();
            pools.retain(|p| !added.contains(&p.as_str()));
            pools.extend(these);
            if !pools.is_empty() {
                self.nodes.insert(n.name.clone(), pools);
            }
        }
        for (generation, selector) in changed {
            let nodes = selected.remove(&selector.name).unwrap_or_default();
            self.pools.insert(selector.name.clone(), Indexed { generation, selector, nodes });
        }
    }

    /// The pools whose selector matches `node` (which a Node event wakes).
    pub fn pools_selecting(&self, node: &str) -> impl Iterator<Item = &str> {
        self.nodes.get(node).into_iter().flatten().map(String::as_str)
    }

    /// The members of `pool`, judged on the labels `lookup` gives (the
    /// round's freshest copy of each node; a node it does not know is skipped).
    pub fn members_of<'n>(&self, pool: &str, lookup: impl Fn(&str) -> Option<&'n NodeRecord>) -> Membership {
        let Some(me) = self.pools.get(pool) else { return Membership::default() };
        let mut out = Membership::default();
        for node in &me.nodes {
            let Some(labels) = lookup(node) else { continue };
            let others: Vec<String> = self.pools_selecting(node).filter(|p| *p != pool).map(str::to_string).collect();
            judge(&me.selector, node, labels, others, |p| self.pools.contains_key(p), &mut out);
        }
        out.members.sort();
        out
    }

    /// The pools whose selector matches these labels (a Node event's, which
    /// may be a deleted node's): which reconciles the event wakes.
    pub fn pools_matching(&self, labels: &(impl LabelLookup + ?Sized)) -> BTreeSet<String> {
        self.pools.values().filter(|p| p.selector.selects(labels)).map(|p| p.selector.name.clone()).collect()
    }

    /// The node now matches exactly `selected`; an empty set forgets it.
    fn set_node(&mut self, node: &str, selected: BTreeSet<String>) {
        let before = if selected.is_empty() { self.nodes.remove(node) } else { self.nodes.insert(node.to_string(), selected.clone()) };
        for p in before.iter().flatten().filter(|p| !selected.contains(*p)) {
            if let Some(pool) = self.pools.get_mut(p) {
                pool.nodes.remove(node);
            }
        }
        for p in &selected {
            if let Some(pool) = self.pools.get_mut(p) {
                pool.nodes.insert(node.to_string());
            }
        }
    }

    fn forget_pool(&mut self, pool: &str) {
        if let Some(gone) = self.pools.remove(pool) {
            for node in gone.nodes {
                if let Some(pools) = self.nodes.get_mut(&node) {
                    pools.remove(pool);
                    if pools.is_empty() {
                        self.nodes.remove(&node);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
