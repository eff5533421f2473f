//! The Sentinel bucket.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use super::curve::SentinelCurve;
use super::snapshot::SentinelSnapshot;
use super::window::SentinelWindow;
use crate::clock::{Clock, MonotonicClock};
use crate::warmup::totals::Counters;
use crate::warmup::{AcquireError, Phase, Rejected, Totals};

/// Alibaba Sentinel's `WarmUpController`, number for number (see the [module docs](super)):
/// a per-second limit chosen from the stored tokens, applied to a rolling one-second window of
/// passes. Build one with [`SentinelWarmUp::builder`].
///
/// `SentinelWarmUp` is `Send + Sync`; share it with an `Arc`. All methods take `&self` and
/// never block.
///
/// # Example
///
/// ```
/// use admit::clock::ManualClock;
/// use admit::warmup::sentinel::SentinelWarmUp;
///
/// // 10 rps once warm; cold, 10 / 3 per rolling second: three requests fit.
/// let limiter = SentinelWarmUp::builder(10.0).clock(ManualClock::new()).build()?;
/// let admitted = (0..10).filter(|_| limiter.try_acquire().is_ok()).count();
/// assert_eq!(admitted, 3);
/// # Ok::<(), admit::ConfigError>(())
/// ```
pub struct SentinelWarmUp<C = MonotonicClock> {
    pub(super) window: SentinelWindow,
    pub(super) clock: C,
    pub(super) warm_up_period: Duration,
    pub(super) cold_factor: u32,
    pub(super) totals: Counters,
    pub(super) name: Option<Cow<'static, str>>,
    #[cfg(feature = "tracing")]
    pub(super) watch: crate::warmup::watch::RateWatch,
}

impl<C: Clock> SentinelWarmUp<C> {
    /// Takes one permit if the rolling window has room for it under the limit in force.
    ///
    /// # Errors
    ///
    /// [`Rejected`], with a retry hint, if the rolling window is full. A single permit always
    /// fits an empty window, so waiting always helps.
    #[inline]
    pub fn try_acquire(&self) -> Result<(), Rejected> {
        let now = self.clock.now_nanos();
        let decision = self
            .window
            .try_acquire(now, 1)
            .map_err(|refusal| Rejected::new(refusal.retry_after_nanos));
        #[cfg(feature = "tracing")]
        self.watch
            .observe(|_| self.window.at_full_rate(), || self.permits_per_second());
        self.totals.count(decision)
    }

    /// Takes `n` permits at once if the rolling window has room for all of them under the
    /// limit in force.
    ///
    /// Acquiring 0 permits is a call like any other, as Sentinel's `canPass` with
    /// `acquireCount` 0: it runs the second's token update, and is refused while the rolling
    /// window holds more passes than the limit in force (only in the first half of a second
    /// whose update lowered the limit below the passes of the half second before, until that
    /// half ends, which the retry hint points at).
    ///
    /// While cold, the limit is `permits_per_second / cold_factor`, and the limiter only warms
    /// up by admitting requests: a workload whose every request asks for more than the cold
    /// limit is never admitted (as in Sentinel). Keep `n` at or below the cold limit, or mix in
    /// smaller requests. Like every call, an acquire of more than [`SentinelCurve::capacity`]
    /// counts as a call for Sentinel's once-per-second token update.
    ///
    /// # Errors
    ///
    /// - [`AcquireError::ExceedsCapacity`] if `n` is above [`SentinelCurve::capacity`], the
    ///   most any single acquire can obtain.
    /// - [`AcquireError::Rejected`] if the window has no room for `n` now.
    ///
    /// # Example
    ///
    /// ```
    /// use admit::clock::ManualClock;
    /// use admit::warmup::AcquireError;
    /// use admit::warmup::sentinel::SentinelWarmUp;
    ///
    /// // Cold: the whole cold limit of the second at once.
    /// let limiter = SentinelWarmUp::builder(30.0).clock(ManualClock::new()).build()?;
    /// assert!(limiter.try_acquire_n(10).is_ok());
    /// assert!(limiter.try_acquire_n(1).is_err());
    /// // At most its highest per-second limit, ever.
    /// assert_eq!(
    ///     limiter.try_acquire_n(31),
    ///     Err(AcquireError::ExceedsCapacity { requested: 31, capacity: 30 })
    /// );
    /// # Ok::<(), admit::ConfigError>(())
    /// ```
    #[inline]
    pub fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
        let now = self.clock.now_nanos();
        // Every request, for 0 permits or more than can ever fit, runs the second's token sync
        // first, as in Sentinel, so that it changes the limiter's future exactly as Sentinel's
        // would.
        let decision = self.window.try_acquire(now, n).map_err(|refusal| {
            let capacity = self.window.curve().capacity();
            if n > capacity {
                AcquireError::ExceedsCapacity {
                    requested: n,
                    capacity,
                }
            } else {
                Rejected::new(refusal.retry_after_nanos).into()
            }
        });
        #[cfg(feature = "tracing")]
        self.watch
            .observe(|_| self.window.at_full_rate(), || self.permits_per_second());
        self.totals.count(decision)
    }

    /// Waits until `n` permits fit the rolling window and takes them: each refusal sleeps on
    /// tokio's timer for its retry hint and tries again (a window cannot be reserved ahead).
    ///
    /// The retry hints are computed on the limiter's [`Clock`] and slept on tokio's; with a
    /// manual clock, advance it yourself (tokio's paused time does not move it).
    ///
    /// # Errors
    ///
    /// [`AcquireError::ExceedsCapacity`] if `n` can never be admitted at once; the wait never
    /// ends in a rejection.
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub async fn acquire(&self, n: u32) -> Result<(), AcquireError> {
        loop {
            match self.try_acquire_n(n) {
                Ok(()) => return Ok(()),
                Err(AcquireError::Rejected(rejected)) => {
                    tokio::time::sleep(rejected.retry_after()).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// The limiter's state now. Reads a few atomics; writes and allocates nothing.
    ///
    /// # Example
    ///
    /// ```
    /// use admit::warmup::Phase;
    /// use admit::warmup::sentinel::SentinelWarmUp;
    ///
    /// let limiter = SentinelWarmUp::builder(10.0).build()?;
    /// let snapshot = limiter.snapshot();
    /// assert_eq!(snapshot.phase, Phase::Cold);
    /// assert_eq!(snapshot.stored_tokens, snapshot.max_tokens);
    /// assert_eq!(snapshot.qps_limit, 3.3333333333333335);
    /// # Ok::<(), admit::ConfigError>(())
    /// ```
    pub fn snapshot(&self) -> SentinelSnapshot {
        let now = self.clock.now_nanos();
        let curve = self.curve();
        let view = self.window.view(now);
        let stored = f64::from(view.tokens);
        SentinelSnapshot {
            stored_tokens: stored,
            warning_tokens: curve.warning_tokens(),
            max_tokens: curve.max_tokens(),
            qps_limit: curve.qps_limit(stored),
            window_passes: view.window_passes,
            phase: Phase::of(stored, curve.warning_tokens(), curve.max_tokens()),
        }
    }
}

impl<C> SentinelWarmUp<C> {
    /// Sentinel's curve for this limiter's settings.
    pub fn curve(&self) -> SentinelCurve {
        self.window.curve()
    }

    /// The clock this limiter reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The full (warm) rate in permits per second.
    pub fn permits_per_second(&self) -> f64 {
        self.window.curve().permits_per_second()
    }

    /// The warm-up period, a whole number of seconds.
    pub fn warm_up_period(&self) -> Duration {
        self.warm_up_period
    }

    /// The cold factor: while cold the limit is `permits_per_second / cold_factor`.
    pub fn cold_factor(&self) -> u32 {
        self.cold_factor
    }

    /// How many decisions this limiter made.
    pub fn totals(&self) -> Totals {
        self.totals.get()
    }

    /// The name given with [`SentinelBuilder::name`](super::SentinelBuilder::name), if any: for
    /// metric labels and logs.
    #[cfg(feature = "metrics")]
    pub(crate) fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}

/// The bucket in the tower glue: one permit per request, nothing held afterwards.
#[cfg(feature = "tower")]
impl<C: Clock + 'static> crate::middleware::Limiter for SentinelWarmUp<C> {
    type Permit = ();
    type Refusal = Rejected;
    type Wait = crate::middleware::NoWait<(), Rejected>;

    #[inline]
    fn admit(
        this: &crate::Shared<Self>,
        _arrival: crate::signal::Arrival,
    ) -> crate::middleware::Admission<(), Rejected, Self::Wait> {
        this.try_acquire().into()
    }

    #[inline]
    fn count_offered(this: &crate::Shared<Self>) {
        this.totals.offered();
    }
}

impl<C> fmt::Debug for SentinelWarmUp<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelWarmUp")
            .field("name", &self.name)
            .field("permits_per_second", &self.permits_per_second())
            .field("warm_up_period", &self.warm_up_period)
            .field("cold_factor", &self.cold_factor)
            .finish_non_exhaustive()
    }
}
