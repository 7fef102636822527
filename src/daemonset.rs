//! The per-revision agent DaemonSet, built (purely) from a pool's spec.
//!
//! One DaemonSet per revision in use, selecting nodes by
//! `winpool.dev/pool=<pool>, winpool.dev/revision=<rev>`: moving a node's
//! label is what moves its configuration, and a revision's DaemonSet can be
//! deleted once no node carries it.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec, ResourceRequirements, Toleration,
    WindowsSecurityContextOptions,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::{WindowsNodePool, names};
use crate::revision::NodeConfig;

pub const LABEL_APP: &str = "app.kubernetes.io/name";
pub const APP_AGENT: &str = "winpool-agent";
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// Images the operator fills in where the pool leaves them empty.
#[derive(Debug, Clone)]
pub struct AgentImages {
    pub agent: String,
    pub csi_proxy: String,
}

/// `winpool-<pool>-<rev>`, shortened (with a hash of the pool name) when a long pool
/// name would pass the 63 characters a DaemonSet's pods' labels allow.
pub fn daemonset_name(pool: &str, rev: &str) -> String {
    let full = format!("winpool-{pool}-{rev}");
    if full.len() <= 63 {
        return full;
    }
    use sha2::{Digest, Sha256};
    let h: String = Sha256::digest(pool.as_bytes()).iter().take(3).map(|b| format!("{b:02x}")).collect();
    let keep = 63 - "winpool-".len() - 1 - h.len() - 1 - rev.len();
    format!("winpool-{}{h}-{rev}", &pool[..keep])
}

fn env(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar { name: name.into(), value: Some(value.into()), value_from: None }
}

pub fn agent_daemonset(pool: &WindowsNodePool, rev: &str, namespace: &str, images: &AgentImages) -> DaemonSet {
    let pool_name = pool.metadata.name.clone().unwrap_or_default();
    let spec = &pool.spec;
    let cfg = NodeConfig::from_spec(spec);
    let selector_labels: BTreeMap<String, String> = [
        (LABEL_APP.to_string(), APP_AGENT.to_string()),
        (names::LABEL_POOL.to_string(), pool_name.clone()),
        (names::LABEL_REVISION.to_string(), rev.to_string()),
    ]
    .into();
    let mut labels = selector_labels.clone();
    labels.insert(LABEL_MANAGED_BY.into(), "winpool".into());

    let node_selector: BTreeMap<String, String> = [
        (names::LABEL_OS.to_string(), "windows".to_string()),
        (names::LABEL_POOL.to_string(), pool_name.clone()),
        (names::LABEL_REVISION.to_string(), rev.to_string()),
    ]
    .into();

    let agent_image = if spec.agent.image.is_empty() { images.agent.clone() } else { spec.agent.image.clone() };
    let mut agent_env = vec![
        EnvVar {
            name: "NODE_NAME".into(),
            value: None,
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector { field_path: "spec.nodeName".into(), api_version: None }),
                ..Default::default()
            }),
        },
        env("WINPOOL_POOL", pool_name.clone()),
        env("WINPOOL_REVISION", rev),
        env("WINPOOL_OS_VERSION", spec.os.version.as_str()),
        env("WINPOOL_PATCH_LEVEL", cfg.patch_level.clone()),
        env("WINPOOL_RUNTIME", cfg.runtime_name.clone()),
        env("WINPOOL_CNI_MODE", cfg.cni_mode.as_str()),
        env("WINPOOL_KUBE_PROXY_DSR", cfg.enable_dsr.to_string()),
    ];
    if let Some(v) = &cfg.runtime_version {
        agent_env.push(env("WINPOOL_CONTAINERD_VERSION", v.clone()));
    }
    if let Some(v) = &cfg.csi_proxy_version {
        agent_env.push(env("WINPOOL_CSI_PROXY_VERSION", v.clone()));
    }
    let small = ResourceRequirements {
        requests: Some([("cpu".to_string(), Quantity("50m".into())), ("memory".to_string(), Quantity("64Mi".into()))].into()),
        limits: Some([("memory".to_string(), Quantity("512Mi".into()))].into()),
        ..Default::default()
    };
    let mut containers = vec![Container {
        name: "agent".into(),
        image: Some(agent_image),
        env: Some(agent_env),
        resources: Some(small.clone()),
        ..Default::default()
    }];
    if let Some(v) = &cfg.csi_proxy_version {
        containers.push(Container {
            name: "csi-proxy".into(),
            image: Some(format!("{}:{v}", images.csi_proxy)),
            args: Some(vec!["-v=2".into()]),
            resources: Some(small),
            ..Default::default()
        });
    }

    let tolerate = |key: &str| Toleration { key: Some(key.into()), operator: Some("Exists".into()), ..Default::default() };
    DaemonSet {
        metadata: ObjectMeta {
            name: Some(daemonset_name(&pool_name, rev)),
            namespace: Some(namespace.into()),
            labels: Some(labels.clone()),
            owner_references: Some(vec![OwnerReference {
                api_version: "winpool.dev/v1alpha1".into(),
                kind: "WindowsNodePool".into(),
                name: pool_name.clone(),
                uid: pool.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        spec: Some(DaemonSetSpec {
            selector: LabelSelector { match_labels: Some(selector_labels), match_expressions: None },
            // A revision's pods never change: a new configuration is a new DaemonSet.
            update_strategy: Some(DaemonSetUpdateStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDaemonSet { max_unavailable: Some(IntOrString::String("100%".into())), max_surge: None }),
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels), ..Default::default() }),
                spec: Some(PodSpec {
                    host_network: Some(true),
                    priority_class_name: Some("system-node-critical".into()),
                    node_selector: Some(node_selector),
                    security_context: Some(PodSecurityContext {
                        windows_options: Some(WindowsSecurityContextOptions {
                            host_process: Some(true),
                            run_as_user_name: Some("NT AUTHORITY\\SYSTEM".into()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    // The agent must run on the cordoned, HNS-not-ready node it is fixing.
                    tolerations: Some(vec![
                        tolerate("node.kubernetes.io/unschedulable"),
                        tolerate(names::TAINT_HNS_NOT_READY),
                        tolerate("node.kubernetes.io/not-ready"),
                        tolerate("os"),
                    ]),
                    termination_grace_period_seconds: Some(30),
                    containers,
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::WindowsNodePoolSpec;

    fn pool(name: &str, extra: &str) -> WindowsNodePool {
        let spec: WindowsNodePoolSpec =
            serde_yaml::from_str(&format!("nodeSelector: {{}}\nos: {{version: ltsc2022, patchLevel: 10.0.20348.2762}}\n{extra}")).unwrap();
        let mut p = WindowsNodePool::new(name, spec);
        p.metadata.uid = Some("uid-1".into());
        p
    }

    fn images() -> AgentImages {
        AgentImages { agent: "winpool/agent:dev".into(), csi_proxy: "winpool/csi-proxy".into() }
    }

    #[test]
    fn the_daemonset_runs_a_hostprocess_agent_on_the_revision_label() {
        let ds = agent_daemonset(&pool("win22", "runtime: {version: 1.7.22}"), "abc", "winpool-agents", &images());
        assert_eq!(ds.metadata.name.as_deref(), Some("winpool-win22-abc"));
        let pod = ds.spec.unwrap().template.spec.unwrap();
        let sel = pod.node_selector.unwrap();
        assert_eq!(sel["winpool.dev/pool"], "win22");
        assert_eq!(sel["winpool.dev/revision"], "abc");
        assert_eq!(sel["kubernetes.io/os"], "windows");
        assert_eq!(pod.host_network, Some(true));
        let win = pod.security_context.unwrap().windows_options.unwrap();
        assert_eq!(win.host_process, Some(true));
        assert_eq!(win.run_as_user_name.as_deref(), Some("NT AUTHORITY\\SYSTEM"));
        assert_eq!(pod.containers.len(), 1, "no csi-proxy unless enabled");
        let env = pod.containers[0].env.clone().unwrap();
        let get = |k: &str| env.iter().find(|e| e.name == k).and_then(|e| e.value.clone());
        assert_eq!(get("WINPOOL_PATCH_LEVEL").as_deref(), Some("10.0.20348.2762"));
        assert_eq!(get("WINPOOL_CONTAINERD_VERSION").as_deref(), Some("1.7.22"));
        assert_eq!(get("WINPOOL_REVISION").as_deref(), Some("abc"));
        assert_eq!(pod.containers[0].image.as_deref(), Some("winpool/agent:dev"));
        let tol: Vec<_> = pod.tolerations.unwrap().into_iter().filter_map(|t| t.key).collect();
        assert!(tol.contains(&"winpool.dev/hns-not-ready".to_string()));
        assert!(tol.contains(&"node.kubernetes.io/unschedulable".to_string()));
        let owner = &ds.metadata.owner_references.unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str(), owner.controller), ("WindowsNodePool", "uid-1", Some(true)));
    }

    #[test]
    fn csi_proxy_and_a_pool_image_are_honoured() {
        let p = pool("w", "storage: {csiProxy: {enabled: true, version: v1.1.3}}\nagent: {image: my/agent:1}");
        let pod = agent_daemonset(&p, "r", "ns", &images()).spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.containers[0].image.as_deref(), Some("my/agent:1"));
        assert_eq!(pod.containers[1].image.as_deref(), Some("winpool/csi-proxy:v1.1.3"));
    }

    #[test]
    fn long_pool_names_still_give_valid_names() {
        let long = "p".repeat(63);
        let n = daemonset_name(&long, "0123456789");
        assert!(n.len() <= 63, "{n}");
        assert!(n.ends_with("-0123456789"));
        assert_ne!(daemonset_name(&"q".repeat(63), "0123456789"), n);
        assert_eq!(daemonset_name("short", "0123456789"), "winpool-short-0123456789");
    }
}
