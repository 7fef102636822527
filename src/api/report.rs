//! The `WindowsNodeReport` (`winpool.dev/v1alpha1`, short name `wnr`): what a
//! node's agent reports, in an object of its own instead of on the Node (the
//! node-lease pattern). One per node, in the agents' namespace, named after
//! the Node and owned by it, written only by that node's agent (a
//! ValidatingAdmissionPolicy holds it to the node its token is bound to).
//!
//! Every Node write goes to every Node watcher in the cluster; a report goes
//! to winpool alone. The agent writes no Node at all.
//!
//! How a decision reads a report is `decision::agent_report`.

// The kube derive's printcolumn(...) entries repeat `type_ = ...`, which clippy mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::names;

/// The report's spec: empty, since a report is all observation (`status`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "winpool.dev",
    version = "v1alpha1",
    kind = "WindowsNodeReport",
    doc = "What the winpool agent on one Windows node reports: its last apply and what it observes on the host. Named after its Node, owned by it, written by that node's agent alone.",
    plural = "windowsnodereports",
    shortname = "wnr",
    namespaced,
    status = "WindowsNodeReportStatus",
    category = "winpool",
    printcolumn(name = "Revision", type_ = "string", json_path = ".status.apply.revision"),
    printcolumn(name = "Status", type_ = "string", json_path = ".status.apply.status"),
    printcolumn(name = "Preflight", type_ = "string", json_path = ".status.preflight.verdict"),
    printcolumn(name = "Staging", type_ = "string", json_path = ".status.staging.status", priority = "1"),
    printcolumn(name = "LB", type_ = "integer", json_path = ".status.hns.loadBalancers", description = "HNS load balancers"),
    printcolumn(name = "Endpoints", type_ = "integer", json_path = ".status.hns.endpoints", description = "HNS remote endpoints"),
    printcolumn(name = "Agent", type_ = "string", json_path = ".status.agentVersion"),
    printcolumn(name = "Message", type_ = "string", json_path = ".status.apply.message", priority = "1"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
pub struct WindowsNodeReportSpec {}

/// What a node's agent reports: the result of its last apply and what it
/// observes on the host. Every field is the agent's; winpool only reads.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WindowsNodeReportStatus {
    /// The version of the agent that writes this report.
    #[schemars(length(max = 64))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    /// The result of the agent's last apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply: Option<ApplyReport>,
    /// What the agent observes on the host (never the requested value echoed back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<ObservedHost>,
    /// What the host's Host Network Service holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hns: Option<HnsCounts>,
    /// The agent's read-only checks of its host for its pool's target revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preflight: Option<PreflightReport>,
    /// The agent's last restart of kube-proxy, asked by winpool (`hns.repair`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hns_repair: Option<HnsRepairReport>,
    /// The agent's download of its pool's target revision's update while the
    /// node serves (`rollout.staging`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staging: Option<StagingReport>,
    /// For a pool whose patch level follows its update source
    /// (`os.patchPolicy`): the newest OS cumulative update the source offers
    /// this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offer: Option<OfferReport>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OfferReport {
    /// The update's KB ID (KB5050002); absent when nothing newer than the
    /// running build is offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^KB[0-9]{1,8}$"))]
    pub kb: Option<String>,
    /// Its title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub title: Option<String>,
    /// When the source published (WSUS: approved) it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// Updates the source offers in the OS's classification that are not
    /// the OS's cumulative update (.NET Framework's), "KB: title": why a
    /// search that found them offers no KB.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8), inner(length(max = 1024)))]
    pub passed_over: Vec<String>,
    /// When the search this answers ended.
    pub searched_at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
    /// The last search failed (Windows Update's words); the fields above
    /// are the search before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub error: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StagingReport {
    /// The revision whose update is downloaded.
    #[schemars(length(max = 63))]
    pub revision: String,
    /// Staging: the download runs; Staged: what the install takes is on the
    /// node; Failed: the download failed (the agent tries again).
    pub status: StagingStatusValue,
    /// What the install will take, in its order (none: no OS update is needed).
    #[schemars(length(max = 32))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<StagedItem>,
    /// What is staged installs without a reboot (a hotpatch): a pool with
    /// `rollout.hotpatch: true` installs it without cordon or drain.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reboot_free: bool,
    /// Why it failed, naming the update, its code and where to look (Failed only).
    #[schemars(length(max = 2048))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the agent reached this status for this revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
}

/// One update or package on the node, ready to install.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StagedItem {
    /// `KB5050002: <title>` for Windows Update, the file name for a package.
    #[schemars(length(max = 2048))]
    pub name: String,
    /// Its size as its source gives it.
    #[schemars(range(min = 0))]
    pub bytes: i64,
    /// A package's sha256 as verified on the node (Windows Update verifies its
    /// own content's signatures).
    #[schemars(length(max = 64))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// It installs without a reboot, as Windows Update describes it (a hotpatch).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reboot_free: bool,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum StagingStatusValue {
    Staging,
    Staged,
    Failed,
}

/// A restart of kube-proxy the agent made because winpool asked it
/// (`winpool.dev/hns-repair`), at most one per boot.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HnsRepairReport {
    /// The Node's `status.nodeInfo.bootID` the restart was asked for and made in.
    #[schemars(length(max = 64))]
    #[serde(rename = "bootID")]
    pub boot_id: String,
    /// When the agent restarted it.
    pub at: Time,
    /// The Windows service restarted (`kubeproxy` on AKS, `kube-proxy` elsewhere).
    #[schemars(length(max = 64))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    pub result: HnsRepairResult,
    /// What the agent did, or why it could not.
    #[schemars(length(max = 2048))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// How the agent's restart of kube-proxy went.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema, strum::IntoStaticStr, strum::VariantArray,
)]
pub enum HnsRepairResult {
    /// kube-proxy's service stopped and runs again, or its pod's process
    /// ended and the kubelet started it again: it programs every Service anew.
    Restarted,
    /// It did not; the message names the service or process and the error.
    Failed,
    /// kube-proxy is neither a Windows service of its own nor a pod's
    /// process on the host (rke2 runs it as its child).
    Unsupported,
}

impl HnsRepairResult {
    pub const ALL: &'static [HnsRepairResult] = <HnsRepairResult as strum::VariantArray>::VARIANTS;

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplyReport {
    /// The revision this result is about.
    #[schemars(length(max = 63))]
    pub revision: String,
    /// Where the agent is with the revision: Applying, Rebooting, Succeeded or Failed.
    pub status: ApplyStatus,
    /// What went wrong, or what the agent is doing.
    #[schemars(length(max = 2048))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The operator's start of the node (`winpool.dev/started-at`) this
    /// result answers: a result for an earlier start is never read as one
    /// for a later one (a retry of the same revision).
    #[schemars(length(max = 64))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// Succeeded after an install Windows asked no reboot for (a hotpatch):
    /// no new boot is waited for.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_reboot: bool,
    /// With noReboot: the build the host runs after the install, from its
    /// registry (CurrentBuildNumber, UBR). The Windows kubelet reads these
    /// once, when it starts, so after a reboot-free install its
    /// kernelVersion keeps the build before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub host_build: Option<String>,
    /// The servicing task was alive then (RFC 3339: its start, moved at most
    /// every 5 minutes while it installs, its end): the operator does not
    /// time out a node whose task still beats, and times what follows the
    /// install from the last beat (the agent's own 3-hour cap bounds it).
    #[schemars(length(max = 64))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<String>,
    /// The HRESULT the update's install failed with (`0x800F0922`), on a
    /// Failed result only: the operator counts one code on one update
    /// across pools to stop a bad update everywhere.
    #[schemars(regex(pattern = r"^0x[0-9A-F]{8}$"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_code: Option<String>,
    /// What the servicing task installed for this start, in order (Windows Update's updates and the revision's packages).
    #[schemars(length(max = 64))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub installed: Vec<InstalledUpdate>,
}

/// One update or package the servicing task installed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstalledUpdate {
    /// KB5050002, or a package's file name.
    #[schemars(length(min = 1, max = 2048))]
    pub kb: String,
    /// Its title, as Windows Update gives it.
    #[schemars(length(max = 2048))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The CVE IDs Windows Update lists for it (`IUpdate2.CveIDs`); none for a package.
    #[schemars(length(max = 256), inner(length(max = 64)))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cve_ids: Vec<String>,
}

/// The agent's last word on an install. Its strings are the names of
/// `names::APPLY_*`, which the agent's contract compares by value.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, strum::EnumString, strum::EnumIter)]
pub enum ApplyStatus {
    Applying,
    Rebooting,
    /// Installed; Windows asks for a reboot and the node is in service (a
    /// hotpatch start): the agent waits for winpool to drain it.
    RebootRequired,
    Succeeded,
    Failed,
}

impl ApplyStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ApplyStatus::Applying => names::APPLY_APPLYING,
            ApplyStatus::Rebooting => names::APPLY_REBOOTING,
            ApplyStatus::RebootRequired => names::APPLY_REBOOT_REQUIRED,
            ApplyStatus::Succeeded => names::APPLY_SUCCEEDED,
            ApplyStatus::Failed => names::APPLY_FAILED,
        }
    }
}

impl std::fmt::Display for ApplyStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedHost {
    /// The CNI mode of the host's HNS network (`overlay`, `l2bridge`).
    #[schemars(length(max = 128))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cni_mode: Option<String>,
    /// The CSI Proxy version serving the node.
    #[schemars(length(max = 128))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csi_proxy_version: Option<String>,
    /// How containerd's service is installed: `containerd`,
    /// `containerd (nssm)` under a service wrapper, or `rke2 (parent)` when
    /// another service runs containerd as its child.
    #[schemars(length(max = 128))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_service: Option<String>,
    /// A CSI Proxy the node image runs as a host service whose pipes answer
    /// (`csi-proxy (nssm)` on AKS, `csiproxy`).
    #[schemars(length(max = 128))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csi_proxy_host: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HnsCounts {
    /// Load-balancer policies programmed.
    #[schemars(range(min = 0))]
    pub load_balancers: i64,
    /// Remote endpoints programmed.
    #[schemars(range(min = 0))]
    pub endpoints: i64,
    /// The Node's `status.nodeInfo.bootID` when the counts were read: HNS
    /// starts empty after a reboot, so counts of an earlier boot say nothing
    /// about this one.
    #[schemars(length(max = 64))]
    #[serde(default, rename = "bootID", skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// When the agent first read these counts (in this boot): how long the
    /// operator took to say that HNS lost what it held is measured from it
    /// (`winpool_hns_loss_detection_seconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_at: Option<Time>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreflightReport {
    /// The revision judged.
    #[schemars(length(max = 63))]
    pub revision: String,
    /// Ready: the node may start; Blocked: it must not, for the reasons given.
    pub verdict: PreflightVerdictValue,
    /// Why the host cannot take the revision (Blocked only).
    #[schemars(length(max = 32), inner(length(max = 2048)))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// What a person may want to know that does not block it.
    #[schemars(length(max = 32), inner(length(max = 2048)))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// When the agent first reached this verdict for this revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PreflightVerdictValue {
    Ready,
    Blocked,
}

impl WindowsNodeReport {
    /// A report as its agent writes it: an empty spec, the observations in its status.
    pub fn reported(name: &str, status: WindowsNodeReportStatus) -> Self {
        WindowsNodeReport { status: Some(status), ..WindowsNodeReport::new(name, WindowsNodeReportSpec::default()) }
    }

    /// What the agent reports: its status, empty until the agent's first
    /// status write (it creates the report, then writes the status).
    pub fn observations(&self) -> &WindowsNodeReportStatus {
        const NOTHING: &WindowsNodeReportStatus = &WindowsNodeReportStatus {
            agent_version: None,
            apply: None,
            observed: None,
            hns: None,
            preflight: None,
            hns_repair: None,
            staging: None,
            offer: None,
        };
        self.status.as_ref().unwrap_or(NOTHING)
    }
}

/// The report cache keeps what a decision reads: who wrote which fields
/// (managedFields) is not.
pub fn trim(r: &mut WindowsNodeReport) {
    r.metadata.managed_fields = None;
    r.metadata.annotations = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every status reads back from the string it writes, which is the name
    /// the report's schema holds.
    #[test]
    fn every_apply_status_reads_back_from_its_name() {
        use strum::IntoEnumIterator;
        for status in ApplyStatus::iter() {
            assert_eq!(status.as_str().parse::<ApplyStatus>(), Ok(status));
            assert_eq!(serde_json::to_value(status).unwrap(), json!(status.as_str()));
        }
    }

    /// An agent that installed nothing (or predates the record) writes no
    /// `installed`, and its report reads and writes back as it was.
    #[test]
    fn a_report_without_installed_reads_and_writes_back_as_it_was() {
        let written = json!({"revision": "r1", "status": "Succeeded", "startedAt": "2026-12-02T10:40:00Z"});
        let apply: ApplyReport = serde_json::from_value(written.clone()).unwrap();
        assert!(apply.installed.is_empty());
        assert_eq!(serde_json::to_value(&apply).unwrap(), written);
    }

    #[test]
    fn a_status_no_agent_writes_is_no_report() {
        let bad = serde_json::from_value::<WindowsNodeReportStatus>(json!({"apply": {"revision": "r1", "status": "Exploded"}}));
        assert!(bad.is_err(), "an unknown status is no report: {bad:?}");
    }
}
