//! Health gates against the real control plane: a Prometheus gate (Debian's
//! Prometheus behind basic auth, scraping a gauge the test sets, an alert
//! rule over it that fires and clears on demand) and a node-scope pod gate.
//! A gate that cannot reach Prometheus, or is refused without credentials,
//! is closed; with the credentials from a Secret it sees the alert, or the
//! series of an instant query. While a gate is closed no node starts, as the
//! API server's audit log shows, and the pool's Progressing condition names
//! the gate and what it saw; once it opens the rollout proceeds and completes.
//! An https gate trusts exactly the authority its Secret names.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use serde_json::json;
use support::alertmanager::Alertmanager;
use support::prometheus::{Gauge, Prometheus, TestPki};
use support::{TestSpace, apply_pool, audit, install_crd, pool_manifest, wait_for, wait_nodes_ready};
use winpool::api::{WindowsNodePool, conditions, names};

const WAIT: Duration = Duration::from_secs(180);
const ALERT: &str = "WinpoolTestHold";

/// The pool's Progressing condition (reason, message) once the status
/// describes the current spec (observedGeneration), when `ok` accepts it.
async fn wait_progressing(t: &TestSpace, pool: &str, what: &str, ok: impl Fn(&str, &str) -> bool) -> (String, String) {
    let api: Api<WindowsNodePool> = Api::all(t.client.clone());
    wait_for(what, WAIT, || async {
        let p = api.get(pool).await.ok()?;
        let st = p.status.as_ref()?;
        if st.observed_generation != p.metadata.generation {
            return None;
        }
        let c = st.conditions.iter().find(|c| c.type_ == conditions::PROGRESSING)?;
        ok(&c.reason, &c.message).then(|| (c.reason.clone(), c.message.clone()))
    })
    .await
}

async fn wait_complete(t: &TestSpace, pool: &str, total: i32) {
    support::wait_pool_done(t, pool, total, WAIT).await;
}

/// When each of the test's nodes was started (the API server's record of the
/// operator's patches that set started-at), node -> times.
fn starts(t: &TestSpace) -> BTreeMap<String, Vec<Timestamp>> {
    let mut out: BTreeMap<String, Vec<Timestamp>> = BTreeMap::new();
    for r in audit::requests(&audit::audit_log(), &t.node_prefix()) {
        let start = r.resource == "nodes" && r.verb == "patch" && r.code == 200;
        if start && r.body["metadata"]["annotations"]["winpool.dev/started-at"].is_string() {
            out.entry(r.name.clone()).or_default().push(r.at.expect("audit events carry their time"));
        }
    }
    out
}

/// Until the operator's /metrics says `winpool_pool_health_gate_closed` is `want` for the pool.
async fn wait_gate_metric(admin: u16, pool: &str, want: &str) {
    let series = format!("winpool_pool_health_gate_closed{{pool=\"{pool}\"}} ");
    wait_for(&format!("{series}{want} on /metrics"), WAIT, || async {
        let (_, body) = support::http_get(admin, "/metrics").await?;
        body.lines().any(|l| l.strip_prefix(&series) == Some(want)).then_some(())
    })
    .await;
}

async fn apply_rollout(t: &TestSpace, pool: &str, rollout: serde_json::Value) {
    apply_pool(t, &pool_manifest(t, pool, "10.0.20348.2762", rollout)).await;
}

/// Events on the pool with this reason, their notes.
async fn pool_events(t: &TestSpace, pool: &str, reason: &str) -> Vec<String> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(t.client.clone());
    let list = events.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
    list.into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pool) && e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.note)
        .collect()
}

/// The gauge the test sets, at 1, and the rules of the test alert over it:
/// it fires while the gauge is 1 (no `for:`, so on the first evaluation).
fn blocking_gauge() -> (Gauge, String) {
    let gauge = Gauge::serve("winpool_test_gate_blocking", 1.0);
    let rules = format!("groups:\n  - name: gate-test\n    rules:\n      - alert: {ALERT}\n        expr: winpool_test_gate_blocking > 0\n");
    (gauge, rules)
}

/// The Secret `prometheus-ca` holding `pki`'s authority, labelled for gates.
fn ca_secret(pki: &TestPki) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some("prometheus-ca".into()),
            labels: Some([(names::LABEL_GATE_CREDENTIALS.to_string(), "true".to_string())].into()),
            ..Default::default()
        },
        string_data: Some([("ca.crt".to_string(), pki.ca_pem.clone())].into()),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_firing_alert_holds_the_rollout_until_it_clears() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("gates-prometheus").await;
    let (gauge, rules) = blocking_gauge();
    // Its API wants basic auth (admin/test: the example of Prometheus's web configuration docs).
    let hash = "$2b$12$hNf2lSsxfm0.i4a.1kVpSOVyBCfIB51VRjgBUyv6kdnyTlgWj81Ay";
    // Over https (an auth gate needs it), signed by a private authority the gates trust.
    let pki = TestPki::new();
    let prom = Prometheus::start_with_tls_and_basic_auth(&t, &rules, &[("gate", gauge.port)], &pki, ("admin", "test", hash)).await;
    let firing = || async { prom.alerts(ALERT).await.iter().any(|a| a["state"] == "firing") };
    wait_for("the test alert to fire", WAIT, || async { firing().await.then_some(()) }).await;

    t.start_sim(3, &["--apply-time=1s", "--reboot-time=0.5s"]);
    wait_nodes_ready(&t, 3).await;
    let pool = format!("{}-pool", t.id);
    // First a gate that cannot reach its Prometheus (a port nobody listens
    // on): it is closed and says why.
    let nobody = support::free_port();
    let gate = |mut g: serde_json::Value| {
        g["name"] = "no-test-alerts".into();
        g["kind"] = "Prometheus".into();
        json!({"maxUnavailable": 2, "healthGateInterval": "1s", "healthGates": [g]})
    };
    let alerts = |url: String| json!({"url": url, "alerts": {"name": "WinpoolTest.*"}, "timeout": "2s"});
    apply_rollout(&t, &pool, gate(alerts(format!("http://127.0.0.1:{nobody}")))).await;
    // The Secret with the credentials lives in the operator's namespace (here the test's).
    let secrets: Api<Secret> = Api::namespaced(t.client.clone(), &t.namespace);
    let creds = Secret {
        metadata: ObjectMeta {
            name: Some("prometheus-auth".into()),
            labels: Some([(names::LABEL_GATE_CREDENTIALS.to_string(), "true".to_string())].into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/basic-auth".into()),
        string_data: Some([("username".to_string(), "admin".to_string()), ("password".to_string(), "test".to_string())].into()),
        ..Default::default()
    };
    secrets.create(&PostParams::default(), &creds).await.expect("the credentials Secret");
    secrets.create(&PostParams::default(), &ca_secret(&pki)).await.expect("the CA Secret");
    t.start_operator(&[&format!("--secret-namespace={}", t.namespace)]);
    let (_, msg) = wait_progressing(&t, &pool, "the unreachable gate to hold the rollout", |reason, _| reason == "HealthGateClosed").await;
    assert!(msg.starts_with("gate \"no-test-alerts\": query failed: ") && msg.contains("refused"), "{msg}");
    assert!(starts(&t).is_empty(), "no node started while the gate could not be evaluated: {:?}", starts(&t));
    wait_for("a HealthGateClosed Event for the unreachable gate", WAIT, || async {
        pool_events(&t, &pool, "HealthGateClosed").await.iter().any(|n| n.contains("query failed")).then_some(())
    })
    .await;

    // The real Prometheus without credentials: refused, so closed.
    let url = format!("https://127.0.0.1:{}", prom.port);
    let alerts =
        |url: String| json!({"url": url, "alerts": {"name": "WinpoolTest.*"}, "timeout": "2s", "tls": {"caSecretName": "prometheus-ca"}});
    apply_rollout(&t, &pool, gate(alerts(url.clone()))).await;
    let (_, msg) = wait_progressing(&t, &pool, "the refused gate to hold the rollout", |reason, msg| {
        reason == "HealthGateClosed" && msg.contains("HTTP 401")
    })
    .await;
    assert!(msg.starts_with("gate \"no-test-alerts\": query failed: HTTP 401"), "{msg}");

    // With the Secret's credentials: the alert fires, closed, naming the alert.
    let mut with_auth = alerts(url.clone());
    with_auth["auth"] = json!({"type": "Basic", "secretName": "prometheus-auth"});
    apply_rollout(&t, &pool, gate(with_auth.clone())).await;
    let (_, msg) = wait_progressing(&t, &pool, "the firing alert to hold the rollout", |reason, msg| {
        // Once every agent has judged the revision: until then the message
        // also counts the pending nodes awaiting their agent's preflight.
        reason == "HealthGateClosed" && msg.contains("alert firing") && msg.ends_with(" nodes pending")
    })
    .await;
    assert_eq!(msg, format!("gate \"no-test-alerts\": 1 alert firing: {ALERT}; 3 nodes pending"));
    let announced = wait_for("a HealthGateClosed Event", WAIT, || async {
        let notes = pool_events(&t, &pool, "HealthGateClosed").await;
        notes.iter().any(|n| n.contains(ALERT)).then_some(notes)
    })
    .await;
    assert!(announced.iter().all(|n| n.contains("gate \"no-test-alerts\"")), "{announced:?}");
    // The same Prometheus asked an instant query: its series close the gate.
    let query = json!({"url": url, "query": "winpool_test_gate_blocking > 0", "auth": with_auth["auth"], "tls": with_auth["tls"]});
    apply_rollout(&t, &pool, gate(query)).await;
    let (_, msg) = wait_progressing(&t, &pool, "the query gate to hold the rollout", |reason, msg| {
        reason == "HealthGateClosed" && msg.contains("series")
    })
    .await;
    assert!(msg.starts_with("gate \"no-test-alerts\": query returned 1 series: "), "{msg}");
    assert!(msg.contains(&format!("instance=\"127.0.0.1:{}\"", gauge.port)), "the series is named by its labels: {msg}");
    apply_rollout(&t, &pool, gate(with_auth)).await;
    assert!(starts(&t).is_empty(), "no node started while the alert fired: {:?}", starts(&t));
    for n in t.nodes().await {
        assert!(
            !n.annotations().contains_key("winpool.dev/state") || n.annotations()["winpool.dev/state"] == "Pending",
            "{}",
            n.name_any()
        );
    }

    // The alert clears: the rollout proceeds and completes. The alert cannot
    // clear before the gauge drops, so every start must come after that.
    let cleared = Timestamp::now();
    gauge.set(0.0);
    wait_for("the test alert to clear", WAIT, || async { (!firing().await).then_some(()) }).await;
    wait_complete(&t, &pool, 3).await;
    let started = starts(&t);
    assert_eq!(started.len(), 3, "every node started: {started:?}");
    for (node, at) in &started {
        assert!(at.iter().all(|a| *a >= cleared), "{node} started at {at:?}, before the alert could clear (gauge dropped at {cleared})");
    }
    let in_flight = audit::max_in_flight(&audit::requests(&audit::audit_log(), &t.node_prefix()));
    assert!(in_flight <= 2, "maxUnavailable holds: {in_flight} in flight at once");
    drop(prom);
    t.cleanup().await;
}

/// A gate on a Prometheus served over https by a private authority: closed,
/// saying what to set, while the operator trusts no authority for it; with
/// the authority from a Secret it reads the alert through TLS, and opens
/// when the alert clears.
#[tokio::test]
async fn an_https_gate_trusts_the_authority_in_its_secret() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("gates-https").await;
    let (gauge, rules) = blocking_gauge();
    let pki = TestPki::new();
    let prom = Prometheus::start_with_tls(&t, &rules, &[("gate", gauge.port)], &pki).await;
    let firing = || async { prom.alerts(ALERT).await.iter().any(|a| a["state"] == "firing") };
    wait_for("the test alert to fire", WAIT, || async { firing().await.then_some(()) }).await;

    t.start_sim(2, &["--apply-time=1s", "--reboot-time=0.5s"]);
    wait_nodes_ready(&t, 2).await;
    let pool = format!("{}-pool", t.id);
    let gate = |mut g: serde_json::Value| {
        g["name"] = "no-test-alerts".into();
        g["kind"] = "Prometheus".into();
        json!({"maxUnavailable": 2, "healthGateInterval": "1s", "healthGates": [g]})
    };
    let url = format!("https://127.0.0.1:{}", prom.port);
    let alerts = json!({"url": url, "alerts": {"name": "WinpoolTest.*"}, "timeout": "2s"});
    apply_rollout(&t, &pool, gate(alerts.clone())).await;
    let secrets: Api<Secret> = Api::namespaced(t.client.clone(), &t.namespace);
    secrets.create(&PostParams::default(), &ca_secret(&pki)).await.expect("the CA Secret");
    t.start_operator(&[&format!("--secret-namespace={}", t.namespace)]);
    let (_, msg) = wait_progressing(&t, &pool, "the untrusted gate to hold the rollout", |reason, _| reason == "HealthGateClosed").await;
    assert!(msg.starts_with("gate \"no-test-alerts\": query failed: ") && msg.contains("UnknownIssuer"), "{msg}");
    assert!(msg.contains("the gate's tls.caSecretName"), "it says what to set: {msg}");

    let mut trusting = alerts;
    trusting["tls"] = json!({"caSecretName": "prometheus-ca"});
    apply_rollout(&t, &pool, gate(trusting)).await;
    held_over_https_until_the_alert_clears(&t, &pool, &prom, &gauge).await;
    drop(prom);
    t.cleanup().await;
}

/// The gate reads the firing alert over https and holds both nodes; once the
/// alert clears, the rollout completes.
async fn held_over_https_until_the_alert_clears(t: &TestSpace, pool: &str, prom: &Prometheus, gauge: &Gauge) {
    let (_, msg) = wait_progressing(t, pool, "the alert, read over https, to hold the rollout", |reason, msg| {
        // Once every agent has judged the revision: until then the message
        // also counts the pending nodes awaiting their agent's preflight.
        reason == "HealthGateClosed" && msg.contains("alert firing") && msg.ends_with(" nodes pending")
    })
    .await;
    assert_eq!(msg, format!("gate \"no-test-alerts\": 1 alert firing: {ALERT}; 2 nodes pending"));
    assert!(starts(t).is_empty(), "no node started while the gate was closed: {:?}", starts(t));
    gauge.set(0.0);
    wait_for("the test alert to clear", WAIT, || async {
        (!prom.alerts(ALERT).await.iter().any(|a| a["state"] == "firing")).then_some(())
    })
    .await;
    wait_complete(t, pool, 2).await;
}

/// The other way to trust a private authority (docs/OPERATIONS.md): a CA
/// bundle the chart mounts (`extraVolumes`, `extraVolumeMounts`) and names in
/// `SSL_CERT_FILE` (`extraEnv`). A gate without `tls` then reads its
/// Prometheus over https, and holds the rollout while the alert fires.
#[tokio::test]
async fn an_https_gate_trusts_a_ca_bundle_the_chart_mounts_at_ssl_cert_file() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("gates-ca-mount").await;
    let (gauge, rules) = blocking_gauge();
    let pki = TestPki::new();
    let prom = Prometheus::start_with_tls(&t, &rules, &[("gate", gauge.port)], &pki).await;
    let firing = || async { prom.alerts(ALERT).await.iter().any(|a| a["state"] == "firing") };
    wait_for("the test alert to fire", WAIT, || async { firing().await.then_some(()) }).await;

    // The values docs/OPERATIONS.md gives, rendered; the test's directory stands
    // in for the volume the kubelet would mount.
    let sets = [
        "extraVolumes[0].name=corp-ca",
        "extraVolumes[0].configMap.name=corp-ca",
        "extraVolumeMounts[0].name=corp-ca",
        "extraVolumeMounts[0].mountPath=/etc/corp-ca",
        "extraEnv[0].name=SSL_CERT_FILE",
        "extraEnv[0].value=/etc/corp-ca/ca.crt",
    ]
    .map(String::from);
    let (mount_path, cert_file) = ca_bundle_mount(&support::chart::render_chart(&t, "gates-ca-mount", &sets));
    let mount = std::env::temp_dir().join(format!("{}-corp-ca", t.id));
    let in_mount = cert_file.strip_prefix(&mount_path).expect("SSL_CERT_FILE is in the mounted volume").trim_start_matches('/');
    std::fs::create_dir_all(&mount).unwrap();
    std::fs::write(mount.join(in_mount), &pki.ca_pem).unwrap();

    t.start_sim(2, &["--apply-time=1s", "--reboot-time=0.5s"]);
    wait_nodes_ready(&t, 2).await;
    let pool = format!("{}-pool", t.id);
    let url = format!("https://127.0.0.1:{}", prom.port);
    let rollout = json!({"maxUnavailable": 2, "healthGateInterval": "1s", "healthGates": [{"name": "no-test-alerts",
        "kind": "Prometheus", "url": url, "alerts": {"name": "WinpoolTest.*"}, "timeout": "2s"}]});
    apply_rollout(&t, &pool, rollout).await;
    let env = [("SSL_CERT_FILE".to_string(), mount.join(in_mount).display().to_string())];
    t.start_operator_with_env("operator", &[], &support::kubeconfig(), &env);
    held_over_https_until_the_alert_clears(&t, &pool, &prom, &gauge).await;
    drop(prom);
    std::fs::remove_dir_all(&mount).ok();
    t.cleanup().await;
}

/// The operator container's mount of the `corp-ca` volume and its `SSL_CERT_FILE`.
fn ca_bundle_mount(rendered: &str) -> (String, String) {
    let deployment = serde_saphyr::from_multiple::<serde_json::Value>(rendered)
        .expect("the chart renders YAML")
        .into_iter()
        .find(|doc| doc["kind"].as_str() == Some("Deployment"))
        .expect("the chart renders the operator Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let volumes = pod["volumes"].as_array().expect("the chart renders extraVolumes");
    assert!(volumes.iter().any(|v| v["name"].as_str() == Some("corp-ca") && v["configMap"]["name"].as_str() == Some("corp-ca")));
    let container = &pod["containers"][0];
    let mount = container["volumeMounts"]
        .as_array()
        .expect("the chart renders extraVolumeMounts")
        .iter()
        .find(|m| m["name"].as_str() == Some("corp-ca"));
    let env = container["env"].as_array().expect("env").iter().find(|e| e["name"].as_str() == Some("SSL_CERT_FILE"));
    let text = |v: Option<&serde_json::Value>, key: &str| v.and_then(|v| v[key].as_str()).map(String::from).expect(key);
    (text(mount, "mountPath"), text(env, "value"))
}

#[tokio::test]
async fn a_node_running_a_matching_pod_is_not_started_until_the_pod_is_gone() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("gates-pods").await;
    t.start_sim(3, &["--apply-time=1s", "--reboot-time=0.5s"]);
    wait_nodes_ready(&t, 3).await;
    let held = format!("{}0", t.node_prefix());
    support::pod_on_node(&t, &held, "backup").await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), &t.namespace);

    let pool = format!("{}-pool", t.id);
    let rollout = json!({"maxUnavailable": 2, "healthGateInterval": "1s", "healthGates": [{"name": "no-backups", "kind": "Pods",
        "selector": {"matchLabels": {"app": "backup"}}, "namespaces": [t.namespace], "scope": "Node"
    }]});
    apply_pool(&t, &pool_manifest(&t, &pool, "10.0.20348.2762", rollout)).await;
    let admin = t.start_operator(&[]);

    // The other nodes roll; the gate then holds the rollout for the node the
    // pod runs on. (Until the other nodes' agents have judged the revision,
    // the gate is what holds all three.)
    let (_, msg) = wait_progressing(&t, &pool, "the pod gate to hold the last node", |reason, msg| {
        reason == "HealthGateClosed" && msg.ends_with("; 1 nodes pending")
    })
    .await;
    assert_eq!(msg, format!("gate \"no-backups\": matching pods run on 1 node: {held} ({}/backup); 1 nodes pending", t.namespace));
    let api: Api<WindowsNodePool> = Api::all(t.client.clone());
    let st = api.get(&pool).await.unwrap().status.unwrap();
    assert_eq!((st.nodes.updated, st.nodes.pending), (2, 1), "{:?}", st.nodes);
    let started = starts(&t);
    assert!(!started.contains_key(&held), "{held} did not start while the pod ran on it: {started:?}");
    wait_gate_metric(admin, &pool, "1").await;

    let gone = Timestamp::now();
    pods.delete("backup", &DeleteParams::default().grace_period(0)).await.expect("delete the blocking pod");
    wait_complete(&t, &pool, 3).await;
    let started = starts(&t);
    let at = started.get(&held).unwrap_or_else(|| panic!("{held} started after the pod went: {started:?}"));
    assert!(at.iter().all(|a| *a >= gone), "{held} started at {at:?}, before its pod was deleted at {gone}");
    wait_gate_metric(admin, &pool, "0").await;
    t.cleanup().await;
}

/// An Alertmanager gate: matching alerts that are active hold the rollout,
/// its label matchers leave other alerts of the same name out, and a silence
/// — the usual way to say "we know, go ahead" — opens the gate.
#[tokio::test]
async fn an_alertmanager_gate_holds_while_matching_alerts_are_active_and_opens_when_they_are_silenced() {
    let client = support::client().await;
    install_crd(&client).await;
    let mut t = TestSpace::new("gates-alertmanager").await;
    let am = Alertmanager::start(&t).await;
    am.raise(&["alertname=WinpoolTestHold", "severity=critical"]);
    // Same name pattern, but the gate's matchers leave it out.
    am.raise(&["alertname=WinpoolTestNoise", "severity=info"]);

    t.start_sim(2, &["--apply-time=1s", "--reboot-time=0.5s"]);
    wait_nodes_ready(&t, 2).await;
    let pool = format!("{}-pool", t.id);
    let rollout = json!({"maxUnavailable": 2, "healthGateInterval": "1s", "healthGates": [{"name": "no-test-alerts",
        "kind": "Alertmanager", "url": am.url(), "timeout": "2s", "alerts": {"name": "WinpoolTest.*",
            "matchers": [{"label": "severity", "op": "Matches", "value": "critical|warning"}]}}]});
    apply_rollout(&t, &pool, rollout).await;
    t.start_operator(&[]);
    // Once both agents have judged the revision: until then the message also
    // counts the pending nodes awaiting their agent's preflight.
    let (_, msg) = wait_progressing(&t, &pool, "the active alert to hold the rollout", |reason, msg| {
        reason == "HealthGateClosed" && msg.ends_with(" nodes pending")
    })
    .await;
    assert_eq!(msg, format!("gate \"no-test-alerts\": 1 alert firing: {ALERT}; 2 nodes pending"), "the info alert is not counted");
    assert!(starts(&t).is_empty(), "no node started while the gate was closed: {:?}", starts(&t));

    am.silence(&[&format!("alertname={ALERT}")]);
    wait_complete(&t, &pool, 2).await;
    drop(am);
    t.cleanup().await;
}
