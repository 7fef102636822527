//! `winpool sim`: a simulated Windows fleet and agent, for clusters without Windows hosts.
//!
//! Creates kwok-managed Nodes that look like Windows Server nodes to the API
//! (labels, nodeInfo), and plays the agent: when a winpool agent pod is running
//! on one of its nodes, it waits `--apply-seconds`, then reports like the real
//! agent would (annotations) and updates what the kubelet would report after
//! a reboot (kernelVersion, containerRuntimeVersion). Failures are injected at
//! `--fail-rate` (seeded) or on named nodes.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tracing::{info, warn};

use crate::api::{OsVersion, names};
use crate::daemonset::{APP_AGENT, LABEL_APP};
use crate::hns::HnsTracker;
use crate::versions::{Version, WindowsBuild};

#[derive(Debug, Clone)]
pub struct SimSettings {
    pub nodes: usize,
    pub name_prefix: String,
    pub labels: BTreeMap<String, String>,
    pub os: OsVersion,
    pub build: WindowsBuild,
    pub containerd: Version,
    pub apply_seconds: f64,
    pub fail_rate: f64,
    pub fail_nodes: HashSet<String>,
    pub agent_namespace: String,
    pub seed: u64,
    pub create: bool,
    /// What the simulated agent reports about HNS.
    pub hns: HnsReport,
    /// How long a simulated reboot keeps the node NotReady (0 = no reboot).
    pub reboot_seconds: f64,
}

/// How the simulated agent reports `winpool.dev/hns-*` counts.
#[derive(Debug, Clone, PartialEq)]
pub enum HnsReport {
    /// Never (the node's HNS readiness stays Unknown).
    Off,
    /// Always these counts (load balancers, endpoints).
    Fixed(i64, i64),
    /// What kube-proxy would have programmed: the cluster's expected counts,
    /// reached `sync_seconds` after the reboot (0 before), and kept current.
    Auto { sync_seconds: f64 },
}

/// A node carrying this label set to "true" always fails its apply (deterministic tests).
pub const SIM_FAIL_LABEL: &str = "winpool.dev/sim-fail";

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("--build {build} is not a build of {os} (10.0.{want}.x)")]
    BuildMismatch { build: String, os: OsVersion, want: u32 },
    #[error("--build {0} needs a revision, e.g. 10.0.20348.2700")]
    NoRevision(String),
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

impl SimSettings {
    pub fn validate(&self) -> Result<(), SimError> {
        if self.build.build != self.os.build() {
            return Err(SimError::BuildMismatch { build: self.build.to_string(), os: self.os, want: self.os.build() });
        }
        if self.build.revision.is_none() {
            return Err(SimError::NoRevision(self.build.to_string()));
        }
        Ok(())
    }

    pub fn node_name(&self, i: usize) -> String {
        format!("{}{i}", self.name_prefix)
    }
}

/// A Windows node as the kubelet of a fresh Windows Server machine would register it.
pub fn simulated_node(s: &SimSettings, name: &str) -> Node {
    let mut labels = s.labels.clone();
    labels.insert("kubernetes.io/os".into(), "windows".into());
    labels.insert("kubernetes.io/arch".into(), "amd64".into());
    labels.insert("kubernetes.io/hostname".into(), name.into());
    labels.insert(names::LABEL_WINDOWS_BUILD.into(), format!("10.0.{}", s.os.build()));
    labels.insert("type".into(), "kwok".into());
    let qty = |v: &str| Quantity(v.into());
    let resources: BTreeMap<String, Quantity> =
        [("cpu".into(), qty("16")), ("memory".into(), qty("64Gi")), ("pods".into(), qty("110"))].into();
    let os_image = match s.os {
        OsVersion::Ltsc2019 => "Windows Server 2019 Datacenter",
        OsVersion::Ltsc2022 => "Windows Server 2022 Datacenter",
        OsVersion::Ltsc2025 => "Windows Server 2025 Datacenter",
    };
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels),
            // kwok manages exactly the nodes carrying this annotation.
            annotations: Some([("kwok.x-k8s.io/node".to_string(), "fake".to_string())].into()),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            allocatable: Some(resources.clone()),
            capacity: Some(resources),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "False".into(),
                reason: Some("Registering".into()),
                ..Default::default()
            }]),
            node_info: Some(NodeSystemInfo {
                architecture: "amd64".into(),
                operating_system: "windows".into(),
                os_image: os_image.into(),
                kernel_version: s.build.to_string(),
                container_runtime_version: format!("containerd://{}", s.containerd),
                kubelet_version: "v1.36.3".into(),
                kube_proxy_version: "v1.36.3".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
    }
}

/// What the simulated agent will report for one apply.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentJob {
    pub node: String,
    pub revision: String,
    pub patch_level: Option<String>,
    pub containerd: Option<String>,
    pub cni_mode: Option<String>,
    pub csi_proxy: Option<String>,
}

/// Read the agent's configuration from its pod, as the real agent reads its environment.
pub fn job_from_pod(pod: &Pod) -> Option<AgentJob> {
    let spec = pod.spec.as_ref()?;
    let node = spec.node_name.clone()?;
    let agent = spec.containers.iter().find(|c| c.name == "agent")?;
    let env: BTreeMap<&str, &str> = agent.env.iter().flatten().filter_map(|e| Some((e.name.as_str(), e.value.as_deref()?))).collect();
    Some(AgentJob {
        node,
        revision: env.get("WINPOOL_REVISION")?.to_string(),
        patch_level: env.get("WINPOOL_PATCH_LEVEL").map(|s| s.to_string()),
        containerd: env.get("WINPOOL_CONTAINERD_VERSION").map(|s| s.to_string()),
        cni_mode: env.get("WINPOOL_CNI_MODE").map(|s| s.to_string()),
        csi_proxy: env.get("WINPOOL_CSI_PROXY_VERSION").map(|s| s.to_string()),
    })
}

pub async fn create_nodes(client: &Client, s: &SimSettings) -> Result<(), SimError> {
    let api: Api<Node> = Api::all(client.clone());
    let mut created = 0;
    for i in 0..s.nodes {
        let name = s.node_name(i);
        match api.create(&PostParams::default(), &simulated_node(s, &name)).await {
            Ok(_) => created += 1,
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    info!(created, total = s.nodes, prefix = %s.name_prefix, os = %s.os, build = %s.build, "simulated Windows nodes ready");
    Ok(())
}

async fn apply_job(client: Client, s: Arc<SimSettings>, job: AgentJob, fail: bool, rebooted: Rebooted) -> Result<(), kube::Error> {
    tokio::time::sleep(Duration::from_secs_f64(s.apply_seconds)).await;
    let api: Api<Node> = Api::all(client);
    let Some(node) = api.get_opt(&job.node).await? else { return Ok(()) };
    // The operator moved the node to another revision meanwhile: this pod is stale.
    if node.labels().get(names::LABEL_REVISION) != Some(&job.revision) {
        return Ok(());
    }
    let fail = fail || node.labels().get(SIM_FAIL_LABEL).is_some_and(|v| v == "true");
    if fail {
        let body = json!({"metadata": {"annotations": {
            names::ANN_APPLIED_REVISION: job.revision,
            names::ANN_APPLY_STATUS: names::APPLY_FAILED,
            names::ANN_APPLY_MESSAGE: "simulated failure: the cumulative update returned 0x800f0922",
        }}});
        api.patch(&job.node, &PatchParams::default(), &Patch::Merge(body)).await?;
        warn!(node = %job.node, revision = %job.revision, "simulated agent: apply failed (injected)");
        return Ok(());
    }
    // The update reboots the node: NotReady for a moment, like a real Windows host.
    if s.reboot_seconds > 0.0 {
        set_ready(&api, &job.node, false).await?;
        tokio::time::sleep(Duration::from_secs_f64(s.reboot_seconds)).await;
    }
    // What the kubelet reports after the update and reboot.
    let mut info = serde_json::Map::new();
    if let Some(p) = &job.patch_level {
        let current = node.status.as_ref().and_then(|st| st.node_info.as_ref()).map(|i| i.kernel_version.clone()).unwrap_or_default();
        let target = p.parse::<WindowsBuild>().ok();
        let keep = matches!((current.parse::<WindowsBuild>(), target), (Ok(c), Some(t)) if c.satisfies(&t));
        if !keep {
            info.insert("kernelVersion".into(), json!(p));
        }
    }
    if let Some(c) = &job.containerd {
        info.insert("containerRuntimeVersion".into(), json!(format!("containerd://{c}")));
    }
    if !info.is_empty() {
        api.patch_status(&job.node, &PatchParams::default(), &Patch::Merge(json!({"status": {"nodeInfo": info}}))).await?;
    }
    if s.reboot_seconds > 0.0 {
        set_ready(&api, &job.node, true).await?;
    }
    let mut anns = serde_json::Map::new();
    anns.insert(names::ANN_APPLIED_REVISION.into(), json!(job.revision));
    anns.insert(names::ANN_APPLY_STATUS.into(), json!(names::APPLY_SUCCEEDED));
    anns.insert(names::ANN_APPLY_MESSAGE.into(), json!(format!("applied revision {}", job.revision)));
    anns.insert(names::ANN_CNI_MODE.into(), json!(job.cni_mode.clone().unwrap_or_else(|| "overlay".into())));
    anns.insert(names::ANN_CSI_PROXY_VERSION.into(), job.csi_proxy.as_ref().map(|v| json!(v)).unwrap_or(serde_json::Value::Null));
    match &s.hns {
        HnsReport::Off => {}
        HnsReport::Fixed(lb, ep) => {
            anns.insert(names::ANN_HNS_LOAD_BALANCERS.into(), json!(lb.to_string()));
            anns.insert(names::ANN_HNS_ENDPOINTS.into(), json!(ep.to_string()));
        }
        // Just rebooted: HNS holds nothing yet; the refresher reports the catch-up.
        HnsReport::Auto { .. } => {
            anns.insert(names::ANN_HNS_LOAD_BALANCERS.into(), json!("0"));
            anns.insert(names::ANN_HNS_ENDPOINTS.into(), json!("0"));
        }
    }
    api.patch(&job.node, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": anns}}))).await?;
    info!(node = %job.node, revision = %job.revision, "simulated agent: applied");
    if let HnsReport::Auto { sync_seconds } = s.hns {
        rebooted.lock().expect("lock").insert(job.node.clone(), std::time::Instant::now() + Duration::from_secs_f64(sync_seconds));
    }
    Ok(())
}

/// Keep every simulated node's HNS counts at what kube-proxy would have programmed
/// by now: nothing until its catch-up time after a reboot, then the cluster's totals.
async fn refresh_hns(client: Client, s: Arc<SimSettings>, tracker: Arc<Mutex<HnsTracker>>, rebooted: Rebooted) {
    let api: Api<Node> = Api::all(client);
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let totals = tracker.lock().expect("lock").totals();
        let Ok(nodes) = api.list(&kube::api::ListParams::default().labels("kubernetes.io/os=windows")).await else { continue };
        for n in nodes.items.iter().filter(|n| n.name_any().starts_with(&s.name_prefix)) {
            let name = n.name_any();
            // Only a node the agent has reported on carries counts; a pending reboot keeps its zeros.
            let Some(lb) = n.annotations().get(names::ANN_HNS_LOAD_BALANCERS) else { continue };
            let due = rebooted.lock().expect("lock").get(&name).copied();
            if due.is_some_and(|d| d > std::time::Instant::now()) {
                continue;
            }
            rebooted.lock().expect("lock").remove(&name);
            let ep = n.annotations().get(names::ANN_HNS_ENDPOINTS);
            if lb == &totals.0.to_string() && ep == Some(&totals.1.to_string()) {
                continue;
            }
            let body = json!({"metadata": {"annotations": {
                names::ANN_HNS_LOAD_BALANCERS: totals.0.to_string(),
                names::ANN_HNS_ENDPOINTS: totals.1.to_string(),
            }}});
            if let Err(e) = api.patch(&name, &PatchParams::default(), &Patch::Merge(body)).await {
                warn!(node = %name, error = %e, "simulated agent could not report HNS counts");
            }
        }
    }
}

type Rebooted = Arc<Mutex<std::collections::HashMap<String, std::time::Instant>>>;

/// Flip the node's Ready condition the way the kubelet does across a reboot.
async fn set_ready(api: &Api<Node>, node: &str, ready: bool) -> Result<(), kube::Error> {
    let now = jiff::Timestamp::now().to_string();
    let (status, reason, message) = if ready {
        ("True", "KubeletReady", "kubelet is posting ready status")
    } else {
        ("False", "KubeletNotReady", "simulated reboot after applying the update")
    };
    let body = json!({"status": {"conditions": [{
        "type": "Ready", "status": status, "reason": reason, "message": message,
        "lastHeartbeatTime": now, "lastTransitionTime": now,
    }]}});
    api.patch_status(node, &PatchParams::default(), &Patch::Strategic(body)).await?;
    Ok(())
}

/// Create the fleet (unless told not to) and play the agent until `shutdown`.
pub async fn run(client: Client, s: SimSettings, shutdown: impl std::future::Future<Output = ()>) -> Result<(), SimError> {
    s.validate()?;
    if s.create {
        create_nodes(&client, &s).await?;
    }
    let s = Arc::new(s);
    let rebooted: Rebooted = Arc::default();
    if matches!(s.hns, HnsReport::Auto { .. }) {
        let tracker = Arc::new(Mutex::new(HnsTracker::new()));
        crate::controller::spawn_hns_watches(&client, tracker.clone());
        tokio::spawn(refresh_hns(client.clone(), s.clone(), tracker, rebooted.clone()));
    }
    let rng = Arc::new(Mutex::new(SmallRng::seed_from_u64(s.seed)));
    let in_progress: Arc<Mutex<HashSet<(String, String)>>> = Arc::default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &s.agent_namespace);
    let cfg = watcher::Config::default().labels(&format!("{LABEL_APP}={APP_AGENT}"));
    let stream = watcher(pods, cfg).default_backoff().applied_objects();
    let nodes: Api<Node> = Api::all(client.clone());
    // Watch errors (an API server restart) are logged and the watcher's backoff
    // retries: the simulated fleet outlives a control-plane hiccup.
    let work = stream.for_each(|pod| {
        let (client, s, rng, in_progress, nodes, rebooted) =
            (client.clone(), s.clone(), rng.clone(), in_progress.clone(), nodes.clone(), rebooted.clone());
        async move {
            let pod = match pod {
                Ok(pod) => pod,
                Err(e) => {
                    warn!(error = %e, "agent pod watch error; retrying");
                    return;
                }
            };
            let running = pod.status.as_ref().and_then(|st| st.phase.as_deref()) == Some("Running");
            let Some(job) = job_from_pod(&pod).filter(|j| running && j.node.starts_with(&s.name_prefix)) else { return };
            let key = (job.node.clone(), job.revision.clone());
            if !in_progress.lock().expect("lock").insert(key.clone()) {
                return;
            }
            // Already reported for this revision (e.g. the sim restarted): nothing to do.
            if let Ok(Some(n)) = nodes.get_opt(&job.node).await
                && n.annotations().get(names::ANN_APPLIED_REVISION) == Some(&job.revision)
            {
                return;
            }
            let fail = s.fail_nodes.contains(&job.node) || rng.lock().expect("lock").random::<f64>() < s.fail_rate;
            tokio::spawn(async move {
                if let Err(e) = apply_job(client, s, job.clone(), fail, rebooted).await {
                    warn!(node = %job.node, error = %e, "simulated agent could not report; will retry on the next pod event");
                }
                in_progress.lock().expect("lock").remove(&key);
            });
        }
    });
    tokio::select! {
        () = work => Ok(()),
        _ = shutdown => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> SimSettings {
        SimSettings {
            nodes: 2,
            name_prefix: "win-".into(),
            labels: [("pool".to_string(), "a".to_string())].into(),
            os: OsVersion::Ltsc2022,
            build: "10.0.20348.2700".parse().unwrap(),
            containerd: "1.7.20".parse().unwrap(),
            apply_seconds: 0.0,
            fail_rate: 0.0,
            fail_nodes: HashSet::new(),
            agent_namespace: "winpool-agents".into(),
            seed: 1,
            create: true,
            hns: HnsReport::Off,
            reboot_seconds: 0.0,
        }
    }

    #[test]
    fn simulated_nodes_look_like_windows_server() {
        let n = simulated_node(&settings(), "win-0");
        let l = n.metadata.labels.unwrap();
        assert_eq!(l["kubernetes.io/os"], "windows");
        assert_eq!(l["node.kubernetes.io/windows-build"], "10.0.20348");
        assert_eq!(l["pool"], "a");
        let info = n.status.unwrap().node_info.unwrap();
        assert_eq!(info.kernel_version, "10.0.20348.2700");
        assert_eq!(info.container_runtime_version, "containerd://1.7.20");
        assert_eq!(n.metadata.annotations.unwrap()["kwok.x-k8s.io/node"], "fake");
    }

    #[test]
    fn mismatched_builds_are_refused() {
        let mut s = settings();
        s.build = "10.0.17763.100".parse().unwrap();
        assert!(matches!(s.validate(), Err(SimError::BuildMismatch { want: 20348, .. })));
        s.build = "10.0.20348".parse().unwrap();
        assert!(matches!(s.validate(), Err(SimError::NoRevision(_))));
    }
}
