//! Configuring a warm-up bucket.

use std::borrow::Cow;
use std::time::Duration;

use super::curve::smooth_curve;
use super::limiter::WarmUp;
use super::payment::Payment;
use super::reserve::CriticalReserve;
use super::smooth::SmoothBucket;
use super::totals::Counters;
use crate::ConfigError;
use crate::clock::{Clock, MonotonicClock};

/// The default [burst](WarmUpBuilder::burst): one second, the span Sentinel's rolling window
/// and governor's default quota admit at once.
const DEFAULT_BURST: Duration = Duration::from_secs(1);

/// Configures a [`WarmUp`] limiter; created by [`WarmUp::builder`].
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::ConfigError;
/// use admit::warmup::WarmUp;
///
/// let limiter = WarmUp::builder(200.0)
///     .warm_up_period(Duration::from_millis(1500))
///     .cold_factor(4)
///     .name("checkout")
///     .build()?;
/// assert!((limiter.curve().qps_limit(limiter.curve().max_tokens()) - 50.0).abs() < 1e-9);
///
/// // Every bad setting is a typed error, never a panic or a limiter that admits nothing.
/// assert_eq!(
///     WarmUp::builder(f64::INFINITY).build().unwrap_err(),
///     ConfigError::InvalidRate { permits_per_second: f64::INFINITY }
/// );
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct WarmUpBuilder<C> {
    permits_per_second: f64,
    warm_up_period: Duration,
    cold_factor: f64,
    payment: Payment,
    burst: Duration,
    critical_share: f64,
    start_warm: bool,
    clock: C,
    name: Option<Cow<'static, str>>,
}

impl WarmUp<MonotonicClock> {
    /// Starts configuring a limiter that admits `permits_per_second` once warm.
    ///
    /// Defaults: a 10 s warm-up period, cold factor 3, paying now with a one-second
    /// [burst](WarmUpBuilder::burst), a [`MonotonicClock`] starting now, a cold start, unnamed.
    pub fn builder(permits_per_second: f64) -> WarmUpBuilder<MonotonicClock> {
        WarmUpBuilder::new(permits_per_second)
    }
}

impl WarmUpBuilder<MonotonicClock> {
    fn new(permits_per_second: f64) -> Self {
        WarmUpBuilder {
            permits_per_second,
            warm_up_period: Duration::from_secs(10),
            cold_factor: 3.0,
            payment: Payment::Now,
            burst: DEFAULT_BURST,
            critical_share: 0.0,
            start_warm: false,
            clock: MonotonicClock::new(),
            name: None,
        }
    }
}

impl<C: Clock> WarmUpBuilder<C> {
    /// How long the limiter takes to warm up from cold under load (default 10 s). Any
    /// duration above zero, fractions of a second included.
    pub fn warm_up_period(mut self, period: Duration) -> Self {
        self.warm_up_period = period;
        self
    }

    /// How much lower the cold rate is than the full rate (default 3): while cold the rate is
    /// `permits_per_second / cold_factor`. A finite number at least 1, fractions included (as
    /// in Guava); 1 is a plain (flat) rate limiter. Takes any `Into<f64>`: `cold_factor(3)` or
    /// `cold_factor(2.5)`.
    pub fn cold_factor(mut self, cold_factor: impl Into<f64>) -> Self {
        self.cold_factor = cold_factor.into();
        self
    }

    /// How a request pays for its permits (default [`Payment::Now`]).
    pub fn payment(mut self, payment: Payment) -> Self {
        self.payment = payment;
        self
    }

    /// How far ahead of its turn a request may pass (default one second): the tolerance of a
    /// GCRA.
    ///
    /// With a burst of `b`, requests arriving together pass until the schedule runs `b` ahead
    /// of the clock: the request on time plus about `b` worth of the current spacing (`b ·
    /// rate` permits when warm, `b · rate / cold_factor` when cold). The long-run rate is
    /// unchanged, because each early request still takes its place in the schedule. Idle
    /// time earns the credit, up to `b`, and a new limiter has the credit an idle one has.
    /// Spending stored permits lowers the spacing, so while the limiter is cold the credit is
    /// `b` less what that warming saves over the first second: a fresh or cooled-down limiter
    /// passes at most `1 + (1 s + b) / cold spacing` in its first second, the burst at once
    /// and then the cold rate (with the defaults at 100 rps: 32 at once, 67 in the second,
    /// the most Sentinel's rolling window passes across two half-second buckets).
    ///
    /// For admission control keep a burst: with none, requests are spaced exactly and of
    /// several arriving at the same instant only one passes, so even a light load with random
    /// arrivals sees refusals. For pacing (`acquire`, outgoing calls) set `Duration::ZERO`.
    pub fn burst(mut self, burst: Duration) -> Self {
        self.burst = burst;
        self
    }

    /// The share of the [burst](Self::burst) kept for the critical classes (default 0), so
    /// that a cold or saturated bucket admits `Critical` and `CriticalPlus` requests before
    /// the others.
    ///
    /// Requests reach the bucket's classes through the tower glue (see
    /// [`Arrival`](crate::signal::Arrival)) or [`WarmUp::try_acquire_with`]. A `Sheddable`
    /// request passes only while the schedule runs less than `(1 − share) · burst` ahead of the
    /// clock, a `SheddablePlus` one `(1 − share / 2) · burst`; the critical classes may use the
    /// whole burst. While lower classes keep the schedule full, a critical request still
    /// passes, and each one it admits holds the lower classes back by its spacing: the critical
    /// classes take the rate first, all of it if they need it, and the lower classes get the
    /// rest. Their bursts up to `share · burst` of the current spacing pass at once. With a
    /// zero burst there is nothing to keep.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use admit::clock::ManualClock;
    /// use admit::criticality::Criticality;
    /// use admit::signal::Arrival;
    /// use admit::warmup::WarmUp;
    ///
    /// let of = |class| Arrival::new().with_class(class);
    /// let clock = ManualClock::new();
    /// let limiter = WarmUp::builder(300.0)
    ///     .critical_share(0.5)
    ///     .clock(clock.clone())
    ///     .build()?;
    /// // Cold: 100 per second. A flood of prefetches takes half the burst, no more.
    /// let prefetches = (0..1000)
    ///     .filter(|_| limiter.try_acquire_with(of(Criticality::Sheddable)).is_ok())
    ///     .count();
    /// // The checkouts behind it still pass, with the other half.
    /// let checkouts = (0..1000)
    ///     .filter(|_| limiter.try_acquire_with(of(Criticality::Critical)).is_ok())
    ///     .count();
    /// assert_eq!((prefetches, checkouts), (42, 52));
    /// // Then each second's rate goes to the checkouts first.
    /// clock.advance(Duration::from_millis(100));
    /// assert!(limiter.try_acquire_with(of(Criticality::Sheddable)).is_err());
    /// assert!(limiter.try_acquire_with(of(Criticality::Critical)).is_ok());
    /// # Ok::<(), admit::ConfigError>(())
    /// ```
    pub fn critical_share(mut self, share: f64) -> Self {
        self.critical_share = share;
        self
    }

    /// Start warm (an empty bucket, full rate) instead of cold (default `false`).
    ///
    /// Useful when the service is already warm, for example when a limiter is rebuilt with a new
    /// rate. The bucket is empty as of [`build`](Self::build); idle time from then on refills it
    /// as described in the [module docs](super).
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
    /// [`WarmUp::builder`]). Inject a [`ManualClock`](crate::clock::ManualClock) to make tests
    /// deterministic.
    pub fn clock<C2: Clock>(self, clock: C2) -> WarmUpBuilder<C2> {
        WarmUpBuilder {
            permits_per_second: self.permits_per_second,
            warm_up_period: self.warm_up_period,
            cold_factor: self.cold_factor,
            payment: self.payment,
            burst: self.burst,
            critical_share: self.critical_share,
            start_warm: self.start_warm,
            clock,
            name: self.name,
        }
    }

    /// Validates the configuration and builds the limiter.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first invalid setting:
    /// [`InvalidRate`](ConfigError::InvalidRate) (rate ≤ 0, NaN, infinite, or so extreme that
    /// the curve leaves the range of a double),
    /// [`ColdFactorTooSmall`](ConfigError::ColdFactorTooSmall) (factor 0),
    /// [`ZeroWarmUpPeriod`](ConfigError::ZeroWarmUpPeriod),
    /// [`DurationTooLong`](ConfigError::DurationTooLong) (a burst beyond 584 years),
    /// [`CriticalShareOutOfRange`](ConfigError::CriticalShareOutOfRange) (a share outside
    /// `[0, 1]`) or [`EmptyName`](ConfigError::EmptyName).
    pub fn build(self) -> Result<WarmUp<C>, ConfigError> {
        let now = self.clock.now_nanos();
        let burst_nanos =
            u64::try_from(self.burst.as_nanos()).map_err(|_| ConfigError::DurationTooLong {
                setting: "burst",
                value: self.burst,
            })?;
        let curve = smooth_curve(
            self.permits_per_second,
            self.warm_up_period,
            self.cold_factor,
        )?;
        let reserve = CriticalReserve::new(self.critical_share, burst_nanos)?;
        crate::error::check_name(self.name.as_deref())?;
        Ok(WarmUp {
            reserve,
            bucket: SmoothBucket::new(curve, self.payment, now, self.start_warm, burst_nanos),
            clock: self.clock,
            warm_up_period: self.warm_up_period,
            cold_factor: self.cold_factor,
            totals: Counters::new(),
            #[cfg(feature = "tracing")]
            watch: super::watch::RateWatch::new(self.start_warm, self.name.clone()),
            #[cfg(feature = "tracing")]
            full_rate: super::watch::FullRate::new(&curve),
            name: self.name,
        })
    }
}
