//! The pool's pod-network DaemonSet as a round decides it (pure): written
//! when missing or changed, deleted when the operator runs without one. The
//! DaemonSet itself: [`crate::builders::pod_network`].

use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::ResourceExt;

use super::Settings;
use super::agent::{AgentWrite, daemonset_write};
use crate::api::WindowsNodePool;
use crate::builders::pod_network::{is_pod_network, pod_network_daemonset};

#[derive(Default)]
pub(crate) struct PodNetworkWrites {
    /// Written with the agent's DaemonSet, before any node is started.
    pub(crate) write: Option<AgentWrite>,
    /// Deleted last, when `--pod-network-image` is empty.
    pub(crate) delete: Option<String>,
}

pub(crate) fn pod_network_writes(pool: &WindowsNodePool, settings: &Settings, ds_of_pool: &[Arc<DaemonSet>]) -> PodNetworkWrites {
    let Some(image) = settings.pod_network_image.as_deref() else {
        let delete = ds_of_pool.iter().find(|d| is_pod_network(d) && d.metadata.deletion_timestamp.is_none()).map(|d| d.name_any());
        return PodNetworkWrites { write: None, delete };
    };
    let wanted = pod_network_daemonset(pool, &settings.agent_namespace, image, &settings.agent.pod);
    PodNetworkWrites { write: daemonset_write(wanted, ds_of_pool), delete: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> WindowsNodePool {
        crate::test_builders::pool("aks1").build()
    }

    #[test]
    fn the_pod_network_daemonset_is_written_once_and_deleted_when_turned_off() {
        let mut settings = Settings::example("winpool/agent:1");
        let first = pod_network_writes(&pool(), &settings, &[]);
        let written = first.write.expect("missing: written").daemonset;
        assert_eq!(written.metadata.name.as_deref(), Some("winpool-aks1-pod-network"));
        let live = [Arc::new(written)];
        let again = pod_network_writes(&pool(), &settings, &live);
        assert!(again.write.is_none() && again.delete.is_none(), "up to date: nothing to do");
        settings.pod_network_image = None;
        let off = pod_network_writes(&pool(), &settings, &live);
        assert!(off.write.is_none());
        assert_eq!(off.delete.as_deref(), Some("winpool-aks1-pod-network"));
    }
}
