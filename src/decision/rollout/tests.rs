use super::*;
use crate::api::WindowsNodePoolSpec;
use crate::api::names;
use crate::decision::agent_report::Reported;
use std::collections::BTreeSet;

const POOL: &str = "p";

fn spec_with(extra: &str) -> WindowsNodePoolSpec {
    crate::test_builders::pool("p").selecting("pool", "p").runtime("1.7.22").with(extra).spec()
}

fn now() -> Timestamp {
    "2026-11-29T12:00:00Z".parse().unwrap()
}

fn ago(secs: i64) -> Option<Timestamp> {
    Some(now() - jiff::SignedDuration::from_secs(secs))
}

/// A pool member that has never been touched, at the old patch level.
fn fresh(name: &str) -> NodeView {
    NodeView {
        name: name.into(),
        pool_label: Some(POOL.into()),
        ready: true,
        kernel_version: Some("10.0.20348.2700".into()),
        runtime_version: Some("containerd://1.7.20".into()),
        ..Default::default()
    }
}

fn in_state(name: &str, state: NodeState, rev: &str) -> NodeView {
    NodeView {
        state: state.into(),
        state_label: state.label().map(str::to_string),
        state_since: ago(10),
        started_at: ago(10),
        target_revision: Some(rev.into()),
        cordoned_by_winpool: true,
        unschedulable: true,
        ..fresh(name)
    }
}

/// What the agent and kubelet report once the target configuration is on the node.
fn applied(mut n: NodeView, rev: &str) -> NodeView {
    n.revision_label = Some(rev.into());
    n.applied_revision = Some(rev.into());
    n.apply_status = Some(Reported::Known(ApplyStatus::Succeeded));
    n.kernel_version = Some("10.0.20348.2762".into());
    n.runtime_version = Some("containerd://1.7.22".into());
    n.cni_mode = Some(crate::decision::agent_report::Reported::parse("overlay"));
    n
}

fn run(spec: &WindowsNodePoolSpec, nodes: &[NodeView]) -> Plan {
    let existing = BTreeSet::new();
    decide(&input(spec, &existing), &cleared(spec, nodes), now())
}

use super::preflight::{PreflightHeld, cleared};

/// The decision's pool input with no gates, no pace and no target mark yet.
fn input<'a>(spec: &'a WindowsNodePoolSpec, existing: &'a BTreeSet<String>) -> PoolInput<'a> {
    PoolInput::of_spec(POOL, spec, existing)
}

/// Draining for `rev`, `pods` pods still to evict.
fn draining(name: &str, rev: &str, pods: usize) -> NodeView {
    NodeView { pods_to_evict: pods, ..in_state(name, NodeState::Draining, rev) }
}

fn patch<'a>(plan: &'a Plan, node: &str) -> Option<&'a NodePatch> {
    plan.patches.iter().find(|p| p.node == node)
}

fn transition(plan: &Plan, node: &str) -> Option<(NodeState, NodeState)> {
    patch(plan, node).map(|p| (p.from, p.to))
}

#[test]
fn starts_at_most_max_unavailable_nodes_in_name_order() {
    let cases: &[(&str, usize, &[&str])] = &[
        ("rollout: {maxUnavailable: 1}", 5, &["n0"]),
        ("rollout: {maxUnavailable: 2}", 5, &["n0", "n1"]),
        ("rollout: {maxUnavailable: '40%'}", 5, &["n0", "n1"]),
        ("rollout: {maxUnavailable: '10%'}", 5, &["n0"]), // rounds down, never below 1
        ("rollout: {maxUnavailable: 10}", 3, &["n0", "n1", "n2"]),
    ];
    for (extra, n, want) in cases {
        let spec = spec_with(extra);
        let nodes: Vec<_> = (0..*n).rev().map(|i| fresh(&format!("n{i}"))).collect();
        let plan = run(&spec, &nodes);
        let started: Vec<&str> = plan.patches.iter().filter(|p| p.to == NodeState::Draining).map(|p| p.node.as_str()).collect();
        assert_eq!(started, *want, "{extra} with {n} nodes");
        for p in plan.patches.iter().filter(|p| p.to == NodeState::Draining) {
            assert_eq!(p.unschedulable, Some(true), "a started node is cordoned");
            assert_eq!(p.annotations.get(names::ANN_CORDONED_BY_WINPOOL), Some(&Some("true".into())));
            assert_eq!(p.annotations.get(names::ANN_TARGET_REVISION), Some(&Some(plan.revision.clone())));
            assert!(!p.labels.contains_key(names::LABEL_REVISION), "the label moves only after the drain");
        }
        assert_eq!(plan.counts.updating as usize, want.len());
        assert_eq!(plan.counts.pending as usize, n - want.len());
    }
}

#[test]
fn max_unavailable_per_zone_spreads_a_wave_across_zones() {
    let zoned = |name: &str, zone: Option<&str>| NodeView { zone: zone.map(Into::into), ..fresh(name) };
    let started =
        |plan: &Plan| -> Vec<String> { plan.patches.iter().filter(|p| p.to == NodeState::Draining).map(|p| p.node.clone()).collect() };
    // Six nodes, two per zone; maxUnavailable alone would take a, b, c and d (zones 1 and 2).
    let nodes = vec![
        zoned("a", Some("z1")),
        zoned("b", Some("z1")),
        zoned("c", Some("z2")),
        zoned("d", Some("z2")),
        zoned("e", Some("z3")),
        zoned("f", None),
    ];
    let spec = spec_with("rollout: {maxUnavailable: 4, maxUnavailablePerZone: 1}");
    assert_eq!(started(&run(&spec, &nodes)), ["a", "c", "e", "f"], "one per zone; unlabelled nodes are a zone of their own");
    assert_eq!(started(&run(&spec_with("rollout: {maxUnavailable: 4}"), &nodes)), ["a", "b", "c", "d"], "unset: no zone bound");
    // A node in flight, or down, fills its zone's slot.
    let rev = revision_of(&spec);
    let busy = vec![
        NodeView { zone: Some("z1".into()), ..in_state("a", NodeState::Applying, &rev) },
        zoned("b", Some("z1")),
        zoned("c", Some("z2")),
    ];
    assert_eq!(started(&run(&spec, &busy)), ["c"]);
    let down = vec![NodeView { ready: false, ..zoned("a", Some("z1")) }, zoned("b", Some("z1")), zoned("c", Some("z2"))];
    assert_eq!(started(&run(&spec, &down)), ["a", "c"], "the down node is rolled first and costs its zone nothing more");
    // A percent of each zone's nodes, never below one.
    let pct = spec_with("rollout: {maxUnavailable: 10, maxUnavailablePerZone: '50%'}");
    let four: Vec<_> = ["a", "b", "c", "d"].iter().map(|n| zoned(n, Some("z1"))).collect();
    assert_eq!(started(&run(&pct, &four)), ["a", "b"]);
}

/// --max-nodes-in-flight: other pools' nodes in flight and this pool's own
/// fill one bound; a pool with no room left starts nothing and says why.
#[test]
fn the_install_wide_bound_counts_every_pools_nodes_in_flight() {
    let spec = spec_with("rollout: {maxUnavailable: 3}");
    let rev = revision_of(&spec);
    let existing = BTreeSet::new();
    let with_ahead = |limit: usize, elsewhere: usize, waiting_ahead: usize, nodes: &[NodeView]| {
        let input = PoolInput { cluster: Some(ClusterInFlight { limit, elsewhere, waiting_ahead }), ..input(&spec, &existing) };
        decide(&input, &cleared(&spec, nodes), now())
    };
    let with = |limit: usize, elsewhere: usize, nodes: &[NodeView]| with_ahead(limit, elsewhere, 0, nodes);
    let started = |plan: &Plan| plan.patches.iter().filter(|p| p.to == NodeState::Draining).count();
    let four: Vec<_> = ["a", "b", "c", "d"].iter().map(|n| fresh(n)).collect();
    assert_eq!(started(&with(4, 2, &four)), 2, "two of four taken by other pools");
    assert_eq!(started(&with(10, 0, &four)), 3, "maxUnavailable still bounds the pool");
    let own = [in_state("a", NodeState::Applying, &rev), fresh("b"), fresh("c")];
    assert_eq!(started(&with(3, 1, &own)), 1, "this pool's own in flight count too");
    let full = with(3, 3, &four);
    assert_eq!(started(&full), 0);
    assert_eq!(full.hold, Some(Hold::ClusterLimit(ClusterInFlight { limit: 3, elsewhere: 3, waiting_ahead: 0 })));
    let over = ClusterInFlight { limit: 3, elsewhere: 5, waiting_ahead: 0 };
    assert_eq!(with(3, 5, &four).hold, Some(Hold::ClusterLimit(over)), "over it already");
    // Pools that waited longer keep a slot each: the one that rolls does not take them back.
    assert_eq!(started(&with_ahead(3, 1, 1, &own)), 0, "the free slot is the waiting pool's");
    assert_eq!(started(&with_ahead(4, 0, 2, &four)), 2, "two of four kept for two waiting pools");
    // Waiting for a slot is said only when the bound kept a node from starting.
    let held = [NodeView { held_by_label: true, ..fresh("a") }];
    assert_ne!(with(3, 3, &held).hold.map(|h| matches!(h, Hold::ClusterLimit(_))), Some(true), "nothing it could start");
}

#[test]
fn in_flight_nodes_use_up_the_budget() {
    let spec = spec_with("rollout: {maxUnavailable: 2}");
    let rev = revision_of(&spec);
    let nodes = vec![in_state("a", NodeState::Applying, &rev), in_state("b", NodeState::Verifying, &rev), fresh("c")];
    let plan = run(&spec, &nodes);
    assert_eq!(transition(&plan, "c"), None, "no slot free");
    assert_eq!(plan.counts.updating, 2);
}

#[test]
fn holds_stop_new_nodes_but_not_nodes_in_flight() {
    type IsHold = fn(&Hold) -> bool;
    let cases: &[(&str, usize, IsHold)] = &[
        ("rollout: {paused: true}", 0, |h| *h == Hold::PausedBySpec),
        ("rollout: {maxFailedNodes: 1}", 1, |h| matches!(h, Hold::FailureLimit { failed: 1, limit: 1 })),
        // 2026-11-29 is a Sunday; the window is Saturdays only.
        (
            "rollout: {maintenanceWindows: [{days: [Sat], start: '02:00', end: '06:00'}]}",
            0,
            |h| matches!(h, Hold::OutsideWindow { opens } if opens.to_string() == "2026-12-05T02:00:00Z"),
        ),
        // A week after Patch Tuesday (8 December 2026), 02:00 in Berlin.
        (
            "rollout: {maintenanceWindows: [{relativeMonthly: {weekIndex: Second, dayOfWeek: Tue, offsetDays: 7}, start: '02:00', end: '06:00', timeZone: Europe/Berlin}]}",
            0,
            |h| matches!(h, Hold::OutsideWindow { opens } if opens.to_string() == "2026-12-15T01:00:00Z"),
        ),
        // A change freeze without windows: open again the day after it.
        (
            "rollout: {notAllowedDates: [{start: '2026-11-20', end: '2026-12-31'}]}",
            0,
            |h| matches!(h, Hold::OutsideWindow { opens } if opens.to_string() == "2027-01-01T00:00:00Z"),
        ),
        (
            "rollout: {maintenanceWindows: [{days: [Sat], start: '02:00', end: '06:00'}], notAllowedDates: [{start: '2026-11-01', end: '2028-12-31'}]}",
            0,
            |h| *h == Hold::NoWindowAhead,
        ),
        (
            "rollout: {maintenanceWindows: [{start: '02:00', end: '06:00', timeZone: Nowhere/Land}]}",
            0,
            |h| matches!(h, Hold::BadWindow(e) if e.contains("Nowhere/Land")),
        ),
    ];
    for (extra, failed, is_hold) in cases {
        let spec = spec_with(extra);
        let rev = revision_of(&spec);
        let draining = draining("a", &rev, 1);
        let mut nodes = vec![draining, fresh("z")];
        for i in 0..*failed {
            let mut f = in_state(&format!("f{i}"), NodeState::Failed, &rev);
            f.cordoned_by_winpool = false;
            f.unschedulable = false;
            nodes.push(f);
        }
        let plan = run(&spec, &nodes);
        let hold = plan.hold.as_ref().unwrap_or_else(|| panic!("{extra}: expected a hold"));
        assert!(is_hold(hold), "{extra}: got {hold:?}");
        assert_eq!(transition(&plan, "z"), None, "{extra}: no new node starts");
        assert!(plan.drain.iter().any(|(n, _)| n == "a"), "{extra}: the in-flight drain goes on");
    }
}

/// `kubectl winpool pause` holds a pool by its annotation, so a GitOps tool
/// that owns the spec does not undo it: it holds like `rollout.paused`, and a
/// spec pause is named first when both are set.
#[test]
fn the_pause_annotation_holds_new_nodes_but_not_nodes_in_flight() {
    let spec = spec_with("rollout: {maxUnavailable: 2}");
    let rev = revision_of(&spec);
    let draining = draining("a", &rev, 1);
    let nodes = vec![draining, fresh("z")];
    let existing = BTreeSet::new();
    let paused = |spec: &WindowsNodePoolSpec, by_annotation: bool| {
        decide(&PoolInput { paused_by_annotation: by_annotation, ..input(spec, &existing) }, &cleared(spec, &nodes), now())
    };
    let plan = paused(&spec, true);
    assert_eq!(plan.hold, Some(Hold::PausedByAnnotation));
    assert_eq!(transition(&plan, "z"), None, "no new node starts");
    assert!(plan.drain.iter().any(|(n, _)| n == "a"), "the in-flight drain goes on");
    assert_eq!(paused(&spec, false).hold, None, "without it the rollout goes on");
    assert_eq!(transition(&paused(&spec, false), "z"), Some((NodeState::Pending, NodeState::Draining)));
    assert_eq!(paused(&spec_with("rollout: {maxUnavailable: 2, paused: true}"), true).hold, Some(Hold::PausedBySpec));
}

#[test]
fn max_failed_nodes_zero_never_pauses() {
    let spec = spec_with("rollout: {maxFailedNodes: 0}");
    let rev = revision_of(&spec);
    let mut f = in_state("f", NodeState::Failed, &rev);
    f.unschedulable = false;
    let plan = run(&spec, &[f, fresh("z")]);
    assert_eq!(plan.hold, None);
    assert_eq!(transition(&plan, "z"), Some((NodeState::Pending, NodeState::Draining)));
}

#[test]
fn a_node_walks_the_state_machine() {
    let spec = spec_with("");
    let rev = revision_of(&spec);

    // Draining with pods left: evict, stay.
    let mut d = draining("n", &rev, 3);
    let plan = run(&spec, &[d.clone()]);
    assert_eq!(plan.drain, vec![("n".to_string(), DrainMode::Evict)]);
    assert_eq!(transition(&plan, "n"), None);

    // Drained: move the label, Applying.
    d.pods_to_evict = 0;
    let plan = run(&spec, &[d]);
    let p = patch(&plan, "n").unwrap();
    assert_eq!((p.from, p.to), (NodeState::Draining, NodeState::Applying));
    assert_eq!(p.labels.get(names::LABEL_REVISION), Some(&Some(rev.clone())));
    assert_eq!(p.annotations.get(names::ANN_DRAINED_REVISION), Some(&Some(rev.clone())));

    // Applying, agent silent: wait.
    let a = in_state("n", NodeState::Applying, &rev);
    let plan = run(&spec, std::slice::from_ref(&a));
    assert_eq!(transition(&plan, "n"), None);
    assert!(plan.waiting["n"].contains("waiting for the agent"));

    // Agent reported, kubelet still at the old build: Verifying.
    let mut half = applied(a.clone(), &rev);
    half.kernel_version = Some("10.0.20348.2700".into());
    let plan = run(&spec, &[half]);
    assert_eq!(transition(&plan, "n"), Some((NodeState::Applying, NodeState::Verifying)));
    assert!(plan.waiting["n"].contains("below patch level"), "{}", plan.waiting["n"]);

    // Everything reported: Updated and uncordoned.
    let done = applied(in_state("n", NodeState::Verifying, &rev), &rev);
    let plan = run(&spec, &[done]);
    let p = patch(&plan, "n").unwrap();
    assert_eq!((p.from, p.to), (NodeState::Verifying, NodeState::Updated));
    assert_eq!(p.unschedulable, Some(false));
    assert_eq!(p.annotations.get(names::ANN_CORDONED_BY_WINPOOL), Some(&None));
    assert_eq!(plan.counts.updated, 1);
}

#[test]
fn verification_waits_for_every_reported_fact() {
    let spec =
        spec_with("storage: {csiProxy: {enabled: true, version: v1.1.3}}\nhns: {taintWhenNotReady: true}\nnetworking: {cniMode: overlay}");
    let rev = revision_of(&spec);
    let good = || {
        let mut n = applied(in_state("n", NodeState::Verifying, &rev), &rev);
        n.csi_proxy_version = Some("v1.1.3".into());
        n.hns = HnsReadiness::Ready;
        n
    };
    type Spoil = fn(&mut NodeView);
    let cases: &[(&str, Spoil)] = &[
        ("kernelVersion", |n| n.kernel_version = Some("10.0.20348.2761".into())),
        ("no kernelVersion", |n| n.kernel_version = None),
        ("runtime is", |n| n.runtime_version = Some("containerd://1.7.20".into())),
        ("runtime version", |n| n.runtime_version = Some("garbage".into())),
        ("csi-proxy", |n| n.csi_proxy_version = Some("v1.1.2".into())),
        ("CNI mode", |n| n.cni_mode = Some(crate::decision::agent_report::Reported::parse("l2bridge"))),
        ("not Ready", |n| n.ready = false),
        ("HNS", |n| n.hns = HnsReadiness::NotReady),
    ];
    let plan = run(&spec, &[good()]);
    assert_eq!(transition(&plan, "n"), Some((NodeState::Verifying, NodeState::Updated)));
    for (why, spoil) in cases {
        let mut n = good();
        spoil(&mut n);
        let plan = run(&spec, &[n]);
        assert_eq!(transition(&plan, "n"), None, "{why}: must keep verifying");
        assert!(plan.waiting["n"].contains(why), "{why}: waiting says {:?}", plan.waiting["n"]);
    }
    // A pool that requires no CNI mode takes the one the node runs.
    let any = spec_with("storage: {csiProxy: {enabled: true, version: v1.1.3}}\nhns: {taintWhenNotReady: true}");
    assert_eq!(revision_of(&any), rev, "requiring the mode the nodes run changes no revision");
    let mut n = good();
    n.cni_mode = Some(crate::decision::agent_report::Reported::parse("l2bridge"));
    assert_eq!(transition(&run(&any, &[n]), "n"), Some((NodeState::Verifying, NodeState::Updated)));
    // HNS that never reported does not block the rollout.
    let mut n = good();
    n.hns = HnsReadiness::Unknown;
    assert_eq!(transition(&run(&spec, &[n]), "n"), Some((NodeState::Verifying, NodeState::Updated)));
}

#[test]
fn failures_are_recorded_and_uncordon_the_node() {
    let spec = spec_with("rollout: {nodeTimeout: 30m, drain: {timeout: 10m}}");
    let rev = revision_of(&spec);

    let mut agent_failed = applied(in_state("a", NodeState::Applying, &rev), &rev);
    agent_failed.apply_status = Some(Reported::Known(ApplyStatus::Failed));
    agent_failed.apply_message = Some("KB5044281 install returned 0x80070005".into());

    let mut timed_out = in_state("b", NodeState::Applying, &rev);
    timed_out.started_at = ago(31 * 60);

    let mut drain_stuck = draining("c", &rev, 2);
    drain_stuck.state_since = ago(11 * 60);

    let mut someone_elses_cordon = in_state("d", NodeState::Applying, &rev);
    someone_elses_cordon.cordoned_by_winpool = false;
    someone_elses_cordon.started_at = ago(31 * 60);

    let plan = run(&spec, &[agent_failed, timed_out, drain_stuck, someone_elses_cordon]);
    let reasons: Vec<(&str, &str)> = plan.failed.iter().map(|f| (f.node.as_str(), f.reason.as_str())).collect();
    assert_eq!(reasons, vec![("a", "ApplyFailed"), ("b", "Timeout"), ("c", "DrainTimeout"), ("d", "Timeout")]);
    assert!(plan.failed[0].message.contains("0x80070005"));
    for node in ["a", "b", "c"] {
        assert_eq!(patch(&plan, node).unwrap().unschedulable, Some(false), "{node}: winpool's cordon is released");
    }
    assert_eq!(patch(&plan, "d").unwrap().unschedulable, None, "a cordon winpool did not set is left alone");
    assert_eq!(plan.counts.failed, 4);
    assert!(matches!(plan.hold, Some(Hold::FailureLimit { failed: 4, limit: 1 })));
    assert_eq!(plan.failed_nodes_status().len(), 4);
}

#[test]
fn drain_delete_after_timeout_deletes_instead_of_failing() {
    let spec = spec_with("rollout: {drain: {timeout: 1m, deleteAfterTimeout: true}}");
    let rev = revision_of(&spec);
    let mut n = draining("n", &rev, 1);
    n.state_since = ago(120);
    let plan = run(&spec, &[n]);
    assert_eq!(plan.drain, vec![("n".to_string(), DrainMode::Delete)]);
    assert!(plan.failed.is_empty());
}

#[test]
fn drain_disabled_or_already_drained_skips_straight_to_applying() {
    let spec = spec_with("rollout: {drain: {enabled: false}}");
    let plan = run(&spec, &[fresh("n")]);
    let p = patch(&plan, "n").unwrap();
    assert_eq!(p.to, NodeState::Applying);
    assert_eq!(p.unschedulable, Some(true), "still cordoned while the agent works");
    assert!(p.labels.contains_key(names::LABEL_REVISION));

    let spec = spec_with("");
    let mut n = fresh("n");
    n.drained_revision = Some(revision_of(&spec));
    n.unschedulable = true;
    n.cordoned_by_winpool = true;
    let plan = run(&spec, &[n]);
    assert_eq!(patch(&plan, "n").unwrap().to, NodeState::Applying, "never drained twice for one revision");
}

/// A node that failed after its drain and was uncordoned (onNodeFailure
/// Uncordon, or by hand) has taken workloads since: its retry (the state
/// annotation removed by hand) drains again, though its drained-revision is
/// the target's.
#[test]
fn a_retried_node_uncordoned_since_its_drain_is_drained_again() {
    let spec = spec_with("rollout: {maxUnavailable: 2}");
    let rev = revision_of(&spec);
    let failed = NodeView { drained_revision: Some(rev.clone()), target_revision: Some(rev.clone()), started_at: ago(3600), ..fresh("f") };
    // Cordoned by someone else: not the cordon winpool drained under.
    let recordoned = NodeView { name: "r".into(), unschedulable: true, ..failed.clone() };
    let plan = run(&spec, &[failed, recordoned]);
    for name in ["f", "r"] {
        let p = patch(&plan, name).unwrap();
        assert_eq!(p.to, NodeState::Draining, "{name}: workloads may have landed since the drain");
        assert!(!p.labels.contains_key(names::LABEL_REVISION), "{name}: the agent waits for the drain");
        assert_eq!(p.annotations.get(names::ANN_DRAINED_REVISION), Some(&None), "{name}: the earlier drain is void");
    }
    assert_eq!(patch(&plan, "f").unwrap().unschedulable, Some(true));
}

#[test]
fn a_new_revision_mid_rollout_retargets_in_flight_nodes() {
    let spec = spec_with("");
    let rev = revision_of(&spec);
    let old = "0123456789";
    let plan = run(&spec, &[in_state("a", NodeState::Applying, old), in_state("b", NodeState::Draining, old)]);
    let a = patch(&plan, "a").unwrap();
    assert_eq!(a.labels.get(names::LABEL_REVISION), Some(&Some(rev.clone())), "already drained: relabel");
    assert_eq!(a.to, NodeState::Applying);
    let b = patch(&plan, "b").unwrap();
    assert_eq!(b.annotations.get(names::ANN_TARGET_REVISION), Some(&Some(rev.clone())));
    assert!(!b.labels.contains_key(names::LABEL_REVISION), "still draining: label waits");
    assert_eq!(plan.counts.updating, 2);
}

#[test]
fn updated_nodes_of_an_older_revision_become_pending_and_failed_ones_retry() {
    let spec = spec_with("");
    let old = "0123456789";
    let mut updated_old = applied(fresh("a"), old);
    updated_old.state = crate::decision::rollout::NodeState::Updated.into();
    updated_old.kernel_version = Some("10.0.20348.2700".into()); // the older revision's patch level
    let mut failed_old = in_state("b", NodeState::Failed, old);
    failed_old.cordoned_by_winpool = false;
    failed_old.unschedulable = false;
    let plan = run(&spec, &[updated_old, failed_old]);
    assert_eq!(plan.counts.failed, 0);
    assert_eq!(transition(&plan, "a"), Some((NodeState::Pending, NodeState::Draining)));
    assert_eq!(plan.counts.pending, 1);
}

#[test]
fn a_restarted_operator_continues_from_the_nodes_without_repeating_a_step() {
    // Round one's writes land on the Nodes; a new process (nothing in memory)
    // decides from those Nodes alone. It goes on from where each node is: no
    // node is cordoned or started again, none goes back to an earlier step.
    let spec = spec_with("rollout: {maxUnavailable: 10}");
    let rev = revision_of(&spec);
    let nodes = vec![
        applied(in_state("a", NodeState::Verifying, &rev), &rev),
        in_state("b", NodeState::Applying, &rev),
        draining("c", &rev, 0),
        // Started in round one; their pods are still leaving in round two.
        NodeView { pods_to_evict: 2, ..fresh("d") },
        NodeView { pods_to_evict: 2, ..fresh("e") },
    ];
    let first = run(&spec, &nodes);
    assert!(!first.patches.is_empty(), "round one moves nodes");
    let landed: Vec<NodeView> = nodes.iter().map(|n| land(n, patch(&first, &n.name))).collect();
    let second = run(&spec, &landed);
    for p in &second.patches {
        if let Some(before) = patch(&first, &p.node) {
            assert_eq!(p.from, before.to, "{}: continues from where round one left it", p.node);
            assert!(p.to >= before.to || p.to == NodeState::Failed, "{}: never back to {:?}", p.node, p.to);
        }
        let was = landed.iter().find(|n| n.name == p.node).unwrap();
        assert!(!(was.unschedulable && p.unschedulable == Some(true)), "{}: cordoned again", p.node);
        assert!(!p.annotations.contains_key(names::ANN_STARTED_AT) || was.started_at.is_none(), "{}: started again", p.node);
    }
    let in_flight = |plan: &Plan| plan.counts.updating;
    assert!(in_flight(&first) <= 10 && in_flight(&second) <= 10);
}

/// A Node after `p` was written to it (merge semantics: `None` deletes), as the
/// next round's observation would read it.
fn land(n: &NodeView, p: Option<&NodePatch>) -> NodeView {
    let Some(p) = p else { return n.clone() };
    let mut n = n.clone();
    let text = |k: &str| p.annotations.get(k).cloned();
    let time = |v: Option<String>| v.and_then(|s| s.parse().ok());
    if let Some(v) = p.labels.get(names::LABEL_REVISION) {
        n.revision_label = v.clone();
    }
    if let Some(v) = p.labels.get(names::LABEL_POOL) {
        n.pool_label = v.clone();
    }
    if let Some(v) = text(names::ANN_STATE) {
        n.state = Recorded::parse(v.as_deref());
    }
    for (k, field) in [
        (names::ANN_TARGET_REVISION, &mut n.target_revision),
        (names::ANN_DRAINED_REVISION, &mut n.drained_revision),
        (names::ANN_BOOT_ID, &mut n.boot_id_at_start),
        (names::ANN_FAILURE_REASON, &mut n.failure_reason),
        (names::ANN_FAILURE_MESSAGE, &mut n.failure_message),
    ] {
        if let Some(v) = text(k) {
            *field = v;
        }
    }
    if let Some(v) = text(names::ANN_STATE_SINCE) {
        n.state_since = time(v);
    }
    if let Some(v) = text(names::ANN_STARTED_AT) {
        // A new start: the agent's last result answers an earlier one, and
        // the view reads none (node_view) until the agent answers this one.
        // A node at rest names no start, and its last result stands.
        if v.is_some() {
            (n.applied_revision, n.apply_status, n.apply_message) = (None, None, None);
        }
        n.started_at = time(v);
    }
    if let Some(v) = text(names::ANN_CORDONED_BY_WINPOOL) {
        n.cordoned_by_winpool = v.as_deref() == Some("true");
    }
    if let Some(u) = p.unschedulable {
        n.unschedulable = u;
    }
    n
}

#[test]
fn nodes_already_at_target_are_recorded_not_rolled() {
    let spec = spec_with("");
    let rev = revision_of(&spec);
    let plan = run(&spec, &[applied(fresh("n"), &rev)]);
    let p = patch(&plan, "n").unwrap();
    assert_eq!(p.to, NodeState::Updated);
    assert_eq!(p.unschedulable, None);
    assert_eq!(plan.counts.updated, 1);
}

#[test]
fn nodes_out_of_service_count_against_the_budget_and_are_rolled_first() {
    let spec = spec_with("rollout: {maxUnavailable: 1}");
    let rev = revision_of(&spec);
    // An unready Pending node is rolled first: it is out of service anyway.
    let mut down = fresh("z-down");
    down.ready = false;
    let plan = run(&spec, &[fresh("a"), down.clone()]);
    assert_eq!(transition(&plan, "z-down"), Some((NodeState::Pending, NodeState::Draining)));
    assert_eq!(transition(&plan, "a"), None);

    // An admin's cordon on an Updated node uses the whole budget of 1: nothing starts.
    let mut admin = applied(fresh("b-admin"), &rev);
    admin.state = crate::decision::rollout::NodeState::Updated.into();
    admin.unschedulable = true;
    let plan = run(&spec, &[fresh("a"), admin.clone()]);
    assert_eq!(transition(&plan, "a"), None, "the admin-cordoned node already uses the budget");

    // With room for two, the healthy node starts too.
    let spec2 = spec_with("rollout: {maxUnavailable: 2}");
    let mut admin2 = applied(fresh("b-admin"), &revision_of(&spec2));
    admin2.state = crate::decision::rollout::NodeState::Updated.into();
    admin2.unschedulable = true;
    let plan = run(&spec2, &[fresh("a"), admin2]);
    assert_eq!(transition(&plan, "a"), Some((NodeState::Pending, NodeState::Draining)));

    // A Pending node an admin cordoned is rolled, never marked as cordoned by winpool, so it stays cordoned.
    let mut cordoned = fresh("c");
    cordoned.unschedulable = true;
    let plan = run(&spec, &[cordoned]);
    let p = patch(&plan, "c").unwrap();
    assert_eq!(p.to, NodeState::Draining);
    assert_eq!(p.unschedulable, None);
    assert!(!p.annotations.contains_key(names::ANN_CORDONED_BY_WINPOOL));
    let mut done = applied(in_state("c", NodeState::Verifying, &rev), &rev);
    done.cordoned_by_winpool = false;
    let p = patch(&run(&spec, &[done]), "c").unwrap().clone();
    assert_eq!((p.to, p.unschedulable), (NodeState::Updated, None), "stays cordoned afterwards");
}

#[test]
fn a_node_past_draining_is_never_drained_again() {
    // Whatever state a restart finds a node in, once it is past Draining for
    // this revision (drained-revision says so), it is not drained again.
    let spec = spec_with("rollout: {maxUnavailable: 10}");
    let rev = revision_of(&spec);
    for &st in NodeState::ALL {
        let mut n = in_state("n", st, &rev);
        n.drained_revision = Some(rev.clone());
        let a = run(&spec, std::slice::from_ref(&n));
        if matches!(st, NodeState::Applying | NodeState::Verifying) {
            assert!(a.patches.iter().all(|p| p.to != NodeState::Draining), "{st:?} never drains again");
        }
    }
}

#[test]
fn garbage_on_nodes_is_reported_not_trusted() {
    let spec = spec_with("");
    let mut n = fresh("n");
    n.state = crate::decision::rollout::Recorded::Unknown("Exploded".into());
    n.revision_label = Some("bogus".into());
    n.kernel_version = Some("not-a-version".into());
    let plan = run(&spec, &[n]);
    assert_eq!(transition(&plan, "n"), Some((NodeState::Pending, NodeState::Draining)));
    let msgs: Vec<&str> = plan.warnings.iter().map(|(_, m)| m.as_str()).collect();
    assert!(msgs.iter().any(|m| m.contains("Exploded")), "{msgs:?}");
    // A revision label winpool never set is put back (here: removed) and reported.
    assert_eq!(plan.tampered.get("n").map(|t| (t.found.as_str(), t.restored.clone())), Some(("bogus", None)));
    assert_eq!(patch(&plan, "n").and_then(|p| p.labels.get(names::LABEL_REVISION)), Some(&None));
    assert!(!plan.config_revisions.contains("bogus"));
    assert_eq!(plan.behind_patch_level, 1);
}

#[test]
fn revision_configmaps_are_kept_for_the_target_and_every_revision_still_on_a_node() {
    let spec = spec_with("");
    let rev = revision_of(&spec);
    let existing: BTreeSet<String> = ["aaaaaaaaaa".to_string(), "bbbbbbbbbb".to_string()].into();
    let mut old = applied(fresh("a"), "aaaaaaaaaa");
    old.state = crate::decision::rollout::NodeState::Updated.into();
    let plan = decide(&input(&spec, &existing), &[old], now());
    assert_eq!(plan.config_revisions, BTreeSet::from([rev, "aaaaaaaaaa".to_string()]));
}

#[test]
fn members_get_the_pool_label_as_soon_as_they_are_members() {
    let spec = spec_with("rollout: {paused: true}");
    let rev = revision_of(&spec);
    let mut idle = fresh("idle");
    idle.pool_label = None;
    let mut done = applied(fresh("done"), &rev);
    done.pool_label = None;
    let plan = run(&spec, &[idle.clone(), done]);
    let p = patch(&plan, "idle").expect("a member of a paused pool is labelled, so its agent starts");
    assert_eq!((p.from, p.to), (NodeState::Pending, NodeState::Pending), "labelled, not started");
    assert_eq!(p.labels.get(names::LABEL_POOL), Some(&Some(POOL.into())));
    assert_eq!(p.unschedulable, None);
    assert_eq!(patch(&plan, "done").unwrap().labels.get(names::LABEL_POOL), Some(&Some(POOL.into())));
    let mut labelled = idle.clone();
    labelled.pool_label = Some(POOL.into());
    assert_eq!(patch(&run(&spec, &[labelled]), "idle"), None, "an idle member already labelled costs no write");
    let plan = run(&spec_with(""), &[idle]);
    let p = patch(&plan, "idle").unwrap();
    assert_eq!(p.to, NodeState::Draining);
    assert_eq!(p.labels.get(names::LABEL_POOL), Some(&Some(POOL.into())), "labelled when started");
}

#[test]
fn requeue_is_short_while_nodes_are_in_flight() {
    let spec = spec_with("");
    let rev = revision_of(&spec);
    assert_eq!(run(&spec, &[in_state("a", NodeState::Applying, &rev)]).requeue_after, IN_FLIGHT_REQUEUE);
    let mut done = applied(fresh("a"), &rev);
    done.state = crate::decision::rollout::NodeState::Updated.into();
    assert_eq!(run(&spec, &[done]).requeue_after, IDLE_REQUEUE);
}

#[test]
fn each_node_gets_at_most_one_patch_per_plan() {
    let spec = spec_with("rollout: {maxUnavailable: 2}");
    let nodes: Vec<_> = (0..4)
        .map(|i| {
            let mut n = fresh(&format!("n{i}"));
            n.pool_label = None;
            n
        })
        .collect();
    let plan = run(&spec, &nodes);
    let mut names: Vec<&str> = plan.patches.iter().map(|p| p.node.as_str()).collect();
    names.sort();
    assert_eq!(names, ["n0", "n1", "n2", "n3"], "every member once: two started, two only labelled");
    let started: Vec<_> = plan.patches.iter().filter(|p| p.to == NodeState::Draining).collect();
    assert_eq!(started.len(), 2);
    assert!(started.iter().all(|p| p.labels.contains_key(names::LABEL_POOL)), "joining and starting is one write");
}

#[test]
fn hns_holds_verifying_only_until_its_timeout_and_applying_clears_stale_counts() {
    let spec = spec_with("hns: {readyTimeout: 5m}");
    let rev = revision_of(&spec);
    let mut n = applied(in_state("n", NodeState::Verifying, &rev), &rev);
    n.hns = HnsReadiness::NotReady;
    n.state_since = ago(60);
    let plan = run(&spec, std::slice::from_ref(&n));
    assert_eq!(transition(&plan, "n"), None, "HNS not ready: keep verifying");
    n.state_since = ago(6 * 60);
    let plan = run(&spec, &[n]);
    assert_eq!(transition(&plan, "n"), Some((NodeState::Verifying, NodeState::Updated)));
    assert!(plan.warnings.iter().any(|(_, m)| m.contains("readyTimeout")), "reported: {:?}", plan.warnings);
}

#[test]
fn a_node_already_at_the_target_is_confirmed_without_cordon_or_drain() {
    let spec = spec_with("");
    let rev = revision_of(&spec);
    // The node runs everything the new revision asks for, but carries an older revision label.
    let mut n = applied(fresh("n"), "0123456789");
    n.state = crate::decision::rollout::NodeState::Updated.into();
    let p = patch(&run(&spec, &[n.clone()]), "n").unwrap().clone();
    assert_eq!((p.from, p.to), (NodeState::Pending, NodeState::Applying));
    assert_eq!(p.unschedulable, None, "not cordoned");
    assert_eq!(p.labels.get(names::LABEL_REVISION), Some(&Some(rev.clone())));
    assert!(!p.annotations.contains_key(names::ANN_CORDONED_BY_WINPOOL));

    // Retried after a failure at the target (an HNS or CSI Proxy wait): the
    // start names a new attempt, which the old Failed result does not answer.
    let mut retried = applied(fresh("r"), &rev);
    retried.revision_label = Some(rev.clone());
    retried.apply_status = Some(Reported::Known(ApplyStatus::Failed));
    let p = patch(&run(&spec, &[retried]), "r").unwrap().clone();
    assert_eq!(p.to, NodeState::Applying);
    assert_eq!(p.unschedulable, None, "still not cordoned");
    assert!(matches!(p.annotations.get(names::ANN_STARTED_AT), Some(Some(_))), "a new start: {p:?}");
}

#[test]
fn a_node_is_held_cordoned_while_its_update_is_in_flight_and_not_once_the_plan_uncordons_it() {
    let spec = spec_with("hns: {readyTimeout: 5m}");
    let rev = revision_of(&spec);
    let mut verifying = applied(in_state("n", NodeState::Verifying, &rev), &rev);
    verifying.hns = HnsReadiness::NotReady;
    verifying.state_since = ago(60);
    let plan = run(&spec, std::slice::from_ref(&verifying));
    assert!(held_cordoned(&verifying, patch(&plan, "n")), "waiting for HNS behind winpool's cordon");

    // readyTimeout passed: this round's write uncordons it, so it is no longer held.
    verifying.state_since = ago(6 * 60);
    let plan = run(&spec, std::slice::from_ref(&verifying));
    assert_eq!(patch(&plan, "n").and_then(|p| p.unschedulable), Some(false));
    assert!(!held_cordoned(&verifying, patch(&plan, "n")));

    let cases: &[(&str, NodeView, bool)] = &[
        ("draining, cordoned by winpool", in_state("n", NodeState::Draining, &rev), true),
        ("applying, cordoned by winpool", in_state("n", NodeState::Applying, &rev), true),
        ("cordoned by an admin, not winpool", NodeView { cordoned_by_winpool: false, ..in_state("n", NodeState::Applying, &rev) }, false),
        ("winpool's mark but an admin uncordoned it", NodeView { unschedulable: false, ..in_state("n", NodeState::Applying, &rev) }, false),
        (
            "updated",
            NodeView { state: crate::decision::rollout::NodeState::Updated.into(), ..in_state("n", NodeState::Applying, &rev) },
            false,
        ),
        ("never touched", fresh("n"), false),
    ];
    for (what, view, want) in cases {
        assert_eq!(held_cordoned(view, None), *want, "{what}");
    }
}

#[test]
fn a_timed_out_node_says_what_it_was_waiting_for() {
    let spec = spec_with("rollout: {nodeTimeout: 30m}");
    let rev = revision_of(&spec);
    let late = |mut n: NodeView| {
        n.started_at = ago(31 * 60);
        n
    };
    let no_report = late(in_state("n", NodeState::Applying, &rev));
    let old_report = late(NodeView { applied_revision: Some("0123456789".into()), ..in_state("n", NodeState::Applying, &rev) });
    let wrong_kernel =
        late(NodeView { kernel_version: Some("10.0.20348.2700".into()), ..applied(in_state("n", NodeState::Verifying, &rev), &rev) });
    let not_ready = late(NodeView { ready: false, ..applied(in_state("n", NodeState::Verifying, &rev), &rev) });
    let hns = late(NodeView { hns: HnsReadiness::NotReady, ..applied(in_state("n", NodeState::Verifying, &rev), &rev) });
    let cases: &[(&str, NodeView, &str)] = &[
        ("no report", no_report, "it has not reported (is its DaemonSet pod running?)"),
        ("an older report", old_report, "it last reported 0123456789"),
        ("the wrong build", wrong_kernel, "waiting for: kernelVersion 10.0.20348.2700 is below patch level 10.0.20348.2762"),
        ("not Ready", not_ready, "waiting for: node is not Ready"),
        ("HNS", hns, "waiting for: HNS has not programmed the cluster's Services yet"),
    ];
    for (what, node, want) in cases {
        let plan = run(&spec, std::slice::from_ref(node));
        let f = &plan.failed[0];
        assert_eq!(f.reason, "Timeout", "{what}");
        assert!(f.message.starts_with("node did not finish") && f.message.contains(want), "{what}: {}", f.message);
    }
}

/// A start tells the node's agent the install budget the operator times it
/// by, so the agent cuts its servicing task there and not at a fixed 3h
/// (which would fail a WS2019 pool that allows 5h first); the budget goes
/// with the start when the node is done.
#[test]
fn a_start_gives_the_agent_the_install_budget() {
    let budget = |p: &NodePatch| p.annotations.get(names::ANN_INSTALL_BUDGET).cloned();
    for (rollout, want) in [
        ("rollout: {nodeTimeout: 30m}", "7200s"),
        ("rollout: {nodeTimeout: 4h}", "14400s"),
        ("rollout: {timeouts: {install: 5h}}", "18000s"),
    ] {
        let plan = run(&spec_with(rollout), &[fresh("a")]);
        let start = plan.patches.iter().find(|p| p.node == "a").expect("a start");
        assert_eq!(budget(start), Some(Some(want.to_string())), "{rollout}");
    }
    let spec = spec_with("");
    let rev = revision_of(&spec);
    let done = applied(NodeView { kernel_version: Some("10.0.20348.2762".into()), ..in_state("a", NodeState::Verifying, &rev) }, &rev);
    let plan = run(&spec, &[done]);
    let patch = plan.patches.iter().find(|p| p.node == "a").expect("a patch");
    assert_eq!((patch.to, budget(patch)), (NodeState::Updated, Some(None)), "{patch:?}");
}

/// A node whose servicing task still beats is installing (a Windows Server
/// 2019 cumulative update outlasts any fixed nodeTimeout): it is not timed
/// out, and what follows the install (the reboot, the checks) has
/// timeouts.rebootToReady from its last beat (ltsc2022: 30m). No beat, a
/// last beat older than that, a beat from the future, or a start past
/// timeouts.install (ltsc2022: 2h) time out as before.
#[test]
fn a_node_whose_servicing_task_beats_is_not_timed_out() {
    let spec = spec_with("rollout: {nodeTimeout: 30m}");
    let rev = revision_of(&spec);
    let installing = |beat: Option<Timestamp>| NodeView {
        started_at: ago(90 * 60),
        applied_revision: Some(rev.clone()),
        apply_status: Some(Reported::Known(ApplyStatus::Applying)),
        apply_heartbeat: beat,
        ..in_state("n", NodeState::Applying, &rev)
    };
    for (what, node) in [
        ("a beat 4 minutes old", installing(ago(4 * 60))),
        ("the install ended 20 minutes ago, within nodeTimeout of its last beat", installing(ago(20 * 60))),
    ] {
        let plan = run(&spec, &[node]);
        assert!(plan.failed.is_empty(), "{what}: timed out: {:?}", plan.failed);
    }
    // Verifying after it (the agent said Succeeded, HNS is not there yet): from the last beat too.
    let verifying = NodeView { apply_status: Some(Reported::Known(ApplyStatus::Succeeded)), ..in_state("n", NodeState::Verifying, &rev) };
    let verifying = NodeView { started_at: ago(90 * 60), applied_revision: Some(rev.clone()), apply_heartbeat: ago(20 * 60), ..verifying };
    let plan = run(&spec, std::slice::from_ref(&verifying));
    assert!(plan.failed.is_empty(), "verifying within nodeTimeout of the last beat: timed out: {:?}", plan.failed);
    let plan = run(&spec, &[NodeView { apply_heartbeat: ago(31 * 60), ..verifying }]);
    assert_eq!(plan.failed.first().map(|f| f.reason.as_str()), Some("Timeout"), "verifying past nodeTimeout of the last beat");
    for (what, node) in [
        ("a last beat older than nodeTimeout", installing(ago(31 * 60))),
        ("no beat", installing(None)),
        ("a beat an hour ahead", installing(ago(-3600))),
        // A host that beats for ever holds its node no longer than the agent's own cap allows.
        ("a fresh beat 4 hours after the start", NodeView { started_at: ago(4 * 3600), ..installing(ago(60)) }),
    ] {
        let plan = run(&spec, &[node]);
        assert_eq!(plan.failed.first().map(|f| f.reason.as_str()), Some("Timeout"), "{what}");
    }
}

/// The budgets by phase: each OS release's defaults, Windows Server 2019's
/// longest; a pool's own; and what each holds off. A node past the reboot
/// budget still has nodeTimeout from its start, and a failure names the
/// budget it ran out of.
#[test]
fn phase_budgets_default_by_release_and_a_pool_may_set_its_own() {
    use crate::api::OsVersion;
    use settings::{PhaseBudgets, phase_budgets};
    let mins = |m: u64| std::time::Duration::from_secs(m * 60);
    let budgets = |os| {
        let b = PhaseBudgets::default_for(os);
        (b.install, b.reboot_to_ready)
    };
    assert_eq!(budgets(OsVersion::Ltsc2019), (mins(180), mins(45)));
    assert_eq!(budgets(OsVersion::Ltsc2022), (mins(120), mins(30)));
    assert_eq!(budgets(OsVersion::Ltsc2025), (mins(90), mins(20)));
    let spec = spec_with("rollout: {nodeTimeout: 30m, timeouts: {install: 150m, rebootToReady: 50m}}");
    assert_eq!(phase_budgets(&spec), PhaseBudgets { install: mins(150), reboot_to_ready: mins(50) });
    let one = spec_with("rollout: {timeouts: {rebootToReady: 1h}}");
    assert_eq!(phase_budgets(&one), PhaseBudgets { install: mins(120), reboot_to_ready: mins(60) }, "the other keeps its default");

    let rev = revision_of(&spec);
    let installing = |started: i64, beat: i64| NodeView {
        started_at: ago(started * 60),
        applied_revision: Some(rev.clone()),
        apply_status: Some(Reported::Known(ApplyStatus::Applying)),
        apply_heartbeat: ago(beat * 60),
        ..in_state("n", NodeState::Applying, &rev)
    };
    let failed = |spec: &WindowsNodePoolSpec, node: NodeView| run(spec, &[node]).failed.first().map(|f| f.message.clone());
    // Beating 140 minutes in: past ltsc2022's 2h, within the pool's 150m.
    assert_eq!(failed(&spec, installing(140, 2)), None);
    let past = failed(&spec, installing(155, 2)).expect("past timeouts.install");
    assert!(past.contains("within timeouts.install 2h 30m"), "{past}");
    // Rebooting 45 minutes after the last beat: within the pool's 50m, past ltsc2022's 30m.
    assert_eq!(failed(&spec, installing(100, 45)), None);
    // (The budgets are not the node's configuration: the revision is the same.)
    let late = failed(&spec_with("rollout: {nodeTimeout: 30m}"), installing(100, 45)).expect("past ltsc2022's rebootToReady");
    assert!(late.contains("timeouts.rebootToReady (from its install's last beat) 30m"), "{late}");
    // A long nodeTimeout is never cut short by the reboot's budget, nor a beating install by its own.
    assert_eq!(failed(&spec_with("rollout: {nodeTimeout: 2h}"), installing(100, 45)), None, "within nodeTimeout from the start");
    let long = spec_with("rollout: {nodeTimeout: 4h}");
    assert_eq!(failed(&long, installing(150, 2)), None, "beating 150 minutes in, past ltsc2022's 2h, within nodeTimeout 4h");
    assert_eq!(failed(&long, installing(250, 20)), None, "past nodeTimeout, 20 minutes after an install that beat until 230 minutes");
}

/// A node that runs out of nodeTimeout while its agent still reports Applying
/// or Rebooting (the task stopped beating: an agent restarted mid-install, a
/// host cut off from the API server) may still be installing: it is Failed
/// but stays cordoned, saying so, and counts against maxUnavailable. The
/// cordon is lifted once the agent reports a final result. A node whose
/// agent reported a result, or nothing for this start, is released at once.
#[test]
fn a_node_timed_out_mid_install_stays_cordoned_until_its_agent_reports_a_result() {
    let spec = spec_with("rollout: {nodeTimeout: 30m, maxUnavailable: 1, maxFailedNodes: 3}");
    let rev = revision_of(&spec);
    let stuck = |status: &str| NodeView {
        started_at: ago(31 * 60),
        applied_revision: Some(rev.clone()),
        apply_status: Some(Reported::parse(status)),
        apply_heartbeat: ago(40 * 60),
        ..in_state("a", NodeState::Applying, &rev)
    };
    for status in ["Applying", "Rebooting"] {
        let plan = run(&spec, &[stuck(status), fresh("b")]);
        let p = patch(&plan, "a").expect("the timeout is written");
        assert_eq!((p.to, p.unschedulable), (NodeState::Failed, None), "{status}: Failed, cordon kept");
        assert!(!p.annotations.contains_key(names::ANN_CORDONED_BY_WINPOOL), "{status}: still winpool's cordon");
        assert!(plan.failed[0].message.contains(&format!("kept cordoned: its agent reports {status}")), "{}", plan.failed[0].message);
        // A hotpatch in service has no cordon to keep, and its message says none.
        let in_service = NodeView { unschedulable: false, cordoned_by_winpool: false, hotpatch: true, ..stuck(status) };
        let plan = run(&spec, &[in_service]);
        let msg = &plan.failed[0].message;
        assert!(!msg.contains("kept cordoned") && msg.contains("in service"), "{status}: {msg}");
        assert_eq!(patch(&plan, "a").map(|p| p.unschedulable), Some(None), "{status}: nobody cordons it");
        let held = land(&stuck(status), Some(p));
        assert!(held.unschedulable && held.cordoned_by_winpool);
        // Its slot stays taken: b does not start while a is out of service.
        let next = run(&spec, &[held.clone(), fresh("b")]);
        assert!(patch(&next, "b").is_none_or(|p| p.to == NodeState::Pending), "{status}: b started beside a held node");
        assert!(
            patch(&next, "a").is_none_or(|p| p.unschedulable.is_none()),
            "{status}: the cordon holds while the agent reports {status}: {:?}",
            patch(&next, "a")
        );
        for result in ["Failed", "Succeeded"] {
            let reported = NodeView { apply_status: Some(Reported::parse(result)), ..held.clone() };
            let next = run(&spec, &[reported]);
            let p = patch(&next, "a").expect("the cordon is lifted");
            assert_eq!((p.to, p.unschedulable), (NodeState::Failed, Some(false)), "{status} then {result}");
        }
    }
    // Uncordoned by a person while it installs: winpool forgets the cordon was its own.
    let held = land(&stuck("Applying"), patch(&run(&spec, &[stuck("Applying")]), "a"));
    let by_hand = run(&spec, &[NodeView { unschedulable: false, ..held }]);
    let p = patch(&by_hand, "a").expect("the mark goes");
    assert_eq!(p.annotations.get(names::ANN_CORDONED_BY_WINPOOL), Some(&None));
    let reported = run(&spec, &[stuck("Failed")]);
    assert_eq!(patch(&reported, "a").and_then(|p| p.unschedulable), Some(false), "a reported failure is released at once");
    let no_report = run(&spec, &[NodeView { applied_revision: None, apply_status: None, ..stuck("Applying") }]);
    assert_eq!(patch(&no_report, "a").and_then(|p| p.unschedulable), Some(false), "no install in flight: released at once");
}

/// An operator whose clock is far off the API server's starts no node and
/// times none out (a node past nodeTimeout by this clock may not be), and
/// says why; within the bound nothing changes.
#[test]
fn a_clock_far_off_the_api_servers_starts_nothing_and_times_nothing_out() {
    let spec = spec_with("rollout: {nodeTimeout: 30m, maxUnavailable: 2, maxFailedNodes: 3}");
    let rev = revision_of(&spec);
    let late = NodeView { started_at: ago(31 * 60), ..in_state("a", NodeState::Applying, &rev) };
    let nodes = [late, fresh("b")];
    let existing = BTreeSet::new();
    let skewed = jiff::SignedDuration::from_mins(-7);
    let plan = decide(&PoolInput { clock_skew: Some(skewed), ..input(&spec, &existing) }, &nodes, now());
    assert_eq!(plan.hold, Some(Hold::ClockSkew { by: skewed }));
    assert!(plan.failed.is_empty() && patch(&plan, "a").is_none(), "timed out on an untrusted clock: {:?}", plan.patches);
    assert!(patch(&plan, "b").is_none_or(|p| p.to == NodeState::Pending), "started on an untrusted clock");
    assert!(Hold::ClockSkew { by: skewed }.to_string().contains("420s ahead of the API server's"));
    let trusted = run(&spec, &nodes);
    assert_eq!(trusted.failed.len(), 1, "the same round on a trusted clock times a out");
    assert_eq!(transition(&trusted, "b"), Some((NodeState::Pending, NodeState::Draining)));
}

/// A node a person labels winpool.dev/hold=true is never started; the others
/// go on; a held node already in flight finishes; when every pending node is
/// held the pool says so.
#[test]
fn a_held_node_is_never_started_and_a_node_in_flight_finishes() {
    let spec = spec_with("rollout: {maxUnavailable: 2}");
    let rev = revision_of(&spec);
    let held = |n: NodeView| NodeView { held_by_label: true, ..n };
    let plan = run(&spec, &[held(fresh("a")), fresh("b"), fresh("c")]);
    assert_eq!(started(&plan), ["b", "c"], "a is held, b and c take the slots");
    assert!(plan.held.contains("a"));
    let in_flight = held(applied(in_state("d", NodeState::Verifying, &rev), &rev));
    let plan = run(&spec, &[held(fresh("a")), in_flight]);
    assert_eq!(transition(&plan, "d"), Some((NodeState::Verifying, NodeState::Updated)), "a held node in flight finishes");
    assert!(started(&plan).is_empty());
    let status = crate::decision::status::build_status(&spec, &plan, &Default::default(), None, None, None, now());
    let progressing = status.conditions.iter().find(|c| c.type_ == "Progressing").unwrap();
    assert_eq!(progressing.reason, "NodesHeld", "{}", progressing.message);
    assert!(progressing.message.contains("winpool.dev/hold=true: a"), "{}", progressing.message);
}

/// With onNodeFailure KeepCordoned a failing node keeps winpool's cordon (and
/// counts against maxUnavailable); by default it goes back into service.
#[test]
fn on_node_failure_keep_cordoned_keeps_the_cordon_and_the_slot() {
    for (setting, cordon_lifted) in [("", true), ("onNodeFailure: KeepCordoned", false)] {
        let spec = spec_with(&format!("rollout: {{maxUnavailable: 1, maxFailedNodes: 3, {setting}}}"));
        let rev = revision_of(&spec);
        let failing = NodeView {
            applied_revision: Some(rev.clone()),
            apply_status: Some(Reported::Known(ApplyStatus::Failed)),
            apply_message: Some("DISM exit code 0x800f0922".into()),
            ..in_state("a", NodeState::Applying, &rev)
        };
        let plan = run(&spec, &[failing.clone(), fresh("b")]);
        let p = patch(&plan, "a").expect("the failure is written");
        assert_eq!(p.to, NodeState::Failed, "{setting}");
        assert_eq!(p.unschedulable == Some(false), cordon_lifted, "{setting}: {p:?}");
        let after = land(&failing, Some(p));
        let next = run(&spec, &[after, fresh("b")]);
        assert_eq!(started(&next).is_empty(), !cordon_lifted, "{setting}: b starts only once a is back in service");
        assert!(patch(&next, "a").is_none_or(|p| p.unschedulable.is_none()), "{setting}: the Failed state keeps what it has");
    }
}

/// A node that re-enters Applying for the revision it failed is started
/// anew: the start names a new attempt (`winpool.dev/started-at`), which the
/// old failure does not answer, so the agent tries again and the operator
/// does not read the old failure as a new one.
#[test]
fn a_node_entering_applying_asks_the_agent_anew() {
    let spec = spec_with("rollout: {drain: {enabled: false}}");
    let rev = revision_of(&spec);
    // Retried by a person after a failure: state removed, the old report stays.
    let mut retried = fresh("a");
    retried.revision_label = Some(rev.clone());
    retried.applied_revision = Some(rev.clone());
    retried.apply_status = Some(Reported::Known(ApplyStatus::Failed));
    retried.apply_message = Some("servicing exited 0x800F0922".into());
    retried.started_at = ago(3600);
    let plan = run(&spec, std::slice::from_ref(&retried));
    let p = patch(&plan, "a").expect("started");
    assert_eq!(p.to, NodeState::Applying);
    let started = p.annotations.get(names::ANN_STARTED_AT).cloned().flatten().expect("a new start");
    assert_ne!(started.parse::<Timestamp>().ok(), retried.started_at, "a new attempt, not the failed one");
    let after = land(&retried, Some(p));
    assert_eq!((after.apply(), after.applied_revision), (None, None), "the old failure answers no start now");
}

/// "Rebooted" is a new bootID from the kubelet, never assumed from a report.
#[test]
fn an_update_that_needs_a_reboot_is_verified_only_after_a_new_boot_id() {
    let spec = spec_with("");
    let rev = revision_of(&spec);
    // Starting a node below the patch level remembers the boot it starts from.
    let plan = run(&spec, &[NodeView { boot_id: Some("boot-1".into()), ..fresh("a") }]);
    let p = patch(&plan, "a").expect("started");
    assert_eq!(p.annotations.get(names::ANN_BOOT_ID), Some(&Some("boot-1".into())));
    // A node already at the patch level has nothing to reboot for.
    let at_level = NodeView { boot_id: Some("boot-1".into()), kernel_version: Some("10.0.20348.2800".into()), ..fresh("b") };
    let plan = run(&spec, &[at_level]);
    assert_eq!(patch(&plan, "b").expect("started").annotations.get(names::ANN_BOOT_ID), None);

    let reported = |boot: &str| NodeView {
        boot_id: Some(boot.into()),
        boot_id_at_start: Some("boot-1".into()),
        ..applied(in_state("c", NodeState::Verifying, &rev), &rev)
    };
    let plan = run(&spec, &[reported("boot-1")]);
    assert_eq!(transition(&plan, "c"), None, "same boot: not Updated");
    assert!(plan.waiting["c"].contains("has not rebooted"), "{}", plan.waiting["c"]);
    let plan = run(&spec, &[reported("boot-2")]);
    let p = patch(&plan, "c").expect("verified");
    assert_eq!(p.to, NodeState::Updated);
    assert_eq!(p.annotations.get(names::ANN_BOOT_ID), Some(&None), "the mark goes with the update");
}

#[test]
fn a_runtime_with_vendor_build_metadata_is_the_version_asked_for() {
    let spec = spec_with("");
    let rev = revision_of(&spec);
    let mut n = applied(in_state("a", NodeState::Verifying, &rev), &rev);
    n.runtime_version = Some("containerd://1.7.22+azure".into());
    assert_eq!(transition(&run(&spec, &[n.clone()]), "a"), Some((NodeState::Verifying, NodeState::Updated)));
    n.runtime_version = Some("containerd://1.7.21+azure".into());
    assert_eq!(transition(&run(&spec, &[n]), "a"), None);
}

/// Many rounds over a pool whose agents succeed, fail or stay silent at random,
/// each round's writes landed on the nodes before the next decision: whatever
/// happens, maxUnavailable is never exceeded, an administrator's cordon is never
/// lifted, and a failed node is never started again for the same revision.
mod multi_round {
    use super::*;
    use proptest::prelude::*;

    /// What a node's host and agent do in one round while it is asked to apply.
    fn act(n: &mut NodeView, rev: &str, behaviour: u8) {
        if n.state == NodeState::Draining.into() {
            n.pods_to_evict = 0;
        }
        let asked = n.revision_label.as_deref() == Some(rev) && n.applied_revision.is_none();
        if !asked || n.state != NodeState::Applying.into() {
            return;
        }
        match behaviour {
            1 => {
                *n = applied(n.clone(), rev);
                n.boot_id = Some(format!("{}-rebooted", n.name));
            }
            2 => {
                n.applied_revision = Some(rev.into());
                n.apply_status = Some(Reported::Known(ApplyStatus::Failed));
                n.apply_message = Some("DISM exit code 0x800f0922".into());
            }
            _ => {}
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn rounds_never_exceed_max_unavailable_lift_an_admin_cordon_or_restart_a_failed_node(
            size in 1..8usize,
            max_unavailable in 1..4i32,
            admin in prop::collection::vec(any::<bool>(), 8),
            rounds in prop::collection::vec(prop::collection::vec(0..3u8, 8), 1..30),
        ) {
            let spec = spec_with(&format!("rollout: {{maxUnavailable: {max_unavailable}, maxFailedNodes: 0}}"));
            let rev = revision_of(&spec);
            let mut nodes: Vec<NodeView> = (0..size)
                .map(|i| NodeView { boot_id: Some(format!("n{i}-boot")), unschedulable: admin[i], ..fresh(&format!("n{i}")) })
                .collect();
            let admin_cordoned: BTreeSet<String> = nodes.iter().filter(|n| n.unschedulable).map(|n| n.name.clone()).collect();
            let mut failed: BTreeSet<String> = BTreeSet::new();
            for behaviour in rounds {
                let reported_failure: Vec<String> = nodes
                    .iter()
                    .filter(|n| n.applied_revision.as_deref() == Some(rev.as_str()) && n.apply() == Some(ApplyStatus::Failed))
                    .map(|n| n.name.clone())
                    .collect();
                let plan = run(&spec, &nodes);
                for p in &plan.patches {
                    prop_assert!(!(admin_cordoned.contains(&p.node) && p.unschedulable == Some(false)), "{} lost its admin cordon", p.node);
                    prop_assert!(!failed.contains(&p.node) || p.to == NodeState::Failed, "{} restarted after failing: {:?}", p.node, p.to);
                }
                nodes = nodes.iter().map(|n| land(n, patch(&plan, &n.name))).collect();
                let in_flight = nodes.iter().filter(|n| n.state.in_flight()).count();
                prop_assert!(in_flight <= max_unavailable as usize, "{in_flight} nodes in flight, maxUnavailable {max_unavailable}");
                for n in nodes.iter().filter(|n| reported_failure.contains(&n.name)) {
                    prop_assert_eq!(&n.state, &NodeState::Failed.into(), "{} reported a failure but was not left Failed", &n.name);
                }
                for n in &nodes {
                    if n.state == NodeState::Failed.into() {
                        failed.insert(n.name.clone());
                    }
                    if admin_cordoned.contains(&n.name) {
                        prop_assert!(n.unschedulable, "{} lost its admin cordon", n.name);
                    }
                }
                for (n, b) in nodes.iter_mut().zip(behaviour) {
                    act(n, &rev, b);
                }
            }
        }
    }
}

/// An Updated node of this rollout, `secs` seconds ago.
fn updated_ago(name: &str, rev: &str, secs: i64) -> NodeView {
    let mut n = applied(in_state(name, NodeState::Updated, rev), rev);
    n.state_since = ago(secs);
    n.cordoned_by_winpool = false;
    n.unschedulable = false;
    n
}

#[test]
fn a_node_updated_less_than_soak_time_ago_holds_its_slot_and_the_pool_looks_again_when_it_is_done() {
    let spec = spec_with("rollout: {maxUnavailable: 1, soakTime: 5m}");
    let rev = revision_of(&spec);
    let nodes = [updated_ago("a", &rev, 60), fresh("b")];
    let plan = run(&spec, &nodes);
    assert_eq!(patch(&plan, "b"), None, "b waits while a soaks");
    assert_eq!(plan.soaking.map(|k| k.nodes), Some(1));
    assert_eq!(plan.soaking.map(|k| k.first_ends), Some(now() + jiff::SignedDuration::from_secs(240)), "a's soak ends 4 min from now");
    assert_eq!(plan.requeue_after, Duration::from_secs(240), "the pool looks again when a's slot frees");

    let nodes = [updated_ago("a", &rev, 301), fresh("b")];
    let plan = run(&spec, &nodes);
    assert_eq!(transition(&plan, "b"), Some((NodeState::Pending, NodeState::Draining)), "a soaked 5 min: b starts");
    assert_eq!(plan.soaking, None);
}

#[test]
fn a_node_updated_this_round_soaks_from_now_and_without_soak_time_frees_its_slot_at_once() {
    let rev = revision_of(&spec_with(""));
    // a verifies this round: Verifying -> Updated.
    let mut a = applied(in_state("a", NodeState::Verifying, &rev), &rev);
    a.hns = HnsReadiness::Ready;
    let nodes = [a, fresh("b")];
    let no_soak = run(&spec_with("rollout: {maxUnavailable: 1}"), &nodes);
    assert_eq!(transition(&no_soak, "a"), Some((NodeState::Verifying, NodeState::Updated)));
    assert_eq!(transition(&no_soak, "b"), Some((NodeState::Pending, NodeState::Draining)), "no soakTime: a's slot goes to b at once");

    let soak = spec_with("rollout: {maxUnavailable: 1, soakTime: 30s}");
    let mut nodes = nodes.clone();
    nodes[0].target_revision = Some(revision_of(&soak));
    nodes[0].revision_label = Some(revision_of(&soak));
    nodes[0].applied_revision = Some(revision_of(&soak));
    let plan = run(&soak, &nodes);
    assert_eq!(transition(&plan, "a"), Some((NodeState::Verifying, NodeState::Updated)));
    assert_eq!(patch(&plan, "b"), None, "a soaks 30 s from now first");
    assert_eq!(plan.requeue_after, Duration::from_secs(30));
}

#[test]
fn a_soaking_node_that_is_not_ready_counts_once_and_nodes_updated_long_ago_never() {
    let spec = spec_with("rollout: {maxUnavailable: 2, soakTime: 10m}");
    let rev = revision_of(&spec);
    let mut down = updated_ago("a", &rev, 60);
    down.ready = false;
    let nodes = [down, updated_ago("old", &rev, 86_400), fresh("b"), fresh("c")];
    let plan = run(&spec, &nodes);
    assert_eq!(plan.soaking, None, "a NotReady node is out of service, not soaking; old soaked long ago");
    let started: Vec<&str> = plan.patches.iter().filter(|p| p.to == NodeState::Draining).map(|p| p.node.as_str()).collect();
    assert_eq!(started, ["b"], "a (down) takes one of the two slots, b the other");
}

#[test]
fn the_state_label_marks_failed_nodes_and_follows_a_hand_retry() {
    let spec = spec_with("");
    let rev = revision_of(&spec);
    let label = |plan: &Plan, node: &str| patch(plan, node).and_then(|p| p.labels.get(names::LABEL_STATE).cloned());
    // Moving through the states in flight leaves the node's labels alone (the DaemonSet controller reacts to each label change).
    let plan = run(&spec, &[fresh("a")]);
    assert_eq!(transition(&plan, "a"), Some((NodeState::Pending, NodeState::Draining)));
    assert_eq!(label(&plan, "a"), Some(None), "removed if there (a retry), never set in flight");
    let plan = run(&spec, &[applied(in_state("a", NodeState::Verifying, &rev), &rev)]);
    assert_eq!(transition(&plan, "a"), Some((NodeState::Verifying, NodeState::Updated)));
    assert_eq!(label(&plan, "a"), Some(None));
    // A failure labels it Failed.
    let mut failing = in_state("a", NodeState::Applying, &rev);
    failing.applied_revision = Some(rev.clone());
    failing.apply_status = Some(Reported::Known(ApplyStatus::Failed));
    assert_eq!(label(&run(&spec, &[failing]), "a"), Some(Some("Failed".into())));
    // The annotation removed by hand to retry: the stale label goes in the same round (maxFailedNodes 0 so it may start at once).
    let retry_spec = spec_with("rollout: {maxFailedNodes: 0, paused: true}");
    let retried = NodeView { state_label: Some("Failed".into()), ..fresh("a") };
    let plan = run(&retry_spec, &[retried]);
    assert_eq!(label(&plan, "a"), Some(None));
    // A node failed by an older winpool gets the label once; one in flight is left alone.
    let mut legacy = in_state("a", NodeState::Failed, &rev);
    legacy.state_label = None;
    legacy.cordoned_by_winpool = false;
    legacy.unschedulable = false;
    assert_eq!(label(&run(&spec, &[legacy]), "a"), Some(Some("Failed".into())));
    assert_eq!(patch(&run(&spec, &[in_state("a", NodeState::Applying, &rev)]), "a"), None);
}

fn blocked(name: &str, rev: &str, refused_for: i64) -> NodeView {
    let mut n = draining(name, rev, 1);
    n.drain_block = Some(DrainBlock { budget: "shop/checkout".into(), since: ago(refused_for).unwrap() });
    n
}

#[test]
fn a_node_a_budget_blocks_is_put_back_and_its_slot_goes_to_the_next_node() {
    let spec = spec_with("rollout: {maxUnavailable: 1, drain: {putBackAfter: 1m, timeout: 10m}}");
    let rev = revision_of(&spec);
    // Refused for 30 s: still evicting, the wait names the budget, nobody else starts.
    let plan = run(&spec, &[blocked("a", &rev, 30), fresh("b")]);
    assert_eq!(plan.drain, vec![("a".to_string(), DrainMode::Evict)]);
    assert!(plan.waiting["a"].contains("shop/checkout"), "{}", plan.waiting["a"]);
    assert_eq!(transition(&plan, "b"), None);
    // Refused for a minute: put back (uncordoned, Pending, the budget named), and b takes the slot in the same round.
    let plan = run(&spec, &[blocked("a", &rev, 60), fresh("b")]);
    let p = patch(&plan, "a").unwrap();
    assert_eq!((p.from, p.to), (NodeState::Draining, NodeState::Pending));
    assert_eq!(p.unschedulable, Some(false));
    assert_eq!(p.annotations.get(names::ANN_DRAIN_BLOCKED_BY), Some(&Some("shop/checkout".into())));
    assert_eq!(p.annotations.get(names::ANN_DRAIN_BLOCKED_SINCE), Some(&Some(ago(60).unwrap().to_string())));
    assert!(plan.drain.is_empty(), "no eviction of a node put back");
    assert_eq!(transition(&plan, "b"), Some((NodeState::Pending, NodeState::Draining)));
    assert_eq!(plan.blocked["a"], ("shop/checkout".to_string(), Some(now() + jiff::SignedDuration::from_mins(1))));
    assert_eq!(plan.requeue_after, IN_FLIGHT_REQUEUE);
}

fn run_gated(spec: &WindowsNodePoolSpec, nodes: &[NodeView], gates: &[crate::decision::gates::GateResult]) -> Plan {
    let existing = BTreeSet::new();
    decide(&PoolInput { gates, ..input(spec, &existing) }, &cleared(spec, nodes), now())
}

fn gate(name: &str, seen: crate::decision::gates::Seen) -> crate::decision::gates::GateResult {
    crate::decision::gates::GateResult { gate: name.into(), seen }
}

fn on_nodes(nodes: &[(&str, &str)]) -> crate::decision::gates::Seen {
    let mut on: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (node, pod) in nodes {
        on.entry(node.to_string()).or_default().push(pod.to_string());
    }
    crate::decision::gates::Seen::PodsOnNodes(on)
}

fn started(plan: &Plan) -> Vec<&str> {
    plan.patches.iter().filter(|p| p.from == NodeState::Pending && p.to.in_flight()).map(|p| p.node.as_str()).collect()
}

#[test]
fn a_closed_health_gate_starts_no_node_and_nodes_in_flight_finish() {
    use crate::decision::gates::{Failure, Seen};
    let spec = spec_with("rollout: {maxUnavailable: 3}");
    let rev = revision_of(&spec);
    let draining = draining("a", &rev, 1);
    let nodes = [draining, fresh("b"), fresh("c")];
    let alerts = Seen::Alerts { total: 2, names: vec!["KubeNodeNotReady".into()] };
    let down = Seen::Failed(Failure::Timeout(Duration::from_secs(5)));
    // (gates, the gate named in the hold or None, the nodes started)
    let cases: Vec<(Vec<crate::decision::gates::GateResult>, Option<&str>, Vec<&str>)> = vec![
        (vec![], None, vec!["b", "c"]),
        (vec![gate("alerts", Seen::Alerts { total: 0, names: vec![] })], None, vec!["b", "c"]),
        (vec![gate("alerts", alerts.clone())], Some("alerts"), vec![]),
        (vec![gate("prom", down.clone())], Some("prom"), vec![]),
        (vec![gate("pods", Seen::Pods(vec!["ns/backup".into()]))], Some("pods"), vec![]),
        (vec![gate("open", Seen::Open), gate("prom", down.clone()), gate("alerts", alerts.clone())], Some("prom"), vec![]),
    ];
    for (gates, held_by, want_started) in cases {
        let plan = run_gated(&spec, &nodes, &gates);
        let hold_gate = match &plan.hold {
            Some(Hold::HealthGateClosed { gate, seen }) => {
                assert_eq!(Some(seen), gates.iter().find(|g| &g.gate == gate).map(|g| &g.seen), "the hold carries what the gate saw");
                Some(gate.as_str())
            }
            None => None,
            other => panic!("{other:?}"),
        };
        assert_eq!(hold_gate, held_by, "{gates:?}");
        assert_eq!(started(&plan), want_started, "{gates:?}");
        assert!(plan.drain.iter().any(|(n, _)| n == "a"), "{gates:?}: the in-flight drain goes on");
    }
}

#[test]
fn a_node_scope_pod_gate_holds_only_the_nodes_its_pods_run_on() {
    let spec = spec_with("rollout: {maxUnavailable: 2}");
    let nodes = [fresh("a"), fresh("b"), fresh("c")];
    // Pods on a (and on a node of another pool): b and c start instead.
    let backup = gate("backup", on_nodes(&[("a", "ns/backup-0"), ("other-pool-node", "ns/backup-1")]));
    let plan = run_gated(&spec, &nodes, std::slice::from_ref(&backup));
    assert_eq!(started(&plan), ["b", "c"]);
    assert_eq!(plan.hold, None, "nodes started: the gate holds no rollout");

    // Held nodes take no slot: with a and b held, c starts alone.
    let both = gate("backup", on_nodes(&[("a", "ns/backup-0"), ("b", "ns/backup-1")]));
    assert_eq!(started(&run_gated(&spec, &nodes, std::slice::from_ref(&both))), ["c"]);

    // Every node that could start is held: the gate holds the rollout, naming
    // only this pool's nodes it holds.
    let all = gate("backup", on_nodes(&[("a", "ns/x"), ("b", "ns/y"), ("c", "ns/z"), ("elsewhere", "ns/w")]));
    let plan = run_gated(&spec, &nodes, std::slice::from_ref(&all));
    assert!(started(&plan).is_empty());
    assert_eq!(
        plan.hold,
        Some(Hold::HealthGateClosed { gate: "backup".into(), seen: on_nodes(&[("a", "ns/x"), ("b", "ns/y"), ("c", "ns/z")]) })
    );
    assert_eq!(plan.requeue_after, crate::decision::rollout::HEALTH_GATE_INTERVAL, "looked at again, the pods go without an event");
}

#[test]
fn a_closed_gate_is_looked_at_again_after_the_health_gate_interval() {
    use crate::decision::gates::Seen;
    let closed = [gate("pods", Seen::Pods(vec!["ns/p".into()]))];
    let cases = [
        ("", Duration::from_secs(30)),
        ("rollout: {healthGateInterval: 5s}", Duration::from_secs(5)),
        ("rollout: {healthGateInterval: garbage}", Duration::from_secs(30)),
        ("rollout: {healthGateInterval: 0s}", Duration::from_secs(30)),
    ];
    for (extra, want) in cases {
        let plan = run_gated(&spec_with(extra), &[fresh("a")], &closed);
        assert!(matches!(plan.hold, Some(Hold::HealthGateClosed { .. })), "{extra}");
        assert_eq!(plan.requeue_after, want, "{extra}");
    }
    // Nodes in flight: the short requeue of a rollout in progress wins.
    let spec = spec_with("rollout: {maxUnavailable: 2}");
    let rev = revision_of(&spec);
    let plan = run_gated(&spec, &[in_state("a", NodeState::Applying, &rev), fresh("b")], &closed);
    assert_eq!(plan.requeue_after, IN_FLIGHT_REQUEUE);
}

#[test]
fn a_node_put_back_waits_then_goes_last_and_drain_timeout_counts_from_its_first_refusal() {
    let spec = spec_with("rollout: {maxUnavailable: 1, drain: {putBackAfter: 1m, timeout: 10m}}");
    let rev = revision_of(&spec);
    let put_back = |name: &str, secs_ago: i64| NodeView {
        state: crate::decision::rollout::NodeState::Pending.into(),
        state_since: ago(secs_ago),
        drain_blocked_by: Some("shop/checkout".into()),
        drain_blocked_since: ago(secs_ago + 60),
        ..fresh(name)
    };
    // Put back 30 s ago: not started again yet, even with the slot free; the pool looks again when it may.
    let plan = run(&spec, &[put_back("a", 30)]);
    assert_eq!(transition(&plan, "a"), None);
    assert_eq!(plan.requeue_after, Duration::from_secs(30));
    // Past putBackAfter it may start, but after the rest of the wave ("a" sorts first by name).
    let plan = run(&spec, &[put_back("a", 90), fresh("b")]);
    assert_eq!((transition(&plan, "a"), transition(&plan, "b")), (None, Some((NodeState::Pending, NodeState::Draining))));
    let plan = run(&spec, &[put_back("a", 90)]);
    let p = patch(&plan, "a").unwrap();
    assert_eq!(p.to, NodeState::Draining);
    assert!(!p.annotations.contains_key(names::ANN_DRAIN_BLOCKED_SINCE), "a retry keeps its first refusal");
    // Retried and refused again, 11 minutes after the first refusal: drain.timeout, naming the budget.
    let mut again = blocked("a", &rev, 20);
    again.drain_blocked_since = ago(11 * 60);
    let plan = run(&spec, &[again]);
    let p = patch(&plan, "a").unwrap();
    assert_eq!(p.to, NodeState::Failed);
    assert_eq!(p.annotations.get(names::ANN_FAILURE_REASON), Some(&Some("DrainTimeout".into())));
    assert!(p.annotations[names::ANN_FAILURE_MESSAGE].as_deref().unwrap().contains("shop/checkout"));
    // A node put back long ago (a pause, a new revision) starts its drain afresh.
    let plan = run(&spec, &[put_back("a", 3600)]);
    assert_eq!(patch(&plan, "a").unwrap().annotations.get(names::ANN_DRAIN_BLOCKED_SINCE), Some(&None));
}

#[test]
fn with_put_back_after_zero_a_blocked_node_keeps_its_slot() {
    let spec = spec_with("rollout: {maxUnavailable: 1, drain: {putBackAfter: 0s}}");
    let rev = revision_of(&spec);
    let plan = run(&spec, &[blocked("a", &rev, 300), fresh("b")]);
    assert_eq!((transition(&plan, "a"), transition(&plan, "b")), (None, None));
    assert_eq!(plan.drain, vec![("a".to_string(), DrainMode::Evict)]);
}

#[test]
fn the_estimate_is_the_waves_left_at_the_pools_pace() {
    let spec = spec_with("rollout: {maxUnavailable: 2}");
    let rev = revision_of(&spec);
    let existing = BTreeSet::new();
    let nodes = [
        in_state("a", NodeState::Applying, &rev),
        fresh("b"),
        fresh("c"),
        fresh("d"),
        applied(in_state("e", NodeState::Updated, &rev), &rev),
    ];
    let with = |avg: Option<u64>, spec: &WindowsNodePoolSpec| {
        let input = PoolInput { average_node_update: avg.map(Duration::from_secs), ..input(spec, &existing) };
        decide(&input, &cleared(spec, &nodes), now())
    };
    // 4 nodes left (a in flight, b c d), 2 at a time: 2 waves of 10 minutes.
    assert_eq!(with(Some(600), &spec).estimated_completion, Some(now() + jiff::SignedDuration::from_mins(20)));
    assert_eq!(with(None, &spec).estimated_completion, None, "no pace yet");
    assert_eq!(with(Some(600), &spec_with("rollout: {paused: true, maxUnavailable: 2}")).estimated_completion, None, "held");
    assert_eq!(fold_average(None, [Duration::from_secs(100)]), Some(Duration::from_secs(100)));
    assert_eq!(fold_average(Some(Duration::from_secs(100)), [Duration::from_secs(600)]), Some(Duration::from_secs(200)));
}

#[test]
fn in_flight_nodes_are_listed_with_since_when() {
    let spec = spec_with("rollout: {maxUnavailable: 2}");
    let rev = revision_of(&spec);
    let plan = run(&spec, &[in_state("a", NodeState::Applying, &rev), fresh("b"), fresh("c")]);
    let updating = plan.updating_nodes_status();
    let got: Vec<(&str, &str, Option<Timestamp>)> =
        updating.iter().map(|u| (u.name.as_str(), u.state.as_str(), u.since.as_ref().map(|t| t.0))).collect();
    assert_eq!(got, [("a", "Applying", ago(10)), ("b", "Draining", Some(now()))], "longest in its state first; c waits for a slot");
}

#[test]
fn a_retried_node_counts_as_blocked_until_its_drain_goes_through() {
    let spec = spec_with("rollout: {maxUnavailable: 1, drain: {putBackAfter: 1m}}");
    let rev = revision_of(&spec);
    let mut retry = draining("a", &rev, 1);
    retry.drain_blocked_by = Some("shop/checkout".into());
    retry.drain_blocked_since = ago(120);
    assert_eq!(run(&spec, std::slice::from_ref(&retry)).blocked["a"], ("shop/checkout".to_string(), None));
    retry.pods_to_evict = 0;
    let plan = run(&spec, &[retry]);
    assert!(plan.blocked.is_empty(), "drained: no longer blocked");
    assert_eq!(patch(&plan, "a").unwrap().annotations.get(names::ANN_DRAIN_BLOCKED_BY), Some(&None));
}

#[test]
fn other_holds_come_before_the_gates_and_gates_are_asked_for_only_when_a_node_could_start() {
    use crate::decision::gates::Seen;
    let closed = [gate("pods", Seen::Pods(vec!["ns/p".into()]))];
    let paused = spec_with("rollout: {paused: true}");
    assert_eq!(run_gated(&paused, &[fresh("a")], &closed).hold, Some(Hold::PausedBySpec));

    let existing = BTreeSet::new();
    let could = |spec: &WindowsNodePoolSpec, nodes: &[NodeView]| {
        crate::decision::rollout::could_start(&PoolInput { gates: &closed, ..input(spec, &existing) }, &cleared(spec, nodes), now())
    };
    let spec = spec_with("rollout: {maxUnavailable: 1}");
    let rev = revision_of(&spec);
    assert!(could(&spec, &[fresh("a")]), "a Pending node and a free slot: the gates matter");
    assert!(!could(&paused, &[fresh("a")]), "paused: no gate could change anything");
    assert!(!could(&spec, &[in_state("a", NodeState::Applying, &rev), fresh("b")]), "no free slot");
    assert!(!could(&spec, &[applied(fresh("a"), &rev)]), "nothing Pending");
    assert!(!could(&spec, &[]), "no nodes");
}

#[test]
fn nodes_whose_image_owns_containerd_are_never_started_for_a_runtime_change_unless_the_pool_says_in_place() {
    let aks = |name: &str| NodeView {
        runtime_version: Some("containerd://1.7.20+azure".into()),
        runtime_service: Some("containerd (nssm)".into()),
        ..fresh(name)
    };
    let nodes = [aks("a"), aks("b"), fresh("c")];
    let plan = run(&spec_with("rollout: {maxUnavailable: 3}"), &nodes);
    assert_eq!(plan.runtime_refused.keys().collect::<Vec<_>>(), ["a", "b"], "the vendor builds are refused");
    assert_eq!(transition(&plan, "c"), Some((NodeState::Pending, NodeState::Draining)), "an upstream containerd is replaced");
    for n in ["a", "b"] {
        assert!(patch(&plan, n).is_none_or(|p| p.unschedulable.is_none()), "{n} is never cordoned");
    }
    assert!(plan.runtime_refused["a"].contains("1.7.20+azure") && plan.runtime_refused["a"].contains("runtime.upgrade: InPlace"));

    // The same nodes once the pool allows it: they start like any other.
    let mut in_place = spec_with("rollout: {maxUnavailable: 3}");
    in_place.runtime.upgrade = Some(crate::api::RuntimeUpgrade::InPlace);
    let plan = run(&in_place, &nodes);
    assert!(plan.runtime_refused.is_empty());
    assert_eq!(plan.patches.iter().filter(|p| p.to == NodeState::Draining).count(), 3);
    // Or asks for what the image carries: nothing to replace.
    let mut image_version = spec_with("rollout: {maxUnavailable: 3}");
    image_version.runtime.version = Some("1.7.20".into());
    let plan = run(&image_version, &nodes[..2]);
    assert!(plan.runtime_refused.is_empty());
    assert_eq!(plan.patches.iter().filter(|p| p.to == NodeState::Draining).count(), 2, "the patch level still rolls");
}

#[test]
fn a_csi_proxy_host_service_is_labelled_once_and_satisfies_the_pool() {
    let spec = spec_with("storage: {csiProxy: {enabled: true, version: v1.1.3}}");
    let rev = revision_of(&spec);
    let host = NodeView { csi_proxy_host: Some("csi-proxy (nssm)".into()), ..fresh("a") };
    let plan = run(&spec, std::slice::from_ref(&host));
    assert_eq!(patch(&plan, "a").unwrap().labels.get(names::LABEL_CSI_PROXY_HOST), Some(&Some("true".into())));
    let labelled = NodeView { csi_proxy_host_label: Some("true".into()), ..host.clone() };
    assert!(
        run(&spec, std::slice::from_ref(&labelled)).patches.iter().all(|p| !p.labels.contains_key(names::LABEL_CSI_PROXY_HOST)),
        "once"
    );
    // Gone from the host: the label goes too, and the DaemonSet may run there again.
    let gone = NodeView { csi_proxy_host: None, ..labelled.clone() };
    assert_eq!(patch(&run(&spec, &[gone]), "a").unwrap().labels.get(names::LABEL_CSI_PROXY_HOST), Some(&None));

    // Its version is unknown (nothing on the host says it), and it still counts.
    let mut verifying = applied(in_state("a", NodeState::Verifying, &rev), &rev);
    verifying.csi_proxy_host_label = Some("true".into());
    verifying.csi_proxy_version = Some("unknown".into());
    let to = |plan: &Plan| patch(plan, "a").map(|p| p.to);
    assert_ne!(
        to(&run(&spec, std::slice::from_ref(&verifying))),
        Some(NodeState::Updated),
        "without a host service, unknown is not v1.1.3"
    );
    verifying.csi_proxy_host = Some("csi-proxy (nssm)".into());
    assert_eq!(transition(&run(&spec, &[verifying]), "a"), Some((NodeState::Verifying, NodeState::Updated)));
}

#[test]
fn a_node_is_cordoned_only_once_its_agents_preflight_passed_for_the_revision() {
    // Staging off: what holds a node here is its preflight alone.
    let spec = spec_with("rollout: {maxUnavailable: 10, staging: false}");
    let rev = revision_of(&spec);
    let verdict = |rev: &str, v: PreflightVerdict| Some(Preflight { revision: rev.into(), verdict: v });
    let nodes = [
        NodeView { preflight: verdict(&rev, PreflightVerdict::Ready), ..fresh("a") },
        NodeView {
            preflight: verdict(&rev, PreflightVerdict::Blocked("update source Windows Update cannot be reached: timeout".into())),
            ..fresh("b")
        },
        NodeView { preflight: None, ..fresh("c") },
        NodeView { preflight: verdict("0123456789", PreflightVerdict::Ready), ..fresh("d") },
        // Already at the target: never cordoned, so nothing to check before.
        NodeView { preflight: None, ..applied(fresh("e"), &rev) },
    ];
    let existing = BTreeSet::new();
    let plan = decide(&input(&spec, &existing), &nodes, now());
    let started: Vec<(&str, Option<bool>)> =
        plan.patches.iter().filter(|p| p.from == NodeState::Pending).map(|p| (p.node.as_str(), p.unschedulable)).collect();
    assert_eq!(started.first(), Some(&("a", Some(true))), "a is cordoned");
    assert!(started.iter().all(|(n, cordon)| *n == "a" || *n == "e" && cordon.is_none()), "no other node moves: {started:?}");
    assert_eq!(
        plan.preflight_held,
        BTreeMap::from([
            ("b".to_string(), PreflightHeld::Blocked("update source Windows Update cannot be reached: timeout".into())),
            ("c".to_string(), PreflightHeld::Awaited),
            ("d".to_string(), PreflightHeld::Awaited),
        ]),
        "b is blocked; c and d have no verdict on this revision; e is not held"
    );
    assert_eq!(plan.preflight_blocked_status().iter().map(|b| b.name.as_str()).collect::<Vec<_>>(), ["b"]);
}

#[test]
fn a_pool_that_stages_starts_only_nodes_whose_update_is_on_the_node() {
    let started = |extra: &str| {
        let spec = spec_with(&format!("rollout: {{maxUnavailable: 10{extra}}}"));
        let rev = revision_of(&spec);
        let ready = Some(Preflight { revision: rev.clone(), verdict: PreflightVerdict::Ready });
        let staging = |rev: &str, state: StagingState| Some(Staging { revision: rev.into(), state, reboot_free: false });
        let cleared = |name: &str| NodeView { preflight: ready.clone(), ..fresh(name) };
        let nodes = [
            NodeView { staging: staging(&rev, StagingState::Staged), ..cleared("staged") },
            NodeView { staging: staging(&rev, StagingState::Running), ..cleared("downloading") },
            NodeView {
                staging: staging(&rev, StagingState::Failed("downloading KB5050002: HRESULT 0x80244022".into())),
                ..cleared("failed")
            },
            NodeView { staging: None, ..cleared("not-yet") },
            NodeView { staging: staging("0123456789", StagingState::Staged), ..cleared("old-revision") },
        ];
        let existing = BTreeSet::new();
        let plan = decide(&input(&spec, &existing), &nodes, now());
        let started: Vec<String> = plan.patches.iter().filter(|p| p.unschedulable == Some(true)).map(|p| p.node.clone()).collect();
        let staging = plan.staging();
        (started, plan.preflight_held, staging)
    };
    let (on, held, staging) = started("");
    assert_eq!(on, ["staged"], "only the staged node is cordoned");
    assert_eq!(staging, 3, "downloading, not-yet and old-revision wait for their download");
    assert!(
        matches!(&held["failed"], PreflightHeld::Blocked(why) if why.contains("rollout.staging") && why.contains("0x80244022")),
        "a failed download holds its node, naming it: {held:?}"
    );
    let (off, held, _) = started(", staging: false");
    assert_eq!(off.len(), 5, "without staging every cleared node may start: {off:?}");
    assert!(held.is_empty(), "{held:?}");
}

/// A node whose staged update is a hotpatch, and that lacks nothing else,
/// is started in service where the pool takes hotpatches; a baseline month's
/// update, a node that also needs a new containerd, or a pool that does not
/// take hotpatches is cordoned and drained.
#[test]
fn a_hotpatch_is_installed_in_service_and_anything_else_is_drained() {
    let started = |hotpatch: &str| {
        let spec = spec_with(&format!("rollout: {{maxUnavailable: 10, hotpatch: {hotpatch}}}"));
        let rev = revision_of(&spec);
        let staged = |reboot_free: bool| Some(Staging { revision: rev.clone(), state: StagingState::Staged, reboot_free });
        let node = |name: &str, reboot_free: bool, runtime: &str| NodeView {
            staging: staged(reboot_free),
            boot_id: Some("boot-1".into()),
            runtime_version: Some(format!("containerd://{runtime}")),
            ..fresh(name)
        };
        let nodes = [node("hotpatch", true, "1.7.22"), node("baseline", false, "1.7.22"), node("needs-runtime", true, "1.7.20")];
        let plan = run(&spec, &nodes);
        nodes
            .iter()
            .map(|n| {
                let p = patch(&plan, &n.name).unwrap();
                let ann = |k: &str| p.annotations.get(k).cloned().flatten();
                (n.name.clone(), p.to, p.unschedulable, ann(names::ANN_HOTPATCH), ann(names::ANN_BOOT_ID))
            })
            .collect::<Vec<_>>()
    };
    // Drained; a reboot is waited for only where Windows Update says the update needs one.
    let drained =
        |name: &str, boot: Option<&str>| (name.to_string(), NodeState::Draining, Some(true), None::<String>, boot.map(String::from));
    assert_eq!(
        started("true"),
        [
            ("hotpatch".to_string(), NodeState::Applying, None, Some("true".to_string()), None),
            drained("baseline", Some("boot-1")),
            drained("needs-runtime", None)
        ],
        "only the hotpatch goes in service, with no boot to leave"
    );
    assert_eq!(started("false"), [drained("hotpatch", None), drained("baseline", Some("boot-1")), drained("needs-runtime", None)]);
}

/// A node drained for an update that waited for a new boot: its agent's
/// word that Windows asked none (a hotpatch the pool could not know of,
/// staging off) stands in for it; without that word the boot is waited for.
#[test]
fn an_install_that_needed_no_reboot_is_not_waited_for() {
    let spec = spec_with("rollout: {staging: false}");
    let rev = revision_of(&spec);
    let done = NodeView {
        boot_id: Some("boot-1".into()),
        boot_id_at_start: Some("boot-1".into()),
        hns: HnsReadiness::Ready,
        ..applied(in_state("n", NodeState::Verifying, &rev), &rev)
    };
    let plan = run(&spec, std::slice::from_ref(&done));
    assert!(patch(&plan, "n").is_none_or(|p| p.to != NodeState::Updated), "updated without a reboot: {plan:?}");
    let plan = run(&spec, &[NodeView { apply_no_reboot: true, ..done }]);
    assert_eq!(transition(&plan, "n"), Some((NodeState::Verifying, NodeState::Updated)));
}

/// A hotpatch lands without a reboot, and the Windows kubelet reads the
/// build once, when its stats client starts (winstats): its kernelVersion
/// keeps the build before the install, and the node sat Verifying until it
/// failed. A reboot-free start is verified by the build the agent read from
/// the host after its install; a start that rebooted, by the kubelet's.
#[test]
fn a_reboot_free_install_is_verified_by_the_build_the_agent_read_not_the_kubelets_stale_one() {
    let spec = spec_with("rollout: {staging: false}");
    let rev = revision_of(&spec);
    let stale = NodeView {
        boot_id: Some("boot-1".into()),
        boot_id_at_start: Some("boot-1".into()),
        hns: HnsReadiness::Ready,
        kernel_version: Some("10.0.20348.2700".into()),
        apply_no_reboot: true,
        apply_host_build: Some("10.0.20348.2762".into()),
        ..applied(in_state("n", NodeState::Verifying, &rev), &rev)
    };
    let plan = run(&spec, std::slice::from_ref(&stale));
    assert_eq!(transition(&plan, "n"), Some((NodeState::Verifying, NodeState::Updated)), "{plan:?}");
    assert_eq!(plan.behind_patch_level, 0, "counted at the patch level it runs");
    let short = NodeView { apply_host_build: Some("10.0.20348.2761".into()), ..stale.clone() };
    let plan = run(&spec, &[short]);
    assert!(patch(&plan, "n").is_none_or(|p| p.to != NodeState::Updated), "the host below the level: {plan:?}");
    let rebooted = NodeView { apply_no_reboot: false, boot_id: Some("boot-2".into()), ..stale };
    let plan = run(&spec, &[rebooted]);
    assert!(patch(&plan, "n").is_none_or(|p| p.to != NodeState::Updated), "a reboot start goes by the kubelet: {plan:?}");
}

/// Last month's reboot-free success, with the build the agent read then,
/// does not stand in for the build the node reaches with this month's
/// hotpatch: a node hotpatched before is hotpatched again.
#[test]
fn a_node_hotpatched_last_month_is_hotpatched_again() {
    let spec = spec_with("rollout: {hotpatch: true}");
    let rev = revision_of(&spec);
    let n = NodeView {
        staging: Some(Staging { revision: rev.clone(), state: StagingState::Staged, reboot_free: true }),
        runtime_version: Some("containerd://1.7.22".into()),
        kernel_version: Some("10.0.20348.2600".into()),
        apply_no_reboot: true,
        apply_host_build: Some("10.0.20348.2700".into()),
        ..fresh("n")
    };
    assert!(crate::decision::rollout::hotpatchable(&spec, &rev, &n));
}

/// A hotpatch whose install asks for a reboot after all: the agent waits
/// (RebootRequired), and the node is cordoned and drained from the boot it
/// is in, its hotpatch mark gone; once cordoned it is left to reboot.
#[test]
fn a_hotpatch_that_asks_for_a_reboot_is_drained_first() {
    let spec = spec_with("rollout: {hotpatch: true}");
    let rev = revision_of(&spec);
    let asking = NodeView {
        unschedulable: false,
        cordoned_by_winpool: false,
        hotpatch: true,
        boot_id: Some("boot-1".into()),
        applied_revision: Some(rev.clone()),
        apply_status: Some(Reported::Known(ApplyStatus::RebootRequired)),
        revision_label: Some(rev.clone()),
        ..in_state("n", NodeState::Applying, &rev)
    };
    let plan = run(&spec, std::slice::from_ref(&asking));
    let p = patch(&plan, "n").expect("a patch");
    assert_eq!((p.from, p.to, p.unschedulable), (NodeState::Applying, NodeState::Draining, Some(true)));
    assert_eq!(p.annotations.get(names::ANN_CORDONED_BY_WINPOOL), Some(&Some("true".to_string())));
    assert_eq!(p.annotations.get(names::ANN_HOTPATCH), Some(&None));
    assert_eq!(p.annotations.get(names::ANN_BOOT_ID), Some(&Some("boot-1".to_string())));

    let cordoned = NodeView { unschedulable: true, cordoned_by_winpool: true, hotpatch: false, ..asking.clone() };
    let plan = run(&spec, &[cordoned]);
    assert!(patch(&plan, "n").is_none_or(|p| p.to == NodeState::Applying && p.unschedulable.is_none()), "{plan:?}");

    // One that needed no reboot: Updated in service, counted as hotpatched.
    let hotpatched = NodeView { boot_id_at_start: None, ..applied(asking, &rev) };
    let plan = run(&spec, &[hotpatched]);
    let p = patch(&plan, "n").expect("a patch");
    assert_eq!((p.to, p.unschedulable, p.hotpatched), (NodeState::Updated, None, true));
    assert_eq!(p.annotations.get(names::ANN_HOTPATCH), Some(&None));
}

#[test]
fn an_agent_silent_for_a_whole_node_timeout_after_the_mark_is_reported_as_blocked() {
    let spec = spec_with("rollout: {maxUnavailable: 10, nodeTimeout: 15m}");
    let rev = revision_of(&spec);
    let nodes =
        [NodeView { agent_version: Some("0.1.0".into()), ..fresh("old-agent") }, NodeView { agent_version: None, ..fresh("no-agent") }];
    let existing = BTreeSet::new();
    let at = |mins: i64| {
        let input = PoolInput { target_marked_at: Some(now() - jiff::SignedDuration::from_mins(mins)), ..input(&spec, &existing) };
        decide(&input, &nodes, now())
    };
    let soon = at(14);
    assert_eq!(
        soon.preflight_held.values().collect::<Vec<_>>(),
        [&PreflightHeld::Awaited, &PreflightHeld::Awaited],
        "within nodeTimeout: waited for"
    );
    let late = at(16);
    let why: BTreeMap<&str, &str> = late.preflight_blocked().map(|(n, w)| (n.as_str(), w.as_str())).collect();
    assert_eq!(why.len(), 2, "{late:?}");
    assert!(
        why["old-agent"].contains(&format!("no preflight of revision {rev} within 15m")) && why["old-agent"].contains("0.1.0"),
        "{why:?}"
    );
    assert!(why["no-agent"].contains("is the agent pod running"), "{why:?}");
    assert!(late.patches.iter().all(|p| p.unschedulable != Some(true)), "never cordoned either way");
}

/// The go-signal is a start winpool records, not the label: a member that a
/// person or a label-syncing controller labelled with the pool's own target
/// is not started by it (the pool is paused), gets its label put back, and
/// the plan says so; labels winpool set are left alone.
#[test]
fn a_revision_label_winpool_did_not_set_is_put_back_and_starts_nothing() {
    let spec = spec_with("rollout: {paused: true}");
    let rev = revision_of(&spec);
    let never_started = NodeView { revision_label: Some(rev.clone()), ..fresh("a") };
    let mut rolled_before = applied(fresh("b"), "0123456789");
    rolled_before.state = NodeState::Updated.into();
    rolled_before.kernel_version = Some("10.0.20348.2700".into());
    rolled_before.revision_label = Some(rev.clone());
    let mut applying = in_state("c", NodeState::Applying, &rev);
    applying.revision_label = Some("0123456789".into());
    let untouched = applied(NodeView { state: NodeState::Updated.into(), ..fresh("d") }, &rev);
    let plan = run(&spec, &[never_started, rolled_before, applying, untouched]);

    let label = |node: &str| patch(&plan, node).and_then(|p| p.labels.get(names::LABEL_REVISION).cloned());
    assert_eq!(label("a"), Some(None), "never started: the label goes");
    assert_eq!(label("b"), Some(Some("0123456789".into())), "at rest: back to the revision its agent applied");
    assert_eq!(label("c"), Some(Some(rev.clone())), "in flight: back to the target winpool started it for");
    assert_eq!(label("d"), None, "winpool's own label is left alone");
    assert_eq!(plan.tampered.keys().map(String::as_str).collect::<Vec<_>>(), ["a", "b", "c"]);
    for node in ["a", "b"] {
        let p = patch(&plan, node).unwrap();
        assert_eq!((p.from, p.to), (NodeState::Pending, NodeState::Pending), "{node} is not started by a label");
        assert!(p.unschedulable.is_none() && !p.annotations.contains_key(names::ANN_STARTED_AT), "{node}: {p:?}");
    }
    assert_eq!(plan.counts.updated, 1, "d is Updated; b is not at the target, whatever its label said");
}

/// An agent's long failure message reaches the Node and the status clipped.
#[test]
fn a_huge_agent_message_is_clipped_where_it_is_copied() {
    let spec = spec_with("");
    let rev = revision_of(&spec);
    let mut failing = in_state("a", NodeState::Applying, &rev);
    failing.applied_revision = Some(rev.clone());
    failing.apply_status = Some(Reported::Known(ApplyStatus::Failed));
    failing.apply_message = Some("é".repeat(1_000_000));
    let plan = run(&spec, &[failing]);
    let written = patch(&plan, "a").and_then(|p| p.annotations.get(names::ANN_FAILURE_MESSAGE).cloned().flatten()).unwrap();
    assert!(written.chars().count() < MAX_COPIED_MESSAGE + 40, "{} characters", written.chars().count());
    assert!(written.ends_with("(998976 more characters)"), "{}", &written[written.len() - 40..]);
    let status = plan.failed_nodes_status();
    assert!(status[0].message.chars().count() < MAX_COPIED_MESSAGE + 40);
    assert_eq!(clipped("short"), "short");
}

mod hooks {
    use super::*;
    use crate::decision::rollout::hooks::{HookKind, HookOutcome, HookRun, HookStart};

    const HOOKS: &str = "rollout: {hooks: {preDrain: {image: tools:1, timeout: 5m, onFailure: Hold}, postUpdate: {image: tools:1}}}";

    fn run_with(spec: &WindowsNodePoolSpec, nodes: &[NodeView], hooks_namespace: Option<&str>) -> Plan {
        let existing = BTreeSet::new();
        decide(&PoolInput { hooks_namespace, ..input(spec, &existing) }, &cleared(spec, nodes), now())
    }

    fn ran(mut n: NodeView, kind: HookKind, created_ago: i64, outcome: HookOutcome) -> NodeView {
        n.hook_runs.push(HookRun { kind, job: format!("winpool-{}-1", kind.as_str()), created: ago(created_ago), outcome });
        n
    }

    /// Node n draining for the hooks' revision, `pods` pods still to evict.
    fn hooked(pods: usize) -> NodeView {
        draining("n", &revision_of(&spec_with(HOOKS)), pods)
    }

    #[test]
    fn a_pre_drain_hook_runs_before_any_eviction_and_its_time_is_not_the_drains() {
        let spec = spec_with(HOOKS);
        let ns = Some("hooks");
        // No Job yet: the plan creates one for this start and evicts nothing.
        let plan = run_with(&spec, &[hooked(3)], ns);
        assert_eq!(
            plan.hooks,
            vec![HookStart { node: "n".into(), kind: HookKind::PreDrain, started_at: ago(10).unwrap(), timeout_secs: 300 }]
        );
        assert!(plan.drain.is_empty(), "nothing evicted before the hook ran");
        // A hook Job never outlives its node's start: 4m of nodeTimeout, 10s of it gone.
        let tight = spec_with(&HOOKS.replace("rollout: {", "rollout: {nodeTimeout: 4m, "));
        assert_eq!(run_with(&tight, &[hooked(3)], ns).hooks[0].timeout_secs, 230);
        // Running, even with no pods to evict: the node waits.
        let plan = run_with(&spec, &[ran(hooked(0), HookKind::PreDrain, 5, HookOutcome::Running)], ns);
        assert!(plan.hooks.is_empty() && plan.drain.is_empty() && transition(&plan, "n").is_none(), "{:?}", plan.waiting);
        // Succeeded: the drain goes on, and drain.timeout counts from the hook's end.
        let mut long = ran(hooked(3), HookKind::PreDrain, 900, HookOutcome::Succeeded(ago(5)));
        long.state_since = ago(900); // past drain.timeout (10m) since the start, not since the hook
        let plan = run_with(&spec, &[long], ns);
        assert_eq!(plan.drain, vec![("n".to_string(), DrainMode::Evict)]);
        let plan = run_with(&spec, &[ran(hooked(0), HookKind::PreDrain, 60, HookOutcome::Succeeded(ago(5)))], ns);
        assert_eq!(transition(&plan, "n"), Some((NodeState::Draining, NodeState::Applying)));
    }

    #[test]
    fn a_failed_pre_drain_hook_holds_its_node_uncordoned_or_fails_it_as_the_pool_says() {
        let ns = Some("hooks");
        let failed = HookOutcome::Failed("DeadlineExceeded: Job was active longer than specified deadline".into());
        let plan = run_with(&spec_with(HOOKS), &[ran(hooked(3), HookKind::PreDrain, 400, failed.clone())], ns);
        let p = patch(&plan, "n").unwrap();
        assert_eq!((p.from, p.to), (NodeState::Draining, NodeState::Pending));
        assert_eq!(p.labels.get(names::LABEL_HOLD), Some(&Some("true".to_string())));
        assert!(p.annotations[names::ANN_HOLD_REASON].as_deref().unwrap().contains("kubectl -n hooks logs job/winpool-pre-drain-1"));
        assert_eq!(p.unschedulable, Some(false), "uncordoned: it was never drained");
        assert!(plan.drain.is_empty());
        // Running past its timeout (the Job controller did not stop it) is a failure too.
        let plan = run_with(&spec_with(HOOKS), &[ran(hooked(3), HookKind::PreDrain, 400, HookOutcome::Running)], ns);
        assert_eq!(transition(&plan, "n"), Some((NodeState::Draining, NodeState::Pending)));

        let fail = spec_with("rollout: {hooks: {preDrain: {image: tools:1}}}");
        let n = draining("n", &revision_of(&fail), 3);
        let plan = run_with(&fail, &[ran(n.clone(), HookKind::PreDrain, 60, failed)], ns);
        let p = patch(&plan, "n").unwrap();
        assert_eq!((p.to, p.annotations[names::ANN_FAILURE_REASON].as_deref()), (NodeState::Failed, Some("HookFailed")));
        // Without a hooks namespace no hook can run: the node fails, saying so.
        let plan = run_with(&fail, &[n], None);
        let p = patch(&plan, "n").unwrap();
        assert_eq!(p.to, NodeState::Failed);
        assert!(p.reason.contains("--hooks-namespace"), "{}", p.reason);
    }

    #[test]
    fn a_post_update_hook_runs_once_the_node_is_verified_and_before_its_uncordon() {
        let spec = spec_with(HOOKS);
        let rev = revision_of(&spec);
        let ns = Some("hooks");
        let verified = || applied(in_state("n", NodeState::Verifying, &rev), &rev);
        let plan = run_with(&spec, &[verified()], ns);
        assert_eq!(plan.hooks.iter().map(|h| h.kind).collect::<Vec<_>>(), [HookKind::PostUpdate]);
        assert!(transition(&plan, "n").is_none(), "still Verifying and cordoned");
        // Straight from Applying: Verifying while its hook runs.
        let plan = run_with(&spec, &[applied(in_state("n", NodeState::Applying, &rev), &rev)], ns);
        assert_eq!(transition(&plan, "n"), Some((NodeState::Applying, NodeState::Verifying)));
        assert_eq!(patch(&plan, "n").unwrap().unschedulable, None);
        let plan = run_with(&spec, &[ran(verified(), HookKind::PostUpdate, 30, HookOutcome::Succeeded(ago(1)))], ns);
        let p = patch(&plan, "n").unwrap();
        assert_eq!((p.to, p.unschedulable), (NodeState::Updated, Some(false)));
        // Hold: Updated, but the cordon stays, now a person's to lift.
        let hold = spec_with("rollout: {hooks: {postUpdate: {image: tools:1, onFailure: Hold}}}");
        let rev = revision_of(&hold);
        let n = ran(
            applied(in_state("n", NodeState::Verifying, &rev), &rev),
            HookKind::PostUpdate,
            30,
            HookOutcome::Failed("BackoffLimitExceeded".into()),
        );
        let plan = run_with(&hold, &[n], ns);
        let p = patch(&plan, "n").unwrap();
        assert_eq!((p.to, p.unschedulable), (NodeState::Updated, None));
        assert_eq!(p.annotations.get(names::ANN_CORDONED_BY_WINPOOL), Some(&None), "the cordon is no longer winpool's");
        assert_eq!(p.labels.get(names::LABEL_HOLD), Some(&Some("true".to_string())));
    }
}

/// rollout.hnsPacing: while the pool's nodes' estimated HNS backlog is over
/// the budget, no node starts and no draining node's pods are evicted; at or
/// under it, or with pacing off, the rollout goes on. Waiting says so, and
/// looks again about when the backlog will be back within the budget.
#[test]
fn an_hns_backlog_over_the_budget_holds_starts_and_evictions() {
    let spec = spec_with("rollout: {maxUnavailable: 2, hnsPacing: {budget: 10s}}");
    let rev = revision_of(&spec);
    let existing = BTreeSet::new();
    let draining = draining("a", &rev, 3);
    let nodes = [draining, fresh("b"), fresh("c")];
    let with = |spec: &WindowsNodePoolSpec, secs: u64| {
        let input = PoolInput { hns_backlog: Duration::from_secs(secs), ..input(spec, &existing) };
        decide(&input, &cleared(spec, &nodes), now())
    };
    let started = |plan: &Plan| plan.patches.iter().filter(|p| p.to == NodeState::Draining).count();

    let behind = with(&spec, 25);
    assert_eq!(started(&behind), 0, "no start while 25s behind, budget 10s");
    assert!(behind.drain.is_empty(), "no eviction either: {:?}", behind.drain);
    assert_eq!(behind.hold, Some(Hold::HnsBacklog(HnsWait { backlog: Duration::from_secs(25), budget: Duration::from_secs(10) })));
    assert!(behind.waiting["a"].contains("25s"), "{}", behind.waiting["a"]);

    let within = with(&spec, 9);
    assert_eq!(started(&within), 1, "within the budget: the free slot starts");
    assert_eq!(within.drain, vec![("a".to_string(), DrainMode::Evict)]);
    assert_eq!(within.hold, None);

    let off = spec_with("rollout: {maxUnavailable: 2, hnsPacing: {enabled: false, budget: 10s}}");
    assert_eq!(started(&with(&off, 600)), 1, "pacing off: the backlog holds nothing");

    let default = spec_with("rollout: {maxUnavailable: 2}");
    assert_eq!(started(&with(&default, 30)), 1, "the default budget is 30s");
    assert_eq!(started(&with(&default, 31)), 0, "and pacing is on by default");
}

/// Within the budget, rollout.hnsPacing bounds the evictions of a round by
/// the room left: each eviction is two load-balancer replacements at the
/// release's pace (1.2 s on Windows Server 2019), handed out in node order.
#[test]
fn the_evictions_of_a_round_are_bounded_by_the_hns_room_left() {
    let ltsc2019 = |rollout: &str| {
        let mut spec = spec_with(rollout);
        (spec.os.version, spec.os.patch_level) = (crate::api::OsVersion::Ltsc2019, "10.0.17763.6414".into());
        spec
    };
    let spec = ltsc2019("rollout: {maxUnavailable: 3, hnsPacing: {budget: 30s}}");
    let rev = revision_of(&spec);
    let existing = BTreeSet::new();
    let nodes = [draining("a", &rev, 3), draining("b", &rev, 3), draining("c", &rev, 3)];
    let with = |secs: f64| {
        let input = PoolInput { hns_backlog: Duration::from_secs_f64(secs), ..input(&spec, &existing) };
        decide(&input, &cleared(&spec, &nodes), now())
    };
    // 6 s of room: 5 evictions of 1.2 s.
    let plan = with(24.0);
    assert_eq!(plan.drain.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(plan.eviction_caps, BTreeMap::from([("a".to_string(), 3), ("b".to_string(), 2)]));
    assert!(plan.waiting["c"].contains("hnsPacing"), "{}", plan.waiting["c"]);
    // Three evictions a moment ago whose slice changes are not heard yet take room too.
    let input3 = PoolInput { hns_backlog: Duration::from_secs(24), evictions_unheard: 3, ..input(&spec, &existing) };
    let plan = decide(&input3, &cleared(&spec, &nodes), now());
    assert_eq!(plan.eviction_caps, BTreeMap::from([("a".to_string(), 2)]));
    // Less than one eviction's room: none this round.
    let plan = with(29.5);
    assert!(plan.drain.is_empty(), "{:?}", plan.drain);
    // The pool's own pace (rollout.hnsPacing.rates): 300 ms a load balancer, 600 ms an eviction: 10 in 6 s.
    let fast = ltsc2019("rollout: {maxUnavailable: 3, hnsPacing: {budget: 30s, rates: {perLoadBalancer: 300ms}}}");
    assert_eq!(crate::decision::rollout::hns_rates(&fast).per_remote_endpoint, Duration::from_millis(24), "an unset rate is the release's");
    let rev = revision_of(&fast);
    let fast_nodes = [draining("a", &rev, 3), draining("b", &rev, 3), draining("c", &rev, 3)];
    let fast_input = PoolInput { hns_backlog: Duration::from_secs(24), ..input(&fast, &existing) };
    let plan = decide(&fast_input, &cleared(&fast, &fast_nodes), now());
    assert_eq!(plan.eviction_caps, BTreeMap::from([("a".to_string(), 3), ("b".to_string(), 3), ("c".to_string(), 3)]));
    // Pacing off: every pod of every node, no cap.
    let off = ltsc2019("rollout: {maxUnavailable: 3, hnsPacing: {enabled: false}}");
    let input = PoolInput { hns_backlog: Duration::from_secs(29), ..input(&off, &existing) };
    let plan = decide(&input, &cleared(&off, &nodes), now());
    assert_eq!(plan.drain.len(), 3);
    assert!(plan.eviction_caps.is_empty());
}

/// `rollout.undo: true`: a node a Node-scope gate holds while it soaks
/// after its update is started again, cordoned and drained, to take the
/// update off; once its agent has, it is Failed UpdateUndone (a failed
/// removal: UndoFailed). Past its soak, or with undo false, the gate only
/// holds starts.
#[test]
fn a_node_unhealthy_in_its_soak_has_its_update_taken_off_and_is_failed() {
    let spec = spec_with("rollout: {undo: true, soakTime: 1h}");
    let rev = revision_of(&spec);
    let soaking = NodeView {
        unschedulable: false,
        cordoned_by_winpool: false,
        started_at: None,
        state_since: ago(600),
        ..applied(in_state("n", NodeState::Updated, &rev), &rev)
    };
    let holding = [gate("win-pods", on_nodes(&[("n", "shop/checkout-7")]))];
    let plan = run_gated(&spec, std::slice::from_ref(&soaking), &holding);
    let p = patch(&plan, "n").expect("a patch");
    assert_eq!((p.from, p.to, p.unschedulable), (NodeState::Updated, NodeState::Draining, Some(true)));
    assert_eq!(p.annotations.get(names::ANN_UNDO), Some(&Some("win-pods".to_string())));
    assert_eq!(p.annotations.get(names::ANN_CORDONED_BY_WINPOOL), Some(&Some("true".to_string())));
    assert_eq!(p.annotations.get(names::ANN_STARTED_AT), Some(&Some(now().to_string())));
    assert_eq!(plan.requeue_after, IN_FLIGHT_REQUEUE);

    // Not without undo, not past the soak, not for another node's pods.
    let off = spec_with("rollout: {soakTime: 1h}");
    assert!(patch(&run_gated(&off, std::slice::from_ref(&soaking), &holding), "n").is_none());
    let soaked = NodeView { state_since: ago(3601), ..soaking.clone() };
    assert!(patch(&run_gated(&spec, &[soaked], &holding), "n").is_none());
    let elsewhere = [gate("win-pods", on_nodes(&[("m", "shop/checkout-7")]))];
    assert!(patch(&run_gated(&spec, std::slice::from_ref(&soaking), &elsewhere), "n").is_none());
    // While it soaks the gates are looked at every healthGateInterval.
    let plan = run_gated(&spec, std::slice::from_ref(&soaking), &[]);
    assert_eq!(plan.requeue_after, Duration::from_secs(30));

    // Drained, the agent takes it off and says so: Failed, uncordoned, counted.
    let undoing = NodeView { undo: Some("win-pods".into()), started_at: ago(300), ..in_state("n", NodeState::Applying, &rev) };
    let plan = run(&spec, std::slice::from_ref(&undoing));
    assert!(patch(&plan, "n").is_none(), "waits for the agent: {plan:?}");
    let undone = NodeView { apply_message: Some("removed Package_for_RollupFix 20348.2762".into()), ..applied(undoing.clone(), &rev) };
    let plan = run(&spec, &[undone]);
    let p = patch(&plan, "n").expect("a patch");
    assert_eq!((p.to, p.unschedulable), (NodeState::Failed, Some(false)));
    assert_eq!(p.annotations.get(names::ANN_FAILURE_REASON), Some(&Some("UpdateUndone".to_string())));
    assert_eq!(p.annotations.get(names::ANN_UNDO), Some(&None));
    let failed = NodeView { apply_status: Some(Reported::Known(ApplyStatus::Failed)), ..applied(undoing, &rev) };
    let p = run(&spec, &[failed]).patches.into_iter().find(|p| p.node == "n").expect("a patch");
    assert_eq!(p.annotations.get(names::ANN_FAILURE_REASON), Some(&Some("UndoFailed".to_string())));
}

/// A person's pause and a skewed clock hold an undo as they hold any start
/// (the gates are not asked for it either); the bad-update breaker's pause
/// and a closed maintenance window do not: the node is broken now.
#[test]
fn an_undo_waits_for_a_persons_pause_and_a_trusted_clock_not_for_the_breaker_or_the_windows() {
    let spec = spec_with("rollout: {undo: true, soakTime: 1h}");
    let rev = revision_of(&spec);
    let soaking = NodeView {
        unschedulable: false,
        cordoned_by_winpool: false,
        state_since: ago(600),
        ..applied(in_state("n", NodeState::Updated, &rev), &rev)
    };
    let nodes = std::slice::from_ref(&soaking);
    let holding = [gate("win-pods", on_nodes(&[("n", "shop/checkout-7")]))];
    let existing = BTreeSet::new();
    let undone = |input: PoolInput<'_>| {
        let input = PoolInput { gates: &holding, ..input };
        let to = patch(&decide(&input, nodes, now()), "n").map(|p| p.to);
        (to == Some(NodeState::Draining), could_undo(&input, nodes, now()))
    };
    let base = || input(&spec, &existing);
    assert_eq!(undone(base()), (true, true), "nothing holds it");
    let paused = spec_with("rollout: {undo: true, soakTime: 1h, paused: true}");
    assert_eq!(undone(input(&paused, &existing)), (false, false), "rollout.paused");
    assert_eq!(undone(PoolInput { paused_by_annotation: true, ..base() }), (false, false), "kubectl winpool pause");
    assert_eq!(undone(PoolInput { clock_skew: Some(jiff::SignedDuration::from_mins(5)), ..base() }), (false, false), "a skewed clock");
    let trip = crate::decision::breaker::BadUpdate { update: "KB5044281".into(), code: "0x800F0922".into(), nodes: vec![] };
    let by_breaker = PoolInput { paused_by_annotation: true, bad_update: Some(&trip), ..base() };
    assert_eq!(undone(by_breaker), (true, true), "the breaker's pause");
    let windowed = spec_with("rollout: {undo: true, soakTime: 1h, maintenanceWindows: [{days: [Sat], start: '02:00', end: '03:00'}]}");
    let closed = input(&windowed, &existing);
    assert!(!decide(&closed, &[fresh("m")], now()).window_open, "the window is closed now");
    assert_eq!(undone(closed), (true, true), "outside the maintenance window");
}

/// Any other start of a node that was undone installs: the mark goes.
#[test]
fn a_retried_undone_node_is_started_to_install_not_to_undo() {
    let spec = spec_with("rollout: {undo: true, soakTime: 1h}");
    let node = NodeView { undo: Some("win-pods".into()), ..fresh("n") };
    let plan = run(&spec, &[node]);
    let p = patch(&plan, "n").expect("a start");
    assert_eq!(p.to, NodeState::Draining);
    assert_eq!(p.annotations.get(names::ANN_UNDO), Some(&None));
}
