//! Instants on the command line and in reports: Unix seconds or RFC 3339, shown in UTC.

use std::fmt;

use crate::excerpt::excerpt;
use crate::tools::calendar::{civil_from_days, days_from_civil, days_in_month};

/// 9999-12-31T23:59:59Z: the last second RFC 3339 can write.
const LAST_SECOND: f64 = 253_402_300_799.0;

/// A time that is neither Unix seconds nor RFC 3339.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeError {
    raw: String,
}

impl fmt::Display for TimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "\"{}\" is not a time from 1970 to 9999: write Unix seconds (1700000000) or \
             RFC 3339 (2023-11-14T22:13:20Z, 2023-11-14T23:13:20+01:00)",
            excerpt(&self.raw)
        )
    }
}

impl std::error::Error for TimeError {}

/// Parses Unix seconds (`1700000000`, `1700000000.5`) or an RFC 3339 date-time with `Z` or a
/// `±HH:MM` offset and optional fractional seconds, into Unix seconds.
///
/// ```
/// use admit_scaler::tools::offline::parse_time;
///
/// assert_eq!(parse_time("1700000000")?, 1_700_000_000.0);
/// assert_eq!(parse_time("2023-11-14T22:13:20Z")?, 1_700_000_000.0);
/// assert_eq!(parse_time("2023-11-14T23:13:20.5+01:00")?, 1_700_000_000.5);
/// assert!(parse_time("yesterday").is_err());
/// # Ok::<(), admit_scaler::tools::offline::TimeError>(())
/// ```
///
/// # Errors
///
/// [`TimeError`] for anything else, including impossible dates and times before 1970 or
/// after 9999.
pub fn parse_time(raw: &str) -> Result<f64, TimeError> {
    let error = || TimeError {
        raw: raw.to_owned(),
    };
    let seconds = if !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        raw.parse::<f64>().ok()
    } else {
        rfc3339(raw)
    };
    seconds
        .filter(|seconds| (0.0..=LAST_SECOND).contains(seconds))
        .ok_or_else(error)
}

fn rfc3339(raw: &str) -> Option<f64> {
    let bytes = raw.as_bytes();
    if bytes.len() < 20 || !raw.is_ascii() {
        return None;
    }
    let number = |range: std::ops::Range<usize>| -> Option<u64> {
        let text = raw.get(range)?;
        text.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| text.parse().ok())?
    };
    let separators = [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')];
    if separators.iter().any(|&(at, c)| bytes[at] != c) || !matches!(bytes[10], b'T' | b't' | b' ')
    {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let mut rest = &raw[19..];
    let mut fraction = 0.0;
    if let Some(digits) = rest.strip_prefix('.') {
        let end = digits
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(digits.len());
        if end == 0 {
            return None;
        }
        fraction = format!("0.{}", &digits[..end]).parse().ok()?;
        rest = &digits[end..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            if rest.len() != 6 || rest.as_bytes()[3] != b':' {
                return None;
            }
            let hours = rest[1..3].parse::<i64>().ok().filter(|h| *h <= 23)?;
            let minutes = rest[4..6].parse::<i64>().ok().filter(|m| *m <= 59)?;
            sign * (hours * 3600 + minutes * 60)
        }
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + (hour * 3600 + minute * 60 + second) as i64 - offset;
    (seconds >= 0).then_some(seconds as f64 + fraction)
}

/// Unix seconds as RFC 3339 in UTC, to the second (fractions truncated).
///
/// ```
/// assert_eq!(admit_scaler::tools::offline::format_time(1_700_000_000.9), "2023-11-14T22:13:20Z");
/// ```
pub fn format_time(seconds: f64) -> String {
    let whole = if seconds.is_finite() {
        seconds.floor() as i64
    } else {
        0
    };
    let (days, second_of_day) = (whole.div_euclid(86_400), whole.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        second_of_day / 3600,
        second_of_day % 3600 / 60,
        second_of_day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_over_the_calendar() {
        // Every day from 1970 to 2100 at a fixed second of day, leap days included.
        let mut seconds = 45_296.0;
        while seconds < 4_102_444_800.0 {
            let text = format_time(seconds);
            assert_eq!(parse_time(&text), Ok(seconds), "{text}");
            seconds += 86_400.0;
        }
        assert_eq!(format_time(951_782_400.0), "2000-02-29T00:00:00Z");
        assert_eq!(parse_time("2024-02-29T12:00:00Z"), Ok(1_709_208_000.0));
    }

    #[test]
    fn offsets_and_fractions() {
        assert_eq!(parse_time("2023-11-14T17:13:20-05:00"), Ok(1_700_000_000.0));
        assert_eq!(parse_time("2023-11-14t22:13:20.25z"), Ok(1_700_000_000.25));
        assert_eq!(parse_time("2023-11-14 22:13:20Z"), Ok(1_700_000_000.0));
    }

    #[test]
    fn refusals() {
        for raw in [
            "",
            ".",
            "now",
            "-5",
            "1e9",
            "2023-11-14",
            "2023-11-14T22:13:20",
            "2023-02-29T00:00:00Z",
            "2023-13-01T00:00:00Z",
            "2023-11-14T24:00:00Z",
            "2023-11-14T22:13:60Z",
            "2023-11-14T22:13:20.Z",
            "2023-11-14T22:13:20+1:00",
            "1969-12-31T23:59:59Z",
            "2023-11-14T22:13:20Zjunk",
            "２023-11-14T22:13:20Z",
            "253402300800",
            "99999999999999999999999",
        ] {
            assert!(parse_time(raw).is_err(), "{raw:?}");
        }
        assert_eq!(parse_time("9999-12-31T23:59:59Z"), Ok(LAST_SECOND));
        assert_eq!(format_time(LAST_SECOND), "9999-12-31T23:59:59Z");
    }

    mod arbitrary {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn any_text_is_a_time_or_refused(raw in "\\PC{0,40}") {
                if let Ok(seconds) = parse_time(&raw) {
                    prop_assert!((0.0..=LAST_SECOND).contains(&seconds));
                } else {
                    prop_assert!(parse_time(&raw).unwrap_err().to_string().len() < 1024);
                }
            }

            #[test]
            fn dates_round_trip(seconds in 0u64..=LAST_SECOND as u64) {
                let text = format_time(seconds as f64);
                prop_assert_eq!(parse_time(&text), Ok(seconds as f64));
            }

            #[test]
            fn date_shaped_text(raw in "[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{0,12})?(Z|[+-][0-9]{2}:[0-9]{2})") {
                let _ = parse_time(&raw);
            }
        }
    }
}
