//! The `WindowsNodeReport` (`winpool.dev/v1alpha1`, short name `wnr`): what a
//! node's agent reports, in an object of its own instead of on the Node (the
//! node-lease pattern). One per node, in the agents' namespace, named after
//! the Node and owned by it, written only by that node's agent (a
//! ValidatingAdmissionPolicy holds it to the node its token is bound to).
//!
//! Every Node write goes to every Node watcher in the cluster; a report goes
//! to winpool alone. The agent writes no Node at all.
//!
//! [`AgentReport`] is the report as a decision reads it, from the object or,
//! for an agent of 0.2.0 that still writes annotations, from the Node: an
//! upgrade reads the annotations until the node's new agent has written its
//! report (it adopts the annotations' apply result into it).

// The kube derive's printcolumn(...) entries repeat `type_ = ...`, which clippy mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::names;
use crate::node_record::NodeRecord;
use crate::rollout::Preflight;

/// The report's spec: empty, since a report is all observation (`status`).
/// A report an earlier agent wrote holds its observations here: they are
/// read until the node's new agent writes its status, which clears them.
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
pub struct WindowsNodeReportSpec {
    #[serde(flatten)]
    pub legacy: WindowsNodeReportStatus,
}

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
    /// `rollout.hotpatch: Enabled` installs it without cordon or drain.
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
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
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

/// Where a node's [`AgentReport`] was read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReportSource {
    /// Nothing: no agent has reported on the node.
    #[default]
    None,
    /// The node's `WindowsNodeReport`.
    Object,
    /// The Node's annotations, written by an agent of 0.2.0.
    Annotations,
}

/// A node's agent report as a decision reads it: raw values, so a value that
/// does not parse is reported, not dropped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentReport {
    pub source: ReportSource,
    pub agent_version: Option<String>,
    pub applied_revision: Option<String>,
    pub apply_status: Option<String>,
    pub apply_message: Option<String>,
    /// The start the apply result answers (reports of 0.2.0: none).
    pub answers_start: Option<String>,
    /// When the servicing task last beat, as the agent reported it.
    pub heartbeat: Option<String>,
    /// Its success followed an install that needed no reboot.
    pub no_reboot: bool,
    pub cni_mode: Option<String>,
    pub csi_proxy_version: Option<String>,
    pub runtime_service: Option<String>,
    pub csi_proxy_host: Option<String>,
    pub hns_load_balancers: Option<String>,
    pub hns_endpoints: Option<String>,
    /// The boot the HNS counts were read in (reports of 0.2.0: none).
    pub hns_boot_id: Option<String>,
    pub preflight: Option<Preflight>,
    pub staging: Option<crate::rollout::Staging>,
}

impl WindowsNodeReport {
    /// A report as its agent writes it: an empty spec, the observations in its status.
    pub fn reported(name: &str, status: WindowsNodeReportStatus) -> Self {
        WindowsNodeReport { status: Some(status), ..WindowsNodeReport::new(name, WindowsNodeReportSpec::default()) }
    }

    /// What the agent reports: its status, or, until the node's new agent
    /// wrote one, what an earlier agent wrote in the spec.
    pub fn observations(&self) -> &WindowsNodeReportStatus {
        self.status.as_ref().filter(|s| **s != WindowsNodeReportStatus::default()).unwrap_or(&self.spec.legacy)
    }
}

impl AgentReport {
    pub fn from_object(r: &WindowsNodeReport) -> Self {
        let s = r.observations();
        let apply = s.apply.as_ref();
        let observed = s.observed.clone().unwrap_or_default();
        let hns = s.hns.as_ref();
        AgentReport {
            source: ReportSource::Object,
            agent_version: s.agent_version.clone(),
            applied_revision: apply.map(|a| a.revision.clone()),
            apply_status: apply.map(|a| a.status.as_str().to_string()),
            apply_message: apply.and_then(|a| a.message.clone()),
            answers_start: apply.and_then(|a| a.started_at.clone()),
            heartbeat: apply.and_then(|a| a.heartbeat.clone()),
            no_reboot: apply.is_some_and(|a| a.no_reboot),
            cni_mode: observed.cni_mode,
            csi_proxy_version: observed.csi_proxy_version,
            runtime_service: observed.runtime_service,
            csi_proxy_host: observed.csi_proxy_host,
            hns_load_balancers: hns.map(|h| h.load_balancers.to_string()),
            hns_endpoints: hns.map(|h| h.endpoints.to_string()),
            hns_boot_id: hns.and_then(|h| h.boot_id.clone()),
            preflight: s.preflight.as_ref().filter(|p| !p.revision.is_empty()).map(|p| Preflight {
                revision: p.revision.clone(),
                verdict: match p.verdict {
                    PreflightVerdictValue::Ready => crate::rollout::PreflightVerdict::Ready,
                    PreflightVerdictValue::Blocked if p.reasons.is_empty() => {
                        crate::rollout::PreflightVerdict::Blocked("the agent gave no reason".into())
                    }
                    PreflightVerdictValue::Blocked => crate::rollout::PreflightVerdict::Blocked(p.reasons.join("; ")),
                },
            }),
            staging: s.staging.as_ref().filter(|st| !st.revision.is_empty()).map(staging_of),
        }
    }

    /// The node's report: its object when its agent wrote one, else its
    /// annotations. An object that says nothing yet is none: the agent
    /// creates its report, then writes the status, and a round between the
    /// two would otherwise take an updated node for one that never applied
    /// anything, and start it again.
    pub fn of(node: &NodeRecord, object: Option<&WindowsNodeReport>) -> Self {
        match object {
            Some(r) if *r.observations() != WindowsNodeReportStatus::default() => AgentReport::from_object(r),
            _ => AgentReport::from_annotations(node),
        }
    }
}

fn staging_of(s: &StagingReport) -> crate::rollout::Staging {
    use crate::rollout::StagingState;
    let state = match s.status {
        StagingStatusValue::Staging => StagingState::Running,
        StagingStatusValue::Staged => StagingState::Staged,
        StagingStatusValue::Failed => {
            StagingState::Failed(s.message.clone().filter(|m| !m.is_empty()).unwrap_or_else(|| "the agent gave no reason".into()))
        }
    };
    crate::rollout::Staging { revision: s.revision.clone(), state, reboot_free: s.reboot_free }
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
    use k8s_openapi::api::core::v1::Node;
    use serde_json::json;

    #[test]
    fn a_report_object_reads_like_the_annotations_it_replaces() {
        let object: WindowsNodeReport = serde_json::from_value(json!({
            "apiVersion": "winpool.dev/v1alpha1", "kind": "WindowsNodeReport",
            "metadata": {"name": "win-1", "namespace": "winpool-agents"},
            "spec": {},
            "status": {
                "agentVersion": "0.3.0",
                "apply": {"revision": "r1", "status": "Succeeded", "message": "build 10.0.20348.2762", "startedAt": "2026-12-02T10:00:00Z"},
                "observed": {"cniMode": "overlay", "csiProxyVersion": "1.1.3", "runtimeService": "containerd (nssm)"},
                "hns": {"loadBalancers": 12, "endpoints": 40, "bootID": "b-2"},
                "preflight": {"revision": "r2", "verdict": "Blocked", "reasons": ["4 GiB free on C:", "no update source"]}
            }
        }))
        .unwrap();
        let mut node = Node::default();
        node.metadata.annotations = Some(
            [
                ("winpool.dev/agent-version", "0.3.0"),
                ("winpool.dev/applied-revision", "r1"),
                ("winpool.dev/apply-status", "Succeeded"),
                ("winpool.dev/apply-message", "build 10.0.20348.2762"),
                ("winpool.dev/cni-mode", "overlay"),
                ("winpool.dev/csi-proxy-version", "1.1.3"),
                ("winpool.dev/runtime-service", "containerd (nssm)"),
                ("winpool.dev/hns-load-balancers", "12"),
                ("winpool.dev/hns-endpoints", "40"),
                ("winpool.dev/preflight", "Blocked: 4 GiB free on C:; no update source"),
                ("winpool.dev/preflight-revision", "r2"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
        let from_object = AgentReport::from_object(&object);
        let from_annotations = AgentReport::from_annotations(&NodeRecord::from(&node));
        assert_eq!((from_object.source, from_annotations.source), (ReportSource::Object, ReportSource::Annotations));
        assert_eq!(from_object.answers_start.as_deref(), Some("2026-12-02T10:00:00Z"));
        assert_eq!(from_object.hns_boot_id.as_deref(), Some("b-2"));
        let unversioned = |r: AgentReport| AgentReport { source: ReportSource::None, answers_start: None, hns_boot_id: None, ..r };
        assert_eq!(unversioned(from_object), unversioned(from_annotations));
    }

    /// A report an earlier agent wrote holds its observations in the spec:
    /// read there until the node's new agent writes its status, which wins.
    #[test]
    fn a_report_of_an_older_agent_is_read_from_its_spec_until_its_status_is_written() {
        let old: WindowsNodeReport = serde_json::from_value(json!({
            "apiVersion": "winpool.dev/v1alpha1", "kind": "WindowsNodeReport",
            "metadata": {"name": "win-1", "namespace": "winpool-agents"},
            "spec": {"agentVersion": "0.2.0", "apply": {"revision": "r1", "status": "Succeeded"}}
        }))
        .unwrap();
        assert_eq!(AgentReport::from_object(&old).apply_status.as_deref(), Some("Succeeded"));
        assert_eq!(old.observations().agent_version.as_deref(), Some("0.2.0"));
        let mut upgraded = old.clone();
        upgraded.status =
            Some(serde_json::from_value(json!({"agentVersion": "0.3.0", "apply": {"revision": "r2", "status": "Applying"}})).unwrap());
        assert_eq!(AgentReport::from_object(&upgraded).applied_revision.as_deref(), Some("r2"), "the status wins over the old spec");
        let created = WindowsNodeReport { status: Some(Default::default()), ..old };
        assert_eq!(AgentReport::from_object(&created).applied_revision.as_deref(), Some("r1"), "an empty status is none");
    }

    /// Between the agent's create of its report and its first status write,
    /// the report says nothing: the node's annotations (an agent of 0.2.0's
    /// result) still speak for it.
    #[test]
    fn a_report_created_but_not_yet_written_is_no_report() {
        let mut node = Node::default();
        node.metadata.annotations = Some(
            [("winpool.dev/applied-revision", "r1"), ("winpool.dev/apply-status", "Succeeded")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        let created = WindowsNodeReport::new("win-1", WindowsNodeReportSpec::default());
        let r = AgentReport::of(&NodeRecord::from(&node), Some(&created));
        assert_eq!((r.source, r.apply_status.as_deref()), (ReportSource::Annotations, Some("Succeeded")));
    }

    #[test]
    fn a_node_without_a_report_has_none() {
        let r = AgentReport::of(&NodeRecord::from(&Node::default()), None);
        assert_eq!(r, AgentReport::default());
    }

    #[test]
    fn a_status_no_agent_writes_is_no_report() {
        let bad = serde_json::from_value::<WindowsNodeReportStatus>(json!({"apply": {"revision": "r1", "status": "Exploded"}}));
        assert!(bad.is_err(), "an unknown status is no report: {bad:?}");
    }
}
