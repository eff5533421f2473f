//! What a warm-up bucket reports about itself.

use std::fmt;

/// How warm a limiter is, derived from the stored permits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// The bucket is full: the cold rate `permits_per_second / cold_factor` applies.
    Cold,
    /// Between the warning level and the maximum: the limit is rising towards the full rate.
    Warming,
    /// At or below the warning level: the full rate applies.
    Warm,
}

impl Phase {
    /// The phase of a bucket storing `stored` with warning level `warning` and maximum `max`.
    pub(crate) fn of(stored: f64, warning: f64, max: f64) -> Phase {
        if stored >= max {
            Phase::Cold
        } else if stored > warning {
            Phase::Warming
        } else {
            Phase::Warm
        }
    }
}

/// `cold`, `warming` or `warm`, for logs and metrics labels.
///
/// ```
/// use admit::warmup::Phase;
///
/// assert_eq!(Phase::Warming.to_string(), "warming");
/// ```
impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Cold => "cold",
            Phase::Warming => "warming",
            Phase::Warm => "warm",
        })
    }
}

/// Warm-up progress from 0.0 (cold) to 1.0 (warm): how far `stored` has drained from `max`
/// towards `warning`.
pub(crate) fn progress(stored: f64, warning: f64, max: f64) -> f64 {
    ((max - stored) / (max - warning)).clamp(0.0, 1.0)
}

/// A point-in-time view of a [`WarmUp`](super::WarmUp) limiter.
///
/// The stored permits include the idle time up to now, as the next decision would credit
/// them (it may credit slightly less, by the cost it pays).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct WarmUpSnapshot {
    /// Permits stored now, between 0 and `max_tokens`.
    pub stored_tokens: f64,
    /// The warning level `W`: at or below it the full rate applies.
    pub warning_tokens: f64,
    /// The maximum `M`: a full bucket is cold.
    pub max_tokens: f64,
    /// The rate in force now, in requests per second (see
    /// [`Curve::qps_limit`](super::Curve::qps_limit)).
    pub qps_limit: f64,
    /// How warm the limiter is.
    pub phase: Phase,
}

/// How many decisions a warm-up bucket made, since it was built: one per acquire, whatever its
/// permit count (a zero-permit acquire of a [`WarmUp`](super::WarmUp) decides nothing). The
/// shedder's counterparts are the `passed`, `failed` and `dropped` totals of its snapshot. With
/// them, the requests offered to the bucket first (`offered`).
///
/// Kept apart from the [snapshot](super::WarmUp::snapshot): the snapshot is the state that
/// decides the next request, which a refusal leaves unchanged; the totals count every
/// decision.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::clock::ManualClock;
/// use admit::warmup::WarmUp;
///
/// let limiter = WarmUp::builder(10.0)
///     .burst(Duration::ZERO) // exact spacing
///     .clock(ManualClock::new())
///     .build()?;
/// let _ = limiter.try_acquire();
/// let _ = limiter.try_acquire();
/// let totals = limiter.totals();
/// assert_eq!((totals.admitted, totals.refused), (1, 1));
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Totals {
    /// Decisions that admitted.
    pub admitted: u64,
    /// Decisions that refused.
    pub refused: u64,
    /// Requests that this bucket's layer or interceptor saw before any other admit layer,
    /// admitted or refused: its share of the offered load (0 behind another admit layer). The
    /// tower glue counts them, not direct calls such as `try_acquire`.
    pub offered: u64,
}

impl WarmUpSnapshot {
    /// Warm-up progress from 0.0 (cold) to 1.0 (warm): how far the stored permits have
    /// drained from the maximum towards the warning level.
    pub fn progress(&self) -> f64 {
        progress(self.stored_tokens, self.warning_tokens, self.max_tokens)
    }
}
