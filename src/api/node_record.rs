//! What winpool keeps of a Windows Node: what a decision reads and nothing
//! else, with the strings nodes share (label keys and values, annotation keys,
//! states and revisions) held once for all of them.
//!
//! The Node cache is most of winpool's memory at 5,000 nodes. A k8s-openapi
//! Node, stripped of what winpool never reads, still took 4,020 bytes on the
//! benchmark's nodes (a record: 1,190): a struct with room for every field of
//! the API, and two BTreeMaps of owned Strings that repeat the same keys and
//! mostly the same values on every node of a pool.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use kube::runtime::reflector::Lookup;
use kube::runtime::watcher;

use crate::api::names;

/// A string held once for every node that carries it.
type Shared = Arc<str>;

#[derive(Debug, Clone, PartialEq)]
pub struct NodeRecord {
    pub name: String,
    /// A node re-created under the same name is another host: the operations
    /// winpool writes name the UID they were for.
    pub uid: String,
    pub resource_version: Option<String>,
    /// Sorted by key.
    labels: Box<[(Shared, Shared)]>,
    /// winpool's own (`winpool.dev/`): no other annotation is read. Sorted by key.
    annotations: Box<[(Shared, Shared)]>,
    pub unschedulable: bool,
    pub taints: Vec<Taint>,
    /// The kubelet's Ready condition is True.
    pub ready: bool,
    /// Its kubelet reports Windows (`status.nodeInfo.operatingSystem`): what
    /// makes a node Windows, not its `kubernetes.io/os` label, which anyone
    /// who may patch Nodes can set on a Linux node, a control plane's too.
    pub windows: bool,
    /// The WindowsHNSReady condition, whole: winpool compares it with the one it would write.
    pub hns_condition: Option<NodeCondition>,
    pub kernel_version: String,
    pub runtime_version: String,
    pub boot_id: String,
    /// When the Node object was created (the node joined the cluster).
    pub created: Option<jiff::Timestamp>,
}

impl NodeRecord {
    pub fn label(&self, key: &str) -> Option<&str> {
        find(&self.labels, key)
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        find(&self.annotations, key)
    }

    /// Its resourceVersion as a number, 0 when absent: the API server's are
    /// etcd revisions, so a greater one is a later state of the node.
    pub fn revision(&self) -> u64 {
        revision(self.resource_version.as_deref())
    }
}

/// A resourceVersion as a number, 0 when absent or not a number.
pub fn revision(resource_version: Option<&str>) -> u64 {
    resource_version.and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn find<'a>(pairs: &'a [(Shared, Shared)], key: &str) -> Option<&'a str> {
    pairs.binary_search_by(|(k, _)| k.as_ref().cmp(key)).ok().map(|i| pairs[i].1.as_ref())
}

impl From<&Node> for NodeRecord {
    fn from(node: &Node) -> Self {
        let meta = &node.metadata;
        let status = node.status.as_ref();
        let info = status.and_then(|s| s.node_info.as_ref());
        let condition = |t: &str| status.and_then(|s| s.conditions.as_ref()).and_then(|c| c.iter().find(|c| c.type_ == t));
        let spec = node.spec.as_ref();
        NodeRecord {
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            resource_version: meta.resource_version.clone(),
            labels: shared_pairs(meta.labels.iter().flatten()),
            annotations: shared_pairs(meta.annotations.iter().flatten().filter(|(k, _)| k.starts_with("winpool.dev/"))),
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
            taints: spec.and_then(|s| s.taints.clone()).unwrap_or_default(),
            ready: condition("Ready").is_some_and(|c| c.status == "True"),
            windows: info.is_some_and(|i| i.operating_system == "windows"),
            hns_condition: condition(names::NODE_CONDITION_HNS_READY).cloned(),
            kernel_version: info.map(|i| i.kernel_version.clone()).unwrap_or_default(),
            runtime_version: info.map(|i| i.container_runtime_version.clone()).unwrap_or_default(),
            boot_id: info.map(|i| i.boot_id.clone()).unwrap_or_default(),
            created: meta.creation_timestamp.as_ref().map(|t| t.0),
        }
    }
}

/// A watch event of Nodes as the cache of records takes it.
pub fn record_event(ev: &watcher::Event<Node>) -> watcher::Event<NodeRecord> {
    match ev {
        watcher::Event::Apply(n) => watcher::Event::Apply(n.into()),
        watcher::Event::Delete(n) => watcher::Event::Delete(n.into()),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(n) => watcher::Event::InitApply(n.into()),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// The kube reflector's store keys records by name, like Nodes.
impl Lookup for NodeRecord {
    type DynamicType = ();

    fn kind(_: &()) -> Cow<'_, str> {
        "Node".into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        "nodes".into()
    }

    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }

    fn namespace(&self) -> Option<Cow<'_, str>> {
        None
    }

    fn resource_version(&self) -> Option<Cow<'_, str>> {
        self.resource_version.as_deref().map(Cow::Borrowed)
    }

    fn uid(&self) -> Option<Cow<'_, str>> {
        None
    }
}

fn shared_pairs<'a>(pairs: impl Iterator<Item = (&'a String, &'a String)>) -> Box<[(Shared, Shared)]> {
    // Nothing under the lock leaves the set half-changed: a poisoned lock is still usable.
    let mut strings = STRINGS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let pairs: Box<[(Shared, Shared)]> = pairs.map(|(k, v)| (strings.share(k), strings.share(v))).collect();
    debug_assert!(pairs.is_sorted_by(|a, b| a.0 < b.0), "pairs come from a map, in key order: lookups search them");
    pairs
}

static STRINGS: Mutex<SharedStrings> = Mutex::new(SharedStrings { set: None, added: 0, swept_at: 0 });

/// One copy of each string some record holds. Strings no record holds any
/// more (a node's old timestamps, a deleted node's hostname) are swept out
/// once the strings added since the last sweep outnumber those it kept (or
/// 1,024): the set stays within about twice the strings in use at the last sweep.
struct SharedStrings {
    set: Option<HashSet<Shared>>,
    added: usize,
    swept_at: usize,
}

impl SharedStrings {
    fn share(&mut self, s: &str) -> Shared {
        let set = self.set.get_or_insert_with(HashSet::new);
        if let Some(held) = set.get(s) {
            return held.clone();
        }
        if self.added >= self.swept_at.max(1024) {
            set.retain(|s| Arc::strong_count(s) > 1);
            self.swept_at = set.len();
            self.added = 0;
        }
        self.added += 1;
        let new: Shared = s.into();
        set.insert(new.clone());
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus, NodeSystemInfo};

    fn node(name: &str, zone: &str, state: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.resource_version = Some("42".into());
        n.metadata.labels = Some(
            [("kubernetes.io/os", "windows"), ("topology.kubernetes.io/zone", zone), ("kubernetes.io/hostname", name)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        n.metadata.annotations = Some(
            [("winpool.dev/state", state), ("node.alpha.kubernetes.io/ttl", "0")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        n.spec = Some(NodeSpec {
            unschedulable: Some(true),
            taints: Some(vec![Taint { key: names::TAINT_HNS_NOT_READY.into(), effect: "NoSchedule".into(), ..Default::default() }]),
            ..Default::default()
        });
        n.status = Some(NodeStatus {
            conditions: Some(vec![
                NodeCondition { type_: "MemoryPressure".into(), status: "False".into(), ..Default::default() },
                NodeCondition { type_: "Ready".into(), status: "True".into(), ..Default::default() },
                NodeCondition { type_: names::NODE_CONDITION_HNS_READY.into(), status: "False".into(), ..Default::default() },
            ]),
            node_info: Some(NodeSystemInfo {
                kernel_version: "10.0.20348.2762".into(),
                container_runtime_version: "containerd://1.7.17+azure".into(),
                boot_id: "b-1".into(),
                os_image: "Windows Server 2022 Datacenter".into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        n
    }

    #[test]
    fn a_record_keeps_what_a_decision_reads() {
        let r = NodeRecord::from(&node("win-a", "westeurope-1", "Applying"));
        assert_eq!(r.name, "win-a");
        assert_eq!(r.revision(), 42);
        assert_eq!(r.label("topology.kubernetes.io/zone"), Some("westeurope-1"));
        assert_eq!(r.label("kubernetes.io/hostname"), Some("win-a"));
        assert_eq!(r.label("absent"), None);
        assert_eq!(r.annotation("winpool.dev/state"), Some("Applying"));
        assert_eq!(r.annotation("node.alpha.kubernetes.io/ttl"), None, "only winpool's annotations are kept");
        assert!(r.unschedulable && r.ready && !r.windows, "the kubelet's nodeInfo names no OS");
        assert_eq!(r.taints.len(), 1);
        assert_eq!(r.hns_condition.as_ref().map(|c| c.status.as_str()), Some("False"));
        assert_eq!(
            (r.kernel_version.as_str(), r.runtime_version.as_str(), r.boot_id.as_str()),
            ("10.0.20348.2762", "containerd://1.7.17+azure", "b-1")
        );
    }

    #[test]
    fn nodes_share_the_strings_they_have_in_common() {
        let a = NodeRecord::from(&node("win-a", "westeurope-1", "Applying"));
        let b = NodeRecord::from(&node("win-b", "westeurope-1", "Applying"));
        let same = |key: &str, of: fn(&NodeRecord) -> &[(Shared, Shared)]| {
            let (x, y) = (of(&a).iter().find(|(k, _)| &**k == key).unwrap(), of(&b).iter().find(|(k, _)| &**k == key).unwrap());
            Arc::ptr_eq(&x.0, &y.0) && Arc::ptr_eq(&x.1, &y.1)
        };
        assert!(same("topology.kubernetes.io/zone", |r| &r.labels));
        assert!(same("winpool.dev/state", |r| &r.annotations));
        assert!(!same("kubernetes.io/hostname", |r| &r.labels), "the hostnames differ");
    }

    #[test]
    fn strings_no_record_holds_are_let_go() {
        let mut strings = SharedStrings { set: None, added: 0, swept_at: 0 };
        let kept = strings.share("kept");
        for i in 0..5000 {
            strings.share(&format!("gone-{i}"));
        }
        let set = strings.set.as_ref().unwrap();
        assert!(set.len() <= 1026, "{} strings held: the unused ones stay", set.len());
        assert!(Arc::ptr_eq(&strings.share("kept"), &kept), "a string still held is still shared");
    }
}
