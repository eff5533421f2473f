//! The warm-up bucket.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use super::curve::{Curve, smooth_curve};
use super::error::Rejected;
use super::reserve::CriticalReserve;
use super::smooth::SmoothBucket;
use super::snapshot::{Phase, Totals, WarmUpSnapshot};
use super::totals::Counters;
use crate::ConfigError;
use crate::clock::{Clock, MonotonicClock};
use crate::signal::Arrival;

/// A warm-up token bucket: Guava's smooth warm-up in nanoseconds (see the
/// [module docs](super)). Build one with [`WarmUp::builder`].
///
/// `WarmUp` is `Send + Sync`; share it between threads and tasks with an `Arc`. All methods take
/// `&self` and never block.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use admit::warmup::WarmUp;
///
/// let limiter = Arc::new(
///     WarmUp::builder(500.0)
///         .warm_up_period(Duration::from_secs(30))
///         .build()?,
/// );
/// let worker = {
///     let limiter = Arc::clone(&limiter);
///     std::thread::spawn(move || limiter.try_acquire().is_ok())
/// };
/// assert!(worker.join().unwrap());
/// # Ok::<(), admit::ConfigError>(())
/// ```
pub struct WarmUp<C = MonotonicClock> {
    pub(super) bucket: SmoothBucket,
    pub(super) reserve: CriticalReserve,
    pub(super) clock: C,
    pub(super) warm_up_period: Duration,
    pub(super) cold_factor: f64,
    pub(super) totals: Counters,
    pub(super) name: Option<Cow<'static, str>>,
    #[cfg(feature = "tracing")]
    pub(super) watch: super::watch::RateWatch,
    #[cfg(feature = "tracing")]
    pub(super) full_rate: super::watch::FullRate,
}

impl<C: Clock> WarmUp<C> {
    /// Takes one permit if the request's turn has come (within the burst).
    ///
    /// # Errors
    ///
    /// [`Rejected`], with how long until the request's turn.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use admit::clock::ManualClock;
    /// use admit::warmup::WarmUp;
    ///
    /// let clock = ManualClock::new();
    /// let limiter = WarmUp::builder(30.0).clock(clock.clone()).build()?;
    /// // Cold: 30 / 3 per second, one every 100 ms. Of 100 requests arriving together, the
    /// // one on time passes and the one-second burst credit at the cold spacing, less what
    /// // warming would save over the first second.
    /// let admitted = (0..100).filter(|_| limiter.try_acquire().is_ok()).count();
    /// assert_eq!(admitted, 10);
    /// // Then one every 100 ms or so; idle time earns the credit back.
    /// assert!(limiter.try_acquire().is_err());
    /// clock.advance(Duration::from_secs(10));
    /// let admitted = (0..100).filter(|_| limiter.try_acquire().is_ok()).count();
    /// assert_eq!(admitted, 10);
    /// # Ok::<(), admit::ConfigError>(())
    /// ```
    #[inline]
    pub fn try_acquire(&self) -> Result<(), Rejected> {
        self.try_acquire_within(self.tolerance())
    }

    /// [`try_acquire`](Self::try_acquire) for a request known by `arrival`: a request of a
    /// class below [`Critical`](crate::criticality::Criticality::Critical) (the default) takes its permit within
    /// the part of the burst the class may use (see
    /// [`critical_share`](super::WarmUpBuilder::critical_share)). The layers call this for each
    /// request; the bucket reads nothing else of it.
    ///
    /// # Errors
    ///
    /// [`Rejected`], with how long until the request's turn for its class.
    #[inline]
    pub fn try_acquire_with(&self, arrival: Arrival) -> Result<(), Rejected> {
        let class = arrival.class().unwrap_or_default();
        self.try_acquire_within(
            self.tolerance()
                .saturating_sub(self.reserve.kept_from(class)),
        )
    }

    /// Takes one permit if the request's turn comes within `tolerance` ns.
    #[inline]
    fn try_acquire_within(&self, tolerance: u64) -> Result<(), Rejected> {
        let now = self.clock.now_nanos();
        let decision = self
            .bucket
            .reserve(now, 1.0, tolerance)
            .map(|(_, fill)| self.observe_fill(fill))
            .map_err(Rejected::new);
        self.totals.count(decision)
    }

    /// Takes `n` permits at once if their turn has come (within the burst): they take `n`
    /// permits' worth of the curve's spacing and, paying now, wait for it, so any `n` passes
    /// given time and a large request never stalls the limiter.
    ///
    /// Acquiring 0 permits always succeeds and changes nothing.
    ///
    /// # Errors
    ///
    /// [`Rejected`], with how long until the request's turn.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use admit::clock::ManualClock;
    /// use admit::warmup::WarmUp;
    ///
    /// let clock = ManualClock::new();
    /// // Cold: 30 / 3 per second, one every 100 ms; no burst.
    /// let limiter = WarmUp::builder(30.0)
    ///     .burst(Duration::ZERO)
    ///     .clock(clock.clone())
    ///     .build()?;
    /// assert!(limiter.try_acquire_n(1).is_ok());
    /// // Five permits need about 500 ms after the previous request.
    /// assert!(limiter.try_acquire_n(5).is_err());
    /// clock.advance(Duration::from_millis(500));
    /// assert!(limiter.try_acquire_n(5).is_ok());
    /// # Ok::<(), admit::ConfigError>(())
    /// ```
    #[inline]
    pub fn try_acquire_n(&self, n: u32) -> Result<(), Rejected> {
        self.reserve(n, Duration::ZERO).map(|_| ())
    }

    /// Reserves `n` permits if their turn comes now or within `max_wait`, and returns how long
    /// to wait before using them (zero if they are available now).
    ///
    /// The reservation is made at once: sleep for the returned time, then serve the request.
    /// If you give up instead, the permits stay spent; nothing else waits for them, but the
    /// limiter counts them as used. The wait returned is the time until the request's turn less
    /// the [burst](super::WarmUpBuilder::burst). With a cached clock a request due within the
    /// clock's [resolution](crate::clock::Clock::resolution_nanos) passes too, and the wait
    /// returned may exceed `max_wait` by up to that much: the clock's reading lags the true time by as
    /// much.
    ///
    /// Reserving 0 permits always succeeds at once and changes nothing.
    ///
    /// # Errors
    ///
    /// [`Rejected`]; its retry hint is how much longer the wait would have had to be allowed.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use admit::clock::ManualClock;
    /// use admit::warmup::WarmUp;
    ///
    /// let limiter = WarmUp::builder(100.0)
    ///     .burst(Duration::ZERO) // exact spacing
    ///     .clock(ManualClock::new())
    ///     .start_warm(true)
    ///     .build()?;
    /// assert_eq!(limiter.reserve(1, Duration::from_millis(50))?, Duration::ZERO);
    /// // Warm: one permit every 10 ms.
    /// assert_eq!(limiter.reserve(1, Duration::from_millis(50))?, Duration::from_millis(10));
    /// assert_eq!(limiter.reserve(1, Duration::from_millis(50))?, Duration::from_millis(20));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn reserve(&self, n: u32, max_wait: Duration) -> Result<Duration, Rejected> {
        if n == 0 {
            return Ok(Duration::ZERO);
        }
        let now = self.clock.now_nanos();
        let max_wait = u64::try_from(max_wait.as_nanos())
            .unwrap_or(u64::MAX)
            .saturating_add(self.tolerance());
        let decision = self
            .bucket
            .reserve(now, f64::from(n), max_wait)
            .map(|(wait, fill)| {
                self.observe_fill(fill);
                Duration::from_nanos(wait.saturating_sub(self.bucket.burst()))
            })
            .map_err(Rejected::new);
        self.totals.count(decision)
    }

    /// Waits until `n` permits are available and takes them.
    ///
    /// Reserves the permits at once and sleeps once on tokio's timer for as long as the
    /// reservation says: concurrent callers are served in the order they reserved, and none is
    /// woken only to race the others again. Dropping the future while it sleeps does not give
    /// the permits back: the limiter counts them as used, so a cancelled wait delays later
    /// callers as the request would have.
    ///
    /// The wait is computed on the limiter's [`Clock`] and slept on tokio's; with a manual
    /// clock, advance it yourself (tokio's paused time does not move it).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use admit::clock::ManualClock;
    /// use admit::warmup::WarmUp;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = WarmUp::builder(10.0)
    ///     .burst(Duration::ZERO) // pacing: exact spacing
    ///     .start_warm(true)
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// let start = tokio::time::Instant::now();
    /// tokio::join!(limiter.acquire(1), limiter.acquire(1), limiter.acquire(1));
    /// // Warm: 100 ms apart, so the third waited 200 ms.
    /// assert_eq!(start.elapsed(), Duration::from_millis(200));
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub async fn acquire(&self, n: u32) {
        let wait = self
            .reserve(n, Duration::MAX)
            .expect("an unbounded reservation always succeeds");
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }

    /// Notes the stored permits' share an admission left, for the `tracing` transitions
    /// (nothing without the feature).
    #[inline]
    fn observe_fill(&self, fill: f64) {
        #[cfg(feature = "tracing")]
        self.watch.observe(
            |was| self.full_rate.at(was, fill),
            || self.permits_per_second(),
        );
        #[cfg(not(feature = "tracing"))]
        let _ = fill;
    }

    /// How far ahead of its turn a request may pass: the configured burst, plus the clock's
    /// resolution, since a cached clock's reading lags by up to that much (the request's turn
    /// is kept in the schedule either way).
    #[inline]
    fn tolerance(&self) -> u64 {
        self.bucket
            .burst()
            .saturating_add(self.clock.resolution_nanos())
    }

    /// Changes the full rate to `permits_per_second` from now on, keeping the warm-up period
    /// and the cold factor.
    ///
    /// As Guava's `setRate`: the stored permits keep their share of the maximum, so a
    /// half-warm limiter stays half warm at the new rate, and time already reserved is kept
    /// (the next caller still waits it out). Paying now, the next request is priced at the new
    /// rate. Decisions under way when the rate changes use the rate they started with; none
    /// sees a mix of the two. Nothing allocates; concurrent calls
    /// of `set_rate` are serialised by the curve's sequence lock, which decisions never wait
    /// on for long.
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidRate`] for a rate that is not a positive, finite number (or so
    /// extreme that the curve leaves the range of a double). The limiter is unchanged.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use admit::clock::ManualClock;
    /// use admit::warmup::WarmUp;
    ///
    /// let limiter = WarmUp::builder(100.0)
    ///     .burst(Duration::ZERO)
    ///     .start_warm(true)
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// limiter.set_rate(1000.0)?;
    /// assert_eq!(limiter.permits_per_second(), 1000.0);
    /// assert_eq!(limiter.reserve(1, Duration::MAX)?, Duration::ZERO);
    /// assert_eq!(limiter.reserve(1, Duration::MAX)?, Duration::from_millis(1));
    /// assert!(limiter.set_rate(-1.0).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_rate(&self, permits_per_second: f64) -> Result<(), ConfigError> {
        let curve = smooth_curve(permits_per_second, self.warm_up_period, self.cold_factor)?;
        self.bucket.set_curve(&curve);
        Ok(())
    }

    /// The limiter's state now. Reads a few atomics; writes and allocates nothing.
    ///
    /// # Example
    ///
    /// ```
    /// use admit::warmup::{Phase, WarmUp};
    ///
    /// let limiter = WarmUp::builder(10.0).build()?;
    /// let snapshot = limiter.snapshot();
    /// assert_eq!(snapshot.phase, Phase::Cold);
    /// assert_eq!(snapshot.stored_tokens, snapshot.max_tokens);
    /// assert!((snapshot.qps_limit - 10.0 / 3.0).abs() < 1e-9);
    /// # Ok::<(), admit::ConfigError>(())
    /// ```
    pub fn snapshot(&self) -> WarmUpSnapshot {
        let now = self.clock.now_nanos();
        let curve = self.curve();
        let stored = self.bucket.stored_at(now);
        WarmUpSnapshot {
            stored_tokens: stored,
            warning_tokens: curve.warning_tokens(),
            max_tokens: curve.max_tokens(),
            qps_limit: curve.qps_limit(stored),
            phase: Phase::of(stored, curve.warning_tokens(), curve.max_tokens()),
        }
    }
}

impl<C> WarmUp<C> {
    /// The warm-up curve this limiter follows (after [`set_rate`](WarmUp::set_rate), the new
    /// one).
    pub fn curve(&self) -> Curve {
        Curve::of(&self.bucket.curve())
    }

    /// The clock this limiter reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The full (warm) rate in permits per second.
    pub fn permits_per_second(&self) -> f64 {
        self.bucket.curve().rate()
    }

    /// How many decisions this limiter made.
    pub fn totals(&self) -> Totals {
        self.totals.get()
    }

    /// The name given with [`WarmUpBuilder::name`](super::WarmUpBuilder::name), if any: for
    /// metric labels and logs.
    #[cfg(feature = "metrics")]
    pub(crate) fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}

/// The bucket in the tower glue: one permit per request, nothing held afterwards.
#[cfg(feature = "tower")]
impl<C: Clock + 'static> crate::middleware::Limiter for WarmUp<C> {
    type Permit = ();
    type Refusal = Rejected;
    type Wait = crate::middleware::NoWait<(), Rejected>;

    #[inline]
    fn admit(
        this: &crate::Shared<Self>,
        arrival: Arrival,
    ) -> crate::middleware::Admission<(), Rejected, Self::Wait> {
        this.try_acquire_with(arrival).into()
    }

    #[inline]
    fn count_offered(this: &crate::Shared<Self>) {
        this.totals.offered();
    }
}

impl<C> fmt::Debug for WarmUp<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WarmUp")
            .field("name", &self.name)
            .field("permits_per_second", &self.permits_per_second())
            .field("warm_up_period", &self.warm_up_period)
            .field("cold_factor", &self.cold_factor)
            .finish_non_exhaustive()
    }
}
