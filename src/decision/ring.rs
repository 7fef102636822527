//! Rings (`rollout.follows`): a pool starts a revision only once the pool it
//! follows has run that same revision on every node, Ready, for a soak time,
//! and starts nothing while that pool is Degraded. Pure.
//!
//! What soaked is what is promoted: the two pools' revisions are the hash of
//! their node-level configuration ([`NodeConfig`]), so equal revisions mean the
//! same patch level, runtime, networking and storage; unequal ones are refused
//! with the fields that differ. Once this pool has started a revision (its
//! `status.promotedRevision`), the pool it follows moving on to the next one
//! does not stop it half-way; only that pool's failures do.
//!
//! The soak runs from the followed pool's own status (`rolledOutAt`, which
//! only winpool writes), never from its nodes' `winpool.dev/state-since`:
//! whoever may patch Nodes could back-date that and skip the soak.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;

use crate::api::node_record::NodeRecord;
use crate::api::{NodeState, WindowsNodePoolSpec, WindowsNodePoolStatus, conditions, names};
use crate::decision::revision::{NodeConfig, revision_of};

/// The pool a ring follows, as the caches hold it.
#[derive(Debug, Clone, Copy)]
pub struct Followed<'a> {
    pub name: &'a str,
    pub spec: &'a WindowsNodePoolSpec,
    pub generation: Option<i64>,
    pub status: Option<&'a WindowsNodePoolStatus>,
}

/// One node labelled for the followed pool, from the Node cache.
#[derive(Debug, Clone, PartialEq)]
pub struct FollowedMember {
    pub name: String,
    pub ready: bool,
    /// Its `winpool.dev/revision` label.
    pub revision: Option<String>,
    /// It is Updated.
    pub updated: bool,
}

impl FollowedMember {
    /// A node labelled for the followed pool, as its record says.
    pub fn of(n: &NodeRecord) -> Self {
        FollowedMember {
            name: n.name.clone(),
            ready: n.ready,
            revision: n.label(names::LABEL_REVISION).map(str::to_string),
            updated: n.annotation(names::ANN_STATE).and_then(NodeState::parse) == Some(NodeState::Updated),
        }
    }
}

/// What the round observed of the ring: the pool followed, its members, and
/// which pool every pool follows (to find a cycle).
#[derive(Debug, Clone, Default)]
pub struct RingSeen<'a> {
    pub followed: Option<Followed<'a>>,
    pub members: Vec<FollowedMember>,
    /// pool → the pool it follows, for every pool that follows one.
    pub follows: BTreeMap<String, String>,
}

/// Why a ring starts no node this round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RingHold {
    /// No pool of that name exists.
    Missing { pool: String },
    /// Following leads back to this pool: no ring of them would ever start.
    Cycle { chain: Vec<String> },
    /// The pool followed has failed nodes.
    Degraded { pool: String, message: String },
    /// The pool followed has not acted on its latest spec yet.
    NotObserved { pool: String },
    /// The pool followed rolls another configuration: what differs.
    OtherRevision { pool: String, theirs: String, differs: Vec<String> },
    /// Not every node of the pool followed runs the revision, Ready.
    Rolling { pool: String, ready_on_revision: usize, total: usize },
    /// Every node runs it; the soak ends then.
    Soaking { pool: String, until: Timestamp },
}

impl RingHold {
    /// Whether a person must act (a name, a cycle, a configuration that
    /// differs, a failed ring), as against waiting for time to pass.
    pub fn needs_a_person(&self) -> bool {
        matches!(self, RingHold::Missing { .. } | RingHold::Cycle { .. } | RingHold::Degraded { .. } | RingHold::OtherRevision { .. })
    }

    /// When to look again on our own (a soak ends); other changes arrive as
    /// events of the pool followed.
    pub fn due(&self) -> Option<Timestamp> {
        match self {
            RingHold::Soaking { until, .. } => Some(*until),
            _ => None,
        }
    }
}

impl std::fmt::Display for RingHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RingHold::Missing { pool } => {
                write!(f, "rollout.follows names pool {pool}, which does not exist: create it or remove rollout.follows")
            }
            RingHold::Cycle { chain } => {
                write!(f, "rollout.follows goes round in a circle ({}): no pool of it would ever start", chain.join(" → "))
            }
            RingHold::Degraded { pool, message } => write!(f, "the pool it follows, {pool}, is Degraded: {message}"),
            RingHold::NotObserved { pool } => write!(f, "the pool it follows, {pool}, has not acted on its latest spec yet"),
            RingHold::OtherRevision { pool, theirs, differs } => write!(
                f,
                "the pool it follows, {pool}, rolls revision {theirs}, another configuration (it differs in {}): only a revision that soaked there is promoted",
                differs.join(", ")
            ),
            RingHold::Rolling { pool, ready_on_revision, total } => {
                write!(f, "the pool it follows, {pool}, runs the revision Ready on {ready_on_revision} of {total} nodes")
            }
            RingHold::Soaking { pool, until } => {
                write!(f, "the pool it follows, {pool}, runs the revision on every node; it soaks until {until}")
            }
        }
    }
}

/// The soak time of `rollout.follows` (a malformed one, which the CRD
/// refuses, as the default).
pub fn soak_time(spec: &WindowsNodePoolSpec) -> Option<Duration> {
    let f = spec.rollout.follows.as_ref()?;
    Some(crate::decision::rollout::parse_duration(&f.soak_time).unwrap_or(DEFAULT_SOAK_TIME))
}

pub const DEFAULT_SOAK_TIME: Duration = Duration::from_secs(24 * 3600);

/// Whether the ring holds this pool's starts of `rev` now; `None` also for a
/// pool that follows none. `promoted`: the revision this pool already started
/// on the word of the pool it follows (its status.promotedRevision).
pub fn hold(
    pool: &str,
    spec: &WindowsNodePoolSpec,
    rev: &str,
    promoted: Option<&str>,
    seen: &RingSeen<'_>,
    now: Timestamp,
) -> Option<RingHold> {
    let follows = spec.rollout.follows.as_ref()?;
    if let Some(chain) = cycle(pool, &seen.follows) {
        return Some(RingHold::Cycle { chain });
    }
    let Some(followed) = seen.followed.filter(|f| f.name == follows.pool) else {
        return Some(RingHold::Missing { pool: follows.pool.clone() });
    };
    let name = followed.name.to_string();
    if let Some(message) = degraded(followed.status) {
        return Some(RingHold::Degraded { pool: name, message });
    }
    if promoted == Some(rev) {
        return None;
    }
    let theirs = revision_of(followed.spec);
    if theirs != rev {
        let differs = differences(&NodeConfig::from_spec(followed.spec), &NodeConfig::from_spec(spec));
        return Some(RingHold::OtherRevision { pool: name, theirs, differs });
    }
    let status = followed.status.filter(|s| s.observed_generation == followed.generation && s.revision.as_deref() == Some(rev));
    let Some(status) = status else {
        return Some(RingHold::NotObserved { pool: name });
    };
    let total = (status.nodes.total.max(0) as usize).max(seen.members.len());
    let on_revision: Vec<&FollowedMember> =
        seen.members.iter().filter(|m| m.ready && m.revision.as_deref() == Some(rev) && m.updated).collect();
    let rolled_out_at = status.rolled_out_at.as_ref().map(|t| t.0);
    let Some(last) = rolled_out_at.filter(|_| total > 0 && on_revision.len() >= total && status.nodes.updated >= status.nodes.total) else {
        return Some(RingHold::Rolling { pool: name, ready_on_revision: on_revision.len(), total });
    };
    let soak = jiff::SignedDuration::try_from(soak_time(spec).unwrap_or(DEFAULT_SOAK_TIME)).unwrap_or(jiff::SignedDuration::MAX);
    let until = last.checked_add(soak).unwrap_or(Timestamp::MAX);
    (now < until).then_some(RingHold::Soaking { pool: name, until })
}

/// The followed pool's Degraded condition's message, when it is True.
fn degraded(status: Option<&WindowsNodePoolStatus>) -> Option<String> {
    let c = status?.conditions.iter().find(|c| c.type_ == conditions::DEGRADED && c.status == "True")?;
    Some(c.message.clone())
}

/// The chain from `pool` back to itself, if following leads there.
fn cycle(pool: &str, follows: &BTreeMap<String, String>) -> Option<Vec<String>> {
    let mut chain = vec![pool.to_string()];
    let mut at = follows.get(pool)?;
    while chain.len() <= follows.len() {
        chain.push(at.clone());
        if at == pool {
            return Some(chain);
        }
        at = follows.get(at)?;
    }
    None
}

/// The node-level fields in which two configurations differ, by name.
fn differences(a: &NodeConfig, b: &NodeConfig) -> Vec<String> {
    let (serde_json::Value::Object(a), serde_json::Value::Object(b)) =
        (serde_json::to_value(a).unwrap_or_default(), serde_json::to_value(b).unwrap_or_default())
    else {
        return Vec::new();
    };
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter().filter(|k| a.get(*k) != b.get(*k)).cloned().collect()
}

#[cfg(test)]
mod tests;
