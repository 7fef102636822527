//! What a reconcile could not do: one variant per act step, carrying the
//! object it acted on, so the log line names it and the variant is the
//! `reason` label of `winpool_reconcile_errors_total` (as kube-rs's
//! controller-rs and Stackable's operators do).

use kube::runtime::finalizer;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("listing the pods on node {node} to drain it: {source}")]
    ListPods { node: String, source: kube::Error },
    #[error("patching node {node}: {source}")]
    PatchNode { node: String, source: kube::Error },
    #[error("writing WindowsNodeOperation {name}: {source}")]
    WriteOperation { name: String, source: kube::Error },
    #[error("writing the status of pool {pool}: {source}")]
    WriteStatus { pool: String, source: kube::Error },
    #[error("applying agent DaemonSet {name}: {source}")]
    ApplyAgent { name: String, source: kube::Error },
    #[error("creating revision ConfigMap {name}: {source}")]
    CreateConfigMap { name: String, source: kube::Error },
    #[error("marking the target revision's ConfigMap {name}: {source}")]
    MarkConfigMap { name: String, source: kube::Error },
    #[error("deleting {resource} {name}: {source}")]
    Delete { resource: &'static str, name: String, source: kube::Error },
    #[error("ensuring agent namespace {name}: {source}")]
    AgentNamespace { name: String, source: kube::Error },
    #[error(
        "node {node} leaves the pool while its agent reports {status}: released (and the pool's agents deleted) once the agent reports a result"
    )]
    ReleaseHeld { node: String, status: crate::api::report::ApplyStatus },
    #[error("claiming pool {pool} for this install: {source}")]
    ClaimPool { pool: String, source: kube::Error },
    #[error("pausing pool {pool} for a bad update: {source}")]
    PausePool { pool: String, source: kube::Error },
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<finalizer::Error<Error>>),
}

impl Error {
    /// Every value [`Error::metric_label`] can take, so each series exists (at 0) from the start.
    pub const METRIC_LABELS: [&'static str; 13] = [
        "list_pods",
        "patch_node",
        "write_operation",
        "write_status",
        "apply_agent",
        "create_configmap",
        "mark_configmap",
        "delete",
        "agent_namespace",
        "release_held",
        "claim_pool",
        "pause_pool",
        "finalizer",
    ];

    /// The act step that failed: a bounded label.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::ListPods { .. } => "list_pods",
            Error::PatchNode { .. } => "patch_node",
            Error::WriteOperation { .. } => "write_operation",
            Error::WriteStatus { .. } => "write_status",
            Error::ApplyAgent { .. } => "apply_agent",
            Error::CreateConfigMap { .. } => "create_configmap",
            Error::MarkConfigMap { .. } => "mark_configmap",
            Error::Delete { .. } => "delete",
            Error::AgentNamespace { .. } => "agent_namespace",
            Error::ReleaseHeld { .. } => "release_held",
            Error::ClaimPool { .. } => "claim_pool",
            Error::PausePool { .. } => "pause_pool",
            // Every reconcile runs inside kube's finalizer helper: the step that
            // failed is the inner error's, and "finalizer" only the helper's own.
            Error::Finalizer(f) => match f.as_ref() {
                finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e.metric_label(),
                _ => "finalizer",
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(kube::core::Status::failure("refused", "Refused").with_code(code).boxed())
    }

    #[test]
    fn every_step_has_its_own_label_and_the_message_names_the_object() {
        let errors = [
            Error::ListPods { node: "n0".into(), source: api(500) },
            Error::PatchNode { node: "n1".into(), source: api(403) },
            Error::WriteOperation { name: "n1.20261207100000".into(), source: api(500) },
            Error::WriteStatus { pool: "p".into(), source: api(409) },
            Error::ApplyAgent { name: "winpool-p".into(), source: api(422) },
            Error::CreateConfigMap { name: "winpool-p-abc".into(), source: api(500) },
            Error::MarkConfigMap { name: "winpool-p-def".into(), source: api(403) },
            Error::Delete { resource: "daemonsets", name: "old".into(), source: api(500) },
            Error::AgentNamespace { name: "winpool-agents".into(), source: api(403) },
            Error::ReleaseHeld { node: "n2".into(), status: crate::api::report::ApplyStatus::Applying },
        ];
        let labels: Vec<&str> = errors.iter().map(Error::metric_label).collect();
        assert_eq!(labels, Error::METRIC_LABELS[..10]);
        for (e, object) in errors.iter().zip([
            "n0",
            "n1",
            "n1.20261207100000",
            "p",
            "winpool-p",
            "winpool-p-abc",
            "winpool-p-def",
            "old",
            "winpool-agents",
            "n2",
        ]) {
            assert!(e.to_string().contains(object), "{e}");
        }
    }

    #[test]
    fn the_alert_tests_feed_only_reasons_the_operator_emits() {
        let text = include_str!("../tests/alerts/alerts_test.yaml");
        let series: Vec<&str> = text.lines().filter(|l| l.contains("winpool_reconcile_errors_total{")).collect();
        assert!(!series.is_empty(), "the alert tests feed reconcile errors");
        for line in series {
            let reason = line.split("reason=\"").nth(1).and_then(|r| r.split('"').next()).unwrap_or_else(|| panic!("no reason: {line}"));
            assert!(Error::METRIC_LABELS.contains(&reason), "{reason:?} is not a label the operator emits: {line}");
        }
    }

    #[test]
    fn an_error_inside_the_finalizer_helper_keeps_its_steps_label() {
        let inner = || Error::PatchNode { node: "n1".into(), source: api(403) };
        let applied = Error::Finalizer(Box::new(finalizer::Error::ApplyFailed(inner())));
        let cleaned = Error::Finalizer(Box::new(finalizer::Error::CleanupFailed(inner())));
        assert_eq!((applied.metric_label(), cleaned.metric_label()), ("patch_node", "patch_node"));
        assert_eq!(Error::Finalizer(Box::new(finalizer::Error::UnnamedObject)).metric_label(), "finalizer");
    }
}
