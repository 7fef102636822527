//! How far behind each Windows node's kube-proxy is: an estimate of its HNS
//! programming backlog from the Service and EndpointSlice changes the
//! operator watches, so a rollout can wait for the data plane instead of
//! draining into a queue that leaves new endpoints unreachable for minutes.
//!
//! Every Windows node hears every change, and a node of one release
//! programs them at that release's pace, so one queue per release stands for
//! all its nodes: O(releases) per change, whatever the fleet's size.

#[allow(unused_imports)]
use super::*;
use std::time::Duration;

/// What a change makes kube-proxy (winkernel) do on every Windows node:
/// load-balancer policies it replaces (all of a Service's, once its
/// endpoints changed) and remote endpoints it creates or deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Work {
    pub load_balancers: u64,
    pub remote_endpoints: u64,
}

impl Work {
    pub fn is_empty(&self) -> bool {
        *self == Work::default()
    }
}

/// How long one HNS operation takes a node of a release.
///
/// kubernetes/kubernetes#109124 measured a full sync of 2,000 ClusterIP
/// Services with ~5,000 remote endpoints, with the OS and kube-proxy fixes, at
/// 22 minutes on Windows Server 2019 and 1 minute on 2022. It gives one total,
/// not the split: nine tenths are charged to the load balancers, one tenth to
/// the remote endpoints (2,000 × 600 ms + 5,000 × 24 ms = 22 min; 2,000 ×
/// 27 ms + 5,000 × 1.2 ms = 1 min). ltsc2025 has no published figure and is
/// assumed no slower than ltsc2022. The simulated fleet charges the same
/// published rates (`agent/internal/fleet/hnsmodel/cost.go`), from its own
/// code: the estimate here is checked against it, not derived from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgrammingRates {
    pub per_load_balancer: Duration,
    pub per_remote_endpoint: Duration,
}

impl ProgrammingRates {
    pub const fn default_for(os: OsVersion) -> ProgrammingRates {
        match os {
            OsVersion::Ltsc2019 => {
                ProgrammingRates { per_load_balancer: Duration::from_millis(600), per_remote_endpoint: Duration::from_millis(24) }
            }
            OsVersion::Ltsc2022 | OsVersion::Ltsc2025 => {
                ProgrammingRates { per_load_balancer: Duration::from_millis(27), per_remote_endpoint: Duration::from_micros(1200) }
            }
        }
    }

    pub fn cost(&self, w: Work) -> Duration {
        let n = |count: u64, each: Duration| each.saturating_mul(u32::try_from(count).unwrap_or(u32::MAX));
        n(w.load_balancers, self.per_load_balancer).saturating_add(n(w.remote_endpoints, self.per_remote_endpoint))
    }
}

/// The estimated programming queue of each release's nodes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Backlog {
    /// When a node of each release (`OsVersion::ALL` order) will have
    /// programmed every change charged so far.
    busy_until: [Option<Timestamp>; 3],
}

fn index(os: OsVersion) -> usize {
    OsVersion::ALL.iter().position(|o| *o == os).unwrap_or(0)
}

impl Backlog {
    /// Queues `work`, heard at `now`, behind what each release's nodes are still programming.
    pub fn charge(&mut self, work: Work, now: Timestamp) {
        if work.is_empty() {
            return;
        }
        for os in OsVersion::ALL {
            let slot = &mut self.busy_until[index(os)];
            let start = slot.filter(|t| *t > now).unwrap_or(now);
            let cost = SignedDuration::try_from(ProgrammingRates::default_for(os).cost(work)).unwrap_or(SignedDuration::MAX);
            *slot = Some(start.checked_add(cost).unwrap_or(Timestamp::MAX));
        }
    }

    /// How long a node of `os` needs, from `now`, to program what it heard so far.
    pub fn of(&self, os: OsVersion, now: Timestamp) -> Duration {
        match self.busy_until[index(os)] {
            Some(t) if t > now => now.duration_until(t).unsigned_abs(),
            _ => Duration::ZERO,
        }
    }
}
