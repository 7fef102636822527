//! Health gates, the shell: each gate of a pool evaluated into plain data
//! ([`crate::gates::GateResult`]) for the decision. A gate asks the
//! Prometheus HTTP API (over the hyper/rustls stack kube already brings) or
//! lists pods. Whatever goes wrong is what the gate saw: a failed gate is
//! closed, never an error of the reconcile.

use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{ACCEPT, AUTHORIZATION, HeaderValue};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use tracing::debug;

use super::Context;
use crate::api::{HealthGate, PodsGate, PrometheusAuth, PrometheusAuthType, PrometheusGate, WindowsNodePool, names};
use crate::gates::pods::{self, FoundPod};
use crate::gates::prometheus::{self, Ask};
use crate::gates::still_fresh;
use crate::gates::{Failure, GateResult, Seen};
use crate::rollout::{gate_timeout, health_gate_interval};

pub(super) type HttpClient = HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// What a pool's gates saw, when, and for which generation of the pool.
pub(super) type Asked = (std::time::Instant, Option<i64>, Vec<GateResult>);

/// The most of an answer a gate reads: an alerts list is small, and a query
/// that returns megabytes of series has closed the gate long before.
const MAX_BODY: usize = 4 << 20;

/// The client every Prometheus gate uses: http, or https trusting the
/// system's roots (none in the operator's empty image: an https gate then
/// reports the certificate it cannot verify, and is closed).
pub(super) fn http_client() -> HttpClient {
    let builder = hyper_rustls::HttpsConnectorBuilder::new().with_native_roots().unwrap_or_else(|e| {
        debug!(error = %e, "no system TLS roots; https health gates cannot verify their server");
        let empty = rustls::ClientConfig::builder().with_root_certificates(rustls::RootCertStore::empty()).with_no_client_auth();
        hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(empty)
    });
    HyperClient::builder(TokioExecutor::new()).build(builder.https_or_http().enable_http1().build())
}

/// The pool's gates: what they saw a moment ago if that still stands
/// ([`crate::gates::still_fresh`]; a spec change always asks anew), else
/// asked now.
pub(super) async fn evaluate_fresh(ctx: &Context, pool: &WindowsNodePool) -> Vec<GateResult> {
    let (name, generation) = (pool.name_any(), pool.metadata.generation);
    let interval = health_gate_interval(&pool.spec);
    if let Some((at, seen_generation, results)) = ctx.gate_results.lock().expect("gate results lock").get(&name)
        && *seen_generation == generation
        && still_fresh(results, at.elapsed(), interval)
    {
        return results.clone();
    }
    let results = evaluate(ctx, pool).await;
    ctx.gate_results.lock().expect("gate results lock").insert(name, (std::time::Instant::now(), generation, results.clone()));
    results
}

/// Every gate of the pool, in spec order, evaluated at once.
async fn evaluate(ctx: &Context, pool: &WindowsNodePool) -> Vec<GateResult> {
    let mut evals = Vec::with_capacity(pool.spec.rollout.health_gates.len());
    for g in &pool.spec.rollout.health_gates {
        evals.push(Box::pin(async move { GateResult { gate: g.name.clone(), seen: evaluate_one(ctx, g).await } }));
    }
    futures::future::join_all(evals).await
}

async fn evaluate_one(ctx: &Context, g: &HealthGate) -> Seen {
    let seen = match (&g.prometheus, &g.pods) {
        (Some(p), _) => ask_prometheus(ctx, p).await,
        (None, Some(p)) => list_pods(ctx, p).await,
        (None, None) => Seen::Failed(Failure::InvalidSpec("the gate has neither prometheus nor pods".into())),
    };
    debug!(gate = %g.name, "health gate: {seen}");
    seen
}

async fn ask_prometheus(ctx: &Context, g: &PrometheusGate) -> Seen {
    let ask = match Ask::of(g) {
        Ok(a) => a,
        Err(f) => return Seen::Failed(f),
    };
    let authorization = match &g.auth {
        None => None,
        Some(a) => match authorization(ctx, a).await {
            Ok(h) => Some(h),
            Err(f) => return Seen::Failed(f),
        },
    };
    match get(&ctx.gate_http, &prometheus::url(&g.url, &ask), authorization, gate_timeout(g)).await {
        Ok((status, body)) => ask.read(status, &body),
        Err(f) => Seen::Failed(f),
    }
}

/// GET `url` within `timeout`: the status and the body, or why not.
pub(super) async fn get(
    client: &HttpClient,
    url: &str,
    authorization: Option<HeaderValue>,
    timeout: Duration,
) -> Result<(u16, Bytes), Failure> {
    let mut req = hyper::Request::get(url).header(ACCEPT, "application/json");
    if let Some(a) = authorization {
        req = req.header(AUTHORIZATION, a);
    }
    let req = req.body(Full::new(Bytes::new())).map_err(|e| Failure::InvalidSpec(format!("prometheus.url {url:?}: {e}")))?;
    let fetch = async {
        let resp = client.request(req).await.map_err(|e| Failure::Unreachable(format!("{url}: {}", causes(&e))))?;
        let status = resp.status().as_u16();
        let body = Limited::new(resp.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| Failure::Unreachable(format!("{url}: reading the answer: {e}")))?
            .to_bytes();
        Ok((status, body))
    };
    tokio::time::timeout(timeout, fetch).await.unwrap_or(Err(Failure::Timeout(timeout)))
}

/// An error with its causes: hyper's own message alone ("client error
/// (Connect)") does not say that the connection was refused.
fn causes(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(c) = cur {
        let s = c.to_string();
        if !parts.last().is_some_and(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = c.source();
    }
    parts.join(": ")
}

/// The Authorization header from the gate's Secret, which lives in the
/// operator's namespace: winpool reads no Secret anywhere else.
async fn authorization(ctx: &Context, auth: &PrometheusAuth) -> Result<HeaderValue, Failure> {
    let ns = &ctx.settings.secret_namespace;
    let secret = Api::<Secret>::namespaced(ctx.client.clone(), ns).get(&auth.secret_name).await.map_err(|e| match e {
        kube::Error::Api(s) if s.code == 404 => Failure::Auth(format!("Secret {ns}/{} not found", auth.secret_name)),
        e => Failure::Auth(format!("reading Secret {ns}/{}: {e}", auth.secret_name)),
    })?;
    ctx.metrics.api_request("get", "secrets", "ok");
    authorization_header(&secret, auth.type_).map_err(|e| Failure::Auth(format!("Secret {ns}/{}: {e}", auth.secret_name)))
}

/// Basic from the keys `username` and `password` (a kubernetes.io/basic-auth
/// Secret), Bearer from `token`, from a Secret labelled for health gates only.
/// Pure.
pub(super) fn authorization_header(secret: &Secret, type_: PrometheusAuthType) -> Result<HeaderValue, String> {
    if secret.metadata.labels.as_ref().and_then(|l| l.get(names::LABEL_GATE_CREDENTIALS)).map(String::as_str) != Some("true") {
        return Err(format!("is not labelled {}=true; winpool sends only Secrets meant for health gates", names::LABEL_GATE_CREDENTIALS));
    }
    let key = |k: &str| -> Result<String, String> {
        let v = secret.data.as_ref().and_then(|d| d.get(k)).ok_or_else(|| format!("has no key {k:?}"))?;
        let s = String::from_utf8(v.0.clone()).map_err(|_| format!("key {k:?} is not text"))?;
        // A token written from a file usually ends in a newline, which is no part of it.
        Ok(s.trim_end_matches(['\n', '\r']).to_string())
    };
    let value = match type_ {
        PrometheusAuthType::Basic => {
            let creds = format!("{}:{}", key("username")?, key("password")?);
            format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(creds))
        }
        PrometheusAuthType::Bearer => format!("Bearer {}", key("token")?),
    };
    let mut h = HeaderValue::from_str(&value).map_err(|_| "holds characters a header cannot carry".to_string())?;
    h.set_sensitive(true);
    Ok(h)
}

/// The pods matching the gate (not finished), in its namespaces or all.
async fn list_pods(ctx: &Context, g: &PodsGate) -> Seen {
    let labels = match pods::label_selector(g) {
        Ok(l) => l,
        Err(f) => return Seen::Failed(f),
    };
    let lp = ListParams::default().labels(&labels).fields(pods::FIELD_SELECTOR);
    let apis: Vec<Api<Pod>> = if g.namespaces.is_empty() {
        vec![Api::all(ctx.client.clone())]
    } else {
        g.namespaces.iter().map(|ns| Api::namespaced(ctx.client.clone(), ns)).collect()
    };
    let mut found = Vec::new();
    for api in apis {
        let list = match api.list(&lp).await {
            Ok(l) => l,
            Err(e) => return Seen::Failed(Failure::ListPods(e.to_string())),
        };
        ctx.metrics.api_request("list", "pods", "ok");
        found.extend(list.items.into_iter().map(|p| FoundPod {
            namespace: p.metadata.namespace.unwrap_or_default(),
            name: p.metadata.name.unwrap_or_default(),
            node: p.spec.and_then(|s| s.node_name),
        }));
    }
    pods::seen(g.scope, &found)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    fn secret(data: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: kube::api::ObjectMeta {
                labels: Some([(names::LABEL_GATE_CREDENTIALS.to_string(), "true".to_string())].into()),
                ..Default::default()
            },
            data: Some(data.iter().map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec()))).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn credentials_come_from_the_secret_keys_of_their_type() {
        let basic = secret(&[("username", "prom"), ("password", "s3cret")]);
        assert_eq!(authorization_header(&basic, PrometheusAuthType::Basic).unwrap(), "Basic cHJvbTpzM2NyZXQ=");
        let bearer = secret(&[("token", "abc.def\n")]);
        assert_eq!(authorization_header(&bearer, PrometheusAuthType::Bearer).unwrap(), "Bearer abc.def", "the file's newline goes");
        assert!(authorization_header(&bearer, PrometheusAuthType::Bearer).unwrap().is_sensitive(), "kept out of debug output");
        assert_eq!(authorization_header(&bearer, PrometheusAuthType::Basic).unwrap_err(), "has no key \"username\"");
        assert_eq!(authorization_header(&basic, PrometheusAuthType::Bearer).unwrap_err(), "has no key \"token\"");
        let bad = secret(&[("token", "a\u{7}b")]);
        assert!(authorization_header(&bad, PrometheusAuthType::Bearer).is_err());
        // Any other Secret of the namespace stays where it is, whatever its keys.
        let mut unlabelled = bearer.clone();
        unlabelled.metadata.labels = None;
        let refused = authorization_header(&unlabelled, PrometheusAuthType::Bearer).unwrap_err();
        assert_eq!(refused, "is not labelled winpool.dev/health-gate-credentials=true; winpool sends only Secrets meant for health gates");
        unlabelled.metadata.labels = Some([(names::LABEL_GATE_CREDENTIALS.to_string(), "false".to_string())].into());
        assert!(authorization_header(&unlabelled, PrometheusAuthType::Bearer).is_err());
    }

    /// A server on loopback that answers every connection with `answer`, or never when None.
    async fn server(answer: Option<&'static str>) -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                let Ok((mut s, _)) = l.accept().await else { return };
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                match answer {
                    Some(a) => {
                        let _ = s.write_all(a.as_bytes()).await;
                    }
                    None => held.push(s),
                }
            }
        });
        port
    }

    #[tokio::test]
    async fn a_gate_that_times_out_or_cannot_connect_is_closed_and_says_why() {
        let client = http_client();
        let silent = server(None).await;
        let timeout = Duration::from_millis(300);
        let got = get(&client, &format!("http://127.0.0.1:{silent}/api/v1/alerts"), None, timeout).await;
        assert_eq!(got.unwrap_err(), Failure::Timeout(timeout));

        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        match get(&client, &format!("http://127.0.0.1:{closed}/api/v1/alerts"), None, Duration::from_secs(5)).await {
            Err(Failure::Unreachable(msg)) => assert!(msg.to_lowercase().contains("refused"), "{msg}"),
            other => panic!("{other:?}"),
        }

        let body = r#"{"status":"success","data":{"alerts":[{"labels":{"alertname":"A"},"state":"firing"}]}}"#;
        let answer: &'static str =
            Box::leak(format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).into_boxed_str());
        let ok = server(Some(answer)).await;
        let (status, bytes) = get(&client, &format!("http://127.0.0.1:{ok}/api/v1/alerts"), None, timeout).await.unwrap();
        let ask = Ask::Alerts(regex::Regex::new("^(?:A)$").unwrap());
        assert_eq!(ask.read(status, &bytes), Seen::Alerts { total: 1, names: vec!["A".into()] });
    }
}
