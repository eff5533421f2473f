//! Durations on the command line: a number and a unit, `500ms`, `10s`, `5m`, `1h`, `7d`, within
//! each flag's range.

use std::time::Duration;

/// Parses `<number><unit>` with unit `ms`, `s`, `m`, `h` or `d`; the number may have a
/// fraction.
pub(crate) fn parse(raw: &str) -> Result<Duration, String> {
    let split = raw
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{raw:?} has no unit: write e.g. 500ms, 10s, 5m or 1h"))?;
    let (number, unit) = raw.split_at(split);
    let scale = match unit {
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return Err(format!("{raw:?}: the unit must be ms, s, m, h or d")),
    };
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{raw:?}: {number:?} is not a number"))?;
    Duration::try_from_secs_f64(number * scale).map_err(|_| format!("{raw:?} is out of range"))
}

/// A parser of durations from `min` to `max` (both written as [`parse`] reads them), for a
/// flag's `value_parser`.
///
/// # Panics
///
/// If `min` or `max` does not parse: they are the program's own constants.
pub(crate) fn between(
    min: &'static str,
    max: &'static str,
) -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync + 'static {
    let bound = |raw| parse(raw).unwrap_or_else(|error| panic!("a flag's bound: {error}"));
    let (low, high) = (bound(min), bound(max));
    move |raw| {
        let value = parse(raw)?;
        if (low..=high).contains(&value) {
            Ok(value)
        } else {
            Err(format!("{raw:?} is outside {min}..={max}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn units() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("7d"), Ok(Duration::from_secs(7 * 86400)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn refusals() {
        for raw in [
            "", "10", "s", "10 s", "10sec", "-1s", "1e3s", "1..2s", "1e300h",
        ] {
            assert!(parse(raw).is_err(), "{raw:?}");
        }
    }

    #[test]
    fn ranges() {
        let parse = between("1s", "1h");
        assert_eq!(parse("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse("60m"), Ok(Duration::from_secs(3600)));
        assert_eq!(
            parse("999ms"),
            Err("\"999ms\" is outside 1s..=1h".to_owned())
        );
        assert!(parse("1.0001h").is_err());
        // Far beyond any range, and beyond what a `Duration` holds: errors, never panics.
        assert!(parse("584942417355d").is_err());
        assert!(parse("99999999999999999999999d").is_err());
    }

    proptest! {
        #[test]
        fn any_text_parses_or_is_refused(raw in "\\PC{0,40}") {
            let _ = parse(&raw);
            if let Ok(value) = between("0s", "7d")(&raw) {
                prop_assert!(value <= Duration::from_secs(7 * 86400));
            }
        }

        #[test]
        fn any_number_with_a_unit(number in "[0-9.]{1,30}", unit in "(ms|s|m|h|d)") {
            let _ = between("1ms", "1h")(&format!("{number}{unit}"));
        }
    }
}
