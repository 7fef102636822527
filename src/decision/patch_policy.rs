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

use std::borrow::Cow;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::report::OfferReport;
use crate::api::{PatchPolicy, ResolvedPatch, WindowsNodePool, WindowsNodePoolSpec, conditions};
use crate::decision::versions::WindowsBuild;

/// Why the pool's patch level is or is not what its nodes are offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
pub enum PatchReason {
    /// The nodes are offered the update resolved (or, updated, nothing newer).
    Resolved,
    /// No member's agent has searched yet.
    NotSearched,
    /// Nodes are offered different updates: nothing moves.
    OffersDisagree,
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
/// taken only when every member offered one is offered the same and it is
/// at least `minAge` old; otherwise the previous resolution stands.
pub fn resolve(policy: &PatchPolicy, previous: Option<&ResolvedPatch>, members: &[MemberPatch<'_>], now: Timestamp) -> PatchResolution {
    let searched: Vec<(&MemberPatch<'_>, &OfferReport)> = members.iter().filter_map(|m| Some((m, m.offer?))).collect();
    let offered: Vec<(&MemberPatch<'_>, &OfferReport, &str)> =
        searched.iter().filter_map(|(m, o)| Some((*m, *o, o.kb.as_deref()?))).collect();
    let keep = |reason, message: String, eligible_in| PatchResolution { patch: previous.cloned(), reason, message, eligible_in };
    if searched.is_empty() && previous.is_none() {
        return keep(PatchReason::NotSearched, "no node's agent has searched its update source yet".into(), None);
    }
    let mut kbs: Vec<&str> = offered.iter().map(|(_, _, kb)| *kb).collect();
    kbs.sort_unstable();
    kbs.dedup();
    let kb = match kbs.as_slice() {
        [] => return learned(previous, members),
        [one] => *one,
        _ => {
            let by_kb = kbs
                .iter()
                .map(|kb| {
                    let nodes: Vec<&str> = offered.iter().filter(|(_, _, k)| k == kb).map(|(m, _, _)| m.node).collect();
                    format!("{kb} to {}", nodes.join(", "))
                })
                .collect::<Vec<_>>()
                .join("; ");
            return keep(
                PatchReason::OffersDisagree,
                format!(
                    "the update source offers different cumulative updates: {by_kb}; the patch level stays until they agree (check the nodes' WSUS target groups)"
                ),
                None,
            );
        }
    };
    if previous.is_some_and(|p| p.kb == kb) {
        return learned(previous, members);
    }
    let first = offered.iter().find(|(_, _, k)| *k == kb).map(|(_, o, _)| *o).expect("a member offered it");
    let min_age = crate::decision::rollout::parse_duration(&policy.min_age).unwrap_or_default();
    // minAge 0s takes the update whatever its date says (a WSUS whose clock
    // runs ahead of the cluster's would otherwise hold it).
    if let Some(published) = first.published.as_ref().map(|t| t.0).filter(|_| !min_age.is_zero()) {
        let eligible = published.checked_add(jiff::SignedDuration::try_from(min_age).unwrap_or_default()).unwrap_or(published);
        if eligible > now {
            let wait = Duration::try_from(now.duration_until(eligible)).unwrap_or_default();
            return keep(
                PatchReason::TooNew,
                format!(
                    "{kb} was published {published}; os.patchPolicy.minAge {} lets the pool roll to it from {eligible}",
                    policy.min_age
                ),
                Some(wait),
            );
        }
    }
    let newest_offered = offered.iter().filter(|(_, _, k)| *k == kb).filter_map(|(m, _, _)| m.kernel).max_by_key(|b| b.revision);
    let Some(newest) = newest_offered else {
        return keep(PatchReason::NotSearched, format!("no node offered {kb} reports its build yet"), None);
    };
    let level = WindowsBuild { revision: Some(newest.revision.unwrap_or(0) + 1), ..newest };
    let patch = ResolvedPatch {
        kb: kb.to_string(),
        title: first.title.clone(),
        published: first.published.clone(),
        patch_level: level.to_string(),
        build: None,
        resolved_at: Time(now),
    };
    let message = format!(
        "{kb} is offered; the pool rolls to {level} (one revision above the newest build offered it) and records the build it lands on"
    );
    PatchResolution { patch: Some(patch), reason: PatchReason::Resolved, message, eligible_in: None }
}

/// The standing resolution, with the build its updated nodes run.
fn learned(previous: Option<&ResolvedPatch>, members: &[MemberPatch<'_>]) -> PatchResolution {
    let Some(p) = previous else {
        return PatchResolution {
            patch: None,
            reason: PatchReason::Resolved,
            message: "no node is offered a cumulative update newer than the build it runs".into(),
            eligible_in: None,
        };
    };
    let mut builds: Vec<(String, &str)> =
        members.iter().filter(|m| m.updated).filter_map(|m| Some((m.kernel.as_ref()?.to_string(), m.node))).collect();
    builds.sort();
    let mut distinct: Vec<&str> = builds.iter().map(|(b, _)| b.as_str()).collect();
    distinct.dedup();
    let mut patch = p.clone();
    match distinct.as_slice() {
        [] => PatchResolution {
            message: format!("{} is resolved to patch level {}; no node updated for it yet", p.kb, p.patch_level),
            patch: Some(patch),
            reason: PatchReason::Resolved,
            eligible_in: None,
        },
        [one] => {
            patch.build = Some(one.to_string());
            PatchResolution {
                message: format!("{} is resolved: the nodes updated for it run {one}", p.kb),
                patch: Some(patch),
                reason: PatchReason::Resolved,
                eligible_in: None,
            }
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
    }
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
