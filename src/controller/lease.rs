//! Leader election on a `coordination.k8s.io/v1` Lease.
//!
//! Only the leader runs the controller, so only one replica writes. Every
//! acquire/renew is an update with the Lease's resourceVersion, so two replicas
//! can never both believe they won. A leader that cannot renew before its lease
//! would expire stops at once (the process exits and is restarted as a
//! follower), the way controller-runtime does it; on graceful shutdown it
//! releases the lease so a standby takes over within one retry period.
//!
//! "Before its lease would expire" is judged on this replica's monotonic
//! clock, never by a request's answer: each renewal gets only the time left
//! until [`LeaseValidity`] ends (client-go's RenewDeadline), so a connection
//! that hangs instead of failing cannot keep a deposed leader renewing, and
//! the controller asks [`LeaseValidity::valid`] before every write, and the
//! client's connections ask it again before each byte they write
//! ([`crate::controller::write_fence`]), so a leader frozen past its lease (SIGSTOP, a
//! paused VM) writes nothing when it wakes, not even a request it had begun.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, ObjectMeta};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

#[derive(Debug, Clone)]
pub struct LeaseSettings {
    pub name: String,
    pub namespace: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_every: Duration,
}

/// What to do with a Lease. Pure.
#[derive(Debug, PartialEq, Eq)]
pub enum LeaseAction {
    /// Nobody holds it, it expired, or it is ours: write ourselves in.
    Take { transitions: i32 },
    /// Someone else holds a live lease.
    Wait { holder: String },
}

/// When this replica first saw the Lease's current record. Expiry is judged
/// by how long *this* replica has seen the record unchanged, on its own
/// monotonic clock, as client-go's leader election does: comparing the
/// holder's `renewTime` with the local wall clock lets a standby whose clock
/// runs ahead take a lease that is being renewed, and then two replicas write.
#[derive(Debug, Default)]
pub struct Observer {
    seen: Option<(String, std::time::Instant)>,
}

impl Observer {
    /// How long the record in `spec` has been unchanged, as seen from here.
    pub fn unchanged_for(&mut self, spec: Option<&LeaseSpec>, now: std::time::Instant) -> Duration {
        let record = spec.map(record_key).unwrap_or_default();
        match &self.seen {
            Some((r, since)) if *r == record => now.saturating_duration_since(*since),
            _ => {
                self.seen = Some((record, now));
                Duration::ZERO
            }
        }
    }
}

/// Whatever changes when the holder renews (or anyone else writes).
fn record_key(spec: &LeaseSpec) -> String {
    format!(
        "{:?}|{:?}|{:?}|{:?}",
        spec.holder_identity,
        spec.renew_time.as_ref().map(|t| t.0),
        spec.lease_transitions,
        spec.lease_duration_seconds
    )
}

/// `unchanged_for`: how long this replica has seen the Lease's record unchanged
/// ([`Observer`]); the remote timestamps are never compared with the local clock.
pub fn decide(spec: Option<&LeaseSpec>, me: &str, unchanged_for: Duration) -> LeaseAction {
    let Some(spec) = spec else { return LeaseAction::Take { transitions: 0 } };
    let transitions = spec.lease_transitions.unwrap_or(0);
    let holder = spec.holder_identity.clone().unwrap_or_default();
    if holder.is_empty() {
        return LeaseAction::Take { transitions: transitions + 1 };
    }
    if holder == me {
        return LeaseAction::Take { transitions };
    }
    let duration = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(15).max(0) as u64);
    if unchanged_for < duration { LeaseAction::Wait { holder } } else { LeaseAction::Take { transitions: transitions + 1 } }
}

async fn try_take(api: &Api<Lease>, s: &LeaseSettings, observer: &mut Observer) -> kube::Result<bool> {
    let now = Timestamp::now();
    let current = api.get_opt(&s.name).await?;
    let spec = current.as_ref().and_then(|l| l.spec.as_ref());
    let action = decide(spec, &s.identity, observer.unchanged_for(spec, std::time::Instant::now()));
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
            api.create(&crate::api::post_params(), &l).await.map(|_| ())
        }
        Some(mut l) => {
            // replace carries resourceVersion: a concurrent writer makes this a 409, not a split brain.
            l.spec = Some(spec);
            api.replace(&s.name, &crate::api::post_params(), &l).await.map(|_| ())
        }
    };
    match res {
        Ok(()) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Until when this replica may write as the leader, on its monotonic clock.
/// A standby takes the lease once it has seen the record unchanged for the
/// lease duration, and it cannot see a renewal before the renewal was sent:
/// so the lease is ours until the start of the last successful renewal plus
/// the renew deadline (two thirds of the duration, as client-go's 10 s of
/// 15 s), which leaves the rest for clocks that run at different rates.
#[derive(Debug, Clone)]
pub struct LeaseValidity(Arc<Mutex<Instant>>);

impl LeaseValidity {
    fn starting(renewal_started: Instant, s: &LeaseSettings) -> Self {
        LeaseValidity(Arc::new(Mutex::new(renewal_started + renew_deadline(s))))
    }

    fn renewed(&self, renewal_started: Instant, s: &LeaseSettings) {
        *self.0.lock().expect("lease validity") = renewal_started + renew_deadline(s);
    }

    /// A validity that has already run out: a leader that woke up too late.
    #[cfg(test)]
    pub(crate) fn expired() -> Self {
        LeaseValidity(Arc::new(Mutex::new(Instant::now())))
    }

    /// A validity that lasts until `until`.
    #[cfg(test)]
    pub(crate) fn until_instant(until: Instant) -> Self {
        LeaseValidity(Arc::new(Mutex::new(until)))
    }

    pub fn until(&self) -> Instant {
        *self.0.lock().expect("lease validity")
    }

    /// Whether this replica still leads now: checked before every write.
    pub fn valid(&self) -> bool {
        Instant::now() < self.until()
    }
}

/// Settings a Lease can be held with: at least two renewals fit in the
/// renew deadline, so one slow renewal does not cost the lead.
pub fn check(s: &LeaseSettings) -> Result<(), String> {
    if s.renew_every * 2 > renew_deadline(s) {
        return Err(format!(
            "--lease-renew-every {:?} is too slow for --lease-duration {:?}: two renewals must fit in the renew deadline ({:?}, two thirds of the duration)",
            s.renew_every,
            s.lease_duration,
            renew_deadline(s)
        ));
    }
    Ok(())
}

/// How long after a renewal was sent this replica still counts as leading.
pub fn renew_deadline(s: &LeaseSettings) -> Duration {
    s.lease_duration * 2 / 3
}

/// How long bytes this replica wrote may wait unacknowledged before their
/// connection is aborted (TCP_USER_TIMEOUT): a write handed to the kernel
/// before the renew deadline then arrives, or never does, before a standby
/// can take the Lease, a full duration after the renewal it saw. Three
/// quarters of that gap leave room for the retransmission timer's steps.
pub fn delivery_bound(s: &LeaseSettings) -> Duration {
    (s.lease_duration - renew_deadline(s)) * 3 / 4
}

/// This replica's leadership: `leading` is true until it is lost; the
/// renewal runs in the background until [`release`] stops it.
pub struct Leadership {
    pub leading: watch::Receiver<bool>,
    /// Until when the last renewal lets this replica write.
    pub validity: LeaseValidity,
    renewal: tokio::task::JoinHandle<()>,
}

/// Renew until a renewal is refused (another replica holds the lease) or
/// none has succeeded within the validity: then say so on `leading` and
/// return. Each attempt gets only the validity left, so one that hangs is
/// cut off in time.
async fn keep_renewing<F, Fut>(s: &LeaseSettings, validity: &LeaseValidity, leading: &watch::Sender<bool>, mut renew: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = kube::Result<bool>>,
{
    loop {
        tokio::time::sleep(s.renew_every).await;
        let started = Instant::now();
        let left = validity.until().saturating_duration_since(started);
        match tokio::time::timeout(left, renew()).await {
            Ok(Ok(true)) => validity.renewed(started, s),
            Ok(Ok(false)) => {
                warn!(lease = %s.name, "another replica took the leader lease");
                let _ = leading.send(false);
                return;
            }
            Ok(Err(e)) => warn!(error = %e, lease = %s.name, "could not renew the leader lease"),
            Err(_) => warn!(lease = %s.name, after = ?left, "renewing the leader lease took too long; cut off"),
        }
        // Stop before the lease could expire and a standby start writing:
        // the next attempt could not land in time.
        if Instant::now() + s.renew_every >= validity.until() {
            warn!(lease = %s.name, "could not renew the leader lease in time; stepping down");
            let _ = leading.send(false);
            return;
        }
    }
}

/// Blocks until this replica leads, then keeps renewing in the background.
pub async fn acquire(client: Client, s: LeaseSettings) -> Leadership {
    let api: Api<Lease> = Api::namespaced(client, &s.namespace);
    let mut last_holder = String::new();
    let mut observer = Observer::default();
    let taken_at = loop {
        let started = Instant::now();
        match try_take(&api, &s, &mut observer).await {
            Ok(true) => break started,
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
    };
    info!(identity = %s.identity, lease = %s.name, "acquired the leader lease");
    let validity = LeaseValidity::starting(taken_at, &s);
    let (tx, rx) = watch::channel(true);
    let renewal = {
        let validity = validity.clone();
        let observer = Arc::new(tokio::sync::Mutex::new(observer));
        tokio::spawn(async move {
            let renew = || {
                let (api, s, observer) = (api.clone(), s.clone(), observer.clone());
                async move { try_take(&api, &s, &mut *observer.lock().await).await }
            };
            keep_renewing(&s, &validity, &tx, renew).await;
        })
    };
    Leadership { leading: rx, validity, renewal }
}

/// Give the lease up so a standby takes over without waiting for it to expire.
/// The renewal stops first: left running, it bumped the lease's
/// resourceVersion under the release (409, the lease kept, the standby waiting
/// it out) or took the released lease back. A renewal cut off in flight may
/// still land; a conflict is read again.
pub async fn release(client: Client, s: &LeaseSettings, leadership: Leadership) {
    leadership.renewal.abort();
    let _ = leadership.renewal.await;
    let api: Api<Lease> = Api::namespaced(client, &s.namespace);
    for _ in 0..3 {
        let Ok(Some(mut l)) = api.get_opt(&s.name).await else { return };
        if l.spec.as_ref().and_then(|sp| sp.holder_identity.as_deref()) != Some(&s.identity) {
            return;
        }
        if let Some(sp) = l.spec.as_mut() {
            sp.holder_identity = None;
            sp.renew_time = None;
            sp.acquire_time = None;
        }
        match api.replace(&s.name, &crate::api::post_params(), &l).await {
            Ok(_) => {
                info!(lease = %s.name, "released the leader lease");
                return;
            }
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => {
                warn!(error = %e, "could not release the leader lease");
                return;
            }
        }
    }
    warn!(lease = %s.name, "could not release the leader lease: it kept changing");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: Option<&str>, renewed_at: &str, duration: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            renew_time: Some(MicroTime(renewed_at.parse().unwrap())),
            lease_duration_seconds: Some(duration),
            lease_transitions: Some(3),
            ..Default::default()
        }
    }

    const T: &str = "2026-11-29T12:00:00Z";

    #[test]
    fn lease_decisions() {
        let secs = Duration::from_secs;
        let cases = [
            (None, secs(0), LeaseAction::Take { transitions: 0 }),
            (Some(spec(None, T, 15)), secs(0), LeaseAction::Take { transitions: 4 }),
            (Some(spec(Some("me"), T, 15)), secs(0), LeaseAction::Take { transitions: 3 }),
            (Some(spec(Some("other"), T, 15)), secs(5), LeaseAction::Wait { holder: "other".into() }),
            (Some(spec(Some("other"), T, 15)), secs(15), LeaseAction::Take { transitions: 4 }),
        ];
        for (i, (s, unchanged, want)) in cases.into_iter().enumerate() {
            assert_eq!(decide(s.as_ref(), "me", unchanged), want, "case {i}");
        }
    }

    /// The holder's clock is an hour behind this replica's: every renewTime it
    /// writes looks long expired here. Its lease is live as long as it keeps
    /// renewing, and expires only once it stops for a lease duration.
    #[test]
    fn a_renewed_lease_stays_live_whatever_the_holders_clock_says() {
        let start = std::time::Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let mut observer = Observer::default();
        let renewals = ["2026-11-29T11:00:00Z", "2026-11-29T11:00:02Z", "2026-11-29T11:00:04Z"];
        for (i, renewed) in renewals.iter().enumerate() {
            let s = spec(Some("other"), renewed, 15);
            // Seen 10 s after each renewal (every renewal is a new record).
            let unchanged = observer.unchanged_for(Some(&s), at(10 * i as u64));
            assert_eq!(decide(Some(&s), "me", unchanged), LeaseAction::Wait { holder: "other".into() }, "renewal {i}");
        }
        // The holder stops renewing: the same record, seen for a lease duration.
        let last = spec(Some("other"), renewals[2], 15);
        let unchanged = observer.unchanged_for(Some(&last), at(20 + 14));
        assert_eq!(decide(Some(&last), "me", unchanged), LeaseAction::Wait { holder: "other".into() }, "14 s unchanged");
        let unchanged = observer.unchanged_for(Some(&last), at(20 + 15));
        assert_eq!(decide(Some(&last), "me", unchanged), LeaseAction::Take { transitions: 4 }, "15 s unchanged");
    }

    #[tokio::test]
    async fn release_stops_the_renewal_and_reads_the_lease_again_after_a_conflict() {
        use http::{Request, Response};
        use kube::client::Body;
        use std::sync::{Arc, Mutex};
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let seen = Arc::new(Mutex::new(Vec::<(String, serde_json::Value)>::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            // The lease as a renewal that was cut off in flight left it: the first
            // write carries the resourceVersion read before that renewal landed.
            let mut rv = 1;
            while let Some((req, send)) = handle.next_request().await {
                let method = req.method().to_string();
                let body = req.into_body().collect_bytes().await.unwrap();
                let body: serde_json::Value =
                    if body.is_empty() { serde_json::Value::Null } else { serde_json::from_slice(&body).unwrap() };
                let calls = log.lock().unwrap().len();
                log.lock().unwrap().push((method.clone(), body.clone()));
                let lease = serde_json::json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": "winpool-leader", "namespace": "ns", "resourceVersion": rv.to_string()},
                    "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}});
                let (code, answer) = match method.as_str() {
                    "GET" => (200, lease),
                    _ if calls == 1 => {
                        rv += 1;
                        (
                            409,
                            serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 409, "reason": "Conflict", "message": "the object has been modified"}),
                        )
                    }
                    _ => (200, body),
                };
                send.send_response(Response::builder().status(code).body(Body::from(serde_json::to_vec(&answer).unwrap())).unwrap());
            }
        });
        let (alive, renewal_ended) = tokio::sync::oneshot::channel::<()>();
        let renewal = tokio::spawn(async move {
            let _alive = alive;
            std::future::pending::<()>().await;
        });
        let (_tx, leading) = watch::channel(true);
        let s = LeaseSettings {
            name: "winpool-leader".into(),
            namespace: "ns".into(),
            identity: "me".into(),
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(2),
        };
        let released = tokio::time::timeout(
            Duration::from_secs(10),
            release(Client::new(service, "ns"), &s, Leadership { leading, validity: LeaseValidity::starting(Instant::now(), &s), renewal }),
        );
        released.await.expect("release returns once the renewal has stopped");
        assert!(renewal_ended.await.is_err(), "the renewal was stopped");
        let seen = seen.lock().unwrap().clone();
        let methods: Vec<&str> = seen.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(methods, ["GET", "PUT", "GET", "PUT"], "the conflict is read again");
        assert_eq!(seen[3].1["metadata"]["resourceVersion"], "2", "the second write carries the fresh resourceVersion");
        assert!(seen[3].1["spec"]["holderIdentity"].is_null(), "released: {}", seen[3].1);
    }

    #[test]
    fn a_lease_renewed_too_slowly_for_its_duration_is_refused() {
        assert_eq!(check(&short()), Ok(()), "15s and 2s: client-go's pace");
        let slow = LeaseSettings { renew_every: Duration::from_secs(6), ..short() };
        assert!(check(&slow).unwrap_err().contains("two renewals must fit in the renew deadline (10s"));
        let long = LeaseSettings { lease_duration: Duration::from_secs(60), renew_every: Duration::from_secs(10), ..short() };
        assert_eq!(check(&long), Ok(()), "a longer lease for an API server far away");
    }

    /// A write handed to the kernel at the last instant of validity is
    /// delivered or aborted before a standby can hold the Lease.
    #[test]
    fn what_the_leader_wrote_in_time_lands_before_a_standby_can_lead() {
        for s in [short(), LeaseSettings { lease_duration: Duration::from_secs(60), ..short() }] {
            let last_byte_lands_by = renew_deadline(&s) + delivery_bound(&s);
            assert!(last_byte_lands_by < s.lease_duration, "{last_byte_lands_by:?} is not before {:?}", s.lease_duration);
        }
        assert_eq!(delivery_bound(&short()), Duration::from_millis(3750));
    }

    fn short() -> LeaseSettings {
        LeaseSettings {
            name: "winpool-leader".into(),
            namespace: "ns".into(),
            identity: "me".into(),
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(2),
        }
    }

    /// A connection that hangs instead of failing (a black-holed API server)
    /// must not keep a leader renewing: each attempt is cut off at the
    /// validity left, and the leader steps down before a standby could take
    /// the lease (it takes it lease_duration after the last renewal it saw).
    #[tokio::test(start_paused = true)]
    async fn a_renewal_that_hangs_is_cut_off_and_the_leader_steps_down_before_the_lease_could_expire() {
        let s = short();
        let validity = LeaseValidity::starting(Instant::now(), &s);
        let (tx, mut rx) = watch::channel(true);
        let attempts = Arc::new(Mutex::new(Vec::<Instant>::new()));
        let seen = attempts.clone();
        let renew = move || {
            let n = {
                let mut a = seen.lock().unwrap();
                a.push(Instant::now());
                a.len()
            };
            async move { if n <= 2 { Ok(true) } else { std::future::pending::<kube::Result<bool>>().await } }
        };
        let renewing = tokio::time::timeout(s.lease_duration * 4, keep_renewing(&s, &validity, &tx, renew));
        renewing.await.expect("the renewal gives up on a hung attempt");
        let stepped_down = Instant::now();
        assert!(!*rx.borrow_and_update(), "leading says lost");
        let last_renewal = attempts.lock().unwrap()[1];
        assert!(
            stepped_down < last_renewal + s.lease_duration,
            "stepped down {:?} after the last renewal; a standby takes over after {:?}",
            stepped_down - last_renewal,
            s.lease_duration
        );
        assert!(stepped_down <= last_renewal + renew_deadline(&s), "within the renew deadline");
        assert!(attempts.lock().unwrap().len() >= 3, "a hung attempt was made and cut off");
    }

    /// A leader frozen past its lease (SIGSTOP, a paused VM) may not write
    /// when it wakes, whatever its renewal task has not noticed yet.
    #[tokio::test(start_paused = true)]
    async fn a_leader_frozen_past_its_renew_deadline_may_not_write() {
        let s = short();
        let validity = LeaseValidity::starting(Instant::now(), &s);
        assert!(validity.valid());
        tokio::time::advance(renew_deadline(&s) - Duration::from_millis(1)).await;
        assert!(validity.valid(), "still within the deadline");
        tokio::time::advance(Duration::from_millis(2)).await;
        assert!(!validity.valid(), "past the deadline: no write");
        validity.renewed(Instant::now(), &s);
        assert!(validity.valid(), "a renewal extends it");
    }

    /// A refused renewal (another replica holds the lease) ends the leadership at once.
    #[tokio::test(start_paused = true)]
    async fn a_refused_renewal_ends_the_leadership_at_once() {
        let s = short();
        let validity = LeaseValidity::starting(Instant::now(), &s);
        let (tx, rx) = watch::channel(true);
        let start = Instant::now();
        keep_renewing(&s, &validity, &tx, || async { Ok(false) }).await;
        assert!(!*rx.borrow());
        assert_eq!(Instant::now() - start, s.renew_every, "after the first attempt");
    }
}
