//! Sentinel's warm-up curve, with Java's integer arithmetic.

use std::fmt;
use std::time::Duration;

use crate::ConfigError;
use crate::warmup::curve::positive_rate;

/// Largest count one half-second window can hold (30 bits of the packed window word).
pub(crate) const MAX_WINDOW_COUNT: u64 = (1 << 30) - 1;

/// Sentinel's warm-up curve: the per-second limit in force for each stored token count.
///
/// Tokens accumulate while the service is idle and drain while it is busy. Between the
/// *warning* level `W` and the *maximum* `M` the limit falls linearly in interval space from the
/// full rate `c` to the cold rate `c / cold_factor`; below `W` the full rate applies:
///
/// ```text
/// qps_limit(x) = 1 / ((x − W) · slope + 1 / c)   for x ≥ W      (slope = (f − 1) / c / (M − W))
///              = c                               for x < W
/// ```
///
/// The constants are Sentinel's, including Java's integer truncations:
/// `W = (int)(P·c) / (f − 1)` (integer division), `M = W + (int)(2·P·c / (1 + f))`, and every
/// limit from `W` up is widened by one ulp (`Math.nextUp`) so that rounding cannot turn an exact
/// boundary into a rejection. Tokens are whole numbers.
///
/// # Example
///
/// ```
/// use admit::warmup::sentinel::SentinelWarmUp;
///
/// let curve = SentinelWarmUp::builder(10.0).build()?.curve();
/// assert_eq!(curve.warning_tokens(), 50.0);
/// assert_eq!(curve.max_tokens(), 100.0);
/// assert_eq!(curve.qps_limit(100.0), 3.3333333333333335); // cold: 10 / 3
/// assert_eq!(curve.qps_limit(50.0), 10.000000000000002); // warm: 10, widened by one ulp
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[derive(Clone, Copy, PartialEq)]
pub struct SentinelCurve {
    count: f64,
    /// `1.0 / count`, which Java recomputes for every threshold (the same value every time).
    inverse_count: f64,
    warning: u32,
    max: u32,
    slope: f64,
    /// Sentinel refills above `W` only while the previous second passed fewer than
    /// `(int)count / coldFactor` requests.
    refill_gate: u64,
    /// The largest acquire that can ever pass: the floor of the highest limit on the curve.
    capacity: u32,
}

impl SentinelCurve {
    /// Sentinel's constants for `count` permits per second, a `period` warm-up and `cold_factor`,
    /// after validating that Sentinel's arithmetic stays exact and the limiter can never stall.
    pub(crate) fn sentinel(
        count: f64,
        period: Duration,
        cold_factor: u32,
    ) -> Result<SentinelCurve, ConfigError> {
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
                cold_factor: f64::from(cold_factor),
                min: 2.0,
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

        let mut curve = SentinelCurve {
            count,
            inverse_count: 1.0 / count,
            warning: warning as u32,
            max: max as u32,
            slope,
            refill_gate,
            capacity: 0,
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

    /// `W`: at or below this many stored tokens the full rate applies.
    pub fn warning_tokens(&self) -> f64 {
        f64::from(self.warning)
    }

    /// `M`: the most tokens the bucket can store; at `M` the cold rate applies.
    pub fn max_tokens(&self) -> f64 {
        f64::from(self.max)
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
        let warning = self.warning_tokens();
        if stored_tokens >= warning {
            ((stored_tokens - warning) * self.slope + 1.0 / self.count)
                .recip()
                .next_up()
        } else {
            self.count
        }
    }

    /// The largest `n` for which an acquire of `n` permits can ever succeed: the floor of the
    /// highest limit on the curve.
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

/// Shows what the accessors report.
impl fmt::Debug for SentinelCurve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelCurve")
            .field("permits_per_second", &self.count)
            .field("cold_limit", &self.qps_limit(self.max_tokens()))
            .field("warning_tokens", &self.warning_tokens())
            .field("max_tokens", &self.max_tokens())
            .field("slope", &self.slope)
            .field("capacity", &self.capacity)
            .finish()
    }
}
