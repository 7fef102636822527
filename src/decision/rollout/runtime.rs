//! Whether a node may be given the pool's containerd (`spec.runtime.upgrade`).
//!
//! A vendor build (`1.7.20+azure`) or a containerd under a service wrapper
//! (NSSM, as on AKS) belongs to the node image: replacing it is outside what
//! a managed service supports and its next image undoes it. Such a node is
//! only verified unless the pool says `InPlace`. A containerd another
//! service starts as its child (RKE2's `rke2`, reported as `rke2 (parent)`)
//! belongs to that service, `InPlace` or not. A node that would need a
//! replacement is never started (cordoning it would end in a certain failure).

use super::NodeView;
use crate::api::{RuntimeUpgrade, WindowsNodePoolSpec};
use crate::decision::versions::{RuntimeVersion, Version};

/// Why this node may not be given the pool's containerd; `None` when it may,
/// or needs none, or its runtime is unknown (its agent decides then).
pub fn refusal(spec: &WindowsNodePoolSpec, n: &NodeView) -> Option<String> {
    let want: Version = spec.runtime.version.as_deref()?.parse().ok()?;
    let have: RuntimeVersion = n.runtime_version.as_deref()?.parse().ok()?;
    if have.name == spec.runtime.name && have.version == want {
        return None;
    }
    let service = n.runtime_service.as_deref();
    if let Some(parent) = service.and_then(|s| s.strip_suffix(" (parent)")) {
        // Whatever the pool says: the parent puts its own containerd back.
        return Some(format!(
            "runs containerd {}, the pool asks {want}, and its containerd is a child of the {parent} service, which puts its own back at its next start: upgrade {} to change it, or set runtime.version to the version it runs",
            have.version,
            parent.to_uppercase()
        ));
    }
    let owner = match spec.runtime.upgrade {
        Some(RuntimeUpgrade::InPlace) => return None,
        Some(RuntimeUpgrade::VerifyOnly) => "runtime.upgrade is VerifyOnly".to_string(),
        None if vendor_build(&have.version) => {
            format!("{} is a vendor build, which the node image owns (runtime.upgrade unset means VerifyOnly for it)", have.version)
        }
        None => match service.filter(|s| s.contains('(')) {
            Some(service) => format!(
                "its containerd runs under a service wrapper ({service}), which the node image owns (runtime.upgrade unset means VerifyOnly for it)"
            ),
            None => return None,
        },
    };
    Some(format!(
        "runs containerd {}, the pool asks {want}, and {owner}: set runtime.upgrade: InPlace to replace it, or runtime.version to the version its node image carries",
        have.version
    ))
}

/// Build metadata (`+azure`) or a pre-release that is not a release
/// candidate or beta (`-eks`) marks a vendor's build.
fn vendor_build(v: &Version) -> bool {
    let pre = v.0.pre.as_str();
    !v.0.build.is_empty() || (!pre.is_empty() && !["alpha", "beta", "rc"].iter().any(|p| pre.starts_with(p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(version: &str, upgrade: &str) -> WindowsNodePoolSpec {
        let pool = crate::test_builders::pool("p").runtime(version);
        if upgrade.is_empty() { pool.spec() } else { pool.with(&format!("runtime: {{upgrade: {upgrade}}}")).spec() }
    }

    fn node(runtime: &str, service: Option<&str>) -> NodeView {
        NodeView {
            name: "win-1".into(),
            runtime_version: Some(format!("containerd://{runtime}")),
            runtime_service: service.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn a_node_image_owns_vendor_builds_and_wrapped_services_unless_the_pool_says_in_place() {
        let cases: &[(&str, &str, &str, Option<&str>, bool)] = &[
            // (pool asks, runtime.upgrade, node runs, its service, refused)
            ("1.7.22", "", "1.7.20+azure", Some("containerd (nssm)"), true),
            ("1.7.22", "", "1.7.20+azure", None, true),
            ("1.7.22", "", "1.7.20", Some("containerd (nssm)"), true),
            ("1.7.22", "", "1.7.20-eks.1", None, true),
            ("1.7.22", "", "1.7.20", Some("containerd"), false),
            ("1.7.22", "", "1.7.20", None, false),
            ("1.7.22", "", "1.7.22-rc.1", None, false),
            ("1.7.22", "InPlace", "1.7.20+azure", Some("containerd (nssm)"), false),
            ("1.7.22", "VerifyOnly", "1.7.20", Some("containerd"), true),
            ("1.7.22", "", "1.7.27-k3s1", Some("rke2 (parent)"), true),
            ("1.7.22", "InPlace", "1.7.27-k3s1", Some("rke2 (parent)"), true),
            ("1.7.22", "InPlace", "1.7.27", Some("rke2 (parent)"), true),
            // At the version already (build metadata does not count): nothing to replace.
            ("1.7.20", "", "1.7.20+azure", Some("containerd (nssm)"), false),
            ("1.7.20", "VerifyOnly", "1.7.20", None, false),
        ];
        for (want, upgrade, runs, service, refused) in cases {
            let got = refusal(&spec(want, upgrade), &node(runs, *service));
            assert_eq!(got.is_some(), *refused, "asks {want} ({upgrade:?}), runs {runs} {service:?}: {got:?}");
            if let Some(msg) = got {
                // The remedy: InPlace, or for a parent service's containerd its own upgrade.
                let remedy = match service.and_then(|s| s.strip_suffix(" (parent)")) {
                    Some(_) => msg.contains("upgrade RKE2") && msg.contains("runtime.version"),
                    None => msg.contains("runtime.upgrade: InPlace"),
                };
                assert!(msg.contains(runs) && msg.contains(want) && remedy, "{msg}");
            }
        }
    }

    #[test]
    fn an_unmanaged_or_unknown_runtime_is_never_refused() {
        let unmanaged: WindowsNodePoolSpec =
            serde_saphyr::from_str("nodeSelector: {}\nos: {version: ltsc2022, patchLevel: 10.0.20348.2762}").unwrap();
        assert_eq!(refusal(&unmanaged, &node("1.7.20+azure", Some("containerd (nssm)"))), None);
        let unknown = NodeView { runtime_version: None, ..node("", Some("containerd (nssm)")) };
        assert_eq!(refusal(&spec("1.7.22", "VerifyOnly"), &unknown), None);
    }
}
