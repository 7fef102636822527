//! The `WindowsNodePool` API (`winpool.dev/v1alpha1`) and the names winpool
//! writes on Nodes. This is the only place the CRD's shape is defined: the YAML
//! in `crds/` is generated from these types by `winpool crd`.
//!
//! Validation that a person should see at `kubectl apply` time lives here too,
//! as OpenAPI patterns/enums and CEL `x-kubernetes-validations`, so the API
//! server refuses bad input before the controller ever sees it.

// The kube derive's printcolumn(...) entries repeat `type_ = ...`, which clippy mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const GROUP: &str = "winpool.dev";
/// The single field manager every server-side apply and patch of winpool uses.
pub const FIELD_MANAGER: &str = "winpool";

/// Parameters of every non-apply write winpool makes (node patches, node
/// status, Leases, Events, the agent namespace): the one field manager, so
/// `kubectl get -o yaml --show-managed-fields` names winpool for all of them.
pub fn patch_params() -> kube::api::PatchParams {
    kube::api::PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }
}

pub fn post_params() -> kube::api::PostParams {
    kube::api::PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }
}

/// Node labels, annotations, taints and condition types: the fixed interface of SPEC §2/§3/§7.
pub mod names {
    pub const LABEL_OS: &str = "kubernetes.io/os";
    pub const LABEL_WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";
    pub const LABEL_POOL: &str = "winpool.dev/pool";
    pub const LABEL_REVISION: &str = "winpool.dev/revision";
    /// The state annotation mirrored as a label on failed nodes only
    /// (`kubectl get nodes -l winpool.dev/state=Failed`): see `NodeState::label`.
    pub const LABEL_STATE: &str = "winpool.dev/state";

    pub const ANN_APPLIED_REVISION: &str = "winpool.dev/applied-revision";
    pub const ANN_APPLY_STATUS: &str = "winpool.dev/apply-status";
    pub const ANN_APPLY_MESSAGE: &str = "winpool.dev/apply-message";
    pub const ANN_CSI_PROXY_VERSION: &str = "winpool.dev/csi-proxy-version";
    pub const ANN_CNI_MODE: &str = "winpool.dev/cni-mode";
    /// The agent's report of how containerd's service is installed:
    /// `containerd`, or `containerd (nssm)` under a service wrapper.
    pub const ANN_RUNTIME_SERVICE: &str = "winpool.dev/runtime-service";
    /// The agent's report of a CSI Proxy the node image runs as a host
    /// service whose pipes answer: `csi-proxy (nssm)` (AKS), `csiproxy`.
    pub const ANN_CSI_PROXY_HOST: &str = "winpool.dev/csi-proxy-host";
    /// winpool's mirror of that report as a label, which the CSI Proxy
    /// DaemonSets' node affinity excludes: a second CSI Proxy on the same
    /// pipes would crash-loop.
    pub const LABEL_CSI_PROXY_HOST: &str = "winpool.dev/csi-proxy-host";
    /// The agent's read-only checks of its host for the revision
    /// `ANN_PREFLIGHT_REVISION` names (its pool's target, before the node is
    /// started): `Ready`, or `Blocked: ` and the reasons. A node is cordoned
    /// only once its preflight passed for the revision it is started with.
    pub const ANN_PREFLIGHT: &str = "winpool.dev/preflight";
    pub const ANN_AGENT_VERSION: &str = "winpool.dev/agent-version";
    pub const ANN_PREFLIGHT_REVISION: &str = "winpool.dev/preflight-revision";
    pub const PREFLIGHT_READY: &str = "Ready";
    pub const PREFLIGHT_BLOCKED: &str = "Blocked: ";
    /// Marks (`true`) the revision ConfigMap of a pool's target revision: the
    /// agents watch it to preflight a revision before their node is started.
    pub const LABEL_TARGET: &str = "winpool.dev/target";
    /// When the operator put that mark on (RFC 3339): an agent that has not
    /// answered a whole nodeTimeout later is reported, not waited for.
    pub const ANN_TARGET_SINCE: &str = "winpool.dev/target-since";
    pub const ANN_HNS_LOAD_BALANCERS: &str = "winpool.dev/hns-load-balancers";
    pub const ANN_HNS_ENDPOINTS: &str = "winpool.dev/hns-endpoints";
    /// Set by winpool when it dropped a node's pre-update HNS counts: until the
    /// agent reports again, missing counts mean "not caught up", not "unknown".
    pub const ANN_HNS_AWAITING: &str = "winpool.dev/hns-awaiting-report";

    /// Per-node rollout state written by the operator, so a restarted operator
    /// resumes exactly where it was (SPEC §2).
    /// On a pool: "true" pauses it like spec.rollout.paused, outside the spec
    /// that GitOps owns (`kubectl winpool pause` writes it).
    pub const ANN_PAUSED: &str = "winpool.dev/paused";
    pub const ANN_STATE: &str = "winpool.dev/state";
    pub const ANN_STATE_SINCE: &str = "winpool.dev/state-since";
    /// When this node's rollout to its target revision began; nodeTimeout counts from here.
    pub const ANN_STARTED_AT: &str = "winpool.dev/started-at";
    /// The revision the node is being moved to while Draining (the label moves at Applying).
    pub const ANN_TARGET_REVISION: &str = "winpool.dev/target-revision";
    /// Present only when winpool itself cordoned the node: winpool never
    /// uncordons a node someone else cordoned.
    pub const ANN_CORDONED_BY_WINPOOL: &str = "winpool.dev/cordoned";
    pub const ANN_FAILURE_REASON: &str = "winpool.dev/failure-reason";
    pub const ANN_FAILURE_MESSAGE: &str = "winpool.dev/failure-message";
    /// Revisions already drained on this node; a node is never drained twice for one revision.
    pub const ANN_DRAINED_REVISION: &str = "winpool.dev/drained-revision";
    /// A node put back because a PodDisruptionBudget refused its evictions:
    /// which budget (namespace/name), and since when its drain has been blocked
    /// (drain.timeout counts from there, across the retries).
    pub const ANN_DRAIN_BLOCKED_BY: &str = "winpool.dev/drain-blocked-by";
    pub const ANN_DRAIN_BLOCKED_SINCE: &str = "winpool.dev/drain-blocked-since";

    /// A Secret winpool may send to a health gate's endpoint must carry this
    /// label (value "true"): a pool's author names the Secret and the URL, so
    /// no other Secret of the operator's namespace can be sent anywhere.
    pub const LABEL_GATE_CREDENTIALS: &str = "winpool.dev/health-gate-credentials";

    pub const TAINT_HNS_NOT_READY: &str = "winpool.dev/hns-not-ready";
    pub const NODE_CONDITION_HNS_READY: &str = "WindowsHNSReady";

    /// The kubelet's bootID when winpool started an update that needs a reboot.
    pub const ANN_BOOT_ID: &str = "winpool.dev/boot-id";
    pub const APPLY_APPLYING: &str = "Applying";
    pub const APPLY_REBOOTING: &str = "Rebooting";
    pub const APPLY_SUCCEEDED: &str = "Succeeded";
    pub const APPLY_FAILED: &str = "Failed";
}

/// Windows Server LTSC release of the nodes in a pool.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OsVersion {
    /// Windows Server 2019, build 17763.
    Ltsc2019,
    /// Windows Server 2022, build 20348.
    Ltsc2022,
    /// Windows Server 2025, build 26100.
    Ltsc2025,
}

impl OsVersion {
    pub const ALL: [OsVersion; 3] = [OsVersion::Ltsc2019, OsVersion::Ltsc2022, OsVersion::Ltsc2025];

    /// The OS build number every node of this release reports (`10.0.<build>`).
    pub fn build(self) -> u32 {
        match self {
            OsVersion::Ltsc2019 => 17763,
            OsVersion::Ltsc2022 => 20348,
            OsVersion::Ltsc2025 => 26100,
        }
    }

    pub fn from_build(build: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.build() == build)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OsVersion::Ltsc2019 => "ltsc2019",
            OsVersion::Ltsc2022 => "ltsc2022",
            OsVersion::Ltsc2025 => "ltsc2025",
        }
    }
}

impl std::fmt::Display for OsVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A pool of Windows nodes rolled, node by node, to one declared configuration.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "winpool.dev",
    version = "v1alpha1",
    kind = "WindowsNodePool",
    shortname = "wnp",
    category = "winpool",
    status = "WindowsNodePoolStatus",
    derive = "PartialEq",
    doc = "A pool of Windows nodes that winpool rolls, node by node, to one declared OS patch level, runtime, CNI mode and CSI Proxy version.",
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "OS", type_ = "string", json_path = ".spec.os.version"),
    printcolumn(name = "Patch", type_ = "string", json_path = ".spec.os.patchLevel", description = "Target minimum OS build.revision"),
    printcolumn(name = "Runtime", type_ = "string", json_path = ".spec.runtime.version", priority = "1"),
    printcolumn(name = "CNI", type_ = "string", json_path = ".spec.networking.cniMode", priority = "1"),
    printcolumn(name = "Nodes", type_ = "integer", json_path = ".status.nodes.total"),
    printcolumn(name = "Updated", type_ = "integer", json_path = ".status.nodes.updated"),
    printcolumn(name = "Failed", type_ = "integer", json_path = ".status.nodes.failed"),
    printcolumn(name = "HNS", type_ = "string", json_path = ".status.hns.state", description = "WithinLimits, NearLimit or Exceeded"),
    printcolumn(
        name = "Paused",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Paused\")].status",
        description = "By spec.rollout.paused, the winpool.dev/paused annotation or maxFailedNodes"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Progressing\")].reason",
        description = "Why the rollout moves or not: NodesUpdating, OutsideMaintenanceWindow, PreflightBlocked, …"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct WindowsNodePoolSpec {
    /// Which nodes belong to the pool. `kubernetes.io/os=windows` is always implied.
    pub node_selector: LabelSelector,
    /// The Windows Server release of the pool's nodes and the patch level they roll to.
    pub os: OsSpec,
    /// The container runtime the nodes run (containerd) and its version.
    #[serde(default)]
    pub runtime: RuntimeSpec,
    /// The CNI mode and kube-proxy settings the nodes must show.
    #[serde(default)]
    pub networking: NetworkingSpec,
    /// Storage components on the host (CSI Proxy).
    #[serde(default)]
    pub storage: StorageSpec,
    /// How the HNS capacity of the nodes is judged and shown.
    #[serde(default)]
    pub hns: HnsSpec,
    /// How nodes are rolled: how many at once, when, and what holds them.
    #[serde(default)]
    pub rollout: RolloutSpec,
    /// The node agent the operator runs on the pool's nodes.
    #[serde(default)]
    pub agent: AgentSpec,
}

/// The OS release and the minimum patch level every node must reach.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.patchLevel.startsWith('10.0.' + {'ltsc2019': '17763', 'ltsc2022': '20348', 'ltsc2025': '26100'}[self.version] + '.')",
    "messageExpression": "'os.patchLevel ' + self.patchLevel + ' is not a build of ' + self.version + ': ' + self.version + ' patch levels look like 10.0.' + {'ltsc2019': '17763', 'ltsc2022': '20348', 'ltsc2025': '26100'}[self.version] + '.<revision>'",
    "fieldPath": ".patchLevel",
    "reason": "FieldValueInvalid"
}]))]
pub struct OsSpec {
    /// ltsc2019 (build 17763), ltsc2022 (build 20348) or ltsc2025 (build 26100).
    pub version: OsVersion,
    /// Minimum `10.0.<build>.<revision>` every node must report as its kernelVersion, e.g. 10.0.20348.2762.
    #[schemars(regex(pattern = r"^10\.0\.[0-9]{5}\.[0-9]{1,6}$"), length(max = 24))]
    pub patch_level: String,
    /// Where the agent gets the updates that reach patchLevel. Omitted: Windows
    /// Update or WSUS, as the node is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updates: Option<OsUpdates>,
}

impl WindowsNodePool {
    /// The pool carries `winpool.dev/paused: "true"` (`kubectl winpool pause`).
    pub fn paused_by_annotation(&self) -> bool {
        self.metadata.annotations.as_ref().and_then(|a| a.get(names::ANN_PAUSED)).map(String::as_str) == Some("true")
    }

    /// Paused by its spec or by the annotation.
    pub fn paused(&self) -> bool {
        self.spec.rollout.paused || self.paused_by_annotation()
    }
}

/// The update source of a pool's nodes (read by the agent from the revision's ConfigMap).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.source == 'Packages' ? has(self.packages) && size(self.packages) > 0 : !has(self.packages) || size(self.packages) == 0",
    "message": "os.updates.packages lists the update files when source is Packages, and only then",
    "fieldPath": ".packages",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!has(self.kbs) || size(self.kbs) == 0 || self.source == 'WindowsUpdate'",
    "message": "os.updates.kbs pins what Windows Update or WSUS installs: it needs source WindowsUpdate (with Packages, the files are the pin)",
    "fieldPath": ".kbs",
    "reason": "FieldValueInvalid"
}]))]
pub struct OsUpdates {
    /// WindowsUpdate (Windows Update or WSUS, only the servicing stack and the
    /// newest cumulative update) or Packages (the files below).
    #[serde(default)]
    pub source: UpdateSource,
    /// .msu/.cab files in install order (servicing stack first), each checked
    /// against its sha256 before it is installed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub packages: Vec<UpdatePackage>,
    /// With source WindowsUpdate: install exactly these updates, by KB ID, in
    /// this order (servicing stack first), e.g. [KB5043936, KB5044281], instead
    /// of the newest cumulative update the source offers. Matched by KB ID, so
    /// it holds whatever the server's display language. A pinned KB the source
    /// does not offer is taken for installed; none offered fails the node,
    /// naming them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8), inner(regex(pattern = r"^KB[0-9]{6,8}$")))]
    pub kbs: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum UpdateSource {
    #[default]
    WindowsUpdate,
    Packages,
}

/// One update file: from an HTTPS URL or a path on the node, with its digest.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.url) != has(self.path)",
    "message": "an update package has either a url or a path, not both",
}, {
    "rule": "(has(self.url) ? self.url : self.path).lowerAscii().matches('\\\\.(msu|cab)$')",
    "message": "an update package is a .msu or .cab file",
}]))]
pub struct UpdatePackage {
    /// https:// URL the agent downloads the file from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^https://[^\s]+$"), length(max = 2048))]
    pub url: Option<String>,
    /// Absolute Windows path on the node (C:\updates\kb.msu, or a UNC \\server\share path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([A-Za-z]:\\|\\\\)[^\n]+$"), length(max = 1024))]
    pub path: Option<String>,
    /// SHA-256 of the file, 64 lower-case hex digits.
    #[schemars(regex(pattern = r"^[a-f0-9]{64}$"))]
    pub sha256: String,
}

/// A containerd release archive for Windows, with its digest.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeArchive {
    /// https:// URL of containerd-<version>-windows-amd64.tar.gz (a mirror the nodes can reach).
    #[schemars(regex(pattern = r"^https://[^\s]+\.tar\.gz$"), length(max = 2048))]
    pub url: String,
    /// SHA-256 of the archive, 64 lower-case hex digits.
    #[schemars(regex(pattern = r"^[a-f0-9]{64}$"))]
    pub sha256: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.name == 'containerd'",
    "messageExpression": "self.name == 'docker' ? 'runtime.name docker is not supported: dockershim was removed in Kubernetes 1.24; set runtime.name to containerd' : 'runtime.name ' + self.name + ' is not supported: only containerd runs Windows containers on Kubernetes'",
    "fieldPath": ".name",
    "reason": "FieldValueForbidden"
}]))]
pub struct RuntimeSpec {
    /// Container runtime; only `containerd` (default).
    #[serde(default = "default_runtime_name")]
    #[schemars(length(max = 32))]
    pub name: String,
    /// containerd version every node must run, e.g. 1.7.22. Omitted: the runtime version is not managed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^v?[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$"), length(max = 64))]
    pub version: Option<String>,
    /// Where the agent gets that containerd release. Omitted: the official
    /// GitHub release, checked against its published .sha256sum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<RuntimeArchive>,
    /// Whether winpool may replace a node's containerd when it is not at
    /// `version`. `InPlace`: the agent swaps the binaries (and migrates
    /// config.toml across a major version), proves the new runtime over CRI
    /// and rolls back otherwise. `VerifyOnly`: the node must already run it.
    /// Omitted: `VerifyOnly` on nodes whose containerd is a vendor build
    /// (`1.7.20+azure`) or runs under a service wrapper (NSSM, as on AKS),
    /// which their node image owns; `InPlace` elsewhere. A node that would
    /// need a replacement it may not get is never started; the pool's
    /// Progressing condition says `RuntimeUpgradeRefused`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<RuntimeUpgrade>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum RuntimeUpgrade {
    InPlace,
    VerifyOnly,
}

fn default_runtime_name() -> String {
    "containerd".into()
}

impl Default for RuntimeSpec {
    fn default() -> Self {
        Self { name: default_runtime_name(), version: None, archive: None, upgrade: None }
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CniMode {
    /// VXLAN overlay (default).
    #[default]
    Overlay,
    L2bridge,
}

impl CniMode {
    pub fn as_str(self) -> &'static str {
        match self {
            CniMode::Overlay => "overlay",
            CniMode::L2bridge => "l2bridge",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkingSpec {
    /// The HNS network mode the CNI gives pods: overlay (VXLAN) or l2bridge (default overlay).
    #[serde(default)]
    pub cni_mode: CniMode,
    /// kube-proxy's settings on the nodes, checked by the agent.
    #[serde(default)]
    pub kube_proxy: KubeProxySpec,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum KubeProxyMode {
    /// The only kube-proxy mode on Windows.
    #[default]
    Winkernel,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeProxySpec {
    /// kube-proxy's mode: winkernel, the only one on Windows.
    #[serde(default)]
    pub mode: KubeProxyMode,
    /// Direct Server Return for load-balanced traffic (default false).
    #[serde(default, rename = "enableDSR")]
    pub enable_dsr: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageSpec {
    /// The CSI Proxy host service that Windows CSI node plugins call.
    #[serde(default)]
    pub csi_proxy: CsiProxySpec,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!self.enabled || has(self.version)",
    "message": "storage.csiProxy.version is required when storage.csiProxy.enabled is true, e.g. v1.1.3",
    "fieldPath": ".version",
    "reason": "FieldValueRequired"
}, {
    "rule": "(has(self.deploy) && self.deploy == 'HostService') || !has(self.version) || !self.version.contains('+')",
    "message": "storage.csiProxy.version becomes the CSI Proxy image tag with deploy: DaemonSet, and an image tag cannot hold +build metadata: use the release, e.g. v1.1.3",
    "fieldPath": ".version",
    "reason": "FieldValueInvalid"
}]))]
pub struct CsiProxySpec {
    /// Run CSI Proxy on the nodes (default false); Windows pods need it for CSI persistent volumes.
    #[serde(default)]
    pub enabled: bool,
    /// CSI Proxy release, e.g. v1.1.3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^v?[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$"), length(max = 64))]
    pub version: Option<String>,
    /// Who runs CSI Proxy on the nodes: DaemonSet (default; winpool runs SIG
    /// Windows' HostProcess image of `version` on each node, moving with the
    /// node's revision) or HostService (the node image runs the csiproxy
    /// service, as on AKS; winpool only verifies its version).
    #[serde(default)]
    pub deploy: CsiProxyDeploy,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum CsiProxyDeploy {
    #[default]
    DaemonSet,
    HostService,
}

/// HNS capacity model. Microsoft publishes no official per-node limits; 0 means
/// winpool's documented conservative default for the pool's OS version.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HnsSpec {
    /// Load-balancer policies a node can hold (0 = OS default).
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub max_load_balancers: i64,
    /// Remote endpoints a node can hold (0 = OS default).
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub max_endpoints: i64,
    /// Backends one load balancer can take before HNS refuses it with "invalid number of destinations" (0 = OS default).
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub max_backends_per_service: i64,
    /// Percent of a limit at which HNSCapacity turns NearLimit (default 80).
    #[serde(default = "default_warn_percent")]
    #[schemars(range(min = 1, max = 100))]
    pub warn_percent: i32,
    /// Taint nodes winpool.dev/hns-not-ready:NoSchedule until HNS has caught up (default true).
    #[serde(default = "default_true")]
    pub taint_when_not_ready: bool,
    /// How far below the expected counts a node may report and still be ready, in percent (default 5).
    #[serde(default = "default_tolerance")]
    #[schemars(range(min = 0, max = 50))]
    pub tolerance_percent: i32,
    /// How long a node in Verifying waits for HNS to catch up before it is marked
    /// Updated anyway (reported as an Event and in the log), a Go duration (default 15m).
    #[serde(default = "default_hns_ready_timeout")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub ready_timeout: String,
}

fn default_tolerance() -> i32 {
    5
}
fn default_hns_ready_timeout() -> String {
    "15m".into()
}

fn default_warn_percent() -> i32 {
    80
}
fn default_true() -> bool {
    true
}

impl Default for HnsSpec {
    fn default() -> Self {
        Self {
            max_load_balancers: 0,
            max_endpoints: 0,
            max_backends_per_service: 0,
            warn_percent: default_warn_percent(),
            taint_when_not_ready: true,
            tolerance_percent: default_tolerance(),
            ready_timeout: default_hns_ready_timeout(),
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "type(self.maxUnavailable) == int ? self.maxUnavailable >= 1 : self.maxUnavailable.matches('^(100|[1-9][0-9]?)%$')",
    "message": "rollout.maxUnavailable must be a positive number of nodes (e.g. 1) or a percentage from 1% to 100% (e.g. \"10%\")",
    "fieldPath": ".maxUnavailable",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!(has(self.maintenanceWindow) && has(self.maintenanceWindows))",
    "message": "rollout.maintenanceWindow and rollout.maintenanceWindows cannot both be set: move the single window into the maintenanceWindows list",
    "fieldPath": ".maintenanceWindow",
    "reason": "FieldValueForbidden"
}, {
    "rule": "duration(self.nodeTimeout) > duration('0s')",
    "message": "rollout.nodeTimeout must be a positive duration such as 30m or 1h30m",
    "fieldPath": ".nodeTimeout",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!has(self.healthGates) || self.healthGates.all(g, self.healthGates.exists_one(h, h.name == g.name))",
    "message": "rollout.healthGates: every gate needs a name of its own (the condition and Events name the gate)",
    "fieldPath": ".healthGates",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!has(self.healthGateInterval) || duration(self.healthGateInterval) > duration('0s')",
    "message": "rollout.healthGateInterval must be a positive duration such as 30s",
    "fieldPath": ".healthGateInterval",
    "reason": "FieldValueInvalid"
}]))]
pub struct RolloutSpec {
    /// Nodes that may be between Pending and Updated at once: a number or a percent of the pool (default 1).
    #[serde(default = "default_max_unavailable")]
    pub max_unavailable: IntOrString,
    /// Start no new node while true; nodes already in flight finish (default false).
    #[serde(default)]
    pub paused: bool,
    /// Failed nodes tolerated before the rollout pauses itself (default 1).
    #[serde(default = "default_max_failed_nodes")]
    #[schemars(range(min = 0))]
    pub max_failed_nodes: i32,
    /// Drain + apply + verify budget per node, a Go duration (default 30m).
    #[serde(default = "default_node_timeout")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub node_timeout: String,
    /// How a node is drained before its update.
    #[serde(default)]
    pub drain: DrainSpec,
    /// How long a node stays Updated and Ready before it stops counting
    /// against maxUnavailable, a Go duration (default 0s: at once), like a
    /// Deployment's minReadySeconds: a node that goes bad soon after its update
    /// shows it before the next one starts.
    #[serde(default = "default_soak_time")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub soak_time: String,
    /// The older single-window form of maintenanceWindows (kept so existing
    /// pools stay valid); not together with maintenanceWindows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance_window: Option<MaintenanceWindow>,
    /// When set, no new node starts outside these windows (any of them open is
    /// enough); nodes already in flight finish.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub maintenance_windows: Vec<MaintenanceWindow>,
    /// Dates on which no new node starts, even inside a window (a change
    /// freeze, the holidays).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub not_allowed_dates: Vec<DateRange>,
    /// Conditions of the cluster under which no new node starts (kured's
    /// Prometheus and blocking-pod checks); nodes in flight finish. A gate that
    /// cannot be evaluated counts as closed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub health_gates: Vec<HealthGate>,
    /// How often closed health gates are looked at again, a Go duration (default 30s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub health_gate_interval: Option<String>,
}

fn default_max_unavailable() -> IntOrString {
    IntOrString::Int(1)
}
fn default_max_failed_nodes() -> i32 {
    1
}
fn default_node_timeout() -> String {
    "30m".into()
}
fn default_soak_time() -> String {
    "0s".into()
}

impl Default for RolloutSpec {
    fn default() -> Self {
        Self {
            max_unavailable: default_max_unavailable(),
            paused: false,
            max_failed_nodes: default_max_failed_nodes(),
            node_timeout: default_node_timeout(),
            drain: DrainSpec::default(),
            soak_time: default_soak_time(),
            maintenance_window: None,
            maintenance_windows: Vec::new(),
            not_allowed_dates: Vec::new(),
            health_gates: Vec::new(),
            health_gate_interval: None,
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "duration(self.timeout) > duration('0s')",
    "message": "rollout.drain.timeout must be a positive duration such as 10m",
    "fieldPath": ".timeout",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!has(self.gracePeriod) || duration(self.gracePeriod) < duration(self.timeout)",
    "message": "rollout.drain.gracePeriod must be shorter than rollout.drain.timeout, or no pod could finish in time",
    "fieldPath": ".gracePeriod",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!has(self.skipWaitForDeleteTimeout) || duration(self.skipWaitForDeleteTimeout) < duration(self.timeout)",
    "message": "rollout.drain.skipWaitForDeleteTimeout must be shorter than rollout.drain.timeout, or it never applies",
    "fieldPath": ".skipWaitForDeleteTimeout",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!has(self.podSelector) || !has(self.podSelector.matchExpressions) || self.podSelector.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'] && (e.operator in ['In', 'NotIn'] ? (has(e.values) && size(e.values) > 0) : (!has(e.values) || size(e.values) == 0)))",
    "message": "rollout.drain.podSelector.matchExpressions[]: the operator is In or NotIn with values, or Exists or DoesNotExist without",
    "fieldPath": ".podSelector",
    "reason": "FieldValueInvalid"
}]))]
pub struct DrainSpec {
    /// Cordon and evict pods before applying (default true).
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// How long evictions may take before the node fails, a Go duration (default 10m).
    #[serde(default = "default_drain_timeout")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub timeout: String,
    /// Evict pods that use emptyDir volumes, losing that data (default true).
    #[serde(default = "default_true")]
    pub delete_empty_dir_data: bool,
    /// Evict pods that no controller owns, as `kubectl drain --force` does
    /// (default false). Such a pod is not recreated anywhere once evicted, so
    /// without this it holds the drain and the node fails at drain.timeout,
    /// naming it.
    #[serde(default)]
    pub force: bool,
    /// Delete the pods a PodDisruptionBudget still protects once drain.timeout
    /// has passed, instead of failing the node (default false).
    #[serde(default)]
    pub delete_after_timeout: bool,
    /// The time each evicted pod gets to shut down, a Go duration, instead of
    /// its own terminationGracePeriodSeconds (default: its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub grace_period: Option<String>,
    /// Only pods that match this selector are evicted; the others stay on
    /// the node through its update (default: every pod a drain evicts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,
    /// A pod whose deletion began longer ago than this, a Go duration, is no
    /// longer waited for: a hung kubelet may never confirm it (default: wait
    /// until it is gone, within drain.timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub skip_wait_for_delete_timeout: Option<String>,
    /// A node whose evictions a PodDisruptionBudget has refused this long is
    /// put back (uncordoned, Pending, last in line) so that its slot goes to
    /// another node, and is tried again after as long; drain.timeout still
    /// counts from its first refusal. A Go duration (default 1m; 0s: hold the
    /// slot until drain.timeout).
    #[serde(default = "default_put_back_after")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub put_back_after: String,
}

fn default_put_back_after() -> String {
    "1m".into()
}

fn default_drain_timeout() -> String {
    "10m".into()
}

impl Default for DrainSpec {
    fn default() -> Self {
        Self {
            enabled: true,
            timeout: default_drain_timeout(),
            delete_empty_dir_data: true,
            force: false,
            delete_after_timeout: false,
            grace_period: None,
            pod_selector: None,
            skip_wait_for_delete_timeout: None,
            put_back_after: default_put_back_after(),
        }
    }
}

/// One health gate: exactly one of `prometheus`, `alertmanager` or `pods`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "[has(self.prometheus), has(self.alertmanager), has(self.pods)].filter(x, x).size() == 1",
    "message": "a health gate has exactly one of prometheus, alertmanager or pods",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!has(self.alertmanager) || (has(self.alertmanager.alerts) && !has(self.alertmanager.query))",
    "message": "an alertmanager health gate names alerts, not a query (Alertmanager has no PromQL)",
    "fieldPath": ".alertmanager",
    "reason": "FieldValueInvalid"
}]))]
pub struct HealthGate {
    /// Names the gate in the pool's condition and Events, e.g. no-critical-alerts.
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"), length(min = 1, max = 63))]
    pub name: String,
    /// Closed while a Prometheus query returns any series, or matching alerts fire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<PrometheusGate>,
    /// Closed while matching alerts are active in Alertmanager (API v2):
    /// silenced and inhibited alerts do not count, so a silence opens the
    /// gate as it quiets the pager. `url`, `alerts`, `timeout`, `auth` and
    /// `tls` as for prometheus; no `query`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alertmanager: Option<PrometheusGate>,
    /// Closed while pods matching a selector exist (on the cluster, or on the node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<PodsGate>,
}

/// A gate read from the Prometheus HTTP API: exactly one of `query` or `alerts`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.query) != has(self.alerts)",
    "message": "a prometheus health gate has exactly one of query or alerts",
    "reason": "FieldValueInvalid"
}, {
    "rule": "duration(self.timeout) > duration('0s') && duration(self.timeout) <= duration('1m')",
    "message": "prometheus.timeout must be a positive duration of at most 1m, such as 5s (a reconcile waits for it)",
    "fieldPath": ".timeout",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!has(self.tls) || self.url.startsWith('https://')",
    "message": "prometheus.tls is for an https url; an http url has no certificate to verify",
    "fieldPath": ".tls",
    "reason": "FieldValueInvalid"
}]))]
pub struct PrometheusGate {
    /// Base URL of the Prometheus HTTP API, e.g. http://prometheus.monitoring:9090 (http or https).
    #[schemars(regex(pattern = r"^https?://[^\s/?#]+(/[^\s?#]*)?$"), length(max = 2048))]
    pub url: String,
    /// A PromQL instant query (/api/v1/query): any series it returns closes the gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub query: Option<String>,
    /// Firing alerts (/api/v1/alerts) whose name matches close the gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alerts: Option<AlertMatch>,
    /// How long one request may take, a Go duration (default 5s); a gate
    /// whose request times out is closed.
    #[serde(default = "default_gate_timeout")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub timeout: String,
    /// Credentials from a Secret in the operator's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<PrometheusAuth>,
    /// Whom an https url's server certificate must be signed by. Without it the
    /// gate trusts the system roots the operator finds (its image holds none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<PrometheusTls>,
}

/// The certificate authorities an https gate trusts, and no others.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusTls {
    /// A Secret in the operator's own namespace, labelled
    /// winpool.dev/health-gate-credentials=true, whose key ca.crt holds the
    /// PEM certificates of those authorities, and need hold nothing else.
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"), length(max = 253))]
    pub ca_secret_name: String,
}

fn default_gate_timeout() -> String {
    "5s".into()
}

/// Which firing alerts close the gate.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AlertMatch {
    /// A regular expression matched against the whole alert name, like
    /// PromQL's `=~` (e.g. `KubeNode.*|.*Critical`).
    #[schemars(length(min = 1, max = 1024))]
    pub name: String,
    /// Label matchers an alert must also meet, all of them (e.g. severity
    /// Equal critical, namespace NotMatches dev-.*).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub matchers: Vec<LabelMatcher>,
}

/// One label matcher, as Prometheus and Alertmanager write them.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelMatcher {
    /// The label's name, e.g. severity.
    #[schemars(regex(pattern = r"^[a-zA-Z_][a-zA-Z0-9_]*$"), length(max = 128))]
    pub label: String,
    /// Equal and NotEqual compare the value (PromQL's = and !=); Matches
    /// and NotMatches match it as a whole-value regular expression (=~, !~).
    pub op: MatchOp,
    /// The value, or the regular expression for =~ and !~. A label the alert
    /// lacks has the empty value, as in PromQL.
    #[schemars(length(max = 1024))]
    pub value: String,
}

/// How a [`LabelMatcher`] compares. Words, as a LabelSelector's operators
/// are, not PromQL's symbols: a bare `=` in YAML is a YAML 1.1 tag that
/// Python's and other YAML 1.1 parsers refuse to read in the CRD.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MatchOp {
    Equal,
    NotEqual,
    Matches,
    NotMatches,
}

/// Basic (Secret keys `username`, `password`) or Bearer (key `token`) auth.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusAuth {
    /// Basic or Bearer.
    #[serde(rename = "type")]
    pub type_: PrometheusAuthType,
    /// A Secret in the operator's own namespace (winpool reads no other Secret),
    /// labelled winpool.dev/health-gate-credentials=true.
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"), length(max = 253))]
    pub secret_name: String,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PrometheusAuthType {
    Basic,
    Bearer,
}

/// A gate closed by pods matching a selector.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodsGate {
    /// Pods (not Succeeded or Failed) matching this selector close the gate.
    pub selector: LabelSelector,
    /// Only pods in these namespaces (default: every namespace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub namespaces: Vec<String>,
    /// Cluster (default): such a pod anywhere holds the rollout. Node: a node
    /// such a pod runs on is not started; other nodes are.
    #[serde(default)]
    pub scope: GateScope,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum GateScope {
    #[default]
    Cluster,
    Node,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum Weekday {
    Mon,
    Tue,
    Wed,
    Thu,
    Fri,
    Sat,
    Sun,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.start != self.end",
    "message": "a maintenance window's start and end must differ (a window that ends before it starts runs past midnight)",
    "fieldPath": ".end",
    "reason": "FieldValueInvalid"
}, {
    "rule": "[has(self.days), has(self.relativeMonthly), has(self.absoluteMonthly)].filter(x, x).size() <= 1",
    "message": "a maintenance window opens on weekdays (days), on a weekday of the month (relativeMonthly) or on a date of the month (absoluteMonthly): one of them",
    "fieldPath": ".absoluteMonthly",
    "reason": "FieldValueForbidden"
}]))]
pub struct MaintenanceWindow {
    /// Weekly: the days on which the window opens (default every day).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 7))]
    pub days: Vec<Weekday>,
    /// Monthly: the window opens on a day counted from a weekday of the month,
    /// e.g. a week after Patch Tuesday (second Tuesday + 7 days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative_monthly: Option<RelativeMonthly>,
    /// Monthly: the window opens on a date of the month, e.g. the 25th, or
    /// the last day with 31.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub absolute_monthly: Option<AbsoluteMonthly>,
    /// Opening time, HH:MM (24h).
    #[schemars(regex(pattern = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"))]
    pub start: String,
    /// Closing time, HH:MM (24h); earlier than start means the window runs past midnight.
    #[schemars(regex(pattern = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"))]
    pub end: String,
    /// IANA time zone of start/end, e.g. Europe/Zurich (default UTC).
    #[serde(default = "default_time_zone")]
    #[schemars(regex(pattern = r"^(UTC|[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,2})$"), length(max = 64))]
    pub time_zone: String,
}

fn default_time_zone() -> String {
    "UTC".into()
}

/// Which occurrence of a weekday in its month.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum WeekIndex {
    First,
    Second,
    Third,
    Fourth,
    Last,
}

/// "The second Tuesday of every month, plus 7 days, for 3 days".
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RelativeMonthly {
    /// Which occurrence of the weekday in the month: First to Fourth, or Last.
    pub week_index: WeekIndex,
    /// The weekday counted (Patch Tuesday: Second Tue).
    pub day_of_week: Weekday,
    /// Days added to that weekday (negative: before it), -27 to 27 (default 0).
    #[serde(default)]
    #[schemars(range(min = -27, max = 27))]
    pub offset_days: i32,
    /// On how many consecutive days the window opens, from that day (default 1).
    #[serde(default = "default_duration_days")]
    #[schemars(range(min = 1, max = 28))]
    pub duration_days: i32,
}

fn default_duration_days() -> i32 {
    1
}

/// "The 25th of every month, for 2 days".
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AbsoluteMonthly {
    /// The date of the month, 1 to 31. A month without that date opens on its
    /// last day instead, so a month-end window (31) opens every month and
    /// never skips February.
    #[schemars(range(min = 1, max = 31))]
    pub day_of_month: i32,
    /// On how many consecutive days the window opens, from that date (default 1).
    #[serde(default = "default_duration_days")]
    #[schemars(range(min = 1, max = 28))]
    pub duration_days: i32,
}

/// Whole days, first and last included, in a time zone.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.start <= self.end",
    "message": "rollout.notAllowedDates: end must not be before start",
    "fieldPath": ".end",
    "reason": "FieldValueInvalid"
}]))]
pub struct DateRange {
    /// First day, YYYY-MM-DD.
    #[schemars(regex(pattern = r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$"), length(max = 10))]
    pub start: String,
    /// Last day, YYYY-MM-DD (included).
    #[schemars(regex(pattern = r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$"), length(max = 10))]
    pub end: String,
    /// IANA time zone the days are in (default UTC).
    #[serde(default = "default_time_zone")]
    #[schemars(regex(pattern = r"^(UTC|[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,2})$"), length(max = 64))]
    pub time_zone: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentSpec {
    /// HostProcess image that applies the configuration on the node; empty = the operator's --agent-image.
    #[serde(default)]
    #[schemars(length(max = 512))]
    pub image: String,
}

/// Observed state of the pool, written only by winpool.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WindowsNodePoolStatus {
    /// The spec generation this status describes; older than
    /// metadata.generation while the operator has yet to act on a change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Hash of the node-level configuration the pool is rolling to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The last revision whose rollout has started (Progressing was True for
    /// it). A revision held from the start (paused, outside its maintenance
    /// window) is announced with `RolloutStarted` when it first progresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_revision: Option<String>,
    /// How many of the pool's nodes are in each phase of the rollout.
    #[serde(default)]
    pub nodes: NodeCounts,
    /// The cluster's HNS load against the nodes' limits (condition HNSCapacity says what it means).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hns: Option<HnsStatus>,
    /// One condition per type: server-side apply merges them by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The maintenance window open now, or else the next one (after
    /// notAllowedDates), RFC 3339; absent when the pool has no window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_window_start: Option<Time>,
    /// When that window closes, RFC 3339; absent when the pool has no window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_window_end: Option<Time>,
    /// Nodes between Pending and Updated, longest in their state first (at most 20).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub updating_nodes: Vec<UpdatingNode>,
    /// Nodes whose drain a PodDisruptionBudget blocks, by name (at most 20).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drain_blocked_nodes: Vec<DrainBlockedNode>,
    /// Pending nodes their agent's preflight blocks for this revision: they
    /// are never cordoned until it passes (at most 20, by name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preflight_blocked_nodes: Vec<PreflightBlockedNode>,
    /// Mean time from a node's start to Updated over the pool's recent
    /// updates (a moving average, kept across rollouts and restarts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub average_node_update_seconds: Option<i64>,
    /// When the rollout should be done at this pace: the waves left times
    /// the average node update; absent when nothing rolls or it is held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_completion_time: Option<Time>,
    /// Failed nodes, first 20 by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_nodes: Vec<FailedNode>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeCounts {
    /// Nodes the pool's selector matches (conflicting nodes excluded).
    pub total: i32,
    /// Nodes that run the pool's revision and were verified.
    pub updated: i32,
    /// Nodes between Pending and Updated: draining, applying or verifying.
    pub updating: i32,
    /// Nodes still to start.
    pub pending: i32,
    /// Nodes whose update failed; they wait for a retry.
    pub failed: i32,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HnsStatus {
    /// HNS load balancers a node needs for the cluster's Services.
    pub expected_load_balancers: i64,
    /// The load balancers a node's HNS holds at most (hns.limits).
    pub limit_load_balancers: i64,
    /// Remote endpoints a node needs for the cluster's Services.
    pub expected_endpoints: i64,
    /// The remote endpoints a node's HNS holds at most (hns.limits).
    pub limit_endpoints: i64,
    /// WithinLimits, NearLimit or Exceeded.
    pub state: crate::hns::CapacityState,
    /// Services whose ready backends exceed maxBackendsPerService (first 20).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services_over_backend_limit: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailedNode {
    /// The Node's name.
    pub name: String,
    /// Why it failed: Timeout, DrainTimeout or ApplyFailed.
    pub reason: String,
    /// What failed and where to look (an exit code names its log on the node).
    pub message: String,
    /// When the node failed, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdatingNode {
    /// The Node's name.
    pub name: String,
    /// Draining, Applying or Verifying.
    pub state: crate::rollout::NodeState,
    /// Since when the node is in that state, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainBlockedNode {
    /// The Node's name.
    pub name: String,
    /// namespace/name of the budget that refuses the evictions.
    pub pod_disruption_budget: String,
    /// A node put back to Pending starts again no sooner than this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<Time>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreflightBlockedNode {
    /// The Node's name.
    pub name: String,
    /// The agent's reasons, as it wrote them on the Node (`winpool.dev/preflight`).
    pub reason: String,
}

/// Condition types on the pool.
pub mod conditions {
    pub const READY: &str = "Ready";
    pub const PROGRESSING: &str = "Progressing";
    pub const DEGRADED: &str = "Degraded";
    pub const HNS_CAPACITY: &str = "HNSCapacity";
    pub const PAUSED: &str = "Paused";
    /// kstatus' abnormal-true pair: Reconciling while the rollout moves,
    /// Stalled while it waits for a person (docs/gitops.md).
    pub const RECONCILING: &str = "Reconciling";
    pub const STALLED: &str = "Stalled";
    /// Membership problems the controller found (a node in two pools, a node of another OS version).
    pub const NODES_CONFLICT: &str = "NodeConflicts";
    /// Members a cloud provider may reimage or replace, undoing in-place patches (`provider`).
    pub const PROVIDER_MANAGED: &str = "ProviderManaged";
}
