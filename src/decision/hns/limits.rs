//! What one node of each Windows Server release is assumed to carry.

#[allow(unused_imports)]
use super::*;

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
