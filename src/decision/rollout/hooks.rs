//! `rollout.hooks`: a Job before a node's drain and one after its update,
//! each a gate the node passes only once its Job succeeded. The shell creates
//! the Jobs the plan names ([`HookStart`]) and reads their outcome back
//! ([`HookRun`] on the [`NodeView`]); the builder is `builders::hook_job`.

use jiff::Timestamp;

use super::settings::{Decided, RoundSettings};
use super::{FailureReason, NodePatch, NodeState, NodeView, fail, release_cordon};
use crate::api::{Hook, HookFailure, names};

/// Which of a pool's hooks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HookKind {
    PreDrain,
    PostUpdate,
}

impl HookKind {
    /// Its name on the Job (label `winpool.dev/hook`, part of the Job's name).
    pub fn as_str(self) -> &'static str {
        match self {
            HookKind::PreDrain => "pre-drain",
            HookKind::PostUpdate => "post-update",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [HookKind::PreDrain, HookKind::PostUpdate].into_iter().find(|k| k.as_str() == s)
    }

    /// Its field under `rollout.hooks`, as people write it.
    pub fn field(self) -> &'static str {
        match self {
            HookKind::PreDrain => "preDrain",
            HookKind::PostUpdate => "postUpdate",
        }
    }

    pub fn of(self, spec: &crate::api::WindowsNodePoolSpec) -> Option<&Hook> {
        let hooks = spec.rollout.hooks.as_ref()?;
        match self {
            HookKind::PreDrain => hooks.pre_drain.as_ref(),
            HookKind::PostUpdate => hooks.post_update.as_ref(),
        }
    }
}

/// A hook's Job for a node's current start, as the shell found it.
#[derive(Clone, Debug, PartialEq)]
pub struct HookRun {
    pub kind: HookKind,
    pub job: String,
    pub created: Option<Timestamp>,
    pub outcome: HookOutcome,
}

#[derive(Clone, Debug, PartialEq)]
pub enum HookOutcome {
    Running,
    /// Complete; when, if the Job says.
    Succeeded(Option<Timestamp>),
    /// Failed: the Job's reason and message.
    Failed(String),
}

/// A hook Job this round creates: for this node's start (its
/// `winpool.dev/started-at`), so a later start of the node runs it again.
#[derive(Clone, Debug, PartialEq)]
pub struct HookStart {
    pub node: String,
    pub kind: HookKind,
    pub started_at: Timestamp,
    /// How long its Job may run (activeDeadlineSeconds): the hook's timeout,
    /// never past what is left of the node's nodeTimeout, so a hung hook does
    /// not outlive its node's start.
    pub timeout_secs: u64,
}

/// Whether a hook Job of the pool, for `start` of its node, still running,
/// is no use to anyone: the node is no member now, or not in flight (it
/// failed, was held or released), or in flight for another start (a retry
/// makes its own Job). It is deleted rather than left to run to its deadline.
pub fn orphaned(start: Timestamp, outcome: &HookOutcome, current: Option<(NodeState, Option<Timestamp>)>) -> bool {
    let running = matches!(outcome, HookOutcome::Running);
    running && !current.is_some_and(|(state, at)| state.in_flight() && at == Some(start))
}

/// How far past a hook's timeout the operator waits for the Job controller
/// to stop the Job (its activeDeadlineSeconds) before it calls the hook
/// failed itself: a stopped Job controller must not hold a node for ever.
const JOB_CONTROLLER_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether a node may go past a hook this round.
pub(super) enum Gate {
    /// No hook, or its Job succeeded (then, if known).
    Open(Option<Timestamp>),
    /// Not yet (or never): the node's state after this round.
    Shut(NodeState),
}

/// The hook `kind` as a gate for node `n` in `state`: creates its Job, waits
/// for it, or acts on its failure as `onFailure` says.
pub(super) fn gate(s: &RoundSettings<'_>, r: &mut Decided<'_>, p: &mut NodePatch, n: &NodeView, kind: HookKind, state: NodeState) -> Gate {
    let Some(hook) = kind.of(s.spec) else {
        return Gate::Open(None);
    };
    let msg = match (s.hooks_namespace, n.hook_runs.iter().find(|h| h.kind == kind)) {
        (None, _) => {
            format!("rollout.hooks.{} cannot run: the operator runs without --hooks-namespace (the chart's hooks.namespace)", kind.field())
        }
        (Some(_), None) => match n.started_at {
            Some(started_at) => {
                let hook_timeout = super::parse_duration(&hook.timeout).unwrap_or(std::time::Duration::from_secs(600));
                let left = s.rules.node_timeout.saturating_sub(s.since(Some(started_at)));
                let timeout_secs = hook_timeout.min(left).as_secs().max(1);
                r.hooks.push(HookStart { node: n.name.clone(), kind, started_at, timeout_secs });
                r.wait(&n.name, format!("waiting for its {} hook Job", kind.field()));
                return Gate::Shut(state);
            }
            // Not started by winpool (a hand-edited state): no key for a Job.
            None => format!("rollout.hooks.{}: the node has no {} to run its hook for", kind.field(), names::ANN_STARTED_AT),
        },
        (Some(ns), Some(run)) => {
            let what = match &run.outcome {
                HookOutcome::Succeeded(at) => return Gate::Open(*at),
                HookOutcome::Running => {
                    let timeout = super::parse_duration(&hook.timeout).unwrap_or_default();
                    if s.since(run.created) <= timeout + JOB_CONTROLLER_GRACE {
                        r.wait(&n.name, format!("its {} hook Job {} is running", kind.field(), run.job));
                        return Gate::Shut(state);
                    }
                    format!("ran past its timeout {}", hook.timeout)
                }
                HookOutcome::Failed(why) => format!("failed: {why}"),
            };
            format!(
                "its {} hook Job {1} {what}; see kubectl -n {ns} logs job/{1} (and describe job/{1} for pods it could not create)",
                kind.field(),
                run.job
            )
        }
    };
    let state = failed(s, p, n, kind, hook.on_failure, &msg);
    if state == NodeState::Pending {
        // Held from this round on: not started again in it.
        r.held.insert(n.name.clone());
    }
    Gate::Shut(state)
}

/// A failed hook's node: Failed, or held (`winpool.dev/hold=true`, with
/// why): before the drain back to Pending and uncordoned; after the update
/// Updated but still cordoned, the cordon now a person's to lift.
fn failed(s: &RoundSettings<'_>, p: &mut NodePatch, n: &NodeView, kind: HookKind, on_failure: HookFailure, msg: &str) -> NodeState {
    p.reason = msg.to_string();
    if on_failure == HookFailure::Fail {
        fail(p, n, s.now, FailureReason::HookFailed, msg);
        return NodeState::Failed;
    }
    p.label(names::LABEL_HOLD, Some("true")).ann(names::ANN_HOLD_REASON, Some(msg));
    p.ann(names::ANN_STARTED_AT, None).ann(names::ANN_INSTALL_BUDGET, None);
    p.ann(names::ANN_TARGET_REVISION, None).ann(names::ANN_BOOT_ID, None);
    if n.hotpatch {
        p.ann(names::ANN_HOTPATCH, None);
    }
    match kind {
        HookKind::PreDrain => {
            p.state(NodeState::Pending, s.now);
            release_cordon(p, n);
            NodeState::Pending
        }
        HookKind::PostUpdate => {
            p.state(NodeState::Updated, s.now).ann(names::ANN_CORDONED_BY_WINPOOL, None);
            NodeState::Updated
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_hook_job_of_no_start_in_flight_is_orphaned() {
        let (start, retry) = ("2026-12-04T10:00:00Z".parse().unwrap(), "2026-12-04T10:30:00Z".parse().unwrap());
        let running = HookOutcome::Running;
        assert!(!orphaned(start, &running, Some((NodeState::Draining, Some(start)))), "its node's start waits for it");
        assert!(orphaned(start, &running, Some((NodeState::Draining, Some(retry)))), "a retry makes its own Job");
        assert!(orphaned(start, &running, Some((NodeState::Failed, Some(start)))), "its node failed");
        assert!(orphaned(start, &running, Some((NodeState::Pending, None))), "its node was held or put back");
        assert!(orphaned(start, &running, None), "its node left the pool");
        let done = HookOutcome::Failed("DeadlineExceeded".into());
        assert!(!orphaned(start, &done, None), "a finished Job stays for its log");
    }
}
