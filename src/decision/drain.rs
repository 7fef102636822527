//! Draining a node, the pure half: which pods must go and what holds them
//! (`crate::controller::drain` lists and evicts them).
//!
//! Like `kubectl drain`: DaemonSet pods and mirror pods stay (they would be
//! recreated or cannot be evicted), finished pods do not count, pods with
//! emptyDir data only go when `deleteEmptyDirData` says the data may be lost,
//! pods no controller owns only with `force` (nothing recreates them), only
//! pods `podSelector` matches are asked to leave, and an evicted pod counts
//! until it is gone or its deletion is older than `skipWaitForDeleteTimeout`.
//!
//! A listed pod is decoded only as far as a drain reads it ([`PodOnNode`]):
//! every Draining node of a wave is listed each round and the lists are kept
//! until the round has acted, and whole Pods (spec, status, managedFields) of
//! hundreds of nodes were the operator's largest allocation after its caches.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::api::DrainSpec;
use crate::decision::rollout::parse_duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodDisposition {
    /// Stays on the node (DaemonSet, mirror pod, already finished).
    Ignore,
    Evict,
    /// Must go, but the drain's rules do not let it: holds the drain.
    Held(Held),
}

/// Why a pod that must leave is not evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// It has emptyDir data and deleteEmptyDirData is false.
    EmptyDir,
    /// No controller owns it and force is false.
    Unmanaged,
}

impl Held {
    /// What the drain says of such a pod, and which setting lets it go.
    pub fn note(self) -> &'static str {
        match self {
            Held::EmptyDir => "has emptyDir data (rollout.drain.deleteEmptyDirData lets it go)",
            Held::Unmanaged => "has no controller to recreate it (rollout.drain.force evicts it)",
        }
    }
}

/// A pool's drain settings as a drain applies them, parsed once a round.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DrainRules {
    pub delete_empty_dir_data: bool,
    pub force: bool,
    /// The grace period every evicted pod gets, instead of its own.
    pub grace_period: Option<Duration>,
    /// The list request's labelSelector: pods it does not match stay.
    pub pod_selector: Option<String>,
    /// Deletions older than this are not waited for.
    pub skip_wait_for_delete: Option<Duration>,
}

impl DrainRules {
    pub fn of(spec: &DrainSpec) -> Self {
        // The CRD refuses a malformed selector or duration; one that slipped
        // through (an older CRD) is ignored, as if unset.
        let pod_selector = spec.pod_selector.clone().and_then(|s| kube::core::Selector::try_from(s).ok()).filter(|s| !s.selects_all());
        DrainRules {
            delete_empty_dir_data: spec.delete_empty_dir_data,
            force: spec.force,
            grace_period: spec.grace_period.as_deref().and_then(parse_duration),
            pod_selector: pod_selector.map(|s| s.to_string()),
            skip_wait_for_delete: spec.skip_wait_for_delete_timeout.as_deref().and_then(parse_duration),
        }
    }
}

/// A pod on a node being drained, as far as the drain reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodOnNode {
    pub namespace: String,
    pub name: String,
    /// A DaemonSet's or mirror pod, or finished: never evicted.
    pub stays: bool,
    pub has_empty_dir: bool,
    /// A controller owns it (and recreates it elsewhere).
    pub managed: bool,
    /// When its deletion began: nothing more to ask of it, only to wait.
    pub deleting_since: Option<Timestamp>,
}

pub fn classify(pod: &PodOnNode, rules: &DrainRules) -> PodDisposition {
    if pod.stays {
        PodDisposition::Ignore
    } else if pod.has_empty_dir && !rules.delete_empty_dir_data {
        PodDisposition::Held(Held::EmptyDir)
    } else if !pod.managed && !rules.force {
        PodDisposition::Held(Held::Unmanaged)
    } else {
        PodDisposition::Evict
    }
}

/// Pods that still have to leave `node` (evictable, held, or on their way
/// out and still waited for).
pub fn remaining(pods: &[PodOnNode], rules: &DrainRules, now: Timestamp) -> usize {
    pods.iter().filter(|p| classify(p, rules) != PodDisposition::Ignore && waited_for(p, rules, now)).count()
}

/// A pod leaving is waited for until it is gone, or until its deletion is
/// older than skipWaitForDeleteTimeout.
fn waited_for(pod: &PodOnNode, rules: &DrainRules, now: Timestamp) -> bool {
    match (pod.deleting_since, rules.skip_wait_for_delete) {
        (Some(since), Some(skip)) => now.duration_since(since) < jiff::SignedDuration::try_from(skip).unwrap_or(jiff::SignedDuration::MAX),
        _ => true,
    }
}

/// The first pod (by namespace/name) the drain's rules keep on the node, and
/// why: what a node failed at drain.timeout names.
pub fn first_held(pods: &[PodOnNode], rules: &DrainRules) -> Option<String> {
    let mut held: Vec<(String, Held)> = pods
        .iter()
        .filter(|p| p.deleting_since.is_none())
        .filter_map(|p| match classify(p, rules) {
            PodDisposition::Held(why) => Some((format!("{}/{}", p.namespace, p.name), why)),
            _ => None,
        })
        .collect();
    held.sort_by(|a, b| a.0.cmp(&b.0));
    let count = held.len();
    held.into_iter().next().map(|(pod, why)| match count {
        1 => format!("pod {pod} {}", why.note()),
        n => format!("pod {pod} {} (and {} more held)", why.note(), n - 1),
    })
}

/// The few fields of a listed Pod that decide its drain; serde skips the rest.
/// A field may be absent or null (as k8s-openapi and kube take either).
pub(crate) mod wire {
    use super::*;

    /// Absent and null both read as the default.
    fn or_default<'de, D: serde::Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
        Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
    }

    #[derive(Deserialize)]
    pub struct PodList {
        #[serde(default, deserialize_with = "or_default")]
        pub items: Vec<ListedPod>,
    }

    #[derive(Deserialize)]
    pub struct ListedPod {
        #[serde(default, deserialize_with = "or_default")]
        pub metadata: Meta,
        #[serde(default, deserialize_with = "or_default")]
        pub spec: Spec,
        #[serde(default, deserialize_with = "or_default")]
        pub status: Status,
    }

    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    pub struct Meta {
        #[serde(default)]
        pub name: Option<String>,
        #[serde(default)]
        pub namespace: Option<String>,
        #[serde(default, deserialize_with = "or_default")]
        pub annotations: BTreeMap<String, IgnoredAny>,
        #[serde(default, deserialize_with = "or_default")]
        pub owner_references: Vec<Owner>,
        #[serde(default)]
        pub deletion_timestamp: Option<String>,
    }

    #[derive(Deserialize)]
    pub struct Owner {
        #[serde(default, deserialize_with = "or_default")]
        pub kind: String,
        #[serde(default)]
        pub controller: Option<bool>,
    }

    #[derive(Deserialize, Default)]
    pub struct Spec {
        #[serde(default, deserialize_with = "or_default")]
        pub volumes: Vec<Volume>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Volume {
        #[serde(default)]
        pub empty_dir: Option<IgnoredAny>,
    }

    #[derive(Deserialize, Default)]
    pub struct Status {
        #[serde(default)]
        pub phase: Option<String>,
    }
}

impl PodOnNode {
    /// `None` for a pod without a name or namespace: there is nothing to evict by.
    pub(crate) fn from_listed(p: wire::ListedPod) -> Option<Self> {
        let mirror = p.metadata.annotations.contains_key("kubernetes.io/config.mirror");
        let daemon = p.metadata.owner_references.iter().any(|r| r.kind == "DaemonSet" && r.controller == Some(true));
        let finished = matches!(p.status.phase.as_deref(), Some("Succeeded" | "Failed"));
        // An unreadable deletion time is still a deletion: since the epoch, so
        // a skipWaitForDeleteTimeout lets it go rather than wait forever.
        let deleting_since = p.metadata.deletion_timestamp.map(|t| t.parse().unwrap_or(Timestamp::UNIX_EPOCH));
        Some(PodOnNode {
            stays: mirror || daemon || finished,
            has_empty_dir: p.spec.volumes.iter().any(|v| v.empty_dir.is_some()),
            managed: p.metadata.owner_references.iter().any(|r| r.controller == Some(true)),
            deleting_since,
            namespace: p.metadata.namespace.filter(|n| !n.is_empty())?,
            name: p.metadata.name.filter(|n| !n.is_empty())?,
        })
    }
}

/// The budget (namespace/name) named by an eviction's 429, if a budget
/// refused it: the API server adds a `DisruptionBudget` cause, `The disruption
/// budget <name> needs 2 healthy pods and has 2 currently`. A 429 without one
/// is the API server's own throttling, not a budget.
pub fn refusing_budget(status: &kube::core::Status, namespace: &str) -> Option<String> {
    let causes = &status.details.as_ref()?.causes;
    let cause = causes.iter().find(|c| c.reason == "DisruptionBudget")?;
    let name = cause.message.strip_prefix("The disruption budget ").and_then(|m| m.split_whitespace().next()).unwrap_or("(unnamed)");
    Some(format!("{namespace}/{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A pod as the API server lists it, with the fields a drain does not read.
    fn listed(extra_meta: serde_json::Value, spec: serde_json::Value, phase: &str) -> PodOnNode {
        let mut meta = json!({
            "name": "p", "namespace": "apps", "uid": "u-1", "resourceVersion": "7",
            "managedFields": [{ "manager": "kubelet", "operation": "Update", "fieldsV1": { "f:status": {} } }],
        });
        meta.as_object_mut().unwrap().extend(extra_meta.as_object().unwrap().clone());
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": spec, "status": { "phase": phase, "conditions": [{ "type": "Ready", "status": "True" }] },
        });
        decode(json!({ "kind": "PodList", "metadata": {}, "items": [pod] })).pop().expect("one pod")
    }

    fn decode(list: serde_json::Value) -> Vec<PodOnNode> {
        let list: wire::PodList = serde_json::from_value(list).expect("the list decodes");
        list.items.into_iter().filter_map(PodOnNode::from_listed).collect()
    }

    fn owned_by(kind: &str) -> serde_json::Value {
        json!({ "ownerReferences": [{ "apiVersion": "apps/v1", "kind": kind, "name": "o", "uid": "o-1", "controller": true }] })
    }

    fn rules(delete_empty_dir_data: bool, force: bool) -> DrainRules {
        DrainRules { delete_empty_dir_data, force, ..DrainRules::default() }
    }

    fn now() -> Timestamp {
        "2026-12-01T00:10:00Z".parse().unwrap()
    }

    #[test]
    fn pods_are_classified_like_kubectl_drain() {
        let containers = json!({ "containers": [{ "name": "c", "image": "i" }] });
        let scratch_spec = json!({ "containers": [{ "name": "c", "image": "i" }], "volumes": [
            { "name": "cfg", "configMap": { "name": "x" } }, { "name": "s", "emptyDir": {} } ] });
        let ds = listed(owned_by("DaemonSet"), containers.clone(), "Running");
        let rs = listed(owned_by("ReplicaSet"), containers.clone(), "Running");
        let mirror = listed(json!({ "annotations": { "kubernetes.io/config.mirror": "x" } }), containers.clone(), "Running");
        let done = listed(owned_by("ReplicaSet"), containers.clone(), "Succeeded");
        let failed = listed(owned_by("ReplicaSet"), containers.clone(), "Failed");
        // Owned by a DaemonSet, but not as its controller: kubectl drain evicts
        // it, and as nothing recreates it, only with force.
        let adopted = listed(
            json!({ "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "DaemonSet", "name": "o", "uid": "o-1" }] }),
            containers.clone(),
            "Running",
        );
        let bare = listed(json!({}), containers.clone(), "Running");
        let scratch = listed(owned_by("ReplicaSet"), scratch_spec, "Running");
        let mut leaving_meta = owned_by("ReplicaSet");
        leaving_meta["deletionTimestamp"] = json!("2026-12-01T00:00:00Z");
        let leaving = listed(leaving_meta, containers, "Running");
        assert_eq!((rs.namespace.as_str(), rs.name.as_str()), ("apps", "p"));
        let cases = [
            (&ds, rules(true, false), PodDisposition::Ignore),
            (&mirror, rules(true, false), PodDisposition::Ignore),
            (&done, rules(true, false), PodDisposition::Ignore),
            (&failed, rules(true, false), PodDisposition::Ignore),
            (&adopted, rules(true, false), PodDisposition::Held(Held::Unmanaged)),
            (&adopted, rules(true, true), PodDisposition::Evict),
            (&bare, rules(true, false), PodDisposition::Held(Held::Unmanaged)),
            (&bare, rules(true, true), PodDisposition::Evict),
            (&rs, rules(true, false), PodDisposition::Evict),
            (&scratch, rules(true, false), PodDisposition::Evict),
            (&scratch, rules(false, true), PodDisposition::Held(Held::EmptyDir)),
        ];
        for (i, (p, r, want)) in cases.iter().enumerate() {
            assert_eq!(classify(p, r), *want, "case {i}");
        }
        assert_eq!(leaving.deleting_since, Some("2026-12-01T00:00:00Z".parse().unwrap()));
        assert_eq!(rs.deleting_since, None);
        // Held pods count, and one on its way out is waited for until it is gone.
        assert_eq!(remaining(&[ds, rs, scratch.clone(), bare.clone(), leaving.clone()], &rules(false, false), now()), 4);
        assert_eq!(
            first_held(&[scratch.clone(), bare], &rules(false, false)).as_deref(),
            Some("pod apps/p has emptyDir data (rollout.drain.deleteEmptyDirData lets it go) (and 1 more held)")
        );
        assert_eq!(first_held(&[scratch], &rules(true, false)), None);
    }

    /// skipWaitForDeleteTimeout: a pod whose deletion began longer ago than
    /// this no longer holds the drain (a kubelet that never confirms it).
    #[test]
    fn a_deletion_older_than_skip_wait_for_delete_timeout_is_not_waited_for() {
        let mut meta = owned_by("ReplicaSet");
        meta["deletionTimestamp"] = json!("2026-12-01T00:00:00Z");
        let leaving = listed(meta, json!({ "containers": [{ "name": "c", "image": "i" }] }), "Running");
        let waiting = |skip: Option<u64>| {
            let r = DrainRules { skip_wait_for_delete: skip.map(Duration::from_secs), ..rules(true, false) };
            remaining(std::slice::from_ref(&leaving), &r, now())
        };
        // Ten minutes into its deletion.
        assert_eq!(waiting(None), 1, "by default a drain waits until the pod is gone");
        assert_eq!(waiting(Some(11 * 60)), 1);
        assert_eq!(waiting(Some(9 * 60)), 0);
    }

    #[test]
    fn the_rules_come_from_the_spec_and_the_selector_goes_to_the_list_request() {
        let spec: DrainSpec = serde_saphyr::from_str(
            "{force: true, gracePeriod: 45s, skipWaitForDeleteTimeout: 5m, podSelector: {matchLabels: {tier: web}, matchExpressions: [{key: pinned, operator: DoesNotExist}]}}",
        )
        .unwrap();
        let r = DrainRules::of(&spec);
        assert_eq!(r.grace_period, Some(Duration::from_secs(45)));
        assert_eq!(r.skip_wait_for_delete, Some(Duration::from_secs(300)));
        assert!(r.force && r.delete_empty_dir_data);
        assert_eq!(r.pod_selector.as_deref(), Some("tier=web,!pinned"));
        // An empty selector is no selector.
        assert_eq!(DrainRules::of(&serde_saphyr::from_str("{podSelector: {}}").unwrap()).pod_selector, None);
    }

    /// Fields an API server may leave out or send as null decode as empty,
    /// so one odd pod never fails a node's whole list; a pod without a name
    /// or namespace is left out.
    #[test]
    fn absent_and_null_fields_decode_as_empty() {
        assert!(decode(json!({ "kind": "PodList", "items": null })).is_empty());
        assert!(decode(json!({ "kind": "PodList" })).is_empty());
        let pods = decode(json!({ "kind": "PodList", "items": [
            { "metadata": { "name": "p", "namespace": "apps", "annotations": null, "ownerReferences": null },
              "spec": { "volumes": null }, "status": null },
            { "metadata": { "name": "q", "namespace": "apps" } },
            { "metadata": { "name": "nameless-namespace" } },
            { "metadata": null },
        ] }));
        assert_eq!(pods.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["p", "q"]);
        assert!(pods.iter().all(|p| classify(p, &rules(false, true)) == PodDisposition::Evict && p.deleting_since.is_none()));
    }
}
