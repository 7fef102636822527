use super::*;
use crate::api::NodeCounts;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

const NOW: &str = "2026-12-04T12:00:00Z";

fn now() -> Timestamp {
    NOW.parse().unwrap()
}

fn spec(patch: &str, extra: &str) -> WindowsNodePoolSpec {
    crate::test_builders::pool("p").patch_level(patch).with(extra).spec()
}

fn follower(patch: &str) -> WindowsNodePoolSpec {
    spec(patch, "rollout: {follows: {pool: canary, soakTime: 1h}}")
}

/// How long ago a complete pool's status says it rolled out.
const ROLLED_OUT_AGO: jiff::SignedDuration = jiff::SignedDuration::from_mins(30);

fn status(rev: &str, updated: i32, total: i32, degraded: Option<&str>) -> WindowsNodePoolStatus {
    let mut conditions = Vec::new();
    if let Some(m) = degraded {
        conditions.push(Condition {
            type_: conditions::DEGRADED.into(),
            status: "True".into(),
            reason: "NodesFailed".into(),
            message: m.into(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()),
            observed_generation: Some(1),
        });
    }
    WindowsNodePoolStatus {
        observed_generation: Some(1),
        revision: Some(rev.into()),
        nodes: NodeCounts { total, updated, ..Default::default() },
        conditions,
        rolled_out_at: (total > 0 && updated == total)
            .then(|| k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now() - ROLLED_OUT_AGO)),
        ..Default::default()
    }
}

fn member(name: &str, rev: &str, updated_ago_mins: Option<i64>, ready: bool) -> FollowedMember {
    FollowedMember { name: name.into(), ready, revision: Some(rev.into()), updated: updated_ago_mins.is_some() }
}

fn seen<'a>(canary: &'a WindowsNodePoolSpec, st: &'a WindowsNodePoolStatus, members: Vec<FollowedMember>) -> RingSeen<'a> {
    RingSeen {
        followed: Some(Followed { name: "canary", spec: canary, generation: Some(1), status: Some(st) }),
        members,
        follows: BTreeMap::from([("prod".into(), "canary".into())]),
    }
}

#[test]
fn a_pool_that_follows_none_is_never_held_by_a_ring() {
    let s = spec("10.0.20348.2762", "");
    assert_eq!(hold("prod", &s, &revision_of(&s), None, &RingSeen::default(), now()), None);
}

#[test]
fn a_ring_starts_once_every_node_of_the_pool_it_follows_ran_the_revision_for_the_soak_time() {
    let (canary, prod) = (spec("10.0.20348.2762", ""), follower("10.0.20348.2762"));
    let rev = revision_of(&prod);
    assert_eq!(rev, revision_of(&canary), "rollout settings are not part of the revision");
    let st = status(&rev, 2, 2, None);
    // The canary's status says it rolled out 30 minutes ago: 30 more to soak,
    // however long ago its nodes' own state-since claims they were Updated.
    let soaking = seen(&canary, &st, vec![member("c0", &rev, Some(90), true), member("c1", &rev, Some(3000), true)]);
    let until = now() + jiff::SignedDuration::from_mins(30);
    assert_eq!(hold("prod", &prod, &rev, None, &soaking, now()), Some(RingHold::Soaking { pool: "canary".into(), until }));
    assert_eq!(hold("prod", &prod, &rev, None, &soaking, until), None, "open when the soak ends");
    let unsaid = WindowsNodePoolStatus { rolled_out_at: None, ..st.clone() };
    let unsaid = seen(&canary, &unsaid, soaking.members.clone());
    assert!(matches!(hold("prod", &prod, &rev, None, &unsaid, until), Some(RingHold::Rolling { .. })), "no time said, no soak");
}

#[test]
fn a_ring_waits_while_a_node_of_the_pool_it_follows_is_not_ready_or_not_on_the_revision() {
    let (canary, prod) = (spec("10.0.20348.2762", ""), follower("10.0.20348.2762"));
    let rev = revision_of(&prod);
    let st = status(&rev, 2, 2, None);
    let not_ready = seen(&canary, &st, vec![member("c0", &rev, Some(600), true), member("c1", &rev, Some(600), false)]);
    assert_eq!(
        hold("prod", &prod, &rev, None, &not_ready, now()),
        Some(RingHold::Rolling { pool: "canary".into(), ready_on_revision: 1, total: 2 })
    );
    let rolling = status(&rev, 1, 3, None);
    let behind = seen(&canary, &rolling, vec![member("c0", &rev, Some(600), true), member("c1", "old", None, true)]);
    assert!(matches!(hold("prod", &prod, &rev, None, &behind, now()), Some(RingHold::Rolling { total: 3, .. })));
    let empty = status(&rev, 0, 0, None);
    assert!(matches!(hold("prod", &prod, &rev, None, &seen(&canary, &empty, vec![]), now()), Some(RingHold::Rolling { total: 0, .. })));
}

#[test]
fn only_the_configuration_that_soaked_is_promoted_and_the_refusal_names_what_differs() {
    let canary = spec("10.0.20348.2700", "networking: {cniMode: l2bridge}");
    let prod = follower("10.0.20348.2762");
    let rev = revision_of(&prod);
    let st = status(&revision_of(&canary), 2, 2, None);
    let s = seen(&canary, &st, vec![member("c0", &revision_of(&canary), Some(600), true)]);
    let Some(RingHold::OtherRevision { differs, .. }) = hold("prod", &prod, &rev, None, &s, now()) else { panic!("held") };
    assert_eq!(differs, vec!["cniMode".to_string(), "patchLevel".to_string()]);
}

#[test]
fn a_degraded_pool_it_follows_stops_a_ring_even_mid_rollout() {
    let (canary, prod) = (spec("10.0.20348.2762", ""), follower("10.0.20348.2762"));
    let rev = revision_of(&prod);
    let st = status(&rev, 1, 2, Some("1 nodes failed"));
    let s = seen(&canary, &st, vec![member("c0", &rev, Some(600), true)]);
    assert!(matches!(hold("prod", &prod, &rev, Some(&rev), &s, now()), Some(RingHold::Degraded { .. })), "promoted or not");
}

#[test]
fn a_revision_already_promoted_goes_on_when_the_pool_it_follows_moves_to_the_next() {
    let (canary, prod) = (spec("10.0.20348.2800", ""), follower("10.0.20348.2762"));
    let rev = revision_of(&prod);
    let st = status(&revision_of(&canary), 0, 2, None);
    let s = seen(&canary, &st, vec![]);
    assert_eq!(hold("prod", &prod, &rev, Some(&rev), &s, now()), None);
    assert!(matches!(hold("prod", &prod, &rev, Some("older"), &s, now()), Some(RingHold::OtherRevision { .. })));
}

#[test]
fn a_status_older_than_the_spec_of_the_pool_it_follows_is_not_trusted() {
    let (canary, prod) = (spec("10.0.20348.2762", ""), follower("10.0.20348.2762"));
    let rev = revision_of(&prod);
    let mut st = status(&rev, 2, 2, None);
    st.observed_generation = Some(0);
    let s = seen(&canary, &st, vec![member("c0", &rev, Some(600), true), member("c1", &rev, Some(600), true)]);
    assert_eq!(hold("prod", &prod, &rev, None, &s, now()), Some(RingHold::NotObserved { pool: "canary".into() }));
}

#[test]
fn a_missing_pool_or_a_circle_of_rings_holds_and_says_so() {
    let prod = follower("10.0.20348.2762");
    let rev = revision_of(&prod);
    assert_eq!(hold("prod", &prod, &rev, Some(&rev), &RingSeen::default(), now()), Some(RingHold::Missing { pool: "canary".into() }));
    let circle =
        RingSeen { follows: BTreeMap::from([("prod".into(), "canary".into()), ("canary".into(), "prod".into())]), ..Default::default() };
    let Some(RingHold::Cycle { chain }) = hold("prod", &prod, &rev, None, &circle, now()) else { panic!("held") };
    assert_eq!(chain, ["prod", "canary", "prod"]);
    let myself = spec("10.0.20348.2762", "rollout: {follows: {pool: prod}}");
    let own = RingSeen { follows: BTreeMap::from([("prod".into(), "prod".into())]), ..Default::default() };
    assert!(matches!(hold("prod", &myself, &rev, None, &own, now()), Some(RingHold::Cycle { .. })));
    // A circle further along is not this pool's: it waits on the pool it follows.
    let further = RingSeen {
        follows: BTreeMap::from([("prod".into(), "a".into()), ("a".into(), "b".into()), ("b".into(), "a".into())]),
        ..Default::default()
    };
    assert_eq!(cycle("prod", &further.follows), None);
}

#[test]
fn the_soak_time_defaults_to_a_day() {
    assert_eq!(soak_time(&spec("10.0.20348.2762", "rollout: {follows: {pool: canary}}")), Some(DEFAULT_SOAK_TIME));
    assert_eq!(soak_time(&spec("10.0.20348.2762", "")), None);
}
