//! Configuring a Sentinel bucket.

use std::borrow::Cow;
use std::time::Duration;

use super::curve::SentinelCurve;
use super::limiter::SentinelWarmUp;
use super::window::SentinelWindow;
use crate::ConfigError;
use crate::clock::{Clock, MonotonicClock};
use crate::warmup::totals::Counters;

/// Configures a [`SentinelWarmUp`] limiter; created by [`SentinelWarmUp::builder`].
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::ConfigError;
/// use admit::warmup::sentinel::SentinelWarmUp;
///
/// let limiter = SentinelWarmUp::builder(200.0)
///     .warm_up_period(Duration::from_secs(60))
///     .cold_factor(4)
///     .build()?;
/// assert_eq!(limiter.curve().qps_limit(limiter.curve().max_tokens()), 50.00000000000001);
///
/// // Every bad setting is a typed error, never a panic or a limiter that admits nothing.
/// assert_eq!(
///     SentinelWarmUp::builder(2.0).build().unwrap_err(),
///     ConfigError::ColdRateBelowOne {
///         permits_per_second: 2.0,
///         cold_factor: 3,
///         cold_limit: 2.0 / 3.0,
///     }
/// );
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct SentinelBuilder<C> {
    permits_per_second: f64,
    warm_up_period: Duration,
    cold_factor: u32,
    start_warm: bool,
    clock: C,
    name: Option<Cow<'static, str>>,
}

impl SentinelWarmUp<MonotonicClock> {
    /// Starts configuring a limiter that admits `permits_per_second` once warm.
    ///
    /// Defaults: a 10 s warm-up period, cold factor 3, a [`MonotonicClock`] starting now, a
    /// cold start, unnamed.
    pub fn builder(permits_per_second: f64) -> SentinelBuilder<MonotonicClock> {
        SentinelBuilder::new(permits_per_second)
    }
}

impl SentinelBuilder<MonotonicClock> {
    fn new(permits_per_second: f64) -> Self {
        SentinelBuilder {
            permits_per_second,
            warm_up_period: Duration::from_secs(10),
            cold_factor: 3,
            start_warm: false,
            clock: MonotonicClock::new(),
            name: None,
        }
    }
}

impl<C: Clock> SentinelBuilder<C> {
    /// How long the limiter takes to warm up from cold under load, in Sentinel's terms
    /// (default 10 s): a whole number of seconds.
    pub fn warm_up_period(mut self, period: Duration) -> Self {
        self.warm_up_period = period;
        self
    }

    /// How much lower the cold limit is than the full rate (default 3): while cold the limit
    /// is `permits_per_second / cold_factor`. At least 2.
    pub fn cold_factor(mut self, cold_factor: u32) -> Self {
        self.cold_factor = cold_factor;
        self
    }

    /// Start warm (an empty bucket, full rate) instead of cold (default `false`). The bucket is
    /// empty as of [`build`](Self::build); idle time from then on refills it. This is exactly
    /// Sentinel's behaviour with a clock that starts at zero.
    pub fn start_warm(mut self, start_warm: bool) -> Self {
        self.start_warm = start_warm;
        self
    }

    /// A name for this limiter, for metric labels and logs (default: none).
    pub fn name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The clock to read (default: a [`MonotonicClock`] whose origin is the call to
    /// [`SentinelWarmUp::builder`]).
    pub fn clock<C2: Clock>(self, clock: C2) -> SentinelBuilder<C2> {
        SentinelBuilder {
            permits_per_second: self.permits_per_second,
            warm_up_period: self.warm_up_period,
            cold_factor: self.cold_factor,
            start_warm: self.start_warm,
            clock,
            name: self.name,
        }
    }

    /// Validates the configuration and builds the limiter.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first invalid setting, for Sentinel's per-second, 32-bit
    /// integer arithmetic: [`InvalidRate`](ConfigError::InvalidRate) (rate ≤ 0, NaN or
    /// infinite), [`RateTooHigh`](ConfigError::RateTooHigh),
    /// [`ColdFactorTooSmall`](ConfigError::ColdFactorTooSmall) (factor < 2),
    /// [`ZeroWarmUpPeriod`](ConfigError::ZeroWarmUpPeriod),
    /// [`FractionalWarmUpPeriod`](ConfigError::FractionalWarmUpPeriod),
    /// [`ColdRateBelowOne`](ConfigError::ColdRateBelowOne) (a cold limit below one request per
    /// second: Sentinel would never warm up),
    /// [`TokenOverflow`](ConfigError::TokenOverflow) or [`EmptyName`](ConfigError::EmptyName).
    pub fn build(self) -> Result<SentinelWarmUp<C>, ConfigError> {
        let now = self.clock.now_nanos();
        let curve = SentinelCurve::sentinel(
            self.permits_per_second,
            self.warm_up_period,
            self.cold_factor,
        )?;
        crate::error::check_name(self.name.as_deref())?;
        Ok(SentinelWarmUp {
            window: SentinelWindow::new(curve, self.start_warm, now),
            clock: self.clock,
            warm_up_period: self.warm_up_period,
            cold_factor: self.cold_factor,
            totals: Counters::new(),
            #[cfg(feature = "tracing")]
            watch: crate::warmup::watch::RateWatch::new(self.start_warm, self.name.clone()),
            name: self.name,
        })
    }
}
