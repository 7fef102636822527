//! Leader election on a `coordination.k8s.io/v1` Lease.
//!
//! Only the leader runs the controller, so only one replica writes. Every
//! acquire/renew is an update with the Lease's resourceVersion, so two replicas
//! can never both believe they won. A leader that cannot renew before its lease
//! would expire stops at once (the process exits and is restarted as a
//! follower), the way controller-runtime does it; on graceful shutdown it
//! releases the lease so a standby takes over within one retry period.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::watch;
use tracing::{info, warn};

#[derive(Debug, Clone)]
pub struct LeaseSettings {
    pub name: String,
    pub namespace: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_every: Duration,
}

/// What to do with a Lease, decided from what it says and the clock. Pure.
#[derive(Debug, PartialEq, Eq)]
pub enum LeaseAction {
    /// Nobody holds it, it expired, or it is ours: write ourselves in.
    Take { transitions: i32 },
    /// Someone else holds a live lease.
    Wait { holder: String },
}

pub fn decide(spec: Option<&LeaseSpec>, me: &str, now: Timestamp) -> LeaseAction {
    let Some(spec) = spec else { return LeaseAction::Take { transitions: 0 } };
    let transitions = spec.lease_transitions.unwrap_or(0);
    let holder = spec.holder_identity.clone().unwrap_or_default();
    if holder.is_empty() {
        return LeaseAction::Take { transitions: transitions + 1 };
    }
    if holder == me {
        return LeaseAction::Take { transitions };
    }
    let duration = jiff::SignedDuration::from_secs(spec.lease_duration_seconds.unwrap_or(15) as i64);
    let expires = spec.renew_time.as_ref().map(|t| t.0 + duration);
    match expires {
        Some(e) if e > now => LeaseAction::Wait { holder },
        _ => LeaseAction::Take { transitions: transitions + 1 },
    }
}

async fn try_take(api: &Api<Lease>, s: &LeaseSettings) -> kube::Result<bool> {
    let now = Timestamp::now();
    let current = api.get_opt(&s.name).await?;
    let action = decide(current.as_ref().and_then(|l| l.spec.as_ref()), &s.identity, now);
    let LeaseAction::Take { transitions } = action else { return Ok(false) };
    let held_since = current
        .as_ref()
        .and_then(|l| l.spec.as_ref())
        .filter(|sp| sp.holder_identity.as_deref() == Some(&s.identity))
        .and_then(|sp| sp.acquire_time.clone());
    let spec = LeaseSpec {
        holder_identity: Some(s.identity.clone()),
        lease_duration_seconds: Some(s.lease_duration.as_secs() as i32),
        acquire_time: Some(held_since.unwrap_or(MicroTime(now))),
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..Default::default()
    };
    let res = match current {
        None => {
            let l = Lease { metadata: ObjectMeta { name: Some(s.name.clone()), ..Default::default() }, spec: Some(spec) };
            api.create(&PostParams::default(), &l).await.map(|_| ())
        }
        Some(mut l) => {
            // replace carries resourceVersion: a concurrent writer makes this a 409, not a split brain.
            l.spec = Some(spec);
            api.replace(&s.name, &PostParams::default(), &l).await.map(|_| ())
        }
    };
    match res {
        Ok(()) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Blocks until this replica leads, then keeps renewing in the background.
/// The returned receiver turns `false` when leadership is lost.
pub async fn acquire(client: Client, s: LeaseSettings) -> watch::Receiver<bool> {
    let api: Api<Lease> = Api::namespaced(client, &s.namespace);
    let mut last_holder = String::new();
    loop {
        match try_take(&api, &s).await {
            Ok(true) => break,
            Ok(false) => {
                if let Ok(Some(l)) = api.get_opt(&s.name).await {
                    let h = l.spec.and_then(|sp| sp.holder_identity).unwrap_or_default();
                    if h != last_holder {
                        info!(holder = %h, lease = %s.name, "waiting for the leader lease");
                        last_holder = h;
                    }
                }
            }
            Err(e) => warn!(error = %e, lease = %s.name, "could not read or take the leader lease"),
        }
        tokio::time::sleep(s.renew_every).await;
    }
    info!(identity = %s.identity, lease = %s.name, "acquired the leader lease");
    let (tx, rx) = watch::channel(true);
    tokio::spawn(async move {
        let mut last_ok = std::time::Instant::now();
        loop {
            tokio::time::sleep(s.renew_every).await;
            match try_take(&api, &s).await {
                Ok(true) => last_ok = std::time::Instant::now(),
                Ok(false) => {
                    warn!(lease = %s.name, "another replica took the leader lease");
                    let _ = tx.send(false);
                    return;
                }
                Err(e) => {
                    warn!(error = %e, "could not renew the leader lease");
                    // Stop before the lease could expire and a standby start writing.
                    if last_ok.elapsed() + s.renew_every >= s.lease_duration {
                        let _ = tx.send(false);
                        return;
                    }
                }
            }
        }
    });
    rx
}

/// Give the lease up so a standby takes over without waiting for it to expire.
pub async fn release(client: Client, s: &LeaseSettings) {
    let api: Api<Lease> = Api::namespaced(client, &s.namespace);
    if let Ok(Some(mut l)) = api.get_opt(&s.name).await
        && l.spec.as_ref().and_then(|sp| sp.holder_identity.as_deref()) == Some(&s.identity)
    {
        {
            if let Some(sp) = l.spec.as_mut() {
                sp.holder_identity = None;
                sp.renew_time = None;
                sp.acquire_time = None;
            }
            match api.replace(&s.name, &PostParams::default(), &l).await {
                Ok(_) => info!(lease = %s.name, "released the leader lease"),
                Err(e) => warn!(error = %e, "could not release the leader lease"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: Option<&str>, renewed_secs_ago: i64, duration: i32) -> LeaseSpec {
        let now: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            renew_time: Some(MicroTime(now - jiff::SignedDuration::from_secs(renewed_secs_ago))),
            lease_duration_seconds: Some(duration),
            lease_transitions: Some(3),
            ..Default::default()
        }
    }

    #[test]
    fn lease_decisions() {
        let now: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let cases = [
            (None, LeaseAction::Take { transitions: 0 }),
            (Some(spec(None, 0, 15)), LeaseAction::Take { transitions: 4 }),
            (Some(spec(Some("me"), 0, 15)), LeaseAction::Take { transitions: 3 }),
            (Some(spec(Some("other"), 5, 15)), LeaseAction::Wait { holder: "other".into() }),
            (Some(spec(Some("other"), 16, 15)), LeaseAction::Take { transitions: 4 }),
        ];
        for (i, (s, want)) in cases.into_iter().enumerate() {
            assert_eq!(decide(s.as_ref(), "me", now), want, "case {i}");
        }
    }
}
