//! The objects winpool writes, built from a pool's spec: pure, compared with
//! what is in the cluster by the round (drift), written by the controller.
//!
//! - [`daemonset`]: the pool's agent DaemonSet.
//! - [`csi_proxy`]: CSI Proxy's HostProcess DaemonSet per version.
//! - [`pod_network`]: a pod on the pod network per node (AKS's HNS network after a boot).
//! - [`configmap`]: a revision's immutable ConfigMap.
//! - [`hook_job`]: a `rollout.hooks` Job for one node's start.

pub mod configmap;
pub mod csi_proxy;
pub mod daemonset;
pub mod hook_job;
pub mod pod_network;
pub mod quantity;
