//! HNS readiness (SPEC §3), as pure functions the controller feeds with watch
//! events and Node fields: no I/O, no async.
//!
//! - [`HnsTracker`]: the cluster-wide HNS load every Windows node is expected to
//!   hold, kept incrementally from Service and EndpointSlice events. A change
//!   costs O(that object) — O(that Service's slices) when a Service starts or
//!   stops being programmed — never a recount of the cluster.
//! - [`Limits`]: what a node of each Windows Server release is assumed to carry.
//! - [`capacity`]: the pool's `HNSCapacity` condition and `status.hns`.
//! - [`node_readiness`], [`node_condition`], [`taint_wanted`], [`taints_update`]:
//!   the Node condition `WindowsHNSReady` and the taint
//!   `winpool.dev/hns-not-ready:NoSchedule`.
//!
//! # The model: a lower bound of what a caught-up node holds
//!
//! A node is Ready when the counts its agent reports reach the expected ones, so
//! an expected count that is too high would keep healthy nodes tainted forever,
//! while one that is a little low only lets a node through slightly early (the
//! tolerance exists for the same reason). The model therefore counts only what
//! kube-proxy (winkernel) programs on *every* Windows node:
//!
//! - **Load-balancer policies**, per Service port and per IP family of the
//!   Service: 1 for the ClusterIP; +1 NodePort for types NodePort and
//!   LoadBalancer (not for a LoadBalancer with
//!   `allocateLoadBalancerNodePorts: false` and no nodePort on that port); +1 per
//!   distinct `status.loadBalancer.ingress[].ip` (type LoadBalancer, `ipMode`
//!   unset or `VIP`) and per distinct `spec.externalIPs` entry *of that family*
//!   (an IPv4 address is programmed only by the IPv4 proxier, so in a dual-stack
//!   Service it counts once, not once per family). Headless Services,
//!   ExternalName Services and Services without an allocated ClusterIP get
//!   nothing (kube-proxy skips them). `internalTrafficPolicy: Local` drops the
//!   ClusterIP policy (it exists only on nodes with a local endpoint).
//!   A family's policies count only while the Service has at least one ready
//!   endpoint of that family: winkernel creates no load balancer without
//!   endpoints ("Skipped creating Hns LoadBalancer ... No endpoints available").
//! - **Remote endpoints**: distinct ready endpoint addresses (the first address
//!   of each endpoint whose `conditions.ready` is not `false`, as kube-proxy
//!   uses it) of EndpointSlices that belong, via label
//!   `kubernetes.io/service-name`, to a Service whose policies of that family
//!   count. Slices of headless Services, orphan slices and FQDN slices count
//!   nothing. An address shared by several slices or Services counts once.
//! - **Backends per Service** (for HNS's "invalid number of destinations"): the
//!   Service's ready addresses summed over its slices, per family, taking the
//!   larger family. An address duplicated across two slices of one Service
//!   (briefly, while the EndpointSlice controller moves it) counts twice.
//!
//! Not modelled (each makes a node hold *more* than expected on some nodes or
//! less on a few, which the tolerance absorbs): `externalTrafficPolicy: Local`
//! with DSR (NodePort/ingress policies only where a local endpoint runs), health
//! check policies, terminating-but-serving endpoints used when none is ready,
//! and a node's own pods (local, not remote, endpoints).

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, NodeCondition, Service, ServicePort, ServiceSpec, ServiceStatus, Taint,
};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use kube::runtime::watcher;

use crate::api::{HnsSpec, HnsStatus, OsVersion, conditions, names};
use crate::decision::rollout::HnsReadiness;

/// Label on an EndpointSlice naming its Service (set by the EndpointSlice controller).
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// Services listed in `status.hns.servicesOverBackendLimit`.
pub const MAX_LISTED_SERVICES: usize = 20;
/// Services named in the `HNSCapacity` message (the status lists up to [`MAX_LISTED_SERVICES`]).
const MAX_SERVICES_IN_MESSAGE: usize = 5;
/// Suggested tolerance for [`node_readiness`]: a node is Ready at 95% of the expected counts.
pub const DEFAULT_TOLERANCE_PERCENT: u8 = 5;

/// Condition reasons written by this module.
pub mod reasons {
    /// `HNSCapacity`: every count below warnPercent of its limit, no Service over the backend limit.
    pub const WITHIN_LIMITS: &str = crate::api::CapacityState::WithinLimits.as_str();
    /// `HNSCapacity`: a count at or above warnPercent of its limit (but not above the limit).
    pub const NEAR_LIMIT: &str = crate::api::CapacityState::NearLimit.as_str();
    /// `HNSCapacity`: a count above its limit, or a Service with more ready backends than maxBackendsPerService.
    pub const EXCEEDED: &str = crate::api::CapacityState::Exceeded.as_str();

    /// `WindowsHNSReady=True`: the reported counts reach the expected ones (within tolerance).
    pub const CAUGHT_UP: &str = "CaughtUp";
    /// `WindowsHNSReady=False`: the reported counts are below the expected ones.
    pub const CATCHING_UP: &str = "CatchingUp";
    /// `WindowsHNSReady=False`: HNS held what it should in this boot and now holds almost
    /// nothing (its load balancers collapsed, or HNS restarted and kube-proxy programs it anew).
    pub const COLLAPSED: &str = "Collapsed";
    /// `WindowsHNSReady=False`: HNS held what it should in this boot and has stayed behind
    /// longer than a moving count explains (load balancers deleted out of band, never recreated).
    pub const DRIFTED: &str = "Drifted";
    /// `WindowsHNSReady=False`: the node restarted and its agent has not reported since (within the grace period).
    pub const AWAITING_REPORT: &str = "AwaitingReport";
    /// `WindowsHNSReady=Unknown`: no counts on the node.
    pub const NOT_REPORTED: &str = "NotReported";
}

mod capacity;
mod limits;
mod pacing;
mod readiness;
mod tracker;

pub use capacity::*;
pub use limits::*;
pub use pacing::*;
pub use readiness::*;
pub use tracker::*;

#[cfg(test)]
mod tests;
