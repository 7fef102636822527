//! The tests' HTTP GETs (the operator's admin server, Prometheus,
//! Alertmanager): hyper's client, the one the operator's health gates use.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::header::{AUTHORIZATION, HeaderValue};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// GET `url`; the status and body, or None when nothing answered within 10 s.
/// With `tls`, only https, trusting what it trusts.
pub async fn get(url: &str, authorization: Option<&str>, tls: Option<Arc<rustls::ClientConfig>>) -> Option<(u16, String)> {
    let mut req = hyper::Request::get(url).body(Empty::<Bytes>::new()).ok()?;
    if let Some(a) = authorization {
        req.headers_mut().insert(AUTHORIZATION, HeaderValue::from_str(a).ok()?);
    }
    let answer = async {
        let res = match tls {
            Some(config) => {
                let https = hyper_rustls::HttpsConnectorBuilder::new()
                    .with_tls_config(Arc::unwrap_or_clone(config))
                    .https_only()
                    .enable_http1()
                    .build();
                Client::builder(TokioExecutor::new()).build(https).request(req).await.ok()?
            }
            None => Client::builder(TokioExecutor::new()).build_http().request(req).await.ok()?,
        };
        let code = res.status().as_u16();
        let body = res.into_body().collect().await.ok()?.to_bytes();
        Some((code, String::from_utf8_lossy(&body).into_owned()))
    };
    tokio::time::timeout(Duration::from_secs(10), answer).await.ok()?
}

/// GET a path of a server on loopback, over plain HTTP.
pub async fn get_local(port: u16, path: &str) -> Option<(u16, String)> {
    get(&format!("http://127.0.0.1:{port}{path}"), None, None).await
}
