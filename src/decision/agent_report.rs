//! A node's agent report as a decision reads it: from its `WindowsNodeReport`
//! or, for an agent of 0.2.0 that still writes annotations, from the Node (an
//! upgrade reads the annotations until the node's new agent has written its
//! report; it adopts the annotations' apply result into it). Pure.
//!
//! Typed as the report's schema types it. Only an annotation can hold a value
//! the schema would refuse; it reads as [`Reported::Unknown`] with its text,
//! which the condition that says so quotes.

use std::fmt;

use crate::api::CniMode;
use crate::api::report::{
    ApplyStatus, PreflightVerdictValue, StagingReport, StagingStatusValue, WindowsNodeReport, WindowsNodeReportStatus,
};
use crate::node_record::NodeRecord;
use crate::rollout::Preflight;

/// A value an agent reported: known, or the text of one that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reported<T> {
    Known(T),
    Unknown(String),
}

impl<T: Copy> Reported<T> {
    pub fn known(&self) -> Option<T> {
        match self {
            Reported::Known(v) => Some(*v),
            Reported::Unknown(_) => None,
        }
    }
}

impl<T: std::str::FromStr> Reported<T> {
    pub fn parse(raw: &str) -> Self {
        raw.parse().map_or_else(|_| Reported::Unknown(raw.to_string()), Reported::Known)
    }
}

impl Reported<i64> {
    /// A count as HNS gives it: digits only (no sign, no exponent), surrounding blanks ignored.
    pub fn count(raw: &str) -> Self {
        let v = raw.trim();
        let digits = !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit());
        match v.parse::<i64>() {
            Ok(n) if digits => Reported::Known(n),
            _ => Reported::Unknown(raw.to_string()),
        }
    }
}

impl<T: fmt::Display> fmt::Display for Reported<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reported::Known(v) => v.fmt(f),
            Reported::Unknown(raw) => f.write_str(raw),
        }
    }
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

/// A node's agent report as a decision reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentReport {
    pub source: ReportSource,
    pub agent_version: Option<String>,
    pub applied_revision: Option<String>,
    pub apply_status: Option<Reported<ApplyStatus>>,
    pub apply_message: Option<String>,
    /// The start the apply result answers (reports of 0.2.0: none).
    pub answers_start: Option<String>,
    /// When the servicing task last beat, as the agent reported it.
    pub heartbeat: Option<String>,
    /// Its success followed an install that needed no reboot.
    pub no_reboot: bool,
    pub cni_mode: Option<Reported<CniMode>>,
    pub csi_proxy_version: Option<String>,
    pub runtime_service: Option<String>,
    pub csi_proxy_host: Option<String>,
    pub hns_load_balancers: Option<Reported<i64>>,
    pub hns_endpoints: Option<Reported<i64>>,
    /// The boot the HNS counts were read in (reports of 0.2.0: none).
    pub hns_boot_id: Option<String>,
    pub preflight: Option<Preflight>,
    pub staging: Option<crate::rollout::Staging>,
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
            apply_status: apply.map(|a| Reported::Known(a.status)),
            apply_message: apply.and_then(|a| a.message.clone()),
            answers_start: apply.and_then(|a| a.started_at.clone()),
            heartbeat: apply.and_then(|a| a.heartbeat.clone()),
            no_reboot: apply.is_some_and(|a| a.no_reboot),
            cni_mode: observed.cni_mode.as_deref().map(Reported::parse),
            csi_proxy_version: observed.csi_proxy_version,
            runtime_service: observed.runtime_service,
            csi_proxy_host: observed.csi_proxy_host,
            hns_load_balancers: hns.map(|h| Reported::Known(h.load_balancers)),
            hns_endpoints: hns.map(|h| Reported::Known(h.endpoints)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::report::WindowsNodeReportSpec;
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
        assert_eq!(AgentReport::from_object(&old).apply_status, Some(Reported::Known(ApplyStatus::Succeeded)));
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
        assert_eq!((r.source, r.apply_status), (ReportSource::Annotations, Some(Reported::Known(ApplyStatus::Succeeded))));
    }

    #[test]
    fn a_node_without_a_report_has_none() {
        let r = AgentReport::of(&NodeRecord::from(&Node::default()), None);
        assert_eq!(r, AgentReport::default());
    }

    /// A 0.2.0 agent's annotation the schema would refuse is kept, with its
    /// text, as unknown: the decision says what it read.
    #[test]
    fn an_annotation_that_does_not_parse_reads_as_unknown_with_its_text() {
        let mut node = Node::default();
        node.metadata.annotations = Some(
            [
                ("winpool.dev/apply-status", "Exploded"),
                ("winpool.dev/hns-load-balancers", "-1"),
                ("winpool.dev/hns-endpoints", " 40 "),
                ("winpool.dev/cni-mode", "nat"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
        let r = AgentReport::of(&NodeRecord::from(&node), None);
        assert_eq!(r.apply_status, Some(Reported::Unknown("Exploded".into())));
        assert_eq!(r.hns_load_balancers, Some(Reported::Unknown("-1".into())));
        assert_eq!(r.hns_endpoints, Some(Reported::Known(40)));
        assert_eq!(r.cni_mode, Some(Reported::Unknown("nat".into())));
        for mode in [CniMode::Overlay, CniMode::L2bridge] {
            assert_eq!(Reported::parse(mode.as_str()), Reported::Known(mode));
            assert_eq!((mode.to_string(), serde_json::to_value(mode).unwrap()), (mode.as_str().to_string(), json!(mode.as_str())));
        }
        for raw in ["", "1e3", "+4", "99999999999999999999"] {
            assert_eq!(Reported::count(raw), Reported::Unknown(raw.into()), "{raw:?}");
        }
    }
}
