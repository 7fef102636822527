//! The pool's agent, decided: which images may run, whether its DaemonSet
//! needs a write, and which revision ConfigMaps must be created (the shell,
//! `controller::agent`, writes them).

use crate::api::EventReason;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;

use super::Settings;
use crate::api::{WindowsNodePool, names};
use crate::builders::configmap::revision_configmap;
use crate::builders::daemonset::{AgentDrift, agent_daemonset, drift};
use crate::decision::revision::NodeConfig;
use crate::decision::rollout::Plan;

/// Whoever can create a pool can run an image as SYSTEM on its nodes: the
/// operator only runs agent images the cluster admin allowed. A prefix
/// matches only up to a boundary of the image reference: it ends in `/` or
/// `@`, or the image goes on with `/` or `@` right after it (or `:`, a tag,
/// after a prefix that names a repository): `registry.corp` admits
/// `registry.corp/winpool/agent`, never `registry.corp.evil/agent`.
pub fn agent_image_allowed(image: &str, allowed: &[String]) -> bool {
    image.is_empty() || allowed.is_empty() || allowed.iter().any(|p| prefix_admits(p, image))
}

/// Whoever can create a pool names the containerd archive a SYSTEM task
/// unpacks and runs: the operator takes only archives under a URL prefix
/// the cluster admin allowed, and none when none is (the official release,
/// checked against its published sha256sum, is the default). Matched as a
/// URL ([`crate::decision::allowed_url`]): `https://mirror.corp/containerd`
/// admits `https://mirror.corp/containerd/v1.7.22/…`, never
/// `https://mirror.corp/containerd-evil/…`, `https://mirror.corp.evil/…` nor
/// `https://mirror.corp/containerd/../uploads/…`.
pub fn runtime_archive_allowed(archive: Option<&crate::api::RuntimeArchive>, allowed: &[String]) -> bool {
    archive.is_none_or(|a| crate::decision::allowed_url::under_any(&a.url, allowed))
}

/// A package on a share (`\\server\share\…`) makes every node's SYSTEM
/// account authenticate to that server, at preflight and at install: a
/// pool naming any server would hand it every node's machine credentials
/// (NTLM, which a relay can use). The operator takes only paths under a
/// share the cluster admin allowed (by DNS name: Kerberos, not NTLM), none
/// when none is, matched case-insensitively up to a `\`, with no `..` and
/// no `/` in them. A drive path (`D:\…`) is the node's own.
pub fn package_path_allowed(path: &str, allowed: &[String]) -> bool {
    if !path.starts_with(r"\\") {
        return true;
    }
    if path.contains('/') || path.split('\\').any(|c| c == "..") {
        return false;
    }
    let path = path.to_ascii_lowercase();
    allowed.iter().any(|p| {
        let p = p.to_ascii_lowercase();
        path.strip_prefix(p.as_str()).is_some_and(|rest| p.ends_with('\\') || rest.starts_with('\\'))
    })
}

/// Whether an allowed share names its server by a DNS name (a dot, not an
/// IPv4 address) and a share: `\\files.corp.example\updates`.
pub fn share_prefix_valid(prefix: &str) -> bool {
    let Some(rest) = prefix.strip_prefix(r"\\") else { return false };
    let mut parts = rest.split('\\');
    let server = parts.next().unwrap_or_default();
    let share = parts.next().unwrap_or_default();
    let labels_ok = server.split('.').all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    let ipv4 = server.split('.').all(|l| l.chars().all(|c| c.is_ascii_digit()));
    server.contains('.') && labels_ok && !ipv4 && !share.is_empty() && !prefix.contains('/') && !prefix.split('\\').any(|c| c == "..")
}

/// What reaches SYSTEM on the pool's nodes that the cluster admin did not
/// allow: the reason and the message of the pool's refusal; None: all is allowed.
pub fn system_inputs_refused(pool: &WindowsNodePool, settings: &Settings) -> Option<(EventReason, String)> {
    if !agent_image_allowed(&pool.spec.agent.image, &settings.allowed_agent_images) {
        return Some((
            EventReason::AgentImageNotAllowed,
            format!(
                "spec.agent.image {:?} is not in the operator's allowed agent images ({}); nothing is rolled until it is",
                pool.spec.agent.image,
                settings.allowed_agent_images.join(", ")
            ),
        ));
    }
    let archive = pool.spec.runtime.archive.as_ref();
    if !runtime_archive_allowed(archive, &settings.allowed_runtime_archives) {
        let allowed = allowed_list(&settings.allowed_runtime_archives, "--allowed-runtime-archives (chart agent.allowedRuntimeArchives)");
        return Some((
            EventReason::RuntimeArchiveNotAllowed,
            format!(
                "spec.runtime.archive.url {:?} is not under the operator's allowed runtime archive URLs ({allowed}); \
                 a SYSTEM task would run what it holds, so nothing is rolled until it is",
                archive.map(|a| a.url.as_str()).unwrap_or_default()
            ),
        ));
    }
    let packages = pool.spec.os.updates.as_ref().map(|u| u.packages.as_slice()).unwrap_or_default();
    let shares = &settings.allowed_package_shares;
    if let Some(path) = packages.iter().filter_map(|p| p.path.as_deref()).find(|p| !package_path_allowed(p, shares)) {
        let allowed = allowed_list(shares, "--allowed-package-shares (chart agent.allowedPackageShares)");
        return Some((
            EventReason::PackageShareNotAllowed,
            format!(
                "spec.os.updates.packages path {path:?} is not under the operator's allowed package shares ({allowed}); \
                 every node's SYSTEM account would authenticate to its server, so nothing is rolled until it is"
            ),
        ));
    }
    hook_refused(pool, settings)
}

/// A hook runs a pool editor's image in the hooks namespace, as one of its
/// ServiceAccounts: only images and accounts the cluster admin allowed.
fn hook_refused(pool: &WindowsNodePool, settings: &Settings) -> Option<(EventReason, String)> {
    let hooks = pool.spec.rollout.hooks.as_ref()?;
    for (field, hook) in [("preDrain", &hooks.pre_drain), ("postUpdate", &hooks.post_update)] {
        let Some(hook) = hook else { continue };
        if !agent_image_allowed(&hook.image, &settings.allowed_hook_images) {
            let allowed = settings.allowed_hook_images.join(", ");
            return Some((
                EventReason::HookNotAllowed,
                format!(
                    "rollout.hooks.{field}.image {:?} is not in the operator's allowed hook images ({allowed}); nothing is rolled until it is",
                    hook.image
                ),
            ));
        }
        if let Some(sa) = hook.service_account_name.as_ref().filter(|sa| !settings.allowed_hook_service_accounts.contains(sa)) {
            let allowed = allowed_list(
                &settings.allowed_hook_service_accounts,
                "--allowed-hook-service-accounts (chart hooks.allowedServiceAccounts)",
            );
            return Some((
                EventReason::HookNotAllowed,
                format!(
                    "rollout.hooks.{field}.serviceAccountName {sa:?} is not one the operator allows hooks to run as ({allowed}); \
                     nothing is rolled until it is"
                ),
            ));
        }
    }
    None
}

/// An allow-list as a refusal names it; empty, which flag sets it.
fn allowed_list(allowed: &[String], flag: &str) -> String {
    if allowed.is_empty() { format!("none are: set the operator's {flag}") } else { allowed.join(", ") }
}

fn prefix_admits(prefix: &str, image: &str) -> bool {
    let Some(rest) = image.strip_prefix(prefix) else { return false };
    let names_repository = prefix.contains('/');
    prefix.ends_with(['/', '@']) || rest.is_empty() || rest.starts_with(['/', '@']) || names_repository && rest.starts_with(':')
}

/// A write of the pool's agent DaemonSet, and why.
pub(crate) struct AgentWrite {
    pub(crate) drift: AgentDrift,
    /// Replaced whole rather than applied.
    pub(crate) replace: bool,
    /// What winpool wants; for a replace, carrying the live resourceVersion.
    pub(crate) daemonset: DaemonSet,
}

/// The pool's agent DaemonSet is written when it is missing, when winpool's own
/// wish changed (a new agent image or setting: that rolls the agents and
/// nothing else), or when someone edited what winpool sets (put back, with a
/// Warning Event, so a hand edit never silently decides what runs as SYSTEM).
pub(crate) fn agent_write(pool: &WindowsNodePool, settings: &Settings, ds_of_pool: &[Arc<DaemonSet>]) -> Option<AgentWrite> {
    daemonset_write(agent_daemonset(pool, &settings.agent_namespace, &settings.agent), ds_of_pool)
}

/// An agent roll (winpool's wish changed: a new image or setting) waits while
/// any of the pool's nodes is Applying: a rolled agent pod meets the update in
/// the middle, and while the servicing task outlives it, the containerd swap
/// and the report in flight are better left to the agent that began them. A
/// missing DaemonSet or a hand edit is written at once: no agent runs, or
/// one runs as nobody asked.
pub(crate) fn hold_agent_roll(write: Option<AgentWrite>, applying: usize) -> Option<AgentWrite> {
    write.filter(|w| w.drift != AgentDrift::Outdated || applying == 0)
}

/// The write that brings one of the pool's DaemonSets (the agent's, a CSI
/// Proxy's) to what winpool wants, if it needs one.
pub(crate) fn daemonset_write(mut wanted: DaemonSet, ds_of_pool: &[Arc<DaemonSet>]) -> Option<AgentWrite> {
    let ds_name = wanted.metadata.name.clone().unwrap_or_default();
    let current = ds_of_pool.iter().find(|d| d.metadata.name.as_deref() == Some(ds_name.as_str()));
    let drift = drift(current.map(|d| d.as_ref()), &wanted);
    if drift == AgentDrift::UpToDate {
        return None;
    }
    // Server-side apply cannot take away what another manager added (a
    // nodeSelector key, an env var): a hand edit is replaced whole, guarded by
    // the resourceVersion it was judged on.
    let replace = match (drift, current) {
        (AgentDrift::HandEdited, Some(live)) => {
            wanted.metadata.resource_version = live.metadata.resource_version.clone();
            true
        }
        _ => false,
    };
    Some(AgentWrite { drift, replace, daemonset: wanted })
}

/// The revision ConfigMaps to create and the earlier-layout DaemonSets to delete.
#[derive(Default)]
pub(crate) struct ConfigMapWrites {
    /// (revision, its ConfigMap), by revision.
    pub(crate) create: Vec<(String, ConfigMap)>,
    /// (ConfigMap, whether it is the target): the marks to move on existing
    /// ConfigMaps, the old target's taken off before one is put on. A new
    /// target is created with its mark, before the old one's comes off: an
    /// agent that sees two marks waits for one.
    pub(crate) mark: Vec<(String, bool)>,
    /// When the marks are put on (`winpool.dev/target-since`), RFC 3339.
    pub(crate) marked_at: String,
}

/// The target revision's ConfigMap when the plan needs it and it has none
/// (its configuration is the spec's), and the target marks to move.
pub(crate) fn configmap_writes(
    pool: &WindowsNodePool,
    ns: &str,
    plan: &Plan,
    cms_of_pool: &[Arc<ConfigMap>],
    now: Timestamp,
) -> ConfigMapWrites {
    let mut writes = ConfigMapWrites { marked_at: now.to_string(), ..Default::default() };
    let has_configmap = cms_of_pool.iter().any(|c| c.labels().get(names::LABEL_REVISION) == Some(&plan.revision));
    if plan.config_revisions.contains(&plan.revision) && !has_configmap {
        let mut cm = revision_configmap(pool, &plan.revision, &NodeConfig::from_spec(&pool.spec), ns);
        cm.labels_mut().insert(names::LABEL_TARGET.into(), "true".into());
        cm.annotations_mut().insert(names::ANN_TARGET_SINCE.into(), writes.marked_at.clone());
        writes.create.push((plan.revision.clone(), cm));
    }
    // The agents preflight the revision whose ConfigMap carries the mark.
    let mut marks: Vec<(String, bool)> = cms_of_pool
        .iter()
        .filter_map(|c| {
            let is_target = c.labels().get(names::LABEL_REVISION) == Some(&plan.revision);
            let marked = c.labels().get(names::LABEL_TARGET).map(String::as_str) == Some("true");
            (is_target != marked).then(|| (c.name_any(), is_target))
        })
        .collect();
    marks.sort_by_key(|(name, on)| (*on, name.clone()));
    writes.mark = marks;
    writes
}

/// The pool's status refusing what reaches SYSTEM (system_inputs_refused):
/// not Ready, not Progressing, the other conditions and the counts as they were.
pub(crate) fn refusal(pool: &WindowsNodePool, reason: &str, msg: &str, now: Timestamp) -> crate::api::WindowsNodePoolStatus {
    let refused = |type_: &str| Condition {
        type_: type_.into(),
        // A refused image waits for a person: Stalled, as kstatus reads it.
        status: if type_ == crate::api::conditions::STALLED { "True" } else { "False" }.into(),
        reason: reason.into(),
        message: msg.into(),
        last_transition_time: Time(now),
        observed_generation: pool.metadata.generation,
    };
    use crate::api::conditions::{PROGRESSING, READY, RECONCILING, STALLED};
    let types = [READY, RECONCILING, STALLED, PROGRESSING];
    let conds = types.iter().map(|t| refused(t)).collect();
    let mut status = pool.status.clone().unwrap_or_default();
    let mut rest: Vec<_> = status.conditions.iter().filter(|c| !types.contains(&c.type_.as_str())).cloned().collect();
    let mut merged = crate::decision::status::merge_conditions(&status.conditions, conds, pool.metadata.generation, now);
    merged.append(&mut rest);
    status.conditions = merged;
    status.observed_generation = pool.metadata.generation;
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_images_are_checked_against_the_allow_list_up_to_a_boundary() {
        let allowed = vec!["registry.corp/winpool/".to_string(), "mcr.microsoft.com".to_string(), "ghcr.io/acme/agent".to_string()];
        let cases = [
            ("", true),
            ("registry.corp/winpool/agent:1", true),
            ("registry.corp/winpoolx/agent", false),
            ("mcr.microsoft.com/windows/agent", true),
            ("mcr.microsoft.com.evil.example/agent", false),
            ("mcr.microsoft.com:5000/agent", false),
            ("ghcr.io/acme/agent:1.2", true),
            ("ghcr.io/acme/agent@sha256:0123", true),
            ("ghcr.io/acme/agent", true),
            ("ghcr.io/acme/agent-evil:1", false),
            ("evil.example.com/agent:1", false),
        ];
        for (image, want) in cases {
            assert_eq!(agent_image_allowed(image, &allowed), want, "{image}");
        }
        assert!(agent_image_allowed("anything", &[]), "no allow-list: any image");
    }
    use crate::api::{NodeCounts, WindowsNodePoolSpec, WindowsNodePoolStatus, conditions};

    #[test]
    fn a_refused_image_stops_ready_and_progressing_and_keeps_the_rest_of_the_status() {
        let spec: WindowsNodePoolSpec = serde_saphyr::from_str(
            "nodeSelector: {}\nos: {version: ltsc2022, patchLevel: 10.0.20348.2762}\nagent: {image: evil.example.com/agent:1}",
        )
        .unwrap();
        let mut pool = WindowsNodePool::new("p", spec);
        pool.metadata.generation = Some(3);
        let earlier: Timestamp = "2026-11-01T00:00:00Z".parse().unwrap();
        let degraded = Condition {
            type_: conditions::DEGRADED.into(),
            status: "False".into(),
            reason: "NoFailures".into(),
            message: "no node failed".into(),
            last_transition_time: Time(earlier),
            observed_generation: Some(2),
        };
        let counts = NodeCounts { total: 4, updated: 2, ..Default::default() };
        pool.status = Some(WindowsNodePoolStatus { nodes: counts.clone(), conditions: vec![degraded.clone()], ..Default::default() });
        let now: Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();

        let mut settings = Settings::example("");
        settings.allowed_agent_images = vec!["registry.corp/".to_string()];
        let (reason, msg) = system_inputs_refused(&pool, &settings).expect("refused");
        assert!(msg.contains("evil.example.com/agent:1") && msg.contains("registry.corp/"), "{msg}");
        let status = refusal(&pool, reason.as_str(), &msg, now);
        for (t, want) in [
            (conditions::READY, "False"),
            (conditions::PROGRESSING, "False"),
            (conditions::RECONCILING, "False"),
            (conditions::STALLED, "True"),
        ] {
            let c = status.conditions.iter().find(|c| c.type_ == t).expect(t);
            assert_eq!((c.status.as_str(), c.reason.as_str(), c.observed_generation), (want, "AgentImageNotAllowed", Some(3)), "{t}");
        }
        assert!(status.conditions.contains(&degraded), "other conditions stay as they were");
        assert_eq!((status.nodes, status.observed_generation), (counts, Some(3)));
    }

    fn pool_with_archive(url: &str) -> WindowsNodePool {
        let sha = "0".repeat(64);
        crate::test_builders::pool("p")
            .uid(None)
            .with(&format!("runtime: {{version: 1.7.22, archive: {{url: '{url}', sha256: '{sha}'}}}}"))
            .build()
    }

    #[test]
    fn runtime_archives_are_refused_unless_under_an_allowed_prefix_up_to_a_slash() {
        let allowed = vec!["https://mirror.corp/containerd".to_string(), "https://cdn.corp/bin/".to_string()];
        let cases = [
            ("https://mirror.corp/containerd/v1.7.22/containerd-1.7.22-windows-amd64.tar.gz", true),
            ("https://mirror.corp/containerd-evil/containerd-1.7.22-windows-amd64.tar.gz", false),
            ("https://mirror.corp.evil/containerd/containerd-1.7.22-windows-amd64.tar.gz", false),
            ("https://cdn.corp/bin/containerd-1.7.22-windows-amd64.tar.gz", true),
            ("https://cdn.corp/binaries/containerd-1.7.22-windows-amd64.tar.gz", false),
            ("https://evil.example/containerd-1.7.22-windows-amd64.tar.gz", false),
            ("https://mirror.corp/containerd/../uploads/containerd-1.7.22-windows-amd64.tar.gz", false),
            ("https://cdn.corp/bin/%2e%2e/uploads/containerd-1.7.22-windows-amd64.tar.gz", false),
        ];
        for (url, want) in cases {
            let pool = pool_with_archive(url);
            assert_eq!(runtime_archive_allowed(pool.spec.runtime.archive.as_ref(), &allowed), want, "{url}");
        }
        // No archive: the official release, always allowed. No allow-list: no archive at all.
        assert!(runtime_archive_allowed(None, &[]));
        let pool = pool_with_archive("https://mirror.corp/containerd/containerd-1.7.22-windows-amd64.tar.gz");
        let (reason, msg) = system_inputs_refused(&pool, &Settings::example("")).expect("refused with no allow-list");
        assert_eq!(reason, EventReason::RuntimeArchiveNotAllowed);
        assert!(msg.contains("https://mirror.corp/containerd/") && msg.contains("--allowed-runtime-archives"), "{msg}");
        let mut settings = Settings::example("");
        settings.allowed_runtime_archives = allowed;
        assert_eq!(system_inputs_refused(&pool, &settings), None);
    }

    #[test]
    fn hooks_run_only_allowed_images_and_as_allowed_accounts() {
        let pool = |hooks: &str| crate::test_builders::pool("p").uid(None).with(&format!("rollout: {{hooks: {hooks}}}")).build();
        let plain = pool("{preDrain: {image: 'registry.corp/db-tools:1'}}");
        let named = pool("{postUpdate: {image: 'registry.corp/db-tools:1', serviceAccountName: db-hooks}}");
        let elsewhere = pool("{preDrain: {image: 'registry.corp.evil/db-tools:1'}}");
        let mut settings = Settings::example("");
        assert_eq!(system_inputs_refused(&plain, &settings), None, "no allow-list: any image, without a token");
        let (reason, msg) = system_inputs_refused(&named, &settings).expect("no account is allowed by default");
        assert_eq!(reason, EventReason::HookNotAllowed);
        assert!(
            msg.contains("rollout.hooks.postUpdate.serviceAccountName \"db-hooks\"") && msg.contains("--allowed-hook-service-accounts"),
            "{msg}"
        );
        settings.allowed_hook_service_accounts = vec!["db-hooks".into()];
        settings.allowed_hook_images = vec!["registry.corp".into()];
        assert_eq!(system_inputs_refused(&named, &settings), None);
        let (reason, msg) = system_inputs_refused(&elsewhere, &settings).expect("an image off the allow-list");
        assert_eq!(reason, EventReason::HookNotAllowed);
        assert!(msg.contains("rollout.hooks.preDrain.image \"registry.corp.evil/db-tools:1\""), "{msg}");
    }

    fn pool_with_package_path(path: &str) -> WindowsNodePool {
        let sha = "b".repeat(64);
        crate::test_builders::pool("p")
            .uid(None)
            .with(&format!("os: {{updates: {{source: Packages, packages: [{{path: '{path}', sha256: '{sha}'}}]}}}}"))
            .build()
    }

    #[test]
    fn package_shares_are_refused_unless_allowed_by_dns_name_up_to_a_backslash() {
        let allowed = vec![r"\\files.corp.example\updates".to_string()];
        let cases = [
            (r"\\files.corp.example\updates\2026-12\kb5050002.msu", true),
            (r"\\FILES.corp.example\Updates\kb5050002.msu", true),
            (r"\\files.corp.example\updates-evil\kb5050002.msu", false),
            (r"\\files.corp.example.evil\updates\kb5050002.msu", false),
            (r"\\files.corp.example\updates\..\admin$\kb.msu", false),
            (r"\\files.corp.example\updates\x/..\kb.msu", false),
            (r"\\10.1.2.3\updates\kb5050002.msu", false),
            (r"\\?\UNC\files.corp.example\updates\kb.msu", false),
            (r"D:\updates\kb5050002.msu", true),
        ];
        for (path, want) in cases {
            assert_eq!(package_path_allowed(path, &allowed), want, "{path}");
        }
        assert!(!package_path_allowed(r"\\files.corp.example\updates\kb.msu", &[]), "no allow-list: no share");
        let pool = pool_with_package_path(r"\\attacker.example\s\kb.msu");
        let (reason, msg) = system_inputs_refused(&pool, &Settings::example("")).expect("refused with no allow-list");
        assert_eq!(reason, EventReason::PackageShareNotAllowed);
        assert!(msg.contains("attacker.example") && msg.contains("--allowed-package-shares"), "{msg}");
        let mut settings = Settings::example("");
        settings.allowed_package_shares = allowed;
        assert!(system_inputs_refused(&pool, &settings).is_some());
        assert_eq!(system_inputs_refused(&pool_with_package_path(r"\\files.corp.example\updates\kb.msu"), &settings), None);
        assert_eq!(system_inputs_refused(&pool_with_package_path(r"D:\updates\kb.msu"), &Settings::example("")), None);
    }

    #[test]
    fn an_allowed_share_names_its_server_by_dns_name() {
        for (prefix, want) in [
            (r"\\files.corp.example\updates", true),
            (r"\\files.corp.example\updates\2026", true),
            (r"\\files\updates", false),
            (r"\\10.1.2.3\updates", false),
            (r"\\files.corp.example", false),
            (r"\\files.corp.example\", false),
            (r"https://files.corp.example/updates", false),
            (r"\\files..example\updates", false),
            (r"\\files.corp.example\updates\..\c$", false),
        ] {
            assert_eq!(share_prefix_valid(prefix), want, "{prefix}");
        }
    }
}
