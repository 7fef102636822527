//! A real Alertmanager for the tests (Debian's prometheus-alertmanager on
//! loopback, without clustering), fed and silenced with Debian's `amtool`
//! as an operator on call would.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::prometheus::TempDir;
use super::{TestSpace, free_port, http_get, wait_for};

const ALERTMANAGER: &str = "/usr/bin/prometheus-alertmanager";
const WAIT: Duration = Duration::from_secs(120);

/// Alertmanager as a child process; killed (and its data removed) on drop.
pub struct Alertmanager {
    child: Child,
    pub port: u16,
    _dir: TempDir,
}

impl Alertmanager {
    /// Alertmanager on a free loopback port that routes every alert to a
    /// receiver that sends nothing. Returns once it is ready.
    pub async fn start(t: &TestSpace) -> Self {
        assert!(Path::new(ALERTMANAGER).is_file(), "{ALERTMANAGER} not found: apt-get install prometheus-alertmanager");
        let dir = TempDir::new("alertmanager");
        let config = dir.path().join("alertmanager.yaml");
        std::fs::write(&config, "route: {receiver: nobody}\nreceivers:\n  - name: nobody\n").expect("write config");
        let port = free_port();
        let log = t.log_path("alertmanager");
        let out = std::fs::File::create(&log).expect("log file");
        let child = Command::new(ALERTMANAGER)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.path={}", dir.path().display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            // One instance: no gossip port to collide with another test's.
            .arg("--cluster.listen-address=")
            .stdout(out.try_clone().expect("log fd"))
            .stderr(out)
            .spawn()
            .expect("Alertmanager starts");
        eprintln!("[{}] started alertmanager on 127.0.0.1:{port} (log: {})", t.id, log.display());
        let am = Alertmanager { child, port, _dir: dir };
        wait_for("Alertmanager to be ready", WAIT, || async { (http_get(port, "/-/ready").await?.0 == 200).then_some(()) }).await;
        am
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn amtool(&self, args: &[&str]) -> String {
        let out = Command::new(amtool())
            .args(args)
            .arg(format!("--alertmanager.url={}", self.url()))
            .stdin(Stdio::null())
            .output()
            .expect("amtool runs");
        assert!(out.status.success(), "amtool {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Raise an alert with these labels (`name=value`), active for an hour.
    pub fn raise(&self, labels: &[&str]) {
        let end = (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1)).to_string();
        let mut args = vec!["alert", "add"];
        args.extend_from_slice(labels);
        let end = format!("--end={end}");
        args.push(&end);
        self.amtool(&args);
    }

    /// Silence the alerts these matchers (`name=value`) select, for an hour; returns the silence's id.
    pub fn silence(&self, matchers: &[&str]) -> String {
        let mut args = vec!["silence", "add", "--comment=maintenance", "--author=winpool-tests", "--duration=1h"];
        args.extend_from_slice(matchers);
        self.amtool(&args)
    }
}

fn amtool() -> PathBuf {
    std::env::var_os("AMTOOL").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("amtool"))
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
