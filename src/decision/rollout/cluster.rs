//! The turn order under the install-wide bound (--max-nodes-in-flight).
//!
//! One pool at a time counts and starts, so two never take the same slot.
//! But a pool whose node finishes reconciles at once, on that Node's event,
//! while a pool held by the bound looks again only every few seconds: first
//! come would let the pool that already rolls take every slot it frees, and
//! the others wait for it to finish. So a pool held by the bound keeps a slot
//! from every pool that started waiting after it (or is not waiting): the
//! longest-waiting pool gets the next free slot.

use jiff::Timestamp;

use crate::api::{WindowsNodePoolStatus, conditions};
use crate::decision::status::Progress;

/// Whether a pool waits for a slot, and the time that orders it among the
/// waiting: its Progressing condition is False with reason
/// ClusterLimitReached (set only while the bound kept one of its nodes from
/// starting); the time is when Progressing turned False, which a change of
/// reason alone keeps (a pool resumed from a pause counts from the pause:
/// it has stood still the longest).
pub fn progressing(status: Option<&WindowsNodePoolStatus>) -> Option<Timestamp> {
    let c = status?.conditions.iter().find(|c| c.type_ == conditions::PROGRESSING)?;
    (c.status == "False" && Progress::parse(&c.reason) == Some(Progress::ClusterLimitReached)).then_some(c.last_transition_time.0)
}

/// How many of the install's other pools have waited for a slot since
/// before `me` (all the waiting ones when `me` is not waiting): `pools` is
/// every pool of the install with [`progressing`]'s answer.
pub fn waiting_ahead(me: &str, pools: &[(String, Option<Timestamp>)]) -> usize {
    let mine = pools.iter().find(|(name, _)| name == me).and_then(|(_, since)| *since);
    pools.iter().filter(|(name, _)| name != me).filter_map(|(_, since)| *since).filter(|t| mine.is_none_or(|m| *t < m)).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn status(status: &str, reason: &str, since: i64) -> WindowsNodePoolStatus {
        WindowsNodePoolStatus {
            conditions: vec![Condition {
                type_: conditions::PROGRESSING.into(),
                status: status.into(),
                reason: reason.into(),
                message: String::new(),
                last_transition_time: Time(at(since)),
                observed_generation: None,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn only_a_pool_held_by_the_bound_waits_for_a_slot() {
        assert_eq!(progressing(Some(&status("False", "ClusterLimitReached", 5))), Some(at(5)));
        assert_eq!(progressing(Some(&status("True", "NodesUpdating", 5))), None, "rolling");
        assert_eq!(progressing(Some(&status("False", "Paused", 5))), None, "paused: it would not take a slot");
        assert_eq!(progressing(None), None, "no status yet");
    }

    #[test]
    fn the_longest_waiting_pool_is_ahead_of_every_other() {
        let pools = vec![("a".to_string(), None), ("b".to_string(), Some(at(10))), ("c".to_string(), Some(at(20)))];
        assert_eq!(waiting_ahead("a", &pools), 2, "a rolls: both waiting pools keep a slot from it");
        assert_eq!(waiting_ahead("b", &pools), 0, "b waited longest: the next slot is b's");
        assert_eq!(waiting_ahead("c", &pools), 1, "c comes after b");
        assert_eq!(waiting_ahead("d", &pools), 2, "a pool not listed yet waits behind them all");
    }
}
