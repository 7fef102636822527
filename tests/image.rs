//! The operator image (hack/image.sh) is what a cluster runs: started from the
//! image with `buildah run` (the host network reaches the local API server),
//! configured exactly as a pod is (KUBERNETES_SERVICE_HOST/PORT and the
//! ServiceAccount's token, CA and namespace under
//! /var/run/secrets/kubernetes.io/serviceaccount), under the chart's own
//! ServiceAccount and RBAC, it completes a rollout of simulated nodes. Whatever
//! the static binary on an empty base lacks at run time shows up here.
//!
//! The image is `WINPOOL_IMAGE` (hack/test.sh builds it once and sets it), or
//! built here by hack/image.sh.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kube::api::Api;
use support::chart::{install_chart_rbac, remove_chart_rbac, render_chart, run, server_and_ca, service_account_volume};
use support::{TestSpace, apply_pool, install_crd, pool_manifest, repo_root, wait_for, wait_nodes_ready};
use winpool::api::WindowsNodePool;

const WAIT: Duration = Duration::from_secs(240);
const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

fn image() -> String {
    if let Ok(image) = std::env::var("WINPOOL_IMAGE") {
        return image;
    }
    let out = run(Command::new(repo_root().join("hack/image.sh")).stderr(Stdio::inherit()));
    out.lines().last().expect("hack/image.sh prints the image").to_string()
}

fn buildah() -> Command {
    let mut c = Command::new("buildah");
    c.env("STORAGE_DRIVER", "vfs");
    c
}

/// One container of the image, run as its pod would be. Dropping it stops the
/// operator with SIGTERM (buildah passes it on; a SIGKILL would orphan the
/// process it runs) and removes the container.
struct ImageOperator {
    container: String,
    child: Option<Child>,
}

impl ImageOperator {
    fn start(image: &str, sa_dir: &Path, args: &[String], env: &[String], log: &Path) -> Self {
        let container = run(buildah().args(["from", "--quiet", "--pull-never", image])).trim().to_string();
        let (server, _) = server_and_ca();
        let (host, port) = host_port(&server);
        let log = std::fs::File::create(log).expect("log file");
        let mut cmd = buildah();
        cmd.args(["run", "--isolation", "chroot"]);
        for e in env {
            cmd.args(["--env", e]);
        }
        let child = cmd
            .arg("--volume")
            .arg(format!("{}:{SA_DIR}:ro", sa_dir.display()))
            .args(["--env", &format!("KUBERNETES_SERVICE_HOST={host}")])
            .args(["--env", &format!("KUBERNETES_SERVICE_PORT={port}")])
            .arg(&container)
            .arg("--")
            .arg("/winpool")
            .args(args)
            .stdout(log.try_clone().expect("log fd"))
            .stderr(log)
            .spawn()
            .expect("buildah run starts");
        ImageOperator { container, child: Some(child) }
    }
}

impl ImageOperator {
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut()?.try_wait().expect("buildah run can be waited for")
    }
}

impl Drop for ImageOperator {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
            let _ = child.wait();
        }
        let _ = buildah().args(["rm", &self.container]).output();
    }
}

/// The operator container's args and environment (NAME=value) in the chart's
/// Deployment, with the downward-API fields a pod would get.
fn deployment_command(rendered: &str, namespace: &str) -> (Vec<String>, Vec<String>) {
    let deployment = serde_saphyr::from_multiple::<serde_json::Value>(rendered)
        .expect("chart renders YAML")
        .into_iter()
        .find(|doc| doc["kind"] == "Deployment")
        .expect("the chart renders a Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args = container["args"].as_array().expect("args").iter().map(|a| a.as_str().expect("string arg").to_string()).collect();
    let env = container["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|e| {
            let name = e["name"].as_str().expect("env name");
            let value = match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                Some("metadata.namespace") => namespace.to_string(),
                Some("metadata.name") => "winpool-image-test".to_string(),
                Some(other) => panic!("the test does not know the downward-API field {other}"),
                None => e["value"].as_str().expect("env value").to_string(),
            };
            format!("{name}={value}")
        })
        .collect();
    (args, env)
}

/// Host and port of the API server URL https://host:port.
fn host_port(server: &str) -> (String, String) {
    let rest = server.trim_start_matches("https://").trim_end_matches('/');
    let (host, port) = rest.rsplit_once(':').unwrap_or((rest, "443"));
    (host.to_string(), port.to_string())
}

#[tokio::test]
async fn the_operator_image_completes_a_rollout_under_the_charts_service_account() {
    let image = image();
    let config = run(buildah().args([
        "inspect",
        "--type",
        "image",
        "--format",
        "{{.OCIv1.Config.User}} {{index .OCIv1.Config.Labels \"org.opencontainers.image.version\"}}",
        &image,
    ]));
    assert_eq!(config.trim(), format!("65532:65532 {}", env!("CARGO_PKG_VERSION")), "non-root, labelled with the crate version");

    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("image").await;
    let release = t.id.clone();
    install_chart_rbac(&t, &release);
    let sa_dir: PathBuf = std::env::temp_dir().join(format!("{}-serviceaccount", t.id));
    service_account_volume(&t, &format!("{release}-winpool"), &sa_dir);

    t.start_sim(2, &["--apply-time=1s"]);
    wait_nodes_ready(&t, 2).await;
    let name = format!("{}-pool", t.id);
    apply_pool(&t, &pool_manifest(&t, &name, "10.0.20348.2762", serde_json::json!({}))).await;

    // The Deployment's own arguments and environment, as the chart renders them.
    let port = support::free_port();
    let rendered = render_chart(&t, &release, &[format!("metrics.port={port}"), format!("poolSelector={}={}", support::TEST_LABEL, t.id)]);
    let (args, env) = deployment_command(&rendered, &t.namespace);
    let operator = ImageOperator::start(&image, &sa_dir, &args, &env, &t.log_path("image-operator"));

    let pools: Api<WindowsNodePool> = Api::all(t.client.clone());
    let log = t.log_path("image-operator");
    let mut operator = operator;
    wait_for("a rollout completed by the operator image", WAIT, || {
        if let Some(status) = operator.exited() {
            panic!("the operator in the image exited ({status}):\n{}", std::fs::read_to_string(&log).unwrap_or_default());
        }
        async {
            let st = pools.get(&name).await.ok()?.status?;
            (st.nodes.total == 2 && st.nodes.updated == 2).then_some(())
        }
    })
    .await;
    let (code, _) = support::http_get(port, "/readyz").await.expect("the image's admin server answers");
    assert_eq!(code, 200, "the leader in the image is ready");

    drop(operator);
    let _ = std::fs::remove_dir_all(&sa_dir);
    t.cleanup().await;
    remove_chart_rbac(&release);
}
