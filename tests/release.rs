//! The version lives in Cargo.toml alone: the chart's version and appVersion,
//! the image tag hack/image.sh builds, the agent image the operator defaults
//! to, and the CHANGELOG all follow it.

use std::path::PathBuf;
use std::process::Command;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn chart_field(name: &str) -> String {
    let chart = std::fs::read_to_string(repo_root().join("charts/winpool/Chart.yaml")).expect("Chart.yaml");
    let value: serde_json::Value = serde_saphyr::from_str(&chart).expect("Chart.yaml is YAML");
    value[name].as_str().unwrap_or_else(|| panic!("Chart.yaml has no {name}")).to_string()
}

#[test]
fn the_chart_is_released_with_the_crate_version() {
    assert_eq!(chart_field("version"), VERSION, "Chart.yaml version");
    assert_eq!(chart_field("appVersion"), VERSION, "Chart.yaml appVersion");
}

/// Artifact Hub lists the images a release runs: the release's own.
#[test]
fn the_artifact_hub_images_are_the_crate_version() {
    let chart = std::fs::read_to_string(repo_root().join("charts/winpool/Chart.yaml")).expect("Chart.yaml");
    let value: serde_json::Value = serde_saphyr::from_str(&chart).expect("Chart.yaml is YAML");
    let images = value["annotations"]["artifacthub.io/images"].as_str().expect("artifacthub.io/images");
    let images: Vec<serde_json::Value> = serde_saphyr::from_str(images).expect("a YAML list");
    assert_eq!(images.len(), 2, "the operator and the agent");
    for image in images {
        let reference = image["image"].as_str().expect("image");
        assert!(reference.ends_with(&format!(":{VERSION}")), "{reference} is not tagged {VERSION}");
    }
}

#[test]
fn the_image_is_tagged_with_the_crate_version() {
    let out = Command::new(repo_root().join("hack/image.sh")).arg("--print").output().expect("hack/image.sh runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let image = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(image.ends_with(&format!(":{VERSION}")), "{image}");
}

#[test]
fn the_changelog_has_a_section_for_the_version() {
    let log = std::fs::read_to_string(repo_root().join("CHANGELOG.md")).expect("CHANGELOG.md");
    assert!(log.lines().any(|l| l.starts_with(&format!("## [{VERSION}]"))), "CHANGELOG.md has no '## [{VERSION}]' section");
}

#[test]
fn the_chart_and_readme_agree_on_the_oldest_kubernetes() {
    let kube = chart_field("kubeVersion");
    let minor = kube.trim_start_matches(">=").split('.').take(2).collect::<Vec<_>>().join(".");
    for doc in ["README.md", "charts/winpool/README.md"] {
        let text = std::fs::read_to_string(repo_root().join(doc)).expect(doc);
        assert!(
            text.contains(&format!("{minor} or later")) || text.contains(&format!("{minor}+")),
            "{doc} does not say Kubernetes {minor} or later (Chart.yaml: {kube})"
        );
    }
}

/// The chart always passes the CSI Proxy and pause images (so that
/// global.image.registry can move them to a mirror): its defaults are the
/// operator's own.
#[test]
fn the_chart_runs_the_operators_default_images() {
    let values = std::fs::read_to_string(repo_root().join("charts/winpool/values.yaml")).expect("values.yaml");
    let values: serde_json::Value = serde_saphyr::from_str(&values).expect("values.yaml is YAML");
    let name = |image: &serde_json::Value| format!("{}/{}", image["registry"].as_str().unwrap(), image["repository"].as_str().unwrap());
    assert_eq!(name(&values["csiProxy"]["image"]), winpool::builders::csi_proxy::DEFAULT_REPOSITORY, "csiProxy.image");
    let pause = &values["podNetwork"]["image"];
    assert_eq!(
        format!("{}:{}", name(pause), pause["tag"].as_str().unwrap()),
        winpool::builders::pod_network::DEFAULT_IMAGE,
        "podNetwork.image"
    );
}
