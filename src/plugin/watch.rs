//! `--watch` (`-w`) for `list`, `status` and `plan`: the view again each time
//! it changes, until interrupted, like `kubectl get -w`.
//!
//! It watches pools, Windows Nodes and agent reports into caches and renders
//! from them, so a person watching a 1,000-node rollout costs the API server
//! three watch streams, not a list of every node every few seconds. Events
//! that arrive together are rendered once (at most every [`SETTLE`]), and a
//! view that did not change is not printed again.

use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use super::PluginError;
use crate::api::report::WindowsNodeReport;
use crate::api::{WindowsNodePool, names};

/// How long a burst of events settles before the view is rendered again.
pub const SETTLE: Duration = Duration::from_secs(1);

/// What a watched view reads: every pool, the Windows nodes and the agents' reports.
pub struct Caches {
    pub pools: Store<WindowsNodePool>,
    pub nodes: Store<Node>,
    pub reports: Store<WindowsNodeReport>,
}

impl Caches {
    pub fn pools(&self) -> Vec<WindowsNodePool> {
        self.pools.state().iter().map(|p| p.as_ref().clone()).collect()
    }

    pub fn nodes(&self) -> Vec<Node> {
        self.nodes.state().iter().map(|n| n.as_ref().clone()).collect()
    }

    pub fn reports(&self) -> Vec<WindowsNodeReport> {
        self.reports.state().iter().map(|r| r.as_ref().clone()).collect()
    }
}

/// Start the watches; the stream yields once per change of any of them.
pub async fn start(client: &Client) -> Result<(Caches, impl Stream<Item = ()> + Unpin), PluginError> {
    let (pools, pool_changes) = cache(Api::<WindowsNodePool>::all(client.clone()), watcher::Config::default());
    let windows = watcher::Config::default().labels(&format!("{}=windows", names::LABEL_OS));
    let (nodes, node_changes) = cache(Api::<Node>::all(client.clone()), windows);
    let (reports, report_changes) = cache(Api::<WindowsNodeReport>::all(client.clone()), watcher::Config::default());
    // The watches run on their own task: the caches fill only while their
    // streams are polled, and the view waits for them to fill first.
    let (tx, changes) = futures::channel::mpsc::unbounded();
    let all = futures::stream::select_all([pool_changes.boxed(), node_changes.boxed(), report_changes.boxed()]);
    tokio::spawn(all.map(Ok).forward(tx));
    let caches = Caches { pools, nodes, reports };
    caches.pools.wait_until_ready().await.map_err(|e| PluginError::Output(e.to_string()))?;
    caches.nodes.wait_until_ready().await.map_err(|e| PluginError::Output(e.to_string()))?;
    caches.reports.wait_until_ready().await.map_err(|e| PluginError::Output(e.to_string()))?;
    Ok((caches, changes))
}

/// A cache of `api` and a stream that yields on each of its changes. A watch
/// that fails is retried with backoff: a person watching sees the last view
/// until the API server answers again.
fn cache<K>(api: Api<K>, config: watcher::Config) -> (Store<K>, impl Stream<Item = ()> + Send)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (reader, writer) = reflector::store();
    let changes = reflector::reflector(writer, watcher(api, config).default_backoff()).filter_map(|ev| async move { ev.ok().map(|_| ()) });
    (reader, changes)
}

/// Print `render()` now and again after every settled burst of changes, when it differs.
pub async fn follow(
    mut changes: impl Stream<Item = ()> + Unpin,
    mut render: impl FnMut() -> Result<String, PluginError>,
    mut print: impl FnMut(&str),
) -> Result<(), PluginError> {
    let mut last = String::new();
    loop {
        let view = render()?;
        if view != last {
            if !last.is_empty() {
                print("\n");
            }
            print(&view);
            last = view;
        }
        if changes.next().await.is_none() {
            return Ok(());
        }
        // The rest of the burst folds into one view.
        let settle = tokio::time::sleep(SETTLE);
        tokio::pin!(settle);
        loop {
            tokio::select! {
                _ = &mut settle => break,
                more = changes.next() => if more.is_none() { break },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A burst of changes is one view, and a view that did not change is not printed again.
    #[tokio::test(start_paused = true)]
    async fn a_burst_is_rendered_once_and_an_unchanged_view_not_at_all() {
        let (tx, rx) = futures::channel::mpsc::unbounded::<()>();
        let views = std::cell::RefCell::new(vec!["a\n", "a\n", "b\n"].into_iter());
        let printed = std::cell::RefCell::new(Vec::new());
        let sender = async move {
            for _ in 0..5 {
                tx.unbounded_send(()).unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            tokio::time::sleep(SETTLE * 3).await;
            tx.unbounded_send(()).unwrap();
            tokio::time::sleep(SETTLE * 3).await;
        };
        let render = || Ok(views.borrow_mut().next().unwrap_or("b\n").to_string());
        let watching = follow(rx, render, |s: &str| printed.borrow_mut().push(s.to_string()));
        let (r, ()) = tokio::join!(watching, sender);
        r.unwrap();
        assert_eq!(*printed.borrow(), ["a\n", "\n", "b\n"], "three renders: a, a (not printed), b");
    }
}
