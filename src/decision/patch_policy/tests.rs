use super::*;
use crate::api::report::OfferReport;

fn now() -> Timestamp {
    "2026-12-20T12:00:00Z".parse().unwrap()
}

fn policy(min_age: &str) -> PatchPolicy {
    PatchPolicy { source: crate::api::PatchSource::UpdateSource, min_age: min_age.into(), check_interval: "6h".into() }
}

fn offer(kb: Option<&str>, published: &str) -> OfferReport {
    OfferReport {
        kb: kb.map(str::to_string),
        title: kb
            .map(|kb| format!("2026-12 Cumulative Update for Microsoft server operating system version 21H2 for x64-based Systems ({kb})")),
        published: Some(Time(published.parse().unwrap())),
        searched_at: Time(now()),
        error: None,
    }
}

fn member<'a>(node: &'a str, offer: Option<&'a OfferReport>, kernel: &str, updated: bool) -> MemberPatch<'a> {
    MemberPatch { node, offer, kernel: Some(kernel.parse().unwrap()), updated }
}

const TUESDAY: &str = "2026-12-08T18:00:00Z";

#[test]
fn an_update_every_node_is_offered_resolves_one_revision_above_the_newest_build_offered_it() {
    let k = offer(Some("KB5050002"), TUESDAY);
    let members = [member("a", Some(&k), "10.0.20348.2700", false), member("b", Some(&k), "10.0.20348.2740", false)];
    let r = resolve(&policy("0s"), None, &members, now());
    let p = r.patch.expect("resolved");
    assert_eq!((p.kb.as_str(), p.patch_level.as_str(), p.build), ("KB5050002", "10.0.20348.2741", None));
    assert_eq!(r.reason, PatchReason::Resolved);
}

#[test]
fn offers_that_disagree_keep_the_previous_resolution_and_name_the_nodes() {
    let (k1, k2) = (offer(Some("KB5050002"), TUESDAY), offer(Some("KB5050003"), TUESDAY));
    let members = [member("a", Some(&k1), "10.0.20348.2700", false), member("b", Some(&k2), "10.0.20348.2700", false)];
    let r = resolve(&policy("0s"), None, &members, now());
    assert_eq!((&r.patch, r.reason), (&None, PatchReason::OffersDisagree));
    assert!(r.message.contains("KB5050002 to a") && r.message.contains("KB5050003 to b"), "{}", r.message);
    assert_eq!(condition(&r).status, "False");
}

#[test]
fn an_update_younger_than_min_age_waits_and_says_until_when() {
    let k = offer(Some("KB5050002"), "2026-12-19T12:00:00Z");
    let members = [member("a", Some(&k), "10.0.20348.2700", false)];
    let r = resolve(&policy("168h"), None, &members, now());
    assert_eq!((r.patch, r.reason), (None, PatchReason::TooNew));
    assert_eq!(r.eligible_in, Some(Duration::from_secs(6 * 24 * 3600)));
    let r = resolve(&policy("24h"), None, &members, now());
    assert_eq!(r.reason, PatchReason::Resolved, "a day old: eligible");
}

#[test]
fn nodes_updated_for_the_resolution_show_its_build_and_nodes_offered_nothing_newer_change_nothing() {
    let before = resolve(&policy("0s"), None, &[member("a", Some(&offer(Some("KB5050002"), TUESDAY)), "10.0.20348.2700", false)], now());
    let previous = before.patch.unwrap();
    let none = offer(None, TUESDAY);
    let members = [member("a", Some(&none), "10.0.20348.2762", true), member("b", None, "10.0.20348.2700", false)];
    let r = resolve(&policy("0s"), Some(&previous), &members, now());
    let p = r.patch.unwrap();
    assert_eq!((p.kb.as_str(), p.patch_level.as_str(), p.build.as_deref()), ("KB5050002", "10.0.20348.2701", Some("10.0.20348.2762")));
    assert_eq!(p.resolved_at, previous.resolved_at, "the resolution stands");
    let members = [member("a", Some(&none), "10.0.20348.2762", true), member("b", Some(&none), "10.0.20348.2750", true)];
    let r = resolve(&policy("0s"), Some(&previous), &members, now());
    assert_eq!(r.reason, PatchReason::BuildsDisagree);
    assert!(r.message.contains("a on 10.0.20348.2762") && r.message.contains("b on 10.0.20348.2750"), "{}", r.message);
}

#[test]
fn a_newer_update_offered_moves_the_resolution() {
    let previous = resolve(&policy("0s"), None, &[member("a", Some(&offer(Some("KB5050002"), TUESDAY)), "10.0.20348.2700", false)], now())
        .patch
        .unwrap();
    let next = offer(Some("KB5050100"), "2027-01-12T18:00:00Z");
    let later: Timestamp = "2027-01-13T00:00:00Z".parse().unwrap();
    let r = resolve(&policy("0s"), Some(&previous), &[member("a", Some(&next), "10.0.20348.2762", true)], later);
    let p = r.patch.unwrap();
    assert_eq!((p.kb.as_str(), p.patch_level.as_str(), p.build), ("KB5050100", "10.0.20348.2763", None));
}

#[test]
fn the_effective_patch_level_never_goes_below_the_pools_own() {
    let mut spec: WindowsNodePoolSpec = serde_json::from_value(serde_json::json!({
        "nodeSelector": {"matchLabels": {"a": "b"}},
        "os": {"version": "ltsc2022", "patchLevel": "10.0.20348.2800", "patchPolicy": {"source": "UpdateSource"}},
        "runtime": {"containerd": {"version": "1.7.20"}},
    }))
    .unwrap();
    let mut p = ResolvedPatch {
        kb: "KB5050002".into(),
        title: None,
        published: None,
        patch_level: "10.0.20348.2701".into(),
        build: None,
        resolved_at: Time(now()),
    };
    assert!(matches!(effective_spec(&spec, Some(&p)), Cow::Borrowed(_)), "below the floor: the floor");
    p.patch_level = "10.0.20348.2901".into();
    assert_eq!(effective_spec(&spec, Some(&p)).os.patch_level, "10.0.20348.2901");
    spec.os.patch_policy = None;
    assert!(matches!(effective_spec(&spec, Some(&p)), Cow::Borrowed(_)), "no policy: the spec as written");
}

#[test]
fn kubectl_winpool_reads_the_pool_at_the_patch_level_its_status_resolved() {
    let spec: WindowsNodePoolSpec = serde_json::from_value(serde_json::json!({
        "nodeSelector": {"matchLabels": {"a": "b"}},
        "os": {"version": "ltsc2022", "patchLevel": "10.0.20348.2700", "patchPolicy": {"source": "UpdateSource"}},
    }))
    .unwrap();
    let mut pool = WindowsNodePool::new("p", spec);
    assert_eq!(as_resolved(&pool).spec.os.patch_level, "10.0.20348.2700", "nothing resolved yet: the floor");
    pool.status = Some(crate::api::WindowsNodePoolStatus {
        resolved_patch: Some(ResolvedPatch {
            kb: "KB5050002".into(),
            title: None,
            published: None,
            patch_level: "10.0.20348.2763".into(),
            build: None,
            resolved_at: Time(now()),
        }),
        ..Default::default()
    });
    let resolved = as_resolved(&pool);
    assert_eq!(resolved.spec.os.patch_level, "10.0.20348.2763");
    assert_ne!(
        crate::decision::revision::revision_of(&resolved.spec),
        crate::decision::revision::revision_of(&pool.spec),
        "the revision the operator rolls to"
    );
}
