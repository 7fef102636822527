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
        passed_over: vec![],
        searched_at: Time(now()),
        error: None,
    }
}

fn member<'a>(node: &'a str, offer: Option<&'a OfferReport>, kernel: &str, updated: bool) -> MemberPatch<'a> {
    MemberPatch { node, offer, kernel: Some(kernel.parse().unwrap()), updated }
}

const TUESDAY: &str = "2026-12-08T18:00:00Z";

#[test]
fn an_update_every_node_is_offered_resolves_one_revision_above_the_newest_build_two_nodes_offered_it_run() {
    let k = offer(Some("KB5050002"), TUESDAY);
    let members = [
        member("a", Some(&k), "10.0.20348.2700", false),
        member("b", Some(&k), "10.0.20348.2740", false),
        member("c", Some(&k), "10.0.20348.2740", false),
    ];
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
    let members = [
        member("a", Some(&none), "10.0.20348.2762", true),
        member("b", None, "10.0.20348.2700", false),
        member("c", Some(&none), "10.0.20348.2762", true),
    ];
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

/// A node's kubelet writes its own kernelVersion: one claiming a build far
/// above the others once set the pool's level one above it, out of every
/// node's reach. The level follows the newest build two nodes run, and the
/// node alone above it is named.
#[test]
fn one_nodes_build_above_the_others_never_sets_the_pools_level() {
    let k = offer(Some("KB5050002"), TUESDAY);
    let members = [
        member("a", Some(&k), "10.0.20348.2700", false),
        member("b", Some(&k), "10.0.20348.2740", false),
        member("forged", Some(&k), "10.0.20348.99999", false),
    ];
    let r = resolve(&policy("0s"), None, &members, now());
    let p = r.patch.clone().expect("resolved");
    assert_eq!(p.patch_level, "10.0.20348.2741", "one above b's, the newest build two nodes run");
    assert_eq!((condition(&r).status.as_str(), condition(&r).reason.as_str()), ("False", "Unconfirmed"));
    assert!(r.message.contains("forged reports 10.0.20348.99999"), "the node is named: {}", r.message);
    // Next round, the resolution stands and the node is still named: it is
    // offered the update and never started for it.
    let r = resolve(&policy("0s"), Some(&p), &members, now());
    assert_eq!((r.patch.as_ref().map(|p| p.patch_level.as_str()), condition(&r).reason.as_str()), (Some("10.0.20348.2741"), "Unconfirmed"));
    assert!(r.message.contains("forged reports 10.0.20348.99999"), "{}", r.message);
    // A node updated for it whose last search, before its install, still
    // shows the offer is not named: it was started.
    let updated = [
        member("a", Some(&k), "10.0.20348.2762", true),
        member("b", Some(&k), "10.0.20348.2762", true),
        member("forged", Some(&k), "10.0.20348.99999", false),
    ];
    let r = resolve(&policy("0s"), Some(&p), &updated, now());
    assert!(!r.message.contains("a reports") && r.message.contains("forged reports"), "{}", r.message);
}

/// One node's agent writes its own offer: an update only it is offered in a
/// pool of several moves nothing until a second node is offered it.
#[test]
fn an_update_offered_to_one_node_of_several_waits_for_a_second() {
    let (k, none) = (offer(Some("KB5050002"), TUESDAY), offer(None, TUESDAY));
    let members = [
        member("a", Some(&k), "10.0.20348.2700", false),
        member("b", Some(&none), "10.0.20348.2700", false),
        member("c", None, "10.0.20348.2700", false),
    ];
    let r = resolve(&policy("0s"), None, &members, now());
    assert_eq!(r.patch, None);
    assert_eq!((condition(&r).status.as_str(), condition(&r).reason.as_str()), ("False", "Unconfirmed"));
    assert!(r.message.contains("to a alone"), "{}", r.message);
    let members = [member("a", Some(&k), "10.0.20348.2700", false), member("b", Some(&k), "10.0.20348.2700", false)];
    assert_eq!(resolve(&policy("0s"), None, &members, now()).patch.expect("two agree").patch_level, "10.0.20348.2701");
}

/// Two nodes offered it, one of which reports no build yet: its build cannot
/// be confirmed, so the level waits rather than follow the one build known.
#[test]
fn a_level_waits_until_two_nodes_offered_the_update_report_their_builds() {
    let k = offer(Some("KB5050002"), TUESDAY);
    let members =
        [member("a", Some(&k), "10.0.20348.2740", false), MemberPatch { node: "b", offer: Some(&k), kernel: None, updated: false }];
    let r = resolve(&policy("0s"), None, &members, now());
    assert_eq!((&r.patch, condition(&r).reason.as_str()), (&None, "Unconfirmed"));
}

/// minAge once counted from the first node's `published`: a node reporting
/// an early date took the update a week early. It counts from the latest
/// any node offered it reports, and names that node.
#[test]
fn min_age_counts_from_the_latest_publication_the_nodes_offered_it_report() {
    let (early, real) = (offer(Some("KB5050002"), "2026-11-01T00:00:00Z"), offer(Some("KB5050002"), "2026-12-19T12:00:00Z"));
    let members = [member("early", Some(&early), "10.0.20348.2700", false), member("b", Some(&real), "10.0.20348.2700", false)];
    let r = resolve(&policy("168h"), None, &members, now());
    assert_eq!((&r.patch, condition(&r).reason.as_str()), (&None, "TooNew"));
    assert_eq!(r.eligible_in, Some(Duration::from_secs(6 * 24 * 3600)));
    assert!(r.message.contains("b's"), "{}", r.message);
    let later: Timestamp = "2026-12-27T00:00:00Z".parse().unwrap();
    let p = resolve(&policy("168h"), None, &members, later).patch.expect("a week after the latest");
    assert_eq!(p.published, real.published, "the resolution records the date it waited for");
}

/// A pool of one node has no second to agree with: it resolves from its
/// node, and says so.
#[test]
fn a_pool_of_one_node_resolves_from_that_node() {
    let k = offer(Some("KB5050002"), TUESDAY);
    let r = resolve(&policy("0s"), None, &[member("only", Some(&k), "10.0.20348.2740", false)], now());
    assert_eq!(r.patch.as_ref().expect("resolved").patch_level, "10.0.20348.2741");
    assert!(r.message.contains("the pool's only node"), "{}", r.message);
    let previous = r.patch.clone();
    let none = offer(None, TUESDAY);
    let r = resolve(&policy("0s"), previous.as_ref(), &[member("only", Some(&none), "10.0.20348.2762", true)], now());
    assert_eq!(r.patch.unwrap().build.as_deref(), Some("10.0.20348.2762"));
}

/// The build an update lands on is recorded once two updated nodes run it:
/// the first node's kubelet alone does not write the pool's record.
#[test]
fn the_build_landed_on_is_recorded_once_two_updated_nodes_run_it() {
    let k = offer(Some("KB5050002"), TUESDAY);
    let first = [member("a", Some(&k), "10.0.20348.2700", false), member("b", Some(&k), "10.0.20348.2700", false)];
    let previous = resolve(&policy("0s"), None, &first, now()).patch.unwrap();
    let none = offer(None, TUESDAY);
    let one = [member("a", Some(&none), "10.0.20348.2762", true), member("b", Some(&k), "10.0.20348.2700", false)];
    let r = resolve(&policy("0s"), Some(&previous), &one, now());
    assert_eq!((r.patch.as_ref().unwrap().build.as_deref(), condition(&r).reason.as_str()), (None, "Resolved"));
    assert!(r.message.contains("a, the first node updated for it, runs 10.0.20348.2762"), "{}", r.message);
    let two = [member("a", Some(&none), "10.0.20348.2762", true), member("b", Some(&none), "10.0.20348.2762", true)];
    assert_eq!(resolve(&policy("0s"), Some(&previous), &two, now()).patch.unwrap().build.as_deref(), Some("10.0.20348.2762"));
}

/// docs/OPERATIONS.md's `PatchResolved` row lists every reason the
/// condition carries, and no other.
#[test]
fn the_docs_list_every_patch_resolved_reason_and_no_other() {
    use strum::IntoEnumIterator;
    let table = crate::test_builders::doc_table(&crate::test_builders::doc("docs/OPERATIONS.md"), "| Condition | Reasons |");
    let row = table.iter().find(|r| r[0] == "`PatchResolved`").expect("a PatchResolved row");
    let listed = crate::test_builders::quoted(&row[1]);
    let code: std::collections::BTreeSet<String> = PatchReason::iter().map(|r| <&str>::from(r).to_string()).collect();
    // Field names (os.patchPolicy, minAge) are quoted too; reasons are capitalised.
    let listed: std::collections::BTreeSet<String> = listed.into_iter().filter(|q| q.starts_with(char::is_uppercase)).collect();
    let stray: Vec<_> = listed.difference(&code).collect();
    let lacks: Vec<_> = code.difference(&listed).collect();
    assert!(lacks.is_empty() && stray.is_empty(), "the PatchResolved row lacks {lacks:?} and lists {stray:?}");
}

/// A source that offers only .NET Framework's cumulative update (fault
/// dotnet-only): the agents offer no KB and say what they passed over; the
/// pool does not move and says why, naming the update and its nodes.
#[test]
fn a_pool_offered_only_dot_net_frameworks_update_does_not_move_and_says_why() {
    let mut none = offer(None, TUESDAY);
    none.passed_over = vec!["KB5050003: 2026-12 Cumulative Update for .NET Framework 3.5, 4.8 and 4.8.1 (KB5050003)".into()];
    let members = [member("a", Some(&none), "10.0.20348.2700", false), member("b", Some(&none), "10.0.20348.2700", false)];
    let r = resolve(&policy("0s"), None, &members, now());
    assert_eq!(r.patch, None);
    assert!(
        r.message.contains("KB5050003: 2026-12 Cumulative Update for .NET Framework") && r.message.contains("offered to a, b"),
        "{}",
        r.message
    );
}
