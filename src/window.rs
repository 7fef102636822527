//! Maintenance windows: "no new node starts outside Sat/Sun 02:00-06:00 Europe/Zurich".
//!
//! Pure: given the window and an instant, is the window open, and when does it
//! next open (so the controller can sleep until then instead of polling).

use jiff::civil::{Time, Weekday as JWeekday};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan, Zoned};

use crate::api::{MaintenanceWindow, Weekday};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    #[error("maintenance window time {0:?} is not HH:MM")]
    Time(String),
    #[error("maintenance window time zone {0:?} is not known to this operator's time zone database")]
    TimeZone(String),
}

fn parse_hhmm(s: &str) -> Result<Time, WindowError> {
    let err = || WindowError::Time(s.to_string());
    let (h, m) = s.split_once(':').ok_or_else(err)?;
    if h.len() != 2 || m.len() != 2 {
        return Err(err());
    }
    let h: i8 = h.parse().map_err(|_| err())?;
    let m: i8 = m.parse().map_err(|_| err())?;
    Time::new(h, m, 0, 0).map_err(|_| err())
}

fn to_jiff(d: Weekday) -> JWeekday {
    match d {
        Weekday::Mon => JWeekday::Monday,
        Weekday::Tue => JWeekday::Tuesday,
        Weekday::Wed => JWeekday::Wednesday,
        Weekday::Thu => JWeekday::Thursday,
        Weekday::Fri => JWeekday::Friday,
        Weekday::Sat => JWeekday::Saturday,
        Weekday::Sun => JWeekday::Sunday,
    }
}

/// A window that has been checked once, so the per-reconcile question cannot fail.
#[derive(Debug, Clone)]
pub struct Window {
    days: Vec<JWeekday>,
    start: Time,
    end: Time,
    tz: TimeZone,
}

impl Window {
    pub fn parse(w: &MaintenanceWindow) -> Result<Self, WindowError> {
        let tz = TimeZone::get(&w.time_zone).map_err(|_| WindowError::TimeZone(w.time_zone.clone()))?;
        Ok(Window { days: w.days.iter().copied().map(to_jiff).collect(), start: parse_hhmm(&w.start)?, end: parse_hhmm(&w.end)?, tz })
    }

    fn day_allowed(&self, d: JWeekday) -> bool {
        self.days.is_empty() || self.days.contains(&d)
    }

    /// Open at `now`? A window whose end is before its start runs past midnight
    /// and belongs to the day it opened on.
    pub fn is_open(&self, now: Timestamp) -> bool {
        let local = now.to_zoned(self.tz.clone());
        let t = local.time();
        if self.start < self.end {
            self.day_allowed(local.weekday()) && t >= self.start && t < self.end
        } else {
            (t >= self.start && self.day_allowed(local.weekday())) || (t < self.end && self.day_allowed(local.weekday().previous()))
        }
    }

    /// The next instant at or after `now` when the window opens (now itself when open).
    pub fn next_open(&self, now: Timestamp) -> Timestamp {
        if self.is_open(now) {
            return now;
        }
        let local: Zoned = now.to_zoned(self.tz.clone());
        for offset in 0..=8 {
            let Ok(day) = local.date().checked_add(offset.days()) else { break };
            if !self.day_allowed(day.weekday()) {
                continue;
            }
            // A start time skipped by a DST jump resolves to the instant after the gap.
            if let Ok(open) = day.to_datetime(self.start).to_zoned(self.tz.clone()) {
                let ts = open.timestamp();
                if ts >= now {
                    return ts;
                }
            }
        }
        now + 24.hours()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(days: &[Weekday], start: &str, end: &str, tz: &str) -> Window {
        Window::parse(&MaintenanceWindow { days: days.to_vec(), start: start.into(), end: end.into(), time_zone: tz.into() }).unwrap()
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn open_inside_and_closed_outside_a_same_day_window() {
        // 2026-11-28 is a Saturday.
        let w = window(&[Weekday::Sat, Weekday::Sun], "02:00", "06:00", "UTC");
        let cases = [
            ("2026-11-28T01:59:59Z", false),
            ("2026-11-28T02:00:00Z", true),
            ("2026-11-28T05:59:59Z", true),
            ("2026-11-28T06:00:00Z", false),
            ("2026-11-29T03:00:00Z", true),
            ("2026-11-30T03:00:00Z", false), // Monday
        ];
        for (t, want) in cases {
            assert_eq!(w.is_open(ts(t)), want, "{t}");
        }
    }

    #[test]
    fn an_overnight_window_belongs_to_the_day_it_opens() {
        // Friday 22:00 to Saturday 04:00 only.
        let w = window(&[Weekday::Fri], "22:00", "04:00", "UTC");
        let cases = [
            ("2026-11-27T21:59:00Z", false), // Friday before
            ("2026-11-27T22:00:00Z", true),
            ("2026-11-28T03:59:00Z", true), // Saturday early, opened Friday
            ("2026-11-28T04:00:00Z", false),
            ("2026-11-28T22:30:00Z", false), // Saturday night: not a window day
            ("2026-11-27T03:00:00Z", false), // Friday early: opened Thursday, not allowed
        ];
        for (t, want) in cases {
            assert_eq!(w.is_open(ts(t)), want, "{t}");
        }
    }

    #[test]
    fn time_zones_shift_the_window() {
        // 02:00-06:00 in Zurich (UTC+1 in winter) is 01:00-05:00 UTC.
        let w = window(&[], "02:00", "06:00", "Europe/Zurich");
        assert!(w.is_open(ts("2026-11-28T01:30:00Z")));
        assert!(!w.is_open(ts("2026-11-28T05:30:00Z")));
    }

    #[test]
    fn next_open_finds_the_next_allowed_day() {
        let w = window(&[Weekday::Sat], "02:00", "06:00", "UTC");
        // Monday noon -> next Saturday 02:00.
        assert_eq!(w.next_open(ts("2026-11-30T12:00:00Z")), ts("2026-12-05T02:00:00Z"));
        // Saturday 01:00 -> one hour later.
        assert_eq!(w.next_open(ts("2026-11-28T01:00:00Z")), ts("2026-11-28T02:00:00Z"));
        // Inside -> now.
        assert_eq!(w.next_open(ts("2026-11-28T03:00:00Z")), ts("2026-11-28T03:00:00Z"));
    }

    #[test]
    fn unknown_zones_and_bad_times_are_errors_not_panics() {
        let bad_tz = MaintenanceWindow { days: vec![], start: "02:00".into(), end: "06:00".into(), time_zone: "Mars/Olympus".into() };
        assert_eq!(Window::parse(&bad_tz).unwrap_err(), WindowError::TimeZone("Mars/Olympus".into()));
        for t in ["2:00", "24:00", "12:60", "ab:cd", "", "12:00:00"] {
            let w = MaintenanceWindow { days: vec![], start: t.into(), end: "06:00".into(), time_zone: "UTC".into() };
            assert!(Window::parse(&w).is_err(), "{t:?}");
        }
    }
}
