//! The controller's clock: the API server's. Timeouts, windows and soak
//! times are judged by it, so an operator whose host clock drifts (NTP
//! broken, a VM resumed after a pause) neither times a node out early nor
//! opens a window late. The API server's time is learnt from the `Date`
//! header of its answers ([`Clock::learn`]) and carried on by the monotonic
//! clock, not the host's wall clock: a wall clock stepped between two learns
//! (an NTP step, a resume) moves nothing, and shows at once as skew. Tests
//! move it on by hand.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use jiff::{SignedDuration, Timestamp};

#[derive(Default)]
pub(crate) struct Clock {
    /// Milliseconds tests have moved it on.
    ahead_ms: AtomicU64,
    /// The API server's time at a monotonic instant; None until first learnt.
    anchor: Mutex<Option<(Instant, Timestamp)>>,
}

/// Below this the `Date` header (whole seconds) cannot tell an offset from
/// its own rounding and the request's round trip: taken as none (the host's
/// own time, finer than the header's, is the anchor).
const RESOLUTION: SignedDuration = SignedDuration::from_secs(2);

impl Clock {
    pub fn now(&self) -> Timestamp {
        self.server_at(Instant::now()) + SignedDuration::from_millis(self.ahead_ms.load(Ordering::Relaxed) as i64)
    }

    /// The API server's time at `mono`, as learnt (this host's wall clock before any learning).
    fn server_at(&self, mono: Instant) -> Timestamp {
        match *self.anchor.lock().unwrap_or_else(|e| e.into_inner()) {
            Some((at, server)) => server + SignedDuration::try_from(mono.saturating_duration_since(at)).unwrap_or(SignedDuration::MAX),
            None => Timestamp::now(),
        }
    }

    /// Learn the API server's time from one answer: sent at `sent`, answered
    /// at `answered` (monotonic), when this host's wall clock read `wall`,
    /// carrying `date` (the API server's `Date` header). Returns its offset
    /// from this host's wall clock.
    pub fn learn(&self, sent: Instant, answered: Instant, wall: Timestamp, date: &str) -> Result<SignedDuration, String> {
        let middle = sent + answered.saturating_duration_since(sent) / 2;
        let wall_middle = wall - SignedDuration::try_from(answered.saturating_duration_since(middle)).unwrap_or_default();
        let offset = offset_of(wall_middle, date)?;
        *self.anchor.lock().unwrap_or_else(|e| e.into_inner()) = Some((middle, wall_middle + offset));
        Ok(offset)
    }

    /// The API server's time minus this host's wall clock now, if past
    /// `bound` either way: read at every call, so a step shows at once.
    pub fn skew_past(&self, bound: SignedDuration) -> Option<SignedDuration> {
        skew(self.server_at(Instant::now()), Timestamp::now(), bound)
    }

    #[cfg(test)]
    pub fn advance(&self, by: std::time::Duration) {
        self.ahead_ms.fetch_add(by.as_millis() as u64, Ordering::Relaxed);
    }
}

fn skew(server: Timestamp, wall: Timestamp, bound: SignedDuration) -> Option<SignedDuration> {
    let offset = server.duration_since(wall);
    (offset.abs() > bound).then_some(offset)
}

/// The API server's time minus this host's at `wall_middle` (the middle of
/// the request), from its `Date` (RFC 7231, whole seconds, `Fri, 04 Dec
/// 2026 11:45:00 GMT`). Within RESOLUTION it is none.
fn offset_of(wall_middle: Timestamp, date: &str) -> Result<SignedDuration, String> {
    let server = jiff::fmt::rfc2822::parse(date).map_err(|e| format!("the API server's Date header {date:?}: {e}"))?.timestamp();
    let offset = server.duration_since(wall_middle);
    Ok(if offset.abs() < RESOLUTION { SignedDuration::ZERO } else { offset })
}

/// How often the offset is learnt again.
const RELEARN_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Until the offset is first learnt, it is asked again this often.
const FIRST_ASK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Learn the API server's time now and every minute, from the `Date` of a
/// `GET /version` (one cheap request a minute); a failed request keeps the
/// offset last learnt. The receiver turns true once the offset was learnt
/// once: no round may run before, since an offset never learnt reads as
/// none, and a host clock twenty minutes ahead would time out every node.
pub(super) fn spawn_keeper(client: kube::Client, ctx: std::sync::Arc<super::Context>) -> tokio::sync::watch::Receiver<bool> {
    let (learnt, first) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        loop {
            if ctx.stopping() {
                return;
            }
            match ask_date(&client).await {
                Ok((sent, answered, wall, date)) => match ctx.clock.learn(sent, answered, wall, &date) {
                    Ok(offset) => {
                        learnt.send_replace(true);
                        if offset.abs() > crate::decision::rollout::MAX_CLOCK_SKEW {
                            tracing::warn!(
                                offset_ms = offset.as_millis() as i64,
                                "{}",
                                crate::decision::rollout::clock_skew_message(offset)
                            )
                        } else {
                            tracing::debug!(offset_ms = offset.as_millis() as i64, "API server clock")
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot read the API server's time"),
                },
                Err(e) => tracing::debug!(error = %e, "cannot ask the API server's time; keeping the offset"),
            }
            tokio::time::sleep(if *learnt.borrow() { RELEARN_EVERY } else { FIRST_ASK_EVERY }).await;
        }
    });
    first
}

/// Waits until the offset was first learnt (true), or until `stopped` (false).
pub(super) async fn learnt_unless_stopped(
    learnt: &mut tokio::sync::watch::Receiver<bool>,
    stopped: &mut (impl std::future::Future<Output = ()> + Unpin),
) -> bool {
    tokio::select! {
        _ = learnt.wait_for(|learnt| *learnt) => true,
        _ = stopped => {
            tracing::info!("winpool controller stopped before it learnt the API server's time");
            false
        }
    }
}

async fn ask_date(client: &kube::Client) -> Result<(Instant, Instant, Timestamp, String), String> {
    let req = http::Request::get("/version").body(kube::client::Body::empty()).map_err(|e| e.to_string())?;
    let sent = Instant::now();
    let res = client.send(req).await.map_err(|e| e.to_string())?;
    let (answered, wall) = (Instant::now(), Timestamp::now());
    let date = res.headers().get("date").and_then(|v| v.to_str().ok()).ok_or("no Date header")?.to_string();
    Ok((sent, answered, wall, date))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn header(t: Timestamp) -> String {
        t.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string()
    }

    #[test]
    fn the_offset_is_the_api_servers_date_against_the_middle_of_the_request() {
        let wall = at("2026-12-04T11:45:00.200Z");
        let offset = |date| offset_of(wall, date).unwrap();
        assert_eq!(offset("Fri, 04 Dec 2026 11:45:01 GMT"), SignedDuration::ZERO, "within the header's resolution: none");
        assert_eq!(offset("Fri, 04 Dec 2026 11:50:00 GMT"), SignedDuration::from_millis(299_800), "the server is ahead");
        assert_eq!(offset("Fri, 04 Dec 2026 11:40:00 GMT"), SignedDuration::from_millis(-300_200), "the server is behind");
        assert!(offset_of(wall, "yesterday").unwrap_err().contains("Date header"));
        // The middle of a 400 ms request, by the monotonic clock.
        let clock = Clock::default();
        let sent = Instant::now();
        let answered = sent + Duration::from_millis(400);
        let learnt = clock.learn(sent, answered, at("2026-12-04T11:45:00.400Z"), "Fri, 04 Dec 2026 11:50:00 GMT").unwrap();
        assert_eq!(learnt, SignedDuration::from_millis(299_800));
        assert_eq!(clock.server_at(sent + Duration::from_millis(200)), at("2026-12-04T11:50:00Z"));
    }

    #[test]
    fn the_clock_reads_the_api_servers_time_and_says_when_it_is_off_past_a_bound() {
        let clock = Clock::default();
        let (i, before) = (Instant::now(), Timestamp::now());
        let learnt = clock.learn(i, i, before, &header(before + SignedDuration::from_mins(10))).unwrap();
        assert!((learnt - SignedDuration::from_mins(10)).abs() < SignedDuration::from_secs(1), "{learnt:?}");
        let ahead = clock.now().duration_since(Timestamp::now());
        assert!((ahead - SignedDuration::from_mins(10)).abs() < SignedDuration::from_secs(2), "now() is the server's: {ahead:?}");
        assert!(clock.skew_past(SignedDuration::from_mins(2)).is_some());
        assert!(clock.skew_past(SignedDuration::from_mins(11)).is_none());
    }

    /// The host's wall clock stepped half an hour ahead between two learns
    /// (an NTP step, a VM resumed): the clock reads on from the API server's
    /// time by the monotonic clock, and the step is skew from that moment.
    #[test]
    fn a_wall_clock_step_between_two_learns_moves_nothing_and_is_skew_at_once() {
        let clock = Clock::default();
        let (i, wall) = (Instant::now(), at("2026-12-04T11:45:00Z"));
        clock.learn(i, i, wall, &header(wall)).unwrap();
        let later = i + Duration::from_secs(5);
        assert_eq!(clock.server_at(later), at("2026-12-04T11:45:05Z"));
        let bound = SignedDuration::from_mins(2);
        assert_eq!(skew(clock.server_at(later), at("2026-12-04T11:45:05Z"), bound), None, "no step, no skew");
        let stepped = at("2026-12-04T12:15:05Z");
        assert_eq!(clock.server_at(later), at("2026-12-04T11:45:05Z"), "the step moves nothing");
        assert_eq!(skew(clock.server_at(later), stepped, bound), Some(SignedDuration::from_mins(-30)), "and is skew at once");
    }
}
