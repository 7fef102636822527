//! The pool's agent DaemonSet, built (purely) from a pool's spec.
//!
//! One DaemonSet per pool, `winpool-<pool>`, on every node labelled
//! `winpool.dev/pool=<pool>`. Its pod stays on the node across revisions: the
//! agent watches its own Node and applies whatever revision the node's
//! `winpool.dev/revision` label names (configuration in the revision
//! ConfigMap, see `configmap`), so a rollout creates and deletes no pods. The
//! DaemonSet itself changes only when the agent does (image, settings), by an
//! ordinary rolling update that needs no drain.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, LocalObjectReference, ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec,
    ResourceRequirements, Toleration, WindowsSecurityContextOptions,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sha2::{Digest, Sha256};

use crate::api::{WindowsNodePool, names};

pub const LABEL_APP: &str = "app.kubernetes.io/name";
pub const APP_AGENT: &str = "winpool-agent";
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The agent's ServiceAccount (the chart creates it, its RBAC and the admission
/// policy that keeps each agent to its own Node's agent annotations).
pub const AGENT_SERVICE_ACCOUNT: &str = "winpool-agent";
/// Hash of the DaemonSet winpool last applied: a change re-applies it.
pub const ANN_SPEC_HASH: &str = "winpool.dev/spec-hash";

/// Agent settings the operator fills in where the pool leaves them empty.
/// They are the agent's, not the node's: changing them rolls the DaemonSet,
/// never the pool.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    pub image: String,
    /// How often the agent re-reads HNS counts (it writes them only on change).
    pub hns_interval: String,
    /// Update installs per revision before the agent reports Failed.
    pub max_attempts: u32,
    /// What the cluster admin sets on the agent pods beyond winpool's own.
    pub pod: AgentPodOptions,
}

/// What a cluster admin sets on every pool's agent pods (chart values
/// `agent.*` → operator flags `--agent-*`): a private registry's pull secrets,
/// a proxy or `KUBE_NETWORK` in the environment, resources, the API server's
/// address, node selection and priority. They are part of the DaemonSet winpool
/// compares against, so a hand edit of them is put back like any other.
/// Tolerations are not among them: the agent already tolerates every taint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentPodOptions {
    /// Secrets in the agents' namespace.
    pub image_pull_secrets: Vec<String>,
    /// After winpool's own variables, none of which they may set (see [`parse_extra_env`]).
    pub extra_env: Vec<EnvVar>,
    /// Instead of winpool's defaults (see [`default_resources`]).
    pub resources: Option<ResourceRequirements>,
    /// `WINPOOL_API_SERVER`: the address agents use instead of the kubelet's
    /// kubeconfig or the `kubernetes` Service.
    pub api_server: Option<String>,
    /// Beyond the pool's own selection (`kubernetes.io/os`, `winpool.dev/pool`).
    pub node_selector: BTreeMap<String, String>,
    /// Instead of `system-node-critical` (some clusters allow that class only in kube-system).
    pub priority_class_name: Option<String>,
}

/// Environment variables winpool sets on the agent itself.
const ENV_NODE_NAME: &str = "NODE_NAME";
const ENV_POD_NAMESPACE: &str = "POD_NAMESPACE";
const ENV_POOL: &str = "WINPOOL_POOL";
const ENV_HNS_INTERVAL: &str = "WINPOOL_HNS_INTERVAL";
const ENV_MAX_ATTEMPTS: &str = "WINPOOL_MAX_ATTEMPTS";
const ENV_API_SERVER: &str = "WINPOOL_API_SERVER";
/// `rollout.staging`, set (to Disabled) only when false (the agent stages by default):
/// the DaemonSets of pools that stage stay as they were before it existed.
const ENV_STAGING: &str = "WINPOOL_STAGING";
/// `rollout.stagingBandwidth` in bytes a second, set only when the pool sets
/// it (the agent's default is the field's).
const ENV_STAGING_BANDWIDTH: &str = "WINPOOL_STAGING_BANDWIDTH";
/// Set only for a pool with os.patchPolicy: the agent then searches its
/// update source this often (agent.PatchCheckEnv).
const ENV_PATCH_CHECK_INTERVAL: &str = "WINPOOL_PATCH_CHECK_INTERVAL";
const OWN_ENV: &[&str] = &[
    ENV_NODE_NAME,
    ENV_POD_NAMESPACE,
    ENV_POOL,
    ENV_HNS_INTERVAL,
    ENV_MAX_ATTEMPTS,
    ENV_API_SERVER,
    ENV_STAGING,
    ENV_STAGING_BANDWIDTH,
    ENV_PATCH_CHECK_INTERVAL,
];

/// `20Mi` as bytes (the CRD holds the field to `<digits><Ki|Mi|Gi>`).
fn bytes_of(bandwidth: &str) -> Option<u64> {
    let (digits, shift) = match bandwidth.len().checked_sub(2).map(|i| bandwidth.split_at(i)) {
        Some((d, "Ki")) => (d, 10),
        Some((d, "Mi")) => (d, 20),
        Some((d, "Gi")) => (d, 30),
        _ => (bandwidth, 0),
    };
    digits.parse::<u64>().ok().filter(|n| *n > 0)?.checked_mul(1 << shift)
}

/// The agent's resources unless the cluster admin sets them: a small Go
/// process that sleeps between HNS reads, with room for an install's output.
pub fn default_resources() -> ResourceRequirements {
    ResourceRequirements {
        requests: Some([("cpu".to_string(), Quantity("50m".into())), ("memory".to_string(), Quantity("64Mi".into()))].into()),
        limits: Some([("memory".to_string(), Quantity("256Mi".into()))].into()),
        ..Default::default()
    }
}

/// `--agent-extra-env`: a JSON list of EnvVar objects. Names winpool sets are
/// refused (`WINPOOL_API_SERVER` has a flag of its own), and so are repeats.
pub fn parse_extra_env(s: &str) -> Result<Vec<EnvVar>, String> {
    let mut env: Vec<EnvVar> = parse_strict(s).map_err(|e| format!("not a JSON list of EnvVar objects ({e})"))?;
    let mut seen = std::collections::BTreeSet::new();
    for e in &mut env {
        if e.name.is_empty() {
            return Err("an environment variable has no name".into());
        }
        if e.name == ENV_API_SERVER {
            return Err(format!("{ENV_API_SERVER} is winpool's own: set it with --agent-api-server (chart agent.apiServer)"));
        }
        if OWN_ENV.contains(&e.name.as_str()) {
            return Err(format!("{} is winpool's own", e.name));
        }
        if !seen.insert(e.name.clone()) {
            return Err(format!("{} is given twice", e.name));
        }
        // The API server fills in v1; saying it keeps the live DaemonSet equal
        // to what winpool wants (no revert every round).
        if let Some(f) = e.value_from.as_mut().and_then(|v| v.field_ref.as_mut()) {
            f.api_version.get_or_insert_with(|| "v1".into());
        }
    }
    Ok(env)
}

/// `--agent-resources`: a JSON ResourceRequirements whose quantities parse.
pub fn parse_resources(s: &str) -> Result<ResourceRequirements, String> {
    let mut given: serde_json::Value = serde_json::from_str(s).map_err(|e| format!("not a JSON ResourceRequirements object ({e})"))?;
    // A values file's `cpu: 0.5` is a YAML number, and reaches here as one.
    for kind in ["requests", "limits"] {
        for q in given.get_mut(kind).and_then(|l| l.as_object_mut()).into_iter().flat_map(|l| l.values_mut()) {
            if q.is_number() {
                *q = q.to_string().into();
            }
        }
    }
    let r: ResourceRequirements = parse_strict(&given.to_string()).map_err(|e| format!("not a JSON ResourceRequirements object ({e})"))?;
    for (kind, list) in [("requests", &r.requests), ("limits", &r.limits)] {
        for (name, q) in list.iter().flatten() {
            super::quantity::Quantity::parse(&q.0)
                .ok_or_else(|| format!("{kind}.{name}: {:?} is not a Kubernetes quantity such as 100m or 128Mi", q.0))?;
        }
    }
    Ok(r)
}

/// JSON into a Kubernetes type, refusing fields the type does not have (its
/// deserializer drops them: a misspelt `valuFrom` would vanish unsaid).
fn parse_strict<T: serde::de::DeserializeOwned + serde::Serialize>(s: &str) -> Result<T, String> {
    let given: serde_json::Value = serde_json::from_str(s).map_err(|e| e.to_string())?;
    let typed: T = serde_json::from_value(given.clone()).map_err(|e| e.to_string())?;
    match unknown_field(&given, &serde_json::to_value(&typed).map_err(|e| e.to_string())?, "") {
        Some(path) => Err(format!("unknown field {path}")),
        None => Ok(typed),
    }
}

/// The first path given that the typed value does not carry (empty values aside).
fn unknown_field(given: &serde_json::Value, typed: &serde_json::Value, at: &str) -> Option<String> {
    use serde_json::Value;
    match (given, typed) {
        (Value::Object(g), Value::Object(t)) => g.iter().find_map(|(k, gv)| match t.get(k) {
            Some(tv) => unknown_field(gv, tv, &format!("{at}.{k}")),
            None if is_empty(gv) => None,
            None => Some(format!("{at}.{k}").trim_start_matches('.').to_string()),
        }),
        (Value::Array(g), Value::Array(t)) => {
            g.iter().zip(t).enumerate().find_map(|(i, (gv, tv))| unknown_field(gv, tv, &format!("{at}[{i}]")))
        }
        _ => None,
    }
}

/// `--agent-api-server`: `host:port` or an `https://` URL, as the agent takes it.
pub fn parse_api_server(s: &str) -> Result<String, String> {
    let host = s.strip_prefix("https://").unwrap_or(s);
    if s.is_empty() || s.contains(char::is_whitespace) || host.is_empty() || host.contains("://") {
        return Err(format!("{s:?} is not host:port or an https:// URL of the API server"));
    }
    Ok(s.to_string())
}

/// `--agent-node-selector`: `key=value` pairs; the pool's own keys are winpool's.
pub fn parse_node_selector(s: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for pair in s.split(',').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').ok_or_else(|| format!("{pair:?} is not key=value"))?;
        if k.is_empty() {
            return Err(format!("{pair:?} has no key"));
        }
        if k == names::LABEL_OS || k == names::LABEL_POOL {
            return Err(format!("{k} is set by winpool (the pool's nodes)"));
        }
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

/// `winpool-<pool>`.
pub fn daemonset_name(pool: &str) -> String {
    format!("winpool-{pool}")
}

pub fn owner_reference(pool: &WindowsNodePool) -> OwnerReference {
    OwnerReference {
        api_version: "winpool.dev/v1alpha1".into(),
        kind: "WindowsNodePool".into(),
        name: pool.metadata.name.clone().unwrap_or_default(),
        uid: pool.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn env(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar { name: name.into(), value: Some(value.into()), value_from: None }
}

fn env_field(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: None,
        value_from: Some(EnvVarSource {
            // The API server writes v1 when it is left out; saying it keeps the
            // live DaemonSet equal to what winpool wants (no revert every round).
            field_ref: Some(ObjectFieldSelector { field_path: path.into(), api_version: Some("v1".into()) }),
            ..Default::default()
        }),
    }
}

pub fn agent_daemonset(pool: &WindowsNodePool, namespace: &str, agent: &AgentSettings) -> DaemonSet {
    let pool_name = pool.metadata.name.clone().unwrap_or_default();
    let selector_labels: BTreeMap<String, String> =
        [(LABEL_APP.to_string(), APP_AGENT.to_string()), (names::LABEL_POOL.to_string(), pool_name.clone())].into();
    let options = &agent.pod;
    let mut node_selector = options.node_selector.clone();
    node_selector.extend([(names::LABEL_OS.to_string(), "windows".to_string()), (names::LABEL_POOL.to_string(), pool_name.clone())]);
    let image = if pool.spec.agent.image.is_empty() { agent.image.clone() } else { pool.spec.agent.image.clone() };
    let mut env_vars = vec![
        env_field(ENV_NODE_NAME, "spec.nodeName"),
        env_field(ENV_POD_NAMESPACE, "metadata.namespace"),
        env(ENV_POOL, pool_name.clone()),
        env(ENV_HNS_INTERVAL, agent.hns_interval.clone()),
        env(ENV_MAX_ATTEMPTS, agent.max_attempts.to_string()),
    ];
    env_vars.extend(options.api_server.iter().map(|s| env(ENV_API_SERVER, s.clone())));
    if !pool.spec.rollout.staging {
        env_vars.push(env(ENV_STAGING, "Disabled"));
    }
    if let Some(bytes) = pool.spec.rollout.staging_bandwidth.as_deref().and_then(bytes_of) {
        env_vars.push(env(ENV_STAGING_BANDWIDTH, bytes.to_string()));
    }
    if let Some(policy) = &pool.spec.os.patch_policy {
        env_vars.push(env(ENV_PATCH_CHECK_INTERVAL, policy.check_interval.clone()));
    }
    env_vars.extend(options.extra_env.iter().cloned());
    let container = Container {
        name: "agent".into(),
        image: Some(image),
        env: Some(env_vars),
        resources: Some(options.resources.clone().unwrap_or_else(default_resources)),
        ..Default::default()
    };
    let pod = host_process_pod(node_selector, container);
    // A new agent replaces the old one node by node; the state it needs
    // (revision, attempts) is on the host and the Node, so an agent replaced
    // mid-apply carries on where the old one stopped.
    let strategy = DaemonSetUpdateStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDaemonSet { max_unavailable: Some(IntOrString::String("10%".into())), max_surge: None }),
    };
    let pod = PodSpec {
        service_account_name: Some(AGENT_SERVICE_ACCOUNT.into()),
        termination_grace_period_seconds: Some(30),
        image_pull_secrets: pull_secrets(options),
        priority_class_name: options.priority_class_name.clone().or(pod.priority_class_name.clone()),
        ..pod
    };
    pool_daemonset(pool, namespace, daemonset_name(&pool_name), selector_labels, Some(strategy), pod)
}

/// One of the pool's DaemonSets in the agents' namespace (the agent's, CSI
/// Proxy's, the pod network's): its pods labelled with `selector_labels`
/// and winpool's managed-by, owned by the pool, with the hash drift is
/// judged by.
pub fn pool_daemonset(
    pool: &WindowsNodePool,
    namespace: &str,
    name: String,
    selector_labels: BTreeMap<String, String>,
    update_strategy: Option<DaemonSetUpdateStrategy>,
    pod: PodSpec,
) -> DaemonSet {
    let mut labels = selector_labels.clone();
    labels.insert(LABEL_MANAGED_BY.into(), "winpool".into());
    let ds = DaemonSet {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.into()),
            labels: Some(labels.clone()),
            owner_references: Some(vec![owner_reference(pool)]),
            ..Default::default()
        },
        spec: Some(DaemonSetSpec {
            selector: LabelSelector { match_labels: Some(selector_labels), match_expressions: None },
            update_strategy,
            template: PodTemplateSpec { metadata: Some(ObjectMeta { labels: Some(labels), ..Default::default() }), spec: Some(pod) },
            ..Default::default()
        }),
        status: None,
    };
    with_spec_hash(ds)
}

/// The admin's pull secrets, as a pod names them (none: unset).
pub fn pull_secrets(options: &AgentPodOptions) -> Option<Vec<LocalObjectReference>> {
    let secrets: Vec<LocalObjectReference> =
        options.image_pull_secrets.iter().map(|name| LocalObjectReference { name: name.clone() }).collect();
    (!secrets.is_empty()).then_some(secrets)
}

/// A pod of winpool's on the Windows host itself: a HostProcess container as
/// SYSTEM on the host network, critical to the node, tolerating every taint.
/// It must run on the node it serves whatever keeps other pods off it: the
/// cordon, the HNS taint, NotReady after a reboot, a provider's own taints.
pub fn host_process_pod(node_selector: BTreeMap<String, String>, container: Container) -> PodSpec {
    PodSpec {
        host_network: Some(true),
        priority_class_name: Some("system-node-critical".into()),
        node_selector: Some(node_selector),
        security_context: Some(PodSecurityContext {
            windows_options: Some(WindowsSecurityContextOptions {
                host_process: Some(true),
                run_as_user_name: Some("NT AUTHORITY\\SYSTEM".into()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        tolerations: Some(vec![Toleration { operator: Some("Exists".into()), ..Default::default() }]),
        containers: vec![container],
        ..Default::default()
    }
}

/// The DaemonSet with the hash of what winpool sets on it (see [`drift`]).
pub fn with_spec_hash(mut ds: DaemonSet) -> DaemonSet {
    let hash = spec_hash(&ds);
    ds.metadata.annotations = Some([(ANN_SPEC_HASH.to_string(), hash)].into());
    ds
}

/// A short hash of what winpool sets on the DaemonSet, so a round re-applies it
/// only when the agent changed, not on every reconcile.
fn spec_hash(ds: &DaemonSet) -> String {
    let canonical = serde_json::to_vec(&serde_json::to_value((&ds.metadata.labels, &ds.spec)).expect("serializes")).expect("serializes");
    Sha256::digest(&canonical).iter().take(6).map(|b| format!("{b:02x}")).collect()
}

/// How a pool's agent DaemonSet stands against what winpool would apply now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentDrift {
    UpToDate,
    Missing,
    /// winpool's own wish changed (agent image or settings): roll the agents.
    Outdated,
    /// Someone edited what winpool sets: put it back, and say so.
    HandEdited,
}

pub fn drift(existing: Option<&DaemonSet>, wanted: &DaemonSet) -> AgentDrift {
    let Some(existing) = existing else { return AgentDrift::Missing };
    let hash = |d: &DaemonSet| d.metadata.annotations.as_ref().and_then(|a| a.get(ANN_SPEC_HASH)).cloned();
    if hash(existing).is_none() || hash(existing) != hash(wanted) {
        return AgentDrift::Outdated;
    }
    let json = |d: &DaemonSet| serde_json::to_value((&d.metadata.labels, &d.spec)).unwrap_or_default();
    let (live, want) = (json(existing), json(wanted));
    // Where the server adds nothing, an added entry is an edit too: an extra
    // nodeSelector key moves the agents off their nodes, an extra env var or
    // toleration changes what runs as SYSTEM.
    let exact = EXACT.iter().all(|p| live.pointer(p) == want.pointer(p));
    if exact && contains(&live, &want, false) { AgentDrift::UpToDate } else { AgentDrift::HandEdited }
}

/// Parts of (labels, spec) the API server never defaults, compared whole.
const EXACT: &[&str] = &[
    "/1/selector",
    "/1/template/spec/nodeSelector",
    "/1/template/spec/tolerations",
    "/1/template/spec/serviceAccountName",
    "/1/template/spec/imagePullSecrets",
    "/1/template/spec/priorityClassName",
    "/1/template/spec/securityContext/windowsOptions",
    "/1/template/spec/containers/0/image",
    "/1/template/spec/containers/0/env",
];

/// Whether every field `wanted` sets has that value in `live`. The API server
/// adds defaults (dnsPolicy, terminationMessagePath, ...) but never drops what
/// was applied, so anything missing or different was changed by hand. Under
/// `resources` it writes quantities its own way ("0.5" comes back "500m"), so
/// there they are compared by value.
fn contains(live: &serde_json::Value, wanted: &serde_json::Value, quantities: bool) -> bool {
    use serde_json::Value;
    match (live, wanted) {
        (_, Value::Null) => true,
        (Value::Object(l), Value::Object(w)) => {
            w.iter().all(|(k, wv)| l.get(k).map_or(is_empty(wv), |lv| contains(lv, wv, quantities || k == "resources")))
        }
        (Value::Array(l), Value::Array(w)) => l.len() == w.len() && l.iter().zip(w).all(|(a, b)| contains(a, b, quantities)),
        (Value::Null, w) => is_empty(w),
        (Value::String(l), Value::String(w)) if quantities && l != w => same_quantity(l, w),
        _ => live == wanted,
    }
}

fn same_quantity(a: &str, b: &str) -> bool {
    let parse = super::quantity::Quantity::parse;
    matches!((parse(a), parse(b)), (Some(x), Some(y)) if x == y)
}

fn is_empty(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => true,
        serde_json::Value::Array(a) => a.is_empty(),
        serde_json::Value::Object(o) => o.values().all(is_empty),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(name: &str, extra: &str) -> WindowsNodePool {
        crate::test_builders::pool(name).with(extra).build()
    }

    fn settings() -> AgentSettings {
        AgentSettings { image: "winpool/agent:dev".into(), hns_interval: "15s".into(), max_attempts: 3, pod: AgentPodOptions::default() }
    }

    #[test]
    fn one_hostprocess_agent_per_pool_under_its_own_identity() {
        let ds = agent_daemonset(&pool("win22", "runtime: {version: 1.7.22}"), "winpool-agents", &settings());
        assert_eq!(ds.metadata.name.as_deref(), Some("winpool-win22"));
        let pod = ds.spec.unwrap().template.spec.unwrap();
        let sel = pod.node_selector.unwrap();
        assert_eq!(sel.get("winpool.dev/pool").map(String::as_str), Some("win22"));
        assert_eq!(sel.get("winpool.dev/revision"), None, "the pod must not follow the revision label");
        assert_eq!(sel["kubernetes.io/os"], "windows");
        assert_eq!(pod.service_account_name.as_deref(), Some("winpool-agent"));
        assert_eq!(pod.host_network, Some(true));
        let win = pod.security_context.unwrap().windows_options.unwrap();
        assert_eq!(win.host_process, Some(true));
        assert_eq!(win.run_as_user_name.as_deref(), Some("NT AUTHORITY\\SYSTEM"));
        let tolerations = pod.tolerations.unwrap();
        assert_eq!(tolerations.len(), 1);
        assert_eq!((tolerations[0].key.as_deref(), tolerations[0].operator.as_deref()), (None, Some("Exists")), "tolerates every taint");
        let env = pod.containers[0].env.clone().unwrap();
        let names: Vec<&str> = env.iter().map(|e| e.name.as_str()).collect();
        assert!(!names.iter().any(|n| n.contains("PATCH") || n.contains("REVISION")), "no revision config in the pod: {names:?}");
        assert_eq!(pod.containers[0].image.as_deref(), Some("winpool/agent:dev"));
        let owner = &ds.metadata.owner_references.unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str(), owner.controller), ("WindowsNodePool", "uid-1", Some(true)));
    }

    #[test]
    fn a_new_revision_leaves_the_daemonset_as_it_is_and_a_new_agent_changes_it() {
        let a = agent_daemonset(&pool("w", ""), "ns", &settings());
        let new_revision = agent_daemonset(&pool("w", "runtime: {version: 1.7.22}"), "ns", &settings());
        assert_eq!(drift(Some(&a), &new_revision), AgentDrift::UpToDate, "a rollout must not touch the agent pods");
        assert_eq!(drift(None, &a), AgentDrift::Missing);
        let pool_image = agent_daemonset(&pool("w", "agent: {image: my/agent:1}"), "ns", &settings());
        assert_eq!(drift(Some(&a), &pool_image), AgentDrift::Outdated);
        assert_eq!(pool_image.spec.unwrap().template.spec.unwrap().containers[0].image.as_deref(), Some("my/agent:1"));
        let other = AgentSettings { hns_interval: "30s".into(), ..settings() };
        assert_eq!(drift(Some(&a), &agent_daemonset(&pool("w", ""), "ns", &other)), AgentDrift::Outdated);
        let mut edited = a.clone();
        edited.metadata.annotations = None;
        assert_eq!(drift(Some(&edited), &a), AgentDrift::Outdated, "a DaemonSet without winpool's hash is re-applied");
    }

    /// What the API server adds is no drift; what a person changes is.
    #[test]
    fn a_hand_edit_of_what_winpool_sets_is_drift_and_server_defaults_are_not() {
        let wanted = agent_daemonset(&pool("w", ""), "ns", &settings());
        let mut live = serde_json::to_value(&wanted).unwrap();
        let container = &mut live["spec"]["template"]["spec"]["containers"][0];
        container["terminationMessagePath"] = "/dev/termination-log".into();
        container["imagePullPolicy"] = "IfNotPresent".into();
        live["spec"]["template"]["spec"]["dnsPolicy"] = "ClusterFirst".into();
        live["spec"]["revisionHistoryLimit"] = 10.into();
        live["metadata"]["labels"]["team"] = "extra labels are fine".into();
        let defaulted: DaemonSet = serde_json::from_value(live.clone()).unwrap();
        assert_eq!(drift(Some(&defaulted), &wanted), AgentDrift::UpToDate);

        type Edit = fn(&mut serde_json::Value);
        let edits: [(&str, Edit); 6] = [
            ("image", |v| v["spec"]["template"]["spec"]["containers"][0]["image"] = "evil/agent:1".into()),
            ("a toleration removed", |v| v["spec"]["template"]["spec"]["tolerations"] = serde_json::json!([])),
            ("an env var dropped", |v| {
                v["spec"]["template"]["spec"]["containers"][0]["env"].as_array_mut().unwrap().pop();
            }),
            ("the service account", |v| v["spec"]["template"]["spec"]["serviceAccountName"] = "default".into()),
            ("a nodeSelector key added", |v| v["spec"]["template"]["spec"]["nodeSelector"]["never"] = "true".into()),
            ("a second container", |v| {
                let c = v["spec"]["template"]["spec"]["containers"][0].clone();
                v["spec"]["template"]["spec"]["containers"].as_array_mut().unwrap().push(c);
            }),
        ];
        for (what, edit) in edits {
            let mut v = live.clone();
            edit(&mut v);
            let ds: DaemonSet = serde_json::from_value(v).unwrap();
            assert_eq!(drift(Some(&ds), &wanted), AgentDrift::HandEdited, "{what}");
        }
    }

    fn admin_options() -> AgentPodOptions {
        AgentPodOptions {
            image_pull_secrets: vec!["regcred".into()],
            extra_env: parse_extra_env(
                r#"[{"name":"HTTPS_PROXY","value":"http://proxy:3128"},{"name":"HOST_IP","valueFrom":{"fieldRef":{"fieldPath":"status.hostIP"}}}]"#,
            )
            .unwrap(),
            resources: Some(parse_resources(r#"{"requests":{"cpu":0.1,"memory":"128Mi"},"limits":{"memory":"0.5Gi"}}"#).unwrap()),
            api_server: Some("https://10.1.2.3:6443".into()),
            node_selector: parse_node_selector("agent.example.com/allowed=true").unwrap(),
            priority_class_name: Some("winpool-agents".into()),
        }
    }

    /// The values of the agent's variable `name` for a pool with `extra`.
    fn agent_env(extra: &str, name: &str) -> Vec<String> {
        let ds = agent_daemonset(&pool("w", extra), "ns", &settings());
        let env = ds.spec.unwrap().template.spec.unwrap().containers[0].env.clone().unwrap();
        env.iter().filter(|e| e.name == name).map(|e| e.value.clone().unwrap()).collect()
    }

    #[test]
    fn a_pool_that_does_not_stage_tells_its_agents_and_one_that_does_is_left_as_it_was() {
        let staging = |extra: &str| agent_env(extra, "WINPOOL_STAGING");
        assert_eq!(staging("rollout: {staging: false}"), ["Disabled"]);
        assert!(staging("").is_empty() && staging("rollout: {staging: true}").is_empty());
    }

    #[test]
    fn a_pool_that_paces_its_staging_tells_its_agents_in_bytes_a_second() {
        let bandwidth = |extra: &str| agent_env(extra, "WINPOOL_STAGING_BANDWIDTH");
        assert_eq!(bandwidth("rollout: {stagingBandwidth: 50Mi}"), ["52428800"]);
        assert_eq!(bandwidth("rollout: {stagingBandwidth: 512Ki}"), ["524288"]);
        assert_eq!(bandwidth("rollout: {stagingBandwidth: \"1000000\"}"), ["1000000"]);
        assert!(bandwidth("").is_empty(), "unset: the agent's default, and the DaemonSet as it was");
    }

    #[test]
    fn what_the_admin_sets_reaches_the_agent_pods_after_winpools_own() {
        let ds = agent_daemonset(&pool("w", ""), "ns", &AgentSettings { pod: admin_options(), ..settings() });
        let pod = ds.spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.image_pull_secrets, Some(vec![LocalObjectReference { name: "regcred".into() }]));
        assert_eq!(pod.priority_class_name.as_deref(), Some("winpool-agents"));
        let sel = pod.node_selector.unwrap();
        assert_eq!(
            sel.into_iter().collect::<Vec<_>>(),
            [("agent.example.com/allowed", "true"), ("kubernetes.io/os", "windows"), ("winpool.dev/pool", "w")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
        );
        let c = &pod.containers[0];
        let env: Vec<(&str, Option<&str>)> = c.env.iter().flatten().map(|e| (e.name.as_str(), e.value.as_deref())).collect();
        assert_eq!(&env[..5].iter().map(|e| e.0).collect::<Vec<_>>(), &OWN_ENV[..5], "winpool's own first");
        assert_eq!(&env[5..7], &[("WINPOOL_API_SERVER", Some("https://10.1.2.3:6443")), ("HTTPS_PROXY", Some("http://proxy:3128"))]);
        assert_eq!(env[7].0, "HOST_IP");
        let requests = c.resources.as_ref().unwrap().requests.as_ref().unwrap();
        assert_eq!(requests["cpu"].0, "0.1");

        let plain = agent_daemonset(&pool("w", ""), "ns", &settings()).spec.unwrap().template.spec.unwrap();
        assert_eq!(plain.image_pull_secrets, None);
        assert_eq!(plain.priority_class_name.as_deref(), Some("system-node-critical"));
        assert_eq!(plain.containers[0].resources, Some(default_resources()));
    }

    /// The API server writes quantities and field references its own way:
    /// that is no edit. An edit of what the admin set is.
    #[test]
    fn the_admins_settings_are_compared_as_the_api_server_returns_them() {
        let wanted = agent_daemonset(&pool("w", ""), "ns", &AgentSettings { pod: admin_options(), ..settings() });
        let mut live = serde_json::to_value(&wanted).unwrap();
        let container = &mut live["spec"]["template"]["spec"]["containers"][0];
        container["resources"]["requests"]["cpu"] = "100m".into();
        container["resources"]["limits"]["memory"] = "512Mi".into();
        assert_eq!(container["env"][7]["valueFrom"]["fieldRef"]["apiVersion"], "v1", "filled in as the server would");
        let served: DaemonSet = serde_json::from_value(live.clone()).unwrap();
        assert_eq!(drift(Some(&served), &wanted), AgentDrift::UpToDate);

        type Edit = fn(&mut serde_json::Value);
        let edits: [(&str, Edit); 5] = [
            ("a request changed", |v| v["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1".into()),
            ("the pull secret removed", |v| v["spec"]["template"]["spec"]["imagePullSecrets"] = serde_json::json!([])),
            ("the priority class", |v| v["spec"]["template"]["spec"]["priorityClassName"] = "system-node-critical".into()),
            ("the proxy", |v| v["spec"]["template"]["spec"]["containers"][0]["env"][6]["value"] = "http://other:3128".into()),
            ("the admin's node label", |v| {
                v["spec"]["template"]["spec"]["nodeSelector"].as_object_mut().unwrap().remove("agent.example.com/allowed");
            }),
        ];
        for (what, edit) in edits {
            let mut v = live.clone();
            edit(&mut v);
            let ds: DaemonSet = serde_json::from_value(v).unwrap();
            assert_eq!(drift(Some(&ds), &wanted), AgentDrift::HandEdited, "{what}");
        }
        let mut added = serde_json::to_value(agent_daemonset(&pool("w", ""), "ns", &settings())).unwrap();
        added["spec"]["template"]["spec"]["imagePullSecrets"] = serde_json::json!([{"name": "mine"}]);
        let plain = agent_daemonset(&pool("w", ""), "ns", &settings());
        assert_eq!(drift(Some(&serde_json::from_value(added).unwrap()), &plain), AgentDrift::HandEdited, "a pull secret added by hand");
    }

    #[test]
    fn bad_agent_settings_are_refused_with_what_is_wrong() {
        let refused = |r: Result<(), String>, says: &str| {
            let e = r.expect_err(says);
            assert!(e.contains(says), "{e:?} should say {says:?}");
        };
        refused(parse_extra_env(r#"[{"name":"NODE_NAME","value":"x"}]"#).map(drop), "NODE_NAME is winpool's own");
        refused(parse_extra_env(r#"[{"name":"WINPOOL_API_SERVER","value":"x"}]"#).map(drop), "--agent-api-server");
        refused(parse_extra_env(r#"[{"name":"A","value":"1"},{"name":"A","value":"2"}]"#).map(drop), "A is given twice");
        refused(parse_extra_env(r#"{"HTTPS_PROXY":"x"}"#).map(drop), "not a JSON list of EnvVar");
        refused(parse_resources(r#"{"requests":{"cpu":"lots"}}"#).map(drop), "requests.cpu: \"lots\" is not a Kubernetes quantity");
        refused(parse_resources(r#"{"request":{"cpu":"1"}}"#).map(drop), "not a JSON ResourceRequirements object (unknown field request)");
        refused(
            parse_extra_env(r#"[{"name":"A","valuFrom":{"fieldRef":{"fieldPath":"spec.nodeName"}}}]"#).map(drop),
            "unknown field [0].valuFrom",
        );
        refused(parse_api_server("http://10.0.0.1:6443").map(drop), "not host:port or an https:// URL");
        refused(parse_api_server("").map(drop), "not host:port");
        refused(parse_node_selector("kubernetes.io/os=linux").map(drop), "kubernetes.io/os is set by winpool");
        refused(parse_node_selector("novalue").map(drop), "\"novalue\" is not key=value");
        assert_eq!(parse_api_server("api.example.com:6443").as_deref(), Ok("api.example.com:6443"));
        assert_eq!(parse_node_selector("").unwrap(), BTreeMap::new());
    }
}
