//! SIGTERM ends the operator in every state (issue 45): a replica that
//! outlives its pod's termination holds its metrics port, and with leader
//! election off, goes on writing beside the next one. Here the API server
//! accepts connections and never answers (a black hole: a partition, a dead
//! server behind a load balancer), so every request hangs: the operator is
//! waiting for the leader lease, or (without leader election) for its first
//! request, when SIGTERM comes.

use crate::support;

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Far more than the operator's shutdown grace (5 s) and lease release
/// timeout (3 s) together: a process still running after this hangs.
const MUST_EXIT_WITHIN: Duration = Duration::from_secs(30);

/// A TCP server that accepts and holds every connection, never answering.
fn black_hole() -> (u16, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let mut open = Vec::new();
        for conn in listener.incoming().take(64) {
            open.push(conn);
        }
    });
    (port, held)
}

fn kubeconfig_for(port: u16) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("winpool-shutdown-{}-{port}.kubeconfig", std::process::id()));
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: https://127.0.0.1:{port}, insecure-skip-tls-verify: true}}\n\
         users:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn wait_exit(child: &mut Child, within: Duration) -> Option<(ExitStatus, Duration)> {
    let start = Instant::now();
    while start.elapsed() < within {
        if let Some(status) = child.try_wait().expect("waiting for the operator") {
            return Some((status, start.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

async fn terminated_while_hanging(leader_elect: bool) {
    let (api_port, _held) = black_hole();
    let kubeconfig = kubeconfig_for(api_port);
    let metrics = support::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_winpool"))
        .args(["run", &format!("--metrics-addr=127.0.0.1:{metrics}"), &format!("--leader-elect={leader_elect}")])
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "info,kube=warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the operator");
    // Up: its admin server answers, so its SIGTERM handler is installed (before it).
    support::wait_for("the operator's /healthz", Duration::from_secs(60), || async {
        support::http_get(metrics, "/healthz").await.map(|_| ())
    })
    .await;
    // Let it reach the request that hangs.
    support::wait_for("the operator's first request to hang", Duration::from_secs(30), || async {
        std::net::TcpStream::connect(("127.0.0.1", api_port)).ok().map(|_| ())
    })
    .await;
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let exited = wait_exit(&mut child, MUST_EXIT_WITHIN);
    let mut log = String::new();
    if exited.is_none() {
        child.kill().ok();
        child.wait().ok();
    }
    child.stderr.take().unwrap().read_to_string(&mut log).ok();
    std::fs::remove_file(&kubeconfig).ok();
    let (status, after) =
        exited.unwrap_or_else(|| panic!("still running {MUST_EXIT_WITHIN:?} after SIGTERM (leader election {leader_elect}):\n{log}"));
    eprintln!("leader election {leader_elect}: exited {status} {after:?} after SIGTERM");
    assert_eq!(status.code(), Some(0), "a clean exit after SIGTERM, not a crash or the signal's default action:\n{log}");
}

#[tokio::test]
async fn sigterm_ends_a_replica_waiting_for_the_leader_lease_on_an_api_server_that_never_answers() {
    terminated_while_hanging(true).await;
}

#[tokio::test]
async fn sigterm_ends_a_replica_whose_controller_waits_on_an_api_server_that_never_answers() {
    terminated_while_hanging(false).await;
}
