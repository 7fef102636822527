//! Draining a node, the requests: list a node's pods and evict them (which
//! pods must go is `decision::drain`, re-exported here). Evictions go through
//! the Eviction API so PodDisruptionBudgets hold: a 429 means "not now", and
//! the next round tries again. The API server names the budget that refused,
//! so the rollout can say which one and put the node back.

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::core::Request;
use tracing::{debug, info, warn};

use crate::decision::drain::wire;
pub use crate::decision::drain::*;
use crate::decision::rollout::DrainMode;

/// The pods bound to `node` that the drain's podSelector matches (the API
/// server filters). Decoded straight into [`PodOnNode`]: what the list
/// carries beyond that is skipped by the parser, never allocated.
pub async fn pods_on_node(client: &Client, node: &str, rules: &DrainRules) -> kube::Result<Vec<PodOnNode>> {
    let mut params = ListParams::default().fields(&format!("spec.nodeName={node}"));
    if let Some(selector) = &rules.pod_selector {
        params = params.labels(selector);
    }
    let mut request = Request::new("/api/v1/pods").list(&params).map_err(kube::Error::BuildRequest)?;
    // Named like kube's own lists in its traces.
    request.extensions_mut().insert("list");
    let listed: wire::PodList = client.request(request).await?;
    Ok(listed.items.into_iter().filter_map(PodOnNode::from_listed).collect())
}

/// What one round of draining a node did.
#[derive(Debug, Default)]
pub struct DrainRound {
    /// The first budget that refused an eviction, if one did.
    pub refused_by: Option<String>,
    /// Each eviction asked (`namespace/name`), and whether a budget refused it.
    pub asked: Vec<(String, bool)>,
    /// Pods not asked this round: a budget refused them a moment ago.
    pub waited: usize,
}

/// What a round asks of one node's drain, as the plan decided it.
pub struct Ask<'w> {
    pub mode: DrainMode,
    /// At most this many pods asked to leave this round (rollout.hnsPacing); None: every one.
    pub cap: Option<usize>,
    /// Pods whose refused eviction is not due again.
    pub waiting: &'w std::collections::BTreeSet<String>,
}

/// One round of draining: evict (or delete) every pod that must go, up to
/// the round's cap, but for those whose refused eviction is not due again.
/// Errors on single pods are logged and retried next round; none aborts the
/// round.
pub async fn drain_round(client: &Client, pool: &str, node: &str, pods: &[PodOnNode], rules: &DrainRules, ask: Ask<'_>) -> DrainRound {
    let Ask { mode, cap, waiting } = ask;
    let mut out = DrainRound::default();
    // Whole seconds, as the API takes them; a sub-second period is 1 s, not "now".
    let delete = DeleteParams {
        grace_period_seconds: rules.grace_period.map(|d| u32::try_from(d.as_secs().max(1)).unwrap_or(u32::MAX)),
        ..DeleteParams::default()
    };
    for pod in pods {
        if pod.deleting_since.is_some() || classify(pod, rules) != PodDisposition::Evict {
            continue;
        }
        let (name, ns) = (pod.name.as_str(), pod.namespace.as_str());
        let key = format!("{ns}/{name}");
        if waiting.contains(&key) {
            out.waited += 1;
            continue;
        }
        if cap.is_some_and(|cap| out.asked.len() >= cap) {
            break;
        }
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        let res = match mode {
            DrainMode::Evict => evict(&api, pod, &delete).await,
            DrainMode::Delete => api.delete(name, &delete).await.map(|_| ()),
        };
        match res {
            Ok(()) => {
                info!(pool, node, pod = %key, ?mode, "evicted pod");
                out.asked.push((key, false));
            }
            Err(kube::Error::Api(s)) if s.code == 429 => {
                let budget = refusing_budget(&s, ns);
                debug!(pool, node, pod = %key, budget = ?budget, "eviction refused; asked again after a backoff");
                out.refused_by = out.refused_by.or(budget);
                out.asked.push((key, true));
            }
            Err(kube::Error::Api(s)) if s.code == 404 => out.asked.push((key, false)),
            Err(e) => warn!(pool, node, pod = %key, error = %e, "eviction failed; retrying next round"),
        }
    }
    out
}

/// An eviction with its delete options. kube's `Api::evict` (kube-core 5)
/// sends them as `delete_options`, a field the API server ignores, so a
/// grace period set that way never reached the pod: the body is written here
/// as policy/v1 names it.
async fn evict(api: &Api<Pod>, pod: &PodOnNode, delete: &DeleteParams) -> kube::Result<()> {
    let body = serde_json::json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod.name, "namespace": pod.namespace},
        "deleteOptions": delete,
    });
    api.create_subresource::<_, serde_json::Value>("eviction", &pod.name, &PostParams::default(), &body).await.map(|_| ())
}
