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
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<finalizer::Error<Error>>),
}

impl Error {
    /// Every value [`Error::metric_label`] can take, so each series exists (at 0) from the start.
    pub const METRIC_LABELS: [&'static str; 8] =
        ["list_pods", "patch_node", "write_status", "apply_agent", "create_configmap", "delete", "agent_namespace", "finalizer"];

    /// The act step that failed: a bounded label.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::ListPods { .. } => "list_pods",
            Error::PatchNode { .. } => "patch_node",
            Error::WriteStatus { .. } => "write_status",
            Error::ApplyAgent { .. } => "apply_agent",
            Error::CreateConfigMap { .. } => "create_configmap",
            Error::MarkConfigMap { .. } => "mark_configmap",
            Error::Delete { .. } => "delete",
            Error::AgentNamespace { .. } => "agent_namespace",
            Error::Finalizer(_) => "finalizer",
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
            Error::WriteStatus { pool: "p".into(), source: api(409) },
            Error::ApplyAgent { name: "winpool-p".into(), source: api(422) },
            Error::CreateConfigMap { name: "winpool-p-abc".into(), source: api(500) },
            Error::Delete { resource: "daemonsets", name: "old".into(), source: api(500) },
            Error::AgentNamespace { name: "winpool-agents".into(), source: api(403) },
        ];
        let labels: Vec<&str> = errors.iter().map(Error::metric_label).collect();
        assert_eq!(labels, Error::METRIC_LABELS[..7]);
        for (e, object) in errors.iter().zip(["n0", "n1", "p", "winpool-p", "winpool-p-abc", "old", "winpool-agents"]) {
            assert!(e.to_string().contains(object), "{e}");
        }
    }
}
