//! A warm-up ("cold start") token bucket.
//!
//! A service that has just started, or has been idle for a while, is *cold*: its caches are
//! empty, connection pools are small, lazily initialised code paths have not run. Hitting it with
//! its full steady-state rate at once can tip it over. A [`WarmUp`] limiter admits only
//! `permits_per_second / cold_factor` requests per second while cold and raises the limit to
//! `permits_per_second` as the service proves itself by serving traffic.
//!
//! # How it works
//!
//! The limiter stores tokens. Idle time adds tokens; admitted requests remove them. The number of
//! stored tokens selects the limit in force through the warm-up [`Curve`]: at the maximum `M` the
//! cold rate applies, at or below the warning level `W` the full rate, and in between the limit
//! rises as tokens drain. A freshly built limiter is full (cold).
//!
//! Two [`Profile`]s implement this: [`Profile::Smooth`] (the default) spaces requests in time
//! with nanosecond resolution; [`Profile::SentinelExact`] reproduces Sentinel's per-second
//! numbers for parity.
//!
//! # `Profile::SentinelExact`
//!
//! Reproduces Alibaba Sentinel's `WarmUpController` (1.8.x) number for number:
//!
//! - **One-second semantics.** Tokens are updated once per second, by the first call of each
//!   second (seconds and half seconds are aligned to the clock's whole seconds): first refilled
//!   by `permits_per_second` per second elapsed since the last update (capped at `M`), then
//!   reduced in bulk by the passes of the previous second. The limit chosen from the tokens then
//!   holds for the whole second. Every call counts, admitted or not, as in Sentinel.
//! - **Admission** counts passes in a rolling window of the current and the previous half
//!   second, and admits `n` permits if `passes + n ≤ limit`. Passes made late in one second
//!   therefore still count early in the next (Sentinel's behaviour).
//! - **Warming is slower than the period.** Under saturating load 10 rps / 10 s / factor 3
//!   reaches the full rate in second 12, and the tokens settle at 40 rather than `W` = 50:
//!   at exactly `W` Sentinel skips the refill (its "dead zone") but still subtracts the passes.
//! - **Re-cooling after idle.** Below `W` every elapsed second adds `permits_per_second` tokens;
//!   above `W` tokens are added only while the previous second passed fewer than
//!   `(int) permits_per_second / cold_factor` requests, i.e. while the service is nearly idle.
//!   An idle limiter is cold again after at most `M / permits_per_second` seconds (10 s for
//!   10 rps / 10 s / factor 3), except with exactly `W` tokens: the dead zone refills nothing,
//!   so a limiter that goes idle resting on `W` stays warm until traffic moves its tokens.
//!   And because passes are subtracted only via the second right before an update, a busy
//!   second followed by an idle one is never subtracted (Sentinel's bulk-subtraction leak):
//!   intermittent load re-cools the bucket faster than its real consumption implies. Both
//!   quirks are kept for parity.
//! - **Tiny rates.** A cold limit below one request per second could never admit anything and
//!   would never warm up; such configurations are refused with
//!   [`ConfigError::ColdRateBelowOne`] (including the few where `permits_per_second /
//!   cold_factor` is exactly one but Java's truncations put the computed limit just below it).
//!   At a cold limit of exactly one (3 rps, factor 3) the limiter admits one request per second
//!   while cold and warms very slowly, as Sentinel does.
//! - **Range.** Windows are numbered from the second the limiter was built in, so any clock
//!   origin works; a limiter can run for 136 years.
//!
//! Two deliberate fixes, which change no number in a single-threaded run from an epoch clock:
//!
//! - **It always starts cold**, whatever the clock's origin. Sentinel starts warm when its clock
//!   starts at zero (its first second never syncs); use [`WarmUpBuilder::start_warm`] to start
//!   warm on purpose, which reproduces exactly that.
//! - **Check-and-count is one atomic step.** Sentinel checks the window and records the pass
//!   later, so concurrent callers overshoot the limit; here an admission is a single
//!   compare-and-swap on the window, which no caller can slip past.
//!
//! # `Profile::Smooth`
//!
//! Guava's `SmoothWarmingUp` model, in nanoseconds and lock-free, with two fixes. Requests are
//! spaced in time rather than counted per second: spending the stored permit at level `x` takes
//! the interval `1/c + max(0, x − W) · slope`, from `f/c` at `M` (cold) down to `1/c` at or
//! below `W` (warm), and a request for `n` permits pays the integral of that interval over the
//! `n` permits it spends. The constants are the curve's in continuous form: `W = P·c/2`,
//! `M = W + 2·P·c/(1 + f)`, identical to Sentinel's at `f = 3` and to Guava's at any `f`.
//!
//! - **Warming takes the period.** Under saturating load the bucket drains from `M` to `W` in
//!   exactly the warm-up period, so the admitted rate rises continuously from `c/f` to `c`; 10
//!   rps / 10 s / factor 3 is at the full rate by second 10 (Sentinel: second 12).
//! - **Consumption is immediate.** Each admission spends its permits at once, so a warm
//!   limiter under bursty load (busy one second, idle the next) stays warm; Sentinel's bulk
//!   subtraction re-cools it.
//! - **Re-cooling is demand-aware.** Idle time refills the bucket (from empty to `M` in one
//!   period), but not the gaps of a load that was being refused: after a refusal, the first
//!   spacing interval past the request's turn does not count as idle. A steady load between
//!   the cold and the full rate therefore warms the limiter up instead of keeping it cold
//!   forever, which Guava does (google/guava#3552), while a limiter left idle after an
//!   overload still cools down.
//! - **Under-use cools it, in proportion.** As in Guava, time a request did not need is idle
//!   and stores permits, so a steady load well below the full rate settles where the stored
//!   permits it adds between requests equal those it spends: a limit above the load but below
//!   the full rate (for 2000 rps / 5 s / factor 6 under 500 rps, about 730 rps). A burst of
//!   traffic then warms it up again within the period. Sentinel stays warm as long as the
//!   previous second passed at least `permits_per_second / cold_factor`.
//! - **Paying now or later** ([`Payment`]): by default a request waits for its own cost, as
//!   Sentinel's pacing controller; [`Payment::Later`] is Guava's, where a request waits for
//!   the earlier ones and its own cost delays the next.
//! - **Waiting.** [`WarmUp::try_acquire`] never waits; [`WarmUp::reserve`] reserves permits
//!   that will be available within a given wait and says how long to wait; `acquire(n).await`
//!   (`tokio` feature) reserves and sleeps once.
//! - **Live re-rating.** [`WarmUp::set_rate`] changes the rate without a pause or an
//!   allocation; the stored permits keep their share of the maximum.
//! - **A burst, or exact spacing.** By default a request may pass up to one second before its
//!   turn ([`WarmUpBuilder::burst`]), so requests arriving together pass up to a second's
//!   worth of the current rate at once without changing the long-run rate. With a zero burst
//!   requests are spaced exactly, which suits pacing.
//! - **Any period, any rate.** Fractions of a second are fine, and rates far below one per
//!   second work: 1 rps with factor 3 first spaces requests 2 to 3 s apart, then warms up, where
//!   Sentinel admits nothing. A factor of 1 is a plain rate limiter.
//!
//! The state is one 128-bit word (next free instant, stored permits and a refusal mark),
//! changed by one compare-and-swap per admission. A refusal writes only to mark the unmet
//! demand, at most once between two admissions. On x86_64 the compare-and-swap is
//! `cmpxchg16b`, chosen at run time; targets without a 128-bit compare-and-swap use
//! `portable-atomic`'s fallback, a lock.
//!
//! # In a tower stack
//!
//! [`WarmUpLayer`] takes one permit per request in axum, tonic or any tower stack, and
//! [`WarmUpInterceptor`] does the same as a tonic interceptor (`tonic` feature).
//!
//! # Cost
//!
//! Nothing allocates, in either profile. See the crate's README for benchmarks.
//!
//! - [`Profile::Smooth`]: `try_acquire` reads the clock once, the curve (a few words under a
//!   sequence lock) and the 128-bit state, prices the request in floating point and, when it
//!   admits, performs one 128-bit compare-and-swap. A rejection writes only to mark unmet
//!   demand, at most once between two admissions.
//! - [`Profile::SentinelExact`]: `try_acquire` reads the clock once, loads three words and,
//!   when it admits, performs one compare-and-swap. A rejection writes nothing except, at most
//!   once per half second, the bookkeeping the first caller of a window performs anyway (the
//!   second's token update and the sealing of the finished window).
//!
//! # Memory ordering
//!
//! Admissions are totally ordered by their compare-and-swap (`AcqRel`) on the smooth state or,
//! in [`Profile::SentinelExact`], on the window: a successful `try_acquire` happens after every
//! earlier successful one it saw. A rejection acts as an `Acquire` load of the state.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use admit::clock::ManualClock;
//! use admit::warmup::{Phase, Profile, WarmUp};
//!
//! // Saturate a limiter for 15 seconds, one attempt per millisecond.
//! let saturate = |profile| -> Result<Vec<u32>, admit::ConfigError> {
//!     let clock = ManualClock::new();
//!     let limiter = WarmUp::builder(10.0)
//!         .warm_up_period(Duration::from_secs(10))
//!         .cold_factor(3)
//!         .profile(profile)
//!         .clock(clock.clone())
//!         .build()?;
//!     let mut passed_per_second = Vec::new();
//!     for _second in 0..15 {
//!         let mut passed = 0;
//!         for _ms in 0..1000 {
//!             passed += limiter.try_acquire().is_ok() as u32;
//!             clock.advance(Duration::from_millis(1));
//!         }
//!         passed_per_second.push(passed);
//!     }
//!     assert_eq!(limiter.snapshot().phase, Phase::Warm);
//!     Ok(passed_per_second)
//! };
//! // Smooth (the default): one request every 300 ms at first (10 / 3 per second), rising
//! // continuously to 10 per second within the 10 s period.
//! assert_eq!(
//!     saturate(Profile::Smooth)?,
//!     [4, 4, 3, 5, 4, 5, 5, 6, 7, 9, 10, 10, 10, 10, 10]
//! );
//! // Sentinel's numbers: the full rate only in second 12.
//! assert_eq!(
//!     saturate(Profile::SentinelExact)?,
//!     [3, 3, 3, 3, 3, 4, 4, 4, 5, 5, 6, 7, 10, 10, 10]
//! );
//! # Ok::<(), admit::ConfigError>(())
//! ```

mod curve;
pub mod error;
#[cfg(feature = "tonic")]
mod interceptor;
mod sentinel;
mod smooth;

use std::fmt;
use std::time::Duration;

pub use self::curve::Curve;
use self::curve::smooth_curve;
pub use self::error::{AcquireError, Rejected};
#[cfg(feature = "tonic")]
#[cfg_attr(docsrs, doc(cfg(feature = "tonic")))]
pub use self::interceptor::WarmUpInterceptor;
use self::sentinel::SentinelWindow;
pub use self::smooth::Payment;
use self::smooth::SmoothBucket;
use crate::ConfigError;
use crate::clock::{Clock, MonotonicClock};

/// [`AdmitLayer`](crate::middleware::AdmitLayer) applying a warm-up bucket `B`: each request
/// takes one permit, and requests beyond the limit in force are refused before they reach the
/// service.
///
/// `WarmUpLayer::new(limiter)` takes a [`WarmUp`], an `Arc` of one or a `&'static` one;
/// [`http`](crate::middleware::AdmitLayer::http) answers refusals with 503 and `Retry-After`,
/// [`grpc`](crate::middleware::AdmitLayer::grpc) with `RESOURCE_EXHAUSTED` (for tonic,
/// [`WarmUpInterceptor`] works too). A warm-up bucket learns nothing from outcomes, so the
/// classifier `K` is ignored. See [`AdmitLayer`](crate::middleware::AdmitLayer) for the
/// behaviour.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use axum::{Router, body::Body, routing::get};
/// use admit::warmup::{WarmUp, WarmUpLayer};
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // 3 requests per second once warm, 1 per second while cold.
/// let limiter = WarmUp::builder(3.0).warm_up_period(Duration::from_secs(30)).build()?;
/// let app: Router = Router::new()
///     .route("/", get(|| async { "hello" }))
///     .layer(WarmUpLayer::new(limiter).http());
///
/// let admitted = app.clone().oneshot(http::Request::new(Body::empty())).await?;
/// assert_eq!(admitted.status(), 200);
/// let refused = app.oneshot(http::Request::new(Body::empty())).await?;
/// assert_eq!(refused.status(), 503);
/// assert!(refused.headers().contains_key("retry-after"));
/// # Ok(())
/// # }
/// ```
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub type WarmUpLayer<
    B = WarmUp,
    R = crate::respond::BoxErrorResponder,
    K = crate::middleware::classify::ErrorsPass,
> = crate::middleware::AdmitLayer<B, K, R>;

/// The default [burst](WarmUpBuilder::burst): one second, the span Sentinel's rolling window
/// and governor's default quota admit at once.
const DEFAULT_BURST: Duration = Duration::from_secs(1);

/// Which warm-up algorithm a [`WarmUp`] runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Profile {
    /// Alibaba Sentinel's `WarmUpController`, number for number (see the
    /// [module docs](self#profilesentinelexact)): a per-second limit chosen from the stored
    /// tokens, applied to a rolling one-second window of passes. The warm-up period must be a
    /// whole number of seconds.
    SentinelExact,
    /// Guava's `SmoothWarmingUp` model with nanosecond resolution (see the
    /// [module docs](self#profilesmooth)): requests are spaced in time, each priced by the
    /// warm-up curve at the moment it passes, so the rate rises continuously from the cold to
    /// the full rate in exactly the warm-up period under load, and a warm limiter stays warm
    /// under bursty load. Any warm-up period above zero works, fractions of a second included,
    /// and a cold factor of 1 is a plain (flat) rate limiter. The default.
    #[default]
    Smooth,
}

/// How warm the limiter is, derived from the stored tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// The bucket is full: the cold rate `permits_per_second / cold_factor` applies.
    Cold,
    /// Between the warning level and the maximum: the limit is rising towards the full rate.
    Warming,
    /// At or below the warning level: the full rate applies.
    Warm,
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

/// A point-in-time view of a [`WarmUp`] limiter.
///
/// Tokens are reported as they are *after* the current second's update, even if no call has
/// made that update yet, so a snapshot taken just before a call agrees with the decision the
/// call is about to make.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct WarmUpSnapshot {
    /// Tokens stored now, between 0 and `max_tokens`.
    pub stored_tokens: f64,
    /// The warning level `W`: at or below it the full rate applies.
    pub warning_tokens: f64,
    /// The maximum `M`: a full bucket is cold.
    pub max_tokens: f64,
    /// The limit in force now, in requests per second (see [`Curve::qps_limit`]).
    pub qps_limit: f64,
    /// Passes counted in the current rolling window (Sentinel's `passQps`); always 0 in
    /// [`Profile::Smooth`], which spaces requests instead of counting them.
    pub window_passes: u64,
    /// How warm the limiter is.
    pub phase: Phase,
}

impl WarmUpSnapshot {
    /// Warm-up progress from 0.0 (cold) to 1.0 (warm): how far the stored tokens have drained
    /// from the maximum towards the warning level.
    pub fn progress(&self) -> f64 {
        let span = self.max_tokens - self.warning_tokens;
        ((self.max_tokens - self.stored_tokens) / span).clamp(0.0, 1.0)
    }
}

/// A warm-up token bucket. Build one with [`WarmUp::builder`].
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
    engine: Engine,
    clock: C,
    warm_up_period: Duration,
    cold_factor: u32,
}

/// The state machine a profile runs. Not boxed: a limiter is built once and never moved on
/// the hot path, and the extra indirection would cost every decision.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum Engine {
    Sentinel(SentinelWindow),
    Smooth(SmoothBucket),
}

impl WarmUp<MonotonicClock> {
    /// Starts configuring a limiter that admits `permits_per_second` once warm.
    ///
    /// Defaults: a 10 s warm-up period, cold factor 3, [`Profile::Smooth`] paying now with a
    /// one-second [burst](WarmUpBuilder::burst), a [`MonotonicClock`] starting now, and a cold
    /// start.
    pub fn builder(permits_per_second: f64) -> WarmUpBuilder<MonotonicClock> {
        WarmUpBuilder {
            permits_per_second,
            warm_up_period: Duration::from_secs(10),
            cold_factor: 3,
            profile: Profile::Smooth,
            payment: Payment::Now,
            burst: DEFAULT_BURST,
            start_warm: false,
            clock: MonotonicClock::new(),
        }
    }
}

impl<C: Clock> WarmUp<C> {
    /// Takes one permit if the limit in force has room for it now.
    ///
    /// # Errors
    ///
    /// [`Rejected`], with a retry hint, if the rolling window is full. A single permit always
    /// fits an empty window, so waiting always helps.
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
    /// // Cold: 30 / 3 per second, one every 100 ms. Of 100 requests arriving together at
    /// // start, one passes.
    /// let admitted = (0..100).filter(|_| limiter.try_acquire().is_ok()).count();
    /// assert_eq!(admitted, 1);
    /// // Idle time earns a burst credit of up to one second: then the request on time and
    /// // a second's worth of the cold rate pass at once.
    /// clock.advance(Duration::from_secs(2));
    /// let admitted = (0..100).filter(|_| limiter.try_acquire().is_ok()).count();
    /// assert_eq!(admitted, 11);
    /// # Ok::<(), admit::ConfigError>(())
    /// ```
    #[inline]
    pub fn try_acquire(&self) -> Result<(), Rejected> {
        let now = self.clock.now_nanos();
        match &self.engine {
            Engine::Sentinel(window) => window
                .try_acquire(now, 1)
                .map_err(|refusal| Rejected::new(refusal.retry_after_nanos)),
            Engine::Smooth(bucket) => bucket
                .reserve(now, 1.0, self.tolerance(bucket))
                .map(|_| ())
                .map_err(Rejected::new),
        }
    }

    /// Takes `n` permits at once if the limit in force has room for all of them now.
    ///
    /// Acquiring 0 permits always succeeds and changes nothing.
    ///
    /// While cold, the limit is `permits_per_second / cold_factor`, and the limiter only warms
    /// up by admitting requests: a workload whose every request asks for more than the cold
    /// limit is never admitted (as in Sentinel). Keep `n` at or below the cold limit, or mix in
    /// smaller requests.
    ///
    /// Like every call, an acquire of more than [`Curve::capacity`] counts as a call for
    /// Sentinel's once-per-second token update.
    ///
    /// In [`Profile::Smooth`] any `n` can pass: it takes `n` permits' worth of the curve's
    /// spacing (and, paying now, waits for it), so a large request never stalls the limiter.
    ///
    /// # Errors
    ///
    /// - [`AcquireError::ExceedsCapacity`] if `n` is above [`Curve::capacity`], the most any
    ///   single acquire can obtain.
    /// - [`AcquireError::Rejected`] if the window has no room for `n` now.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use admit::clock::ManualClock;
    /// use admit::warmup::{Profile, WarmUp};
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
    ///
    /// // SentinelExact: the whole cold limit of the second at once.
    /// let limiter = WarmUp::builder(30.0)
    ///     .profile(Profile::SentinelExact)
    ///     .clock(clock.clone())
    ///     .build()?;
    /// assert!(limiter.try_acquire_n(10).is_ok());
    /// assert!(limiter.try_acquire_n(1).is_err());
    /// # Ok::<(), admit::ConfigError>(())
    /// ```
    #[inline]
    pub fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
        if n == 0 {
            return Ok(());
        }
        self.reserve(n, Duration::ZERO).map(|_| ())
    }

    /// Reserves `n` permits if they are available now or within `max_wait`, and returns how
    /// long to wait before using them (zero if they are available now).
    ///
    /// The reservation is made at once: sleep for the returned time, then serve the request.
    /// If you give up instead, the permits stay spent; nothing else waits for them, but the
    /// limiter counts them as used.
    ///
    /// In [`Profile::Smooth`] the wait returned is the time until the request's turn less the
    /// [burst](WarmUpBuilder::burst). With a cached clock a request due within the clock's
    /// [resolution](crate::clock::Clock::resolution_nanos) passes too, and the wait returned
    /// may exceed `max_wait` by up to that much: the clock's reading lags the true time by as
    /// much.
    ///
    /// Only [`Profile::Smooth`] spaces requests in time. [`Profile::SentinelExact`] counts
    /// passes per window and cannot promise a later window, so it admits now (a zero wait) or
    /// refuses, whatever `max_wait`.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](Self::try_acquire_n); the retry hint of a refusal is how much
    /// longer the wait would have had to be allowed.
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
    pub fn reserve(&self, n: u32, max_wait: Duration) -> Result<Duration, AcquireError> {
        if n == 0 {
            return Ok(Duration::ZERO);
        }
        let now = self.clock.now_nanos();
        let window = match &self.engine {
            Engine::Smooth(bucket) => {
                let max_wait = u64::try_from(max_wait.as_nanos())
                    .unwrap_or(u64::MAX)
                    .saturating_add(self.tolerance(bucket));
                return bucket
                    .reserve(now, f64::from(n), max_wait)
                    .map(|wait| Duration::from_nanos(wait.saturating_sub(bucket.burst())))
                    .map_err(|short| Rejected::new(short).into());
            }
            Engine::Sentinel(window) => window,
        };
        // Even a request that can never fit runs the second's token sync first, as in Sentinel,
        // so that it changes the limiter's future exactly as Sentinel's would.
        window
            .try_acquire(now, n)
            .map(|()| Duration::ZERO)
            .map_err(|refusal| {
                let capacity = window.curve().capacity();
                if n > capacity {
                    AcquireError::ExceedsCapacity {
                        requested: n,
                        capacity,
                    }
                } else {
                    Rejected::new(refusal.retry_after_nanos).into()
                }
            })
    }

    /// Waits until `n` permits are available and takes them.
    ///
    /// In [`Profile::Smooth`] this reserves the permits at once and sleeps once on tokio's
    /// timer for as long as the reservation says: concurrent callers are served in the order
    /// they reserved, and none is woken only to race the others again. Dropping the future
    /// while it sleeps does not give the permits back: the limiter counts them as used, so a
    /// cancelled wait delays later callers as the request would have.
    ///
    /// [`Profile::SentinelExact`] counts passes per window and cannot reserve a later one:
    /// there each refusal sleeps for its retry hint and tries again.
    ///
    /// The wait is computed on the limiter's [`Clock`] and slept on tokio's; with a manual
    /// clock, advance it yourself (tokio's paused time does not move it).
    ///
    /// # Errors
    ///
    /// [`AcquireError::ExceedsCapacity`] if `n` can never be admitted at once (never in
    /// [`Profile::Smooth`]); the wait never ends in a rejection.
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
    /// let (a, b, c) = tokio::join!(limiter.acquire(1), limiter.acquire(1), limiter.acquire(1));
    /// a?;
    /// b?;
    /// c?;
    /// // Warm: 100 ms apart, so the third waited 200 ms.
    /// assert_eq!(start.elapsed(), Duration::from_millis(200));
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub async fn acquire(&self, n: u32) -> Result<(), AcquireError> {
        loop {
            match self.reserve(n, Duration::MAX) {
                Ok(wait) => {
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                    return Ok(());
                }
                Err(AcquireError::Rejected(rejected)) => {
                    tokio::time::sleep(rejected.retry_after()).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// How far ahead of its turn a smooth request may pass: the configured burst, plus the
    /// clock's resolution, since a cached clock's reading lags by up to that much (the
    /// request's turn is kept in the schedule either way).
    #[inline]
    fn tolerance(&self, bucket: &SmoothBucket) -> u64 {
        bucket.burst().saturating_add(self.clock.resolution_nanos())
    }

    /// Changes the full rate to `permits_per_second` from now on, keeping the warm-up period
    /// and the cold factor ([`Profile::Smooth`] only).
    ///
    /// As Guava's `setRate`: the stored permits keep their share of the maximum, so a
    /// half-warm limiter stays half warm at the new rate, and time already reserved is kept
    /// (the next caller still waits it out). Decisions under way when the rate changes use the
    /// rate they started with; none sees a mix of the two. Nothing allocates; concurrent calls
    /// of `set_rate` are serialised by a lock that decisions never take.
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidRate`] for a rate that is not a positive, finite number, and
    /// [`ConfigError::RateChangeUnsupported`] for a [`Profile::SentinelExact`] limiter. The
    /// limiter is unchanged.
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
        let Engine::Smooth(bucket) = &self.engine else {
            return Err(ConfigError::RateChangeUnsupported { permits_per_second });
        };
        let curve = smooth_curve(permits_per_second, self.warm_up_period, self.cold_factor)?;
        bucket.set_curve(&curve);
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
        let (stored, window_passes) = match &self.engine {
            Engine::Sentinel(window) => {
                let view = window.view(now);
                (f64::from(view.tokens), view.window_passes)
            }
            Engine::Smooth(bucket) => (bucket.stored_at(now), 0),
        };
        let phase = if stored >= curve.max_tokens() {
            Phase::Cold
        } else if stored > curve.warning_tokens() {
            Phase::Warming
        } else {
            Phase::Warm
        };
        WarmUpSnapshot {
            stored_tokens: stored,
            warning_tokens: curve.warning_tokens(),
            max_tokens: curve.max_tokens(),
            qps_limit: curve.qps_limit(stored),
            window_passes,
            phase,
        }
    }
}

impl<C> WarmUp<C> {
    /// The warm-up curve this limiter follows (after [`set_rate`](WarmUp::set_rate), the new
    /// one).
    pub fn curve(&self) -> Curve {
        match &self.engine {
            Engine::Sentinel(window) => window.curve(),
            Engine::Smooth(bucket) => Curve::from_smooth(&bucket.curve()),
        }
    }

    /// The clock this limiter reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The full (warm) rate in permits per second.
    pub fn permits_per_second(&self) -> f64 {
        self.curve().permits_per_second()
    }

    /// The warm-up period.
    pub fn warm_up_period(&self) -> Duration {
        self.warm_up_period
    }

    /// The cold factor: while cold the limit is `permits_per_second / cold_factor`.
    pub fn cold_factor(&self) -> u32 {
        self.cold_factor
    }

    /// The algorithm this limiter runs.
    pub fn profile(&self) -> Profile {
        match self.engine {
            Engine::Sentinel(_) => Profile::SentinelExact,
            Engine::Smooth(_) => Profile::Smooth,
        }
    }
}

/// The bucket in the tower glue: one permit per request, nothing held afterwards.
#[cfg(feature = "tower")]
impl<C: Clock + 'static> crate::middleware::Limiter for WarmUp<C> {
    type Permit = ();
    type Refusal = Rejected;

    #[inline]
    fn admit(this: &crate::Shared<Self>) -> Result<(), Rejected> {
        this.try_acquire()
    }
}

impl<C> fmt::Debug for WarmUp<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WarmUp")
            .field("permits_per_second", &self.permits_per_second())
            .field("warm_up_period", &self.warm_up_period)
            .field("cold_factor", &self.cold_factor)
            .field("profile", &self.profile())
            .finish_non_exhaustive()
    }
}

/// Configures a [`WarmUp`] limiter; created by [`WarmUp::builder`].
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::ConfigError;
/// use admit::warmup::{Profile, WarmUp};
///
/// let limiter = WarmUp::builder(200.0)
///     .warm_up_period(Duration::from_secs(60))
///     .cold_factor(4)
///     .profile(Profile::SentinelExact)
///     .build()?;
/// assert_eq!(limiter.curve().qps_limit(limiter.curve().max_tokens()), 50.00000000000001);
///
/// // Every bad setting is a typed error, never a panic or a limiter that admits nothing.
/// assert_eq!(
///     WarmUp::builder(2.0).profile(Profile::SentinelExact).build().unwrap_err(),
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
pub struct WarmUpBuilder<C> {
    permits_per_second: f64,
    warm_up_period: Duration,
    cold_factor: u32,
    profile: Profile,
    payment: Payment,
    burst: Duration,
    start_warm: bool,
    clock: C,
}

impl<C: Clock> WarmUpBuilder<C> {
    /// How long the limiter takes to warm up from cold under load (default 10 s). In
    /// [`Profile::SentinelExact`] it must be a whole number of seconds.
    pub fn warm_up_period(mut self, period: Duration) -> Self {
        self.warm_up_period = period;
        self
    }

    /// How much lower the cold rate is than the full rate (default 3): while cold the limit is
    /// `permits_per_second / cold_factor`. Must be at least 2.
    pub fn cold_factor(mut self, cold_factor: u32) -> Self {
        self.cold_factor = cold_factor;
        self
    }

    /// Which algorithm to run (default [`Profile::Smooth`]). Choose
    /// [`Profile::SentinelExact`] to reproduce Sentinel's numbers.
    pub fn profile(mut self, profile: Profile) -> Self {
        self.profile = profile;
        self
    }

    /// How a request pays for its permits in [`Profile::Smooth`] (default [`Payment::Now`]).
    /// [`Profile::SentinelExact`] counts passes per window and has nothing to pay, so it does
    /// not use this setting.
    pub fn payment(mut self, payment: Payment) -> Self {
        self.payment = payment;
        self
    }

    /// How far ahead of its turn a request may pass in [`Profile::Smooth`] (default one
    /// second): the tolerance of a GCRA.
    ///
    /// With a burst of `b`, requests arriving together pass until the schedule runs `b` ahead
    /// of the clock: the request on time plus about `b` worth of the current spacing (`b ·
    /// rate` permits when warm, `b · rate / cold_factor` when cold). The long-run rate is
    /// unchanged, because each early request still takes its place in the schedule. Idle
    /// time earns the credit, up to `b`; a new limiter has none, so a cold start admits the
    /// cold rate from its first request on. Any span `t` admits at most `t + b` worth of the
    /// spacing in force: after an idle spell long enough to cool down, up to twice the cold
    /// rate can pass in the first second, the burst at once and then the cold rate
    /// (Sentinel's rolling window allows as much across two half-second buckets).
    ///
    /// For admission control keep a burst: with none, requests are spaced exactly and of
    /// several arriving at the same instant only one passes, so even a light load with random
    /// arrivals sees refusals. For pacing (`acquire`, outgoing calls) set `Duration::ZERO`.
    ///
    /// [`Profile::SentinelExact`] counts passes per rolling second and does not use this
    /// setting.
    pub fn burst(mut self, burst: Duration) -> Self {
        self.burst = burst;
        self
    }

    /// Start warm (an empty bucket, full rate) instead of cold (default `false`).
    ///
    /// Useful when the service is already warm, for example when a limiter is rebuilt with a new
    /// rate. The bucket is empty as of [`build`](Self::build); idle time from then on refills it
    /// as described in the [module docs](self). This is exactly Sentinel's behaviour with a
    /// clock that starts at zero.
    pub fn start_warm(mut self, start_warm: bool) -> Self {
        self.start_warm = start_warm;
        self
    }

    /// The clock to read (default: a [`MonotonicClock`] whose origin is the call to
    /// [`WarmUp::builder`]).
    /// Inject a [`ManualClock`](crate::clock::ManualClock) to make tests deterministic.
    pub fn clock<C2: Clock>(self, clock: C2) -> WarmUpBuilder<C2> {
        WarmUpBuilder {
            permits_per_second: self.permits_per_second,
            warm_up_period: self.warm_up_period,
            cold_factor: self.cold_factor,
            profile: self.profile,
            payment: self.payment,
            burst: self.burst,
            start_warm: self.start_warm,
            clock,
        }
    }
}

impl<C: Clock> WarmUpBuilder<C> {
    /// Validates the configuration and builds the limiter.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first invalid setting. Both profiles:
    /// [`InvalidRate`](ConfigError::InvalidRate) (rate ≤ 0, NaN or infinite),
    /// [`ColdFactorTooSmall`](ConfigError::ColdFactorTooSmall) (factor < 2 for
    /// [`Profile::SentinelExact`], < 1 for [`Profile::Smooth`]) and
    /// [`ZeroWarmUpPeriod`](ConfigError::ZeroWarmUpPeriod). [`Profile::SentinelExact`] only,
    /// because of Sentinel's per-second, 32-bit integer arithmetic:
    /// [`RateTooHigh`](ConfigError::RateTooHigh),
    /// [`FractionalWarmUpPeriod`](ConfigError::FractionalWarmUpPeriod),
    /// [`ColdRateBelowOne`](ConfigError::ColdRateBelowOne) (rate / factor < 1) and
    /// [`TokenOverflow`](ConfigError::TokenOverflow).
    pub fn build(self) -> Result<WarmUp<C>, ConfigError> {
        let now = self.clock.now_nanos();
        let burst_nanos =
            u64::try_from(self.burst.as_nanos()).map_err(|_| ConfigError::DurationTooLong {
                setting: "burst",
                value: self.burst,
            })?;
        let engine = match self.profile {
            Profile::SentinelExact => {
                let curve = Curve::sentinel(
                    self.permits_per_second,
                    self.warm_up_period,
                    self.cold_factor,
                )?;
                Engine::Sentinel(SentinelWindow::new(curve, self.start_warm, now))
            }
            Profile::Smooth => {
                let curve = smooth_curve(
                    self.permits_per_second,
                    self.warm_up_period,
                    self.cold_factor,
                )?;
                Engine::Smooth(SmoothBucket::new(
                    curve,
                    self.payment,
                    now,
                    self.start_warm,
                    burst_nanos,
                ))
            }
        };
        Ok(WarmUp {
            engine,
            clock: self.clock,
            warm_up_period: self.warm_up_period,
            cold_factor: self.cold_factor,
        })
    }
}
