//! Maintenance windows: "no new node starts outside Sat/Sun 02:00-06:00
//! Europe/Zurich, nor outside the week after Patch Tuesday, nor over the
//! holidays".
//!
//! Pure: given the windows, the not-allowed dates and an instant, the span of
//! time that is open now or opens next, so the controller can sleep until then
//! instead of polling. Every window is a span of instants from its opening on
//! a local date to its closing, so a DST change makes that night's window
//! shorter or longer rather than open twice or not at all.

use jiff::civil::{Date, Time, Weekday as JWeekday};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

use crate::api::{AbsoluteMonthly, DateRange, MaintenanceWindow, RelativeMonthly, RolloutSpec, WeekIndex, Weekday};

/// How far ahead a window is looked for: a week first (weekly windows), then
/// a little more than a year (monthly windows behind long freezes).
const HORIZON_DAYS: [i64; 2] = [8, 400];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    #[error("maintenance window time {0:?} is not HH:MM")]
    Time(String),
    #[error("time zone {0:?} is not known to this operator's time zone database")]
    TimeZone(String),
    #[error("rollout.notAllowedDates: {0:?} is not a date (YYYY-MM-DD)")]
    Date(String),
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

fn parse_tz(name: &str) -> Result<TimeZone, WindowError> {
    TimeZone::get(name).map_err(|_| WindowError::TimeZone(name.to_string()))
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

/// A half-open span of instants `[start, end)`. `Timestamp::MIN`/`MAX` stand
/// for "since ever"/"for ever" (a pool with only notAllowedDates).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: Timestamp,
    pub end: Timestamp,
}

impl Span {
    pub fn is_open(&self, now: Timestamp) -> bool {
        self.start <= now && now < self.end
    }

    /// The bounds worth writing down: not the "ever" sentinels.
    pub fn known_start(&self) -> Option<Timestamp> {
        (self.start != Timestamp::MIN).then_some(self.start)
    }

    pub fn known_end(&self) -> Option<Timestamp> {
        (self.end != Timestamp::MAX).then_some(self.end)
    }
}

/// On which local dates a window opens.
#[derive(Debug, Clone)]
enum Recurrence {
    /// These weekdays; none listed means every day.
    Weekly(Vec<JWeekday>),
    /// `nth` weekday of each month (-1: the last), plus `offset` days, on
    /// `days` consecutive days.
    Monthly { nth: i8, weekday: JWeekday, offset: i64, days: i64 },
    /// Date `day` of each month (its last day when it has fewer), on `days`
    /// consecutive days.
    MonthlyOnDate { day: i8, days: i64 },
}

impl Recurrence {
    fn of(w: &MaintenanceWindow) -> Self {
        if let Some(AbsoluteMonthly { day_of_month, duration_days }) = &w.absolute_monthly {
            return Recurrence::MonthlyOnDate { day: (*day_of_month).clamp(1, 31) as i8, days: i64::from(*duration_days).clamp(1, 28) };
        }
        match &w.relative_monthly {
            None => Recurrence::Weekly(w.days.iter().copied().map(to_jiff).collect()),
            Some(RelativeMonthly { week_index, day_of_week, offset_days, duration_days }) => Recurrence::Monthly {
                nth: match week_index {
                    WeekIndex::First => 1,
                    WeekIndex::Second => 2,
                    WeekIndex::Third => 3,
                    WeekIndex::Fourth => 4,
                    WeekIndex::Last => -1,
                },
                weekday: to_jiff(*day_of_week),
                offset: i64::from(*offset_days).clamp(-27, 27),
                days: i64::from(*duration_days).clamp(1, 28),
            },
        }
    }

    fn opens_on(&self, d: Date) -> bool {
        match self {
            Recurrence::Weekly(days) => days.is_empty() || days.contains(&d.weekday()),
            Recurrence::Monthly { nth, weekday, offset, days } => {
                // The day counted from may lie two months before `d` (a late
                // anchor plus a long offset and duration) or one after (a
                // negative offset).
                (-2..=1).any(|months: i32| {
                    let Ok(month) = d.first_of_month().checked_add(months.months()) else { return false };
                    let Ok(anchor) = month.nth_weekday_of_month(*nth, *weekday) else { return false };
                    let Ok(from_anchor) = anchor.until(d) else { return false };
                    let from_first = i64::from(from_anchor.get_days()) - offset;
                    (0..*days).contains(&from_first)
                })
            }
            Recurrence::MonthlyOnDate { day, days } => {
                // Up to 28 days long, a window may have opened in the month before `d`.
                (-1..=0).any(|months: i32| {
                    let Ok(month) = d.first_of_month().checked_add(months.months()) else { return false };
                    let Ok(opens) = month.with().day((*day).min(month.days_in_month())).build() else { return false };
                    let Ok(since) = opens.until(d) else { return false };
                    (0..*days).contains(&i64::from(since.get_days()))
                })
            }
        }
    }
}

/// A window that has been checked once, so the per-reconcile question cannot fail.
#[derive(Debug, Clone)]
pub struct Window {
    recurrence: Recurrence,
    start: Time,
    end: Time,
    tz: TimeZone,
}

impl Window {
    pub fn parse(w: &MaintenanceWindow) -> Result<Self, WindowError> {
        Ok(Window { recurrence: Recurrence::of(w), start: parse_hhmm(&w.start)?, end: parse_hhmm(&w.end)?, tz: parse_tz(&w.time_zone)? })
    }

    /// The window that opens on local date `d`. One whose end is before its
    /// start runs past midnight and belongs to the day it opened on. A time a
    /// DST jump skips resolves to the instant as far after the jump
    /// (RFC 5545); a time that occurs twice, to the first.
    fn opened_on(&self, d: Date) -> Option<Span> {
        let close_day = if self.end > self.start { d } else { d.tomorrow().ok()? };
        let start = d.to_datetime(self.start).to_zoned(self.tz.clone()).ok()?.timestamp();
        let end = close_day.to_datetime(self.end).to_zoned(self.tz.clone()).ok()?.timestamp();
        Some(Span { start, end })
    }

    /// The windows that have not closed by `now` and open within `days` days.
    fn spans(&self, now: Timestamp, days: i64) -> impl Iterator<Item = Span> + '_ {
        let today = now.to_zoned(self.tz.clone()).date();
        (-1..=days)
            .filter_map(move |i| today.checked_add(i.days()).ok())
            .filter(|d| self.recurrence.opens_on(*d))
            .filter_map(|d| self.opened_on(d))
            .filter(move |s| s.end > now)
    }
}

/// `rollout.notAllowedDates` entry: midnight of its first day to midnight
/// after its last, in its zone.
fn blackout(r: &DateRange) -> Result<Span, WindowError> {
    let tz = parse_tz(&r.time_zone)?;
    let date = |s: &str| s.parse::<Date>().map_err(|_| WindowError::Date(s.to_string()));
    let (first, last) = (date(&r.start)?, date(&r.end)?);
    let midnight = |d: Date| d.to_zoned(tz.clone()).map(|z| z.timestamp()).map_err(|_| WindowError::Date(d.to_string()));
    Ok(Span { start: midnight(first)?, end: midnight(last.tomorrow().map_err(|_| WindowError::Date(r.end.clone()))?)? })
}

/// All of a pool's windows and not-allowed dates.
#[derive(Debug, Clone)]
pub struct Schedule {
    windows: Vec<Window>,
    blackouts: Vec<Span>,
}

impl Schedule {
    /// `None` when the rollout has neither windows nor not-allowed dates: it is always open.
    pub fn parse(r: &RolloutSpec) -> Result<Option<Self>, WindowError> {
        let windows: Vec<Window> = r.maintenance_windows.iter().map(Window::parse).collect::<Result<_, _>>()?;
        let blackouts: Vec<Span> = r.not_allowed_dates.iter().map(blackout).collect::<Result<_, _>>()?;
        Ok((!windows.is_empty() || !blackouts.is_empty()).then_some(Schedule { windows, blackouts }))
    }

    /// The span open at `now`, or the next one to open; `None` when nothing
    /// opens within the horizon. Windows that overlap or touch are one span.
    pub fn at(&self, now: Timestamp) -> Option<Span> {
        HORIZON_DAYS.iter().find_map(|&days| self.span_within(now, days))
    }

    fn span_within(&self, now: Timestamp, days: i64) -> Option<Span> {
        let mut spans: Vec<Span> = if self.windows.is_empty() {
            vec![Span { start: Timestamp::MIN, end: Timestamp::MAX }]
        } else {
            self.windows.iter().flat_map(|w| w.spans(now, days)).collect()
        };
        for b in &self.blackouts {
            spans = spans.into_iter().flat_map(|s| without(s, *b)).collect();
        }
        spans.sort_by_key(|s| s.start);
        let mut merged: Option<Span> = None;
        for s in spans {
            match merged {
                Some(ref mut m) if s.start <= m.end => m.end = m.end.max(s.end),
                Some(m) if m.end > now => return Some(m),
                _ => merged = Some(s),
            }
        }
        merged.filter(|m| m.end > now)
    }
}

/// `s` less `b`: none, one or two pieces.
fn without(s: Span, b: Span) -> Vec<Span> {
    if b.end <= s.start || b.start >= s.end {
        return vec![s];
    }
    [Span { start: s.start, end: b.start }, Span { start: b.end, end: s.end }].into_iter().filter(|p| p.start < p.end).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weekly(days: &[Weekday], start: &str, end: &str, tz: &str) -> MaintenanceWindow {
        MaintenanceWindow {
            days: days.to_vec(),
            relative_monthly: None,
            absolute_monthly: None,
            start: start.into(),
            end: end.into(),
            time_zone: tz.into(),
        }
    }

    fn monthly(
        week_index: WeekIndex,
        day: Weekday,
        offset_days: i32,
        duration_days: i32,
        start: &str,
        end: &str,
        tz: &str,
    ) -> MaintenanceWindow {
        MaintenanceWindow {
            days: vec![],
            relative_monthly: Some(RelativeMonthly { week_index, day_of_week: day, offset_days, duration_days }),
            absolute_monthly: None,
            start: start.into(),
            end: end.into(),
            time_zone: tz.into(),
        }
    }

    fn dates(start: &str, end: &str, tz: &str) -> DateRange {
        DateRange { start: start.into(), end: end.into(), time_zone: tz.into() }
    }

    fn schedule(windows: Vec<MaintenanceWindow>, not_allowed: Vec<DateRange>) -> Schedule {
        let r = RolloutSpec { maintenance_windows: windows, not_allowed_dates: not_allowed, ..RolloutSpec::default() };
        Schedule::parse(&r).unwrap().expect("a schedule")
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn span(start: &str, end: &str) -> Span {
        Span { start: ts(start), end: ts(end) }
    }

    fn is_open(s: &Schedule, now: &str) -> bool {
        s.at(ts(now)).is_some_and(|w| w.is_open(ts(now)))
    }

    /// (now, open?) rows against one schedule.
    fn assert_open(s: &Schedule, cases: &[(&str, bool)]) {
        for (t, want) in cases {
            assert_eq!(is_open(s, t), *want, "{t}");
        }
    }

    #[test]
    fn open_inside_and_closed_outside_a_same_day_window() {
        // 2026-11-28 is a Saturday.
        let s = schedule(vec![weekly(&[Weekday::Sat, Weekday::Sun], "02:00", "06:00", "UTC")], vec![]);
        assert_open(
            &s,
            &[
                ("2026-11-28T01:59:59Z", false),
                ("2026-11-28T02:00:00Z", true),
                ("2026-11-28T05:59:59Z", true),
                ("2026-11-28T06:00:00Z", false),
                ("2026-11-29T03:00:00Z", true),
                ("2026-11-30T03:00:00Z", false), // Monday
            ],
        );
    }

    #[test]
    fn an_overnight_window_belongs_to_the_day_it_opens() {
        // Friday 22:00 to Saturday 04:00 only.
        let s = schedule(vec![weekly(&[Weekday::Fri], "22:00", "04:00", "UTC")], vec![]);
        assert_open(
            &s,
            &[
                ("2026-11-27T21:59:00Z", false), // Friday before
                ("2026-11-27T22:00:00Z", true),
                ("2026-11-28T03:59:00Z", true), // Saturday early, opened Friday
                ("2026-11-28T04:00:00Z", false),
                ("2026-11-28T22:30:00Z", false), // Saturday night: not a window day
                ("2026-11-27T03:00:00Z", false), // Friday early: opened Thursday, not allowed
            ],
        );
    }

    #[test]
    fn time_zones_shift_the_window() {
        // 02:00-06:00 in Zurich (UTC+1 in winter) is 01:00-05:00 UTC.
        let s = schedule(vec![weekly(&[], "02:00", "06:00", "Europe/Zurich")], vec![]);
        assert_eq!(s.at(ts("2026-11-28T01:30:00Z")), Some(span("2026-11-28T01:00:00Z", "2026-11-28T05:00:00Z")));
        assert_eq!(s.at(ts("2026-11-28T05:30:00Z")), Some(span("2026-11-29T01:00:00Z", "2026-11-29T05:00:00Z")));
    }

    #[test]
    fn the_next_window_is_on_the_next_allowed_day() {
        let s = schedule(vec![weekly(&[Weekday::Sat], "02:00", "06:00", "UTC")], vec![]);
        // Monday noon -> next Saturday 02:00; Saturday 01:00 -> one hour later; inside -> this one.
        assert_eq!(s.at(ts("2026-11-30T12:00:00Z")), Some(span("2026-12-05T02:00:00Z", "2026-12-05T06:00:00Z")));
        assert_eq!(s.at(ts("2026-11-28T01:00:00Z")), Some(span("2026-11-28T02:00:00Z", "2026-11-28T06:00:00Z")));
        assert_eq!(s.at(ts("2026-11-28T03:00:00Z")), Some(span("2026-11-28T02:00:00Z", "2026-11-28T06:00:00Z")));
    }

    /// Across the DST changes of 2026 in Berlin (29 March 02:00 -> 03:00, 25
    /// October 03:00 -> 02:00) and New York (8 March 02:00 -> 03:00, 1
    /// November 02:00 -> 01:00): (window, now, the span open or next).
    #[test]
    fn dst_changes_shorten_or_lengthen_that_night_and_never_open_twice() {
        let cases = [
            // Berlin, spring: 02:00 does not exist, the window opens at 03:00 CEST (01:00Z) and is 3 h long.
            (weekly(&[], "02:00", "06:00", "Europe/Berlin"), "2026-03-29T00:30:00Z", span("2026-03-29T01:00:00Z", "2026-03-29T04:00:00Z")),
            // The night before is 4 h in CET.
            (weekly(&[], "02:00", "06:00", "Europe/Berlin"), "2026-03-28T00:30:00Z", span("2026-03-28T01:00:00Z", "2026-03-28T05:00:00Z")),
            // Berlin, autumn: 02:00 first happens in CEST (00:00Z); 06:00 CET is 05:00Z: 5 h.
            (weekly(&[], "02:00", "06:00", "Europe/Berlin"), "2026-10-24T23:00:00Z", span("2026-10-25T00:00:00Z", "2026-10-25T05:00:00Z")),
            // An overnight window across the autumn change: 22:00 CEST to 04:00 CET.
            (
                weekly(&[Weekday::Sat], "22:00", "04:00", "Europe/Berlin"),
                "2026-10-24T12:00:00Z",
                span("2026-10-24T20:00:00Z", "2026-10-25T03:00:00Z"),
            ),
            // New York, spring: 02:30 is skipped; it resolves as far past the jump, 03:30 EDT (07:30Z).
            (
                weekly(&[], "01:30", "02:30", "America/New_York"),
                "2026-03-08T05:00:00Z",
                span("2026-03-08T06:30:00Z", "2026-03-08T07:30:00Z"),
            ),
            // New York, autumn: 01:00-01:30 happens twice; the window is the first (EDT) only.
            (
                weekly(&[], "01:00", "01:30", "America/New_York"),
                "2026-11-01T04:00:00Z",
                span("2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z"),
            ),
            // ...so in the repeated hour (EST) it is closed and the next opens the day after, in EST.
            (
                weekly(&[], "01:00", "01:30", "America/New_York"),
                "2026-11-01T06:10:00Z",
                span("2026-11-02T06:00:00Z", "2026-11-02T06:30:00Z"),
            ),
            // A monthly window on a DST day: the last Sunday of March 2027 is the 28th, the Berlin change.
            (
                monthly(WeekIndex::Last, Weekday::Sun, 0, 1, "01:00", "05:00", "Europe/Berlin"),
                "2027-03-01T00:00:00Z",
                span("2027-03-28T00:00:00Z", "2027-03-28T03:00:00Z"),
            ),
            // Patch Tuesday + 7 in New York across the autumn change: 10 November 2026 is the second Tuesday, the 17th is in EST.
            (
                monthly(WeekIndex::Second, Weekday::Tue, 7, 1, "02:00", "06:00", "America/New_York"),
                "2026-10-21T00:00:00Z",
                span("2026-11-17T07:00:00Z", "2026-11-17T11:00:00Z"),
            ),
        ];
        for (w, now, want) in cases {
            let s = schedule(vec![w.clone()], vec![]);
            assert_eq!(s.at(ts(now)), Some(want), "{w:?} at {now}");
        }
    }

    #[test]
    fn a_relative_monthly_window_opens_a_week_after_patch_tuesday() {
        // Patch Tuesday: 8 December 2026, 12 January 2027; + 7 days, 02:00-06:00 Berlin (CET, UTC+1).
        let s = schedule(vec![monthly(WeekIndex::Second, Weekday::Tue, 7, 1, "02:00", "06:00", "Europe/Berlin")], vec![]);
        assert_eq!(s.at(ts("2026-12-01T10:00:00Z")), Some(span("2026-12-15T01:00:00Z", "2026-12-15T05:00:00Z")));
        assert_eq!(s.at(ts("2026-12-15T05:00:00Z")), Some(span("2027-01-19T01:00:00Z", "2027-01-19T05:00:00Z")));
        assert_open(&s, &[("2026-12-15T03:00:00Z", true), ("2026-12-14T03:00:00Z", false), ("2026-12-16T03:00:00Z", false)]);
    }

    fn on_date(day_of_month: i32, duration_days: i32, start: &str, end: &str, tz: &str) -> MaintenanceWindow {
        MaintenanceWindow { absolute_monthly: Some(AbsoluteMonthly { day_of_month, duration_days }), ..weekly(&[], start, end, tz) }
    }

    #[test]
    fn an_absolute_monthly_window_opens_on_its_date_and_month_end_falls_on_the_last_day() {
        // The 25th, 22:00-02:00 in New York (EST, UTC-5): overnight into the 26th.
        let s = schedule(vec![on_date(25, 1, "22:00", "02:00", "America/New_York")], vec![]);
        assert_eq!(s.at(ts("2026-12-03T00:00:00Z")), Some(span("2026-12-26T03:00:00Z", "2026-12-26T07:00:00Z")));
        assert_eq!(s.at(ts("2026-12-26T07:00:00Z")), Some(span("2027-01-26T03:00:00Z", "2027-01-26T07:00:00Z")));
        // The 31st: the last day of every month, never a skipped month.
        let month_end = schedule(vec![on_date(31, 1, "02:00", "04:00", "UTC")], vec![]);
        let opens = |from: &str| month_end.at(ts(from)).map(|s| s.start.to_string());
        assert_eq!(opens("2027-01-31T05:00:00Z").as_deref(), Some("2027-02-28T02:00:00Z"));
        assert_eq!(opens("2028-02-01T00:00:00Z").as_deref(), Some("2028-02-29T02:00:00Z"), "a leap year");
        assert_eq!(opens("2027-04-01T00:00:00Z").as_deref(), Some("2027-04-30T02:00:00Z"));
        assert_eq!(opens("2027-05-01T00:00:00Z").as_deref(), Some("2027-05-31T02:00:00Z"));
        assert_open(&month_end, &[("2027-04-30T03:00:00Z", true), ("2027-04-29T03:00:00Z", false), ("2027-05-30T03:00:00Z", false)]);
        // Three days from the 30th run into the next month.
        let across = schedule(vec![on_date(30, 3, "02:00", "04:00", "UTC")], vec![]);
        assert_open(
            &across,
            &[
                ("2027-01-29T03:00:00Z", false),
                ("2027-01-30T03:00:00Z", true),
                ("2027-02-01T03:00:00Z", true),
                ("2027-02-02T03:00:00Z", false),
                ("2027-02-28T03:00:00Z", true),
                ("2027-03-02T03:00:00Z", true),
                ("2027-03-03T03:00:00Z", false),
            ],
        );
    }

    #[test]
    fn relative_monthly_offsets_and_durations_cross_month_ends() {
        // The last Friday of January 2027 is the 29th; + 2 days for 3 days: 31 January, 1 and 2 February.
        let s = schedule(vec![monthly(WeekIndex::Last, Weekday::Fri, 2, 3, "02:00", "04:00", "UTC")], vec![]);
        assert_open(
            &s,
            &[
                ("2027-01-30T03:00:00Z", false),
                ("2027-01-31T03:00:00Z", true),
                ("2027-02-01T03:00:00Z", true),
                ("2027-02-02T03:00:00Z", true),
                ("2027-02-03T03:00:00Z", false),
            ],
        );
        // A negative offset: the Saturday before the first Monday (7 December 2026 -> the 5th; 1 February 2027 -> 30 January).
        let before = schedule(vec![monthly(WeekIndex::First, Weekday::Mon, -2, 1, "02:00", "04:00", "UTC")], vec![]);
        assert_eq!(before.at(ts("2026-12-01T00:00:00Z")), Some(span("2026-12-05T02:00:00Z", "2026-12-05T04:00:00Z")));
        assert_eq!(before.at(ts("2027-01-10T00:00:00Z")), Some(span("2027-01-30T02:00:00Z", "2027-01-30T04:00:00Z")));
    }

    #[test]
    fn any_window_open_is_enough_and_touching_windows_are_one_span() {
        let s = schedule(
            vec![
                weekly(&[Weekday::Sat], "02:00", "06:00", "UTC"),
                weekly(&[Weekday::Sat], "05:00", "08:00", "UTC"),
                weekly(&[Weekday::Wed], "20:00", "21:00", "UTC"),
            ],
            vec![],
        );
        assert_eq!(s.at(ts("2026-11-28T03:00:00Z")), Some(span("2026-11-28T02:00:00Z", "2026-11-28T08:00:00Z")));
        // Monday: the Wednesday window comes before the Saturday ones.
        assert_eq!(s.at(ts("2026-11-30T12:00:00Z")), Some(span("2026-12-02T20:00:00Z", "2026-12-02T21:00:00Z")));
    }

    #[test]
    fn not_allowed_dates_close_windows_for_whole_local_days() {
        // Every night 02:00-06:00 Berlin, but not 24 December 2026 to 1 January 2027 (Berlin days).
        let s = schedule(vec![weekly(&[], "02:00", "06:00", "Europe/Berlin")], vec![dates("2026-12-24", "2027-01-01", "Europe/Berlin")]);
        assert_open(
            &s,
            &[
                ("2026-12-23T02:00:00Z", true),
                ("2026-12-24T02:00:00Z", false),
                ("2027-01-01T02:00:00Z", false),
                ("2027-01-02T02:00:00Z", true),
            ],
        );
        assert_eq!(s.at(ts("2026-12-23T12:00:00Z")), Some(span("2027-01-02T01:00:00Z", "2027-01-02T05:00:00Z")));
        // A range ending mid-window opens the rest of it: midnight Berlin on the 2nd is 23:00Z on the 1st.
        let late = schedule(vec![weekly(&[], "22:00", "06:00", "UTC")], vec![dates("2026-12-24", "2027-01-01", "Europe/Berlin")]);
        assert_eq!(late.at(ts("2027-01-01T12:00:00Z")), Some(span("2027-01-01T23:00:00Z", "2027-01-02T06:00:00Z")));
    }

    #[test]
    fn not_allowed_dates_alone_leave_every_other_day_open() {
        let s = schedule(vec![], vec![dates("2026-12-24", "2026-12-26", "UTC")]);
        assert!(is_open(&s, "2026-12-23T23:59:59Z"));
        let next = s.at(ts("2026-12-25T12:00:00Z")).unwrap();
        assert_eq!((next.known_start(), next.known_end()), (Some(ts("2026-12-27T00:00:00Z")), None));
    }

    #[test]
    fn a_rollout_without_windows_or_dates_has_no_schedule() {
        assert!(Schedule::parse(&RolloutSpec::default()).unwrap().is_none());
    }

    #[test]
    fn a_window_that_never_opens_within_the_horizon_is_none() {
        // The only window falls inside a freeze of more than a year.
        let s = schedule(
            vec![monthly(WeekIndex::Second, Weekday::Tue, 0, 1, "02:00", "06:00", "UTC")],
            vec![dates("2026-12-01", "2028-12-31", "UTC")],
        );
        assert_eq!(s.at(ts("2026-12-01T00:00:00Z")), None);
    }

    #[test]
    fn unknown_zones_bad_times_and_bad_dates_are_errors_not_panics() {
        let parse = |windows: Vec<MaintenanceWindow>, not_allowed: Vec<DateRange>| {
            Schedule::parse(&RolloutSpec { maintenance_windows: windows, not_allowed_dates: not_allowed, ..RolloutSpec::default() })
                .map(|_| ())
        };
        assert_eq!(parse(vec![weekly(&[], "02:00", "06:00", "Mars/Olympus")], vec![]), Err(WindowError::TimeZone("Mars/Olympus".into())));
        for t in ["2:00", "24:00", "12:60", "ab:cd", "", "12:00:00"] {
            assert_eq!(parse(vec![weekly(&[], t, "06:00", "UTC")], vec![]), Err(WindowError::Time(t.into())), "{t:?}");
        }
        assert_eq!(parse(vec![], vec![dates("2026-02-30", "2026-03-01", "UTC")]), Err(WindowError::Date("2026-02-30".into())));
        assert_eq!(
            parse(vec![], vec![dates("2026-02-01", "2026-03-01", "Nowhere/Land")]),
            Err(WindowError::TimeZone("Nowhere/Land".into()))
        );
    }
}
