//! The pool's pod-network DaemonSet, built (purely) from the pool and the
//! operator's settings.
//!
//! AKS's node image removes the Azure CNI HNS network at every boot (its
//! boot-time HNS clean-up), and Azure CNI creates it again only when a pod
//! sandbox is set up on the node. A node winpool drained keeps only pods on
//! the host network (HostProcess: the agent, CSI node plugins,
//! cloud-node-manager), whose sandboxes do not go through the CNI: after the
//! reboot nothing would bring the network back, kube-proxy would program
//! nothing, and the node could never be verified. So every pool's nodes run
//! one minimal pod that is on the pod network, `winpool-<pool>-pod-network`:
//! a pause container as `ContainerUser`, no token, no privilege. A DaemonSet
//! pod is not drained and tolerates the cordon; it tolerates every taint, as
//! winpool's own does, so that winpool's HNS taint cannot keep it off the
//! node whose HNS it must bring back. Cost: one pod, one pod IP and one HNS
//! endpoint per node (`--pod-network-image=` turns it off).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Container, PodSecurityContext, PodSpec, ResourceRequirements, Toleration, WindowsSecurityContextOptions};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::api::{WindowsNodePool, names};
use crate::builders::daemonset::{AgentPodOptions, LABEL_APP, pool_daemonset, pull_secrets};

/// `app.kubernetes.io/name` of the pod-network DaemonSets and their pods.
pub const APP_POD_NETWORK: &str = "winpool-pod-network";
/// The Kubernetes pause image, which has a Windows variant for each
/// supported Windows Server release.
pub const DEFAULT_IMAGE: &str = "registry.k8s.io/pause:3.10";

/// `winpool-<pool>-pod-network`.
pub fn daemonset_name(pool: &str) -> String {
    format!("winpool-{pool}-pod-network")
}

pub fn is_pod_network(ds: &DaemonSet) -> bool {
    ds.metadata.labels.as_ref().and_then(|l| l.get(LABEL_APP)).map(String::as_str) == Some(APP_POD_NETWORK)
}

/// The pool's pod-network DaemonSet: on the nodes its agent runs on (the
/// pool's Windows nodes and the admin's node selection), with the admin's
/// pull secrets and priority class.
pub fn pod_network_daemonset(pool: &WindowsNodePool, namespace: &str, image: &str, options: &AgentPodOptions) -> DaemonSet {
    let pool_name = pool.metadata.name.clone().unwrap_or_default();
    let selector_labels: BTreeMap<String, String> =
        [(LABEL_APP.to_string(), APP_POD_NETWORK.to_string()), (names::LABEL_POOL.to_string(), pool_name.clone())].into();
    let mut node_selector = options.node_selector.clone();
    node_selector.extend([(names::LABEL_OS.to_string(), "windows".to_string()), (names::LABEL_POOL.to_string(), pool_name.clone())]);
    let container = Container {
        name: "pause".into(),
        image: Some(image.into()),
        // Requests only: a pause container that hit a limit would take the
        // node's network with it at the next boot.
        resources: Some(ResourceRequirements {
            requests: Some([("cpu".to_string(), Quantity("10m".into())), ("memory".to_string(), Quantity("16Mi".into()))].into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let pod = PodSpec {
        // Not on the host network: the default, left unset as the API server
        // returns it (so no drift).
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        node_selector: Some(node_selector),
        priority_class_name: Some(options.priority_class_name.clone().unwrap_or_else(|| "system-node-critical".into())),
        security_context: Some(PodSecurityContext {
            windows_options: Some(WindowsSecurityContextOptions { run_as_user_name: Some("ContainerUser".into()), ..Default::default() }),
            ..Default::default()
        }),
        tolerations: Some(vec![Toleration { operator: Some("Exists".into()), ..Default::default() }]),
        termination_grace_period_seconds: Some(1),
        image_pull_secrets: pull_secrets(options),
        containers: vec![container],
        ..Default::default()
    };
    pool_daemonset(pool, namespace, daemonset_name(&pool_name), selector_labels, None, pod)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> WindowsNodePool {
        crate::test_builders::pool("aks1").build()
    }

    #[test]
    fn one_unprivileged_pod_on_the_pod_network_per_pool_node_that_no_taint_keeps_off() {
        let ds = pod_network_daemonset(&pool(), "winpool-agents", DEFAULT_IMAGE, &AgentPodOptions::default());
        assert_eq!(ds.metadata.name.as_deref(), Some("winpool-aks1-pod-network"));
        assert!(is_pod_network(&ds));
        let pod = ds.spec.unwrap().template.spec.unwrap();
        assert_ne!(pod.host_network, Some(true), "its sandbox must go through the CNI");
        let sel = pod.node_selector.unwrap();
        assert_eq!(
            (sel.get("kubernetes.io/os").map(String::as_str), sel.get(names::LABEL_POOL).map(String::as_str)),
            (Some("windows"), Some("aks1"))
        );
        let tolerations = pod.tolerations.unwrap();
        assert_eq!((tolerations.len(), tolerations[0].key.as_deref(), tolerations[0].operator.as_deref()), (1, None, Some("Exists")));
        assert_eq!(pod.automount_service_account_token, Some(false), "no API credentials on the pod network");
        let user = pod.security_context.unwrap().windows_options.unwrap();
        assert_eq!((user.run_as_user_name.as_deref(), user.host_process), (Some("ContainerUser"), None), "not SYSTEM, not on the host");
        assert!(pod.containers[0].resources.as_ref().unwrap().limits.is_none(), "never killed at a limit");
    }

    #[test]
    fn the_admins_node_selection_pull_secrets_and_priority_reach_it() {
        let options = AgentPodOptions {
            image_pull_secrets: vec!["mirror".into()],
            node_selector: [("agent.example.com/allowed".to_string(), "true".to_string())].into(),
            priority_class_name: Some("winpool-agents".into()),
            ..Default::default()
        };
        let ds = pod_network_daemonset(&pool(), "winpool-agents", "mirror.corp/pause:3.10", &options);
        let pod = ds.spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.containers[0].image.as_deref(), Some("mirror.corp/pause:3.10"));
        assert_eq!(pod.node_selector.unwrap().get("agent.example.com/allowed").map(String::as_str), Some("true"));
        assert_eq!(pod.image_pull_secrets.unwrap()[0].name, "mirror");
        assert_eq!(pod.priority_class_name.as_deref(), Some("winpool-agents"));
    }
}
