//! The API server itself refuses bad WindowsNodePools with a message a person
//! understands, accepts every valid example, and `kubectl get wnp` shows the columns.

use crate::support;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, ValidationDirective};
use kube::core::{ApiResource, GroupVersionKind};
use support::{client, examples_dir, install_crd, read_yaml_files};
use winpool::api::WindowsNodePool;

fn pools_api(client: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("winpool.dev", "v1alpha1", "WindowsNodePool"), "windowsnodepools");
    Api::all_with(client.clone(), &ar)
}

fn strict(dry_run: bool) -> PatchParams {
    let mut p = PatchParams::apply("winpool-tests").force();
    p.dry_run = dry_run;
    p.field_validation = Some(ValidationDirective::Strict);
    p
}

fn expectation(text: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix("# expect: "))
        .unwrap_or_else(|| panic!("invalid example has no '# expect:' line:\n{text}"))
        .trim()
        .to_string()
}

#[tokio::test]
async fn every_invalid_example_is_refused_with_its_message() {
    let client = client().await;
    install_crd(&client).await;
    let api = pools_api(&client);
    let invalid = read_yaml_files(&examples_dir().join("invalid"));
    assert!(invalid.len() >= 15, "the invalid examples are all there");
    let mut failures = Vec::new();
    for (path, text) in invalid {
        assert!(text.starts_with("# invalid: "), "{} says what is wrong with it", path.display());
        let want = expectation(&text);
        let obj: DynamicObject = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = obj.metadata.name.clone().unwrap();
        match api.patch(&name, &strict(true), &Patch::Apply(&obj)).await {
            Ok(_) => failures.push(format!("{}: accepted, expected refusal with {want:?}", path.display())),
            Err(kube::Error::Api(s)) => {
                if !s.message.contains(&want) {
                    failures.push(format!("{}: refused, but the message does not say {want:?}:\n  {}", path.display(), s.message));
                }
            }
            Err(e) => failures.push(format!("{}: unexpected error {e}", path.display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// What a person sees with `kubectl apply`, for the examples whose kubectl wording differs.
#[tokio::test]
async fn kubectl_apply_reports_unknown_fields_by_name() {
    let client = client().await;
    install_crd(&client).await;
    for (path, text) in read_yaml_files(&examples_dir().join("invalid")) {
        let Some(want) = text.lines().find_map(|l| l.strip_prefix("# expect-kubectl: ")) else { continue };
        let out = std::process::Command::new(support::tool("kubectl"))
            .args(["--kubeconfig", support::kubeconfig().to_str().unwrap(), "apply", "--dry-run=server", "-f"])
            .arg(&path)
            .output()
            .expect("kubectl runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{} must be refused", path.display());
        assert!(stderr.contains(want.trim()), "{}: kubectl says {stderr:?}, expected {want:?}", path.display());
    }
}

#[tokio::test]
async fn a_pool_name_too_long_for_a_label_is_refused() {
    let client = client().await;
    install_crd(&client).await;
    let api = pools_api(&client);
    let text = std::fs::read_to_string(examples_dir().join("minimal.yaml")).unwrap();
    let mut obj: DynamicObject = serde_saphyr::from_str(&text).unwrap();
    let long = "n".repeat(64);
    obj.metadata.name = Some(long.clone());
    let err = api.patch(&long, &strict(true), &Patch::Apply(&obj)).await.expect_err("64-character name refused");
    assert!(err.to_string().contains("at most 63 characters"), "{err}");
}

#[tokio::test]
async fn every_valid_example_is_accepted_defaulted_and_listed_with_columns() {
    let client = client().await;
    install_crd(&client).await;
    let api = pools_api(&client);
    let typed: Api<WindowsNodePool> = Api::all(client.clone());
    let valid = read_yaml_files(&examples_dir());
    assert!(valid.len() >= 4, "a minimal pool and one per OS version");
    let mut names = Vec::new();
    for (path, text) in &valid {
        let obj: DynamicObject = serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = obj.metadata.name.clone().unwrap();
        api.patch(&name, &strict(false), &Patch::Apply(&obj)).await.unwrap_or_else(|e| panic!("{} must be accepted: {e}", path.display()));
        names.push(name);
    }

    // The API server filled in the documented defaults.
    let minimal = typed.get("win22-minimal").await.expect("minimal pool exists");
    let raw = api.get("win22-minimal").await.unwrap();
    let spec = &raw.data["spec"];
    assert_eq!(spec["runtime"]["name"], "containerd");
    // No CNI mode is required unless the pool says so: AKS and EKS are l2bridge.
    assert!(spec["networking"].get("cniMode").is_none(), "{}", spec["networking"]);
    assert_eq!(spec["rollout"]["maxUnavailable"], 1);
    assert_eq!(spec["rollout"]["nodeTimeout"], "30m");
    assert_eq!(spec["rollout"]["drain"]["timeout"], "10m");
    assert_eq!(spec["hns"]["warnPercent"], 80);
    assert_eq!(spec["hns"]["taintWhenNotReady"], true);
    assert_eq!(minimal.spec.rollout.max_failed_nodes, 1);

    let kubectl = support::tool("kubectl");
    let admin = support::kubeconfig();
    let get = |wide: bool| {
        let mut args = vec!["--kubeconfig", admin.to_str().unwrap(), "get", "wnp"];
        if wide {
            args.extend(["-o", "wide"]);
        }
        let out = std::process::Command::new(&kubectl).args(&args).output().expect("kubectl runs");
        assert!(out.status.success(), "kubectl get wnp: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let header = |table: &str| table.lines().next().unwrap_or("").split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(
        header(&get(false)),
        ["NAME", "READY", "OS", "PATCH", "RESOLVED", "NODES", "UPDATED", "FAILED", "HNS", "PAUSED", "REASON", "AGE"]
    );
    let wide = get(true);
    assert_eq!(
        header(&wide),
        ["NAME", "READY", "OS", "PATCH", "RESOLVED", "RUNTIME", "CNI", "NODES", "UPDATED", "FAILED", "HNS", "PAUSED", "REASON", "AGE"]
    );
    let row = wide.lines().find(|l| l.starts_with("win19-legacy")).expect("win19-legacy listed");
    // Cells by the header's column offsets: a pool without status has empty ones.
    let head = wide.lines().next().unwrap_or("");
    let cell = |name: &str| {
        let start = head.find(name).unwrap_or_else(|| panic!("no {name} column"));
        let end = head[start..].find(|c: char| c.is_whitespace()).map_or(head.len(), |i| start + i);
        let end = head[end..].find(|c: char| !c.is_whitespace()).map_or(row.len(), |i| end + i).min(row.len());
        row.get(start..end).unwrap_or("").trim().to_string()
    };
    let cells: Vec<String> = ["READY", "OS", "PATCH", "RUNTIME", "CNI", "FAILED"].iter().map(|c| cell(c)).collect();
    assert_eq!(cells, ["", "ltsc2019", "10.0.17763.6414", "1.7.20", "l2bridge", ""], "{row}");

    for n in names {
        let _ = api.delete(&n, &DeleteParams::default()).await;
    }
}
