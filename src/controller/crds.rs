//! The CRDs winpool needs, asked of the API server's discovery: one that is
//! not installed keeps the caches from ever syncing, and without this the
//! operator only logged `404 page not found` for a watch every few seconds.
//! Each missing one is named in the log and in `/readyz`, with the command
//! that installs it, until it is there.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tracing::{error, info};

use crate::controller::metrics::Metrics;

/// The CRDs of group winpool.dev/v1alpha1 the operator watches: (plural, file in `crds/`).
const NEEDED: [(&str, &str); 3] = [
    ("windowsnodepools", "windowsnodepools.winpool.dev.yaml"),
    ("windowsnodereports", "windowsnodereports.winpool.dev.yaml"),
    ("windowsnodeoperations", "windowsnodeoperations.winpool.dev.yaml"),
];

/// How often discovery is asked again while the caches have not synced.
const RECHECK: Duration = Duration::from_secs(30);

/// What to say of each needed CRD the API server does not serve, given the
/// resources it serves in winpool.dev/v1alpha1 (none when the group is not
/// served at all). Pure.
pub fn missing(served: &[String]) -> Vec<String> {
    NEEDED
        .iter()
        .filter(|(plural, _)| !served.iter().any(|s| s == plural))
        .map(|(plural, file)| {
            format!(
                "the CRD {plural}.winpool.dev is not installed: install the chart (helm upgrade --install, which installs the CRDs) or kubectl apply -f crds/{file}"
            )
        })
        .collect()
}

/// Ask discovery now and every RECHECK until the caches have synced; log
/// what changes and keep `/readyz`'s reasons current.
pub fn spawn_check(client: Client, metrics: Arc<Metrics>) {
    tokio::spawn(async move {
        let mut said: Vec<String> = Vec::new();
        while metrics.caches_synced.get() == 0 {
            let served = match client.list_api_group_resources("winpool.dev/v1alpha1").await {
                Ok(list) => Some(list.resources.into_iter().map(|r| r.name).collect::<Vec<_>>()),
                Err(kube::Error::Api(s)) if s.code == 404 => Some(Vec::new()),
                // The API server cannot be asked: that is not a CRD's doing.
                Err(_) => None,
            };
            if let Some(served) = served {
                let now = missing(&served);
                for why in now.iter().filter(|w| !said.contains(w)) {
                    error!("{why}");
                }
                if now.is_empty() && !said.is_empty() {
                    info!("every CRD winpool needs is installed");
                }
                *metrics.not_ready_because.lock().expect("readiness reasons") = now.clone();
                said = now;
            }
            tokio::time::sleep(RECHECK).await;
        }
        metrics.not_ready_because.lock().expect("readiness reasons").clear();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_crd_not_served_is_named_with_the_command_that_installs_it() {
        let served = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(
            missing(&served(&["windowsnodepools", "windowsnodepools/status", "windowsnodereports", "windowsnodeoperations"])).is_empty()
        );
        let one = missing(&served(&["windowsnodepools", "windowsnodepools/status", "windowsnodeoperations"]));
        assert_eq!(one.len(), 1);
        assert!(
            one[0].contains("windowsnodereports.winpool.dev")
                && one[0].contains("kubectl apply -f crds/windowsnodereports.winpool.dev.yaml")
        );
        assert_eq!(missing(&[]).len(), 3, "the group not served at all");
    }
}
