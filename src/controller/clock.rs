//! The controller's clock: the system's, which tests move on (a fixture test
//! of the status throttle or of event batching waits for nothing).

use std::sync::atomic::{AtomicU64, Ordering};

use jiff::{SignedDuration, Timestamp};

#[derive(Default)]
pub(super) struct Clock {
    /// Milliseconds tests have moved it on.
    ahead_ms: AtomicU64,
}

impl Clock {
    pub fn now(&self) -> Timestamp {
        Timestamp::now() + SignedDuration::from_millis(self.ahead_ms.load(Ordering::Relaxed) as i64)
    }

    #[cfg(test)]
    pub fn advance(&self, by: std::time::Duration) {
        self.ahead_ms.fetch_add(by.as_millis() as u64, Ordering::Relaxed);
    }
}
