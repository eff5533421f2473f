//! Durations on the command line: a number and a unit, `500ms`, `10s`, `5m`.

use std::time::Duration;

/// Parses `<number><unit>` with unit `ms`, `s` or `m`; the number may have a fraction.
///
/// # Errors
///
/// A message naming the text, for clap.
pub fn parse(raw: &str) -> Result<Duration, String> {
    let split = raw
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{raw:?} has no unit: write e.g. 500ms, 10s or 5m"))?;
    let (number, unit) = raw.split_at(split);
    let scale = match unit {
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        _ => return Err(format!("{raw:?}: the unit must be ms, s or m")),
    };
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{raw:?}: {number:?} is not a number"))?;
    Duration::try_from_secs_f64(number * scale)
        .ok()
        .filter(|duration| *duration <= Duration::from_secs(86_400))
        .ok_or_else(|| format!("{raw:?} is out of range (at most a day)"))
}

/// [`parse`], refusing zero: for durations something is divided by or waits on.
///
/// # Errors
///
/// As [`parse`], and a message for zero.
pub fn parse_positive(raw: &str) -> Result<Duration, String> {
    parse(raw).and_then(|duration| {
        if duration.is_zero() {
            Err(format!("{raw:?} must be more than zero"))
        } else {
            Ok(duration)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_refusals() {
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        for raw in ["", "5", "5h", "-1s", "1e9s", "2d"] {
            assert!(parse(raw).is_err(), "{raw:?}");
        }
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert!(parse_positive("0ms").is_err());
        assert_eq!(parse_positive("1ms"), Ok(Duration::from_millis(1)));
    }
}
