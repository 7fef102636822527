//! What a pool's rounds carry from one to the next, in this replica only: one
//! value per pool, taken at the start of a reconcile and put back at its end.
//! Every decision made with it is pure (here and in `round`); the shell only
//! stores it. Lost on restart or to a new leader, it costs at most an early
//! status write, a standing problem announced again, a node's HNS grace
//! started anew and a budget's refusal seen again within a round.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use kube::runtime::events::Event;

use crate::api::{WindowsNodePool, WindowsNodePoolStatus};
use crate::decision::gates::{GateResult, still_fresh};
use crate::decision::rollout::{DrainBlock, NodePatch, NodeState, fold_average};
use crate::decision::status::{PROGRESS_WRITE_INTERVAL, only_progress_changed};

/// How long node starts and completions gather before they are announced.
pub(crate) const NODE_EVENT_INTERVAL: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Default)]
pub(crate) struct PoolMemory {
    /// When the pool's last reconcile started (they are spaced: `reconcile_gap`).
    pub last_reconcile: Option<Timestamp>,
    /// The status this replica last wrote.
    pub status_written: Option<StatusWritten>,
    /// Node starts and completions that landed and are not announced yet.
    pub batch: NodeBatch,
    /// The moving average of node update times, seeded from the status.
    pub average_node_update: Option<Duration>,
    /// The keys of the standing problems announced and still standing.
    pub announced: BTreeSet<String>,
    /// Draining nodes whose evictions a PodDisruptionBudget refuses, by node.
    pub drain_blocks: BTreeMap<String, DrainBlock>,
    /// Members whose HNS was caught up and is now behind: since when this
    /// replica has seen them behind (`hns_node::CATCH_UP_GRACE`).
    pub hns_behind: BTreeMap<String, Timestamp>,
    /// Members this replica has seen caught up on HNS: the boot (the Node's
    /// bootID) they were caught up in. Falling behind in that same boot is
    /// drift; after a reboot it is a catch-up.
    pub hns_caught_up_in: BTreeMap<String, String>,
    /// Members' boots: the bootID this replica last saw each in, and when it
    /// first saw that boot — None for the boot a member was in when this
    /// replica first saw it (it began before; when is not known).
    pub booted: BTreeMap<String, (String, Option<Timestamp>)>,
    /// What the pool's health gates last saw.
    pub gates: Option<GatesSeen>,
    /// Pods whose eviction a PodDisruptionBudget refused, by `namespace/name`:
    /// not asked again before `next` (every reconcile a Draining pool's
    /// changes trigger would otherwise ask within milliseconds).
    pub eviction_backoff: BTreeMap<String, EvictionBackoff>,
    /// When this replica's evictions went through, for EVICTION_UNHEARD: the
    /// EndpointSlice changes they cause reach the HNS estimate seconds later
    /// (the EndpointSlice controller writes them at its own pace).
    pub evicted_at: Vec<Timestamp>,
}

/// How long an eviction that went through counts against rollout.hnsPacing's
/// room before the changes it causes are heard: the 50%-wave benchmark saw
/// 36 evictions asked in 4 s against a room of 25 while the first ones'
/// slice changes were still on their way.
pub(crate) const EVICTION_UNHEARD: Duration = Duration::from_secs(10);

impl PoolMemory {
    /// Evictions that went through less than EVICTION_UNHEARD ago.
    pub fn evictions_unheard(&self, now: Timestamp) -> usize {
        self.evicted_at.iter().filter(|at| since(now, **at) < EVICTION_UNHEARD).count()
    }
}

/// A refused eviction's wait: 5 s after the first refusal (as kubectl drain
/// waits), doubling with each further one, at most a minute.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct EvictionBackoff {
    pub next: Timestamp,
    pub refusals: u32,
}

const EVICTION_BACKOFF_FIRST: Duration = Duration::from_secs(5);
const EVICTION_BACKOFF_MAX: Duration = Duration::from_secs(60);
/// A refusal older than this is forgotten (the pod went, or its drain ended).
const EVICTION_BACKOFF_FORGET: Duration = Duration::from_secs(600);

/// A status write of this replica: the next round may run before the pool's
/// watch shows it, and would then announce its transitions again.
#[derive(Debug, Clone)]
pub(crate) struct StatusWritten {
    pub at: Timestamp,
    /// The pool's resourceVersion after the write.
    pub resource_version: u64,
    pub status: WindowsNodePoolStatus,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct NodeBatch {
    pub revision: String,
    /// When the first transition of the batch landed.
    pub since: Option<Timestamp>,
    pub transitions: Vec<(String, NodeState, NodeState)>,
}

#[derive(Debug, Clone)]
pub(crate) struct GatesSeen {
    pub at: Timestamp,
    /// The pool's generation they were asked for: a spec change asks anew.
    pub generation: Option<i64>,
    pub results: Vec<GateResult>,
}

/// What the round does with the pool's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum StatusWrite {
    /// The status already says it.
    #[default]
    Unchanged,
    Write,
    /// Only the progress moved and it was written a moment ago: the next
    /// round writes it, after this long.
    Defer(Duration),
}

/// What the round's writes did, as the memory needs it.
#[derive(Debug, Default)]
pub(crate) struct Outcome<'r> {
    /// The node patches that landed (a failed write leaves some out).
    pub landed: Vec<&'r NodePatch>,
    /// Per node drained this round: the budget that refused its evictions, if any.
    pub drained: Vec<(String, Option<String>)>,
    /// Each eviction asked this round (`namespace/name`), and whether a budget refused it.
    pub evictions: Vec<(String, bool)>,
}

/// A batch of node transitions due to be announced: (revision, transitions).
pub(crate) type DueBatch = (String, Vec<(String, NodeState, NodeState)>);

fn since(now: Timestamp, then: Timestamp) -> Duration {
    now.duration_since(then).unsigned_abs()
}

impl PoolMemory {
    /// Remember that the pool is claimed by `by`; true the first time (say it once).
    pub fn note_claimed_by(&mut self, by: &str) -> bool {
        self.announced.insert(format!("claimed-by/{by}"))
    }

    /// How long the next reconcile should wait to keep `gap` after the last one's start.
    pub fn reconcile_wait(&self, gap: Duration, now: Timestamp) -> Option<Duration> {
        gap.checked_sub(since(now, self.last_reconcile?))
    }

    /// The pool with the status this replica last wrote, when the watch has not
    /// shown that write yet.
    pub fn as_last_written(&self, pool: &WindowsNodePool) -> Option<WindowsNodePool> {
        let w = self.status_written.as_ref()?;
        (w.resource_version > crate::api::node_record::revision(pool.metadata.resource_version.as_deref()))
            .then(|| WindowsNodePool { status: Some(w.status.clone()), ..pool.clone() })
    }

    /// Whether `next` is written: a change to anything a reader acts on at
    /// once; a change of progress alone at most every PROGRESS_WRITE_INTERVAL.
    pub fn status_write(&self, previous: Option<&WindowsNodePoolStatus>, next: &WindowsNodePoolStatus, now: Timestamp) -> StatusWrite {
        if previous == Some(next) {
            return StatusWrite::Unchanged;
        }
        let wait = match (previous, &self.status_written) {
            (Some(prev), Some(w)) if only_progress_changed(prev, next) => {
                PROGRESS_WRITE_INTERVAL.checked_sub(since(now, w.at)).filter(|d| !d.is_zero())
            }
            _ => None,
        };
        wait.map_or(StatusWrite::Write, StatusWrite::Defer)
    }

    pub fn wrote_status(&mut self, resource_version: u64, status: WindowsNodePoolStatus, now: Timestamp) {
        self.status_written = Some(StatusWritten { at: now, resource_version, status });
    }

    /// Whether a member judged behind keeps its HNS grace; remembers when it
    /// fell behind and forgets it once it is not.
    pub fn hns_grace(&mut self, node: &str, behind: bool, within: impl FnOnce(Timestamp) -> bool, now: Timestamp) -> bool {
        if !behind {
            self.hns_behind.remove(node);
            return false;
        }
        within(*self.hns_behind.entry(node.to_string()).or_insert(now))
    }

    /// Whether a member behind on HNS was caught up earlier in this same boot
    /// (what it held, it lost); remembers the boot a member is caught up in.
    pub fn hns_lost_in_boot(&mut self, node: &str, boot_id: &str, caught_up: bool) -> bool {
        if caught_up {
            self.hns_caught_up_in.insert(node.to_string(), boot_id.to_string());
            return false;
        }
        !boot_id.is_empty() && self.hns_caught_up_in.get(node).is_some_and(|b| b == boot_id)
    }

    /// Remembers the boot `node` is in, and when a new one was first seen.
    pub fn saw_boot(&mut self, node: &str, boot_id: &str, now: Timestamp) {
        if boot_id.is_empty() || self.booted.get(node).is_some_and(|(b, _)| b == boot_id) {
            return;
        }
        let at = self.booted.contains_key(node).then_some(now);
        self.booted.insert(node.to_string(), (boot_id.to_string(), at));
    }

    /// When the members' boots this replica saw begin did, within `within`
    /// of `now`: the nodes still catching up on what changed while they
    /// rebooted (`hns::Backlog::after_boot`).
    pub fn recent_boots(&self, within: SignedDuration, now: Timestamp) -> Vec<Timestamp> {
        self.booted.values().filter_map(|(_, at)| *at).filter(|at| now.duration_since(*at) <= within).collect()
    }

    /// Forget what is kept of nodes that left the pool.
    pub fn keep_members(&mut self, members: &BTreeSet<&str>) {
        self.booted.retain(|n, _| members.contains(n.as_str()));
        self.hns_behind.retain(|n, _| members.contains(n.as_str()));
        self.hns_caught_up_in.retain(|n, _| members.contains(n.as_str()));
        self.drain_blocks.retain(|n, _| members.contains(n.as_str()));
    }

    /// The budget refusing a node's drain; forgotten once the node is not
    /// Draining: what blocked its last drain is history.
    pub fn drain_block(&mut self, node: &str, draining: bool) -> Option<DrainBlock> {
        if draining {
            self.drain_blocks.get(node).cloned()
        } else {
            self.drain_blocks.remove(node);
            None
        }
    }

    /// Pods whose refused eviction is not due again yet.
    pub fn evictions_waiting(&self, now: Timestamp) -> BTreeSet<String> {
        self.eviction_backoff.iter().filter(|(_, b)| b.next > now).map(|(p, _)| p.clone()).collect()
    }

    /// When the first refused eviction still waiting is due again.
    pub fn next_eviction_due(&self, now: Timestamp) -> Option<Duration> {
        self.eviction_backoff.values().filter(|b| b.next > now).map(|b| since(b.next, now)).min()
    }

    /// What the gates saw, if it still stands for this generation.
    pub fn fresh_gates(&self, generation: Option<i64>, interval: Duration, now: Timestamp) -> Option<Vec<GateResult>> {
        let g = self.gates.as_ref()?;
        (g.generation == generation && still_fresh(&g.results, since(now, g.at), interval)).then(|| g.results.clone())
    }

    /// The Events of standing problems not standing last round; the ones
    /// standing now are remembered, so one that clears and comes back is news again.
    pub fn standing_news(&mut self, problems: Vec<(String, Event)>) -> Vec<Event> {
        let standing: BTreeSet<String> = problems.iter().map(|(k, _)| k.clone()).collect();
        let fresh = problems.into_iter().filter(|(k, _)| !self.announced.contains(k)).map(|(_, ev)| ev).collect();
        self.announced = standing;
        fresh
    }

    /// Take in what the round's writes did: the transitions that landed join
    /// the batch, and the batches due are returned (every NODE_EVENT_INTERVAL,
    /// at once when nothing is left in flight, and a batch of an earlier
    /// revision before any of the new one); node update times fold into the
    /// average; each drained node's budget refusal is kept, since its first.
    pub fn settle(
        &mut self,
        revision: &str,
        in_flight: usize,
        seeded_average: Option<Duration>,
        outcome: &Outcome<'_>,
        now: Timestamp,
    ) -> Vec<DueBatch> {
        let mut due = Vec::new();
        let b = &mut self.batch;
        if b.revision != revision && !b.transitions.is_empty() {
            due.push((std::mem::take(&mut b.revision), std::mem::take(&mut b.transitions)));
        }
        b.revision = revision.to_string();
        if b.transitions.is_empty() {
            b.since = None;
        }
        for p in &outcome.landed {
            b.transitions.push((p.node.clone(), p.from, p.to));
            b.since.get_or_insert(now);
        }
        let old_enough = b.since.is_some_and(|s| since(now, s) >= NODE_EVENT_INTERVAL);
        if !b.transitions.is_empty() && (in_flight == 0 || old_enough) {
            due.push((b.revision.clone(), std::mem::take(&mut b.transitions)));
            b.since = None;
        }
        self.average_node_update = fold_average(self.average_node_update.or(seeded_average), outcome.landed.iter().filter_map(|p| p.took));
        self.evicted_at.retain(|at| since(now, *at) < EVICTION_UNHEARD);
        self.evicted_at.extend(outcome.evictions.iter().filter(|(_, refused)| !refused).map(|_| now));
        for (pod, refused) in &outcome.evictions {
            if *refused {
                let b = self.eviction_backoff.entry(pod.clone()).or_insert(EvictionBackoff { next: now, refusals: 0 });
                b.refusals += 1;
                let wait = EVICTION_BACKOFF_FIRST.saturating_mul(1 << (b.refusals - 1).min(4)).min(EVICTION_BACKOFF_MAX);
                b.next = now + signed(wait);
            } else {
                self.eviction_backoff.remove(pod);
            }
        }
        self.eviction_backoff.retain(|_, b| since(now, b.next) < EVICTION_BACKOFF_FORGET);
        for (node, budget) in &outcome.drained {
            match budget {
                Some(budget) => {
                    let block = self.drain_blocks.entry(node.clone()).or_insert_with(|| DrainBlock { budget: budget.clone(), since: now });
                    block.budget.clone_from(budget);
                }
                None => {
                    self.drain_blocks.remove(node);
                }
            }
        }
        due
    }

    /// Transitions wait to be announced: the round looks again within the interval.
    pub fn batch_waiting(&self) -> bool {
        !self.batch.transitions.is_empty()
    }

    /// After a round that failed before it announced its standing problems:
    /// they are announced by the next.
    pub fn unannounced(mut self, announced_before: BTreeSet<String>) -> PoolMemory {
        self.announced = announced_before;
        self
    }
}

/// `SignedDuration` for the catch-up grace's arithmetic.
pub(crate) fn signed(d: Duration) -> SignedDuration {
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

#[cfg(test)]
mod tests {

    /// A boot is timed from when this replica saw it begin; the boot a node
    /// was in when the replica first saw it began at an unknown time, and
    /// counts for nothing (else every restart of the operator would look
    /// like the whole pool just rebooted).
    #[test]
    fn only_a_boot_seen_beginning_is_timed() {
        let t0: Timestamp = "2026-12-05T01:00:00Z".parse().unwrap();
        let at = |s: i64| t0 + jiff::SignedDuration::from_secs(s);
        let mut m = PoolMemory::default();
        m.saw_boot("a", "b-1", at(0));
        assert!(m.recent_boots(jiff::SignedDuration::from_mins(30), at(1)).is_empty());
        m.saw_boot("a", "b-2", at(10));
        m.saw_boot("a", "b-2", at(20));
        assert_eq!(m.recent_boots(jiff::SignedDuration::from_mins(30), at(30)), [at(10)]);
        assert!(m.recent_boots(jiff::SignedDuration::from_mins(30), at(10 + 1801)).is_empty(), "past the window");
        m.keep_members(&BTreeSet::new());
        assert!(m.booted.is_empty(), "a node that left is forgotten");
    }

    /// Evictions that went through count as unheard for EVICTION_UNHEARD,
    /// refused ones never.
    #[test]
    fn evictions_that_went_through_are_unheard_for_a_while() {
        let t0: Timestamp = "2026-12-05T01:00:00Z".parse().unwrap();
        let at = |s: i64| t0 + jiff::SignedDuration::from_secs(s);
        let mut m = PoolMemory::default();
        let evictions = vec![("apps/a".to_string(), false), ("apps/b".to_string(), false), ("apps/c".to_string(), true)];
        let outcome = Outcome { evictions, ..Outcome::default() };
        m.settle("r", 1, None, &outcome, at(0));
        assert_eq!(m.evictions_unheard(at(0)), 2, "the refused one caused no change");
        assert_eq!(m.evictions_unheard(at(9)), 2);
        assert_eq!(m.evictions_unheard(at(10)), 0, "heard by now");
        m.settle("r", 1, None, &Outcome::default(), at(11));
        assert!(m.evicted_at.is_empty(), "and forgotten");
    }

    use kube::runtime::events::EventType;

    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    use crate::api::conditions;

    fn at(s: u64) -> Timestamp {
        Timestamp::UNIX_EPOCH + SignedDuration::from_secs(s as i64)
    }

    fn status(ready: &str, updated: i32) -> WindowsNodePoolStatus {
        let mut s = WindowsNodePoolStatus::default();
        s.nodes.updated = updated;
        s.conditions = vec![Condition {
            type_: conditions::READY.into(),
            status: ready.into(),
            reason: "R".into(),
            message: format!("{updated} updated"),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH),
            observed_generation: None,
        }];
        s
    }

    #[test]
    fn progress_alone_is_written_at_most_every_interval_anything_else_at_once() {
        let mut m = PoolMemory::default();
        let (before, moved) = (status("False", 1), status("False", 2));
        assert_eq!(m.status_write(Some(&before), &before, at(0)), StatusWrite::Unchanged);
        assert_eq!(m.status_write(Some(&before), &moved, at(0)), StatusWrite::Write, "never written by this replica: written");
        m.wrote_status(7, before.clone(), at(10));
        assert_eq!(m.status_write(Some(&before), &moved, at(11)), StatusWrite::Defer(Duration::from_secs(1)));
        assert_eq!(m.status_write(Some(&before), &moved, at(12)), StatusWrite::Write, "the interval has passed");
        assert_eq!(m.status_write(Some(&before), &status("True", 2), at(11)), StatusWrite::Write, "a condition flip waits for nothing");
        assert_eq!(m.status_write(None, &moved, at(11)), StatusWrite::Write, "a first status waits for nothing");
    }

    #[test]
    fn a_status_written_but_not_yet_watched_stands_in_for_the_pool_s() {
        let mut m = PoolMemory::default();
        let mut pool = WindowsNodePool::new(
            "p",
            serde_saphyr::from_str("nodeSelector: {}\nos: {version: ltsc2022, patchLevel: 10.0.20348.2762}").unwrap(),
        );
        pool.metadata.resource_version = Some("5".into());
        assert!(m.as_last_written(&pool).is_none());
        m.wrote_status(6, status("True", 3), at(0));
        assert_eq!(m.as_last_written(&pool).and_then(|p| p.status), Some(status("True", 3)), "the watch is behind our write");
        pool.metadata.resource_version = Some("6".into());
        assert!(m.as_last_written(&pool).is_none(), "the watch caught up: the pool's own status");
    }

    fn patch(node: &str, from: NodeState, to: NodeState) -> NodePatch {
        NodePatch { node: node.into(), from, to, ..Default::default() }
    }

    fn names(due: &[DueBatch]) -> Vec<(String, Vec<String>)> {
        due.iter().map(|(r, t)| (r.clone(), t.iter().map(|t| t.0.clone()).collect())).collect()
    }

    #[test]
    fn node_transitions_are_announced_in_batches_every_interval_or_when_nothing_is_in_flight() {
        let mut m = PoolMemory::default();
        let (a, b, c) = (
            patch("a", NodeState::Pending, NodeState::Draining),
            patch("b", NodeState::Pending, NodeState::Draining),
            patch("c", NodeState::Verifying, NodeState::Updated),
        );
        fn landed<'p>(p: Vec<&'p NodePatch>) -> Outcome<'p> {
            Outcome { landed: p, ..Default::default() }
        }
        assert!(m.settle("r1", 1, None, &landed(vec![&a]), at(0)).is_empty(), "gathered while nodes are in flight");
        assert!(m.batch_waiting());
        assert!(m.settle("r1", 2, None, &landed(vec![&b]), at(4)).is_empty(), "within the interval");
        assert_eq!(names(&m.settle("r1", 2, None, &landed(vec![]), at(5))), [("r1".to_string(), vec!["a".to_string(), "b".to_string()])]);
        assert!(!m.batch_waiting());
        assert_eq!(
            names(&m.settle("r1", 0, None, &landed(vec![&c]), at(6))),
            [("r1".to_string(), vec!["c".to_string()])],
            "nothing in flight: at once"
        );
        assert!(m.settle("r1", 1, None, &landed(vec![&a]), at(7)).is_empty());
        let due = m.settle("r2", 1, None, &landed(vec![&b]), at(8));
        assert_eq!(names(&due), [("r1".to_string(), vec!["a".to_string()])], "the old revision's batch goes first, alone");
        assert_eq!(m.batch.revision, "r2");
        assert!(m.settle("r2", 1, None, &landed(vec![]), at(12)).is_empty(), "the new batch's interval starts at its first transition");
        assert_eq!(names(&m.settle("r2", 1, None, &landed(vec![]), at(13))), [("r2".to_string(), vec!["b".to_string()])]);
    }

    #[test]
    fn a_budget_s_refusal_is_kept_from_its_first_and_forgotten_when_the_node_stops_draining() {
        let mut m = PoolMemory::default();
        let drained = |budget: Option<&str>| Outcome { drained: vec![("a".into(), budget.map(str::to_string))], ..Default::default() };
        m.settle("r", 1, None, &drained(Some("shop/one")), at(0));
        m.settle("r", 1, None, &drained(Some("shop/two")), at(9));
        let block = m.drain_block("a", true).expect("kept while Draining");
        assert_eq!((block.budget.as_str(), block.since), ("shop/two", at(0)), "the latest budget, since the first refusal");
        m.settle("r", 1, None, &drained(None), at(10));
        assert!(m.drain_block("a", true).is_none(), "evictions went through: no block");
        m.settle("r", 1, None, &drained(Some("shop/one")), at(11));
        assert!(m.drain_block("a", false).is_none(), "not Draining any more");
        assert!(m.drain_blocks.is_empty(), "and forgotten");
    }

    #[test]
    fn a_member_behind_keeps_its_grace_from_when_it_fell_behind_until_it_is_not() {
        let mut m = PoolMemory::default();
        let mut asked = Vec::new();
        let grace = |m: &mut PoolMemory, behind: bool, now: Timestamp, asked: &mut Vec<Timestamp>| {
            m.hns_grace(
                "a",
                behind,
                |since| {
                    asked.push(since);
                    true
                },
                now,
            )
        };
        assert!(grace(&mut m, true, at(3), &mut asked));
        assert!(grace(&mut m, true, at(50), &mut asked));
        assert_eq!(asked, [at(3), at(3)], "judged from when it first fell behind");
        assert!(!grace(&mut m, false, at(51), &mut asked), "caught up: no grace needed");
        assert!(m.hns_behind.is_empty(), "and forgotten");
        m.hns_grace("b", true, |_| true, at(52));
        m.keep_members(&BTreeSet::from(["a"]));
        assert!(m.hns_behind.is_empty(), "a node that left the pool is forgotten");
    }

    #[test]
    fn gates_are_asked_again_after_their_interval_or_a_spec_change() {
        use crate::decision::gates::Seen;
        let mut m = PoolMemory::default();
        let closed = vec![GateResult { gate: "alerts".into(), seen: Seen::Alerts { total: 1, names: vec!["A".into()] } }];
        assert!(m.fresh_gates(Some(1), Duration::from_secs(30), at(0)).is_none(), "never asked");
        m.gates = Some(GatesSeen { at: at(0), generation: Some(1), results: closed.clone() });
        assert_eq!(m.fresh_gates(Some(1), Duration::from_secs(30), at(29)), Some(closed));
        assert!(m.fresh_gates(Some(1), Duration::from_secs(30), at(30)).is_none(), "a closed gate is looked at again");
        assert!(m.fresh_gates(Some(2), Duration::from_secs(30), at(1)).is_none(), "the spec changed");
    }

    #[test]
    fn a_standing_problem_is_announced_once_and_again_after_it_cleared() {
        let ev = |note: &str| Event {
            type_: EventType::Warning,
            reason: "NodesLeftAlone".into(),
            note: Some(note.into()),
            action: "Select".into(),
            secondary: None,
        };
        let notes = |evs: Vec<Event>| evs.into_iter().filter_map(|e| e.note).collect::<Vec<_>>();
        let mut m = PoolMemory::default();
        assert_eq!(notes(m.standing_news(vec![("a".into(), ev("a"))])), ["a"]);
        assert_eq!(notes(m.standing_news(vec![("a".into(), ev("a")), ("b".into(), ev("b"))])), ["b"], "a still stands: not again");
        assert!(m.standing_news(vec![]).is_empty() && m.announced.is_empty(), "cleared problems are forgotten");
        assert_eq!(notes(m.standing_news(vec![("a".into(), ev("a"))])), ["a"], "a came back: announced again");
        let before = m.announced.clone();
        m.standing_news(vec![("c".into(), ev("c"))]);
        assert_eq!(m.unannounced(before.clone()).announced, before, "a round that failed announced nothing");
    }

    #[test]
    fn reconciles_are_spaced_from_the_last_one_s_start() {
        let mut m = PoolMemory::default();
        assert_eq!(m.reconcile_wait(Duration::from_millis(250), at(0)), None, "the first goes at once");
        m.last_reconcile = Some(at(10));
        assert_eq!(m.reconcile_wait(Duration::from_secs(2), at(11)), Some(Duration::from_secs(1)));
        assert_eq!(m.reconcile_wait(Duration::from_secs(2), at(13)), None);
    }
}
