//! The foundation works end to end: simulated Windows nodes on the real control
//! plane run a DaemonSet's pods, and stay Ready.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec};
use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use support::{TestSpace, wait_for};

#[tokio::test]
async fn a_daemonset_runs_on_simulated_windows_nodes_and_they_stay_ready() {
    let t = TestSpace::new("cluster-ds").await;
    let nodes: Api<Node> = Api::all(t.client.clone());
    for i in 0..2 {
        let node = support::windows_node(&t, &format!("{}{i}", t.node_prefix()), "10.0.20348.2700", "1.7.20");
        nodes.create(&PostParams::default(), &node).await.expect("node created");
    }

    let labels: std::collections::BTreeMap<String, String> = [("app".to_string(), t.id.clone())].into();
    let ds = DaemonSet {
        metadata: ObjectMeta { name: Some("probe".into()), ..Default::default() },
        spec: Some(DaemonSetSpec {
            selector: LabelSelector { match_labels: Some(labels.clone()), match_expressions: None },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels), ..Default::default() }),
                spec: Some(PodSpec {
                    node_selector: Some(
                        [("kubernetes.io/os".to_string(), "windows".to_string()), (support::TEST_LABEL.to_string(), t.id.clone())].into(),
                    ),
                    containers: vec![Container {
                        name: "probe".into(),
                        image: Some("mcr.microsoft.com/windows/nanoserver:ltsc2022".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    };
    let ds_api: Api<DaemonSet> = Api::namespaced(t.client.clone(), &t.namespace);
    ds_api.create(&PostParams::default(), &ds).await.expect("DaemonSet created");

    let pods: Api<Pod> = Api::namespaced(t.client.clone(), &t.namespace);
    let running_on = wait_for("a Running DaemonSet pod on each simulated node", Duration::from_secs(90), || {
        let pods = pods.clone();
        async move {
            let list = pods.list(&ListParams::default()).await.ok()?;
            let mut on: Vec<String> = list
                .items
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .filter_map(|p| p.spec.as_ref()?.node_name.clone())
                .collect();
            on.sort();
            (on.len() == 2).then_some(on)
        }
    })
    .await;
    assert_eq!(running_on, vec![format!("{}0", t.node_prefix()), format!("{}1", t.node_prefix())]);

    for n in t.nodes().await {
        assert!(support::node_ready(&n), "node {:?} is Ready", n.metadata.name);
        let info = n.status.unwrap().node_info.unwrap();
        assert_eq!(info.kernel_version, "10.0.20348.2700", "kwok keeps the simulated kernelVersion");
        assert_eq!(info.container_runtime_version, "containerd://1.7.20");
    }
    t.cleanup().await;
}
