//! Whether a node runs the pool's configuration and can take traffic, and
//! what a node in flight is still waiting for.

use super::{HnsReadiness, NodeState, NodeView};
use crate::api::WindowsNodePoolSpec;
use crate::api::report::ApplyStatus;
use crate::decision::agent_report::Reported;
use crate::decision::versions::{RuntimeVersion, Version, WindowsBuild};

/// Whether the kubelet and the agent report the pool's configuration on the node.
pub fn verify_config(spec: &WindowsNodePoolSpec, n: &NodeView) -> Result<(), String> {
    let target: WindowsBuild = spec.os.patch_level.parse().map_err(|e| format!("{e}"))?;
    // After a reboot-free install (a hotpatch) the kubelet still reports the
    // build it read when it started (winstats reads it once): the build the
    // agent read from the host after the install is the one to verify. A
    // start that rebooted is verified by the kubelet's, read at its boot.
    let host_build = n.apply_host_build.as_deref().filter(|_| n.apply_no_reboot).and_then(|b| b.parse::<WindowsBuild>().ok());
    match (host_build, n.kernel_version.as_deref().map(str::parse::<WindowsBuild>)) {
        (Some(b), _) if !b.satisfies(&target) => {
            return Err(format!("the agent reports the host at {b} after its reboot-free install, below patch level {target}"));
        }
        (Some(_), _) => {}
        (None, None) => return Err("the kubelet reports no kernelVersion".into()),
        (None, Some(Err(_))) => {
            return Err(format!("the kubelet's kernelVersion {:?} is not a Windows build", n.kernel_version.as_deref().unwrap_or("")));
        }
        (None, Some(Ok(b))) if !b.satisfies(&target) => return Err(format!("kernelVersion {b} is below patch level {target}")),
        (None, Some(Ok(_))) => {}
    }
    if let Some(want) = &spec.runtime.version {
        let want: Version = want.parse().map_err(|e| format!("{e}"))?;
        match n.runtime_version.as_deref().map(str::parse::<RuntimeVersion>) {
            Some(Ok(r)) if r.name == spec.runtime.name && r.version == want => {}
            Some(Ok(r)) => return Err(format!("runtime is {}://{}, want {}://{want}", r.name, r.version, spec.runtime.name)),
            _ => {
                return Err(format!(
                    "runtime version {:?} is not {}://{want}",
                    n.runtime_version.as_deref().unwrap_or(""),
                    spec.runtime.name
                ));
            }
        }
    }
    let csi = &spec.storage.csi_proxy;
    // A CSI Proxy the node image runs as a host service, whose pipes answer,
    // is what the node's CSI plugins use: winpool neither replaces it nor runs
    // another beside it, so its version is reported, not required.
    if let (true, Some(want), None) = (csi.enabled, &csi.version, &n.csi_proxy_host) {
        let ok = n
            .csi_proxy_version
            .as_deref()
            .and_then(|v| v.parse::<Version>().ok())
            .zip(want.parse::<Version>().ok())
            .is_some_and(|(have, want)| have == want);
        if !ok {
            return Err(format!("agent reports csi-proxy {:?}, want {want}", n.csi_proxy_version.as_deref().unwrap_or("")));
        }
    }
    if let Some(cni) = spec.networking.cni_mode
        && n.cni_mode != Some(Reported::Known(cni))
    {
        let reported = n.cni_mode.as_ref().map(ToString::to_string).unwrap_or_default();
        return Err(format!("agent reports CNI mode {reported:?}, want {}", cni.as_str()));
    }
    Ok(())
}

/// What a node in flight is still waiting for, said the way an operator checks
/// it: the pods left to evict, the agent's report, or which check fails.
pub(super) fn waiting_for(spec: &WindowsNodePoolSpec, n: &NodeView, rev: &str, state: NodeState) -> String {
    match state {
        NodeState::Draining => format!("waiting for {} pods to be evicted", n.pods_to_evict),
        NodeState::Applying | NodeState::Verifying => match (n.applied_revision.as_deref(), n.apply()) {
            (Some(r), Some(ApplyStatus::Succeeded)) if r == rev => {
                match verify_config(spec, n).and_then(|()| verify_rebooted(n)).and_then(|()| verify_health(n)) {
                    Err(why) => format!("waiting for: {why}"),
                    Ok(()) => "every check passed at the deadline".into(),
                }
            }
            (Some(r), _) if r != rev => format!("waiting for the agent to report revision {rev}; it last reported {r}"),
            (Some(_), Some(status @ (ApplyStatus::Applying | ApplyStatus::Rebooting))) => {
                format!("waiting for the agent, which reports {status}: {}", n.apply_message.as_deref().unwrap_or("no message"))
            }
            _ => format!("waiting for the agent to report revision {rev}; it has not reported (is its DaemonSet pod running?)"),
        },
        _ => String::new(),
    }
}

/// An update that needed a reboot is done only once the node has rebooted,
/// which the kubelet proves with a new bootID; a report alone does not,
/// unless it says Windows asked no reboot of the install (a hotpatch on an
/// enrolled node the pool does not know as one: its staging was off).
pub fn verify_rebooted(n: &NodeView) -> Result<(), String> {
    match (&n.boot_id_at_start, &n.boot_id) {
        (Some(before), Some(now)) if before == now && !n.apply_no_reboot => {
            Err(format!("the node has not rebooted since the update started (bootID {now})"))
        }
        _ => Ok(()),
    }
}

/// What keeps a node that runs the right configuration from taking traffic.
pub fn verify_health(n: &NodeView) -> Result<(), String> {
    if !n.ready {
        return Err("node is not Ready".into());
    }
    if n.hns == HnsReadiness::NotReady && n.cni_mode.is_none() {
        // AKS's boot removes Azure CNI's network; only a pod sandbox brings it back.
        return Err("the agent finds no HNS network for kube-proxy: the CNI creates it when a pod sandbox is set up on the node \
                    (is the pod of the pool's pod-network DaemonSet running there?)"
            .into());
    }
    if n.hns == HnsReadiness::NotReady {
        return Err("HNS has not programmed the cluster's Services yet".into());
    }
    Ok(())
}

/// Whether the node runs a build at or past the target (unknown = no): the
/// kubelet's, or after a reboot-free install the agent's (as in [`verify_config`]).
pub(super) fn kernel_satisfies(n: &NodeView, target: Option<&WindowsBuild>) -> bool {
    let host = n.apply_host_build.as_deref().filter(|_| n.apply_no_reboot);
    let b = host.or(n.kernel_version.as_deref()).and_then(|k| k.parse::<WindowsBuild>().ok());
    matches!((b, target), (Some(b), Some(t)) if b.satisfies(t))
}
