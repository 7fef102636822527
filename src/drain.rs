//! Draining a node: which pods must go (pure), and evicting them (act).
//!
//! Like `kubectl drain`: DaemonSet pods and mirror pods stay (they would be
//! recreated or cannot be evicted), finished pods do not count, and pods with
//! emptyDir data only go when `deleteEmptyDirData` says the data may be lost.
//! Evictions go through the Eviction API so PodDisruptionBudgets hold: a 429
//! means "not now", and the next round tries again. The API server names the
//! budget that refused, so the rollout can say which one and put the node back.
//!
//! A listed pod is decoded only as far as a drain reads it ([`PodOnNode`]):
//! every Draining node of a wave is listed each round and the lists are kept
//! until the round has acted, and whole Pods (spec, status, managedFields) of
//! hundreds of nodes were the operator's largest allocation after its caches.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, EvictParams, ListParams};
use kube::core::Request;
use serde::Deserialize;
use serde::de::IgnoredAny;
use tracing::{debug, info, warn};

use crate::rollout::DrainMode;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodDisposition {
    /// Stays on the node (DaemonSet, mirror pod, already finished).
    Ignore,
    Evict,
    /// Has emptyDir data and deleteEmptyDirData is false: blocks the drain.
    Blocked,
}

/// A pod on a node being drained, as far as the drain reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodOnNode {
    pub namespace: String,
    pub name: String,
    /// A DaemonSet's or mirror pod, or finished: never evicted.
    pub stays: bool,
    pub has_empty_dir: bool,
    /// Its deletion has begun: nothing more to ask of it.
    pub terminating: bool,
}

pub fn classify(pod: &PodOnNode, delete_empty_dir_data: bool) -> PodDisposition {
    if pod.stays {
        PodDisposition::Ignore
    } else if pod.has_empty_dir && !delete_empty_dir_data {
        PodDisposition::Blocked
    } else {
        PodDisposition::Evict
    }
}

/// The pods bound to `node`. Decoded straight into [`PodOnNode`]: what the
/// list carries beyond that is skipped by the parser, never allocated.
pub async fn pods_on_node(client: &Client, node: &str) -> kube::Result<Vec<PodOnNode>> {
    let mut request = Request::new("/api/v1/pods")
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .map_err(kube::Error::BuildRequest)?;
    // Named like kube's own lists in its traces.
    request.extensions_mut().insert("list");
    let listed: wire::PodList = client.request(request).await?;
    Ok(listed.items.into_iter().filter_map(PodOnNode::from_listed).collect())
}

/// Pods that still have to leave `node` (evictable or blocked).
pub fn remaining(pods: &[PodOnNode], delete_empty_dir_data: bool) -> usize {
    pods.iter().filter(|p| classify(p, delete_empty_dir_data) != PodDisposition::Ignore && !p.terminating).count()
}

/// The few fields of a listed Pod that decide its drain; serde skips the rest.
/// A field may be absent or null (as k8s-openapi and kube take either).
mod wire {
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
        pub deletion_timestamp: Option<IgnoredAny>,
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
    fn from_listed(p: wire::ListedPod) -> Option<Self> {
        let mirror = p.metadata.annotations.contains_key("kubernetes.io/config.mirror");
        let daemon = p.metadata.owner_references.iter().any(|r| r.kind == "DaemonSet" && r.controller == Some(true));
        let finished = matches!(p.status.phase.as_deref(), Some("Succeeded" | "Failed"));
        Some(PodOnNode {
            stays: mirror || daemon || finished,
            has_empty_dir: p.spec.volumes.iter().any(|v| v.empty_dir.is_some()),
            terminating: p.metadata.deletion_timestamp.is_some(),
            namespace: p.metadata.namespace.filter(|n| !n.is_empty())?,
            name: p.metadata.name.filter(|n| !n.is_empty())?,
        })
    }
}

/// The budget (namespace/name) named by an eviction's 429, if a budget
/// refused it: the API server adds a `DisruptionBudget` cause, "The disruption
/// budget <name> needs 2 healthy pods and has 2 currently". A 429 without one
/// is the API server's own throttling, not a budget.
pub fn refusing_budget(status: &kube::core::Status, namespace: &str) -> Option<String> {
    let causes = &status.details.as_ref()?.causes;
    let cause = causes.iter().find(|c| c.reason == "DisruptionBudget")?;
    let name = cause.message.strip_prefix("The disruption budget ").and_then(|m| m.split_whitespace().next()).unwrap_or("(unnamed)");
    Some(format!("{namespace}/{name}"))
}

/// One round of draining: evict (or delete) every pod that must go. Errors on
/// single pods are logged and retried next round; none aborts the round.
/// Returns the first budget that refused an eviction, if one did.
pub async fn drain_round(
    client: &Client,
    pool: &str,
    node: &str,
    pods: &[PodOnNode],
    mode: DrainMode,
    delete_empty_dir_data: bool,
) -> Option<String> {
    let mut refused = None;
    for pod in pods {
        if pod.terminating || classify(pod, delete_empty_dir_data) != PodDisposition::Evict {
            continue;
        }
        let (name, ns) = (pod.name.as_str(), pod.namespace.as_str());
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        let res = match mode {
            DrainMode::Evict => api.evict(name, &EvictParams::default()).await.map(|_| ()),
            DrainMode::Delete => api.delete(name, &DeleteParams::default()).await.map(|_| ()),
        };
        match res {
            Ok(()) => info!(pool, node, pod = %format!("{ns}/{name}"), ?mode, "evicted pod"),
            Err(kube::Error::Api(s)) if s.code == 429 => {
                let budget = refusing_budget(&s, ns);
                debug!(pool, node, pod = %format!("{ns}/{name}"), budget = ?budget, "eviction refused; retrying next round");
                refused = refused.or(budget);
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => warn!(pool, node, pod = %format!("{ns}/{name}"), error = %e, "eviction failed; retrying next round"),
        }
    }
    refused
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
        // Owned by a DaemonSet, but not as its controller: kubectl drain evicts it.
        let adopted = listed(
            json!({ "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "DaemonSet", "name": "o", "uid": "o-1" }] }),
            containers.clone(),
            "Running",
        );
        let scratch = listed(owned_by("ReplicaSet"), scratch_spec, "Running");
        let leaving = listed(json!({ "deletionTimestamp": "2026-12-01T00:00:00Z" }), containers, "Running");
        assert_eq!((rs.namespace.as_str(), rs.name.as_str()), ("apps", "p"));
        let cases = [
            (&ds, true, PodDisposition::Ignore),
            (&mirror, true, PodDisposition::Ignore),
            (&done, true, PodDisposition::Ignore),
            (&failed, true, PodDisposition::Ignore),
            (&adopted, true, PodDisposition::Evict),
            (&rs, true, PodDisposition::Evict),
            (&scratch, true, PodDisposition::Evict),
            (&scratch, false, PodDisposition::Blocked),
        ];
        for (i, (p, del, want)) in cases.iter().enumerate() {
            assert_eq!(classify(p, *del), *want, "case {i}");
        }
        assert!(leaving.terminating && !rs.terminating);
        assert_eq!(remaining(&[ds, rs, scratch.clone(), leaving], false), 2);
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
        assert!(pods.iter().all(|p| classify(p, false) == PodDisposition::Evict && !p.terminating));
    }
}
