//! The chart's own identity for the operator: its RBAC rendered by `helm
//! template` for a test's namespaces, and a bound token of its ServiceAccount.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{TestSpace, kubeconfig, repo_root, tool};

pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("command runs");
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn kubectl(args: &[&str]) -> String {
    kubectl_on(&kubeconfig(), args)
}

fn kubectl_on(admin: &Path, args: &[&str]) -> String {
    run(Command::new(tool("kubectl")).arg("--kubeconfig").arg(admin).args(args))
}

/// `helm template` of the chart for this test's namespaces, with `sets` (key=value).
pub fn render_chart(t: &TestSpace, release: &str, sets: &[String]) -> String {
    let mut cmd = Command::new(tool("helm"));
    cmd.current_dir(repo_root()).args(["template", release, "charts/winpool", "--namespace", &t.namespace, "--kube-version", "v1.36.3"]);
    for set in [format!("agentNamespace={}", t.agent_namespace())].iter().chain(sets) {
        cmd.args(["--set", set]);
    }
    run(&mut cmd)
}

/// Only these templates of the chart (`templates/<name>.yaml`), rendered
/// with `sets` and applied with the admin kubeconfig: the rest of the chart
/// is not the test's (its Deployment's pod would land on other tests' nodes).
pub fn apply_chart_templates(t: &TestSpace, release: &str, sets: &[String], templates: &[&str]) {
    let rendered = render_chart(t, release, sets);
    let ours: Vec<&str> = rendered
        .split("\n---")
        .filter(|d| templates.iter().any(|name| d.contains(&format!("Source: winpool/templates/{name}.yaml"))))
        .collect();
    let file = std::env::temp_dir().join(format!("{release}-{}.yaml", templates.join("-")));
    std::fs::write(&file, ours.join("\n---\n")).unwrap();
    kubectl(&["apply", "-f", file.to_str().unwrap()]);
}

/// Render the chart for this test's namespaces and apply it with the admin
/// kubeconfig. Its cluster-scoped objects outlive the test: `remove_chart_rbac`.
pub fn install_chart_rbac(t: &TestSpace, release: &str) {
    install_chart_on(&kubeconfig(), t, release, &[]);
}

/// The chart rendered with `sets` and applied on the cluster `admin` administers.
pub fn install_chart_on(admin: &Path, t: &TestSpace, release: &str, sets: &[String]) {
    let file = std::env::temp_dir().join(format!("{release}-chart.yaml"));
    std::fs::write(&file, render_chart(t, release, sets)).unwrap();
    kubectl_on(admin, &["apply", "-f", file.to_str().unwrap()]);
}

/// The ClusterRoles (the operator's and the user roles) and the ClusterRoleBinding `install_chart_rbac` made.
pub fn remove_chart_rbac(release: &str) {
    let fullname = format!("{release}-winpool");
    let _ = Command::new(tool("kubectl"))
        .arg("--kubeconfig")
        .arg(kubeconfig())
        .args(["delete", "clusterrole,clusterrolebinding", &fullname, "--ignore-not-found"])
        .output();
    let _ = Command::new(tool("kubectl"))
        .arg("--kubeconfig")
        .arg(kubeconfig())
        .args(["delete", "clusterrole", &format!("{fullname}-view"), &format!("{fullname}-pool-operator"), "--ignore-not-found"])
        .output();
    let _ = Command::new(tool("kubectl"))
        .arg("--kubeconfig")
        .arg(kubeconfig())
        .args([
            "delete",
            "validatingadmissionpolicy,validatingadmissionpolicybinding",
            &format!("{fullname}-pool-operator-pause-only"),
            &format!("{fullname}-operations-operator-only"),
            &format!("{fullname}-lease-fence"),
            "--ignore-not-found",
        ])
        .output();
}

/// A bound token (1 h) of the ServiceAccount `sa` in the test's namespace.
pub fn service_account_token(t: &TestSpace, sa: &str) -> String {
    token_on(&kubeconfig(), t, sa)
}

fn token_on(admin: &Path, t: &TestSpace, sa: &str) -> String {
    kubectl_on(admin, &["create", "token", sa, "-n", &t.namespace, "--duration=1h"]).trim().to_string()
}

/// The admin kubeconfig's server URL and CA file.
pub fn server_and_ca() -> (String, PathBuf) {
    server_and_ca_on(&kubeconfig())
}

fn server_and_ca_on(admin: &Path) -> (String, PathBuf) {
    let server = kubectl_on(admin, &["config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}"]);
    let ca = kubectl_on(admin, &["config", "view", "--minify", "--raw", "-o", "jsonpath={.clusters[0].cluster.certificate-authority}"]);
    (server.trim().to_string(), PathBuf::from(ca.trim()))
}

/// A kubeconfig that authenticates as the ServiceAccount with a bound token.
pub fn service_account_kubeconfig(t: &TestSpace, sa: &str) -> PathBuf {
    service_account_kubeconfig_on(&kubeconfig(), t, sa)
}

/// [`service_account_kubeconfig`] on the cluster `admin` administers.
pub fn service_account_kubeconfig_on(admin: &Path, t: &TestSpace, sa: &str) -> PathBuf {
    let token = token_on(admin, t, sa);
    let (server, ca) = server_and_ca_on(admin);
    // YAML, one key a line, as kubectl writes it (tests/support/partition.rs reads its server line).
    let kc = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: sa\nclusters:\n- name: local\n  cluster:\n    server: {server}\n    certificate-authority: {}\nusers:\n- name: sa\n  user:\n    token: {token}\ncontexts:\n- name: sa\n  context:\n    cluster: local\n    user: sa\n",
        ca.display()
    );
    let path = std::env::temp_dir().join(format!("{}-{sa}.kubeconfig", t.id));
    std::fs::write(&path, kc).unwrap();
    path
}

/// What a pod of that ServiceAccount finds in /var/run/secrets/kubernetes.io/serviceaccount.
pub fn service_account_volume(t: &TestSpace, sa: &str, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let (_, ca) = server_and_ca();
    std::fs::write(dir.join("token"), service_account_token(t, sa)).unwrap();
    std::fs::copy(&ca, dir.join("ca.crt")).unwrap();
    std::fs::write(dir.join("namespace"), &t.namespace).unwrap();
}
