//! The controller's clock: the API server's. Timeouts, windows and soak
//! times are judged by it, so an operator whose host clock drifts (NTP
//! broken, a VM resumed after a pause) neither times a node out early nor
//! opens a window late. Its offset is learnt from the `Date` header of the
//! API server's answers ([`Clock::learn`]); tests move it on by hand.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use jiff::{SignedDuration, Timestamp};

#[derive(Default)]
pub(crate) struct Clock {
    /// Milliseconds tests have moved it on.
    ahead_ms: AtomicU64,
    /// The API server's time minus this host's, in milliseconds.
    offset_ms: AtomicI64,
}

/// Below this the `Date` header (whole seconds) cannot tell an offset from
/// its own rounding and the request's round trip: taken as none.
const RESOLUTION: SignedDuration = SignedDuration::from_secs(2);

impl Clock {
    pub fn now(&self) -> Timestamp {
        Timestamp::now()
            + SignedDuration::from_millis(self.ahead_ms.load(Ordering::Relaxed) as i64)
            + SignedDuration::from_millis(self.offset_ms.load(Ordering::Relaxed))
    }

    /// Learn the offset from one answer: sent at `sent`, answered at
    /// `answered` (this host's clock), carrying `date` (the API server's
    /// `Date` header). Returns the offset now in use.
    pub fn learn(&self, sent: Timestamp, answered: Timestamp, date: &str) -> Result<SignedDuration, String> {
        let offset = offset_of(sent, answered, date)?;
        self.offset_ms.store(offset.as_millis() as i64, Ordering::Relaxed);
        Ok(offset)
    }

    /// The offset, if it is past `bound` either way.
    pub fn skew_past(&self, bound: SignedDuration) -> Option<SignedDuration> {
        let offset = SignedDuration::from_millis(self.offset_ms.load(Ordering::Relaxed));
        (offset.abs() > bound).then_some(offset)
    }

    #[cfg(test)]
    pub fn advance(&self, by: std::time::Duration) {
        self.ahead_ms.fetch_add(by.as_millis() as u64, Ordering::Relaxed);
    }
}

/// The API server's time minus this host's, from one answer: its `Date`
/// (RFC 7231, whole seconds, `Fri, 04 Dec 2026 11:45:00 GMT`) against the
/// middle of the request. Within RESOLUTION it is none.
fn offset_of(sent: Timestamp, answered: Timestamp, date: &str) -> Result<SignedDuration, String> {
    let server = jiff::fmt::rfc2822::parse(date).map_err(|e| format!("the API server's Date header {date:?}: {e}"))?.timestamp();
    let middle = sent + answered.duration_since(sent) / 2;
    let offset = server.duration_since(middle);
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
                Ok((sent, answered, date)) => match ctx.clock.learn(sent, answered, &date) {
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

async fn ask_date(client: &kube::Client) -> Result<(Timestamp, Timestamp, String), String> {
    let req = http::Request::get("/version").body(kube::client::Body::empty()).map_err(|e| e.to_string())?;
    let sent = Timestamp::now();
    let res = client.send(req).await.map_err(|e| e.to_string())?;
    let answered = Timestamp::now();
    let date = res.headers().get("date").and_then(|v| v.to_str().ok()).ok_or("no Date header")?.to_string();
    Ok((sent, answered, date))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_offset_is_the_api_servers_date_against_the_middle_of_the_request() {
        let (sent, answered) = (at("2026-12-04T11:45:00Z"), at("2026-12-04T11:45:00.400Z"));
        let offset = |date| offset_of(sent, answered, date).unwrap();
        assert_eq!(offset("Fri, 04 Dec 2026 11:45:01 GMT"), SignedDuration::ZERO, "within the header's resolution: none");
        assert_eq!(offset("Fri, 04 Dec 2026 11:50:00 GMT"), SignedDuration::from_millis(299_800), "the server is ahead");
        assert_eq!(offset("Fri, 04 Dec 2026 11:40:00 GMT"), SignedDuration::from_millis(-300_200), "the server is behind");
        assert!(offset_of(sent, answered, "yesterday").unwrap_err().contains("Date header"));
    }

    #[test]
    fn the_clock_reads_the_api_servers_time_and_says_when_it_is_off_past_a_bound() {
        let clock = Clock::default();
        let before = Timestamp::now();
        let server = (before + SignedDuration::from_mins(10)).strftime("%a, %d %b %Y %H:%M:%S GMT").to_string();
        let learnt = clock.learn(before, before, &server).unwrap();
        assert!((learnt - SignedDuration::from_mins(10)).abs() < SignedDuration::from_secs(1), "{learnt:?}");
        let ahead = clock.now().duration_since(Timestamp::now());
        assert!((ahead - SignedDuration::from_mins(10)).abs() < SignedDuration::from_secs(2), "now() is the server's: {ahead:?}");
        assert!(clock.skew_past(SignedDuration::from_mins(2)).is_some());
        assert!(clock.skew_past(SignedDuration::from_mins(11)).is_none());
    }
}
