//! Nodes as winpool's own writes returned them, until the watch delivers them.
//!
//! A round that starts before the watch has delivered the previous round's
//! writes would otherwise decide on the older copy and write again. A copy is
//! dropped as soon as the watch delivers that node at the same or a later
//! resourceVersion (an Apply or Delete event, once the store holds it), not
//! only at the next round: a round that labels 5,000 nodes into a pool takes
//! minutes on a busy API server, and holding every node it wrote until it
//! ended was a second Node cache (in a heap profile the heap rose from 37 to
//! a peak of 78 MiB over that round, and fell back when it ended).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::runtime::watcher;
use tracing::debug;

use crate::api::node_record::{NodeRecord, revision};

#[derive(Default)]
pub struct RecentWrites(Mutex<HashMap<String, Arc<NodeRecord>>>);

impl RecentWrites {
    /// A write of ours landed and the API server answered with this node.
    pub fn wrote(&self, node: Node) {
        let record = NodeRecord::from(&node);
        self.0.lock().expect("recent lock").insert(record.name.clone(), Arc::new(record));
    }

    /// A watch event the store has just applied. Not a relist's InitApply: its
    /// objects reach the store only at InitDone, and until then a round must
    /// still see our own newer copy.
    pub fn delivered(&self, ev: &watcher::Event<Node>) {
        if let watcher::Event::Apply(n) | watcher::Event::Delete(n) = ev {
            self.seen(n);
        }
    }

    /// The watch delivered this node: our copy is no longer newer than the cache.
    fn seen(&self, node: &Node) {
        let mut recent = self.0.lock().expect("recent lock");
        let delivered = revision(node.metadata.resource_version.as_deref());
        if recent.get(&node.name_any()).is_some_and(|mine| mine.revision() <= delivered) {
            recent.remove(&node.name_any());
        }
    }

    /// The freshest copy of each cached node: the cache's, or our own newer write.
    /// A copy of a node the cache no longer holds (deleted while the watch was
    /// down, so no Delete event came) is dropped: winpool writes only cached nodes.
    /// The cache is read under our lock: the watch applies an event to the
    /// cache before it retires our copy, so a snapshot taken before the lock
    /// could miss both the delivered node and our copy of it.
    pub fn freshest(&self, cached: impl FnOnce() -> Vec<Arc<NodeRecord>>) -> Vec<Arc<NodeRecord>> {
        let mut recent = self.0.lock().expect("recent lock");
        let mut kept = std::collections::HashSet::new();
        let out = cached()
            .into_iter()
            .map(|n| {
                let name = n.name.clone();
                match recent.get(&name) {
                    Some(mine) if mine.revision() > n.revision() => {
                        debug!(node = %name, cached = n.revision(), ours = mine.revision(), "cache behind our own write; using it");
                        let mine = mine.clone();
                        kept.insert(name);
                        mine
                    }
                    Some(mine) => {
                        debug!(node = %name, cached = n.revision(), ours = mine.revision(), "cache caught up");
                        recent.remove(&name);
                        n
                    }
                    None => n,
                }
            })
            .collect();
        recent.retain(|name, _| kept.contains(name));
        out
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.0.lock().expect("recent lock").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, rv: u64, state: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.resource_version = Some(rv.to_string());
        n.metadata.annotations = Some([("winpool.dev/state".to_string(), state.to_string())].into());
        n
    }

    fn record(name: &str, rv: u64, state: &str) -> Arc<NodeRecord> {
        Arc::new(NodeRecord::from(&node(name, rv, state)))
    }

    fn states(nodes: &[Arc<NodeRecord>]) -> Vec<String> {
        nodes.iter().map(|n| n.annotation("winpool.dev/state").unwrap().to_string()).collect()
    }

    #[test]
    fn our_write_stands_in_for_the_cache_until_the_watch_delivers_it() {
        let recent = RecentWrites::default();
        recent.wrote(node("a", 10, "Cordoned"));
        let cache = || vec![record("a", 9, "Pending"), record("b", 3, "Pending")];
        assert_eq!(states(&recent.freshest(cache)), ["Cordoned", "Pending"], "the cache is behind our write");

        recent.delivered(&watcher::Event::Apply(node("a", 9, "Pending")));
        assert_eq!(recent.len(), 1, "an older event does not retire our copy");
        recent.delivered(&watcher::Event::Apply(node("a", 10, "Cordoned")));
        assert_eq!(recent.len(), 0, "the watch delivered our write: our copy is dropped at once, not at the next round");
        assert_eq!(states(&recent.freshest(|| vec![record("a", 10, "Cordoned")])), ["Cordoned"]);
    }

    #[test]
    fn a_relisted_node_retires_our_copy_only_once_the_relist_is_in_the_store() {
        let recent = RecentWrites::default();
        recent.wrote(node("a", 10, "Cordoned"));
        // A relist (after a 410): the store swaps its buffer in only at InitDone.
        recent.delivered(&watcher::Event::Init);
        recent.delivered(&watcher::Event::InitApply(node("a", 10, "Cordoned")));
        assert_eq!(recent.len(), 1, "the store still holds the pre-relist copy");
        assert_eq!(states(&recent.freshest(|| vec![record("a", 8, "Pending")])), ["Cordoned"]);
        recent.delivered(&watcher::Event::InitDone);
        assert_eq!(states(&recent.freshest(|| vec![record("a", 10, "Cordoned")])), ["Cordoned"]);
        assert_eq!(recent.len(), 0, "the first round after the relist retires it");
    }

    #[test]
    fn a_deleted_node_leaves_no_copy_behind() {
        let recent = RecentWrites::default();
        recent.wrote(node("a", 10, "Cordoned"));
        recent.delivered(&watcher::Event::Delete(node("a", 11, "Cordoned")));
        assert_eq!(recent.len(), 0);
        // Deleted while the watch was down: the relist simply no longer has it.
        recent.wrote(node("b", 20, "Cordoned"));
        assert_eq!(states(&recent.freshest(|| vec![record("c", 3, "Pending")])), ["Pending"]);
        assert_eq!(recent.len(), 0, "no copy outlives its node in the cache");
    }

    #[test]
    fn a_cache_that_caught_up_wins_and_retires_our_copy() {
        let recent = RecentWrites::default();
        recent.wrote(node("a", 10, "Cordoned"));
        // Someone wrote after us; the watch delivered it before this round.
        assert_eq!(states(&recent.freshest(|| vec![record("a", 12, "Draining")])), ["Draining"]);
        assert_eq!(recent.len(), 0);
    }
}
