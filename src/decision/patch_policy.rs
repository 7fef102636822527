//! `os.patchPolicy`: a patch level that follows what the nodes' update source
//! offers. Pure: the members' offers (each agent's own search, the install's
//! own selection) in, the pool's resolution and its condition out.
//!
//! Windows Update names no build before an update is installed, only its KB,
//! title and publication time. So the resolution is the KB every node
//! offered one agrees on, and the patch level the pool rolls to for it is one
//! revision above the newest build it was offered to: every node offered it
//! runs below that, and the update (cumulative) lands at or above it. The
//! update's own build shows once a node updated for it runs it, and is
//! recorded; nodes that land on different builds are a condition, never a
//! guess, and so are offers that disagree.
//!
//! No single node moves a pool of several: each offer is its agent's word and
//! each build its kubelet's, and whoever holds one node's credentials can
//! write either. So an update is taken once two nodes are offered it, the
//! level follows the newest build two of them run (a build one node alone
//! claims above the others is named, not followed), minAge counts from the
//! latest publication any of them reports, and the build landed on is
//! recorded once two updated nodes run it. A node can still hold its pool
//! (an offer that disagrees), named in the condition. A pool of one node
//! resolves from that node: it has no other to agree with, and what it
//! claims moves only itself.

use std::borrow::Cow;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::report::OfferReport;
use crate::api::{PatchPolicy, ResolvedPatch, WindowsNodePool, WindowsNodePoolSpec, conditions};
use crate::decision::versions::WindowsBuild;

/// Why the pool's patch level is or is not what its nodes are offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr, strum::EnumIter)]
pub enum PatchReason {
    /// The nodes are offered the update resolved (or, updated, nothing newer).
    Resolved,
    /// No member's agent has searched yet.
    NotSearched,
    /// Nodes are offered different updates: nothing moves.
    OffersDisagree,
    /// One node alone, in a pool of more, is offered the update or reports
    /// the build the level would follow: nothing moves until a second does.
    Unconfirmed,
    /// The newest update offered is younger than minAge.
    TooNew,
    /// Nodes updated for the resolution run different builds.
    BuildsDisagree,
}

/// One member as the patch policy reads it.
pub struct MemberPatch<'a> {
    pub node: &'a str,
    pub offer: Option<&'a OfferReport>,
    pub kernel: Option<WindowsBuild>,
    /// Its agent succeeded for the revision the pool rolls to now.
    pub updated: bool,
}

/// The round's resolution: what `status.resolvedPatch` and the
/// `PatchResolved` condition say, and when to look again.
#[derive(Clone, Debug, PartialEq)]
pub struct PatchResolution {
    pub patch: Option<ResolvedPatch>,
    pub reason: PatchReason,
    pub message: String,
    /// When an offer held by minAge becomes eligible.
    pub eligible_in: Option<Duration>,
}

/// Resolve the pool's patch level from its members' offers. A new KB is
/// taken only when every member offered one is offered the same, more than
/// one member is offered it (a pool of one node: that node), and the latest
/// publication any of them reports is at least `minAge` ago; otherwise the
/// previous resolution stands.
pub fn resolve(policy: &PatchPolicy, previous: Option<&ResolvedPatch>, members: &[MemberPatch<'_>], now: Timestamp) -> PatchResolution {
    let keep = |reason, message: String, eligible_in| PatchResolution { patch: previous.cloned(), reason, message, eligible_in };
    if members.iter().all(|m| m.offer.is_none()) && previous.is_none() {
        return keep(PatchReason::NotSearched, "no node's agent has searched its update source yet".into(), None);
    }
    let offered: Vec<(&MemberPatch<'_>, &OfferReport, &str)> =
        members.iter().filter_map(|m| m.offer.and_then(|o| Some((m, o, o.kb.as_deref()?)))).collect();
    let kb = match agreed_kb(&offered) {
        Ok(Some(kb)) => kb,
        Ok(None) => return learned(previous, members),
        Err(message) => return keep(PatchReason::OffersDisagree, message, None),
    };
    if previous.is_some_and(|p| p.kb == kb) {
        return learned(previous, members);
    }
    let agreeing: Vec<(&MemberPatch<'_>, &OfferReport)> = offered.iter().filter(|(_, _, k)| *k == kb).map(|(m, o, _)| (*m, *o)).collect();
    let alone = members.len() == 1;
    if let [(one, _)] = agreeing.as_slice()
        && !alone
    {
        return keep(
            PatchReason::Unconfirmed,
            format!(
                "{kb} is offered to {} alone: the pool takes an update once a second node is offered it (one node's report never moves the pool)",
                one.node
            ),
            None,
        );
    }
    // The latest publication any of them reports: an offer that claims an
    // early date cannot take the update before minAge.
    let (first, published) = agreeing
        .iter()
        .filter_map(|(m, o)| Some((*m, *o, o.published.as_ref()?.0)))
        .max_by_key(|(_, _, t)| *t)
        .map_or((agreeing[0].1, None), |(m, o, t)| (o, Some((m.node, t))));
    if let Some(r) = too_new(policy, kb, published, now, alone) {
        return keep(PatchReason::TooNew, r.0, Some(r.1));
    }
    let level = match level_of(kb, &agreeing, alone) {
        Ok(level) => level,
        Err((reason, message)) => return keep(reason, message, None),
    };
    let patch = ResolvedPatch {
        kb: kb.to_string(),
        title: first.title.clone(),
        published: first.published.clone(),
        patch_level: level.level.to_string(),
        build: None,
        resolved_at: Time(now),
    };
    let r = PatchResolution { patch: Some(patch), reason: PatchReason::Resolved, message: level.message, eligible_in: None };
    name_unconfirmed(r, kb, &level.level, members.iter())
}

/// A node still offered `kb` whose kubelet reports a build at or above the
/// level is never started for it: its build, if real, is one no second node
/// confirmed (or a forgery). Each is named and the condition is False, so a
/// person checks it; the pool rolls on to the level the others confirmed.
fn name_unconfirmed<'m>(
    mut r: PatchResolution,
    kb: &str,
    level: &WindowsBuild,
    members: impl Iterator<Item = &'m MemberPatch<'m>>,
) -> PatchResolution {
    let above: Vec<String> = members
        .filter(|m| m.offer.and_then(|o| o.kb.as_deref()) == Some(kb))
        .filter_map(|m| Some((m.node, m.kernel.filter(|b| b.satisfies(level))?)))
        .map(|(n, b)| format!("{n} reports {b}"))
        .collect();
    if above.is_empty() {
        return r;
    }
    if r.reason == PatchReason::Resolved {
        r.reason = PatchReason::Unconfirmed;
    }
    r.message.push_str(&format!(
        "; {} while offered {kb}: no other node confirms that build, so it does not set the level, and the node is not updated for {kb} \
         (if its build is real, raise os.patchLevel above it)",
        above.join(", ")
    ));
    r
}

/// The one KB the members offered one are offered (None: none is), or the
/// message naming each KB and its nodes.
fn agreed_kb<'a>(offered: &[(&MemberPatch<'_>, &OfferReport, &'a str)]) -> Result<Option<&'a str>, String> {
    let mut kbs: Vec<&str> = offered.iter().map(|(_, _, kb)| *kb).collect();
    kbs.sort_unstable();
    kbs.dedup();
    match kbs.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        _ => {
            let by_kb = kbs
                .iter()
                .map(|kb| {
                    let nodes: Vec<&str> = offered.iter().filter(|(_, _, k)| k == kb).map(|(m, _, _)| m.node).collect();
                    format!("{kb} to {}", nodes.join(", "))
                })
                .collect::<Vec<_>>()
                .join("; ");
            Err(format!(
                "the update source offers different cumulative updates: {by_kb}; the patch level stays until they agree (check the nodes' WSUS target groups)"
            ))
        }
    }
}

/// The message and the wait while `kb`, published (by the latest date a
/// node reports, and that node) then, is younger than minAge. minAge 0s
/// takes the update whatever its date says (a WSUS whose clock runs ahead of
/// the cluster's would otherwise hold it).
fn too_new(
    policy: &PatchPolicy,
    kb: &str,
    published: Option<(&str, Timestamp)>,
    now: Timestamp,
    alone: bool,
) -> Option<(String, Duration)> {
    let min_age = crate::decision::rollout::parse_duration(&policy.min_age).unwrap_or_default();
    let (node, published) = published.filter(|_| !min_age.is_zero())?;
    let eligible = published.checked_add(jiff::SignedDuration::try_from(min_age).unwrap_or_default()).unwrap_or(published);
    if eligible <= now {
        return None;
    }
    let wait = Duration::try_from(now.duration_until(eligible)).unwrap_or_default();
    let by = if alone { String::new() } else { format!(" (the latest date the nodes offered it report: {node}'s)") };
    Some((
        format!("{kb} was published {published}{by}; os.patchPolicy.minAge {} lets the pool roll to it from {eligible}", policy.min_age),
        wait,
    ))
}

/// The patch level a resolution rolls to, and what its message says.
struct Level {
    level: WindowsBuild,
    message: String,
}

/// One revision above the newest build that at least two of the nodes
/// offered `kb` run (a pool of one node: its own): every node offered it but
/// one runs below that, and a cumulative update lands at or above it. A node
/// alone above it is never followed: its build is its kubelet's word
/// ([`name_unconfirmed`] names it).
fn level_of(kb: &str, agreeing: &[(&MemberPatch<'_>, &OfferReport)], alone: bool) -> Result<Level, (PatchReason, String)> {
    let mut builds: Vec<(WindowsBuild, &str)> = agreeing.iter().filter_map(|(m, _)| Some((m.kernel?, m.node))).collect();
    builds.sort_by(|a, b| b.cmp(a));
    let confirmed = match builds.as_slice() {
        [] => return Err((PatchReason::NotSearched, format!("no node offered {kb} reports its build yet"))),
        [(_, node)] if !alone => {
            return Err((PatchReason::Unconfirmed, format!("of the nodes offered {kb}, only {node} reports its build yet")));
        }
        [only] => only.0,
        [_, second, ..] => second.0,
    };
    let level = WindowsBuild { revision: Some(confirmed.revision.unwrap_or(0) + 1), ..confirmed };
    let message = if alone {
        format!(
            "{kb} is offered to the pool's only node; the pool rolls to {level} (one revision above the build it runs) and records the build it lands on"
        )
    } else {
        format!(
            "{kb} is offered; the pool rolls to {level} (one revision above the newest build two nodes offered it run) and records the build it lands on"
        )
    };
    Ok(Level { level, message })
}

/// The standing resolution, with the build its updated nodes run: recorded
/// once two of them run it (a pool of one node: its own), as the level is.
fn learned(previous: Option<&ResolvedPatch>, members: &[MemberPatch<'_>]) -> PatchResolution {
    let Some(p) = previous else {
        return PatchResolution {
            patch: None,
            reason: PatchReason::Resolved,
            message: format!("no node is offered a cumulative update newer than the build it runs{}", passed_over(members)),
            eligible_in: None,
        };
    };
    let mut builds: Vec<(String, &str)> =
        members.iter().filter(|m| m.updated).filter_map(|m| Some((m.kernel.as_ref()?.to_string(), m.node))).collect();
    builds.sort();
    let mut distinct: Vec<&str> = builds.iter().map(|(b, _)| b.as_str()).collect();
    distinct.dedup();
    let mut patch = p.clone();
    let resolved = |message: String, patch: ResolvedPatch| PatchResolution {
        message,
        patch: Some(patch),
        reason: PatchReason::Resolved,
        eligible_in: None,
    };
    let r = match (distinct.as_slice(), builds.as_slice()) {
        ([], _) => resolved(format!("{} is resolved to patch level {}; no node updated for it yet", p.kb, p.patch_level), patch),
        ([one], [(_, node)]) if members.len() > 1 => resolved(
            format!(
                "{} is resolved to patch level {}; {node}, the first node updated for it, runs {one}: the build is recorded once a second node runs it",
                p.kb, p.patch_level
            ),
            patch,
        ),
        ([one], _) => {
            patch.build = Some(one.to_string());
            resolved(format!("{} is resolved: the nodes updated for it run {one}", p.kb), patch)
        }
        _ => {
            let listed = builds.iter().map(|(b, n)| format!("{n} on {b}")).collect::<Vec<_>>().join(", ");
            PatchResolution {
                message: format!("the nodes updated for {} run different builds: {listed}", p.kb),
                patch: Some(patch),
                reason: PatchReason::BuildsDisagree,
                eligible_in: None,
            }
        }
    };
    match p.patch_level.parse::<WindowsBuild>() {
        // A node updated for it still shows the offer of its search before
        // the install until its next search: it was started, not passed over.
        Ok(level) => name_unconfirmed(r, &p.kb, &level, members.iter().filter(|m| !m.updated)),
        Err(_) => r,
    }
}

/// "; not the OS's cumulative update, so never a patch level: KB…: title
/// (offered to a, b)": what the agents' searches passed over (.NET
/// Framework's update, filed under the OS's classification), so a pool
/// offered only that says why it does not move.
fn passed_over(members: &[MemberPatch<'_>]) -> String {
    let mut by_update: std::collections::BTreeMap<&str, Vec<&str>> = std::collections::BTreeMap::new();
    for m in members {
        for u in m.offer.map(|o| o.passed_over.as_slice()).unwrap_or_default() {
            by_update.entry(u.as_str()).or_default().push(m.node);
        }
    }
    if by_update.is_empty() {
        return String::new();
    }
    let listed: Vec<String> = by_update.iter().map(|(u, nodes)| format!("{u} (offered to {})", nodes.join(", "))).collect();
    format!("; not the OS's cumulative update, so never a patch level: {}", listed.join("; "))
}

/// The spec the round decides by: `os.patchLevel` raised to the resolved
/// patch level (never lowered: it stays the floor).
pub fn effective_spec<'s>(spec: &'s WindowsNodePoolSpec, patch: Option<&ResolvedPatch>) -> Cow<'s, WindowsNodePoolSpec> {
    let Some(p) = patch.filter(|_| spec.os.patch_policy.is_some()) else { return Cow::Borrowed(spec) };
    let (Ok(floor), Ok(resolved)) = (spec.os.patch_level.parse::<WindowsBuild>(), p.patch_level.parse::<WindowsBuild>()) else {
        return Cow::Borrowed(spec);
    };
    if !resolved.same_release(&floor) || floor.satisfies(&resolved) {
        return Cow::Borrowed(spec);
    }
    let mut effective = spec.clone();
    effective.os.patch_level = p.patch_level.clone();
    Cow::Owned(effective)
}

/// The pool as the round decides by it ([`effective_spec`]).
pub fn effective_pool<'p>(pool: &'p WindowsNodePool, patch: Option<&ResolvedPatch>) -> Cow<'p, WindowsNodePool> {
    match effective_spec(&pool.spec, patch) {
        Cow::Borrowed(_) => Cow::Borrowed(pool),
        Cow::Owned(spec) => Cow::Owned(WindowsNodePool { spec, ..pool.clone() }),
    }
}

/// The pool as its last round decided by it: with the resolution its status
/// holds (what `kubectl winpool` reads, which resolves nothing itself).
pub fn as_resolved(pool: &WindowsNodePool) -> Cow<'_, WindowsNodePool> {
    effective_pool(pool, pool.status.as_ref().and_then(|s| s.resolved_patch.as_ref()))
}

/// The `PatchResolved` condition of a resolution.
pub fn condition(r: &PatchResolution) -> Condition {
    Condition {
        type_: conditions::PATCH_RESOLVED.into(),
        status: if r.reason == PatchReason::Resolved { "True" } else { "False" }.into(),
        reason: <&str>::from(r.reason).into(),
        message: r.message.clone(),
        last_transition_time: Time(Timestamp::UNIX_EPOCH),
        observed_generation: None,
    }
}

#[cfg(test)]
mod tests;
