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
/// published rates (`agent/fleet/hnsmodel/cost.go`), from its own
/// code: the estimate here is checked against it, not derived from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

/// The estimated programming queue of nodes at each pace: each release's
/// default, and each pace a pool sets (`rollout.hnsPacing.rates`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Backlog {
    /// One per release, in `OsVersion::ALL` order.
    queues: [SyncQueue; 3],
    /// Paces pools set, each queue kept from when a pool first asked for it,
    /// and dropped once no pool asked for an hour (`Backlog::at_rates`).
    set: HashMap<ProgrammingRates, (SyncQueue, Timestamp)>,
    /// The changes of the last [`CHANGES_KEPT`], oldest first: what a node
    /// that rebooted heard while it caught up ([`Backlog::after_boot`]).
    changes: std::collections::VecDeque<(Timestamp, Arc<str>, Work)>,
}

/// How long changes are kept for a rebooted node's queue: a WS2019 node's
/// full sync of 2,000 Services takes 20 minutes.
pub const CHANGES_KEPT: SignedDuration = SignedDuration::from_mins(30);

/// The most changes kept (a bound on memory under churn; the oldest go).
const MAX_CHANGES_KEPT: usize = 200_000;

/// How long a pace no pool asks for is kept.
const UNASKED: SignedDuration = SignedDuration::from_hours(1);

/// kube-proxy's syncs on a node of one release, as winkernel runs them: a
/// sync takes every Service changed since the last one began and replaces
/// what each needs once, however often it changed meanwhile; changes heard
/// during it wait for the next.
#[derive(Debug, Clone, Default, PartialEq)]
struct SyncQueue {
    /// When the sync under way ends.
    sync_end: Option<Timestamp>,
    /// The Services changed since it began, and what each will take.
    pending: HashMap<Arc<str>, Work>,
    /// When the first of them was heard.
    first_pending: Option<Timestamp>,
}

impl SyncQueue {
    /// When the next sync begins: when the one under way ends, or at the
    /// first pending change if kube-proxy was idle then.
    fn next_start(&self) -> Option<Timestamp> {
        let first = self.first_pending?;
        Some(self.sync_end.map_or(first, |end| end.max(first)))
    }

    fn pending_cost(&self, rates: &ProgrammingRates) -> Duration {
        self.pending.values().fold(Duration::ZERO, |sum, w| sum.saturating_add(rates.cost(*w)))
    }

    /// Runs the sync that has begun by `now`, if one has.
    fn advance(&mut self, rates: &ProgrammingRates, now: Timestamp) {
        if let Some(start) = self.next_start().filter(|s| *s <= now) {
            self.sync_end = Some(later_by(start, self.pending_cost(rates)));
            self.pending.clear();
            self.first_pending = None;
        }
    }

    fn charge(&mut self, rates: &ProgrammingRates, service: &Arc<str>, work: Work, now: Timestamp) {
        self.advance(rates, now);
        let w = self.pending.entry(service.clone()).or_default();
        // One replacement of the Service's load balancers, however many changes.
        *w = Work {
            load_balancers: w.load_balancers.max(work.load_balancers),
            remote_endpoints: w.remote_endpoints + work.remote_endpoints,
        };
        self.first_pending.get_or_insert(now);
        self.advance(rates, now);
    }

    /// How long from `now` until what was heard so far is programmed.
    fn left(&self, rates: &ProgrammingRates, now: Timestamp) -> Duration {
        let end = match self.next_start() {
            Some(start) => later_by(start, self.pending_cost(rates)),
            None => match self.sync_end {
                Some(end) => end,
                None => return Duration::ZERO,
            },
        };
        if end > now { now.duration_until(end).unsigned_abs() } else { Duration::ZERO }
    }
}

fn later_by(t: Timestamp, d: Duration) -> Timestamp {
    SignedDuration::try_from(d).ok().and_then(|d| t.checked_add(d).ok()).unwrap_or(Timestamp::MAX)
}

impl Backlog {
    /// Queues a change of `service`, heard at `now`, on each release's nodes.
    pub fn charge(&mut self, service: &Arc<str>, work: Work, now: Timestamp) {
        if work.is_empty() {
            return;
        }
        while self.changes.front().is_some_and(|(at, _, _)| now.duration_since(*at) > CHANGES_KEPT)
            || self.changes.len() >= MAX_CHANGES_KEPT
        {
            self.changes.pop_front();
        }
        self.changes.push_back((now, service.clone(), work));
        for (os, q) in OsVersion::ALL.iter().zip(self.queues.iter_mut()) {
            q.charge(&ProgrammingRates::default_for(*os), service, work, now);
        }
        self.set.retain(|_, (_, asked)| now.duration_since(*asked) < UNASKED);
        for (rates, (q, _)) in &mut self.set {
            q.charge(rates, service, work, now);
        }
    }

    /// How long a node programming at `rates` needs, from `now`, to program
    /// what it heard so far. A pace no pool asked for before starts its queue
    /// now: the changes heard before are not in it.
    pub fn at_rates(&mut self, os: OsVersion, rates: ProgrammingRates, now: Timestamp) -> Duration {
        if rates == ProgrammingRates::default_for(os) {
            return self.of(os, now);
        }
        let (q, asked) = self.set.entry(rates).or_insert_with(|| (SyncQueue::default(), now));
        *asked = now;
        q.left(&rates, now)
    }

    /// How long a change heard `now` waits on a node that came up at `booted`,
    /// once that node serves: its kube-proxy's full sync after the boot takes
    /// `full_sync` (not counted: the node serves nothing until it is over, and
    /// HNS readiness waits for it), the changes heard meanwhile are its first
    /// sync after it (each Service once, however often it changed), and later
    /// ones queue as on any node. The steady-state queue knows no such node:
    /// right after its catch-up it is the slowest of the pool. None when the
    /// changes kept do not reach back to `booted` (steady state by then).
    pub fn after_boot(&self, rates: &ProgrammingRates, booted: Timestamp, full_sync: Duration, now: Timestamp) -> Option<Duration> {
        if self.changes.front().is_some_and(|(first, _, _)| *first > booted) && now.duration_since(booted) > CHANGES_KEPT {
            return None;
        }
        let mut q = SyncQueue { sync_end: Some(later_by(booted, full_sync)), ..SyncQueue::default() };
        for (at, service, work) in self.changes.iter().filter(|(at, _, _)| *at >= booted && *at <= now) {
            q.charge(rates, service, *work, *at);
        }
        q.advance(rates, now);
        let full_sync_left = later_by(booted, full_sync).duration_since(now).max(SignedDuration::ZERO).unsigned_abs();
        Some(q.left(rates, now).saturating_sub(full_sync_left))
    }

    /// How long a node of `os` needs, from `now`, to program what it heard so far.
    pub fn of(&self, os: OsVersion, now: Timestamp) -> Duration {
        let i = OsVersion::ALL.iter().position(|o| *o == os).unwrap_or(0);
        self.queues[i].left(&ProgrammingRates::default_for(os), now)
    }
}
