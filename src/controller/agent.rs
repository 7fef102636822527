//! The pool's agent: which images may run, its DaemonSet and revision
//! ConfigMaps in the agents' namespace.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tracing::{info, warn};

use super::memory::PoolMemory;
use super::{Context, Error, Settings, api_status};
use crate::api::{FIELD_MANAGER, WindowsNodePool, names};
use crate::configmap::revision_configmap;
use crate::daemonset::{AgentDrift, LABEL_MANAGED_BY, agent_daemonset, drift};
use crate::migration::{legacy_config, legacy_revision};
use crate::revision::NodeConfig;
use crate::rollout::Plan;

/// Whoever can create a pool can run an image as SYSTEM on its nodes: the
/// operator only runs agent images the cluster admin allowed.
pub fn agent_image_allowed(image: &str, allowed: &[String]) -> bool {
    image.is_empty() || allowed.is_empty() || allowed.iter().any(|p| image.starts_with(p.as_str()))
}

/// A write of the pool's agent DaemonSet, and why.
pub(super) struct AgentWrite {
    pub(super) drift: AgentDrift,
    /// Replaced whole rather than applied.
    pub(super) replace: bool,
    /// What winpool wants; for a replace, carrying the live resourceVersion.
    pub(super) daemonset: DaemonSet,
}

/// The pool's agent DaemonSet is written when it is missing, when winpool's own
/// wish changed (a new agent image or setting: that rolls the agents and
/// nothing else), or when someone edited what winpool sets (put back, with a
/// Warning Event, so a hand edit never silently decides what runs as SYSTEM).
pub(super) fn agent_write(pool: &WindowsNodePool, settings: &Settings, ds_of_pool: &[Arc<DaemonSet>]) -> Option<AgentWrite> {
    daemonset_write(agent_daemonset(pool, &settings.agent_namespace, &settings.agent), ds_of_pool)
}

/// An agent roll (winpool's wish changed: a new image or setting) waits while
/// any of the pool's nodes is Applying: a rolled agent pod meets the update in
/// the middle, and while the servicing task outlives it, the containerd swap
/// and the report in flight are better left to the agent that began them. A
/// missing DaemonSet or a hand edit is written at once: no agent runs, or
/// one runs as nobody asked.
pub(super) fn hold_agent_roll(write: Option<AgentWrite>, applying: usize) -> Option<AgentWrite> {
    write.filter(|w| w.drift != AgentDrift::Outdated || applying == 0)
}

/// The write that brings one of the pool's DaemonSets (the agent's, a CSI
/// Proxy's) to what winpool wants, if it needs one.
pub(super) fn daemonset_write(mut wanted: DaemonSet, ds_of_pool: &[Arc<DaemonSet>]) -> Option<AgentWrite> {
    let ds_name = wanted.metadata.name.clone().unwrap_or_default();
    let current = ds_of_pool.iter().find(|d| d.metadata.name.as_deref() == Some(ds_name.as_str()));
    let drift = drift(current.map(|d| d.as_ref()), &wanted);
    if drift == AgentDrift::UpToDate {
        return None;
    }
    // Server-side apply cannot take away what another manager added (a
    // nodeSelector key, an env var): a hand edit is replaced whole, guarded by
    // the resourceVersion it was judged on.
    let replace = match (drift, current) {
        (AgentDrift::HandEdited, Some(live)) => {
            wanted.metadata.resource_version = live.metadata.resource_version.clone();
            true
        }
        _ => false,
    };
    Some(AgentWrite { drift, replace, daemonset: wanted })
}

/// The revision ConfigMaps to create and the earlier-layout DaemonSets to delete.
#[derive(Default)]
pub(super) struct ConfigMapWrites {
    /// (revision, its ConfigMap), by revision.
    pub(super) create: Vec<(String, ConfigMap)>,
    /// (ConfigMap, whether it is the target): the marks to move on existing
    /// ConfigMaps, the old target's taken off before one is put on. A new
    /// target is created with its mark, before the old one's comes off: an
    /// agent that sees two marks waits for one.
    pub(super) mark: Vec<(String, bool)>,
    /// When the marks are put on (`winpool.dev/target-since`), RFC 3339.
    pub(super) marked_at: String,
    pub(super) delete_legacy: Vec<String>,
}

/// The ConfigMap of every revision the plan needs that has none: the target's
/// from the spec, an earlier revision's from the per-revision DaemonSet that
/// still describes it. Per-revision DaemonSets of the earlier layout go once
/// the pool's own DaemonSet is written and their configuration is safe in a
/// ConfigMap: their nodes keep their configuration and are not drained. The deletions count on the creations
/// having landed: the shell stops at the first one that fails.
pub(super) fn configmap_writes(
    pool: &WindowsNodePool,
    ns: &str,
    plan: &Plan,
    cms_of_pool: &[Arc<ConfigMap>],
    ds_of_pool: &[Arc<DaemonSet>],
    now: Timestamp,
) -> ConfigMapWrites {
    let mut have: BTreeSet<String> = cms_of_pool.iter().filter_map(|c| c.labels().get(names::LABEL_REVISION).cloned()).collect();
    let target = NodeConfig::from_spec(&pool.spec);
    let missing: Vec<&String> = plan.config_revisions.iter().filter(|r| !have.contains(*r)).collect();
    let mut writes = ConfigMapWrites { marked_at: now.to_string(), ..Default::default() };
    for rev in missing {
        let cfg = if *rev == plan.revision {
            Some(target.clone())
        } else {
            ds_of_pool.iter().filter(|d| legacy_revision(d) == Some(rev.as_str())).find_map(|d| legacy_config(d))
        };
        let Some(cfg) = cfg else { continue };
        let mut cm = revision_configmap(pool, rev, &cfg, ns);
        if *rev == plan.revision {
            cm.labels_mut().insert(names::LABEL_TARGET.into(), "true".into());
            cm.annotations_mut().insert(names::ANN_TARGET_SINCE.into(), writes.marked_at.clone());
        }
        writes.create.push((rev.clone(), cm));
        have.insert(rev.clone());
    }
    // The agents preflight the revision whose ConfigMap carries the mark.
    let mut marks: Vec<(String, bool)> = cms_of_pool
        .iter()
        .filter_map(|c| {
            let is_target = c.labels().get(names::LABEL_REVISION) == Some(&plan.revision);
            let marked = c.labels().get(names::LABEL_TARGET).map(String::as_str) == Some("true");
            (is_target != marked).then(|| (c.name_any(), is_target))
        })
        .collect();
    marks.sort_by_key(|(name, on)| (*on, name.clone()));
    writes.mark = marks;
    // An earlier-layout DaemonSet goes only once nothing needs its configuration
    // or that configuration is in a ConfigMap (one whose environment could not be
    // read stays, and its nodes keep their agent).
    let replaced = |rev: &str| have.contains(rev) || !plan.config_revisions.contains(rev);
    let legacy = ds_of_pool.iter().filter(|d| d.metadata.deletion_timestamp.is_none());
    writes.delete_legacy = legacy.filter(|d| legacy_revision(d).is_some_and(replaced)).map(|d| d.name_any()).collect();
    writes
}

/// Write one of the pool's DaemonSets as decided; a hand edit put back is reported.
pub(super) async fn write_daemonset(pool: &WindowsNodePool, ctx: &Context, w: &AgentWrite) -> Result<(), Error> {
    let ds_name = w.daemonset.metadata.name.clone().unwrap_or_default();
    let ds_api: Api<DaemonSet> = Api::namespaced(ctx.client.clone(), &ctx.settings.agent_namespace);
    if w.replace {
        ds_api
            .replace(&ds_name, &crate::api::post_params(), &w.daemonset)
            .await
            .map_err(|source| Error::ApplyAgent { name: ds_name.clone(), source })?;
        ctx.metrics.api_request("replace", "daemonsets", "ok");
    } else {
        ds_api
            .patch(&ds_name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&w.daemonset))
            .await
            .map_err(|source| Error::ApplyAgent { name: ds_name.clone(), source })?;
        ctx.metrics.api_request("apply", "daemonsets", "ok");
    }
    if w.drift == AgentDrift::HandEdited {
        let msg = format!(
            "DaemonSet {ds_name} was edited by hand; winpool put back what it sets (change the pool or winpool's agent settings instead)"
        );
        warn!(pool = %pool.name_any(), daemonset = %ds_name, "{msg}");
        let ev = Event {
            type_: EventType::Warning,
            reason: if crate::csi_proxy::is_csi_proxy(&w.daemonset) { "CSIProxyDaemonSetReverted" } else { "AgentDaemonSetReverted" }
                .into(),
            note: Some(msg),
            action: "Apply".into(),
            secondary: None,
        };
        ctx.publish(pool, ev).await;
    } else {
        info!(pool = %pool.name_any(), daemonset = %ds_name, drift = ?w.drift, "applied DaemonSet");
    }
    Ok(())
}

/// Create the revision ConfigMaps, then delete the earlier-layout DaemonSets they replace.
pub(super) async fn write_configmaps(pool: &WindowsNodePool, ctx: &Context, w: &ConfigMapWrites) -> Result<(), Error> {
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.settings.agent_namespace);
    let pp = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
    for (rev, cm) in &w.create {
        match api.create(&pp, cm).await {
            Ok(_) => info!(pool = %pool.name_any(), revision = %rev, "created revision ConfigMap"),
            // Immutable and named by its revision: one that exists is this one.
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(source) => return Err(Error::CreateConfigMap { name: cm.metadata.name.clone().unwrap_or_default(), source }),
        }
        ctx.metrics.api_request("create", "configmaps", "ok");
    }
    for (name, on) in &w.mark {
        // Labels of an immutable ConfigMap may change; its data may not.
        let body = serde_json::json!({ "metadata": {
            "labels": { names::LABEL_TARGET: on.then_some("true") },
            "annotations": { names::ANN_TARGET_SINCE: on.then_some(w.marked_at.as_str()) },
        } });
        match api.patch(name, &crate::api::patch_params(), &Patch::Merge(&body)).await {
            Ok(_) => ctx.metrics.api_request("patch", "configmaps", "ok"),
            // Deleted meanwhile (no node needed it any more): nothing to mark.
            Err(kube::Error::Api(s)) if s.code == 404 => ctx.metrics.api_request("patch", "configmaps", "not_found"),
            Err(source) => return Err(Error::MarkConfigMap { name: name.clone(), source }),
        }
    }
    for ds in &w.delete_legacy {
        delete_daemonset(ctx, ds).await?;
        info!(pool = %pool.name_any(), daemonset = %ds, "deleted per-revision agent DaemonSet of the earlier layout");
    }
    Ok(())
}

pub(super) async fn delete_daemonset(ctx: &Context, name: &str) -> Result<(), Error> {
    delete_in_agent_namespace::<DaemonSet>(ctx, name, "daemonsets").await
}

pub(super) async fn delete_configmap(ctx: &Context, name: &str) -> Result<(), Error> {
    delete_in_agent_namespace::<ConfigMap>(ctx, name, "configmaps").await
}

/// Delete one of winpool's objects in the agents namespace; one already gone is fine.
pub(super) async fn delete_in_agent_namespace<K>(ctx: &Context, name: &str, resource: &'static str) -> Result<(), Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &ctx.settings.agent_namespace);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(source) => return Err(Error::Delete { resource, name: name.to_string(), source }),
    }
    ctx.metrics.api_request("delete", resource, "ok");
    Ok(())
}

/// The agents' namespace holds only winpool's HostProcess DaemonSets, so only it is privileged.
pub async fn ensure_agent_namespace(client: &Client, ns: &str) -> Result<(), Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    let failed = |source| Error::AgentNamespace { name: ns.to_string(), source };
    if api.get_opt(ns).await.map_err(failed)?.is_some() {
        return Ok(());
    }
    let obj = Namespace {
        metadata: ObjectMeta {
            name: Some(ns.into()),
            labels: Some(
                [
                    ("pod-security.kubernetes.io/enforce".to_string(), "privileged".to_string()),
                    (LABEL_MANAGED_BY.to_string(), "winpool".to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&crate::api::post_params(), &obj).await {
        Ok(_) => info!(namespace = ns, "created agent namespace (pod-security enforce=privileged)"),
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(source) => return Err(failed(source)),
    }
    Ok(())
}

/// Why a pool's agent image is refused, and the pool's status saying so: not
/// Ready, not Progressing, the other conditions and the counts as they were.
fn refusal(pool: &WindowsNodePool, allowed: &[String], now: Timestamp) -> (String, crate::api::WindowsNodePoolStatus) {
    let msg = format!(
        "spec.agent.image {:?} is not in the operator's allowed agent images ({}); nothing is rolled until it is",
        pool.spec.agent.image,
        allowed.join(", ")
    );
    let refused = |type_: &str| Condition {
        type_: type_.into(),
        // A refused image waits for a person: Stalled, as kstatus reads it.
        status: if type_ == crate::api::conditions::STALLED { "True" } else { "False" }.into(),
        reason: "AgentImageNotAllowed".into(),
        message: msg.clone(),
        last_transition_time: Time(now),
        observed_generation: pool.metadata.generation,
    };
    use crate::api::conditions::{PROGRESSING, READY, RECONCILING, STALLED};
    let types = [READY, RECONCILING, STALLED, PROGRESSING];
    let conds = types.iter().map(|t| refused(t)).collect();
    let mut status = pool.status.clone().unwrap_or_default();
    let mut rest: Vec<_> = status.conditions.iter().filter(|c| !types.contains(&c.type_.as_str())).cloned().collect();
    let mut merged = crate::status::merge_conditions(&status.conditions, conds, pool.metadata.generation, now);
    merged.append(&mut rest);
    status.conditions = merged;
    status.observed_generation = pool.metadata.generation;
    (msg, status)
}

/// Roll nothing for a pool whose agent image is not allowed; say so once.
pub(super) async fn refuse_agent_image(
    pool: &WindowsNodePool,
    ctx: &Context,
    memory: &mut PoolMemory,
    now: Timestamp,
) -> Result<Action, Error> {
    let name = pool.name_any();
    let (msg, status) = refusal(pool, &ctx.settings.allowed_agent_images, now);
    let ev = Event {
        type_: EventType::Warning,
        reason: "AgentImageNotAllowed".into(),
        note: Some(msg.clone()),
        action: "Validate".into(),
        secondary: None,
    };
    for ev in memory.standing_news(vec![(msg.clone(), ev)]) {
        ctx.publish_fresh(pool, ev).await;
    }
    if pool.status.as_ref() != Some(&status) {
        warn!(pool = %name, "{msg}");
        let body = json!({ "apiVersion": "winpool.dev/v1alpha1", "kind": "WindowsNodePool", "status": status });
        api_status(ctx)
            .patch_status(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body))
            .await
            .map_err(|source| Error::WriteStatus { pool: name.clone(), source })?;
    }
    Ok(Action::requeue(Duration::from_secs(300)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{NodeCounts, WindowsNodePoolSpec, WindowsNodePoolStatus, conditions};

    #[test]
    fn a_refused_image_stops_ready_and_progressing_and_keeps_the_rest_of_the_status() {
        let spec: WindowsNodePoolSpec = serde_yaml::from_str(
            "nodeSelector: {}\nos: {version: ltsc2022, patchLevel: 10.0.20348.2762}\nagent: {image: evil.example.com/agent:1}",
        )
        .unwrap();
        let mut pool = WindowsNodePool::new("p", spec);
        pool.metadata.generation = Some(3);
        let earlier: Timestamp = "2026-11-01T00:00:00Z".parse().unwrap();
        let degraded = Condition {
            type_: conditions::DEGRADED.into(),
            status: "False".into(),
            reason: "NoFailures".into(),
            message: "no node failed".into(),
            last_transition_time: Time(earlier),
            observed_generation: Some(2),
        };
        let counts = NodeCounts { total: 4, updated: 2, ..Default::default() };
        pool.status = Some(WindowsNodePoolStatus { nodes: counts.clone(), conditions: vec![degraded.clone()], ..Default::default() });
        let now: Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();

        let (msg, status) = refusal(&pool, &["registry.corp/".to_string()], now);
        assert!(msg.contains("evil.example.com/agent:1") && msg.contains("registry.corp/"), "{msg}");
        for (t, want) in [
            (conditions::READY, "False"),
            (conditions::PROGRESSING, "False"),
            (conditions::RECONCILING, "False"),
            (conditions::STALLED, "True"),
        ] {
            let c = status.conditions.iter().find(|c| c.type_ == t).expect(t);
            assert_eq!((c.status.as_str(), c.reason.as_str(), c.observed_generation), (want, "AgentImageNotAllowed", Some(3)), "{t}");
        }
        assert!(status.conditions.contains(&degraded), "other conditions stay as they were");
        assert_eq!((status.nodes, status.observed_generation), (counts, Some(3)));
    }
}
