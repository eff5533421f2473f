//! Durations on the command line: a number and a unit, `500ms`, `10s`, `5m`, `1h`.

use std::time::Duration;

/// Parses `<number><unit>` with unit `ms`, `s`, `m` or `h`; the number may have a fraction.
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
        _ => return Err(format!("{raw:?}: the unit must be ms, s, m or h")),
    };
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{raw:?}: {number:?} is not a number"))?;
    Duration::try_from_secs_f64(number * scale).map_err(|_| format!("{raw:?} is out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
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
}
