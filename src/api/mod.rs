//! The `WindowsNodePool` API (`winpool.dev/v1alpha1`) and the names winpool
//! writes on Nodes. This is the only place the CRD's shape is defined: the YAML
//! `winpool crd` prints from these types (`hack/` writes them to `crds/`, never tracked).
//!
//! Validation that a person should see at `kubectl apply` time lives here too,
//! as OpenAPI patterns/enums and CEL `x-kubernetes-validations`, so the API
//! server refuses bad input before the controller ever sees it.

// The kube derive's printcolumn(...) entries repeat `type_ = ...`, which clippy mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]
// The fields' doc comments are the CRD's descriptions, which `kubectl explain`
// prints as they are: `containerd-<version>-…` and a bare URL are meant for it.
#![allow(rustdoc::invalid_html_tags, rustdoc::bare_urls)]

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

/// Server-side apply as the one field manager, taking over fields another
/// manager left: winpool's objects are winpool's alone.
pub fn apply_params() -> kube::api::PatchParams {
    kube::api::PatchParams::apply(FIELD_MANAGER).force()
}

pub fn post_params() -> kube::api::PostParams {
    kube::api::PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }
}

mod event_reason;
pub mod names;
pub mod node_record;
pub mod operation;
pub mod report;
mod rollout;
mod states;
mod status;

pub use event_reason::EventReason;
pub use rollout::*;
pub use states::*;
pub use status::*;

/// Windows Server LTSC release of the nodes in a pool.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema, strum::IntoStaticStr, strum::VariantArray)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum OsVersion {
    /// Windows Server 2019, build 17763.
    Ltsc2019,
    /// Windows Server 2022, build 20348.
    Ltsc2022,
    /// Windows Server 2025, build 26100.
    Ltsc2025,
}

impl OsVersion {
    pub const ALL: &'static [OsVersion] = <OsVersion as strum::VariantArray>::VARIANTS;

    /// The OS build number every node of this release reports (`10.0.<build>`).
    pub fn build(self) -> u32 {
        match self {
            OsVersion::Ltsc2019 => 17763,
            OsVersion::Ltsc2022 => 20348,
            OsVersion::Ltsc2025 => 26100,
        }
    }

    pub fn from_build(build: u32) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.build() == build)
    }

    pub fn as_str(self) -> &'static str {
        self.into()
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
    printcolumn(
        name = "Resolved",
        type_ = "string",
        json_path = ".status.resolvedPatch.kb",
        description = "With os.patchPolicy: the cumulative update the nodes are offered"
    ),
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
    /// How long nodes may take to reach the pool's target: past it, the
    /// pool's `PatchOverdue` condition turns True and an alert fires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compliance: Option<ComplianceSpec>,
}

/// A pool's patch deadline (the escalation DORA's technical standard asks for).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComplianceSpec {
    /// How long after its target was set (a patch level, or one resolved by
    /// `os.patchPolicy`) every node must run it, a Go duration (`336h`: 14 days).
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub deadline: String,
}

/// The OS release and the minimum patch level every node must reach.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.patchLevel.startsWith('10.0.' + {'ltsc2019': '17763', 'ltsc2022': '20348', 'ltsc2025': '26100'}[self.version] + '.')",
    "messageExpression": "'os.patchLevel ' + self.patchLevel + ' is not a build of ' + self.version + ': ' + self.version + ' patch levels look like 10.0.' + {'ltsc2019': '17763', 'ltsc2022': '20348', 'ltsc2025': '26100'}[self.version] + '.<revision>'",
    "fieldPath": ".patchLevel",
    "reason": "FieldValueInvalid"
}, {
    "rule": "!has(self.patchPolicy) || !has(self.updates) || (self.updates.source == 'WindowsUpdate' && (!has(self.updates.kbs) || size(self.updates.kbs) == 0))",
    "message": "os.patchPolicy follows what Windows Update or WSUS offers: it cannot be set with os.updates.source Packages or a KB pin (os.updates.kbs)",
    "fieldPath": ".patchPolicy",
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
    /// Makes the patch level follow the update source: the pool rolls to the
    /// newest cumulative update its nodes' Windows Update or WSUS offers them
    /// (with WSUS, what its administrator approved), patchLevel staying the
    /// floor. status.resolvedPatch says what it resolved, condition
    /// PatchResolved why it moved or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_policy: Option<PatchPolicy>,
}

/// `os.patchPolicy`: where a pool's patch level comes from when it follows
/// its update source.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatchPolicy {
    /// UpdateSource: the newest OS cumulative update the nodes' update
    /// source offers them, as each node's agent finds it with the install's
    /// own search. Every node offered one must be offered the same.
    pub source: PatchSource,
    /// Not before the update has been published this long (its
    /// LastDeploymentChangeTime; with WSUS, when it was approved), a Go
    /// duration, e.g. 168h for a week after Patch Tuesday (default 0s).
    #[serde(default = "default_min_age")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub min_age: String,
    /// How often each node's agent searches its update source, a Go duration
    /// of at least 1m (default 6h): a search costs the source a scan.
    #[serde(default = "default_check_interval")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"), length(max = 32))]
    pub check_interval: String,
}

fn default_min_age() -> String {
    "0s".into()
}

fn default_check_interval() -> String {
    "6h".into()
}

/// Where `os.patchPolicy` resolves a patch level from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PatchSource {
    UpdateSource,
}

impl WindowsNodePool {
    /// The pool carries `winpool.dev/paused`: "true" (`kubectl winpool
    /// pause`) or the bad-update breaker's value.
    pub fn paused_by_annotation(&self) -> bool {
        matches!(self.pause_annotation(), Some("true" | names::PAUSED_BY_BREAKER))
    }

    /// Its `winpool.dev/paused`, if any.
    pub fn pause_annotation(&self) -> Option<&str> {
        self.metadata.annotations.as_ref().and_then(|a| a.get(names::ANN_PAUSED)).map(String::as_str)
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

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default, JsonSchema, strum::EnumString, strum::Display)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum CniMode {
    /// VXLAN overlay (flannel's vxlan, Calico VXLAN).
    #[default]
    Overlay,
    /// L2Bridge: flannel host-gw, Azure CNI (overlay mode included), the EKS VPC CNI.
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
    /// The HNS network mode the pool's nodes must run: overlay (VXLAN) or l2bridge. Unset: any
    /// (AKS and EKS are l2bridge whatever their CNI's mode is called); the agent reports the mode it finds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cni_mode: Option<CniMode>,
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
    /// Restart kube-proxy on a node whose HNS lost what it held in this boot (opt-in).
    #[serde(default)]
    pub repair: HnsRepairSpec,
}

/// What winpool does about a member whose HNS collapsed or drifted (WindowsHNSReady
/// reason `Collapsed` or `Drifted`): kube-proxy recreates nothing it believes
/// programmed, and a restart of kube-proxy programs every Service anew.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HnsRepairSpec {
    /// Ask the node's agent to restart kube-proxy's Windows service, once per boot (default false).
    #[serde(default)]
    pub enabled: bool,
    /// The most restarts winpool asks in the pool within an hour (default 3): an HNS fault
    /// that strikes many nodes at once is Windows' to fix, not kube-proxy's, and every
    /// restarted kube-proxy lists every Service and EndpointSlice again.
    #[serde(default = "default_repairs_per_hour")]
    #[schemars(range(min = 1, max = 100))]
    pub max_per_hour: i32,
}

fn default_repairs_per_hour() -> i32 {
    3
}

impl Default for HnsRepairSpec {
    fn default() -> Self {
        Self { enabled: false, max_per_hour: default_repairs_per_hour() }
    }
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
            repair: HnsRepairSpec::default(),
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentSpec {
    /// HostProcess image that applies the configuration on the node; empty = the operator's --agent-image.
    #[serde(default)]
    #[schemars(length(max = 512))]
    pub image: String,
}
