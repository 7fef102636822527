//! Whether the rollout may start nodes this round, and which it starts.

use super::settings::{Decided, RoundSettings};
use super::{Hold, NodePatch, NodeState, NodeView, Soak, StagingState, kernel_satisfies, max_unavailable, verify_config};
use crate::api::names;
use crate::decision::gates::{self, Seen};

/// Why no node may start this round, if something holds the rollout.
pub(super) fn hold(s: &RoundSettings<'_>, r: &Decided<'_>) -> Option<Hold> {
    let failed = r.count(|st| st == NodeState::Failed);
    let max_failed = s.spec.rollout.max_failed_nodes;
    if let Some(by) = s.clock_skew {
        return Some(Hold::ClockSkew { by });
    }
    if s.spec.rollout.paused {
        return Some(Hold::PausedBySpec);
    }
    // Before the annotation: the breaker's pause says which update and code.
    if let Some(b) = &s.bad_update {
        return Some(Hold::BadUpdate((*b).clone()));
    }
    if s.paused_by_annotation {
        return Some(Hold::PausedByAnnotation);
    }
    if max_failed > 0 && failed >= max_failed as usize {
        return Some(Hold::FailureLimit { failed, limit: max_failed });
    }
    if let Some(r) = s.ring {
        return Some(Hold::Ring(r.clone()));
    }
    match (&s.rules.schedule, s.window) {
        _ if s.window_open() => {}
        (Err(e), _) => return Some(Hold::BadWindow(e.to_string())),
        (_, None) => return Some(Hold::NoWindowAhead),
        (_, Some(w)) => return Some(Hold::OutsideWindow { opens: w.start }),
    }
    if let Some(g) = gates::first_closed(s.gates) {
        return Some(Hold::HealthGateClosed { gate: g.gate.clone(), seen: g.seen.clone() });
    }
    s.hns_wait.map(Hold::HnsBacklog)
}

/// Nodes out of service anyway (NotReady, cordoned by someone else, or kept
/// cordoned by winpool while not in flight: Failed mid-install or with
/// onNodeFailure KeepCordoned, and such a node retried) count against
/// maxUnavailable like nodes in flight, and are rolled first: rolling them
/// costs no extra capacity.
pub fn out_of_service(n: &NodeView) -> bool {
    !n.ready || ((n.unschedulable || n.unpatched_taint) && (!n.cordoned_by_winpool || !n.state.in_flight()))
}

/// Nodes out of service that are not in flight this round.
pub(super) fn idle_out_of_service(r: &Decided<'_>, sorted: &[&NodeView]) -> usize {
    sorted.iter().filter(|n| r.states.get(n.name.as_str()).is_some_and(|st| !st.in_flight()) && out_of_service(n)).count()
}

/// The order in which Pending nodes start: nodes put back for a
/// PodDisruptionBudget last (the rest of the wave first), the ones out of
/// service first, then by name. `start_nodes` starts them in this order,
/// and `kubectl winpool plan` shows it, so the two cannot disagree.
pub fn start_order<'n>(pending: impl IntoIterator<Item = &'n NodeView>) -> Vec<&'n NodeView> {
    let mut order: Vec<&'n NodeView> = pending.into_iter().collect();
    order.sort_by_key(|n| (n.drain_blocked_by.is_some(), !out_of_service(n), n.name.as_str()));
    order
}

/// Ready nodes Updated less than rollout.soakTime ago (this round's included):
/// until then they count against maxUnavailable. A NotReady one is out of
/// service and counts anyway.
pub(super) fn soaking(s: &RoundSettings<'_>, r: &Decided<'_>, sorted: &[&NodeView]) -> Option<Soak> {
    if s.rules.soak_time.is_zero() {
        return None;
    }
    let soak = jiff::SignedDuration::try_from(s.rules.soak_time).ok()?;
    let ends: Vec<jiff::Timestamp> = sorted
        .iter()
        .filter(|n| n.ready && r.states.get(n.name.as_str()) == Some(&NodeState::Updated))
        .filter_map(|n| {
            // Updated in an earlier round: since its state-since; in this one: now.
            let updated_at = if n.state == NodeState::Updated.into() { n.state_since? } else { s.now };
            let ends = updated_at.checked_add(soak).ok()?;
            (ends > s.now).then_some(ends)
        })
        .collect();
    let first_ends = *ends.iter().min()?;
    Some(Soak { nodes: ends.len(), first_ends })
}

/// Start Pending nodes, the ones out of service first, up to maxUnavailable
/// (less the nodes still soaking), except those a node-scope health gate
/// holds. When such a gate left no node to start, it holds the rollout.
pub(super) fn start_nodes<'n>(s: &RoundSettings<'_>, r: &mut Decided<'n>, sorted: &[&'n NodeView], soaking: usize) -> Option<Hold> {
    let limit = max_unavailable(&s.spec.rollout.max_unavailable, sorted.len());
    let mut in_flight = r.count(NodeState::in_flight) + soaking;
    let mut unavailable_idle = idle_out_of_service(r, sorted);
    let candidates = start_order(
        sorted
            .iter()
            .copied()
            .filter(|n| r.states.get(n.name.as_str()) == Some(&NodeState::Pending))
            .filter(|n| r.blocked.get(&n.name).is_none_or(|(_, retry)| retry.is_none()))
            .filter(|n| !r.runtime_refused.contains_key(&n.name) && !r.preflight_held.contains_key(&n.name))
            .filter(|n| !r.held.contains(&n.name)),
    );
    let mut zones = s.spec.rollout.max_unavailable_per_zone.as_ref().map(|per| ZoneBudget::new(per, r, sorted));
    // Every start counts against the install's bound, a node already down too.
    // Pools that have waited longer for a slot keep one each: a pool whose
    // node just finished reconciles at once and would otherwise take the
    // slot back before they look again.
    let mut cluster_room = s.cluster.map(|c| c.limit.saturating_sub(c.elsewhere + c.waiting_ahead + in_flight - soaking));
    let (mut started, mut gated, mut cluster_full) = (0, Vec::new(), false);
    for n in candidates {
        if cluster_room == Some(0) {
            cluster_full = true;
            break;
        }
        let idle_down = out_of_service(n);
        // Starting a node that is already down adds no unavailability, but
        // in-flight work stays bounded by the limit either way.
        let budget_used = if idle_down { in_flight } else { in_flight + unavailable_idle };
        if budget_used >= limit {
            if !idle_down {
                break;
            }
            continue;
        }
        // A node that is already down costs its zone nothing more either.
        if !idle_down && zones.as_ref().is_some_and(|z| !z.has_room(n)) {
            continue;
        }
        if let Some(g) = gates::holding_node(s.gates, &n.name) {
            gated.push((n.name.as_str(), g));
            continue;
        }
        // The node may already have a patch this round (joining the pool): one write.
        let mut p = r
            .patches
            .iter()
            .position(|p| p.node == n.name)
            .map(|i| r.patches.remove(i))
            .unwrap_or_else(|| NodePatch::new(&n.name, NodeState::Pending, NodeState::Pending, ""));
        let next = start(s, &mut p, n);
        r.states.insert(&n.name, next);
        if next == NodeState::Draining {
            // Its pods are observed next round; nothing is evicted before the cordon lands.
            r.wait(&n.name, "cordoned; drain starts next round");
        }
        r.patches.push(p);
        in_flight += 1;
        started += 1;
        cluster_room = cluster_room.map(|room| room - 1);
        if let (false, Some(z)) = (idle_down, zones.as_mut()) {
            z.take(n);
        }
        if idle_down {
            unavailable_idle -= 1;
        }
    }
    if started > 0 {
        return None;
    }
    // Only a node the bound kept from starting makes the pool wait for a
    // slot: a pool waiting says so, and keeps a slot from pools after it.
    match s.cluster {
        Some(c) if cluster_full && gated.is_empty() => Some(Hold::ClusterLimit(c)),
        _ => gate_hold(&gated),
    }
}

/// `rollout.maxUnavailablePerZone`: per domain (a node's `zone`; nodes
/// without one form their own), the nodes it may have out at once and those
/// it has (in flight, or out of service while idle).
struct ZoneBudget<'n> {
    limit: std::collections::HashMap<&'n str, usize>,
    used: std::collections::HashMap<&'n str, usize>,
}

impl<'n> ZoneBudget<'n> {
    fn new(per_zone: &k8s_openapi::apimachinery::pkg::util::intstr::IntOrString, r: &Decided<'_>, sorted: &[&'n NodeView]) -> Self {
        let zone = |n: &'n NodeView| n.zone.as_deref().unwrap_or_default();
        let mut size = std::collections::HashMap::<&str, usize>::new();
        let mut used = std::collections::HashMap::new();
        for n in sorted {
            *size.entry(zone(n)).or_default() += 1;
            if r.states.get(n.name.as_str()).is_some_and(|st| st.in_flight() || out_of_service(n)) {
                *used.entry(zone(n)).or_default() += 1;
            }
        }
        let limit = size.into_iter().map(|(z, total)| (z, max_unavailable(per_zone, total))).collect();
        ZoneBudget { limit, used }
    }

    fn has_room(&self, n: &NodeView) -> bool {
        let z = n.zone.as_deref().unwrap_or_default();
        self.used.get(z).copied().unwrap_or(0) < self.limit.get(z).copied().unwrap_or(1)
    }

    fn take(&mut self, n: &'n NodeView) {
        *self.used.entry(n.zone.as_deref().unwrap_or_default()).or_default() += 1;
    }
}

/// The hold of the first node-scope gate that kept every startable node
/// back, with what it saw on the pool's nodes it held (not elsewhere).
fn gate_hold(gated: &[(&str, &gates::GateResult)]) -> Option<Hold> {
    let (_, first) = gated.first()?;
    let Seen::PodsOnNodes(on) = &first.seen else { return None };
    let held = on.iter().filter(|(node, _)| gated.iter().any(|(n, g)| n == node && g.gate == first.gate));
    Some(Hold::HealthGateClosed { gate: first.gate.clone(), seen: Seen::PodsOnNodes(held.map(|(k, v)| (k.clone(), v.clone())).collect()) })
}

fn hotpatch_start(s: &RoundSettings<'_>, n: &NodeView) -> bool {
    hotpatchable(s.spec, &s.rev, n)
}

/// Whether the node's update of revision `rev` may be installed in service:
/// the pool takes hotpatches, the agent staged this revision's update and
/// Windows Update says it needs no reboot, and the OS patch is all the node
/// lacks (a new containerd, CNI or CSI Proxy is drained for as always).
pub fn hotpatchable(spec: &crate::api::WindowsNodePoolSpec, rev: &str, n: &NodeView) -> bool {
    let rollout = &spec.rollout;
    if !rollout.hotpatch || !rollout.staging {
        return false;
    }
    let staged = n.staging.as_ref().is_some_and(|st| st.revision == rev && st.state == StagingState::Staged && st.reboot_free);
    // As the node would be with the update in: the build an earlier
    // reboot-free success read is not this update's.
    let patched =
        NodeView { kernel_version: Some(spec.os.patch_level.clone()), apply_no_reboot: false, apply_host_build: None, ..n.clone() };
    staged && verify_config(spec, &patched).is_ok()
}

/// The patch that starts one node's update; returns the state it enters.
fn start(s: &RoundSettings<'_>, p: &mut NodePatch, n: &NodeView) -> NodeState {
    let (rev, now) = (s.rev.as_str(), s.now);
    if n.pool_label.as_deref() != Some(s.pool) {
        p.label(names::LABEL_POOL, Some(s.pool));
    }
    p.unless_changed_since = n.resource_version.clone();
    p.ann(names::ANN_TARGET_REVISION, Some(rev))
        .ann(names::ANN_STARTED_AT, Some(&now.to_string()))
        .ann(names::ANN_INSTALL_BUDGET, Some(&format!("{}s", s.install_budget().as_secs())))
        .ann(names::ANN_FAILURE_REASON, None)
        .ann(names::ANN_FAILURE_MESSAGE, None);
    super::patch::not_an_undo(p, n);
    // A retry soon after being put back for a budget carries on its drain
    // (drain.timeout counts from the first refusal); after a long wait
    // (paused, a new revision) it starts afresh.
    if n.drain_blocked_by.is_some() && s.since(n.state_since) > s.rules.drain_timeout {
        p.ann(names::ANN_DRAIN_BLOCKED_BY, None).ann(names::ANN_DRAIN_BLOCKED_SINCE, None);
    }
    // The kubelet and agent already report the target configuration (a node built
    // from the right image, or a revision that changed nothing this node lacks):
    // the agent only has to confirm, so the node keeps serving — no cordon, no drain.
    let at_target = verify_config(s.spec, n).is_ok();
    // A hotpatch installs in memory: the node keeps serving, and no reboot
    // is waited for (should it ask for one after all, its agent waits and
    // the node is drained then: node.rs).
    let hotpatch = !at_target && hotpatch_start(s, n);
    if hotpatch {
        p.ann(names::ANN_HOTPATCH, Some("true"));
    } else if n.hotpatch {
        p.ann(names::ANN_HOTPATCH, None);
    }
    // An update below the patch level ends in a reboot: remember the boot it
    // started from, so that only a new bootID counts as having rebooted. Not
    // for one Windows Update says needs none (a hotpatch on an enrolled node,
    // drained or not): no reboot would come to wait for.
    let below_patch_level = !kernel_satisfies(n, s.rules.target_build.as_ref());
    let reboot_free = n.staging.as_ref().is_some_and(|st| st.revision == s.rev && st.state == StagingState::Staged && st.reboot_free);
    if let (true, Some(boot)) = (below_patch_level && !at_target && !reboot_free, n.boot_id.as_deref()) {
        p.ann(names::ANN_BOOT_ID, Some(boot));
    }
    if !n.unschedulable && !at_target && !hotpatch {
        p.unschedulable = Some(true);
        p.ann(names::ANN_CORDONED_BY_WINPOOL, Some("true"));
    }
    // Drained for this revision and kept under winpool's cordon since: no
    // pod can have landed. One uncordoned since (a failure that lifted the
    // cordon, a person) or cordoned by someone else is drained again.
    let already_drained = n.drained_revision.as_deref() == Some(rev) && n.unschedulable && n.cordoned_by_winpool;
    if at_target {
        p.label(names::LABEL_REVISION, Some(rev)).state(NodeState::Applying, now);
        p.reason = format!("already at the target configuration; agent revision {rev} confirms it (no cordon, no drain)");
        NodeState::Applying
    } else if hotpatch {
        p.label(names::LABEL_REVISION, Some(rev)).state(NodeState::Applying, now);
        p.reason = format!("hotpatch: agent revision {rev} installs it in service (no cordon, no drain, no reboot)");
        NodeState::Applying
    } else if s.spec.rollout.drain.enabled && !already_drained {
        // A drain of this revision before the node was uncordoned is void.
        if n.drained_revision.is_some() {
            p.ann(names::ANN_DRAINED_REVISION, None);
        }
        p.state(NodeState::Draining, now);
        p.reason = format!("cordoned; draining for revision {rev}");
        NodeState::Draining
    } else {
        p.label(names::LABEL_REVISION, Some(rev)).state(NodeState::Applying, now);
        p.reason = format!("cordoned; agent revision {rev} scheduled (no drain)");
        NodeState::Applying
    }
}
