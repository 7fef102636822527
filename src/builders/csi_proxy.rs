//! The pool's CSI Proxy DaemonSets, built (purely) from the revisions its
//! nodes carry.
//!
//! CSI Proxy's version is node-level configuration: it belongs to a revision,
//! and a node runs the one its `winpool.dev/revision` label names. So there is
//! one DaemonSet per version the pool's nodes need, `winpool-<pool>-csi-proxy-<version>`,
//! on the pool's nodes whose revision asks for that version (node affinity on
//! the revision label). Moving a node's revision label, which only happens on
//! a drained, cordoned node, moves it from one DaemonSet to the other: the old
//! CSI Proxy stops and the new one starts, and the agent on the node reports
//! Succeeded only once the new version runs. The pod is SIG Windows' HostProcess
//! manifest (`sig-windows-tools/hostprocess/csi-proxy`): hostProcess as SYSTEM
//! on the host network, image `<repository>:<version>`. A pool whose node image
//! runs CSI Proxy as a service (`deploy: HostService`, as on AKS) gets none.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetUpdateStrategy};
use k8s_openapi::api::core::v1::{
    Affinity, Container, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::api::{CsiProxyDeploy, WindowsNodePool, names};
use crate::builders::daemonset::{LABEL_APP, host_process_pod, pool_daemonset};

/// `app.kubernetes.io/name` of the CSI Proxy DaemonSets and their pods (the
/// agent finds the pod on its node by it).
pub const APP_CSI_PROXY: &str = "winpool-csi-proxy";
/// SIG Windows' HostProcess image of CSI Proxy; tagged with the release (`v1.1.3`).
pub const DEFAULT_REPOSITORY: &str = "ghcr.io/kubernetes-sigs/sig-windows/csi-proxy";
/// The pod label that names the CSI Proxy version its DaemonSet runs.
pub const LABEL_VERSION: &str = "winpool.dev/csi-proxy-version";

/// The image tag of a CSI Proxy version: releases are tagged `v1.1.3`.
pub fn tag(version: &str) -> String {
    format!("v{}", version.trim_start_matches('v'))
}

/// `winpool-<pool>-csi-proxy-<v1-1-3>`: a DNS subdomain (dots become dashes,
/// `+` build metadata too), at most 8 + 63 + 11 + 65 characters.
pub fn daemonset_name(pool: &str, version: &str) -> String {
    let slug: String = tag(version).to_lowercase().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    format!("winpool-{pool}-csi-proxy-{slug}")
}

pub fn is_csi_proxy(ds: &DaemonSet) -> bool {
    ds.metadata.labels.as_ref().and_then(|l| l.get(LABEL_APP)).map(String::as_str) == Some(APP_CSI_PROXY)
}

/// The DaemonSets the pool needs: one per CSI Proxy version among `revisions`
/// (each revision the pool's nodes carry or are being moved to, with the CSI
/// Proxy version it asks for, if any), none when the node image runs CSI Proxy.
pub fn daemonsets(
    pool: &WindowsNodePool,
    namespace: &str,
    repository: &str,
    revisions: &BTreeMap<String, Option<String>>,
) -> Vec<DaemonSet> {
    if pool.spec.storage.csi_proxy.deploy == CsiProxyDeploy::HostService {
        return Vec::new();
    }
    let mut by_version: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for (rev, version) in revisions {
        if let Some(v) = version {
            by_version.entry(tag(v)).or_default().insert(rev);
        }
    }
    by_version.into_iter().map(|(version, revs)| daemonset(pool, namespace, repository, &version, revs)).collect()
}

fn daemonset(pool: &WindowsNodePool, namespace: &str, repository: &str, version: &str, revisions: BTreeSet<&str>) -> DaemonSet {
    let pool_name = pool.metadata.name.clone().unwrap_or_default();
    let selector_labels: BTreeMap<String, String> = [
        (LABEL_APP.to_string(), APP_CSI_PROXY.to_string()),
        (names::LABEL_POOL.to_string(), pool_name.clone()),
        (LABEL_VERSION.to_string(), version.to_string()),
    ]
    .into();
    let node_selector: BTreeMap<String, String> =
        [(names::LABEL_OS.to_string(), "windows".to_string()), (names::LABEL_POOL.to_string(), pool_name.clone())].into();
    let on_revisions = NodeSelectorRequirement {
        key: names::LABEL_REVISION.into(),
        operator: "In".into(),
        values: Some(revisions.into_iter().map(str::to_string).collect()),
    };
    // A second CSI Proxy on a node whose image runs one as a host service
    // (AKS) would fight it for the same pipes.
    let no_host_service =
        NodeSelectorRequirement { key: names::LABEL_CSI_PROXY_HOST.into(), operator: "DoesNotExist".into(), values: None };
    let affinity = Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![on_revisions, no_host_service]),
                    match_fields: None,
                }],
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let container = Container {
        name: "csi-proxy".into(),
        image: Some(format!("{repository}:{version}")),
        resources: Some(ResourceRequirements {
            requests: Some([("cpu".to_string(), Quantity("10m".into())), ("memory".to_string(), Quantity("32Mi".into()))].into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    // Within one version the DaemonSet changes only with the repository; the
    // version itself changes with the node's revision, on a drained node.
    let strategy = DaemonSetUpdateStrategy { type_: Some("RollingUpdate".into()), rolling_update: None };
    let pod = PodSpec {
        affinity: Some(affinity),
        // CSI Proxy talks to the kubelet and the disks, never to the API server.
        automount_service_account_token: Some(false),
        ..host_process_pod(node_selector, container)
    };
    pool_daemonset(pool, namespace, daemonset_name(&pool_name, version), selector_labels, Some(strategy), pod)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(deploy: &str) -> WindowsNodePool {
        crate::test_builders::pool("win22")
            .with(&format!("storage: {{csiProxy: {{enabled: true, version: v1.1.3, deploy: {deploy}}}}}"))
            .build()
    }

    fn revs(list: &[(&str, Option<&str>)]) -> BTreeMap<String, Option<String>> {
        list.iter().map(|(r, v)| (r.to_string(), v.map(str::to_string))).collect()
    }

    fn revisions_of(ds: &DaemonSet) -> Vec<String> {
        let affinity = ds.spec.as_ref().unwrap().template.spec.as_ref().unwrap().affinity.as_ref().unwrap();
        let terms = &affinity.node_affinity.as_ref().unwrap().required_during_scheduling_ignored_during_execution.as_ref().unwrap();
        let exprs = terms.node_selector_terms[0].match_expressions.as_ref().unwrap();
        let req = &exprs[0];
        assert_eq!((req.key.as_str(), req.operator.as_str()), (names::LABEL_REVISION, "In"));
        // Never beside a CSI Proxy the node image runs as a host service (the same pipes).
        assert!(exprs.iter().any(|e| e.key == names::LABEL_CSI_PROXY_HOST && e.operator == "DoesNotExist"), "{exprs:?}");
        req.values.clone().unwrap()
    }

    #[test]
    fn one_daemonset_per_version_on_the_nodes_whose_revision_asks_for_it() {
        let r = revs(&[("aaa", Some("1.1.2")), ("bbb", Some("v1.1.3")), ("ccc", Some("v1.1.2")), ("ddd", None)]);
        let ds = daemonsets(&pool("DaemonSet"), "winpool-agents", DEFAULT_REPOSITORY, &r);
        let names: Vec<&str> = ds.iter().map(|d| d.metadata.name.as_deref().unwrap()).collect();
        assert_eq!(names, ["winpool-win22-csi-proxy-v1-1-2", "winpool-win22-csi-proxy-v1-1-3"]);
        assert_eq!(revisions_of(&ds[0]), ["aaa", "ccc"], "v1.1.2 and 1.1.2 are one version");
        assert_eq!(revisions_of(&ds[1]), ["bbb"]);
        let spec = ds[1].spec.as_ref().unwrap().template.spec.as_ref().unwrap();
        assert_eq!(spec.containers[0].image.as_deref(), Some("ghcr.io/kubernetes-sigs/sig-windows/csi-proxy:v1.1.3"));
        let win = spec.security_context.as_ref().unwrap().windows_options.as_ref().unwrap();
        assert_eq!((win.host_process, win.run_as_user_name.as_deref()), (Some(true), Some("NT AUTHORITY\\SYSTEM")));
        assert_eq!(spec.host_network, Some(true), "HostProcess pods run on the host network");
        assert_eq!(spec.node_selector.as_ref().unwrap().get(names::LABEL_POOL).map(String::as_str), Some("win22"));
        assert!(is_csi_proxy(&ds[0]));
    }

    #[test]
    fn a_node_image_that_runs_csi_proxy_gets_no_daemonset_and_no_revision_asks_none() {
        let r = revs(&[("aaa", Some("v1.1.3"))]);
        assert!(daemonsets(&pool("HostService"), "ns", DEFAULT_REPOSITORY, &r).is_empty());
        assert!(daemonsets(&pool("DaemonSet"), "ns", DEFAULT_REPOSITORY, &revs(&[("aaa", None)])).is_empty());
    }

    #[test]
    fn names_are_dns_subdomains_whatever_the_version() {
        assert_eq!(daemonset_name("p", "1.2.0-rc.1+azure"), "winpool-p-csi-proxy-v1-2-0-rc-1-azure");
        assert_eq!(tag("1.1.3"), "v1.1.3");
        assert_eq!(tag("v1.1.3"), "v1.1.3");
    }
}
