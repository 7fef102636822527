//! The contract between the operator and the Go agent, checked from both
//! sides without a cluster: the report and revision-config formats are
//! defined here, in Rust; golden JSON files written by these tests are read
//! by the agent's Go tests, and the file the Go tests write is read here; the
//! label and annotation names both sides use are compared. A rename on one
//! side fails a unit test, not an integration timeout.
//!
//! `WINPOOL_UPDATE_GOLDEN=1 cargo test --lib contract` rewrites the Rust side's files.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::api::report::WindowsNodeReport;
use crate::api::{WindowsNodePool, WindowsNodePoolSpec, names};
use crate::builders::configmap::{CONFIG_KEY, revision_configmap};
use crate::decision::revision::{NodeConfig, revision_of};

fn agent_file(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("agent").join(path)
}

/// `got` must be the file's content; with WINPOOL_UPDATE_GOLDEN=1 it becomes it.
fn golden(path: &str, got: &str) {
    let file = agent_file(path);
    if std::env::var_os("WINPOOL_UPDATE_GOLDEN").is_some() {
        std::fs::write(&file, got).unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
        return;
    }
    let want = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
    assert!(want == got, "{} is not what the Rust types write (WINPOOL_UPDATE_GOLDEN=1 rewrites it):\n{got}", file.display());
}

/// A report with every field set, as an agent in the middle of a retry
/// writes it.
fn full_report() -> Value {
    json!({
        "apiVersion": "winpool.dev/v1alpha1",
        "kind": "WindowsNodeReport",
        "metadata": {"name": "win-0", "namespace": "winpool-agents",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "win-0", "uid": "8c7d1f0e-0000-4000-8000-000000000001"}]},
        "spec": {},
        "status": {
            "agentVersion": "v0.3.0",
            "apply": {"revision": "5d8f2c1a9b", "status": "Rebooting", "message": "rebooting to finish the update to 10.0.20348.2762 (reboot 1 of at most 6)",
                      "startedAt": "2026-12-02T10:40:00Z", "heartbeat": "2026-12-02T11:05:00Z",
                      "installed": [{"kb": "KB5050001", "title": "2026-12 Servicing Stack Update for Microsoft server operating system version 21H2 for x64-based Systems (KB5050001)"},
                                    {"kb": "KB5050002", "title": "2026-12 Cumulative Update for Microsoft server operating system version 21H2 for x64-based Systems (KB5050002)",
                                     "cveIds": ["CVE-2026-21001", "CVE-2026-21002"]},
                                    {"kb": "windows10.0-kb5043936-x64.msu"}]},
            "observed": {"cniMode": "overlay", "csiProxyVersion": "1.1.3", "runtimeService": "containerd (nssm)", "csiProxyHost": "csi-proxy (nssm)"},
            "hns": {"loadBalancers": 1200, "endpoints": 4800, "bootID": "0b5e7a52-3c2f-4a8f-9d1e-5f6a7b8c9d0e", "observedAt": "2026-12-02T10:02:00Z"},
            "preflight": {"revision": "7a1b2c3d4e", "verdict": "Blocked", "reasons": ["4.2 GiB free on C:, the update needs 10 GiB"],
                          "notes": ["a reboot is pending (Component Based Servicing)"], "since": "2026-12-02T10:00:00Z"}
        }
    })
}

#[test]
fn the_rust_report_golden_is_what_the_types_write() {
    let report: WindowsNodeReport = serde_json::from_value(full_report()).expect("the sample is a report");
    let written = serde_json::to_value(&report).unwrap();
    assert_eq!(written, full_report(), "every field of the sample survives the Rust types");
    golden("internal/report/testdata/rust-report.json", &(serde_json::to_string_pretty(&written).unwrap() + "\n"));
}

#[test]
fn the_report_the_go_agent_writes_reads_whole() {
    let file = agent_file("internal/report/testdata/go-report.json");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
    let written: Value = serde_json::from_str(&text).unwrap();
    let report: WindowsNodeReport = serde_json::from_value(written.clone()).expect("the agent's report is a WindowsNodeReport");
    // A field the Go agent writes and Rust drops would be lost silently.
    assert_eq!(serde_json::to_value(&report).unwrap(), written, "the Rust types keep every field the agent writes");
    let view = crate::decision::agent_report::AgentReport::from_object(&report);
    assert_eq!(view.apply_status, Some(crate::decision::agent_report::Reported::Known(crate::api::report::ApplyStatus::Succeeded)));
    assert!(
        report.observations().hns.as_ref().is_some_and(|h| h.observed_at.is_some()),
        "when the agent read its HNS counts reaches the operator"
    );
    assert!(view.hns_boot_id.is_some() && view.preflight.is_some() && view.answers_start.is_some() && view.cni_mode.is_some());
    assert!(view.heartbeat.is_some(), "the servicing task's heartbeat reaches the operator");
    let installed = &report.observations().apply.as_ref().unwrap().installed;
    assert!(
        installed.first().is_some_and(|u| u.kb.starts_with("KB") && u.title.is_some() && !u.cve_ids.is_empty()),
        "what the agent installed, with its CVE IDs, reaches the operator: {installed:?}"
    );
}

#[test]
fn the_revision_config_golden_is_what_the_operator_writes() {
    let spec: WindowsNodePoolSpec = serde_saphyr::from_str(
        r#"
nodeSelector: {}
os:
  version: ltsc2022
  patchLevel: 10.0.20348.2762
  updates:
    source: Packages
    packages:
      - url: https://updates.example.com/windows10.0-kb5044281-x64.msu
        sha256: 1111111111111111111111111111111111111111111111111111111111111111
      - path: C:\updates\kb5043936.msu
        sha256: 2222222222222222222222222222222222222222222222222222222222222222
runtime:
  name: containerd
  version: 1.7.22
  upgrade: InPlace
  archive:
    url: https://mirror.example.com/containerd-1.7.22-windows-amd64.tar.gz
    sha256: 3333333333333333333333333333333333333333333333333333333333333333
networking: {cniMode: overlay}
storage: {csiProxy: {enabled: true, version: v1.1.3}}
"#,
    )
    .expect("a pool spec");
    let pool = WindowsNodePool::new("win22", spec.clone());
    let cm = revision_configmap(&pool, &revision_of(&spec), &NodeConfig::from_spec(&spec), "winpool-agents");
    let json = cm.data.unwrap().remove(CONFIG_KEY).unwrap();
    golden("internal/config/testdata/rust-revision.json", &(json + "\n"));
}

/// Every name, state and status both sides use, and what the name functions
/// make of one example, written by the operator's own code into one file the
/// agent's Go tests compare, value by value, with its constants and
/// functions (`agent/internal/decide/contract_test.go`): a rename on either
/// side fails one of the two.
#[test]
fn the_contract_file_is_what_the_operator_says() {
    use crate::api::NodeState;
    let app = |name: &str| format!("{}={name}", crate::builders::daemonset::LABEL_APP);
    let contract = json!({
        "labels": {
            "pool": names::LABEL_POOL,
            "revision": names::LABEL_REVISION,
            "target": names::LABEL_TARGET,
            "csiProxyVersion": crate::builders::csi_proxy::LABEL_VERSION,
            "csiProxyApp": app(crate::builders::csi_proxy::APP_CSI_PROXY),
            "podNetworkApp": app(crate::builders::pod_network::APP_POD_NETWORK),
        },
        "annotations": {
            "state": names::ANN_STATE,
            "stateSince": names::ANN_STATE_SINCE,
            "startedAt": names::ANN_STARTED_AT,
            "hnsRepair": names::ANN_HNS_REPAIR,
        },
        // What the agent answers an HNS repair with (its report's hnsRepair.result).
        "hnsRepairResults": crate::api::report::HnsRepairResult::ALL.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
        // The states on which the agent may touch its host, or finishes a report.
        "nodeStates": {
            "applying": NodeState::Applying.as_str(),
            "verifying": NodeState::Verifying.as_str(),
            "failed": NodeState::Failed.as_str(),
        },
        "applyStatuses": {
            "applying": names::APPLY_APPLYING,
            "rebooting": names::APPLY_REBOOTING,
            "rebootRequired": names::APPLY_REBOOT_REQUIRED,
            "succeeded": names::APPLY_SUCCEEDED,
            "failed": names::APPLY_FAILED,
        },
        "configMapKey": CONFIG_KEY,
        "nameExamples": {
            "configMap(win22, 5d8f2c1a9b)": crate::builders::configmap::configmap_name("win22", "5d8f2c1a9b"),
            "csiProxyDaemonSet(win22, 1.1.3)": crate::builders::csi_proxy::daemonset_name("win22", "1.1.3"),
            "csiProxyDaemonSet(win22, v1.2.0+build.1)": crate::builders::csi_proxy::daemonset_name("win22", "v1.2.0+build.1"),
            "podNetworkDaemonSet(win22)": crate::builders::pod_network::daemonset_name("win22"),
        },
    });
    golden("internal/names/testdata/contract.json", &(serde_json::to_string_pretty(&contract).unwrap() + "\n"));
}

/// The names the agent reads off the Node are the operator's, and every
/// winpool name the agent knows is one.
#[test]
fn the_agents_names_are_the_operators() {
    let go = std::fs::read_to_string(agent_file("internal/names/names.go")).expect("names.go");
    let quoted: Vec<&str> = go.split('"').skip(1).step_by(2).collect();
    // The CSI Proxy DaemonSets' version label is their builder's.
    let rust = [include_str!("api/names.rs"), include_str!("builders/csi_proxy.rs")].concat();
    for name in quoted.iter().filter(|s| s.starts_with("winpool.dev/")) {
        assert!(
            rust.contains(&format!("= \"{name}\";")),
            "names.go has {name}, which src/api/names.rs (or the CSI Proxy builder) does not define"
        );
    }
    for name in [
        names::LABEL_POOL,
        names::LABEL_REVISION,
        names::LABEL_TARGET,
        names::ANN_STATE,
        names::ANN_STATE_SINCE,
        names::ANN_STARTED_AT,
        crate::builders::configmap::CONFIG_KEY,
    ] {
        assert!(quoted.contains(&name), "the agent does not know {name} (agent/internal/names/names.go)");
    }
    for status in [names::APPLY_APPLYING, names::APPLY_REBOOTING, names::APPLY_REBOOT_REQUIRED, names::APPLY_SUCCEEDED, names::APPLY_FAILED]
    {
        assert!(quoted.contains(&status), "the agent does not write apply status {status}");
    }
}
