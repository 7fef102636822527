//! The pool's CSI Proxy DaemonSets as a round decides them (pure): which to
//! write, which to delete. The DaemonSets themselves: [`crate::builders::csi_proxy`].

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;

use super::Settings;
use super::agent::{AgentWrite, daemonset_write};
use crate::api::{WindowsNodePool, names};
use crate::builders::configmap::CONFIG_KEY;
use crate::builders::csi_proxy::{daemonsets, is_csi_proxy};
use crate::decision::revision::NodeConfig;
use crate::decision::rollout::Plan;

#[derive(Default)]
pub(crate) struct CsiProxyWrites {
    /// Written with the revision ConfigMaps, before any node is labelled for a revision.
    pub(crate) write: Vec<AgentWrite>,
    /// CSI Proxy DaemonSets of versions no revision the nodes carry asks for.
    pub(crate) delete: Vec<String>,
}

/// Each revision the plan keeps (the target, and those nodes still carry)
/// with the CSI Proxy version it asks for: the target's from the spec, the
/// others' from their ConfigMaps, which are the record of what they asked.
pub(crate) fn csi_proxy_writes(
    pool: &WindowsNodePool,
    settings: &Settings,
    plan: &Plan,
    cms_of_pool: &[Arc<ConfigMap>],
    ds_of_pool: &[Arc<DaemonSet>],
) -> CsiProxyWrites {
    let target = NodeConfig::from_spec(&pool.spec).csi_proxy_version;
    let revisions: BTreeMap<String, Option<String>> = plan
        .config_revisions
        .iter()
        .map(|rev| (rev.clone(), if *rev == plan.revision { target.clone() } else { configmap_csi_proxy(cms_of_pool, rev) }))
        .collect();
    let wanted = daemonsets(pool, &settings.agent_namespace, &settings.csi_proxy_repository, &revisions);
    let delete = ds_of_pool
        .iter()
        .filter(|d| is_csi_proxy(d) && d.metadata.deletion_timestamp.is_none())
        .map(|d| d.name_any())
        .filter(|n| !wanted.iter().any(|w| w.metadata.name.as_deref() == Some(n.as_str())))
        .collect();
    let write = wanted.into_iter().filter_map(|w| daemonset_write(w, ds_of_pool)).collect();
    CsiProxyWrites { write, delete }
}

/// The CSI Proxy version the revision's ConfigMap asks for (`csiProxyVersion`).
fn configmap_csi_proxy(cms_of_pool: &[Arc<ConfigMap>], rev: &str) -> Option<String> {
    let cm = cms_of_pool.iter().find(|c| c.labels().get(names::LABEL_REVISION).map(String::as_str) == Some(rev))?;
    let config: serde_json::Value = serde_json::from_str(cm.data.as_ref()?.get(CONFIG_KEY)?).ok()?;
    config.get("csiProxyVersion")?.as_str().map(str::to_string)
}
