//! Warm-up ("cold start") token buckets.
//!
//! A service that has just started, or has been idle for a while, is *cold*: its caches are
//! empty, connection pools are small, lazily initialised code paths have not run. Hitting it with
//! its full steady-state rate at once can tip it over. A [`WarmUp`] limiter admits only
//! `permits_per_second / cold_factor` requests per second while cold and raises the rate to
//! `permits_per_second` as the service proves itself by serving traffic.
//!
//! [`sentinel::SentinelWarmUp`] reproduces Alibaba Sentinel's controller number for number,
//! for parity; everything below describes [`WarmUp`].
//!
//! # How it works
//!
//! The limiter stores permits. Idle time adds permits; admitted requests spend them. The number
//! of stored permits sets the spacing in force through the warm-up [`Curve`]: at the maximum
//! `M` the cold rate applies, at or below the warning level `W` the full rate, and in between
//! the rate rises as permits drain. A freshly built limiter is full (cold).
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
//! The state is three 64-bit words. The schedule (when the next permit is due, in ns since the
//! limiter was built, up to 9.1 years; a refusal mark; and up to fifteen whole permits spent
//! from the stored ones since they were last written) orders admissions by one compare-and-swap
//! each. The stored permits are written after it, and only when an admission changes them other
//! than by one more whole permit counted in the schedule: a busy run writes them once every
//! sixteen admissions, a busy empty bucket and a full one after idling not at all. With them
//! goes a run: the prices of the busy run's next sixteen permits in fixed point, so that a busy
//! admission prices its permit in integers. A refusal writes only to mark the unmet demand, at
//! most once between two admissions. Any target with 64-bit atomics is lock-free.
//!
//! # In a tower stack
//!
//! [`WarmUpLayer`] takes one permit per request in axum, tonic or any tower stack, and
//! [`WarmUpInterceptor`] does the same as a tonic interceptor (`tonic` feature).
//!
//! # Cost
//!
//! `try_acquire` reads the clock once and the schedule. A refusal already marked stops there:
//! a load and a comparison. Otherwise it reads the curve (in place until the first
//! [`set_rate`](WarmUp::set_rate), then a few words under a sequence lock) and the stored
//! permits and prices the request: in integer steps in the two steady states (busy and empty;
//! full after idling) and for the permits of a busy run, in floating point otherwise. In a busy
//! run, a permit's price along the warm-up slope is worked out in fixed point (`2^-35` ns at
//! 10⁹ permits/s, `2^-5` ns at 1/s) and may differ from the floating-point one by 1 ns; on a
//! curve whose coldest spacing is 4.3 s or more, in floating point. An admission performs one
//! 64-bit compare-and-swap of the schedule and, if it writes the stored permits (one in
//! sixteen in a busy run), one of them.
//! Every decision also adds one to a lifetime total (a plain store on a stripe the thread
//! owns). Nothing allocates. See the crate's README for benchmarks.
//!
//! # Memory ordering
//!
//! Admissions are totally ordered by their compare-and-swap (`AcqRel`) on the schedule: a
//! successful `try_acquire` happens after every earlier successful one it saw. A rejection acts
//! as an `Acquire` load of the schedule. The stored permits are written after the schedule, so
//! a decision racing another admission may price its request with the level from before that
//! admission (up to sixteen permits' difference in the spacing); the admission that changes the
//! level applies its change to the newest level by compare-and-swap, so no spend or refill is
//! lost. A run prices only for the stored permits' word and curve it was worked out from (a
//! 16-bit hash of the word and the curve's generation); a decision that reads a run left
//! stale by a race prices in floating point instead, or, if the hash collides (1 in 65 536),
//! on that run's older level.
//! The curve is read under a sequence lock, so a decision uses one whole curve, the one in
//! force before or after a concurrent [`set_rate`](WarmUp::set_rate), never a mix.
//! `tests/loom_smooth.rs` model-checks the decisions' interleavings, the level's updates and
//! the curve's sequence lock.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use admit::clock::ManualClock;
//! use admit::warmup::{Phase, WarmUp};
//!
//! // Saturate 10 rps / 10 s / factor 3 for 15 seconds, one attempt per millisecond.
//! let clock = ManualClock::new();
//! let limiter = WarmUp::builder(10.0)
//!     .warm_up_period(Duration::from_secs(10))
//!     .cold_factor(3)
//!     .clock(clock.clone())
//!     .build()?;
//! let mut passed_per_second = Vec::new();
//! for _second in 0..15 {
//!     let mut passed = 0;
//!     for _ms in 0..1000 {
//!         passed += limiter.try_acquire().is_ok() as u32;
//!         clock.advance(Duration::from_millis(1));
//!     }
//!     passed_per_second.push(passed);
//! }
//! // The burst credit at once, then one request every 300 ms (10 / 3 per second), rising
//! // continuously to 10 per second within the 10 s period.
//! assert_eq!(passed_per_second, [7, 4, 4, 5, 4, 6, 5, 8, 9, 10, 10, 10, 10, 10, 10]);
//! assert_eq!(limiter.snapshot().phase, Phase::Warm);
//! # Ok::<(), admit::ConfigError>(())
//! ```

mod builder;
mod curve;
pub mod error;
#[cfg(feature = "tonic")]
mod interceptor;
mod limiter;
pub mod sentinel;
mod smooth;
mod snapshot;
mod totals;
#[cfg(feature = "tracing")]
mod watch;

pub use self::builder::WarmUpBuilder;
pub use self::curve::Curve;
pub use self::error::{AcquireError, Rejected};
#[cfg(feature = "tonic")]
#[cfg_attr(docsrs, doc(cfg(feature = "tonic")))]
pub use self::interceptor::WarmUpInterceptor;
pub use self::limiter::WarmUp;
pub use self::smooth::Payment;
pub use self::snapshot::{Phase, Totals, WarmUpSnapshot};

/// [`AdmitLayer`](crate::middleware::AdmitLayer) applying a warm-up bucket `B`: each request
/// takes one permit, and requests beyond the limit in force are refused before they reach the
/// service.
///
/// `WarmUpLayer::new(limiter)` takes a [`WarmUp`] (or a [`SentinelWarmUp`](sentinel::SentinelWarmUp)),
/// an `Arc` of one or a `&'static` one;
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
    K = crate::middleware::classify::ErrorsPass,
    R = crate::respond::BoxErrorResponder,
> = crate::middleware::AdmitLayer<B, K, R>;
