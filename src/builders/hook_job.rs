//! A `rollout.hooks` Job for one node's start, and what a Job found in the
//! hooks namespace says about its hook.
//!
//! The Job runs once (no retries: a second stepdown of a database primary is
//! a person's call), is stopped by the Job controller at the hook's timeout
//! (activeDeadlineSeconds), and is kept a day for its log. Its pod runs with
//! the restricted Pod Security profile's settings: a pool's editor chooses
//! the image, so the pod gets no more than a hook needs.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EnvVar, EnvVarSource, PodSecurityContext, PodSpec, PodTemplateSpec, SeccompProfile, SecretKeySelector,
    SecurityContext,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use crate::api::{Hook, WindowsNodePool, names};
use crate::builders::daemonset::{LABEL_MANAGED_BY, owner_reference};
use crate::decision::rollout::hooks::{HookKind, HookOutcome, HookRun, HookStart};

/// How long a finished hook Job (and its pod's log) is kept.
const KEEP_FINISHED: i32 = 24 * 3600;

/// The Job's name: the same for one start of one node, so a create the cache
/// has not seen yet is refused (409) rather than run twice; 36 characters
/// whatever the pool's and node's names are.
pub fn job_name(pool: &str, start: &HookStart) -> String {
    use sha2::Digest;
    let key = format!("{pool}\n{}\n{}\n{}", start.node, start.kind.as_str(), start.started_at);
    let digest = sha2::Sha256::digest(key.as_bytes());
    let hash: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("winpool-{}-{hash}", start.kind.as_str())
}

pub fn hook_job(pool: &WindowsNodePool, hook: &Hook, start: &HookStart, namespace: &str) -> Job {
    let name = pool.name_any();
    let labels = BTreeMap::from([
        (LABEL_MANAGED_BY.to_string(), "winpool".to_string()),
        (names::LABEL_POOL.to_string(), name.clone()),
        (names::LABEL_HOOK.to_string(), start.kind.as_str().to_string()),
    ]);
    let env = [("WINPOOL_NODE", start.node.as_str()), ("WINPOOL_POOL", name.as_str()), ("WINPOOL_HOOK", start.kind.field())]
        .into_iter()
        .map(|(k, v)| EnvVar { name: k.into(), value: Some(v.into()), value_from: None })
        .chain(hook.env.iter().map(hook_env))
        .collect();
    let node_selector = hook.node_selector.clone().unwrap_or_else(|| BTreeMap::from([(names::LABEL_OS.into(), "linux".into())]));
    Job {
        metadata: ObjectMeta {
            name: Some(job_name(&name, start)),
            namespace: Some(namespace.into()),
            labels: Some(labels.clone()),
            annotations: Some(BTreeMap::from([
                (names::ANN_HOOK_NODE.to_string(), start.node.clone()),
                (names::ANN_STARTED_AT.to_string(), start.started_at.to_string()),
            ])),
            owner_references: Some(vec![owner_reference(pool)]),
            ..Default::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            active_deadline_seconds: Some(start.timeout_secs as i64),
            ttl_seconds_after_finished: Some(KEEP_FINISHED),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels), ..Default::default() }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".into()),
                    service_account_name: hook.service_account_name.clone(),
                    // A token only for a hook that names the account it needs:
                    // the image is a pool editor's choice.
                    automount_service_account_token: Some(hook.service_account_name.is_some()),
                    node_selector: Some(node_selector),
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: hook.run_as_user,
                        seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), ..Default::default() }),
                        ..Default::default()
                    }),
                    containers: vec![Container {
                        name: "hook".into(),
                        image: Some(hook.image.clone()),
                        command: (!hook.command.is_empty()).then(|| hook.command.clone()),
                        args: (!hook.args.is_empty()).then(|| hook.args.clone()),
                        env: Some(env),
                        security_context: Some(SecurityContext {
                            allow_privilege_escalation: Some(false),
                            capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), ..Default::default() }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn hook_env(e: &crate::api::HookEnv) -> EnvVar {
    let value_from = e.value_from.as_ref().map(|f| EnvVarSource {
        secret_key_ref: Some(SecretKeySelector { name: f.secret_key_ref.name.clone(), key: f.secret_key_ref.key.clone(), optional: None }),
        ..Default::default()
    });
    EnvVar { name: e.name.clone(), value: value_from.is_none().then(|| e.value.clone()), value_from }
}

/// What a hook Job says: for which node and start, and how it went. None for
/// a Job that is not a winpool hook's.
pub fn run_of(job: &Job) -> Option<(String, Timestamp, HookRun)> {
    let kind = HookKind::parse(job.labels().get(names::LABEL_HOOK)?)?;
    let node = job.annotations().get(names::ANN_HOOK_NODE)?.clone();
    let started_at: Timestamp = job.annotations().get(names::ANN_STARTED_AT)?.parse().ok()?;
    let status = job.status.as_ref();
    let condition = |type_: &str| status?.conditions.as_ref()?.iter().find(|c| c.type_ == type_ && c.status == "True").cloned();
    let outcome = if let Some(c) = condition("Failed") {
        let why = [c.reason, c.message].into_iter().flatten().collect::<Vec<_>>().join(": ");
        HookOutcome::Failed(if why.is_empty() { "the Job failed".into() } else { why })
    } else if condition("Complete").is_some() {
        HookOutcome::Succeeded(status.and_then(|s| s.completion_time.as_ref()).map(|t| t.0))
    } else {
        HookOutcome::Running
    };
    let run = HookRun { kind, job: job.name_any(), created: job.metadata.creation_timestamp.as_ref().map(|t| t.0), outcome };
    Some((node, started_at, run))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};

    fn pool() -> WindowsNodePool {
        crate::test_builders::pool("win").build()
    }

    fn hook() -> Hook {
        serde_json::from_value(
            serde_json::json!({"image": "registry.example/db-tools:1", "command": ["/stepdown"], "timeout": "90s", "runAsUser": 65534}),
        )
        .unwrap()
    }

    fn start(node: &str) -> HookStart {
        HookStart { node: node.into(), kind: HookKind::PreDrain, started_at: "2026-12-04T10:00:00Z".parse().unwrap(), timeout_secs: 90 }
    }

    #[test]
    fn a_hook_job_runs_once_within_its_timeout_for_its_node_and_says_which() {
        let node = format!("{}.ec2.internal", "ip-10-0-1-2".repeat(20));
        let job = hook_job(&pool(), &hook(), &start(&node), "winpool-hooks");
        let name = job.name_any();
        assert!(name.len() <= 63 && name.starts_with("winpool-pre-drain-"), "{name}");
        assert_eq!(name, job_name("win", &start(&node)), "one name per start");
        assert_ne!(name, job_name("win", &HookStart { started_at: "2026-12-05T10:00:00Z".parse().unwrap(), ..start(&node) }));
        assert_eq!(job.namespace().as_deref(), Some("winpool-hooks"));
        let spec = job.spec.as_ref().unwrap();
        assert_eq!((spec.backoff_limit, spec.active_deadline_seconds), (Some(0), Some(90)));
        let pod = spec.template.spec.as_ref().unwrap();
        assert_eq!(pod.node_selector.as_ref().unwrap().get("kubernetes.io/os").map(String::as_str), Some("linux"));
        let env = pod.containers[0].env.as_ref().unwrap();
        assert!(env.iter().any(|e| e.name == "WINPOOL_NODE" && e.value.as_deref() == Some(node.as_str())));
        assert_eq!(pod.containers[0].security_context.as_ref().unwrap().allow_privilege_escalation, Some(false));
        let runs_as = pod.security_context.as_ref().unwrap();
        assert_eq!((runs_as.run_as_non_root, runs_as.run_as_user), (Some(true), Some(65534)), "non-root, as the hook says");
        assert_eq!(job.metadata.owner_references.as_ref().unwrap()[0].uid, "uid-1", "deleted with its pool");

        let (n, at, run) = run_of(&job).expect("a hook Job reads back");
        assert_eq!((n, at, run.kind, run.outcome), (node, start("x").started_at, HookKind::PreDrain, HookOutcome::Running));
    }

    #[test]
    fn a_hook_gets_a_token_only_for_an_account_it_names_and_credentials_from_a_secret() {
        let job = hook_job(&pool(), &hook(), &start("n"), "h");
        let pod = job.spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.automount_service_account_token, Some(false), "no account named: no token");
        let named: Hook = serde_json::from_value(serde_json::json!({"image": "i", "serviceAccountName": "db-stepdown",
            "env": [{"name": "LEVEL", "value": "2"}, {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]}))
        .unwrap();
        let pod = hook_job(&pool(), &named, &start("n"), "h").spec.unwrap().template.spec.unwrap();
        assert_eq!((pod.automount_service_account_token, pod.service_account_name.as_deref()), (Some(true), Some("db-stepdown")));
        let env = pod.containers[0].env.clone().unwrap();
        let var = |n: &str| env.iter().find(|e| e.name == n).cloned().unwrap();
        assert_eq!(var("LEVEL").value.as_deref(), Some("2"));
        let secret = var("DB_PASSWORD");
        assert_eq!(secret.value, None, "the credential is not in the Job");
        let key = secret.value_from.unwrap().secret_key_ref.unwrap();
        assert_eq!((key.name.as_str(), key.key.as_str()), ("db", "password"));
    }

    #[test]
    fn a_jobs_conditions_say_how_its_hook_went() {
        let with = |type_: &str, reason: Option<&str>| {
            let mut job = hook_job(&pool(), &hook(), &start("n"), "h");
            job.status = Some(JobStatus {
                conditions: Some(vec![JobCondition {
                    type_: type_.into(),
                    status: "True".into(),
                    reason: reason.map(Into::into),
                    ..Default::default()
                }]),
                ..Default::default()
            });
            run_of(&job).unwrap().2.outcome
        };
        assert_eq!(with("Complete", None), HookOutcome::Succeeded(None));
        assert_eq!(with("Failed", Some("DeadlineExceeded")), HookOutcome::Failed("DeadlineExceeded".into()));
        assert_eq!(with("Suspended", None), HookOutcome::Running);
        let mut other = hook_job(&pool(), &hook(), &start("n"), "h");
        other.labels_mut().remove(names::LABEL_HOOK);
        assert!(run_of(&other).is_none(), "not a hook's Job");
    }
}
