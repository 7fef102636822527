//! A node's agent report as a decision reads it, from its `WindowsNodeReport`.
//! Pure.
//!
//! Typed as the report's schema types it. The schema leaves the observed CNI
//! mode free text; a mode winpool does not know reads as
//! [`Reported::Unknown`] with its text, which the condition that says so quotes.

use std::fmt;

use crate::api::CniMode;
use crate::api::report::{ApplyStatus, PreflightVerdictValue, StagingReport, StagingStatusValue, WindowsNodeReport};
use crate::decision::rollout::Preflight;

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

impl<T: fmt::Display> fmt::Display for Reported<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reported::Known(v) => v.fmt(f),
            Reported::Unknown(raw) => f.write_str(raw),
        }
    }
}

/// A node's agent report as a decision reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentReport {
    pub agent_version: Option<String>,
    pub applied_revision: Option<String>,
    pub apply_status: Option<Reported<ApplyStatus>>,
    pub apply_message: Option<String>,
    /// The start the apply result answers.
    pub answers_start: Option<String>,
    /// When the servicing task last beat, as the agent reported it.
    pub heartbeat: Option<String>,
    /// Its success followed an install that needed no reboot.
    pub no_reboot: bool,
    /// Then, the build the agent read from the host's registry.
    pub host_build: Option<String>,
    pub cni_mode: Option<Reported<CniMode>>,
    pub csi_proxy_version: Option<String>,
    pub runtime_service: Option<String>,
    pub csi_proxy_host: Option<String>,
    pub hns_load_balancers: Option<i64>,
    pub hns_endpoints: Option<i64>,
    /// The boot the HNS counts were read in.
    pub hns_boot_id: Option<String>,
    pub preflight: Option<Preflight>,
    pub staging: Option<crate::decision::rollout::Staging>,
}

impl AgentReport {
    pub fn from_object(r: &WindowsNodeReport) -> Self {
        let s = r.observations();
        let apply = s.apply.as_ref();
        let observed = s.observed.clone().unwrap_or_default();
        let hns = s.hns.as_ref();
        AgentReport {
            agent_version: s.agent_version.clone(),
            applied_revision: apply.map(|a| a.revision.clone()),
            apply_status: apply.map(|a| Reported::Known(a.status)),
            apply_message: apply.and_then(|a| a.message.clone()),
            answers_start: apply.and_then(|a| a.started_at.clone()),
            heartbeat: apply.and_then(|a| a.heartbeat.clone()),
            no_reboot: apply.is_some_and(|a| a.no_reboot),
            host_build: apply.filter(|a| a.no_reboot).and_then(|a| a.host_build.clone()),
            cni_mode: observed.cni_mode.as_deref().map(Reported::parse),
            csi_proxy_version: observed.csi_proxy_version,
            runtime_service: observed.runtime_service,
            csi_proxy_host: observed.csi_proxy_host,
            hns_load_balancers: hns.map(|h| h.load_balancers),
            hns_endpoints: hns.map(|h| h.endpoints),
            hns_boot_id: hns.and_then(|h| h.boot_id.clone()),
            preflight: s.preflight.as_ref().filter(|p| !p.revision.is_empty()).map(|p| Preflight {
                revision: p.revision.clone(),
                verdict: match p.verdict {
                    PreflightVerdictValue::Ready => crate::decision::rollout::PreflightVerdict::Ready,
                    PreflightVerdictValue::Blocked if p.reasons.is_empty() => {
                        crate::decision::rollout::PreflightVerdict::Blocked("the agent gave no reason".into())
                    }
                    PreflightVerdictValue::Blocked => crate::decision::rollout::PreflightVerdict::Blocked(p.reasons.join("; ")),
                },
            }),
            staging: s.staging.as_ref().filter(|st| !st.revision.is_empty()).map(staging_of),
        }
    }

    /// The node's report, none when its agent has written none (an object
    /// created and not yet written reads as none: its status is empty).
    pub fn of(object: Option<&WindowsNodeReport>) -> Self {
        object.map_or_else(AgentReport::default, AgentReport::from_object)
    }
}

fn staging_of(s: &StagingReport) -> crate::decision::rollout::Staging {
    use crate::decision::rollout::StagingState;
    let state = match s.status {
        StagingStatusValue::Staging => StagingState::Running,
        StagingStatusValue::Staged => StagingState::Staged,
        StagingStatusValue::Failed => {
            StagingState::Failed(s.message.clone().filter(|m| !m.is_empty()).unwrap_or_else(|| "the agent gave no reason".into()))
        }
    };
    crate::decision::rollout::Staging { revision: s.revision.clone(), state, reboot_free: s.reboot_free }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::report::WindowsNodeReportSpec;
    use serde_json::json;

    #[test]
    fn a_report_object_reads_as_its_agent_wrote_it() {
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
        let want = AgentReport {
            agent_version: Some("0.3.0".into()),
            applied_revision: Some("r1".into()),
            apply_status: Some(Reported::Known(ApplyStatus::Succeeded)),
            apply_message: Some("build 10.0.20348.2762".into()),
            answers_start: Some("2026-12-02T10:00:00Z".into()),
            cni_mode: Some(Reported::Known(CniMode::Overlay)),
            csi_proxy_version: Some("1.1.3".into()),
            runtime_service: Some("containerd (nssm)".into()),
            hns_load_balancers: Some(12),
            hns_endpoints: Some(40),
            hns_boot_id: Some("b-2".into()),
            preflight: Some(Preflight {
                revision: "r2".into(),
                verdict: crate::decision::rollout::PreflightVerdict::Blocked("4 GiB free on C:; no update source".into()),
            }),
            ..Default::default()
        };
        assert_eq!(AgentReport::of(Some(&object)), want);
    }

    /// Between the agent's create of its report and its first status write,
    /// the report says nothing: no report.
    #[test]
    fn a_report_created_but_not_yet_written_is_no_report() {
        let created = WindowsNodeReport::new("win-1", WindowsNodeReportSpec::default());
        assert_eq!(AgentReport::of(Some(&created)), AgentReport::default());
        assert_eq!(AgentReport::of(None), AgentReport::default());
    }

    /// The schema leaves the observed CNI mode free text: one winpool does
    /// not know is kept, with its text, as unknown, so the decision says
    /// what it read.
    #[test]
    fn a_cni_mode_winpool_does_not_know_reads_as_unknown_with_its_text() {
        let status = serde_json::from_value(json!({"observed": {"cniMode": "nat"}})).unwrap();
        let r = AgentReport::of(Some(&WindowsNodeReport::reported("win-1", status)));
        assert_eq!(r.cni_mode, Some(Reported::Unknown("nat".into())));
        for mode in [CniMode::Overlay, CniMode::L2bridge] {
            assert_eq!(Reported::parse(mode.as_str()), Reported::Known(mode));
            assert_eq!((mode.to_string(), serde_json::to_value(mode).unwrap()), (mode.as_str().to_string(), json!(mode.as_str())));
        }
    }
}
