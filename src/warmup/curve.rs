//! The warm-up curve: which rate is in force for a given number of stored permits.

use std::fmt;
use std::time::Duration;

use super::smooth::SmoothCurve;
use crate::ConfigError;

/// The warm-up curve a [`WarmUp`](super::WarmUp) follows: the rate in force for each number of
/// stored permits.
///
/// Permits accumulate while the service is idle and drain while it is busy. Between the
/// *warning* level `W` and the *maximum* `M` the rate falls linearly in interval space from the
/// full rate `c` to the cold rate `c / cold_factor`; at or below `W` the full rate applies:
///
/// ```text
/// qps_limit(x) = 1 / ((x − W) · slope + 1 / c)   for x ≥ W      (slope = (f − 1) / c / (M − W))
///              = c                               for x < W
/// ```
///
/// The constants are Guava's, continuous: `W = P·c / 2`, `M = W + 2·P·c / (1 + f)` for a
/// warm-up period `P` and cold factor `f`, and the limit is the exact reciprocal of the
/// spacing between requests.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::warmup::WarmUp;
///
/// let curve = WarmUp::builder(10.0).warm_up_period(Duration::from_secs(10)).build()?.curve();
/// assert_eq!(curve.warning_tokens(), 50.0);
/// assert_eq!(curve.max_tokens(), 100.0);
/// assert!((curve.qps_limit(100.0) - 10.0 / 3.0).abs() < 1e-9); // cold
/// assert_eq!(curve.qps_limit(50.0), 10.0); // warm
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[derive(Clone, Copy, PartialEq)]
pub struct Curve {
    count: f64,
    /// Seconds per request per permit above `W`.
    slope: f64,
    warning_tokens: f64,
    max_tokens: f64,
}

impl Curve {
    /// The public view of the engine's `curve`.
    pub(crate) fn of(curve: &SmoothCurve) -> Curve {
        Curve {
            count: curve.rate(),
            slope: curve.slope() / 1e9,
            warning_tokens: curve.threshold(),
            max_tokens: curve.max(),
        }
    }

    /// `W`: at or below this many stored permits the full rate applies.
    pub fn warning_tokens(&self) -> f64 {
        self.warning_tokens
    }

    /// `M`: the most permits the bucket can store; at `M` the cold rate applies.
    pub fn max_tokens(&self) -> f64 {
        self.max_tokens
    }

    /// The slope of the curve in interval space (seconds per request per permit above `W`).
    pub fn slope(&self) -> f64 {
        self.slope
    }

    /// The full (warm) rate in permits per second.
    pub fn permits_per_second(&self) -> f64 {
        self.count
    }

    /// The rate in force with `stored_tokens` stored, in requests per second: the reciprocal
    /// of the spacing between requests there.
    ///
    /// Values outside `0..=M` are not clamped; they extend the curve's formula.
    pub fn qps_limit(&self, stored_tokens: f64) -> f64 {
        let warning = self.warning_tokens;
        if stored_tokens >= warning {
            ((stored_tokens - warning) * self.slope + 1.0 / self.count).recip()
        } else {
            self.count
        }
    }
}

/// Shows what the accessors report.
impl fmt::Debug for Curve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Curve")
            .field("permits_per_second", &self.count)
            .field("cold_limit", &self.qps_limit(self.max_tokens))
            .field("warning_tokens", &self.warning_tokens)
            .field("max_tokens", &self.max_tokens)
            .field("slope", &self.slope)
            .finish()
    }
}

/// The engine's curve (Guava's constants) for `count` permits per second, a
/// `period` warm-up and `cold_factor`, after validating them: the rate must be positive and
/// finite, the period non-zero (fractions of a second are fine) and the factor a finite number
/// at least 1 (1 is a flat limiter; fractions are fine, as in Guava).
pub(crate) fn smooth_curve(
    count: f64,
    period: Duration,
    cold_factor: f64,
) -> Result<SmoothCurve, ConfigError> {
    positive_rate(count)?;
    if !(cold_factor >= 1.0 && cold_factor.is_finite()) {
        return Err(ConfigError::ColdFactorTooSmall {
            cold_factor,
            min: 1.0,
        });
    }
    if period.is_zero() {
        return Err(ConfigError::ZeroWarmUpPeriod);
    }
    let smooth = SmoothCurve::new(count, period.as_nanos() as f64, cold_factor);
    // A rate so extreme that the spacing or the bucket size leaves the range of a double
    // (around 1e-299 or 1e298 per second with a 10 s period) cannot be priced.
    let representable = [smooth.threshold(), smooth.max(), smooth.slope()]
        .iter()
        .all(|value| value.is_finite())
        && smooth.max() > 0.0;
    if !representable {
        return Err(ConfigError::InvalidRate {
            permits_per_second: count,
        });
    }
    Ok(smooth)
}

/// Every warm-up curve's first check: a rate must be a finite number greater than zero.
pub(crate) fn positive_rate(count: f64) -> Result<(), ConfigError> {
    if count.is_finite() && count > 0.0 {
        Ok(())
    } else {
        Err(ConfigError::InvalidRate {
            permits_per_second: count,
        })
    }
}
