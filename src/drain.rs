//! Draining a node: which pods must go (pure), and evicting them (act).
//!
//! Like `kubectl drain`: DaemonSet pods and mirror pods stay (they would be
//! recreated or cannot be evicted), finished pods do not count, and pods with
//! emptyDir data only go when `deleteEmptyDirData` says the data may be lost.
//! Evictions go through the Eviction API so PodDisruptionBudgets hold: a 429
//! means "not now", and the next round tries again. The API server names the
//! budget that refused, so the rollout can say which one and put the node back.

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, EvictParams, ListParams};
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

pub fn classify(pod: &Pod, delete_empty_dir_data: bool) -> PodDisposition {
    let meta = &pod.metadata;
    if meta.annotations.as_ref().is_some_and(|a| a.contains_key("kubernetes.io/config.mirror")) {
        return PodDisposition::Ignore;
    }
    if meta.owner_references.as_ref().is_some_and(|o| o.iter().any(|r| r.kind == "DaemonSet" && r.controller == Some(true))) {
        return PodDisposition::Ignore;
    }
    if matches!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed")) {
        return PodDisposition::Ignore;
    }
    let has_empty_dir = pod.spec.as_ref().and_then(|s| s.volumes.as_ref()).is_some_and(|v| v.iter().any(|v| v.empty_dir.is_some()));
    if has_empty_dir && !delete_empty_dir_data {
        return PodDisposition::Blocked;
    }
    PodDisposition::Evict
}

pub async fn pods_on_node(client: &Client, node: &str) -> kube::Result<Vec<Pod>> {
    let api: Api<Pod> = Api::all(client.clone());
    Ok(api.list(&ListParams::default().fields(&format!("spec.nodeName={node}"))).await?.items)
}

/// Pods that still have to leave `node` (evictable or blocked).
pub fn remaining(pods: &[Pod], delete_empty_dir_data: bool) -> usize {
    pods.iter().filter(|p| classify(p, delete_empty_dir_data) != PodDisposition::Ignore && p.metadata.deletion_timestamp.is_none()).count()
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
    pods: &[Pod],
    mode: DrainMode,
    delete_empty_dir_data: bool,
) -> Option<String> {
    let mut refused = None;
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() || classify(pod, delete_empty_dir_data) != PodDisposition::Evict {
            continue;
        }
        let (Some(name), Some(ns)) = (pod.metadata.name.as_deref(), pod.metadata.namespace.as_deref()) else { continue };
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
    use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, PodSpec, PodStatus, Volume};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn pod() -> Pod {
        Pod::default()
    }

    #[test]
    fn pods_are_classified_like_kubectl_drain() {
        let mut ds = pod();
        ds.metadata.owner_references =
            Some(vec![OwnerReference { kind: "DaemonSet".into(), controller: Some(true), ..Default::default() }]);
        let mut rs = pod();
        rs.metadata.owner_references =
            Some(vec![OwnerReference { kind: "ReplicaSet".into(), controller: Some(true), ..Default::default() }]);
        let mut mirror = pod();
        mirror.metadata.annotations = Some([("kubernetes.io/config.mirror".to_string(), "x".to_string())].into());
        let mut done = pod();
        done.status = Some(PodStatus { phase: Some("Succeeded".into()), ..Default::default() });
        let mut scratch = pod();
        scratch.spec = Some(PodSpec {
            volumes: Some(vec![Volume { name: "s".into(), empty_dir: Some(EmptyDirVolumeSource::default()), ..Default::default() }]),
            ..Default::default()
        });
        let cases = [
            (&ds, true, PodDisposition::Ignore),
            (&mirror, true, PodDisposition::Ignore),
            (&done, true, PodDisposition::Ignore),
            (&rs, true, PodDisposition::Evict),
            (&scratch, true, PodDisposition::Evict),
            (&scratch, false, PodDisposition::Blocked),
        ];
        for (i, (p, del, want)) in cases.iter().enumerate() {
            assert_eq!(classify(p, *del), *want, "case {i}");
        }
        assert_eq!(remaining(&[ds, rs, scratch.clone()], false), 2);
    }
}
