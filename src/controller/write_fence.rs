//! The leader's fence at the socket: once its lease has run out on its own
//! clock, this replica puts no byte on any connection to the API server.
//!
//! The controller asks [`LeaseValidity::valid`] before each write, but a
//! replica frozen (SIGSTOP, a paused VM) between that check and the moment the
//! request reaches the wire sends it when it wakes, after a standby has taken
//! over; the API server has no fencing token, so only a resourceVersion
//! precondition, where the write has one, would refuse it (seen in CI: a
//! guarded node patch from the deposed leader, refused 409). Checking again
//! where the bytes are written closes that window: on waking, the first write
//! on any connection finds the validity past and fails, so only bytes already
//! handed to the kernel before the freeze, which the API server receives long
//! before a standby could take the lease, go out.
//!
//! Bytes already handed to the kernel are the kernel's to deliver: across a
//! network partition it retransmits them until the partition heals, which may
//! be after a standby took over. Every connection therefore carries
//! `TCP_USER_TIMEOUT` ([`crate::controller::lease::delivery_bound`]): data unacknowledged
//! that long aborts the connection, so what the leader wrote while its lease
//! was valid arrives, or never does, before a standby can hold it.
//!
//! The fence is open until this replica leads ([`WriteFence::arm`]); a
//! follower and a replica run without leader election are never fenced.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use hyper::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt;
use kube::{Client, Config};
use tower::{BoxError, ServiceBuilder};

use crate::controller::lease::LeaseValidity;

/// Shared by every connection of one client; armed once, when the replica leads.
#[derive(Debug, Clone, Default)]
pub struct WriteFence(Arc<OnceLock<LeaseValidity>>);

impl WriteFence {
    /// From now on, writes go out only while `validity` lasts.
    pub fn arm(&self, validity: LeaseValidity) {
        let _ = self.0.set(validity);
    }

    fn closed(&self) -> bool {
        self.0.get().is_some_and(|v| !v.valid())
    }

    fn refusal() -> io::Error {
        io::Error::new(io::ErrorKind::PermissionDenied, "this replica's leader lease ran out: nothing more is sent")
    }
}

/// A connection whose writes go through the fence; reads are untouched.
pub struct FencedStream<S> {
    inner: S,
    fence: WriteFence,
}

impl<S: Read + Unpin> Read for FencedStream<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: ReadBufCursor<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: Write + Unpin> Write for FencedStream<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.fence.closed() {
            return Poll::Ready(Err(WriteFence::refusal()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        if self.fence.closed() {
            return Poll::Ready(Err(WriteFence::refusal()));
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<S: Connection> Connection for FencedStream<S> {
    fn connected(&self) -> Connected {
        self.inner.connected()
    }
}

/// The TCP connector under TLS, so the handshake and every record go through the fence.
#[derive(Clone)]
struct FencedConnector {
    inner: HttpConnector,
    fence: WriteFence,
}

type Connecting<S> = Pin<Box<dyn std::future::Future<Output = Result<FencedStream<S>, BoxError>> + Send>>;

impl tower::Service<Uri> for FencedConnector {
    type Response = FencedStream<<HttpConnector as tower::Service<Uri>>::Response>;
    type Error = BoxError;
    type Future = Connecting<<HttpConnector as tower::Service<Uri>>::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let fence = self.fence.clone();
        let connecting = self.inner.call(uri);
        Box::pin(async move { Ok(FencedStream { inner: connecting.await?, fence }) })
    }
}

/// The TCP connector: `unacked_for` bounds how long the kernel keeps
/// retransmitting what was written (TCP_USER_TIMEOUT; None: the kernel's ~15 min).
fn tcp(unacked_for: Option<std::time::Duration>) -> HttpConnector {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_tcp_user_timeout(unacked_for);
    http
}

/// kube's own client stack (TLS, timeouts, auth, extra headers, base URI; no
/// retries, which `config.default_retry` turns off for us anyway) over the
/// fenced connector. `unacked_for`: see the module's note.
pub fn client(config: Config, fence: WriteFence, unacked_for: Option<std::time::Duration>) -> Result<Client, kube::Error> {
    let tls = config.rustls_https_connector_with_connector(FencedConnector { inner: tcp(unacked_for), fence })?;
    let mut connector = hyper_timeout::TimeoutConnector::new(tls);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    let http_client = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(http_client);
    Ok(Client::new(service, config.default_namespace))
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    use super::*;

    /// One GET through a fenced client to a listener that records what arrives.
    async fn what_the_server_receives(fence: WriteFence) -> (Result<String, kube::Error>, Vec<u8>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url: Uri = format!("http://{}", listener.local_addr().unwrap()).parse().unwrap();
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut got = vec![0u8; 4096];
            let n = conn.read(&mut got).await.unwrap();
            got.truncate(n);
            // Answer whatever came (nothing, when fenced: the read saw the client close).
            use tokio::io::AsyncWriteExt;
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
            got
        });
        let client = client(Config::new(url), fence, None).unwrap();
        let answer = client.request_text(http::Request::get("/version").body(Vec::new()).unwrap()).await;
        drop(client);
        (answer, server.await.unwrap())
    }

    #[tokio::test]
    async fn a_replica_that_does_not_lead_is_not_fenced() {
        let (answer, received) = what_the_server_receives(WriteFence::default()).await;
        assert_eq!(answer.unwrap(), "ok");
        assert!(received.starts_with(b"GET /version HTTP/1.1"), "{}", String::from_utf8_lossy(&received));
    }

    #[tokio::test]
    async fn a_leader_within_its_lease_writes() {
        let fence = WriteFence::default();
        fence.arm(LeaseValidity::until_instant(tokio::time::Instant::now() + std::time::Duration::from_secs(60)));
        let (answer, received) = what_the_server_receives(fence).await;
        assert_eq!(answer.unwrap(), "ok");
        assert!(received.starts_with(b"GET /version"));
    }

    /// Every connection the client opens gives up on data the API server has
    /// not acknowledged within the bound, rather than the kernel's 15 minutes.
    #[tokio::test]
    async fn a_connection_bounds_how_long_its_bytes_may_wait_for_the_server() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: Uri = format!("http://{}", listener.local_addr().unwrap()).parse().unwrap();
        let bound = std::time::Duration::from_millis(3750);
        let mut connector = FencedConnector { inner: tcp(Some(bound)), fence: WriteFence::default() };
        let conn = tower::Service::call(&mut connector, uri).await.unwrap();
        let set = socket2::SockRef::from(conn.inner.inner()).tcp_user_timeout().unwrap();
        assert_eq!(set, Some(bound));
    }

    /// A request that passed the controller's check before the freeze and is
    /// written after the lease ran out: not one byte reaches the server.
    #[tokio::test]
    async fn a_leader_past_its_lease_puts_nothing_on_the_wire() {
        let fence = WriteFence::default();
        fence.arm(LeaseValidity::expired());
        let (answer, received) = what_the_server_receives(fence).await;
        assert!(answer.is_err(), "the request failed: {answer:?}");
        assert!(received.is_empty(), "the server received {:?}", String::from_utf8_lossy(&received));
    }
}
