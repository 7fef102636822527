//! Ages the way kubectl prints them (`k8s.io/apimachinery/pkg/util/duration.HumanDuration`):
//! `45s`, `5m30s`, `42m`, `2h5m`, `20h`, `3d4h`, `30d`, `2y100d`, `9y`.

use std::time::Duration;

use jiff::Timestamp;

/// A duration as kubectl's AGE column shows it.
pub fn human(d: Duration) -> String {
    let seconds = d.as_secs();
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let years = hours / 24 / 365;
        return match (hours / 24) % 365 {
            0 => format!("{years}y"),
            d => format!("{years}y{d}d"),
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// How long ago `t` was; a time in the future (clock skew) reads as `0s`, like kubectl.
pub fn since(t: Timestamp, now: Timestamp) -> String {
    human(now.duration_since(t).try_into().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_kubectl() {
        let cases = [
            (0, "0s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (5 * 60 + 30, "5m30s"),
            (9 * 60 + 59, "9m59s"),
            (10 * 60 + 30, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (2 * 3600 + 5 * 60 + 10, "125m"),
            (7 * 3600 + 59 * 60, "7h59m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (8 * 86400, "8d"),
            (729 * 86400, "729d"),
            (2 * 365 * 86400 + 100 * 86400, "2y100d"),
            (3 * 365 * 86400, "3y"),
            (9 * 365 * 86400, "9y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human(Duration::from_secs(secs)), want, "{secs}s");
        }
    }

    #[test]
    fn a_time_in_the_future_is_zero_seconds_ago() {
        let now: Timestamp = "2026-12-01T12:00:00Z".parse().unwrap();
        assert_eq!(since("2026-12-01T12:00:30Z".parse().unwrap(), now), "0s");
        assert_eq!(since("2026-12-01T11:55:00Z".parse().unwrap(), now), "5m");
        assert_eq!(since("2026-12-01T10:00:00Z".parse().unwrap(), now), "120m");
    }
}
