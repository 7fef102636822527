//! The claim of a pool by this install (`decision::claim`), written.

use crate::api::EventReason;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, Patch};
use kube::runtime::controller::Action;
use tracing::warn;

use super::{Context, Error};
use crate::api::{WindowsNodePool, names};
use crate::decision::claim::{Claim, claim_of};

/// How often a pool another install claimed is looked at again (its claim
/// may be lifted by hand).
const THEIRS_AGAIN: Duration = Duration::from_secs(300);

/// Claim an unclaimed pool (guarded by the resourceVersion it was read at:
/// two installs claiming at once, one wins); `Some` when the pool is
/// another install's and this reconcile must leave it.
pub(super) async fn settle(pool: &WindowsNodePool, ctx: &Context) -> Result<Option<Action>, Error> {
    let name = pool.name_any();
    match claim_of(pool, &ctx.settings.install_id) {
        Claim::Ours => Ok(None),
        Claim::Unclaimed => {
            if ctx.stopping() {
                return Ok(Some(Action::await_change()));
            }
            let body = serde_json::json!({ "metadata": {
                "resourceVersion": pool.resource_version(),
                "annotations": { names::ANN_CLAIMED_BY: ctx.settings.install_id },
            } });
            let api: Api<WindowsNodePool> = Api::all(ctx.client.clone());
            api.patch(&name, &crate::api::patch_params(), &Patch::Merge(&body))
                .await
                .map_err(|source| Error::ClaimPool { pool: name.clone(), source })?;
            ctx.metrics.api_request("patch", "windowsnodepools", "ok");
            Ok(None)
        }
        Claim::Theirs(by) => {
            let first = ctx.memory.lock().expect("memory lock").entry(name.clone()).or_default().note_claimed_by(&by);
            if first {
                let msg = format!(
                    "pool {name} is rolled by the winpool install {by} ({} here): this install leaves it alone; \
                     remove the annotation {} to hand it over",
                    ctx.settings.install_id,
                    names::ANN_CLAIMED_BY
                );
                warn!(pool = %name, claimed_by = %by, "{msg}");
                ctx.publish(pool, EventReason::PoolClaimedByAnotherInstall.warning(msg, "Reconcile")).await;
            }
            Ok(Some(Action::requeue(THEIRS_AGAIN)))
        }
    }
}
