//! The pool's agent: which images may run, its DaemonSet and revision
//! ConfigMaps in the agents' namespace.

use crate::api::EventReason;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType};
use kube::{Client, Resource, ResourceExt};
use tracing::{info, warn};

use super::{Context, Error};
use crate::api::{FIELD_MANAGER, WindowsNodePool, names};
use crate::builders::daemonset::{AgentDrift, LABEL_MANAGED_BY};
pub use crate::decision::round::agent::agent_image_allowed;
use crate::decision::round::agent::{AgentWrite, ConfigMapWrites};

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
            reason: if crate::builders::csi_proxy::is_csi_proxy(&w.daemonset) {
                EventReason::CsiProxyDaemonSetReverted
            } else if crate::builders::pod_network::is_pod_network(&w.daemonset) {
                EventReason::PodNetworkDaemonSetReverted
            } else {
                EventReason::AgentDaemonSetReverted
            }
            .as_str()
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

/// How long a new leader's first request waits out an API server that is
/// away (restarted, a load balancer moving): the lease, not this, decides
/// whether the replica goes on leading.
const FIRST_REQUEST_PATIENCE: u32 = 60;

/// The agents' namespace holds only winpool's HostProcess DaemonSets, so only
/// it is privileged. The controller's first request: an API server away for
/// a moment is waited for (once a second, a minute at most), not taken as the
/// controller's end; a refusal (403, an invalid namespace) is.
pub async fn ensure_agent_namespace(client: &Client, ns: &str) -> Result<(), Error> {
    let mut attempt = 1;
    loop {
        match ensure_agent_namespace_once(client, ns).await {
            Err(Error::AgentNamespace { source, .. }) if attempt < FIRST_REQUEST_PATIENCE && transient(&source) => {
                warn!(namespace = ns, attempt, error = %source, "the API server is away; asking again in a second");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                attempt += 1;
            }
            r => return r,
        }
    }
}

/// An error that says the API server was not there, not that it refused.
fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        kube::Error::Service(_) | kube::Error::HyperError(_) => true,
        _ => false,
    }
}

async fn ensure_agent_namespace_once(client: &Client, ns: &str) -> Result<(), Error> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An API server on loopback that drops its first connection (it was
    /// restarting), then answers every request with `status` and `body`.
    async fn away_then(status: &'static str, body: &'static str) -> Client {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            drop(l.accept().await);
            while let Ok((mut s, _)) = l.accept().await {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let answer = format!("HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len());
                let _ = s.write_all(answer.as_bytes()).await;
            }
        });
        Client::try_from(kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap())).unwrap()
    }

    #[tokio::test]
    async fn the_first_request_waits_out_an_api_server_that_is_away_but_not_a_refusal() {
        let ns = r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"winpool-agents"}}"#;
        ensure_agent_namespace(&away_then("200 OK", ns).await, "winpool-agents").await.expect("the API server came back");
        let forbidden = r#"{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"Forbidden","code":403,"message":"forbidden"}"#;
        let refused = ensure_agent_namespace(&away_then("403 Forbidden", forbidden).await, "winpool-agents").await;
        assert!(matches!(refused, Err(Error::AgentNamespace { source: kube::Error::Api(ref s), .. }) if s.code == 403), "{refused:?}");
    }
}
