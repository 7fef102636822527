//! Health gates, the shell: each gate of a pool evaluated into plain data
//! ([`crate::decision::gates::GateResult`]) for the decision. A gate asks the
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
use kube::api::{Api, ListParams};
use tracing::debug;

use super::Context;
use crate::api::{GateAuth, GateAuthType, GateKind, GateTls, HealthGate, WindowsNodePool, names};
use crate::decision::gates::pods::{self, FoundPod};
use crate::decision::gates::prometheus::{self, Ask};
use crate::decision::gates::{Failure, GateResult, Seen};
use crate::decision::rollout::gate_timeout;

pub(super) type HttpClient = HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The key of a gate's CA Secret that holds the authorities, as cert-manager names it.
const CA_KEY: &str = "ca.crt";

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

/// The client of a gate with `tls`: https only, trusting these authorities
/// and no other.
pub(super) fn trusting(roots: rustls::RootCertStore) -> HttpClient {
    let config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(config).https_only().enable_http1().build();
    HyperClient::builder(TokioExecutor::new()).build(https)
}

/// Every gate of the pool, in spec order, evaluated at once.
pub(super) async fn evaluate(ctx: &Context, pool: &WindowsNodePool) -> Vec<GateResult> {
    let mut evals = Vec::with_capacity(pool.spec.rollout.health_gates.len());
    for g in &pool.spec.rollout.health_gates {
        evals.push(Box::pin(async move { GateResult { gate: g.name.clone(), seen: evaluate_one(ctx, g).await } }));
    }
    futures::future::join_all(evals).await
}

async fn evaluate_one(ctx: &Context, g: &HealthGate) -> Seen {
    let seen = match g.kind {
        GateKind::Prometheus | GateKind::Alertmanager => ask_http(ctx, g).await,
        GateKind::Pods => list_pods(ctx, g).await,
    };
    debug!(gate = %g.name, "health gate: {seen}");
    seen
}

/// A gate read over HTTP from Prometheus or Alertmanager: the same url,
/// credentials, authorities and timeout, another API.
async fn ask_http(ctx: &Context, g: &HealthGate) -> Seen {
    let (ask, url) = match (Ask::of(g), &g.url) {
        (Ok(a), Some(url)) => (a, url),
        (Err(f), _) => return Seen::Failed(f),
        (Ok(_), None) => return Seen::Failed(Failure::InvalidSpec(format!("a {} gate needs a url", g.kind))),
    };
    let authorization = match &g.auth {
        None => None,
        Some(a) => match authorization(ctx, a, url).await {
            Ok(h) => Some(h),
            Err(f) => return Seen::Failed(f),
        },
    };
    // Built for each look, not kept: an authority rotated in the Secret is
    // trusted at the next one, and a look costs one handshake at most every 5 s.
    let own_client;
    let client = match &g.tls {
        None => &ctx.gate_http,
        Some(tls) => match trusted(ctx, tls).await {
            Ok(roots) => {
                own_client = trusting(roots);
                &own_client
            }
            Err(f) => return Seen::Failed(f),
        },
    };
    match get(client, &prometheus::url(url, &ask), authorization, gate_timeout(g)).await {
        Ok((status, body)) => ask.read(status, &body),
        Err(f) => Seen::Failed(untrusted_says_what_to_do(f, g.tls.is_some())),
    }
}

/// A server certificate no trusted authority signs: say where trust comes from.
pub(super) fn untrusted_says_what_to_do(f: Failure, has_tls: bool) -> Failure {
    match f {
        Failure::Untrusted(m) => Failure::Untrusted(if has_tls {
            format!("{m}; no authority in the gate's tls.caSecretName signs the server's certificate")
        } else {
            format!(
                "{m}; no authority the operator trusts signs the server's certificate: name the one that does in the gate's tls.caSecretName"
            )
        }),
        f => f,
    }
}

/// Whether the handshake refused the server's certificate for want of a
/// trusted authority: none of its issuer's name, or one of that name with
/// another key (as after a rotation). An io::Error hides the error it wraps
/// from `source()`, so it is looked into.
fn untrusted_certificate(e: &(dyn std::error::Error + 'static)) -> bool {
    use rustls::CertificateError::{BadSignature, UnknownIssuer};
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(rustls::Error::InvalidCertificate(UnknownIssuer | BadSignature)) = err.downcast_ref::<rustls::Error>() {
            return true;
        }
        cur = match err.downcast_ref::<std::io::Error>().and_then(std::io::Error::get_ref) {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    false
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
    let req = req.body(Full::new(Bytes::new())).map_err(|e| Failure::InvalidSpec(format!("url {url:?}: {e}")))?;
    let fetch = async {
        let resp = client.request(req).await.map_err(|e| {
            let msg = format!("{url}: {}", causes(&e));
            if untrusted_certificate(&e) { Failure::Untrusted(msg) } else { Failure::Unreachable(msg) }
        })?;
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

/// The Authorization header from the gate's Secret.
async fn authorization(ctx: &Context, auth: &GateAuth, url: &str) -> Result<HeaderValue, Failure> {
    let secret = gate_secret(ctx, &auth.secret_name, Failure::Auth).await?;
    url_allowed_by(&secret, url)
        .and_then(|()| authorization_header(&secret, auth.type_))
        .map_err(|e| Failure::Auth(format!("Secret {}/{}: {e}", ctx.settings.secret_namespace, auth.secret_name)))
}

/// Whether the Secret lets its credentials go to `url`: anywhere when it
/// names no URLs (annotation winpool.dev/allowed-urls), else only under one
/// of them, matched as a URL ([`crate::decision::allowed_url`]: `https://prom.corp`
/// admits `https://prom.corp/api/…`, never `https://prom.corp.evil/…`). Whoever
/// writes pools may name any Secret labelled for gates; this is how the
/// Secret's owner keeps its token for the servers it is meant for. Pure.
pub(super) fn url_allowed_by(secret: &Secret, url: &str) -> Result<(), String> {
    let Some(allowed) = secret.metadata.annotations.as_ref().and_then(|a| a.get(names::ANN_GATE_ALLOWED_URLS)) else {
        return Ok(());
    };
    let prefixes: Vec<&str> = allowed.split(',').map(str::trim).filter(|p| !p.is_empty()).collect();
    if crate::decision::allowed_url::under_any(url, &prefixes) {
        return Ok(());
    }
    Err(format!(
        "allows its credentials only to {} ({}), not to {url}: nothing was sent",
        prefixes.join(", "),
        names::ANN_GATE_ALLOWED_URLS
    ))
}

/// The authorities a gate with `tls` trusts, from its Secret.
async fn trusted(ctx: &Context, tls: &GateTls) -> Result<rustls::RootCertStore, Failure> {
    let secret = gate_secret(ctx, &tls.ca_secret_name, Failure::Trust).await?;
    trusted_roots(&secret).map_err(|e| Failure::Trust(format!("Secret {}/{}: {e}", ctx.settings.secret_namespace, tls.ca_secret_name)))
}

/// A Secret a gate names, which lives in the operator's namespace: winpool
/// reads no Secret anywhere else.
async fn gate_secret(ctx: &Context, name: &str, failure: fn(String) -> Failure) -> Result<Secret, Failure> {
    let ns = &ctx.settings.secret_namespace;
    let secret = Api::<Secret>::namespaced(ctx.client.clone(), ns).get(name).await.map_err(|e| match e {
        kube::Error::Api(s) if s.code == 404 => failure(format!("Secret {ns}/{name} not found")),
        e => failure(format!("reading Secret {ns}/{name}: {e}")),
    })?;
    ctx.metrics.api_request("get", "secrets", "ok");
    Ok(secret)
}

/// Only Secrets labelled for health gates are used by one.
fn labelled_for_gates(secret: &Secret) -> Result<(), String> {
    if secret.metadata.labels.as_ref().and_then(|l| l.get(names::LABEL_GATE_CREDENTIALS)).map(String::as_str) != Some("true") {
        return Err(format!("is not labelled {}=true; winpool uses only Secrets meant for health gates", names::LABEL_GATE_CREDENTIALS));
    }
    Ok(())
}

/// The PEM certificates of key `ca.crt`, from a Secret labelled for health
/// gates. Pure.
pub(super) fn trusted_roots(secret: &Secret) -> Result<rustls::RootCertStore, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    labelled_for_gates(secret)?;
    let pem = secret.data.as_ref().and_then(|d| d.get(CA_KEY)).ok_or_else(|| format!("has no key {CA_KEY:?}"))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem.0) {
        let cert = cert.map_err(|e| format!("key {CA_KEY:?} is not PEM: {e}"))?;
        roots.add(cert).map_err(|e| format!("key {CA_KEY:?} holds a certificate that cannot be a trust anchor: {e}"))?;
    }
    if roots.is_empty() {
        return Err(format!("key {CA_KEY:?} holds no PEM certificate"));
    }
    Ok(roots)
}

/// Basic from the keys `username` and `password` (a kubernetes.io/basic-auth
/// Secret), Bearer from `token`, from a Secret labelled for health gates only.
/// Pure.
pub(super) fn authorization_header(secret: &Secret, type_: GateAuthType) -> Result<HeaderValue, String> {
    labelled_for_gates(secret)?;
    let key = |k: &str| -> Result<String, String> {
        let v = secret.data.as_ref().and_then(|d| d.get(k)).ok_or_else(|| format!("has no key {k:?}"))?;
        let s = String::from_utf8(v.0.clone()).map_err(|_| format!("key {k:?} is not text"))?;
        // A token written from a file usually ends in a newline, which is no part of it.
        Ok(s.trim_end_matches(['\n', '\r']).to_string())
    };
    let value = match type_ {
        GateAuthType::Basic => {
            let creds = format!("{}:{}", key("username")?, key("password")?);
            format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(creds))
        }
        GateAuthType::Bearer => format!("Bearer {}", key("token")?),
    };
    let mut h = HeaderValue::from_str(&value).map_err(|_| "holds characters a header cannot carry".to_string())?;
    h.set_sensitive(true);
    Ok(h)
}

/// The pods matching the gate (not finished), in its namespaces or all.
async fn list_pods(ctx: &Context, g: &HealthGate) -> Seen {
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
    pods::seen(g.scope.unwrap_or_default(), &found)
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
        assert_eq!(authorization_header(&basic, GateAuthType::Basic).unwrap(), "Basic cHJvbTpzM2NyZXQ=");
        let bearer = secret(&[("token", "abc.def\n")]);
        assert_eq!(authorization_header(&bearer, GateAuthType::Bearer).unwrap(), "Bearer abc.def", "the file's newline goes");
        assert!(authorization_header(&bearer, GateAuthType::Bearer).unwrap().is_sensitive(), "kept out of debug output");
        assert_eq!(authorization_header(&bearer, GateAuthType::Basic).unwrap_err(), "has no key \"username\"");
        assert_eq!(authorization_header(&basic, GateAuthType::Bearer).unwrap_err(), "has no key \"token\"");
        let bad = secret(&[("token", "a\u{7}b")]);
        assert!(authorization_header(&bad, GateAuthType::Bearer).is_err());
        // Any other Secret of the namespace stays where it is, whatever its keys.
        let mut unlabelled = bearer.clone();
        unlabelled.metadata.labels = None;
        let refused = authorization_header(&unlabelled, GateAuthType::Bearer).unwrap_err();
        assert_eq!(refused, "is not labelled winpool.dev/health-gate-credentials=true; winpool uses only Secrets meant for health gates");
        unlabelled.metadata.labels = Some([(names::LABEL_GATE_CREDENTIALS.to_string(), "false".to_string())].into());
        assert!(authorization_header(&unlabelled, GateAuthType::Bearer).is_err());
    }

    #[test]
    fn a_secret_may_name_the_urls_its_credentials_go_to() {
        let mut s = secret(&[("token", "t")]);
        assert_eq!(url_allowed_by(&s, "https://evil.example/"), Ok(()), "no annotation: anywhere");
        s.metadata.annotations =
            Some([(names::ANN_GATE_ALLOWED_URLS.to_string(), "https://prom.corp, https://thanos.corp/query/".to_string())].into());
        for (url, ok) in [
            ("https://prom.corp", true),
            ("https://prom.corp/", true),
            ("https://prom.corp/prometheus", true),
            ("https://thanos.corp/query/api", true),
            ("https://prom.corp.evil", false),
            ("https://prom.corp:8443/", false),
            ("https://prom.corpx/", false),
            ("https://thanos.corp/queryx", false),
            ("https://evil.example/?u=https://prom.corp", false),
            ("https://prom.corp/../evil", false),
            ("https://prom.corp@evil.example/", false),
        ] {
            let got = url_allowed_by(&s, url);
            assert_eq!(got.is_ok(), ok, "{url}: {got:?}");
            if let Err(e) = got {
                assert!(e.contains("nothing was sent") && e.contains(url), "{e}");
            }
        }
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

    /// A test authority, and a certificate for 127.0.0.1 it signs with its key.
    struct TestPki {
        ca_pem: String,
        server_cert: rustls::pki_types::CertificateDer<'static>,
        server_key: rustls::pki_types::PrivateKeyDer<'static>,
    }

    fn pki() -> TestPki {
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name.push(rcgen::DnType::CommonName, "winpool test CA");
        let ca = rcgen::CertifiedIssuer::self_signed(ca, rcgen::KeyPair::generate().unwrap()).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap().signed_by(&key, &ca).unwrap();
        TestPki {
            ca_pem: ca.pem(),
            server_cert: cert.der().clone(),
            server_key: rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        }
    }

    /// An https server on loopback with the test certificate that answers every request with `answer`.
    async fn tls_server(pki: &TestPki, answer: &'static str) -> u16 {
        let config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![pki.server_cert.clone()], pki.server_key.clone_key())
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let Ok((s, _)) = l.accept().await else { return };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A client that refuses the certificate ends the handshake: nothing to answer.
                    let Ok(mut s) = acceptor.accept(s).await else { return };
                    let mut buf = [0u8; 4096];
                    let _ = s.read(&mut buf).await;
                    let _ = s.write_all(answer.as_bytes()).await;
                    let _ = s.shutdown().await;
                });
            }
        });
        port
    }

    fn ca_secret(pem: &str) -> Secret {
        secret(&[(CA_KEY, pem)])
    }

    #[test]
    fn the_authorities_are_the_pem_certificates_of_key_ca_crt_of_a_secret_meant_for_gates() {
        let pki = pki();
        assert_eq!(trusted_roots(&ca_secret(&pki.ca_pem)).unwrap().len(), 1);
        let bundle = format!("{}{}", pki.ca_pem, self::pki().ca_pem);
        assert_eq!(trusted_roots(&ca_secret(&bundle)).unwrap().len(), 2, "a bundle: every authority in it");
        assert_eq!(trusted_roots(&secret(&[("tls.crt", pki.ca_pem.as_str())])).unwrap_err(), "has no key \"ca.crt\"");
        assert_eq!(trusted_roots(&ca_secret("not a certificate")).unwrap_err(), "key \"ca.crt\" holds no PEM certificate");
        let key = rcgen::KeyPair::generate().unwrap().serialize_pem();
        assert_eq!(trusted_roots(&ca_secret(&key)).unwrap_err(), "key \"ca.crt\" holds no PEM certificate", "a key is no authority");
        let mangled = "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        assert!(trusted_roots(&ca_secret(mangled)).unwrap_err().starts_with("key \"ca.crt\" is not PEM: "));
        let not_der = "-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n";
        assert!(
            trusted_roots(&ca_secret(not_der))
                .unwrap_err()
                .starts_with("key \"ca.crt\" holds a certificate that cannot be a trust anchor: ")
        );
        let mut unlabelled = ca_secret(&pki.ca_pem);
        unlabelled.metadata.labels = None;
        assert_eq!(
            trusted_roots(&unlabelled).unwrap_err(),
            "is not labelled winpool.dev/health-gate-credentials=true; winpool uses only Secrets meant for health gates"
        );
    }

    #[tokio::test]
    async fn an_https_gate_trusts_the_authorities_of_its_secret_and_no_other() {
        let pki = pki();
        let body = r#"{"status":"success","data":{"alerts":[{"labels":{"alertname":"A"},"state":"firing"}]}}"#;
        let answer: &'static str =
            Box::leak(format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).into_boxed_str());
        let port = tls_server(&pki, answer).await;
        let url = format!("https://127.0.0.1:{port}/api/v1/alerts");
        let timeout = Duration::from_secs(10);

        let ours = trusting(trusted_roots(&ca_secret(&pki.ca_pem)).unwrap());
        let (status, bytes) = get(&ours, &url, None, timeout).await.unwrap();
        let ask = Ask::Alerts(
            crate::decision::gates::prometheus::AlertFilter::of(&crate::api::AlertMatch { name: "A".into(), matchers: vec![] }).unwrap(),
        );
        assert_eq!(ask.read(status, &bytes), Seen::Alerts { total: 1, names: vec!["A".into()] }, "signed by the Secret's authority");

        let untrusted = |f: Failure, has_tls: bool| match untrusted_says_what_to_do(f, has_tls) {
            Failure::Untrusted(m) => m,
            other => panic!("{other:?}"),
        };
        let without_tls = untrusted(get(&http_client(), &url, None, timeout).await.unwrap_err(), false);
        assert!(without_tls.contains("invalid peer certificate: UnknownIssuer"), "{without_tls}");
        assert!(
            without_tls.ends_with(
                "no authority the operator trusts signs the server's certificate: name the one that does in the gate's tls.caSecretName"
            ),
            "{without_tls}"
        );

        // An authority of the same name with another key, as after a rotation.
        let another = trusting(trusted_roots(&ca_secret(&self::pki().ca_pem)).unwrap());
        let wrong_ca = untrusted(get(&another, &url, None, timeout).await.unwrap_err(), true);
        assert!(wrong_ca.contains("invalid peer certificate: BadSignature"), "{wrong_ca}");
        assert!(wrong_ca.ends_with("no authority in the gate's tls.caSecretName signs the server's certificate"), "{wrong_ca}");

        // A plain http server: the gate's client does not even connect.
        let body = r#"{"status":"success","data":{"alerts":[]}}"#;
        let answer: &'static str =
            Box::leak(format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).into_boxed_str());
        let plain = server(Some(answer)).await;
        match get(&ours, &format!("http://127.0.0.1:{plain}/api/v1/alerts"), None, timeout).await {
            Err(Failure::Unreachable(m)) => assert!(m.contains("unsupported scheme http"), "{m}"),
            other => panic!("a gate that trusts an authority speaks only https: {other:?}"),
        }
        // A refused connection is no certificate, whatever the url says: no hint about authorities.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let refused = get(&ours, &format!("https://127.0.0.1:{closed}/UnknownIssuer"), None, timeout).await.unwrap_err();
        assert!(matches!(&refused, Failure::Unreachable(m) if m.to_lowercase().contains("refused")), "{refused:?}");
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
        let ask = Ask::Alerts(
            crate::decision::gates::prometheus::AlertFilter::of(&crate::api::AlertMatch { name: "A".into(), matchers: vec![] }).unwrap(),
        );
        assert_eq!(ask.read(status, &bytes), Seen::Alerts { total: 1, names: vec!["A".into()] });
    }
}
