//! Property tests: the parsers that read what nodes and users write never
//! panic on garbage, and accept exactly what they print.

use proptest::prelude::*;
use winpool::api::MaintenanceWindow;
use winpool::rollout::parse_duration;
use winpool::versions::{RuntimeVersion, Version, WindowsBuild};
use winpool::window::Window;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn garbage_never_panics(s in ".{0,40}") {
        let _ = s.parse::<WindowsBuild>();
        let _ = s.parse::<Version>();
        let _ = s.parse::<RuntimeVersion>();
        let _ = parse_duration(&s);
        let w = MaintenanceWindow { days: vec![], start: s.clone(), end: "06:00".into(), time_zone: s.clone() };
        if let Ok(w) = Window::parse(&w) {
            let _ = w.is_open(jiff::Timestamp::now());
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
        let w = Window::parse(&MaintenanceWindow {
            days: vec![],
            start: format!("{start:02}:00"),
            end: format!("{end:02}:00"),
            time_zone: "UTC".into(),
        }).unwrap();
        let t: jiff::Timestamp = "2026-11-29T00:00:00Z".parse().unwrap();
        let now = t + jiff::SignedDuration::from_mins(minute_of_day);
        let hour = (minute_of_day / 60) as i8;
        let inside = if start < end { hour >= start && hour < end } else { hour >= start || hour < end };
        prop_assert_eq!(w.is_open(now), inside);
        prop_assert!(w.next_open(now) >= now);
    }
}
