//! Property tests: the parsers that read what nodes and users write never
//! panic on garbage, and accept exactly what they print.

use proptest::prelude::*;
use winpool::api::{AbsoluteMonthly, DateRange, MaintenanceWindow, RelativeMonthly, RolloutSpec, WeekIndex, Weekday};
use winpool::decision::rollout::parse_duration;
use winpool::decision::versions::{RuntimeVersion, Version, WindowsBuild};
use winpool::decision::window::Schedule;

fn schedule(
    windows: Vec<MaintenanceWindow>,
    not_allowed_dates: Vec<DateRange>,
) -> Result<Option<Schedule>, winpool::decision::window::WindowError> {
    Schedule::parse(&RolloutSpec { maintenance_windows: windows, not_allowed_dates, ..RolloutSpec::default() })
}

fn weekly(start: String, end: String, time_zone: String) -> MaintenanceWindow {
    MaintenanceWindow { days: vec![], relative_monthly: None, absolute_monthly: None, start, end, time_zone }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn garbage_never_panics(s in ".{0,40}") {
        let _ = s.parse::<WindowsBuild>();
        let _ = s.parse::<Version>();
        let _ = s.parse::<RuntimeVersion>();
        let _ = parse_duration(&s);
        let dates = DateRange { start: s.clone(), end: s.clone(), time_zone: "UTC".into() };
        if let Ok(Some(w)) = schedule(vec![weekly(s.clone(), "06:00".into(), s.clone())], vec![dates]) {
            let _ = w.at(jiff::Timestamp::now());
        }
    }

    #[test]
    fn near_misses_never_panic(s in "[0-9.v:+/-]{0,24}") {
        let _ = s.parse::<WindowsBuild>();
        let _ = s.parse::<Version>();
        let _ = format!("containerd://{s}").parse::<RuntimeVersion>();
    }

    #[test]
    fn windows_builds_round_trip(build in 0u32..100_000, rev in 0u32..1_000_000) {
        let s = format!("10.0.{build}.{rev}");
        let b: WindowsBuild = s.parse().unwrap();
        prop_assert_eq!(b.to_string(), s);
        prop_assert!(b.satisfies(&b));
    }

    #[test]
    fn satisfies_is_ordering_by_revision_within_a_release(build in 10_000u32..30_000, a in 0u32..100_000, b in 0u32..100_000) {
        let x: WindowsBuild = format!("10.0.{build}.{a}").parse().unwrap();
        let y: WindowsBuild = format!("10.0.{build}.{b}").parse().unwrap();
        prop_assert_eq!(x.satisfies(&y), a >= b);
    }

    #[test]
    fn versions_round_trip_and_order(a in 0u64..1000, b in 0u64..1000, c in 0u64..1000, d in 0u64..1000) {
        let v: Version = format!("v{a}.{b}.{c}").parse().unwrap();
        prop_assert_eq!(v.to_string(), format!("{a}.{b}.{c}"));
        let w: Version = format!("{a}.{b}.{d}").parse().unwrap();
        prop_assert_eq!(v.cmp(&w), c.cmp(&d));
    }

    #[test]
    fn go_durations_parse(h in 0u64..100, m in 0u64..60, s in 0u64..60) {
        let d = parse_duration(&format!("{h}h{m}m{s}s")).unwrap();
        prop_assert_eq!(d.as_secs(), h * 3600 + m * 60 + s);
    }

    #[test]
    fn window_open_matches_the_clock(start in 0i8..24, len in 1i8..23, minute_of_day in 0i64..1440) {
        let end = (start + len) % 24;
        let w = schedule(vec![weekly(format!("{start:02}:00"), format!("{end:02}:00"), "UTC".into())], vec![]).unwrap().unwrap();
        let t: jiff::Timestamp = "2026-11-29T00:00:00Z".parse().unwrap();
        let now = t + jiff::SignedDuration::from_mins(minute_of_day);
        let hour = (minute_of_day / 60) as i8;
        let inside = if start < end { hour >= start && hour < end } else { hour >= start || hour < end };
        let span = w.at(now).unwrap();
        prop_assert_eq!(span.is_open(now), inside);
        prop_assert!(span.end > now);
    }

    /// Any monthly window in any of these zones, any time in two years: the
    /// span found is open or ahead, and half-way to it nothing else opens
    /// (asked again from there, the same span comes back).
    #[test]
    fn the_next_monthly_window_is_the_first_one(
        week in 0usize..5, day in 0usize..7, offset in -27i32..=27, days in 1i32..=28,
        start in 0i8..24, len in 1i8..23, zone in 0usize..3, minutes in 0i64..(2 * 366 * 1440),
    ) {
        let week_index = [WeekIndex::First, WeekIndex::Second, WeekIndex::Third, WeekIndex::Fourth, WeekIndex::Last][week];
        let day_of_week = [Weekday::Mon, Weekday::Tue, Weekday::Wed, Weekday::Thu, Weekday::Fri, Weekday::Sat, Weekday::Sun][day];
        let tz = ["Europe/Berlin", "America/New_York", "Australia/Sydney"][zone];
        let w = MaintenanceWindow {
            relative_monthly: Some(RelativeMonthly { week_index, day_of_week, offset_days: offset, duration_days: days }),
            ..weekly(format!("{start:02}:00"), format!("{:02}:30", (start + len) % 24), tz.into())
        };
        let s = schedule(vec![w], vec![]).unwrap().unwrap();
        let now = "2026-01-01T00:00:00Z".parse::<jiff::Timestamp>().unwrap() + jiff::SignedDuration::from_mins(minutes);
        let span = s.at(now).expect("a monthly window opens within a year");
        prop_assert!(span.end > now && span.start < span.end);
        if span.start > now {
            let half = now + jiff::SignedDuration::from_secs((span.start.as_second() - now.as_second()) / 2);
            prop_assert_eq!(s.at(half), Some(span));
        }
    }

    /// Any date-of-month window, any time in two years: one opens within a
    /// month (a date past a month's end falls on its last day, so no month is
    /// skipped), and half-way to it nothing else opens.
    #[test]
    fn a_date_of_month_window_opens_every_month(
        date in 1i32..=31, days in 1i32..=28, start in 0i8..24, len in 1i8..23, zone in 0usize..3, minutes in 0i64..(2 * 366 * 1440),
    ) {
        let tz = ["Europe/Berlin", "America/New_York", "Australia/Sydney"][zone];
        let w = MaintenanceWindow {
            absolute_monthly: Some(AbsoluteMonthly { day_of_month: date, duration_days: days }),
            ..weekly(format!("{start:02}:00"), format!("{:02}:30", (start + len) % 24), tz.into())
        };
        let s = schedule(vec![w], vec![]).unwrap().unwrap();
        let now = "2026-01-01T00:00:00Z".parse::<jiff::Timestamp>().unwrap() + jiff::SignedDuration::from_mins(minutes);
        let span = s.at(now).expect("a monthly window opens within a year");
        prop_assert!(span.end > now && span.start < span.end);
        prop_assert!(span.start < now + jiff::SignedDuration::from_hours(32 * 24), "opens within a month: {:?} from {}", span, now);
        if span.start > now {
            let half = now + jiff::SignedDuration::from_secs((span.start.as_second() - now.as_second()) / 2);
            prop_assert_eq!(s.at(half), Some(span));
        }
    }
}
