//! The warm-up curve: which rate is in force for a given number of stored tokens.

use std::fmt;
use std::time::Duration;

use super::smooth::SmoothCurve;
use crate::ConfigError;

/// Largest count one half-second window can hold (30 bits of the packed window word).
pub(crate) const MAX_WINDOW_COUNT: u64 = (1 << 30) - 1;

/// The constants of a warm-up curve and the rate it allows at each token count.
///
/// Tokens accumulate while the service is idle and drain while it is busy. Between the
/// *warning* level `W` and the *maximum* `M` the limit falls linearly in interval space from the
/// full rate `c` to the cold rate `c / cold_factor`; at or below `W` the full rate applies:
///
/// ```text
/// qps_limit(x) = 1 / ((x − W) · slope + 1 / c)   for x ≥ W      (slope = (f − 1) / c / (M − W))
///              = c                               for x < W
/// ```
///
/// For [`Profile::SentinelExact`](super::Profile::SentinelExact) the constants are Sentinel's,
/// including Java's integer truncations:
/// `W = (int)(P·c) / (f − 1)` (integer division), `M = W + (int)(2·P·c / (1 + f))`, and every
/// limit above `W` is widened by one ulp (`Math.nextUp`) so that rounding cannot turn an exact
/// boundary into a rejection.
///
/// For [`Profile::Smooth`](super::Profile::Smooth) they are Guava's, continuous:
/// `W = P·c / 2`, `M = W + 2·P·c / (1 + f)` (the same as Sentinel's at `f = 3`, without the
/// truncations), and the limit is the exact reciprocal of the spacing between requests.
///
/// # Example
///
/// ```
/// use admit::warmup::{Profile, WarmUp};
///
/// let curve = WarmUp::builder(10.0).profile(Profile::SentinelExact).build()?.curve();
/// assert_eq!(curve.warning_tokens(), 50.0);
/// assert_eq!(curve.max_tokens(), 100.0);
/// assert_eq!(curve.qps_limit(100.0), 3.3333333333333335); // cold: 10 / 3
/// assert_eq!(curve.qps_limit(50.0), 10.000000000000002); // warm: 10, widened by one ulp
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[derive(Clone, Copy, PartialEq)]
pub struct Curve {
    count: f64,
    /// `1.0 / count`, which Java recomputes for every threshold (the same value every time).
    inverse_count: f64,
    warning: u32,
    max: u32,
    slope: f64,
    /// Sentinel refills above `W` only while the previous second passed fewer than
    /// `(int)count / coldFactor` requests.
    refill_gate: u64,
    /// The largest acquire that can ever pass: the floor of the highest limit on the curve
    /// (Sentinel); `u32::MAX` for the smooth profile, where any acquire passes given time.
    capacity: u32,
    /// `W` and `M` as the public accessors report them (fractional for the smooth profile).
    warning_tokens: f64,
    max_tokens: f64,
    /// Whether limits above `W` are widened by one ulp, as Sentinel's `Math.nextUp`.
    widened: bool,
}

impl Curve {
    /// Sentinel's constants for `count` permits per second, a `period` warm-up and `cold_factor`,
    /// after validating that Sentinel's arithmetic stays exact and the limiter can never stall.
    pub(crate) fn sentinel(
        count: f64,
        period: Duration,
        cold_factor: u32,
    ) -> Result<Curve, ConfigError> {
        positive_rate(count)?;
        // Every limit's floor, the most a window can ever count, must fit a window's counter.
        let max_rate = (MAX_WINDOW_COUNT - 1) as f64;
        if count > max_rate {
            return Err(ConfigError::RateTooHigh {
                permits_per_second: count,
                max: max_rate,
            });
        }
        if cold_factor < 2 {
            return Err(ConfigError::ColdFactorTooSmall {
                cold_factor,
                min: 2,
            });
        }
        if period.is_zero() {
            return Err(ConfigError::ZeroWarmUpPeriod);
        }
        if period.subsec_nanos() != 0 {
            return Err(ConfigError::FractionalWarmUpPeriod {
                warm_up_period: period,
            });
        }
        let cold_rate = count / f64::from(cold_factor);
        if cold_rate < 1.0 {
            return Err(ConfigError::ColdRateBelowOne {
                permits_per_second: count,
                cold_factor,
                cold_limit: cold_rate,
            });
        }
        // Java computes in `int`: `2 * P` would wrap, and `(int)(P * c)` would saturate, which
        // would silently build a different curve than the one configured.
        let overflow = ConfigError::TokenOverflow {
            permits_per_second: count,
            warm_up_period: period,
        };
        let int_max = i64::from(i32::MAX);
        let period_secs = period.as_secs();
        if period_secs > (int_max / 2) as u64 {
            return Err(overflow);
        }
        let period_secs = period_secs as i64;
        let p = period_secs as f64;
        if p * count > int_max as f64 {
            return Err(overflow);
        }
        let f = i64::from(cold_factor);
        // With `f ≤ count < 2^30` and `P · count < 2^31`, every `(int)` cast below is exact
        // truncation; only the sum `M` can still leave the `int` range.
        let warning = i64::from((p * count) as i32) / (f - 1);
        let max = warning + i64::from(((2 * period_secs) as f64 * count / (1.0 + f as f64)) as i32);
        if max > int_max {
            return Err(overflow);
        }
        let slope = (f as f64 - 1.0) / count / (max - warning) as f64;
        let refill_gate = (i64::from(count as i32) / f) as u64;

        let mut curve = Curve {
            count,
            inverse_count: 1.0 / count,
            warning: warning as u32,
            max: max as u32,
            slope,
            refill_gate,
            capacity: 0,
            warning_tokens: warning as f64,
            max_tokens: max as f64,
            widened: true,
        };
        // With `count / f` exactly 1, the truncations of `W` and `M` can leave the computed
        // cold limit an ulp or two below 1 (5 / 7 s / 5 gives 0.9999999999999999), and Java
        // then admits nothing at `M`. Checking the computed value guarantees that a single
        // permit always fits an empty window.
        let cold_limit = curve.limit_at(curve.max);
        if cold_limit < 1.0 {
            return Err(ConfigError::ColdRateBelowOne {
                permits_per_second: count,
                cold_factor,
                cold_limit,
            });
        }
        let highest = curve.limit_at(curve.warning).max(count);
        curve.capacity = highest.floor() as u32;
        Ok(curve)
    }

    /// The public view of the smooth profile's `curve`. Sentinel's integer fields are unused.
    pub(crate) fn from_smooth(curve: &SmoothCurve) -> Curve {
        Curve {
            count: curve.rate(),
            inverse_count: 1.0 / curve.rate(),
            warning: 0,
            max: 0,
            // Seconds per request per token, as Sentinel's.
            slope: curve.slope() / 1e9,
            refill_gate: 0,
            capacity: u32::MAX,
            warning_tokens: curve.threshold(),
            max_tokens: curve.max(),
            widened: false,
        }
    }

    /// `W`: at or below this many stored tokens the full rate applies.
    pub fn warning_tokens(&self) -> f64 {
        self.warning_tokens
    }

    /// `M`: the most tokens the bucket can store; at `M` the cold rate applies.
    pub fn max_tokens(&self) -> f64 {
        self.max_tokens
    }

    /// The slope of the curve in interval space (seconds per request per token above `W`).
    pub fn slope(&self) -> f64 {
        self.slope
    }

    /// The full (warm) rate in permits per second.
    pub fn permits_per_second(&self) -> f64 {
        self.count
    }

    /// The limit in force with `stored_tokens` stored, in requests per second: the largest
    /// number of permits a one-second window may hold.
    ///
    /// Values outside `0..=M` are not clamped; they extend the curve's formula.
    pub fn qps_limit(&self, stored_tokens: f64) -> f64 {
        let warning = self.warning_tokens;
        if stored_tokens >= warning {
            let limit = ((stored_tokens - warning) * self.slope + 1.0 / self.count).recip();
            if self.widened { limit.next_up() } else { limit }
        } else {
            self.count
        }
    }

    /// The largest `n` for which an acquire of `n` permits can ever succeed: the floor of the
    /// highest limit for [`Profile::SentinelExact`](super::Profile::SentinelExact); `u32::MAX`
    /// for [`Profile::Smooth`](super::Profile::Smooth), which admits any acquire given time.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// `qps_limit` for an integer token count, as Sentinel computes it.
    #[inline]
    pub(crate) fn limit_at(&self, tokens: u32) -> f64 {
        if tokens >= self.warning {
            (f64::from(tokens - self.warning) * self.slope + self.inverse_count)
                .recip()
                .next_up()
        } else {
            self.count
        }
    }

    /// How many permits a one-second window may hold with `tokens` stored.
    #[inline]
    pub(crate) fn window_capacity(&self, tokens: u32) -> u64 {
        // Window counts are integers, so `count + n <= limit` iff `count + n <= floor(limit)`.
        self.limit_at(tokens) as u64
    }

    /// Sentinel's `syncToken` for a sync at second `now_sec`: refill since the last sync (if the
    /// refill gate allows), cap at `M`, then subtract the previous second's passes in bulk.
    ///
    /// `last` is the previous sync as `(second, tokens)`, or `None` before the first one, when
    /// the bucket starts full (cold) whatever the clock's origin.
    pub(crate) fn synced_tokens(
        &self,
        last: Option<(u64, u32)>,
        now_sec: u64,
        previous_passes: u64,
    ) -> u32 {
        let refilled = match last {
            None => u64::from(self.max),
            Some((last_sec, tokens)) => self.cool_down(tokens, now_sec - last_sec, previous_passes),
        };
        refilled.saturating_sub(previous_passes) as u32
    }

    /// Sentinel's `coolDownTokens`, with the elapsed time in whole seconds.
    fn cool_down(&self, tokens: u32, elapsed_secs: u64, previous_passes: u64) -> u64 {
        let refill =
            tokens < self.warning || (tokens > self.warning && previous_passes < self.refill_gate);
        let refilled = if refill {
            // Java: `(long)(oldValue + (currentTime - lastFilledTime) * count / 1000)` with
            // millisecond timestamps, evaluated left to right in double precision.
            let elapsed_ms = elapsed_secs.saturating_mul(1000) as f64;
            (f64::from(tokens) + elapsed_ms * self.count / 1000.0) as u64
        } else {
            u64::from(tokens)
        };
        refilled.min(u64::from(self.max))
    }
}

/// The smooth profile's curve (Guava's constants) for `count` permits per second, a
/// `period` warm-up and `cold_factor`, after validating them: the rate must be positive and
/// finite, the period non-zero (fractions of a second are fine) and the factor at least 1
/// (1 is a flat limiter).
pub(crate) fn smooth_curve(
    count: f64,
    period: Duration,
    cold_factor: u32,
) -> Result<SmoothCurve, ConfigError> {
    positive_rate(count)?;
    if cold_factor < 1 {
        return Err(ConfigError::ColdFactorTooSmall {
            cold_factor,
            min: 1,
        });
    }
    if period.is_zero() {
        return Err(ConfigError::ZeroWarmUpPeriod);
    }
    let smooth = SmoothCurve::new(count, period.as_nanos() as f64, f64::from(cold_factor));
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

/// Both profiles' first check: a rate must be a finite number greater than zero.
fn positive_rate(count: f64) -> Result<(), ConfigError> {
    if count.is_finite() && count > 0.0 {
        Ok(())
    } else {
        Err(ConfigError::InvalidRate {
            permits_per_second: count,
        })
    }
}

/// Shows what the accessors report, the same for both profiles (Sentinel's integer
/// working values are internal).
impl fmt::Debug for Curve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Curve")
            .field("permits_per_second", &self.count)
            .field("cold_limit", &self.qps_limit(self.max_tokens))
            .field("warning_tokens", &self.warning_tokens)
            .field("max_tokens", &self.max_tokens)
            .field("slope", &self.slope)
            .field("capacity", &self.capacity)
            .finish()
    }
}
