//! End-to-end with a real Prometheus (Debian's /usr/bin/prometheus on
//! loopback): it scrapes the operator during a simulated rollout with an
//! injected failure, evaluates the shipped alert rules, and its HTTP API must
//! show the winpool series with the right values and the failure alert. And:
//! no alert rule (nor rule unit test) uses a winpool_* metric that the
//! operator's /metrics page does not export.

use crate::support;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::prometheus::{Prometheus, TempDir, url_encode};
use support::{TestSpace, apply_pool, install_crd, pool_manifest, repo_root, wait_for, wait_nodes_ready};

const WAIT: Duration = Duration::from_secs(120);
const FAILED_ALERT: &str = "WindowsNodePoolNodesFailed";
/// A panel over a rate shows a series from its second scrape (every second here).
const PANEL_WAIT: Duration = Duration::from_secs(30);

/// The rules file with every `for:` duration rewritten to `for: 2s`.
///
/// The shipped rules hold their alerts pending for 5m to 24h before firing;
/// the test must not wait that long. `for:` only delays the step from pending
/// to firing, so shortening it keeps every expression (what this test checks
/// against real series) byte for byte as shipped. `for:` is always a YAML key
/// on a line of its own in this file, so a plain line edit is enough (and
/// needs no regex crate); the count check below catches a rule whose `for:`
/// the edit would miss.
fn rules_with_short_for(rules: &str) -> String {
    let mut out = String::with_capacity(rules.len());
    let mut rewritten = 0;
    for line in rules.lines() {
        let body = line.trim_start();
        if body.starts_with("for:") {
            out.push_str(&line[..line.len() - body.len()]);
            out.push_str("for: 2s");
            rewritten += 1;
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    let alerts = rules.lines().filter(|l| l.trim_start().starts_with("- alert:")).count();
    assert!(alerts > 0, "no alert rules found");
    assert_eq!(rewritten, alerts, "every alert rule has exactly one `for:` line that was rewritten");
    out
}

/// The chart's alert rules, with `for:` shortened (see [`rules_with_short_for`]).
fn shipped_rules_with_short_for() -> String {
    let path = repo_root().join("charts/winpool/files/alerts.yaml");
    let rules = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    rules_with_short_for(&rules)
}

#[test]
fn the_rules_copy_only_shortens_for_durations() {
    let rules = std::fs::read_to_string(repo_root().join("charts/winpool/files/alerts.yaml")).unwrap();
    let short = rules_with_short_for(&rules);
    let diff: Vec<_> = rules.lines().zip(short.lines()).filter(|(a, b)| a != b).collect();
    assert!(!diff.is_empty());
    for (a, b) in &diff {
        assert!(a.trim_start().starts_with("for:") && b.trim() == "for: 2s", "{a:?} -> {b:?}");
        assert_eq!(a.len() - a.trim_start().len(), b.len() - b.trim_start().len(), "indentation kept");
    }
    assert_eq!(rules.lines().count(), short.lines().count());
    assert_eq!(url_encode(r#"a{pool="x-1",state="Failed"} == 1"#), "a%7Bpool%3D%22x-1%22%2Cstate%3D%22Failed%22%7D%20%3D%3D%201");
}

/// `promtool check metrics` (Debian's promtool, or $PROMTOOL) on an exposition.
fn promtool_check_metrics(body: &str) {
    use std::io::Write;
    let promtool = std::env::var("PROMTOOL").unwrap_or_else(|_| "/usr/bin/promtool".into());
    let mut child = std::process::Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{promtool} runs (hack/build-tools.sh installs Debian's prometheus): {e}"));
    child.stdin.take().expect("stdin").write_all(body.as_bytes()).expect("metrics written to promtool");
    let out = child.wait_with_output().expect("promtool finishes");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim().is_empty(), "promtool check metrics: {said}");
}

/// The chart's Grafana dashboard, as hack/dashboard.py builds it for the package, written into `dir`.
fn shipped_dashboard(dir: &TempDir) -> std::path::PathBuf {
    let path = dir.path().join("dashboard.json");
    let out =
        Command::new("python3").arg(repo_root().join("hack/dashboard.py")).arg(&path).output().expect("python3 hack/dashboard.py runs");
    assert!(out.status.success(), "hack/dashboard.py failed: {}", String::from_utf8_lossy(&out.stderr));
    path
}

/// (panel title, PromQL) of every target in the chart's Grafana dashboard.
fn dashboard_queries() -> Vec<(String, String)> {
    let dir = TempDir::new("dashboard");
    let path = shipped_dashboard(&dir);
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("dashboard.json")).expect("dashboard is JSON");
    let vars: Vec<&str> = dashboard["templating"]["list"].as_array().into_iter().flatten().filter_map(|v| v["name"].as_str()).collect();
    assert!(vars.contains(&"cluster") && vars.contains(&"job"), "the dashboard has cluster and job variables: {vars:?}");
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                assert!(
                    !expr.contains("winpool_") || (expr.contains("$cluster") && expr.contains("$job")),
                    "panel {} ignores the cluster or job variable: {expr}",
                    panel["title"]
                );
                out.push((panel["title"].as_str().unwrap_or("").to_string(), expr.to_string()));
            }
        }
    }
    assert!(out.len() > 10, "dashboard queries found: {}", out.len());
    out
}

#[tokio::test]
async fn prometheus_scrapes_a_failing_rollout_and_the_failure_alert_goes_off() {
    let started = Instant::now();
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("prometheus-e2e").await;
    let bad = format!("{}0", t.node_prefix());
    t.start_sim(3, &["--apply-time=1s", &format!("--fail-nodes={bad}")]);
    wait_nodes_ready(&t, 3).await;
    let pool = format!("{}-pool", t.id);
    apply_pool(
        &t,
        &pool_manifest(
            &t,
            &pool,
            "10.0.20348.2762",
            json!({"maxUnavailable": 1, "maxFailedNodes": 1, "nodeTimeout": "3m", "drain": {"timeout": "1m"}}),
        ),
    )
    .await;
    // --leader-elect=false (the harness's default): the single replica sets winpool_leader 1.
    let admin = t.start_operator(&[]);
    let prom = Prometheus::start(&t, &shipped_rules_with_short_for(), &[("winpool", admin)]).await;
    // The rules copy loaded: every shipped alert is known to Prometheus.
    let groups = wait_for("Prometheus to load the rules", WAIT, || async { prom.api("/api/v1/rules").await }).await;
    let loaded: Vec<&str> = groups["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert!(loaded.contains(&FAILED_ALERT), "rules loaded: {loaded:?}");
    assert!(loaded.len() >= 9, "every alert rule loaded: {loaded:?}");

    prom.wait_value(r#"up{job="winpool"}"#, 1.0).await;
    eprintln!("[{}] Prometheus scrapes the operator after {:?}", t.id, started.elapsed());
    // What it scrapes passes Prometheus's own linter (names, units, HELP and TYPE).
    let (code, body) = support::http_get(admin, "/metrics").await.expect("the operator serves /metrics");
    assert_eq!(code, 200);
    promtool_check_metrics(&body);

    let p = format!("pool=\"{pool}\"");
    prom.wait_value(&format!("count(winpool_pool_info{{{p},os_version=\"ltsc2022\",patch_level=\"10.0.20348.2762\"}})"), 1.0).await;
    prom.wait_value(&format!("winpool_pool_nodes{{{p},state=\"Failed\"}}"), 1.0).await;
    prom.wait_value(&format!("winpool_pool_rollout_paused{{{p},reason=\"failures\"}}"), 1.0).await;
    prom.wait_value(&format!("winpool_pool_rollout_paused{{{p},reason=\"spec\"}}"), 0.0).await;
    prom.wait_value(r#"winpool_leader{job="winpool"}"#, 1.0).await;
    prom.wait_value(&format!("winpool_pool_nodes_desired{{{p}}}"), 3.0).await;
    eprintln!("[{}] series right after {:?}", t.id, started.elapsed());

    let alert = wait_for(&format!("{FAILED_ALERT} for pool {pool} to be pending or firing"), WAIT, || async {
        prom.alerts(FAILED_ALERT)
            .await
            .into_iter()
            .find(|a| a["labels"]["pool"] == pool.as_str() && matches!(a["state"].as_str(), Some("pending" | "firing")))
    })
    .await;
    eprintln!("[{}] {FAILED_ALERT} {} after {:?}: {alert}", t.id, alert["state"], started.elapsed());
    assert_eq!(alert["labels"]["severity"], "warning");
    assert_eq!(alert["labels"]["job"], "winpool", "the per-pool alert keeps the target labels");
    assert!(alert["annotations"]["summary"].as_str().is_some_and(|s| s.contains(&pool)), "{alert}");
    assert_eq!(alert["value"].as_str().and_then(|v| v.parse::<f64>().ok()), Some(1.0), "{alert}");

    // Every query of the shipped Grafana dashboard runs, with its cluster and job
    // variables set as Grafana would ("All" is .*); the per-pool panels show this
    // pool (a rate needs two scrapes of a series: it may take a second more).
    for (title, expr) in dashboard_queries() {
        let q = expr.replace("$cluster", ".*").replace("$job", "winpool").replace("$pool", &pool);
        let result = prom.query(&q).await.unwrap_or_else(|| panic!("Prometheus refused the query of panel {title:?}: {q}"));
        if expr.contains("$pool") && result.is_empty() {
            wait_for(&format!("panel {title:?} to show pool {pool}: {q}"), PANEL_WAIT, || async {
                prom.query(&q).await.filter(|r| !r.is_empty()).map(|_| ())
            })
            .await;
        }
    }

    // The operator is up and leads: the job-level alerts stay quiet.
    for quiet in ["WinpoolOperatorDown", "WinpoolNoLeader"] {
        let active = prom.alerts(quiet).await;
        assert!(active.is_empty(), "{quiet} must not be active: {active:?}");
    }

    drop(prom);
    t.cleanup().await;
    eprintln!("prometheus end-to-end took {:?}", started.elapsed());
}

#[tokio::test]
async fn every_metric_the_alert_rules_use_is_exported_by_the_operator() {
    let started = Instant::now();
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("prometheus-names").await;
    // The nodes' agents report no HNS policies at all, as after a reboot: below
    // what the cluster's Services need (the `kubernetes` Service alone needs one
    // load balancer and one endpoint), so they are HNS-not-ready. Per-node HNS
    // series exist only for such nodes, and a metric without series has no
    // line on the page at all.
    t.start_sim(2, &["--apply-time=1s", "--hns=0,0"]);
    wait_nodes_ready(&t, 2).await;
    let lagging = format!("{}0", t.node_prefix());
    let pool = format!("{}-pool", t.id);
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", json!({"maxUnavailable": 1}))).await;
    let admin = t.start_operator(&[]);

    // After a reconcile of the pool, so its per-pool series exist.
    let marker = format!("winpool_pool_nodes_desired{{pool=\"{pool}\"}}");
    let mut page = wait_for("the operator to export the pool's series", WAIT, || async {
        support::http_get(admin, "/metrics").await.filter(|(c, b)| *c == 200 && b.contains(&marker)).map(|(_, b)| b)
    })
    .await;
    // And the lagging node's series. Not an assertion of its own: when it
    // never shows up, the names check below says which metric is missing.
    let node_marker = format!("node=\"{lagging}\"");
    let start = Instant::now();
    while !page.lines().any(|l| l.starts_with("winpool_node_hns_ready{") && l.contains(&node_marker)) && start.elapsed() < WAIT {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if let Some((200, b)) = support::http_get(admin, "/metrics").await {
            page = b;
        }
    }
    let dir = TempDir::new("metrics");
    let file = dir.path().join("metrics.txt");
    std::fs::write(&file, &page).expect("save /metrics");
    // A copy next to the other logs, to look at after a failure.
    std::fs::write(t.log_path("metrics"), &page).ok();

    let out = Command::new(repo_root().join("hack/alerts-test.sh")).arg("--metrics").arg(&file).output().expect("hack/alerts-test.sh runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "hack/alerts-test.sh --metrics failed: the rules or their tests use metrics the operator does not export \
         (saved page: {})\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        t.log_path("metrics").display()
    );
    eprintln!("{}", stdout.lines().last().unwrap_or_default());

    // docs/METRICS.md and the dashboard say what the operator exports: every
    // family, type, label and listed label value, and every name a panel uses.
    let out = Command::new("python3")
        .arg(repo_root().join("hack/metrics-doc.py"))
        .arg("--check")
        .arg(&file)
        .arg("--dashboard")
        .arg(shipped_dashboard(&dir))
        .output()
        .expect("python3 hack/metrics-doc.py runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "docs/METRICS.md or the dashboard disagrees with the operator's /metrics (saved page: {})\n{stdout}{}",
        t.log_path("metrics").display(),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{}", stdout.lines().last().unwrap_or_default());
    t.cleanup().await;
    eprintln!("metric names check took {:?}", started.elapsed());
}
