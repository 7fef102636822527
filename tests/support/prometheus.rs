//! A real Prometheus for the tests (Debian's /usr/bin/prometheus on
//! loopback), and a metric the test sets that it scrapes: rules over that
//! metric fire and clear on demand.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{TestSpace, free_port, wait_for};

const WAIT: Duration = Duration::from_secs(120);
const PROMETHEUS: &str = "/usr/bin/prometheus";

/// A temporary directory of this test's own, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(what: &str) -> Self {
        let p = std::env::temp_dir().join(format!("winpool-{what}-{}-{:08x}", std::process::id(), rand::random::<u32>()));
        std::fs::create_dir_all(&p).unwrap_or_else(|e| panic!("creating {}: {e}", p.display()));
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Prometheus as a child process; killed (and its data removed) on drop, also
/// when the test fails.
pub struct Prometheus {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
    /// The Authorization header its HTTP API wants, when it wants one.
    authorization: Option<String>,
    /// How the test talks to it when it serves https: trusting the test's authority.
    tls: Option<Arc<rustls::ClientConfig>>,
    _dir: TempDir,
}

/// A test's own certificate authority, and a certificate for 127.0.0.1 it signs.
pub struct TestPki {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl TestPki {
    pub fn new() -> Self {
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name.push(rcgen::DnType::CommonName, "winpool test CA");
        let ca = rcgen::CertifiedIssuer::self_signed(ca, rcgen::KeyPair::generate().expect("CA key")).expect("CA certificate");
        let key = rcgen::KeyPair::generate().expect("server key");
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("params").signed_by(&key, &ca).expect("certificate");
        TestPki { ca_pem: ca.pem(), cert_pem: cert.pem(), key_pem: key.serialize_pem() }
    }

    /// A client configuration that trusts this authority only.
    fn client_config(&self) -> Arc<rustls::ClientConfig> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()) {
            roots.add(c.expect("the test CA's PEM")).expect("the test CA");
        }
        Arc::new(rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth())
    }
}

impl Prometheus {
    /// Prometheus on a free loopback port with these rules (a rules file's
    /// text), scraping each (job, port) on 127.0.0.1 every second and
    /// evaluating the rules every second. Returns once it is ready.
    pub async fn start(t: &TestSpace, rules: &str, jobs: &[(&str, u16)]) -> Self {
        Self::launch(t, rules, jobs, None, None).await
    }

    /// The same, its HTTP API served over https with `pki`'s certificate.
    pub async fn start_with_tls(t: &TestSpace, rules: &str, jobs: &[(&str, u16)], pki: &TestPki) -> Self {
        Self::launch(t, rules, jobs, None, Some(pki)).await
    }

    /// The same, with its HTTP API behind basic auth (`--web.config.file`):
    /// `password` must be what `bcrypt` hashes.
    pub async fn start_with_basic_auth(t: &TestSpace, rules: &str, jobs: &[(&str, u16)], user: &str, password: &str, bcrypt: &str) -> Self {
        Self::launch(t, rules, jobs, Some((user, password, bcrypt)), None).await
    }

    /// Basic auth over https: credentials never cross plain http.
    pub async fn start_with_tls_and_basic_auth(
        t: &TestSpace,
        rules: &str,
        jobs: &[(&str, u16)],
        pki: &TestPki,
        (user, password, bcrypt): (&str, &str, &str),
    ) -> Self {
        Self::launch(t, rules, jobs, Some((user, password, bcrypt)), Some(pki)).await
    }

    async fn launch(
        t: &TestSpace,
        rules: &str,
        jobs: &[(&str, u16)],
        basic_auth: Option<(&str, &str, &str)>,
        pki: Option<&TestPki>,
    ) -> Self {
        use base64::Engine;
        assert!(Path::new(PROMETHEUS).is_file(), "{PROMETHEUS} not found: apt-get install prometheus");
        let dir = TempDir::new("prometheus");
        let rules_path = dir.path().join("rules.yaml");
        std::fs::write(&rules_path, rules).expect("write rules");
        let scrape: String = jobs
            .iter()
            .map(|(job, port)| format!("  - job_name: {job}\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"))
            .collect();
        let config = format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
             rule_files:\n  - {rules}\n\
             scrape_configs:\n{scrape}",
            rules = rules_path.display()
        );
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).expect("write prometheus config");
        let web_path = dir.path().join("web.yml");
        let mut web = basic_auth.map_or(String::new(), |(user, _, hash)| format!("basic_auth_users:\n  {user}: {hash}\n"));
        if let Some(pki) = pki {
            let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
            std::fs::write(&cert, &pki.cert_pem).expect("write the server certificate");
            std::fs::write(&key, &pki.key_pem).expect("write the server key");
            web.push_str(&format!("tls_server_config:\n  cert_file: {}\n  key_file: {}\n", cert.display(), key.display()));
        }
        std::fs::write(&web_path, web).expect("write prometheus web config");
        let port = free_port();
        let log = t.log_path("prometheus");
        std::fs::create_dir_all(log.parent().expect("log dir")).ok();
        let out = std::fs::File::create(&log).expect("prometheus log file");
        let child = Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg(format!("--web.config.file={}", web_path.display()))
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log fd"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {PROMETHEUS}: {e}"));
        eprintln!("[{}] started prometheus on 127.0.0.1:{port} (log: {})", t.id, log.display());
        let authorization = basic_auth
            .map(|(user, password, _)| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))));
        let tls = pki.map(TestPki::client_config);
        let prom = Prometheus { child, port, log, authorization, tls, _dir: dir };
        wait_for("Prometheus to be ready", WAIT, || async { prom.get("/-/ready").await.filter(|(c, _)| *c == 200) }).await;
        prom
    }

    async fn get(&self, path: &str) -> Option<(u16, String)> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        super::http::get(&format!("{scheme}://127.0.0.1:{}{path}", self.port), self.authorization.as_deref(), self.tls.clone()).await
    }

    /// GET an API path and return its `data`, or None until it answers with success.
    pub async fn api(&self, path: &str) -> Option<Value> {
        let (code, body) = self.get(path).await?;
        let v: Value = serde_json::from_str(&body).ok()?;
        (code == 200 && v["status"] == "success").then(|| v["data"].clone())
    }

    pub async fn query(&self, q: &str) -> Option<Vec<Value>> {
        self.api(&format!("/api/v1/query?query={}", url_encode(q))).await?["result"].as_array().cloned()
    }

    /// Wait until `q` yields exactly one sample with value `want`; on timeout
    /// the failure shows what Prometheus last answered.
    pub async fn wait_value(&self, q: &str, want: f64) {
        let start = Instant::now();
        let mut last = None;
        loop {
            if let Some(r) = self.query(q).await {
                if r.len() == 1 && r[0]["value"][1].as_str().and_then(|s| s.parse::<f64>().ok()) == Some(want) {
                    eprintln!("prometheus: {q} = {want}");
                    return;
                }
                last = Some(r);
            }
            assert!(
                start.elapsed() < WAIT,
                "timed out after {WAIT:?} waiting for Prometheus to answer `{q}` with one sample of value {want}; last answer: {last:?} (log: {})",
                self.log.display()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Active alerts (pending or firing) with this name.
    pub async fn alerts(&self, name: &str) -> Vec<Value> {
        let Some(data) = self.api("/api/v1/alerts").await else { return Vec::new() };
        data["alerts"].as_array().into_iter().flatten().filter(|a| a["labels"]["alertname"] == name).cloned().collect()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Percent-encode a query parameter (everything but RFC 3986 unreserved characters).
pub fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One gauge, `name`, served on loopback in the Prometheus text format for
/// Prometheus to scrape; the test sets its value. It is served from a thread
/// of its own, not the test's runtime: a test that blocks its runtime (helm,
/// a child process) must not make a scrape fail, or the alert over the gauge
/// resolves and a gate opens that the test holds closed.
pub struct Gauge {
    pub port: u16,
    value: Arc<AtomicU64>,
}

impl Gauge {
    pub fn serve(name: &'static str, initial: f64) -> Self {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let value = Arc::new(AtomicU64::new(initial.to_bits()));
        let shared = value.clone();
        std::thread::spawn(move || {
            for mut s in listener.incoming().flatten() {
                let v = f64::from_bits(shared.load(Ordering::SeqCst));
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let body = format!("# TYPE {name} gauge\n{name} {v}\n");
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(format!("{head}{body}").as_bytes());
            }
        });
        Gauge { port, value }
    }

    pub fn set(&self, v: f64) {
        self.value.store(v.to_bits(), Ordering::SeqCst);
    }
}
