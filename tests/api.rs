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

/// The valid pool every refused case below starts from.
const VALID: &str = r#"
apiVersion: winpool.dev/v1alpha1
kind: WindowsNodePool
metadata: {name: invalid}
spec:
  nodeSelector: {matchLabels: {pool: invalid}}
  os: {version: ltsc2022, patchLevel: "10.0.20348.2762"}
"#;

/// Pools the API server refuses: (name, what is merged onto `VALID`'s spec as
/// a JSON merge patch (null removes), what the refusal must say).
const REFUSED: &[(&str, &str, &str)] = &[
    ("cni-mode", "networking: {cniMode: flannel}", r#"spec.networking.cniMode: Unsupported value: "flannel""#),
    ("cri-o-runtime", "runtime: {name: cri-o}", "only containerd runs Windows containers"),
    ("docker-runtime", "runtime: {name: docker, version: 20.10.9}", "dockershim was removed in Kubernetes 1.24"),
    ("runtime-version", "runtime: {version: latest}", "spec.runtime.version in body should match"),
    ("csi-proxy-tag", "storage: {csiProxy: {enabled: true, version: v1.1.3+azure}}", "an image tag cannot hold +build metadata"),
    (
        "csi-proxy-version",
        "storage: {csiProxy: {enabled: true}}",
        "storage.csiProxy.version is required when storage.csiProxy.enabled is true",
    ),
    ("missing-patch-level", "os: {patchLevel: null}", "spec.os.patchLevel: Required value"),
    ("patch-level-malformed", "os: {patchLevel: KB5044281}", "spec.os.patchLevel in body should match"),
    ("patch-level-wrong-build", "os: {patchLevel: 10.0.17763.6414}", "is not a build of ltsc2022"),
    ("unknown-os-version", "os: {version: ltsc2016, patchLevel: 10.0.14393.7428}", r#"spec.os.version: Unsupported value: "ltsc2016""#),
    ("update-kb-format", "os: {updates: {kbs: ['2024-10 Cumulative Update']}}", "should match '^KB[0-9]{6,8}$'"),
    (
        "update-kbs-with-packages",
        "os: {updates: {source: Packages, kbs: [KB5044281], packages: [{url: 'https://updates.example.com/kb5044281.msu', sha256: 0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9}]}}",
        "os.updates.kbs pins what Windows Update or WSUS installs: it needs source WindowsUpdate (with Packages, the files are the pin)",
    ),
    (
        "update-package-both",
        r"os: {updates: {source: Packages, packages: [{url: 'https://mirror.example.com/kb.msu', path: 'C:\updates\kb.msu', sha256: 0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9}]}}",
        "an update package has either a url or a path, not both",
    ),
    (
        "update-package-http",
        "os: {updates: {source: Packages, packages: [{url: 'http://mirror.example.com/kb.msu', sha256: 0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9}]}}",
        "spec.os.updates.packages[0].url: Invalid value",
    ),
    (
        "update-package-sha",
        r"os: {updates: {source: Packages, packages: [{path: 'C:\updates\kb.msu', sha256: 'sha256:0a1b'}]}}",
        "spec.os.updates.packages[0].sha256: Invalid value",
    ),
    (
        "updates-packages-missing",
        "os: {updates: {source: Packages}}",
        "os.updates.packages lists the update files when source is Packages, and only then",
    ),
    (
        "selector-operator",
        "nodeSelector: {matchExpressions: [{key: pool, operator: Near, values: [invalid]}]}",
        "spec.nodeSelector.matchExpressions[].operator must be In, NotIn, Exists or DoesNotExist",
    ),
    (
        "selector-values",
        "nodeSelector: {matchExpressions: [{key: pool, operator: In}]}",
        "In and NotIn need at least one value, Exists and DoesNotExist take none",
    ),
    ("warn-percent", "hns: {warnPercent: 0}", "spec.hns.warnPercent in body should be greater than or equal to 1"),
    ("unknown-field", "rollout: {maxSurge: 1}", ".spec.rollout.maxSurge: field not declared in schema"),
    ("max-unavailable-zero", "rollout: {maxUnavailable: 0}", "rollout.maxUnavailable must be a positive number of nodes"),
    ("max-unavailable-percent", "rollout: {maxUnavailable: '150%'}", "or a percentage from 1% to 100%"),
    (
        "max-unavailable-per-zone-zero",
        "rollout: {maxUnavailable: 3, maxUnavailablePerZone: 0}",
        "rollout.maxUnavailablePerZone must be a positive number of nodes",
    ),
    ("node-timeout", "rollout: {nodeTimeout: forever}", "spec.rollout.nodeTimeout in body should match"),
    (
        "drain-grace-period",
        "rollout: {drain: {timeout: 5m, gracePeriod: 10m}}",
        "rollout.drain.gracePeriod must be shorter than rollout.drain.timeout",
    ),
    (
        "drain-pod-selector",
        "rollout: {drain: {podSelector: {matchExpressions: [{key: tier, operator: Near, values: [web]}]}}}",
        "rollout.drain.podSelector.matchExpressions[]: the operator is In or NotIn with values, or Exists or DoesNotExist without",
    ),
    (
        "drain-skip-wait",
        "rollout: {drain: {timeout: 5m, skipWaitForDeleteTimeout: 5m}}",
        "rollout.drain.skipWaitForDeleteTimeout must be shorter than rollout.drain.timeout",
    ),
    ("follows-pool-name", "rollout: {follows: {pool: Win_Canary}}", "spec.rollout.follows.pool in body should match"),
    (
        "not-allowed-dates-reversed",
        "rollout: {notAllowedDates: [{start: '2027-01-03', end: '2026-12-20'}]}",
        "notAllowedDates: end must not be before start",
    ),
    ("window-empty", "rollout: {maintenanceWindows: [{start: '02:00', end: '02:00'}]}", "start and end must differ"),
    (
        "window-time",
        "rollout: {maintenanceWindows: [{days: [Sat], start: '25:00', end: '06:00'}]}",
        "spec.rollout.maintenanceWindows[0].start in body should match",
    ),
    ("window-day", "rollout: {maintenanceWindows: [{days: [Saturday], start: '02:00', end: '06:00'}]}", r#"Unsupported value: "Saturday""#),
    (
        "window-zone",
        "rollout: {maintenanceWindows: [{start: '02:00', end: '06:00', timeZone: '+02:00'}]}",
        "spec.rollout.maintenanceWindows[0].timeZone in body should match",
    ),
    (
        "window-day-of-month",
        "rollout: {maintenanceWindows: [{absoluteMonthly: {dayOfMonth: 32}, start: '02:00', end: '06:00'}]}",
        "spec.rollout.maintenanceWindows[0].absoluteMonthly.dayOfMonth: Invalid value",
    ),
    (
        "window-week-index",
        "rollout: {maintenanceWindows: [{relativeMonthly: {weekIndex: Fifth, dayOfWeek: Tue}, start: '02:00', end: '06:00'}]}",
        r#"Unsupported value: "Fifth""#,
    ),
    (
        "window-days-and-monthly",
        "rollout: {maintenanceWindows: [{days: [Sat], relativeMonthly: {weekIndex: Second, dayOfWeek: Tue}, start: '02:00', end: '06:00'}]}",
        "on weekdays (days), on a weekday of the month (relativeMonthly) or on a date of the month (absoluteMonthly): one of them",
    ),
    (
        "window-date-and-weekday-of-month",
        "rollout: {maintenanceWindows: [{absoluteMonthly: {dayOfMonth: 25}, relativeMonthly: {weekIndex: Second, dayOfWeek: Tue}, start: '02:00', end: '06:00'}]}",
        "on weekdays (days), on a weekday of the month (relativeMonthly) or on a date of the month (absoluteMonthly): one of them",
    ),
    (
        "gate-kind-missing",
        "rollout: {healthGates: [{name: prom, url: 'http://prometheus.monitoring:9090', query: up == 0}]}",
        "spec.rollout.healthGates[0].kind: Required value",
    ),
    (
        "gate-both-kinds",
        "rollout: {healthGates: [{name: both, kind: Prometheus, url: 'http://prometheus.monitoring:9090', query: up == 0, selector: {matchLabels: {app: backup}}}]}",
        "a Prometheus health gate has a url, and no selector, namespaces or scope",
    ),
    (
        "gate-pods-with-url",
        "rollout: {healthGates: [{name: backups, kind: Pods, url: 'http://prometheus.monitoring:9090', selector: {matchLabels: {app: backup}}}]}",
        "a Pods health gate has a selector, and no url, query, alerts, timeout, auth or tls",
    ),
    (
        "gate-duplicate-name",
        "rollout: {healthGates: [{name: alerts, kind: Prometheus, url: 'http://prometheus.monitoring:9090', alerts: {name: KubeNode.*}}, {name: alerts, kind: Pods, selector: {matchLabels: {app: backup}}}]}",
        "rollout.healthGates: every gate needs a name of its own",
    ),
    (
        "gate-query-and-alerts",
        "rollout: {healthGates: [{name: prom, kind: Prometheus, url: 'http://prometheus.monitoring:9090', query: up == 0, alerts: {name: KubeNode.*}}]}",
        "a Prometheus health gate has exactly one of query or alerts",
    ),
    (
        "gate-alertmanager-query",
        "rollout: {healthGates: [{name: pages, kind: Alertmanager, url: 'http://alertmanager:9093', query: up == 0}]}",
        "an Alertmanager health gate names alerts, not a query (Alertmanager has no PromQL)",
    ),
    (
        "gate-timeout",
        "rollout: {healthGates: [{name: prom, kind: Prometheus, url: 'http://prometheus.monitoring:9090', query: up == 0, timeout: 0s}]}",
        "a health gate's timeout must be a positive duration of at most 1m",
    ),
    (
        "gate-url-scheme",
        "rollout: {healthGates: [{name: prom, kind: Prometheus, url: 'prometheus.monitoring:9090', alerts: {name: KubeNode.*}}]}",
        "spec.rollout.healthGates[0].url in body should match",
    ),
    (
        "gate-url-userinfo",
        "rollout: {healthGates: [{name: prom, kind: Prometheus, url: 'https://admin:s3cret@prometheus.monitoring:9090', query: up == 0}]}",
        "credentials in the url are refused",
    ),
    (
        "gate-auth-http",
        "rollout: {healthGates: [{name: prom, kind: Prometheus, url: 'http://prometheus.monitoring:9090', query: up == 0, auth: {type: Bearer, secretName: prometheus-token}}]}",
        "a health gate's auth sends credentials: the url must be https",
    ),
    (
        "hook-env-both",
        "rollout: {hooks: {preDrain: {image: 'registry.example/db-tools:1', env: [{name: DB_PASSWORD, value: x, valueFrom: {secretKeyRef: {name: db, key: password}}}]}}}",
        "a hook's env variable takes value or valueFrom, not both",
    ),
    (
        "gate-tls-http",
        "rollout: {healthGates: [{name: prom, kind: Prometheus, url: 'http://prometheus.monitoring:9090', query: up == 0, tls: {caSecretName: prometheus-ca}}]}",
        "a health gate's tls is for an https url",
    ),
];

/// RFC 7386: objects merge key by key, null removes, anything else replaces.
fn merge(into: &mut serde_json::Value, patch: &serde_json::Value) {
    match (into, patch) {
        (serde_json::Value::Object(to), serde_json::Value::Object(from)) => {
            for (k, v) in from {
                if v.is_null() {
                    to.remove(k);
                } else {
                    merge(to.entry(k.clone()).or_insert(serde_json::Value::Null), v);
                }
            }
        }
        (to, from) => *to = from.clone(),
    }
}

/// `VALID` with the case's fragment merged onto its spec, named after the case.
fn refused_pool(name: &str, fragment: &str) -> DynamicObject {
    let mut pool: serde_json::Value = serde_saphyr::from_str(VALID).unwrap();
    let patch: serde_json::Value = serde_saphyr::from_str(fragment).unwrap_or_else(|e| panic!("{name}: {e}"));
    merge(&mut pool["spec"], &patch);
    pool["metadata"]["name"] = format!("invalid-{name}").into();
    serde_json::from_value(pool).unwrap()
}

#[tokio::test]
async fn every_refused_case_is_refused_with_its_message() {
    let client = client().await;
    install_crd(&client).await;
    let api = pools_api(&client);
    // Each case is refused for its fragment, not for the pool it starts from.
    let valid: DynamicObject = serde_saphyr::from_str(VALID).unwrap();
    api.patch("invalid", &strict(true), &Patch::Apply(&valid)).await.expect("the pool the cases start from is valid");
    let mut failures = Vec::new();
    for (name, fragment, want) in REFUSED {
        let obj = refused_pool(name, fragment);
        match api.patch(&format!("invalid-{name}"), &strict(true), &Patch::Apply(&obj)).await {
            Ok(_) => failures.push(format!("{name}: accepted, expected refusal with {want:?}")),
            Err(kube::Error::Api(s)) => {
                if !s.message.contains(want) {
                    failures.push(format!("{name}: refused, but the message does not say {want:?}:\n  {}", s.message));
                }
            }
            Err(e) => failures.push(format!("{name}: unexpected error {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// What a person sees with `kubectl apply`, where its wording differs from the API's.
#[tokio::test]
async fn kubectl_apply_reports_unknown_fields_by_name() {
    use std::io::Write;
    let client = client().await;
    install_crd(&client).await;
    let (name, fragment, _) = REFUSED.iter().find(|(n, ..)| *n == "unknown-field").unwrap();
    let mut kubectl = std::process::Command::new(support::tool("kubectl"))
        .args(["--kubeconfig", support::kubeconfig().to_str().unwrap(), "apply", "--dry-run=server", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let pool = serde_json::to_vec(&refused_pool(name, fragment)).unwrap();
    kubectl.stdin.take().unwrap().write_all(&pool).unwrap();
    let out = kubectl.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{name} must be refused");
    assert!(stderr.contains(r#"unknown field "spec.rollout.maxSurge""#), "kubectl says {stderr:?}");
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
