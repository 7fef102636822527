//! Events: fresh ones never folded into a series, a node's failure on the pool and the Node.

use crate::api::EventReason;
use crate::decision::round::node_ref;
use jiff::Timestamp;
use kube::api::{Api, ObjectMeta};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use tracing::warn;

use super::Context;
use crate::api::WindowsNodePool;
use crate::decision::rollout::{NodePatch, NodeState};

/// The most an Event's note may hold: the API server refuses a longer one
/// (422, "can have at most 1024 characters", counted in bytes), and the
/// Event is lost. A failure message naming several nodes reaches it.
const NOTE_LIMIT: usize = 1024;

/// The note cut to [`NOTE_LIMIT`] bytes at a character boundary, saying it was.
fn bounded(mut ev: Event) -> Event {
    if let Some(note) = ev.note.as_mut().filter(|n| n.len() > NOTE_LIMIT) {
        const MORE: &str = " …";
        let mut end = NOTE_LIMIT - MORE.len();
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push_str(MORE);
    }
    ev
}

impl Context {
    /// Publish an Event that is never folded into an earlier one: kube's recorder
    /// keys a series on (reason, regarding, related), not the note, so a second
    /// batch Event would only bump the first one's count and keep its note. It
    /// also keeps nothing in memory.
    pub(super) async fn publish_fresh(&self, pool: &WindowsNodePool, ev: Event) {
        let ev = bounded(ev);
        let now = Timestamp::now();
        let name = pool.name_any();
        let event = k8s_openapi::api::events::v1::Event {
            // The reason keeps two Events of one round apart even within a clock tick.
            metadata: ObjectMeta {
                name: Some(format!("{name}.{}.{:x}", ev.reason.to_lowercase(), now.as_nanosecond())),
                ..Default::default()
            },
            event_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(now)),
            action: Some(ev.action),
            reason: Some(ev.reason),
            note: ev.note,
            regarding: Some(pool.object_ref(&())),
            related: ev.secondary,
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(self.reporter.instance.clone().unwrap_or_else(|| self.reporter.controller.clone())),
            type_: Some(match ev.type_ {
                EventType::Normal => "Normal".into(),
                EventType::Warning => "Warning".into(),
            }),
            ..Default::default()
        };
        // Like the recorder: the API server takes an Event about a cluster-scoped
        // object only in "default" or "kube-system" (see role-events.yaml).
        let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(self.client.clone(), "default");
        if let Err(e) = api.create(&crate::api::post_params(), &event).await {
            warn!(pool = %name, error = %e, "could not publish event");
        }
    }

    pub(super) async fn publish(&self, pool: &WindowsNodePool, ev: Event) {
        if let Err(e) = self.recorder.publish(&bounded(ev), &pool.object_ref(&())).await {
            warn!(pool = %pool.name_any(), error = %e, "could not publish event");
        }
    }
}

/// A node that failed gets its own Event, on the pool and on the Node: each
/// failure needs a look. So does a node put back because a
/// PodDisruptionBudget refused its evictions (a person may have to loosen
/// the budget; the rollout tries the node again later). Starts and
/// completions are announced per round ([`crate::decision::status::node_batch_events`]).
pub(super) async fn node_event(ctx: &Context, pool: &WindowsNodePool, p: &NodePatch) {
    let (reason, action) = match (p.from, p.to) {
        (from, NodeState::Failed) if from != NodeState::Failed => (EventReason::NodeFailed, "Rollout"),
        (NodeState::Draining, NodeState::Pending) => (EventReason::DrainBlocked, "Drain"),
        _ => return,
    };
    node_warning(ctx, pool, &p.node, reason, action, format!("{}: {}", p.node, p.reason)).await;
}

/// A Warning about one node, on the pool and on the Node.
pub(super) async fn node_warning(ctx: &Context, pool: &WindowsNodePool, node: &str, reason: EventReason, action: &str, note: String) {
    // The node is the Event's related object: the recorder folds Events with the same
    // reason, regarding and related object into one series, so without it every
    // node's Event would be counted under the first node's note.
    let ev = || Event {
        type_: EventType::Warning,
        reason: reason.as_str().into(),
        note: Some(note.clone()),
        action: action.into(),
        secondary: Some(node_ref(node)),
    };
    ctx.publish(pool, ev()).await;
    if let Err(e) = ctx.recorder.publish(&bounded(ev()), &node_ref(node)).await {
        warn!(node, error = %e, "could not publish event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(n: &str) -> Event {
        Event { type_: EventType::Warning, reason: "R".into(), note: Some(n.into()), action: "A".into(), secondary: None }
    }

    #[test]
    fn a_note_past_the_api_servers_limit_is_cut_at_a_character_and_says_so() {
        let short = "5 failed nodes: a, b";
        assert_eq!(bounded(note(short)).note.as_deref(), Some(short), "a note within the limit is kept whole");
        let long = "é".repeat(700); // 1,400 bytes, two per character
        let cut = bounded(note(&long)).note.unwrap();
        assert!(cut.len() <= NOTE_LIMIT, "{} bytes", cut.len());
        assert!(cut.ends_with(" …") && cut.starts_with("éé"), "{cut}");
        assert_eq!(bounded(note(&"x".repeat(NOTE_LIMIT))).note.unwrap().len(), NOTE_LIMIT, "exactly the limit is kept whole");
    }
}
