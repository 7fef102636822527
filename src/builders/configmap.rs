//! The revision ConfigMap: the node-level configuration of one revision, which
//! the agent on a node reads when the node's `winpool.dev/revision` label names
//! it. Built purely from a pool's spec.
//!
//! Written once per revision and immutable (Kubernetes refuses changes to
//! `immutable: true` ConfigMaps, and the kubelet-free agent can cache it
//! forever); deleted when no node of the pool carries the revision any more.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

use crate::api::{CniMode, WindowsNodePool, names};
use crate::builders::daemonset::{APP_AGENT, LABEL_APP, LABEL_MANAGED_BY, owner_reference};
use crate::decision::revision::NodeConfig;

/// The key the agent reads (agent/internal/names.ConfigMapKey).
pub const CONFIG_KEY: &str = "config.json";

/// `winpool-<pool>-<revision>`: at most 8 + 63 + 1 + 10 characters, well within
/// a ConfigMap name's 253, so the agent can compute it from the node's labels.
pub fn configmap_name(pool: &str, rev: &str) -> String {
    format!("winpool-{pool}-{rev}")
}

/// What the agent reads: agent/internal/config.Revision.
#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RevisionConfig<'a> {
    pub revision: &'a str,
    pub pool: &'a str,
    pub os_build: u32,
    pub patch_level: &'a str,
    pub runtime_name: &'a str,
    pub runtime_version: Option<&'a str>,
    pub cni_mode: &'a str,
    pub kube_proxy_mode: &'static str,
    pub enable_dsr: bool,
    pub csi_proxy_version: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updates: Option<&'a crate::api::OsUpdates>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_archive: Option<&'a crate::api::RuntimeArchive>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_upgrade: Option<crate::api::RuntimeUpgrade>,
}

impl<'a> RevisionConfig<'a> {
    pub fn new(pool: &'a str, rev: &'a str, cfg: &'a NodeConfig) -> Self {
        RevisionConfig {
            revision: rev,
            pool,
            os_build: cfg.os_build,
            patch_level: &cfg.patch_level,
            runtime_name: &cfg.runtime_name,
            runtime_version: cfg.runtime_version.as_deref(),
            cni_mode: cfg.cni_required.map_or("", CniMode::as_str),
            kube_proxy_mode: "winkernel",
            enable_dsr: cfg.enable_dsr,
            csi_proxy_version: cfg.csi_proxy_version.as_deref(),
            updates: cfg.updates.as_ref(),
            runtime_archive: cfg.runtime_archive.as_ref(),
            runtime_upgrade: cfg.runtime_upgrade,
        }
    }
}

pub fn labels(pool: &str, rev: &str) -> BTreeMap<String, String> {
    [
        (LABEL_APP.to_string(), APP_AGENT.to_string()),
        (LABEL_MANAGED_BY.to_string(), "winpool".to_string()),
        (names::LABEL_POOL.to_string(), pool.to_string()),
        (names::LABEL_REVISION.to_string(), rev.to_string()),
    ]
    .into()
}

/// The ConfigMap of `rev` from its configuration.
pub fn revision_configmap(pool: &WindowsNodePool, rev: &str, cfg: &NodeConfig, namespace: &str) -> ConfigMap {
    let pool_name = pool.metadata.name.clone().unwrap_or_default();
    let json = serde_json::to_string_pretty(&RevisionConfig::new(&pool_name, rev, cfg)).expect("a revision config serializes");
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(configmap_name(&pool_name, rev)),
            namespace: Some(namespace.into()),
            labels: Some(labels(&pool_name, rev)),
            owner_references: Some(vec![owner_reference(pool)]),
            ..Default::default()
        },
        data: Some([(CONFIG_KEY.to_string(), json)].into()),
        immutable: Some(true),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(extra: &str) -> WindowsNodePool {
        crate::test_builders::pool("win22").with(extra).build()
    }

    /// The agent parses exactly these keys (agent/internal/config): a renamed
    /// field here would leave every agent without its configuration.
    #[test]
    fn the_configmap_carries_what_the_agent_reads() {
        let p = pool(
            "runtime: {version: v1.7.22}\nnetworking: {cniMode: l2bridge, kubeProxy: {enableDSR: true}}\nstorage: {csiProxy: {enabled: true, version: v1.1.3}}",
        );
        let cfg = NodeConfig::from_spec(&p.spec);
        let cm = revision_configmap(&p, "abc", &cfg, "winpool-agents");
        assert_eq!(cm.metadata.name.as_deref(), Some("winpool-win22-abc"));
        assert_eq!(cm.metadata.namespace.as_deref(), Some("winpool-agents"));
        assert_eq!(cm.immutable, Some(true));
        let labels = cm.metadata.labels.unwrap();
        assert_eq!((labels["winpool.dev/pool"].as_str(), labels["winpool.dev/revision"].as_str()), ("win22", "abc"));
        let owner = &cm.metadata.owner_references.unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("WindowsNodePool", "uid-1"));
        let got: serde_json::Value = serde_json::from_str(&cm.data.unwrap()[CONFIG_KEY]).unwrap();
        let want = serde_json::json!({
            "revision": "abc", "pool": "win22", "osBuild": 20348, "patchLevel": "10.0.20348.2762",
            "runtimeName": "containerd", "runtimeVersion": "1.7.22", "cniMode": "l2bridge",
            "kubeProxyMode": "winkernel", "enableDsr": true, "csiProxyVersion": "v1.1.3",
        });
        assert_eq!(got, want);
    }

    /// agent/internal/config parses these two objects exactly so.
    #[test]
    fn update_packages_the_runtime_archive_and_upgrade_mode_reach_the_agent() {
        let sha = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9";
        let p = pool(&format!(
            "runtime: {{version: 1.7.22, upgrade: InPlace, archive: {{url: 'https://m.example/containerd-1.7.22-windows-amd64.tar.gz', sha256: {sha}}}}}"
        ));
        let mut spec = p.spec.clone();
        spec.os = serde_saphyr::from_str(&format!(
            "{{version: ltsc2022, patchLevel: 10.0.20348.2762, updates: {{source: Packages, packages: [{{url: 'https://m.example/kb.msu', sha256: {sha}}}, {{path: 'C:\\u\\kb.cab', sha256: {sha}}}]}}}}"
        ))
        .unwrap();
        let cfg = NodeConfig::from_spec(&spec);
        let cm = revision_configmap(&p, "abc", &cfg, "ns");
        let got: serde_json::Value = serde_json::from_str(&cm.data.unwrap()[CONFIG_KEY]).unwrap();
        assert_eq!(
            got["updates"],
            serde_json::json!({"source": "Packages", "packages": [{"url": "https://m.example/kb.msu", "sha256": sha}, {"path": "C:\\u\\kb.cab", "sha256": sha}]})
        );
        assert_eq!(
            got["runtimeArchive"],
            serde_json::json!({"url": "https://m.example/containerd-1.7.22-windows-amd64.tar.gz", "sha256": sha})
        );
        assert_eq!(got["runtimeUpgrade"], "InPlace", "agent/internal/config Revision.RuntimeUpgrade");
    }

    #[test]
    fn unmanaged_runtime_and_disabled_csi_proxy_are_null() {
        let p = pool("");
        let cfg = NodeConfig::from_spec(&p.spec);
        let cm = revision_configmap(&p, "r", &cfg, "ns");
        let got: serde_json::Value = serde_json::from_str(&cm.data.unwrap()[CONFIG_KEY]).unwrap();
        assert_eq!(got["runtimeVersion"], serde_json::Value::Null);
        assert_eq!(got["csiProxyVersion"], serde_json::Value::Null);
        // No mode required: the agent takes the one it finds (AKS and EKS are l2bridge).
        assert_eq!(got["cniMode"], "");
        let p = pool("networking: {cniMode: overlay}");
        let cm = revision_configmap(&p, "r", &NodeConfig::from_spec(&p.spec), "ns");
        let got: serde_json::Value = serde_json::from_str(&cm.data.unwrap()[CONFIG_KEY]).unwrap();
        assert_eq!(got["cniMode"], "overlay");
    }
}
