//! The cluster-wide HNS load every Windows node is expected to hold: what each
//! Service and EndpointSlice contributes, kept incrementally by [`HnsTracker`].

#[allow(unused_imports)]
use super::*;

/// Walk two sorted, deduplicated lists once: `change(ip, -1)` for every
/// address only in `old`, `change(ip, 1)` for every one only in `new`.
fn sorted_difference(old: &[IpAddr], new: &[IpAddr], mut change: impl FnMut(IpAddr, i64)) {
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
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
}

/// Index of an address family in the per-family arrays: 0 = IPv4, 1 = IPv6.
pub(super) fn family(ip: &IpAddr) -> usize {
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

    /// Policies of the families with no ready endpoint yet: every node
    /// programs them once endpoints arrive (a Service created before its pods).
    fn awaiting(&self) -> i64 {
        let Some(c) = self.svc else { return 0 };
        (0..2).filter(|&f| self.backends[f] == 0).map(|f| c.load_balancers[f]).sum()
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

/// Counted addresses, with what moving them cost kube-proxy since the
/// tracker last took its work ([`HnsTracker::take_work`]).
#[derive(Debug, Default)]
struct Addresses {
    /// Counted address -> how many (slice, address) pairs hold it.
    refs: HashMap<IpAddr, u32>,
    /// Addresses added to or removed from a programmed Service.
    moves: u64,
    /// Remote endpoints created or deleted (an address counted for the first time, or no longer).
    endpoints: u64,
}

fn add_address(addresses: &mut Addresses, ip: IpAddr) {
    addresses.moves += 1;
    let n = addresses.refs.entry(ip).or_insert(0);
    if *n == 0 {
        addresses.endpoints += 1;
    }
    *n += 1;
}

fn remove_address(addresses: &mut Addresses, ip: IpAddr) {
    addresses.moves += 1;
    if let Entry::Occupied(mut e) = addresses.refs.entry(ip) {
        if *e.get() <= 1 {
            e.remove();
            addresses.endpoints += 1;
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
    addresses: Addresses,
    /// (backends, service) for programmed Services with at least one backend.
    pub(super) by_backends: BTreeSet<(i64, Arc<str>)>,
    load_balancers: i64,
    /// The Services' policies that wait for their endpoints ([`ServiceEntry::awaiting`]).
    awaiting: i64,
    service_epoch: u64,
    slice_epoch: u64,
    /// Each watch finished its first list: until both have, the totals are
    /// too low and a node would look caught up when it is not.
    services_listed: bool,
    slices_listed: bool,
    /// What the changes applied since the last [`Self::take_work`] cost every node, by Service.
    work: HashMap<Arc<str>, Work>,
    /// Each release's estimated programming queue, fed by [`Self::charge`].
    backlog: Backlog,
}

/// Boots closer than this are one for the queue (a wave reboots together).
const BOOTS_APART: SignedDuration = SignedDuration::from_secs(5);

/// The most boots replayed a round.
const MAX_BOOTS: usize = 16;

impl HnsTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// What the changes applied since the last call cost each Windows node's
    /// kube-proxy (nothing before both first lists are in: what a node holds
    /// already is no change).
    pub fn take_work(&mut self) -> Vec<(Arc<str>, Work)> {
        let work = std::mem::take(&mut self.work);
        if self.synced() { work.into_iter().filter(|(_, w)| !w.is_empty()).collect() } else { Vec::new() }
    }

    /// Queues the work of the events applied since the last call, heard at `now`.
    pub fn charge(&mut self, now: Timestamp) {
        for (service, work) in self.take_work() {
            self.backlog.charge(&service, work, now);
        }
    }

    /// How long a Windows node of `os` needs from `now` to program the changes charged so far.
    pub fn backlog(&self, os: OsVersion, now: Timestamp) -> std::time::Duration {
        self.backlog.of(os, now)
    }

    /// [`Self::backlog`] for nodes that program at `rates` (a pool's `rollout.hnsPacing.rates`).
    pub fn backlog_at(&mut self, os: OsVersion, rates: super::ProgrammingRates, now: Timestamp) -> std::time::Duration {
        self.backlog.at_rates(os, rates, now)
    }

    /// The longest of [`Self::backlog_at`] and the queues of nodes that came
    /// up at `boots` (each a full sync of what the cluster holds now, then
    /// what changed meanwhile as one sync: `Backlog::after_boot`).
    pub fn backlog_with_boots(
        &mut self,
        os: OsVersion,
        rates: super::ProgrammingRates,
        boots: &[Timestamp],
        now: Timestamp,
    ) -> std::time::Duration {
        let steady = self.backlog.at_rates(os, rates, now);
        let (lb, ep) = self.totals();
        let full_sync = rates.cost(Work { load_balancers: lb.max(0) as u64, remote_endpoints: ep.max(0) as u64 });
        let mut distinct: Vec<Timestamp> = boots.to_vec();
        distinct.sort_unstable();
        distinct.dedup_by(|a, b| a.duration_since(*b) < BOOTS_APART);
        // The latest boots carry the longest queues: a bound on the work per round.
        let latest = &distinct[distinct.len().saturating_sub(MAX_BOOTS)..];
        latest.iter().filter_map(|b| self.backlog.after_boot(&rates, *b, full_sync, now)).fold(steady, std::time::Duration::max)
    }

    /// Both watches have delivered their first complete list.
    pub fn synced(&self) -> bool {
        self.services_listed && self.slices_listed
    }

    /// Expected (load-balancer policies, remote endpoints) on every node. O(1).
    pub fn totals(&self) -> (i64, i64) {
        (self.load_balancers, self.addresses.refs.len() as i64)
    }

    /// The load-balancer policies of Services whose endpoints have not
    /// arrived: not on any node yet, but they will be. O(1).
    pub fn awaiting_load_balancers(&self) -> i64 {
        self.awaiting
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
                    sorted_difference(&old_ready, &new_ready, |ip, delta| {
                        let f = family(&ip);
                        entry.backends[f] += delta;
                        if entry.counts(f) {
                            if delta > 0 { add_address(addresses, ip) } else { remove_address(addresses, ip) }
                        }
                    });
                });
            }
            _ => {
                if let Some(b) = &new_service {
                    self.attach_slice(b, &key, &new_ready, 1);
                }
                if let Some(a) = &old_service {
                    self.attach_slice(a, &key, &old_ready, -1);
                }
            }
        }
        if present {
            self.slices.insert(key, SliceEntry { service: new_service, ready: new_ready, seen: self.slice_epoch });
        }
    }

    /// Count a slice's ready addresses into (`sign` 1) or out of (`sign` -1) the Service `service`.
    fn attach_slice(&mut self, service: &Arc<str>, key: &Arc<str>, ready: &[IpAddr], sign: i64) {
        self.update_service(service, |entry, _, addresses| {
            if sign > 0 {
                entry.slices.push(key.clone());
            } else {
                entry.slices.retain(|s| **s != **key);
            }
            for ip in ready {
                let f = family(ip);
                entry.backends[f] += sign;
                if entry.counts(f) {
                    if sign > 0 { add_address(addresses, *ip) } else { remove_address(addresses, *ip) }
                }
            }
        });
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
            addresses: self.addresses.refs.len(),
            approx_bytes: table(self.services.capacity(), size_of::<(Arc<str>, ServiceEntry)>())
                + table(self.slices.capacity(), size_of::<(Arc<str>, SliceEntry)>())
                + table(self.addresses.refs.capacity(), size_of::<(IpAddr, u32)>())
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
        let Self { services, slices, addresses, by_backends, load_balancers, awaiting, work, .. } = self;
        let entry = services.entry(key.clone()).or_default();
        let (lbs_before, backends_before) = entry.derived();
        let awaiting_before = entry.awaiting();
        let (moves, endpoints) = (addresses.moves, addresses.endpoints);
        f(entry, slices, addresses);
        let (lbs_after, backends_after) = entry.derived();
        *load_balancers += lbs_after - lbs_before;
        *awaiting += entry.awaiting() - awaiting_before;
        // winkernel replaces every load balancer of a Service whose endpoints
        // changed, and creates or deletes the remote endpoints that appeared or went.
        if addresses.moves != moves || lbs_before != lbs_after {
            let w = work.entry(key.clone()).or_default();
            w.load_balancers = w.load_balancers.max(lbs_before.max(lbs_after) as u64);
            w.remote_endpoints += addresses.endpoints - endpoints;
        }
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

// Limits
