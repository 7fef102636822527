//! What upgrades from earlier releases need, in one place, each part with
//! the release that removes it. A migration reads the old layout for one
//! minor (docs/support.md); 0.2.0 was never published (no release process
//! produced it), so 0.3.0 keeps both and 0.4.0 removes them: a cluster that
//! has run 0.3.0 holds nothing of the old layouts.
//!
//! - **0.1.0 → 0.2.0, removed in 0.4.0**: one agent DaemonSet per revision
//!   became one per pool, each revision's configuration a ConfigMap. A
//!   DaemonSet of the earlier layout is read for its revision and
//!   configuration ([`legacy_revision`], [`legacy_config`]); its ConfigMap is
//!   written before it is deleted (`controller::agent::configmap_writes`).
//! - **0.2.0 → 0.3.0, removed in 0.4.0**: agents reported in Node annotations,
//!   now in `WindowsNodeReport`s. Until a node's report exists, its
//!   annotations are read as its report ([`AgentReport::from_annotations`]);
//!   the HNS counts among them are dropped when the node starts Applying
//!   (`rollout::summary`), since no new agent rewrites them.
//! - **Reports in the spec, removed in 0.4.0**: agents built before 0.3.0
//!   (never published) wrote their observations in the report's spec, now
//!   in its status. Until a node's new agent has written the status, the
//!   spec is read ([`crate::report::WindowsNodeReport::observations`]); the
//!   agent then clears it (`agent/internal/agent/report.go`).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;

use crate::api::{OsVersion, names};
use crate::decision::agent_report::{AgentReport, ReportSource, Reported};
use crate::node_record::NodeRecord;
use crate::revision::NodeConfig;
use crate::rollout::Preflight;

/// A DaemonSet of the earlier layout (one per revision, labelled with it).
pub fn legacy_revision(ds: &DaemonSet) -> Option<&str> {
    ds.metadata.labels.as_ref()?.get(names::LABEL_REVISION).map(String::as_str)
}

/// The configuration an earlier per-revision DaemonSet carried in its agent's
/// environment, so that a node still on that revision keeps a ConfigMap for it
/// when the layout changes under it.
pub fn legacy_config(ds: &DaemonSet) -> Option<NodeConfig> {
    let spec = ds.spec.as_ref()?.template.spec.as_ref()?;
    let agent = spec.containers.iter().find(|c| c.name == "agent")?;
    let env: BTreeMap<&str, &str> = agent.env.iter().flatten().filter_map(|e| Some((e.name.as_str(), e.value.as_deref()?))).collect();
    let os: OsVersion = serde_json::from_value(serde_json::json!(env.get("WINPOOL_OS_VERSION")?)).ok()?;
    let mut cfg = NodeConfig::empty();
    cfg.os_build = os.build();
    cfg.patch_level = env.get("WINPOOL_PATCH_LEVEL")?.to_string();
    cfg.runtime_name = env.get("WINPOOL_RUNTIME").unwrap_or(&"containerd").to_string();
    cfg.runtime_version = env.get("WINPOOL_CONTAINERD_VERSION").map(|s| s.to_string());
    cfg.cni_mode = serde_json::from_value(serde_json::json!(env.get("WINPOOL_CNI_MODE")?)).ok()?;
    cfg.cni_required = Some(cfg.cni_mode);
    cfg.enable_dsr = env.get("WINPOOL_KUBE_PROXY_DSR") == Some(&"true");
    cfg.csi_proxy_version = env.get("WINPOOL_CSI_PROXY_VERSION").map(|s| s.to_string());
    Some(cfg)
}

impl AgentReport {
    /// The report an agent of 0.2.0 wrote as annotations on its Node.
    pub fn from_annotations(node: &NodeRecord) -> Self {
        let owned = |k: &str| node.annotation(k).map(str::to_string);
        let source = if owned(names::ANN_AGENT_VERSION).is_some() || owned(names::ANN_APPLY_STATUS).is_some() {
            ReportSource::Annotations
        } else {
            ReportSource::None
        };
        AgentReport {
            source,
            agent_version: owned(names::ANN_AGENT_VERSION),
            applied_revision: owned(names::ANN_APPLIED_REVISION),
            apply_status: node.annotation(names::ANN_APPLY_STATUS).map(Reported::parse),
            apply_message: owned(names::ANN_APPLY_MESSAGE),
            answers_start: None,
            heartbeat: None,
            no_reboot: false,
            cni_mode: node.annotation(names::ANN_CNI_MODE).map(Reported::parse),
            csi_proxy_version: owned(names::ANN_CSI_PROXY_VERSION),
            runtime_service: owned(names::ANN_RUNTIME_SERVICE),
            csi_proxy_host: owned(names::ANN_CSI_PROXY_HOST),
            hns_load_balancers: node.annotation(names::ANN_HNS_LOAD_BALANCERS).map(Reported::count),
            hns_endpoints: node.annotation(names::ANN_HNS_ENDPOINTS).map(Reported::count),
            hns_boot_id: None,
            preflight: Preflight::parse(node.annotation(names::ANN_PREFLIGHT), node.annotation(names::ANN_PREFLIGHT_REVISION)),
            // An agent of 0.2.0 never staged; its pool waits for the new agent.
            staging: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::DaemonSetSpec;
    use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec, PodTemplateSpec};

    use super::*;
    use crate::api::WindowsNodePoolSpec;
    use crate::revision::revision_of;

    fn env_var(name: &str, value: &str) -> EnvVar {
        EnvVar { name: name.into(), value: Some(value.into()), ..Default::default() }
    }

    /// A DaemonSet exactly as the per-revision layout wrote it (env names and values).
    fn legacy_ds(env: &[(&str, &str)]) -> DaemonSet {
        let mut ds = DaemonSet::default();
        ds.metadata.labels = Some([("winpool.dev/revision".to_string(), "abc".to_string())].into());
        ds.spec = Some(DaemonSetSpec {
            template: PodTemplateSpec {
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "agent".into(),
                        env: Some(env.iter().map(|(k, v)| env_var(k, v)).collect()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        });
        ds
    }

    #[test]
    fn an_earlier_per_revision_daemonset_yields_the_configuration_it_ran() {
        let spec: WindowsNodePoolSpec = serde_saphyr::from_str(
            "nodeSelector: {}\nos: {version: ltsc2022, patchLevel: 10.0.20348.2762}\nruntime: {version: 1.7.22}\nnetworking: {cniMode: l2bridge, kubeProxy: {enableDSR: true}}\nstorage: {csiProxy: {enabled: true, version: v1.1.3}}",
        )
        .unwrap();
        let ds = legacy_ds(&[
            ("WINPOOL_POOL", "w"),
            ("WINPOOL_REVISION", "abc"),
            ("WINPOOL_OS_VERSION", "ltsc2022"),
            ("WINPOOL_PATCH_LEVEL", "10.0.20348.2762"),
            ("WINPOOL_RUNTIME", "containerd"),
            ("WINPOOL_CNI_MODE", "l2bridge"),
            ("WINPOOL_KUBE_PROXY_DSR", "true"),
            ("WINPOOL_CONTAINERD_VERSION", "1.7.22"),
            ("WINPOOL_CSI_PROXY_VERSION", "v1.1.3"),
        ]);
        assert_eq!(legacy_revision(&ds), Some("abc"));
        let cfg = legacy_config(&ds).expect("readable");
        assert_eq!(cfg, NodeConfig::from_spec(&spec));
        assert_eq!(cfg.revision(), revision_of(&spec));
        assert_eq!(legacy_config(&legacy_ds(&[("WINPOOL_OS_VERSION", "ltsc2022")])), None, "no patch level: unreadable");
    }
}
