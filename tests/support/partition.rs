//! A TCP proxy between one client and the API server that can partition
//! them: once cut, every byte either way is dropped and every connection is
//! held open, never reset (a network that black-holes rather than refuses);
//! healed, bytes flow again on whatever connection is still up.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

pub struct Partition {
    pub port: u16,
    cut: Arc<AtomicBool>,
    accepting: tokio::task::JoinHandle<()>,
}

impl Partition {
    /// A proxy to the API server `kubeconfig` names.
    pub async fn to_api_server_of(kubeconfig: &Path) -> Self {
        let upstream = api_server(kubeconfig);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let c = cut.clone();
        let accepting = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(upstream).await else { continue };
                let ((cr, cw), (sr, sw)) = (client.into_split(), server.into_split());
                tokio::spawn(pump(cr, sw, c.clone()));
                tokio::spawn(pump(sr, cw, c.clone()));
            }
        });
        Partition { port, cut, accepting }
    }

    /// From now on, nothing gets through either way.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }

    /// `kubeconfig` with its server replaced by this proxy (the API server's
    /// certificate names 127.0.0.1, whatever the port).
    pub fn kubeconfig(&self, kubeconfig: &Path, name: &str) -> PathBuf {
        let text = std::fs::read_to_string(kubeconfig).expect("read the kubeconfig");
        let upstream = api_server(kubeconfig);
        let text = text.replace(&format!("https://{upstream}"), &format!("https://127.0.0.1:{}", self.port));
        let path = std::env::temp_dir().join(format!("{name}-via-{}.kubeconfig", self.port));
        std::fs::write(&path, text).expect("write the proxied kubeconfig");
        path
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// One direction of one connection: forwarded while healed, dropped while cut.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, cut: Arc<AtomicBool>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        if cut.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// The `host:port` of the kubeconfig's (only) cluster.
fn api_server(kubeconfig: &Path) -> SocketAddr {
    let text = std::fs::read_to_string(kubeconfig).expect("read the kubeconfig");
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server:"))
        .map(|s| s.trim().trim_matches('"').trim_start_matches("https://").trim_end_matches('/').to_string())
        .expect("the kubeconfig names its server");
    server.parse().unwrap_or_else(|e| panic!("server {server:?} is not host:port: {e}"))
}
