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
use crate::rollout::HnsReadiness;

/// Label on an EndpointSlice naming its Service (set by the EndpointSlice controller).
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// Services listed in `status.hns.servicesOverBackendLimit`.
pub const MAX_LISTED_SERVICES: usize = 20;
/// Services named in the `HNSCapacity` message (the status lists up to [`MAX_LISTED_SERVICES`]).
const MAX_SERVICES_IN_MESSAGE: usize = 5;
/// Suggested tolerance for [`node_readiness`]: a node is Ready at 95% of the expected counts.
pub const DEFAULT_TOLERANCE_PERCENT: u8 = 5;
/// Longest annotation value quoted in a message.
const MAX_QUOTED: usize = 32;

/// Condition reasons written by this module.
pub mod reasons {
    /// `HNSCapacity`: every count below warnPercent of its limit, no Service over the backend limit.
    pub const WITHIN_LIMITS: &str = "WithinLimits";
    /// `HNSCapacity`: a count at or above warnPercent of its limit (but not above the limit).
    pub const NEAR_LIMIT: &str = "NearLimit";
    /// `HNSCapacity`: a count above its limit, or a Service with more ready backends than maxBackendsPerService.
    pub const EXCEEDED: &str = "Exceeded";

    /// `WindowsHNSReady=True`: the reported counts reach the expected ones (within tolerance).
    pub const CAUGHT_UP: &str = "CaughtUp";
    /// `WindowsHNSReady=False`: the reported counts are below the expected ones.
    pub const CATCHING_UP: &str = "CatchingUp";
    /// `WindowsHNSReady=False`: the node restarted and its agent has not reported since (within the grace period).
    pub const AWAITING_REPORT: &str = "AwaitingReport";
    /// `WindowsHNSReady=Unknown`: no counts on the node.
    pub const NOT_REPORTED: &str = "NotReported";
    /// `WindowsHNSReady=Unknown`: the counts on the node are not non-negative integers.
    pub const INVALID_REPORT: &str = "InvalidReport";
}

// ---------------------------------------------------------------------------
// Per-object contributions
// ---------------------------------------------------------------------------

/// Index of an address family in the per-family arrays: 0 = IPv4, 1 = IPv6.
fn family(ip: &IpAddr) -> usize {
    if ip.is_ipv4() { 0 } else { 1 }
}

/// What one Service adds to the expected HNS load: all the tracker keeps of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServiceContribution {
    /// Load-balancer policies per IP family (`[IPv4, IPv6]`) that every node
    /// programs once the Service has a ready endpoint of that family. Zero for
    /// a family the Service does not have, and for Services kube-proxy skips.
    pub load_balancers: [i64; 2],
}

impl ServiceContribution {
    /// Whether kube-proxy programs anything for this Service.
    pub fn programmed(&self) -> bool {
        self.load_balancers.iter().any(|&n| n > 0)
    }
}

/// The model of the module docs for one Service. Reads only the fields
/// [`strip_service`] keeps. Malformed fields (unparseable IPs, unknown types)
/// are skipped, never a panic.
pub fn service_contribution(svc: &Service) -> ServiceContribution {
    let none = ServiceContribution::default();
    let Some(spec) = &svc.spec else { return none };
    let type_ = spec.type_.as_deref().unwrap_or("ClusterIP");
    let cluster_ip = spec.cluster_ip.as_deref().unwrap_or("");
    if type_ == "ExternalName" || cluster_ip.is_empty() || cluster_ip == "None" {
        return none;
    }

    // The Service's families: spec.ipFamilies, else the ClusterIPs' own, else IPv4.
    let mut families = [false; 2];
    for f in spec.ip_families.iter().flatten() {
        match f.as_str() {
            "IPv4" => families[0] = true,
            "IPv6" => families[1] = true,
            _ => {}
        }
    }
    if !families.iter().any(|&f| f) {
        let ips = spec.cluster_ips.iter().flatten().map(String::as_str).chain(std::iter::once(cluster_ip));
        for ip in ips.filter_map(|s| s.parse::<IpAddr>().ok()) {
            families[family(&ip)] = true;
        }
    }
    if !families.iter().any(|&f| f) {
        families[0] = true;
    }

    // Distinct external and ingress IPs per family.
    let mut extra: [BTreeSet<IpAddr>; 2] = Default::default();
    let external = spec.external_ips.iter().flatten().map(String::as_str);
    let ingress = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter(|_| type_ == "LoadBalancer")
        .filter(|i| i.ip_mode.as_deref().is_none_or(|m| m == "VIP"))
        .filter_map(|i| i.ip.as_deref());
    for ip in external.chain(ingress).filter_map(|s| s.trim().parse::<IpAddr>().ok()) {
        extra[family(&ip)].insert(ip);
    }

    let cluster = i64::from(spec.internal_traffic_policy.as_deref() != Some("Local"));
    let no_allocation = type_ == "LoadBalancer" && spec.allocate_load_balancer_node_ports == Some(false);
    let mut per_family_ports = 0i64;
    for p in spec.ports.iter().flatten() {
        let node_port = match type_ {
            "NodePort" => true,
            "LoadBalancer" => !no_allocation || p.node_port.is_some_and(|n| n > 0),
            _ => false,
        };
        per_family_ports += cluster + i64::from(node_port);
    }
    let ports = spec.ports.as_ref().map_or(0, |p| p.len() as i64);
    let mut out = none;
    for f in 0..2 {
        if families[f] {
            out.load_balancers[f] = per_family_ports + ports * extra[f].len() as i64;
        }
    }
    out
}

/// What one EndpointSlice adds: all the tracker keeps of it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SliceContribution {
    /// `namespace/name` of the Service it belongs to; `None` (no
    /// `kubernetes.io/service-name` label) counts nothing.
    pub service: Option<String>,
    /// Distinct ready addresses, sorted: the first address of each endpoint
    /// whose `conditions.ready` is not `false`. Empty for FQDN slices.
    pub ready: Vec<IpAddr>,
}

/// The model of the module docs for one EndpointSlice. Reads only the fields
/// [`strip_slice`] keeps; unparseable addresses are skipped.
pub fn slice_contribution(slice: &EndpointSlice) -> SliceContribution {
    let service = slice
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_SERVICE_NAME))
        .filter(|s| !s.is_empty())
        .map(|s| format!("{}/{s}", slice.metadata.namespace.as_deref().unwrap_or_default()));
    let mut ready: Vec<IpAddr> = if slice.address_type == "FQDN" {
        Vec::new()
    } else {
        slice
            .endpoints
            .iter()
            .flatten()
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
            .filter_map(|e| e.addresses.first())
            .filter_map(|a| a.trim().parse().ok())
            .collect()
    };
    ready.sort_unstable();
    ready.dedup();
    SliceContribution { service, ready }
}

/// Reduce a Service to the fields [`service_contribution`] reads, for a
/// watcher's `.modify(strip_service)` when the controller keeps Services in a
/// store. (Feeding events straight into [`HnsTracker`] keeps no Service at all.)
/// Kept: name, namespace, uid, resourceVersion; spec type, clusterIP(s),
/// ipFamilies, externalIPs, internalTrafficPolicy, allocateLoadBalancerNodePorts,
/// ports (port, protocol, nodePort); status ingress ip and ipMode.
pub fn strip_service(svc: &mut Service) {
    let meta = std::mem::take(&mut svc.metadata);
    svc.metadata = ObjectMeta {
        name: meta.name,
        namespace: meta.namespace,
        uid: meta.uid,
        resource_version: meta.resource_version,
        ..Default::default()
    };
    svc.spec = svc.spec.take().map(|s| ServiceSpec {
        type_: s.type_,
        cluster_ip: s.cluster_ip,
        cluster_ips: s.cluster_ips,
        ip_families: s.ip_families,
        external_ips: s.external_ips,
        internal_traffic_policy: s.internal_traffic_policy,
        allocate_load_balancer_node_ports: s.allocate_load_balancer_node_ports,
        ports: s.ports.map(|ps| {
            ps.into_iter()
                .map(|p| ServicePort { port: p.port, protocol: p.protocol, node_port: p.node_port, ..Default::default() })
                .collect()
        }),
        ..Default::default()
    });
    svc.status = svc.status.take().map(|s| ServiceStatus {
        load_balancer: s.load_balancer.map(|lb| LoadBalancerStatus {
            ingress: lb.ingress.map(|is| {
                is.into_iter()
                    .filter(|i| i.ip.is_some())
                    .map(|i| LoadBalancerIngress { ip: i.ip, ip_mode: i.ip_mode, ..Default::default() })
                    .collect()
            }),
        }),
        conditions: None,
    });
}

/// Reduce an EndpointSlice to the fields [`slice_contribution`] reads (see
/// [`strip_service`]). Kept: name, namespace, uid, resourceVersion, the
/// `kubernetes.io/service-name` label, addressType, and per endpoint its first
/// address and `conditions.ready`.
pub fn strip_slice(slice: &mut EndpointSlice) {
    let meta = std::mem::take(&mut slice.metadata);
    let labels = meta.labels.and_then(|mut l| l.remove_entry(LABEL_SERVICE_NAME)).map(|kv| [kv].into_iter().collect());
    slice.metadata = ObjectMeta {
        name: meta.name,
        namespace: meta.namespace,
        uid: meta.uid,
        resource_version: meta.resource_version,
        labels,
        ..Default::default()
    };
    slice.ports = None;
    slice.endpoints = slice.endpoints.take().map(|es| {
        es.into_iter()
            .map(|e| Endpoint {
                addresses: e.addresses.into_iter().take(1).collect(),
                conditions: Some(EndpointConditions { ready: e.conditions.and_then(|c| c.ready), ..Default::default() }),
                ..Default::default()
            })
            .collect()
    });
}

fn object_key(meta: &ObjectMeta) -> String {
    format!("{}/{}", meta.namespace.as_deref().unwrap_or_default(), meta.name.as_deref().unwrap_or_default())
}

// ---------------------------------------------------------------------------
// The tracker
// ---------------------------------------------------------------------------

/// Which watch a resync belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    Service,
    EndpointSlice,
}

/// Sizes of what the tracker holds, for metrics and the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TrackerStats {
    /// Services known, plus Services named by a slice but not seen yet.
    pub services: usize,
    pub slices: usize,
    /// Distinct ready addresses counted (= the expected endpoints).
    pub addresses: usize,
    /// Rough heap bytes held (tables at capacity, keys, address lists).
    pub approx_bytes: usize,
}

#[derive(Debug, Default)]
struct ServiceEntry {
    /// `None` while only slices name the Service (events arrive out of order) or after it was deleted.
    svc: Option<ServiceContribution>,
    seen: u64,
    /// Keys of the slices naming this Service.
    slices: Vec<Arc<str>>,
    /// Ready addresses over those slices, per family.
    backends: [i64; 2],
}

impl ServiceEntry {
    /// Whether addresses of family `f` in this Service's slices are remote endpoints.
    fn counts(&self, f: usize) -> bool {
        self.svc.is_some_and(|c| c.load_balancers[f] > 0)
    }

    /// (policies realized now, backends of the largest programmed family).
    fn derived(&self) -> (i64, i64) {
        let Some(c) = self.svc else { return (0, 0) };
        let mut lbs = 0;
        let mut backends = 0;
        for f in 0..2 {
            if c.load_balancers[f] > 0 && self.backends[f] > 0 {
                lbs += c.load_balancers[f];
                backends = backends.max(self.backends[f]);
            }
        }
        (lbs, backends)
    }
}

#[derive(Debug)]
struct SliceEntry {
    service: Option<Arc<str>>,
    ready: Box<[IpAddr]>,
    seen: u64,
}

type Addresses = HashMap<IpAddr, u32>;

fn add_address(addresses: &mut Addresses, ip: IpAddr) {
    *addresses.entry(ip).or_insert(0) += 1;
}

fn remove_address(addresses: &mut Addresses, ip: IpAddr) {
    if let Entry::Occupied(mut e) = addresses.entry(ip) {
        if *e.get() <= 1 {
            e.remove();
        } else {
            *e.get_mut() -= 1;
        }
    }
}

/// Cluster-wide expected HNS load, kept incrementally from watch events.
///
/// Feed it every Service and EndpointSlice event ([`Self::service_event`] /
/// [`Self::slice_event`] take kube's `watcher::Event` as is, including the
/// `Init`/`InitApply`/`InitDone` of a relist, so objects deleted while the
/// watch was down are dropped at `InitDone`). Events may arrive in any order
/// across the two watches: a slice seen before its Service waits, counted as
/// nothing, until the Service arrives; deleting an unknown object is a no-op.
///
/// Costs: applying or deleting a slice is O(its endpoints) (the old and new
/// address lists are merged, so only changed addresses touch the table);
/// applying or deleting a Service is O(1) unless it starts or stops being
/// programmed for a family, then O(its slices' endpoints); plus O(log S) for
/// the backend index. [`Self::totals`] is O(1). Memory: per Service its
/// `namespace/name` and ~100 bytes, per slice its key, ~60 bytes and 17 bytes
/// per ready address, per distinct address ~25 bytes ([`Self::stats`]
/// estimates the total).
#[derive(Debug, Default)]
pub struct HnsTracker {
    services: HashMap<Arc<str>, ServiceEntry>,
    slices: HashMap<Arc<str>, SliceEntry>,
    /// Counted address -> how many (slice, address) pairs hold it.
    addresses: Addresses,
    /// (backends, service) for programmed Services with at least one backend.
    by_backends: BTreeSet<(i64, Arc<str>)>,
    load_balancers: i64,
    service_epoch: u64,
    slice_epoch: u64,
    /// Each watch finished its first list: until both have, the totals are
    /// too low and a node would look caught up when it is not.
    services_listed: bool,
    slices_listed: bool,
}

impl HnsTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Both watches have delivered their first complete list.
    pub fn synced(&self) -> bool {
        self.services_listed && self.slices_listed
    }

    /// Expected (load-balancer policies, remote endpoints) on every node. O(1).
    pub fn totals(&self) -> (i64, i64) {
        (self.load_balancers, self.addresses.len() as i64)
    }

    pub fn apply_service(&mut self, svc: &Service) {
        self.set_service(&object_key(&svc.metadata), Some(service_contribution(svc)));
    }

    pub fn delete_service(&mut self, namespace: &str, name: &str) {
        self.set_service(&format!("{namespace}/{name}"), None);
    }

    pub fn apply_slice(&mut self, slice: &EndpointSlice) {
        self.set_slice(&object_key(&slice.metadata), Some(slice_contribution(slice)));
    }

    pub fn delete_slice(&mut self, namespace: &str, name: &str) {
        self.set_slice(&format!("{namespace}/{name}"), None);
    }

    /// Apply one event of a Service watcher.
    pub fn service_event(&mut self, event: &watcher::Event<Service>) {
        match event {
            watcher::Event::Apply(s) | watcher::Event::InitApply(s) => self.apply_service(s),
            watcher::Event::Delete(s) => self.set_service(&object_key(&s.metadata), None),
            watcher::Event::Init => self.begin_resync(ObjectKind::Service),
            watcher::Event::InitDone => {
                self.end_resync(ObjectKind::Service);
                self.services_listed = true;
            }
        }
    }

    /// Apply one event of an EndpointSlice watcher.
    pub fn slice_event(&mut self, event: &watcher::Event<EndpointSlice>) {
        match event {
            watcher::Event::Apply(s) | watcher::Event::InitApply(s) => self.apply_slice(s),
            watcher::Event::Delete(s) => self.set_slice(&object_key(&s.metadata), None),
            watcher::Event::Init => self.begin_resync(ObjectKind::EndpointSlice),
            watcher::Event::InitDone => {
                self.end_resync(ObjectKind::EndpointSlice);
                self.slices_listed = true;
            }
        }
    }

    /// A relist starts (`watcher::Event::Init`): objects not applied again
    /// before [`Self::end_resync`] are dropped then. Totals keep the last known
    /// counts meanwhile.
    pub fn begin_resync(&mut self, kind: ObjectKind) {
        match kind {
            ObjectKind::Service => self.service_epoch += 1,
            ObjectKind::EndpointSlice => self.slice_epoch += 1,
        }
    }

    /// A relist ended (`watcher::Event::InitDone`): drop the objects it did not
    /// list. O(objects of that kind), like the relist itself.
    pub fn end_resync(&mut self, kind: ObjectKind) {
        match kind {
            ObjectKind::Service => {
                let epoch = self.service_epoch;
                let stale: Vec<Arc<str>> =
                    self.services.iter().filter(|(_, e)| e.svc.is_some() && e.seen < epoch).map(|(k, _)| k.clone()).collect();
                for k in stale {
                    self.set_service(&k, None);
                }
            }
            ObjectKind::EndpointSlice => {
                let epoch = self.slice_epoch;
                let stale: Vec<Arc<str>> = self.slices.iter().filter(|(_, e)| e.seen < epoch).map(|(k, _)| k.clone()).collect();
                for k in stale {
                    self.set_slice(&k, None);
                }
            }
        }
    }

    /// Set (`Some`) or remove (`None`) the Service `namespace/name`.
    pub fn set_service(&mut self, key: &str, contribution: Option<ServiceContribution>) {
        if contribution.is_none() && self.services.get(key).is_none_or(|e| e.svc.is_none()) {
            return;
        }
        let key = self.intern(key);
        let epoch = self.service_epoch;
        self.update_service(&key, |entry, slices, addresses| {
            let before = [entry.counts(0), entry.counts(1)];
            entry.svc = contribution;
            entry.seen = epoch;
            for (f, was) in before.into_iter().enumerate() {
                let now = entry.counts(f);
                if now == was {
                    continue;
                }
                // Programmed for this family now (or no longer): its slices' addresses start (stop) counting.
                for ip in entry.slices.iter().filter_map(|s| slices.get(s)).flat_map(|s| s.ready.iter()) {
                    if family(ip) == f {
                        if now { add_address(addresses, *ip) } else { remove_address(addresses, *ip) }
                    }
                }
            }
        });
    }

    /// Set (`Some`) or remove (`None`) the EndpointSlice `namespace/name`.
    pub fn set_slice(&mut self, key: &str, contribution: Option<SliceContribution>) {
        let (key, old) = match self.slices.remove_entry(key) {
            Some((k, e)) => (k, Some(e)),
            None if contribution.is_none() => return,
            None => (Arc::from(key), None),
        };
        let present = contribution.is_some();
        let new_service = contribution.as_ref().and_then(|c| c.service.as_deref()).map(|s| self.intern(s));
        let new_ready: Box<[IpAddr]> = match contribution {
            Some(c) => {
                let mut r = c.ready;
                r.sort_unstable();
                r.dedup();
                r.into_boxed_slice()
            }
            None => Box::default(),
        };
        let (old_service, old_ready) = match old {
            Some(o) => (o.service, o.ready),
            None => (None, Box::default()),
        };

        match (&old_service, &new_service) {
            (Some(a), Some(b)) if a == b => {
                // Same Service: apply only the difference between the two sorted lists.
                self.update_service(a, |entry, _, addresses| {
                    let mut change = |ip: IpAddr, delta: i64| {
                        let f = family(&ip);
                        entry.backends[f] += delta;
                        if entry.counts(f) {
                            if delta > 0 { add_address(addresses, ip) } else { remove_address(addresses, ip) }
                        }
                    };
                    let (mut i, mut j) = (0, 0);
                    while i < old_ready.len() || j < new_ready.len() {
                        match (old_ready.get(i), new_ready.get(j)) {
                            (Some(o), Some(n)) if o == n => {
                                i += 1;
                                j += 1;
                            }
                            (Some(o), Some(n)) if o < n => {
                                change(*o, -1);
                                i += 1;
                            }
                            (Some(o), None) => {
                                change(*o, -1);
                                i += 1;
                            }
                            (_, Some(n)) => {
                                change(*n, 1);
                                j += 1;
                            }
                            (None, None) => unreachable!(),
                        }
                    }
                });
            }
            _ => {
                if let Some(b) = &new_service {
                    self.update_service(b, |entry, _, addresses| {
                        entry.slices.push(key.clone());
                        for ip in new_ready.iter() {
                            let f = family(ip);
                            entry.backends[f] += 1;
                            if entry.counts(f) {
                                add_address(addresses, *ip);
                            }
                        }
                    });
                }
                if let Some(a) = &old_service {
                    self.update_service(a, |entry, _, addresses| {
                        entry.slices.retain(|s| **s != *key);
                        for ip in old_ready.iter() {
                            let f = family(ip);
                            entry.backends[f] -= 1;
                            if entry.counts(f) {
                                remove_address(addresses, *ip);
                            }
                        }
                    });
                }
            }
        }
        if present {
            self.slices.insert(key, SliceEntry { service: new_service, ready: new_ready, seen: self.slice_epoch });
        }
    }

    /// Programmed Services whose ready backends exceed `limit`: the first
    /// [`MAX_LISTED_SERVICES`] `namespace/name` in name order, and how many
    /// there are in all. `limit <= 0` means no limit: nothing is over it.
    ///
    /// O(log S + k) for k Services over the limit (a range of the ordered
    /// backend index, then a partial selection of the first names); it never
    /// looks at Services under the limit.
    pub fn services_over(&self, limit: i64) -> (Vec<String>, usize) {
        if limit <= 0 {
            return (Vec::new(), 0);
        }
        let mut over: Vec<&str> = self.by_backends.range((limit.saturating_add(1), Arc::<str>::from(""))..).map(|(_, k)| &**k).collect();
        let total = over.len();
        if over.len() > MAX_LISTED_SERVICES {
            over.select_nth_unstable(MAX_LISTED_SERVICES - 1);
            over.truncate(MAX_LISTED_SERVICES);
        }
        over.sort_unstable();
        (over.into_iter().map(String::from).collect(), total)
    }

    /// Ready backends the model counts for Service `namespace/name` (0 when it
    /// is not programmed), for tests and diagnostics.
    pub fn backends(&self, key: &str) -> i64 {
        self.services.get(key).map_or(0, |e| e.derived().1)
    }

    /// O(objects held): for a metrics scrape or the benchmark, not per event.
    pub fn stats(&self) -> TrackerStats {
        use std::mem::size_of;
        let table = |cap: usize, entry: usize| cap * (entry + 1);
        let keys: usize = self.services.keys().chain(self.slices.keys()).map(|k| k.len() + 16).sum();
        let lists: usize = self.slices.values().map(|s| s.ready.len() * size_of::<IpAddr>()).sum::<usize>()
            + self.services.values().map(|e| e.slices.capacity() * size_of::<Arc<str>>()).sum::<usize>();
        TrackerStats {
            services: self.services.len(),
            slices: self.slices.len(),
            addresses: self.addresses.len(),
            approx_bytes: table(self.services.capacity(), size_of::<(Arc<str>, ServiceEntry)>())
                + table(self.slices.capacity(), size_of::<(Arc<str>, SliceEntry)>())
                + table(self.addresses.capacity(), size_of::<(IpAddr, u32)>())
                + self.by_backends.len() * (size_of::<(i64, Arc<str>)>() + 8)
                + keys
                + lists,
        }
    }

    /// The shared key of Service `key`, so slices and the index do not copy it.
    fn intern(&self, key: &str) -> Arc<str> {
        match self.services.get_key_value(key) {
            Some((k, _)) => k.clone(),
            None => Arc::from(key),
        }
    }

    /// Change one Service entry and carry the effect to the totals and the backend index.
    fn update_service(&mut self, key: &Arc<str>, f: impl FnOnce(&mut ServiceEntry, &HashMap<Arc<str>, SliceEntry>, &mut Addresses)) {
        let Self { services, slices, addresses, by_backends, load_balancers, .. } = self;
        let entry = services.entry(key.clone()).or_default();
        let (lbs_before, backends_before) = entry.derived();
        f(entry, slices, addresses);
        let (lbs_after, backends_after) = entry.derived();
        *load_balancers += lbs_after - lbs_before;
        if backends_before != backends_after {
            if backends_before > 0 {
                by_backends.remove(&(backends_before, key.clone()));
            }
            if backends_after > 0 {
                by_backends.insert((backends_after, key.clone()));
            }
        }
        if entry.svc.is_none() && entry.slices.is_empty() {
            services.remove(key);
        }
    }
}

// ---------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------

/// What one node of a pool is assumed to carry.
///
/// **Microsoft publishes no official per-node limit** for HNS load-balancer
/// policies, remote endpoints or backends per load balancer. The defaults are
/// winpool's conservative choices from the public facts in SPEC §3; set
/// `spec.hns.max*` to what your own nodes have shown.
///
/// | release  | load balancers | endpoints | backends/Service |
/// |----------|---------------:|----------:|-----------------:|
/// | ltsc2019 |          1,000 |     5,000 |               64 |
/// | ltsc2022 |          5,000 |    20,000 |            1,024 |
/// | ltsc2025 |          5,000 |    20,000 |            1,024 |
///
/// - Load balancers and endpoints: kubernetes/kubernetes#109124 measured one
///   full kube-proxy sync of 2,000 ClusterIP Services with ~5,000 remote
///   endpoints at **22 minutes on Windows Server 2019** and **1 minute on 2022**
///   (both patched). For ltsc2019 the default is half that Service count (1,000)
///   with the measured endpoint count (5,000): the measured load already kept a
///   rebooted node out of service for over 20 minutes. For ltsc2022 the same
///   load took 1 minute, so 2.5× the Services (5,000) and 4× the endpoints
///   (20,000) is an extrapolation that keeps a catch-up in minutes if sync time
///   grows no faster than roughly linearly — an assumption, not a measurement.
/// - Backends per Service: HNS refuses a load balancer with too many
///   destinations ("invalid number of destinations"): 64 on older builds, raised
///   to 1,024 by later OS updates. ltsc2019 fleets often run older builds, so
///   64; ltsc2022 and later, 1,024.
/// - ltsc2025: no public measurement exists; it is assumed no worse than ltsc2022.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub load_balancers: i64,
    pub endpoints: i64,
    pub backends_per_service: i64,
}

impl Limits {
    /// The documented default for `os` (see the table above).
    pub const fn default_for(os: OsVersion) -> Limits {
        match os {
            OsVersion::Ltsc2019 => Limits { load_balancers: 1_000, endpoints: 5_000, backends_per_service: 64 },
            OsVersion::Ltsc2022 | OsVersion::Ltsc2025 => Limits { load_balancers: 5_000, endpoints: 20_000, backends_per_service: 1_024 },
        }
    }

    /// The pool's limits: `spec.hns.max*` where set, the OS default where 0 (or negative).
    pub fn for_pool(spec: &HnsSpec, os: OsVersion) -> Limits {
        let d = Limits::default_for(os);
        let pick = |v: i64, default: i64| if v > 0 { v } else { default };
        Limits {
            load_balancers: pick(spec.max_load_balancers, d.load_balancers),
            endpoints: pick(spec.max_endpoints, d.endpoints),
            backends_per_service: pick(spec.max_backends_per_service, d.backends_per_service),
        }
    }

    /// max(load balancers / limit, endpoints / limit): 1.0 is at the limit. For the ratio metric.
    pub fn utilization(&self, totals: (i64, i64)) -> f64 {
        let ratio = |n: i64, limit: i64| if limit > 0 { n.max(0) as f64 / limit as f64 } else { 0.0 };
        ratio(totals.0, self.load_balancers).max(ratio(totals.1, self.endpoints))
    }
}

// ---------------------------------------------------------------------------
// Pool capacity
// ---------------------------------------------------------------------------

/// `status.hns.state` and the `HNSCapacity` reason; ordered by severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CapacityState {
    WithinLimits,
    NearLimit,
    Exceeded,
}

impl CapacityState {
    pub fn as_str(self) -> &'static str {
        match self {
            CapacityState::WithinLimits => reasons::WITHIN_LIMITS,
            CapacityState::NearLimit => reasons::NEAR_LIMIT,
            CapacityState::Exceeded => reasons::EXCEEDED,
        }
    }
}

/// 12345 -> "12,345".
fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Whole percent of `n` in `limit`, rounded down (so "80%" means at least 80%).
fn percent(n: i64, limit: i64) -> i128 {
    if limit <= 0 { 0 } else { i128::from(n) * 100 / i128::from(limit) }
}

fn dimension_state(n: i64, limit: i64, warn: i64) -> CapacityState {
    if n > limit {
        CapacityState::Exceeded
    } else if i128::from(n) * 100 >= i128::from(limit) * i128::from(warn) {
        CapacityState::NearLimit
    } else {
        CapacityState::WithinLimits
    }
}

/// The pool's `status.hns` and `HNSCapacity` condition from the cluster's
/// expected counts ([`HnsTracker::totals`]), the pool's [`Limits`],
/// `spec.hns.warnPercent` (clamped to 1..=100) and the Services over the
/// pool's backend limit (`tracker.services_over(limits.backends_per_service)`).
///
/// - `NearLimit` when a count is at or above warnPercent of its limit
///   (800 of 1,000 at 80% is NearLimit; 799 is not);
/// - `Exceeded` when a count is above its limit (1,000 of 1,000 is NearLimit),
///   or when any Service has more ready backends than maxBackendsPerService;
///   the message says which.
///
/// The condition's status is `True` while HNS capacity suffices (WithinLimits,
/// NearLimit) and `False` when Exceeded. `lastTransitionTime` is left at the
/// epoch and `observedGeneration` unset: `status::build_status` fills both.
pub fn capacity(totals: (i64, i64), limits: &Limits, warn_percent: i32, over_limit: (Vec<String>, usize)) -> (HnsStatus, Condition) {
    let (lbs, eps) = totals;
    let warn = i64::from(warn_percent.clamp(1, 100));
    let (mut listed, over_total) = over_limit;
    listed.truncate(MAX_LISTED_SERVICES);
    let over_total = over_total.max(listed.len());

    let lb_state = dimension_state(lbs, limits.load_balancers, warn);
    let ep_state = dimension_state(eps, limits.endpoints, warn);
    let backend_state = if over_total > 0 { CapacityState::Exceeded } else { CapacityState::WithinLimits };
    let state = lb_state.max(ep_state).max(backend_state);

    let mut message = format!(
        "{} of {} load balancers ({}%), {} of {} endpoints ({}%); warn at {warn}%",
        thousands(lbs),
        thousands(limits.load_balancers),
        percent(lbs, limits.load_balancers),
        thousands(eps),
        thousands(limits.endpoints),
        percent(eps, limits.endpoints),
    );
    for (which, want) in [("over the limit", CapacityState::Exceeded), ("near the limit", CapacityState::NearLimit)] {
        let dims: Vec<&str> =
            [(lb_state, "load balancers"), (ep_state, "endpoints")].into_iter().filter(|(s, _)| *s == want).map(|(_, d)| d).collect();
        if !dims.is_empty() {
            message.push_str(&format!("; {which}: {}", dims.join(" and ")));
        }
    }
    if over_total > 0 {
        let mut names: Vec<String> = listed.iter().take(MAX_SERVICES_IN_MESSAGE).cloned().collect();
        let shown = names.len();
        if over_total > shown {
            names.push(format!("and {} more", over_total - shown));
        }
        message.push_str(&format!(
            "; {} {} more ready backends than the {} one HNS load balancer accepts (\"invalid number of destinations\"): {}",
            thousands(over_total as i64),
            if over_total == 1 { "Service has" } else { "Services have" },
            thousands(limits.backends_per_service),
            names.join(", ")
        ));
    }

    let status = HnsStatus {
        expected_load_balancers: lbs,
        limit_load_balancers: limits.load_balancers,
        expected_endpoints: eps,
        limit_endpoints: limits.endpoints,
        state: state.as_str().into(),
        services_over_backend_limit: listed,
    };
    let condition = Condition {
        type_: conditions::HNS_CAPACITY.into(),
        status: if state == CapacityState::Exceeded { "False" } else { "True" }.into(),
        reason: state.as_str().into(),
        message,
        last_transition_time: Time(Timestamp::UNIX_EPOCH),
        observed_generation: None,
    };
    (status, condition)
}

// ---------------------------------------------------------------------------
// Node readiness
// ---------------------------------------------------------------------------

/// The controller knows the counts on a node are gone or stale because the
/// node restarted (e.g. it removed the `winpool.dev/hns-*` annotations when
/// the rollout rebooted the node, at `since`): until `grace` has passed, a
/// node without counts is NotReady (HNS starts empty after a reboot), after
/// that Unknown, so a node whose agent never reports is not held forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AwaitingReport {
    pub since: Timestamp,
    pub grace: SignedDuration,
}

/// A non-negative decimal count (surrounding whitespace allowed), or None.
fn parse_count(value: &str) -> Option<i64> {
    let v = value.trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse::<i64>().ok()
}

/// `value` quoted for a message, cut to [`MAX_QUOTED`] characters.
fn quote(value: &str) -> String {
    match value.char_indices().nth(MAX_QUOTED) {
        Some((i, _)) => format!("{:?}...", &value[..i]),
        None => format!("{value:?}"),
    }
}

/// The smallest count that is within `tolerance` percent below `expected`.
fn ready_at(expected: i64, tolerance: u8) -> i64 {
    let need = i128::from(expected.max(0)) * i128::from(100 - tolerance);
    ((need + 99) / 100) as i64
}

/// HNS readiness of one node from its agent's annotations
/// (`winpool.dev/hns-load-balancers`, `winpool.dev/hns-endpoints`, raw values)
/// against the expected counts ([`HnsTracker::totals`]). Returns the readiness,
/// a reason from [`reasons`] and a message.
///
/// - **Ready** (`CaughtUp`) when both counts are at least
///   `expected × (1 − tolerance_percent/100)` (rounded up; tolerance is clamped
///   to 100). The message carries no numbers so that a Ready node's condition
///   does not change, and need no write, each time the cluster's counts move.
/// - **NotReady** (`CatchingUp`) when a count is below that, with the numbers;
///   (`AwaitingReport`) when counts are missing while `awaiting` is in its grace
///   period.
/// - **Unknown** (`NotReported`) when a count is missing otherwise (the agent
///   never reported, or not within the grace period), and (`InvalidReport`)
///   when a value is not a non-negative integer; garbage never panics.
///
/// How Unknown is handled: the node gets `WindowsHNSReady=Unknown` with this
/// message, [`taint_wanted`] is false for it (a node whose agent never reports
/// is never tainted, so never blocked forever), and the rollout does not wait
/// on it (`rollout` gates only on `HnsReadiness::NotReady`).
pub fn node_readiness(
    reported_lb: Option<&str>,
    reported_ep: Option<&str>,
    expected: (i64, i64),
    tolerance_percent: u8,
    awaiting: Option<AwaitingReport>,
    now: Timestamp,
) -> (HnsReadiness, &'static str, String) {
    let tolerance = tolerance_percent.min(100);
    let fields = [(names::ANN_HNS_LOAD_BALANCERS, reported_lb), (names::ANN_HNS_ENDPOINTS, reported_ep)];

    let invalid: Vec<String> =
        fields.iter().filter_map(|(ann, v)| v.filter(|v| parse_count(v).is_none()).map(|v| format!("{ann} is {}", quote(v)))).collect();
    if !invalid.is_empty() {
        return (
            HnsReadiness::Unknown,
            reasons::INVALID_REPORT,
            format!(
                "the agent's HNS counts are not non-negative integers ({}); HNS readiness is unknown, so the node is not tainted and the rollout does not wait for it",
                invalid.join(", ")
            ),
        );
    }

    let (Some(lb), Some(ep)) = (reported_lb.and_then(parse_count), reported_ep.and_then(parse_count)) else {
        let missing: Vec<&str> = fields.iter().filter(|(_, v)| v.is_none()).map(|(ann, _)| *ann).collect();
        let missing = missing.join(" and ");
        if let Some(a) = awaiting {
            let waited = now.duration_since(a.since);
            if waited < a.grace {
                return (
                    HnsReadiness::NotReady,
                    reasons::AWAITING_REPORT,
                    format!(
                        "the node restarted at {} and its agent has not reported HNS counts since ({missing} missing); HNS starts empty after a restart, so the node counts as not ready for up to {:#} after the restart",
                        a.since, a.grace
                    ),
                );
            }
            return (
                HnsReadiness::Unknown,
                reasons::NOT_REPORTED,
                format!(
                    "the agent has not reported HNS counts ({missing} missing) in the {:#} since the node restarted at {}; HNS readiness is unknown, so the node is not tainted and the rollout does not wait for it",
                    a.grace, a.since
                ),
            );
        }
        return (
            HnsReadiness::Unknown,
            reasons::NOT_REPORTED,
            format!(
                "the agent has not reported HNS counts ({missing} missing); HNS readiness is unknown, so the node is not tainted and the rollout does not wait for it"
            ),
        );
    };

    let (need_lb, need_ep) = (ready_at(expected.0, tolerance), ready_at(expected.1, tolerance));
    if lb >= need_lb && ep >= need_ep {
        return (
            HnsReadiness::Ready,
            reasons::CAUGHT_UP,
            format!("HNS holds at least {}% of the load balancers and remote endpoints the cluster's Services need", 100 - tolerance),
        );
    }
    (
        HnsReadiness::NotReady,
        reasons::CATCHING_UP,
        format!(
            "HNS is catching up: {} of {} load balancers and {} of {} endpoints programmed; ready at {} and {} ({}%)",
            thousands(lb),
            thousands(expected.0),
            thousands(ep),
            thousands(expected.1),
            thousands(need_lb),
            thousands(need_ep),
            100 - tolerance
        ),
    )
}

/// The Node condition `WindowsHNSReady` (status True/False/Unknown for
/// Ready/NotReady/Unknown). `lastTransitionTime` is kept from `previous` while
/// the status is unchanged; `lastHeartbeatTime` is kept while status, reason
/// and message are all unchanged, so the result equals `previous` when nothing
/// changed and the controller can skip the write (`Some(&new) == previous`).
pub fn node_condition(
    readiness: HnsReadiness,
    reason: &str,
    message: &str,
    previous: Option<&NodeCondition>,
    now: Timestamp,
) -> NodeCondition {
    let status = match readiness {
        HnsReadiness::Ready => "True",
        HnsReadiness::NotReady => "False",
        HnsReadiness::Unknown => "Unknown",
    };
    let previous = previous.filter(|p| p.type_ == names::NODE_CONDITION_HNS_READY);
    let same_status = previous.filter(|p| p.status == status);
    let same_all = same_status.filter(|p| p.reason.as_deref() == Some(reason) && p.message.as_deref() == Some(message));
    NodeCondition {
        type_: names::NODE_CONDITION_HNS_READY.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_transition_time: Some(same_status.and_then(|p| p.last_transition_time.clone()).unwrap_or(Time(now))),
        last_heartbeat_time: Some(same_all.and_then(|p| p.last_heartbeat_time.clone()).unwrap_or(Time(now))),
    }
}

/// Whether the node should carry `winpool.dev/hns-not-ready:NoSchedule`: only
/// when NotReady and the pool has `taintWhenNotReady`. Unknown never taints.
/// `Some(true)`: add it, `Some(false)`: remove it, `None`: leave it as it is —
/// a NotReady node winpool holds cordoned for its update (`held_cordoned`)
/// gets no new taint (the cordon keeps pods off and the uncordon waits for
/// HNS), but one it already carries stays until HNS is ready.
pub fn taint_wanted(readiness: HnsReadiness, taint_when_not_ready: bool, held_cordoned: bool) -> Option<bool> {
    match (taint_when_not_ready && readiness == HnsReadiness::NotReady, held_cordoned) {
        (true, true) => None,
        (wanted, _) => Some(wanted),
    }
}

/// The taint winpool puts on a node whose HNS has not caught up.
pub fn hns_taint() -> Taint {
    Taint { key: names::TAINT_HNS_NOT_READY.into(), effect: "NoSchedule".into(), value: None, time_added: None }
}

fn is_hns_taint(t: &Taint) -> bool {
    t.key == names::TAINT_HNS_NOT_READY && t.effect == "NoSchedule"
}

/// The node's new `spec.taints` with winpool's taint added (`wanted`) or
/// removed, every other taint kept in order; `None` when nothing changes.
/// A taint with winpool's key but another effect is someone else's and is left
/// alone. Write the whole list back with the node's resourceVersion (taints
/// have no merge key, a patch replaces the list).
pub fn taints_update(current: &[Taint], wanted: bool) -> Option<Vec<Taint>> {
    let present = current.iter().any(is_hns_taint);
    match (wanted, present) {
        (true, false) => Some(current.iter().cloned().chain(std::iter::once(hns_taint())).collect()),
        (false, true) => Some(current.iter().filter(|t| !is_hns_taint(t)).cloned().collect()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    // ---- builders ----

    #[derive(Default, Clone)]
    struct Svc {
        type_: &'static str,
        cluster_ip: &'static str,
        families: &'static [&'static str],
        ports: usize,
        node_port: Option<i32>,
        external: &'static [&'static str],
        ingress: &'static [&'static str],
        itp_local: bool,
        no_node_ports: bool,
    }

    fn service(ns: &str, name: &str, s: &Svc) -> Service {
        Service {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some(ns.into()), ..Default::default() },
            spec: Some(ServiceSpec {
                type_: (!s.type_.is_empty()).then(|| s.type_.into()),
                cluster_ip: (!s.cluster_ip.is_empty()).then(|| s.cluster_ip.into()),
                ip_families: (!s.families.is_empty()).then(|| s.families.iter().map(|f| f.to_string()).collect()),
                external_ips: (!s.external.is_empty()).then(|| s.external.iter().map(|f| f.to_string()).collect()),
                internal_traffic_policy: s.itp_local.then(|| "Local".into()),
                allocate_load_balancer_node_ports: s.no_node_ports.then_some(false),
                ports: Some(
                    (0..s.ports).map(|i| ServicePort { port: 80 + i as i32, node_port: s.node_port, ..Default::default() }).collect(),
                ),
                ..Default::default()
            }),
            status: Some(ServiceStatus {
                load_balancer: Some(LoadBalancerStatus {
                    ingress: Some(
                        s.ingress.iter().map(|ip| LoadBalancerIngress { ip: Some(ip.to_string()), ..Default::default() }).collect(),
                    ),
                }),
                conditions: None,
            }),
        }
    }

    fn cip() -> Svc {
        Svc { cluster_ip: "10.96.0.10", ports: 1, ..Default::default() }
    }

    /// A slice of Service `svc` with endpoints (address, ready).
    fn slice(ns: &str, name: &str, svc: Option<&str>, address_type: &str, eps: &[(&str, Option<bool>)]) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                labels: svc.map(|s| [(LABEL_SERVICE_NAME.to_string(), s.to_string())].into_iter().collect()),
                ..Default::default()
            },
            address_type: address_type.into(),
            endpoints: Some(
                eps.iter()
                    .map(|(a, r)| Endpoint {
                        addresses: vec![a.to_string()],
                        conditions: Some(EndpointConditions { ready: *r, ..Default::default() }),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ports: None,
        }
    }

    fn all_ready(eps: &[&str]) -> Vec<(String, Option<bool>)> {
        eps.iter().map(|a| (a.to_string(), Some(true))).collect()
    }

    fn slice_ready(ns: &str, name: &str, svc: &str, eps: &[(String, Option<bool>)]) -> EndpointSlice {
        let eps: Vec<(&str, Option<bool>)> = eps.iter().map(|(a, r)| (a.as_str(), *r)).collect();
        let family = if eps.first().is_some_and(|(a, _)| a.contains(':')) { "IPv6" } else { "IPv4" };
        slice(ns, name, Some(svc), family, &eps)
    }

    fn ips(prefix: &str, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}{}.{}", i / 250, i % 250 + 1)).collect()
    }

    fn ready(addrs: &[String]) -> Vec<(String, Option<bool>)> {
        addrs.iter().map(|a| (a.clone(), Some(true))).collect()
    }

    // ---- the model for one Service ----

    #[test]
    fn service_model_counts_what_kube_proxy_programs() {
        let ds = &["IPv4", "IPv6"][..];
        let cases: &[(&str, Svc, [i64; 2])] = &[
            ("ClusterIP, 1 port", cip(), [1, 0]),
            ("ClusterIP, 3 ports", Svc { ports: 3, ..cip() }, [3, 0]),
            ("ClusterIP, no ports", Svc { ports: 0, ..cip() }, [0, 0]),
            ("headless", Svc { cluster_ip: "None", ports: 2, ..cip() }, [0, 0]),
            ("headless with externalIPs", Svc { cluster_ip: "None", external: &["1.2.3.4"], ..cip() }, [0, 0]),
            ("ClusterIP not allocated yet", Svc { cluster_ip: "", ..cip() }, [0, 0]),
            ("ExternalName", Svc { type_: "ExternalName", ports: 2, ..cip() }, [0, 0]),
            ("NodePort, 2 ports", Svc { type_: "NodePort", ports: 2, node_port: Some(30080), ..cip() }, [4, 0]),
            ("NodePort without nodePort yet", Svc { type_: "NodePort", ..cip() }, [2, 0]),
            (
                "LoadBalancer, 2 ingress IPs",
                Svc { type_: "LoadBalancer", node_port: Some(30080), ingress: &["20.0.0.1", "20.0.0.2"], ..cip() },
                [4, 0],
            ),
            (
                "LoadBalancer, 2 ports, 2 ingress IPs",
                Svc { type_: "LoadBalancer", ports: 2, node_port: Some(30080), ingress: &["20.0.0.1", "20.0.0.2"], ..cip() },
                [8, 0],
            ),
            ("LoadBalancer, no status yet", Svc { type_: "LoadBalancer", node_port: Some(30080), ..cip() }, [2, 0]),
            ("LoadBalancer, duplicate ingress IP", Svc { type_: "LoadBalancer", ingress: &["20.0.0.1", "20.0.0.1"], ..cip() }, [3, 0]),
            (
                "LoadBalancer, allocateLoadBalancerNodePorts false",
                Svc { type_: "LoadBalancer", no_node_ports: true, ingress: &["20.0.0.1"], ..cip() },
                [2, 0],
            ),
            ("ingress on a ClusterIP Service is ignored", Svc { ingress: &["20.0.0.1"], ..cip() }, [1, 0]),
            ("externalIPs", Svc { external: &["1.2.3.4", "1.2.3.5", "garbage"], ports: 2, ..cip() }, [6, 0]),
            ("internalTrafficPolicy Local", Svc { itp_local: true, ..cip() }, [0, 0]),
            ("internalTrafficPolicy Local, NodePort", Svc { itp_local: true, type_: "NodePort", ..cip() }, [1, 0]),
            ("dual-stack ClusterIP, 2 ports", Svc { families: ds, ports: 2, ..cip() }, [2, 2]),
            (
                "dual-stack LoadBalancer, v4 and v6 ingress",
                Svc { families: ds, type_: "LoadBalancer", node_port: Some(30080), ingress: &["20.0.0.1", "2001:db8::1"], ..cip() },
                [3, 3],
            ),
            (
                "dual-stack LoadBalancer, 2 v4 ingress",
                Svc { families: ds, type_: "LoadBalancer", node_port: Some(30080), ingress: &["20.0.0.1", "20.0.0.2"], ..cip() },
                [4, 2],
            ),
            ("IPv6 single-stack from the ClusterIP", Svc { cluster_ip: "fd00::10", ..cip() }, [0, 1]),
            ("IPv6 external IP on an IPv4 Service is not programmed", Svc { external: &["2001:db8::1"], ..cip() }, [1, 0]),
            ("unknown type counts as ClusterIP", Svc { type_: "Bogus", ..cip() }, [1, 0]),
        ];
        for (name, s, want) in cases {
            let got = service_contribution(&service("ns", "s", s));
            assert_eq!(got.load_balancers, *want, "{name}");
            assert_eq!(got.programmed(), want.iter().sum::<i64>() > 0, "{name}");
        }
        assert_eq!(service_contribution(&Service::default()), ServiceContribution::default());
    }

    #[test]
    fn slice_model_counts_first_ready_address_once() {
        let mut s = slice(
            "ns",
            "s-1",
            Some("web"),
            "IPv4",
            &[("10.0.0.2", Some(true)), ("10.0.0.1", None), ("10.0.0.3", Some(false)), ("10.0.0.2", Some(true)), ("not-an-ip", Some(true))],
        );
        s.endpoints.as_mut().unwrap()[0].addresses.push("10.0.0.9".into());
        let c = slice_contribution(&s);
        assert_eq!(c.service.as_deref(), Some("ns/web"));
        assert_eq!(c.ready, vec!["10.0.0.1".parse::<IpAddr>().unwrap(), "10.0.0.2".parse().unwrap()]);

        let fqdn = slice("ns", "f", Some("web"), "FQDN", &[("example.com", Some(true))]);
        assert!(slice_contribution(&fqdn).ready.is_empty());
        let orphan = slice("ns", "o", None, "IPv4", &[("10.0.0.1", Some(true))]);
        assert_eq!(slice_contribution(&orphan).service, None);
    }

    #[test]
    fn stripping_keeps_what_the_model_reads() {
        let ds = &["IPv4", "IPv6"][..];
        let mut svc = service(
            "ns",
            "s",
            &Svc {
                families: ds,
                type_: "LoadBalancer",
                node_port: Some(30080),
                ingress: &["20.0.0.1", "2001:db8::1"],
                external: &["1.2.3.4"],
                ..cip()
            },
        );
        svc.metadata.annotations = Some([("big".to_string(), "x".repeat(10_000))].into_iter().collect());
        svc.spec.as_mut().unwrap().selector = Some([("app".to_string(), "web".to_string())].into_iter().collect());
        let want = service_contribution(&svc);
        strip_service(&mut svc);
        assert_eq!(service_contribution(&svc), want);
        assert!(svc.metadata.annotations.is_none() && svc.spec.as_ref().unwrap().selector.is_none());
        assert_eq!(svc.metadata.name.as_deref(), Some("s"));

        let mut sl = slice("ns", "s-1", Some("web"), "IPv4", &[("10.0.0.1", Some(true)), ("10.0.0.2", Some(false))]);
        sl.metadata.labels.as_mut().unwrap().insert("other".into(), "x".into());
        sl.endpoints.as_mut().unwrap()[0].node_name = Some("node-1".into());
        let want = slice_contribution(&sl);
        strip_slice(&mut sl);
        assert_eq!(slice_contribution(&sl), want);
        assert_eq!(sl.metadata.labels.as_ref().unwrap().len(), 1);
        assert!(sl.endpoints.as_ref().unwrap()[0].node_name.is_none());
    }

    // ---- the tracker ----

    #[test]
    fn a_service_counts_once_it_has_ready_endpoints() {
        let ds = &["IPv4", "IPv6"][..];
        // (service, slices as (name, addresses)), expected totals.
        type Case<'a> = (&'a str, Svc, &'a [(&'a str, &'a [&'a str])], (i64, i64));
        let cases: &[Case] = &[
            ("ClusterIP without endpoints", cip(), &[], (0, 0)),
            ("ClusterIP with 3 endpoints", cip(), &[("a", &["10.1.0.1", "10.1.0.2", "10.1.0.3"])], (1, 3)),
            ("headless: nothing, not even endpoints", Svc { cluster_ip: "None", ..cip() }, &[("a", &["10.1.0.1"])], (0, 0)),
            ("ExternalName", Svc { type_: "ExternalName", ..cip() }, &[("a", &["10.1.0.1"])], (0, 0)),
            ("NodePort", Svc { type_: "NodePort", ..cip() }, &[("a", &["10.1.0.1"])], (2, 1)),
            (
                "LoadBalancer with 2 ingress IPs",
                Svc { type_: "LoadBalancer", ingress: &["20.0.0.1", "20.0.0.2"], ..cip() },
                &[("a", &["10.1.0.1", "10.1.0.2"])],
                (4, 2),
            ),
            ("dual-stack, only IPv4 endpoints", Svc { families: ds, ..cip() }, &[("a", &["10.1.0.1"])], (1, 1)),
            (
                "dual-stack, both families",
                Svc { families: ds, ports: 2, ..cip() },
                &[("a", &["10.1.0.1", "10.1.0.2"]), ("b", &["fd00::1", "fd00::2"])],
                (4, 4),
            ),
            ("IPv6 endpoints of an IPv4 Service", cip(), &[("a", &["fd00::1"])], (0, 0)),
        ];
        for (name, s, slices, want) in cases {
            let mut t = HnsTracker::new();
            t.apply_service(&service("ns", "web", s));
            for (sname, addrs) in *slices {
                let addrs: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
                t.apply_slice(&slice_ready("ns", sname, "web", &ready(&addrs)));
            }
            assert_eq!(t.totals(), *want, "{name}");
        }
    }

    #[test]
    fn slice_updates_change_totals_by_the_difference() {
        let mut t = HnsTracker::new();
        t.apply_service(&service("ns", "web", &Svc { type_: "NodePort", ..cip() }));
        let a = ips("10.1.", 10);
        t.apply_slice(&slice_ready("ns", "web-1", "web", &ready(&a[..5])));
        assert_eq!(t.totals(), (2, 5));
        assert_eq!(t.backends("ns/web"), 5);

        // Grow, shrink, replace: each step is the difference.
        let steps: &[(&[String], (i64, i64))] =
            &[(&a[..8], (2, 8)), (&a[2..8], (2, 6)), (&a[5..10], (2, 5)), (&[], (0, 0)), (&a[..1], (2, 1))];
        for (addrs, want) in steps {
            t.apply_slice(&slice_ready("ns", "web-1", "web", &ready(addrs)));
            assert_eq!(t.totals(), *want, "{addrs:?}");
            assert_eq!(t.backends("ns/web"), want.1);
        }

        // An endpoint going from ready to not ready (terminating) leaves the count.
        let mut eps = ready(&a[..3]);
        t.apply_slice(&slice_ready("ns", "web-1", "web", &eps));
        assert_eq!(t.totals(), (2, 3));
        eps[1].1 = Some(false);
        t.apply_slice(&slice_ready("ns", "web-1", "web", &eps));
        assert_eq!(t.totals(), (2, 2));
        eps[1].1 = None; // nil means ready
        t.apply_slice(&slice_ready("ns", "web-1", "web", &eps));
        assert_eq!(t.totals(), (2, 3));
        for e in &mut eps {
            e.1 = Some(false);
        }
        t.apply_slice(&slice_ready("ns", "web-1", "web", &eps));
        assert_eq!(t.totals(), (0, 0), "no ready endpoint: no load balancer either");
    }

    #[test]
    fn shared_addresses_count_once() {
        let mut t = HnsTracker::new();
        let a = ips("10.1.", 6);
        t.apply_service(&service("ns", "web", &cip()));
        t.apply_service(&service("ns", "web-alias", &cip()));
        t.apply_slice(&slice_ready("ns", "web-1", "web", &ready(&a[..4])));
        t.apply_slice(&slice_ready("ns", "web-2", "web", &ready(&a[2..6])));
        t.apply_slice(&slice_ready("ns", "alias-1", "web-alias", &ready(&a[..6])));
        assert_eq!(t.totals(), (2, 6));
        assert_eq!(t.backends("ns/web"), 8, "duplicates across a Service's slices are summed");
        t.delete_slice("ns", "alias-1");
        assert_eq!(t.totals(), (1, 6));
        t.delete_slice("ns", "web-1");
        assert_eq!(t.totals(), (1, 4));
        t.delete_slice("ns", "web-2");
        assert_eq!(t.totals(), (0, 0));
    }

    #[test]
    fn deleting_services_and_slices_returns_to_zero_in_any_order() {
        let ds = &["IPv4", "IPv6"][..];
        let build = |t: &mut HnsTracker, slices_first: bool| {
            let services = [
                ("a", Svc { type_: "LoadBalancer", ingress: &["20.0.0.1", "20.0.0.2"], ..cip() }),
                ("b", Svc { families: ds, ports: 2, ..cip() }),
                ("c", Svc { cluster_ip: "None", ..cip() }),
            ];
            let slices = [
                slice_ready("ns", "a-1", "a", &ready(&ips("10.1.", 70))),
                slice_ready("ns", "b-1", "b", &ready(&ips("10.1.", 3))),
                slice_ready("ns", "b-2", "b", &all_ready(&["fd00::1", "fd00::2"])),
                slice_ready("ns", "c-1", "c", &ready(&ips("10.2.", 5))),
            ];
            if slices_first {
                slices.iter().for_each(|s| t.apply_slice(s));
            }
            for (n, s) in &services {
                t.apply_service(&service("ns", n, s));
            }
            if !slices_first {
                slices.iter().for_each(|s| t.apply_slice(s));
            }
        };
        for slices_first in [false, true] {
            for services_first in [false, true] {
                let mut t = HnsTracker::new();
                build(&mut t, slices_first);
                // a: 4; b: 2 ports × 2 families = 4; c: headless.
                assert_eq!(t.totals(), (8, 72), "slices first: {slices_first}");
                let del_services = |t: &mut HnsTracker| ["a", "b", "c"].iter().for_each(|n| t.delete_service("ns", n));
                let del_slices = |t: &mut HnsTracker| ["a-1", "b-1", "b-2", "c-1"].iter().for_each(|n| t.delete_slice("ns", n));
                if services_first {
                    del_services(&mut t);
                    assert_eq!(t.totals(), (0, 0), "a deleted Service's endpoints stop counting at once");
                    del_slices(&mut t);
                } else {
                    del_slices(&mut t);
                    assert_eq!(t.totals(), (0, 0));
                    del_services(&mut t);
                }
                assert_eq!(t.totals(), (0, 0));
                assert_eq!(t.stats().services + t.stats().slices + t.stats().addresses, 0, "nothing left behind");
                assert!(t.by_backends.is_empty());
            }
        }
    }

    #[test]
    fn out_of_order_and_repeated_events_are_harmless() {
        let mut t = HnsTracker::new();
        t.delete_service("ns", "ghost");
        t.delete_slice("ns", "ghost-1");
        assert_eq!(t.stats(), HnsTracker::new().stats());

        // Slice before its Service: nothing until the Service arrives.
        let eps = ready(&ips("10.1.", 4));
        t.apply_slice(&slice_ready("ns", "web-1", "web", &eps));
        t.apply_slice(&slice_ready("ns", "web-1", "web", &eps));
        assert_eq!(t.totals(), (0, 0));
        t.apply_service(&service("ns", "web", &cip()));
        t.apply_service(&service("ns", "web", &cip()));
        assert_eq!(t.totals(), (1, 4));

        // The Service turns headless-like (ExternalName): its endpoints stop counting; and back.
        t.apply_service(&service("ns", "web", &Svc { type_: "ExternalName", ..cip() }));
        assert_eq!(t.totals(), (0, 0));
        t.apply_service(&service("ns", "web", &Svc { type_: "NodePort", ..cip() }));
        assert_eq!(t.totals(), (2, 4));

        // A slice relabelled to another Service moves its counts.
        t.apply_service(&service("ns", "other", &Svc { ports: 3, ..cip() }));
        t.apply_slice(&slice_ready("ns", "web-1", "other", &eps));
        assert_eq!(t.totals(), (3, 4));
        assert_eq!((t.backends("ns/web"), t.backends("ns/other")), (0, 4));
        // ... and to none (label removed).
        t.apply_slice(&slice("ns", "web-1", None, "IPv4", &[("10.1.0.1", Some(true))]));
        assert_eq!(t.totals(), (0, 0));
        t.delete_slice("ns", "web-1");
        t.delete_service("ns", "web");
        t.delete_service("ns", "web");
        t.delete_service("ns", "other");
        assert_eq!(t.stats().services + t.stats().slices, 0);
    }

    #[test]
    fn a_relist_drops_what_was_deleted_while_the_watch_was_down() {
        let mut t = HnsTracker::new();
        let s1 = service("ns", "a", &cip());
        let s2 = service("ns", "b", &cip());
        let sl1 = slice_ready("ns", "a-1", "a", &ready(&ips("10.1.", 2)));
        let sl2 = slice_ready("ns", "b-1", "b", &ready(&ips("10.2.", 3)));
        for e in [watcher::Event::Apply(s1.clone()), watcher::Event::Apply(s2.clone())] {
            t.service_event(&e);
        }
        t.slice_event(&watcher::Event::Apply(sl1.clone()));
        t.slice_event(&watcher::Event::Apply(sl2.clone()));
        assert_eq!(t.totals(), (2, 5));

        // Relist: b and its slice are gone.
        t.service_event(&watcher::Event::Init);
        t.service_event(&watcher::Event::InitApply(s1.clone()));
        assert_eq!(t.totals(), (2, 5), "last known counts until InitDone");
        assert!(!t.synced(), "no watch has finished a list yet");
        t.service_event(&watcher::Event::InitDone);
        assert!(!t.synced(), "the EndpointSlice list is still running");
        assert_eq!(t.totals(), (1, 2));
        t.slice_event(&watcher::Event::Init);
        t.slice_event(&watcher::Event::InitApply(sl1.clone()));
        t.slice_event(&watcher::Event::InitDone);
        assert!(t.synced(), "both lists done");
        assert_eq!(t.totals(), (1, 2));
        assert_eq!(t.stats().slices, 1);

        t.slice_event(&watcher::Event::Delete(sl1));
        t.service_event(&watcher::Event::Delete(s1));
        assert_eq!(t.totals(), (0, 0));
    }

    #[test]
    fn services_over_the_backend_limit_are_listed_bounded_with_the_exact_total() {
        let mut t = HnsTracker::new();
        // 30 Services with 65 backends, 10 with exactly 64, one headless with 100.
        for i in 0..40 {
            let name = format!("svc-{i:02}");
            t.apply_service(&service("ns", &name, &cip()));
            let n = if i < 30 { 65 } else { 64 };
            t.apply_slice(&slice_ready("ns", &format!("{name}-1"), &name, &ready(&ips(&format!("10.{i}."), n))));
        }
        t.apply_service(&service("ns", "headless", &Svc { cluster_ip: "None", ..cip() }));
        t.apply_slice(&slice_ready("ns", "headless-1", "headless", &ready(&ips("10.99.", 100))));

        let (listed, total) = t.services_over(64);
        assert_eq!(total, 30);
        assert_eq!(listed.len(), MAX_LISTED_SERVICES);
        let want: Vec<String> = (0..20).map(|i| format!("ns/svc-{i:02}")).collect();
        assert_eq!(listed, want, "first 20 by name");
        assert_eq!(t.services_over(63).1, 40);
        assert_eq!(t.services_over(65), (vec![], 0));
        assert_eq!(t.services_over(0), (vec![], 0), "0 = no limit");

        // Shrinking one below the limit takes it off the list.
        t.apply_slice(&slice_ready("ns", "svc-00-1", "svc-00", &ready(&ips("10.0.", 10))));
        let (listed, total) = t.services_over(64);
        assert_eq!((listed[0].as_str(), total), ("ns/svc-01", 29));
        // Backends across slices add up.
        t.apply_slice(&slice_ready("ns", "svc-00-2", "svc-00", &ready(&ips("10.200.", 60))));
        assert_eq!(t.services_over(64).1, 30);
    }

    #[test]
    fn stats_are_reported() {
        let mut t = HnsTracker::new();
        t.apply_service(&service("ns", "web", &cip()));
        t.apply_slice(&slice_ready("ns", "web-1", "web", &ready(&ips("10.1.", 100))));
        let s = t.stats();
        assert_eq!((s.services, s.slices, s.addresses), (1, 1, 100));
        assert!(s.approx_bytes > 100 * size_of::<IpAddr>(), "{s:?}");
    }

    // ---- incremental == recount, over random event sequences ----

    #[derive(Debug, Clone)]
    enum Op {
        Service(usize, Option<[i64; 2]>),
        Slice(usize, Option<(Option<usize>, Vec<u8>)>),
    }

    fn addr(i: u8) -> IpAddr {
        if i % 4 == 3 { IpAddr::from([0xfd00, 0, 0, 0, 0, 0, 0, u16::from(i)]) } else { IpAddr::from([10, 0, 0, i]) }
    }

    fn recount(
        services: &BTreeMap<usize, ServiceContribution>,
        slices: &BTreeMap<usize, SliceContribution>,
        limit: i64,
    ) -> ((i64, i64), Vec<String>, usize) {
        let mut backends: BTreeMap<String, [i64; 2]> = BTreeMap::new();
        for c in slices.values() {
            if let Some(s) = &c.service {
                let mut r = c.ready.clone();
                r.sort();
                r.dedup();
                for ip in r {
                    backends.entry(s.clone()).or_default()[family(&ip)] += 1;
                }
            }
        }
        let mut lbs = 0;
        let mut over = Vec::new();
        let svc = |k: &str| services.iter().find(|(i, _)| format!("ns/s{i}") == k).map(|(_, c)| *c);
        for (i, c) in services {
            let key = format!("ns/s{i}");
            let b = backends.get(&key).copied().unwrap_or_default();
            let mut most = 0;
            for (lb, n) in c.load_balancers.into_iter().zip(b) {
                if lb > 0 && n > 0 {
                    lbs += lb;
                    most = most.max(n);
                }
            }
            if most > limit {
                over.push(key);
            }
        }
        let mut addrs: BTreeSet<IpAddr> = BTreeSet::new();
        for c in slices.values() {
            let Some(s) = c.service.as_deref().and_then(svc) else { continue };
            addrs.extend(c.ready.iter().filter(|ip| s.load_balancers[family(ip)] > 0));
        }
        over.sort();
        let total = over.len();
        over.truncate(MAX_LISTED_SERVICES);
        ((lbs, addrs.len() as i64), over, total)
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                (0..4usize, prop::option::weighted(0.8, [0..3i64, 0..3i64])).prop_map(|(i, c)| Op::Service(i, c)),
                (0..6usize, prop::option::weighted(0.8, (prop::option::weighted(0.9, 0..5usize), prop::collection::vec(0..16u8, 0..8))))
                    .prop_map(|(i, c)| Op::Slice(i, c)),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(300))]
            #[test]
            fn incremental_totals_match_a_recount(ops in prop::collection::vec(op(), 1..60)) {
                let mut t = HnsTracker::new();
                let mut services = BTreeMap::new();
                let mut slices = BTreeMap::new();
                for op in ops {
                    match op {
                        Op::Service(i, c) => {
                            let c = c.map(|lb| ServiceContribution { load_balancers: lb });
                            t.set_service(&format!("ns/s{i}"), c);
                            match c { Some(c) => { services.insert(i, c); } None => { services.remove(&i); } }
                        }
                        Op::Slice(i, c) => {
                            let c = c.map(|(s, a)| SliceContribution {
                                service: s.map(|s| format!("ns/s{s}")),
                                ready: a.into_iter().map(addr).collect(),
                            });
                            t.set_slice(&format!("ns/sl{i}"), c.clone());
                            match c { Some(c) => { slices.insert(i, c); } None => { slices.remove(&i); } }
                        }
                    }
                    let (totals, over, total) = recount(&services, &slices, 2);
                    prop_assert_eq!(t.totals(), totals);
                    prop_assert_eq!(t.services_over(2), (over, total));
                }
                // Deleting everything leaves nothing behind.
                for i in 0..6 { t.set_slice(&format!("ns/sl{i}"), None); }
                for i in 0..4 { t.set_service(&format!("ns/s{i}"), None); }
                prop_assert_eq!(t.totals(), (0, 0));
                prop_assert_eq!(t.stats().services + t.stats().slices, 0);
                prop_assert!(t.by_backends.is_empty());
            }
        }
    }

    // ---- limits and capacity ----

    #[test]
    fn limits_default_per_release_and_take_overrides() {
        let l19 = Limits::default_for(OsVersion::Ltsc2019);
        assert_eq!(l19, Limits { load_balancers: 1_000, endpoints: 5_000, backends_per_service: 64 });
        for os in [OsVersion::Ltsc2022, OsVersion::Ltsc2025] {
            assert_eq!(Limits::default_for(os), Limits { load_balancers: 5_000, endpoints: 20_000, backends_per_service: 1_024 });
        }
        let spec = HnsSpec { max_load_balancers: 300, max_endpoints: 0, max_backends_per_service: -5, ..Default::default() };
        assert_eq!(
            Limits::for_pool(&spec, OsVersion::Ltsc2019),
            Limits { load_balancers: 300, endpoints: 5_000, backends_per_service: 64 }
        );
        assert_eq!(Limits::for_pool(&HnsSpec::default(), OsVersion::Ltsc2022), Limits::default_for(OsVersion::Ltsc2022));
        assert_eq!(l19.utilization((812, 4_100)), 0.82);
        assert_eq!(l19.utilization((900, 100)), 0.9);
        assert_eq!(l19.utilization((0, 0)), 0.0);
    }

    #[test]
    fn capacity_thresholds() {
        let l = Limits { load_balancers: 1_000, endpoints: 20_000, backends_per_service: 64 };
        // (totals, warn, over-limit count, state, condition status)
        type Case<'a> = ((i64, i64), i32, usize, &'a str, &'a str);
        let cases: &[Case] = &[
            ((0, 0), 80, 0, "WithinLimits", "True"),
            ((799, 15_999), 80, 0, "WithinLimits", "True"),
            ((800, 0), 80, 0, "NearLimit", "True"),
            ((0, 16_000), 80, 0, "NearLimit", "True"),
            ((1_000, 20_000), 80, 0, "NearLimit", "True"),
            ((1_001, 0), 80, 0, "Exceeded", "False"),
            ((0, 20_001), 80, 0, "Exceeded", "False"),
            ((10, 10), 80, 1, "Exceeded", "False"),
            ((999, 0), 100, 0, "WithinLimits", "True"),
            ((1_000, 0), 100, 0, "NearLimit", "True"),
            ((10, 0), 1, 0, "NearLimit", "True"),
            ((9, 0), 0, 0, "WithinLimits", "True"),     // warn clamped to 1%: 9 is 0.9%
            ((799, 0), 250, 0, "WithinLimits", "True"), // warn clamped to 100%
        ];
        for (totals, warn, over, state, status) in cases {
            let names: Vec<String> = (0..*over).map(|i| format!("ns/s{i}")).collect();
            let (st, c) = capacity(*totals, &l, *warn, (names, *over));
            assert_eq!(
                (st.state.as_str(), c.reason.as_str(), c.status.as_str()),
                (*state, *state, *status),
                "{totals:?} warn {warn}: {}",
                c.message
            );
            assert_eq!(c.type_, conditions::HNS_CAPACITY);
            assert_eq!(
                (st.expected_load_balancers, st.limit_load_balancers, st.expected_endpoints, st.limit_endpoints),
                (totals.0, 1_000, totals.1, 20_000)
            );
        }
    }

    #[test]
    fn capacity_messages_give_the_numbers_and_name_services() {
        let l = Limits { load_balancers: 1_000, endpoints: 20_000, backends_per_service: 64 };
        let (_, c) = capacity((812, 4_100), &l, 80, (vec![], 0));
        assert_eq!(
            c.message,
            "812 of 1,000 load balancers (81%), 4,100 of 20,000 endpoints (20%); warn at 80%; near the limit: load balancers"
        );
        let (_, c) = capacity((100, 4_100), &l, 80, (vec![], 0));
        assert_eq!(c.message, "100 of 1,000 load balancers (10%), 4,100 of 20,000 endpoints (20%); warn at 80%");
        let (_, c) = capacity((1_200, 30_000), &l, 80, (vec![], 0));
        assert!(
            c.message.contains("1,200 of 1,000 load balancers (120%)")
                && c.message.contains("over the limit: load balancers and endpoints"),
            "{}",
            c.message
        );
        let (_, c) = capacity((1_200, 17_000), &l, 80, (vec![], 0));
        assert!(c.message.ends_with("; over the limit: load balancers; near the limit: endpoints"), "{}", c.message);

        let names: Vec<String> = (0..25).map(|i| format!("ns/s{i:02}")).collect();
        let (st, c) = capacity((10, 10), &l, 80, (names, 31));
        assert_eq!(st.services_over_backend_limit.len(), MAX_LISTED_SERVICES, "status list bounded");
        assert_eq!(st.state, "Exceeded");
        assert!(
            c.message.ends_with(
                "; 31 Services have more ready backends than the 64 one HNS load balancer accepts (\"invalid number of destinations\"): ns/s00, ns/s01, ns/s02, ns/s03, ns/s04, and 26 more"
            ),
            "{}",
            c.message
        );
        let (_, c) = capacity((10, 10), &l, 80, (vec!["ns/a".into()], 1));
        assert!(
            c.message.ends_with(
                "1 Service has more ready backends than the 64 one HNS load balancer accepts (\"invalid number of destinations\"): ns/a"
            ),
            "{}",
            c.message
        );
        assert_eq!(thousands(-1_234_567), "-1,234,567");
        assert_eq!(thousands(100), "100");
    }

    #[test]
    fn capacity_from_the_tracker() {
        let mut t = HnsTracker::new();
        for i in 0..3 {
            let name = format!("s{i}");
            t.apply_service(&service("ns", &name, &cip()));
            t.apply_slice(&slice_ready("ns", &format!("{name}-1"), &name, &ready(&ips(&format!("10.{i}."), 70))));
        }
        let limits = Limits::for_pool(&HnsSpec::default(), OsVersion::Ltsc2019);
        let (st, c) = capacity(t.totals(), &limits, 80, t.services_over(limits.backends_per_service));
        assert_eq!((st.expected_load_balancers, st.expected_endpoints), (3, 210));
        assert_eq!(st.services_over_backend_limit, ["ns/s0", "ns/s1", "ns/s2"]);
        assert_eq!(c.reason, "Exceeded");
        let limits = Limits::for_pool(&HnsSpec::default(), OsVersion::Ltsc2022);
        let (st, _) = capacity(t.totals(), &limits, 80, t.services_over(limits.backends_per_service));
        assert_eq!(st.state, "WithinLimits");
        assert!(st.services_over_backend_limit.is_empty());
    }

    // ---- node readiness, condition, taint ----

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn node_readiness_from_reported_counts() {
        use HnsReadiness::*;
        let now = ts("2026-11-29T12:00:00Z");
        let wait = AwaitingReport { since: ts("2026-11-29T11:55:00Z"), grace: SignedDuration::from_mins(10) };
        let expired = AwaitingReport { since: ts("2026-11-29T11:00:00Z"), grace: SignedDuration::from_mins(10) };
        let long = "9".repeat(40);
        let unicode = "é".repeat(50);
        // (lb, ep, expected, tolerance, awaiting, readiness, reason)
        type Case<'a> = (Option<&'a str>, Option<&'a str>, (i64, i64), u8, Option<AwaitingReport>, HnsReadiness, &'a str);
        let cases: &[Case] = &[
            (Some("812"), Some("4100"), (812, 4_100), 5, None, Ready, "CaughtUp"),
            (Some("772"), Some("3895"), (812, 4_100), 5, None, Ready, "CaughtUp"), // exactly 95%, rounded up
            (Some("771"), Some("3895"), (812, 4_100), 5, None, NotReady, "CatchingUp"),
            (Some("772"), Some("3894"), (812, 4_100), 5, None, NotReady, "CatchingUp"),
            (Some("900"), Some("5000"), (812, 4_100), 0, None, Ready, "CaughtUp"),
            (Some("811"), Some("4100"), (812, 4_100), 0, None, NotReady, "CatchingUp"),
            (Some("0"), Some("0"), (812, 4_100), 100, None, Ready, "CaughtUp"),
            (Some("0"), Some("0"), (812, 4_100), 255, None, Ready, "CaughtUp"),
            (Some("0"), Some("0"), (0, 0), 5, None, Ready, "CaughtUp"),
            (Some(" 812\n"), Some("4100"), (812, 4_100), 5, None, Ready, "CaughtUp"),
            (Some("0"), Some("0"), (812, 4_100), 5, Some(wait), NotReady, "CatchingUp"),
            (None, None, (812, 4_100), 5, None, Unknown, "NotReported"),
            (Some("812"), None, (812, 4_100), 5, None, Unknown, "NotReported"),
            (None, None, (812, 4_100), 5, Some(wait), NotReady, "AwaitingReport"),
            (None, Some("4100"), (812, 4_100), 5, Some(wait), NotReady, "AwaitingReport"),
            (None, None, (812, 4_100), 5, Some(expired), Unknown, "NotReported"),
            (Some("abc"), Some("4100"), (812, 4_100), 5, None, Unknown, "InvalidReport"),
            (Some("-1"), Some("4100"), (812, 4_100), 5, None, Unknown, "InvalidReport"),
            (Some(""), Some("4100"), (812, 4_100), 5, None, Unknown, "InvalidReport"),
            (Some("1e3"), Some("4100"), (812, 4_100), 5, None, Unknown, "InvalidReport"),
            (Some("1,000"), Some("4100"), (812, 4_100), 5, None, Unknown, "InvalidReport"),
            (Some("+5"), Some("4100"), (812, 4_100), 5, None, Unknown, "InvalidReport"),
            (Some("812"), Some(&long), (812, 4_100), 5, None, Unknown, "InvalidReport"),
            (Some(&unicode), None, (812, 4_100), 5, Some(wait), Unknown, "InvalidReport"),
            (Some("9223372036854775807"), Some("9223372036854775807"), (i64::MAX, i64::MAX), 0, None, Ready, "CaughtUp"),
        ];
        for (lb, ep, expected, tol, awaiting, want, reason) in cases {
            let (r, why, msg) = node_readiness(*lb, *ep, *expected, *tol, *awaiting, now);
            assert_eq!((r, why), (*want, *reason), "{lb:?} {ep:?} {expected:?} tol {tol}: {msg}");
            assert!(msg.len() < 400, "bounded message: {msg}");
        }

        let (_, _, msg) = node_readiness(Some("120"), Some("300"), (812, 4_100), 5, None, now);
        assert_eq!(
            msg,
            "HNS is catching up: 120 of 812 load balancers and 300 of 4,100 endpoints programmed; ready at 772 and 3,895 (95%)"
        );
        let (_, _, msg) = node_readiness(Some("abc"), Some(&long), (812, 4_100), 5, None, now);
        assert!(
            msg.contains("winpool.dev/hns-load-balancers is \"abc\"") && msg.contains("\"99999999999999999999999999999999\"..."),
            "{msg}"
        );
        assert!(msg.contains("not tainted"), "{msg}");
        let (_, _, msg) = node_readiness(None, None, (812, 4_100), 5, None, now);
        assert!(
            msg.contains("winpool.dev/hns-load-balancers and winpool.dev/hns-endpoints missing") && msg.contains("not tainted"),
            "{msg}"
        );
        let (_, _, msg) = node_readiness(None, None, (1, 1), 5, Some(wait), now);
        assert!(msg.contains("2026-11-29T11:55:00Z") && msg.contains("10m"), "{msg}");
        // A Ready message does not move with the cluster's counts (no rewrite of every node on each change).
        let a = node_readiness(Some("900"), Some("5000"), (812, 4_100), 5, None, now).2;
        let b = node_readiness(Some("900"), Some("5000"), (813, 4_000), 5, None, now).2;
        assert_eq!(a, b);
    }

    #[test]
    fn node_condition_keeps_transition_time_while_status_holds() {
        let t0 = ts("2026-11-29T12:00:00Z");
        let t1 = ts("2026-11-29T12:01:00Z");
        let t2 = ts("2026-11-29T12:02:00Z");
        let c0 = node_condition(HnsReadiness::NotReady, "CatchingUp", "1 of 2", None, t0);
        assert_eq!((c0.type_.as_str(), c0.status.as_str()), ("WindowsHNSReady", "False"));
        assert_eq!(c0.last_transition_time, Some(Time(t0)));

        // Same everything: identical, so no write is needed.
        assert_eq!(node_condition(HnsReadiness::NotReady, "CatchingUp", "1 of 2", Some(&c0), t1), c0);
        // Same status, new message: transition kept, heartbeat moves.
        let c1 = node_condition(HnsReadiness::NotReady, "CatchingUp", "2 of 3", Some(&c0), t1);
        assert_eq!((c1.last_transition_time.clone(), c1.last_heartbeat_time.clone()), (Some(Time(t0)), Some(Time(t1))));
        // Status flips: both move.
        let c2 = node_condition(HnsReadiness::Ready, "CaughtUp", "ok", Some(&c1), t2);
        assert_eq!((c2.status.as_str(), c2.last_transition_time.clone()), ("True", Some(Time(t2))));
        let c3 = node_condition(HnsReadiness::Unknown, "NotReported", "?", Some(&c2), t2);
        assert_eq!(c3.status, "Unknown");
        // A previous condition of another type is ignored.
        let other =
            NodeCondition { type_: "Ready".into(), status: "False".into(), last_transition_time: Some(Time(t0)), ..Default::default() };
        assert_eq!(node_condition(HnsReadiness::NotReady, "x", "y", Some(&other), t2).last_transition_time, Some(Time(t2)));
    }

    #[test]
    fn only_not_ready_taints_and_the_taint_list_changes_minimally() {
        use HnsReadiness::*;
        for (r, flag, held, want) in [
            (NotReady, true, false, Some(true)),
            (NotReady, false, false, Some(false)),
            (Ready, true, false, Some(false)),
            (Unknown, true, false, Some(false)),
            // Held cordoned for its update: no new taint, an existing one stays until Ready.
            (NotReady, true, true, None),
            (NotReady, false, true, Some(false)),
            (Ready, true, true, Some(false)),
            (Unknown, true, true, Some(false)),
        ] {
            assert_eq!(taint_wanted(r, flag, held), want, "{r:?} taintWhenNotReady={flag} held={held}");
        }
        let other = Taint { key: "dedicated".into(), value: Some("win".into()), effect: "NoSchedule".into(), time_added: None };
        let ours_noexec = Taint { key: names::TAINT_HNS_NOT_READY.into(), effect: "NoExecute".into(), value: None, time_added: None };
        type Case = (Vec<Taint>, bool, Option<Vec<Taint>>);
        let cases: &[Case] = &[
            (vec![], true, Some(vec![hns_taint()])),
            (vec![], false, None),
            (vec![other.clone()], true, Some(vec![other.clone(), hns_taint()])),
            (vec![other.clone(), hns_taint()], true, None),
            (vec![hns_taint(), other.clone()], false, Some(vec![other.clone()])),
            (vec![hns_taint()], false, Some(vec![])),
            (vec![ours_noexec.clone()], false, None),
            (vec![ours_noexec.clone()], true, Some(vec![ours_noexec.clone(), hns_taint()])),
        ];
        for (current, wanted, want) in cases {
            assert_eq!(&taints_update(current, *wanted), want, "{current:?} wanted {wanted}");
        }
        assert_eq!(hns_taint().key, "winpool.dev/hns-not-ready");
        assert_eq!(hns_taint().effect, "NoSchedule");
    }
}
