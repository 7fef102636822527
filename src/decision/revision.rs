//! The revision: a short hash of the node-level part of a pool's spec.
//!
//! The node label `winpool.dev/revision` and the revision ConfigMap's name
//! carry it, so it must change exactly when the configuration a node must run
//! changes: patch level, runtime, networking, storage. Rollout knobs
//! (maxUnavailable, paused, windows, HNS limits) are left out: changing them
//! must never restart a rollout. So is the agent (image, settings): the agent
//! stays on the node across revisions, and a new agent is an ordinary
//! DaemonSet rolling update that needs no drain. It is computed from the
//! typed, defaulted spec, so field order and omitted-vs-explicit defaults do
//! not matter.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::api::{CniMode, KubeProxyMode, OsUpdates, RuntimeArchive, RuntimeUpgrade, UpdateSource, WindowsNodePoolSpec};

/// Everything a node's configuration depends on. Changing this struct changes
/// every pool's revision, i.e. starts a rollout everywhere: add fields with care.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeConfig {
    pub os_build: u32,
    pub patch_level: String,
    pub runtime_name: String,
    pub runtime_version: Option<String>,
    pub cni_mode: CniMode,
    /// The mode the agent must find (None: any). Not hashed: requiring the
    /// mode a pool's nodes already run changes no node.
    #[serde(skip)]
    pub cni_required: Option<CniMode>,
    pub kube_proxy_mode: KubeProxyMode,
    pub enable_dsr: bool,
    pub csi_proxy_version: Option<String>,
    /// Only when the pool names packages: the default source (Windows Update)
    /// hashes as before, whether it is left out or spelled out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updates: Option<OsUpdates>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_archive: Option<RuntimeArchive>,
    /// Only when set: the agent refuses a swap the pool did not allow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_upgrade: Option<RuntimeUpgrade>,
}

impl NodeConfig {
    pub fn from_spec(spec: &WindowsNodePoolSpec) -> Self {
        let csi = &spec.storage.csi_proxy;
        NodeConfig {
            os_build: spec.os.version.build(),
            patch_level: spec.os.patch_level.trim().to_string(),
            runtime_name: spec.runtime.name.clone(),
            runtime_version: spec.runtime.version.as_ref().map(|v| v.trim_start_matches('v').to_string()),
            // Unset hashes as overlay, the default it once had: pools that
            // left it unset keep their revision. Whether it is required is
            // cni_required's, which is not hashed.
            cni_mode: spec.networking.cni_mode.unwrap_or_default(),
            cni_required: spec.networking.cni_mode,
            kube_proxy_mode: spec.networking.kube_proxy.mode,
            enable_dsr: spec.networking.kube_proxy.enable_dsr,
            csi_proxy_version: if csi.enabled { csi.version.clone() } else { None },
            // The default source adds nothing to hash: a pool that names it
            // keeps the revision of one that does not. Pinned KBs do.
            updates: spec.os.updates.clone().filter(|u| u.source != UpdateSource::WindowsUpdate || !u.kbs.is_empty()),
            runtime_archive: spec.runtime.archive.clone(),
            runtime_upgrade: spec.runtime.upgrade,
        }
    }

    /// 10 hex characters: short enough for a DaemonSet name next to a 40-character pool name.
    pub fn revision(&self) -> String {
        // serde_json::Value sorts object keys, which makes the encoding canonical.
        let canonical = serde_json::to_vec(&serde_json::to_value(self).expect("NodeConfig serializes")).expect("a JSON value serializes");
        let digest = Sha256::digest(&canonical);
        digest.iter().take(5).map(|b| format!("{b:02x}")).collect()
    }
}

pub fn revision_of(spec: &WindowsNodePoolSpec) -> String {
    #[cfg(test)]
    COMPUTED.with(|c| c.set(c.get() + 1));
    NodeConfig::from_spec(spec).revision()
}

#[cfg(test)]
thread_local! {
    /// The revisions this thread computed: a round's tests count them.
    pub static COMPUTED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> WindowsNodePoolSpec {
        serde_saphyr::from_str(yaml).unwrap()
    }

    const MINIMAL: &str = "
nodeSelector: {matchLabels: {pool: a}}
os: {version: ltsc2022, patchLevel: 10.0.20348.2762}
";

    #[test]
    fn windows_update_spelled_out_keeps_the_revision_and_packages_change_it() {
        let minimal = revision_of(&spec(MINIMAL));
        let explicit = MINIMAL.replace("patchLevel: 10.0.20348.2762}", "patchLevel: 10.0.20348.2762, updates: {source: WindowsUpdate}}");
        assert_eq!(revision_of(&spec(&explicit)), minimal, "the default source, spelled out, rolls nothing");
        let sha = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9";
        let packages = MINIMAL.replace(
            "patchLevel: 10.0.20348.2762}",
            &format!(
                "patchLevel: 10.0.20348.2762, updates: {{source: Packages, packages: [{{url: 'https://m/kb.msu', sha256: {sha}}}]}}}}"
            ),
        );
        assert_ne!(revision_of(&spec(&packages)), minimal, "new update files are a new configuration");
        let pinned = MINIMAL
            .replace("patchLevel: 10.0.20348.2762}", "patchLevel: 10.0.20348.2762, updates: {source: WindowsUpdate, kbs: [KB5044281]}}");
        assert_ne!(revision_of(&spec(&pinned)), minimal, "pinned updates are a new configuration");
    }

    #[test]
    fn revision_is_short_hex_and_stable() {
        let r = revision_of(&spec(MINIMAL));
        assert_eq!(r.len(), 10);
        assert!(r.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(r, revision_of(&spec(MINIMAL)));
    }

    #[test]
    fn field_order_and_explicit_defaults_do_not_change_the_revision() {
        let reordered = "
os: {patchLevel: 10.0.20348.2762, version: ltsc2022}
nodeSelector: {matchLabels: {pool: a}}
";
        let explicit = "
nodeSelector: {matchLabels: {pool: a}}
os: {version: ltsc2022, patchLevel: 10.0.20348.2762}
runtime: {name: containerd}
networking: {cniMode: overlay, kubeProxy: {mode: winkernel, enableDSR: false}}
storage: {csiProxy: {enabled: false}}
agent: {image: ''}
";
        let base = revision_of(&spec(MINIMAL));
        assert_eq!(revision_of(&spec(reordered)), base);
        assert_eq!(revision_of(&spec(explicit)), base);
    }

    #[test]
    fn node_level_fields_change_the_revision_and_rollout_knobs_do_not() {
        let base = revision_of(&spec(MINIMAL));
        let changes_revision = [
            "os: {version: ltsc2022, patchLevel: 10.0.20348.2800}",
            "runtime: {version: 1.7.22}",
            "networking: {cniMode: l2bridge}",
            "networking: {kubeProxy: {enableDSR: true}}",
            "storage: {csiProxy: {enabled: true, version: v1.1.3}}",
        ];
        for extra in changes_revision {
            let s = if extra.starts_with("os:") {
                format!("nodeSelector: {{matchLabels: {{pool: a}}}}\n{extra}\n")
            } else {
                format!("{MINIMAL}{extra}\n")
            };
            assert_ne!(revision_of(&spec(&s)), base, "{extra} must change the revision");
        }
        let keeps_revision = [
            "rollout: {maxUnavailable: 3, paused: true, maxFailedNodes: 5, nodeTimeout: 1h}",
            "rollout: {maintenanceWindows: [{start: '02:00', end: '06:00'}]}",
            "hns: {maxLoadBalancers: 10, warnPercent: 50, taintWhenNotReady: false}",
            "storage: {csiProxy: {enabled: false, version: v1.1.3}}",
            "agent: {image: example.com/winpool-agent:2}",
        ];
        for extra in keeps_revision {
            let s = format!("{MINIMAL}{extra}\n");
            assert_eq!(revision_of(&spec(&s)), base, "{extra} must not change the revision");
        }
        let other_selector = MINIMAL.replace("pool: a", "pool: b");
        assert_eq!(revision_of(&spec(&other_selector)), base);
    }

    /// Revisions are on every Node of every pool: a winpool upgrade that changed
    /// them would roll every pool, so a change of this value must be one on purpose.
    #[test]
    fn revisions_are_the_ones_earlier_releases_computed() {
        assert_eq!(revision_of(&spec(MINIMAL)), "d940748531");
    }
}
