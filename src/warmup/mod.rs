//! Warm-up ("cold start") token buckets.
//!
//! A [`WarmUp`] limiter admits only `permits_per_second / cold_factor` requests per second
//! while cold (freshly started, or idle for a while) and raises the rate to
//! `permits_per_second` as the service proves itself by serving traffic. See the
//! [guide](crate::guide::limiters) for when to use one and how to tune it.
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
//! Guava's `SmoothWarmingUp` model, in nanoseconds and lock-free. Requests are
//! spaced in time rather than counted per second: spending the stored permit at level `x` takes
//! the interval `1/c + max(0, x − W) · slope`, from `f/c` at `M` (cold) down to `1/c` at or
//! below `W` (warm), and a request for `n` permits pays the integral of that interval over the
//! `n` permits it spends. The constants are the curve's in continuous form: `W = P·c/2`,
//! `M = W + 2·P·c/(1 + f)`, identical to Sentinel's at `f = 3` and to Guava's at any `f`.
//!
//! - **Warming takes the period.** Under saturating load the bucket drains from `M` to `W` in
//!   exactly the warm-up period, so the admitted rate rises continuously from `c/f` to `c`; 10
//!   rps / 10 s / factor 3 is at the full rate by second 10.
//! - **Consumption is immediate.** Each admission spends its permits at once, so a warm
//!   limiter under bursty load (busy one second, idle the next) stays warm.
//! - **Re-cooling is demand-aware.** Idle time refills the bucket (from empty to `M` in one
//!   period), but not the gaps of a load that was being refused: after a refusal, the first
//!   spacing interval past the request's turn does not count as idle. A steady load between
//!   the cold and the full rate therefore warms the limiter up, while a limiter left idle after
//!   an overload still cools down.
//! - **Under-use cools it, in proportion.** Time a request did not need is idle and stores
//!   permits, so a steady load well below the full rate settles where the stored permits it
//!   adds between requests equal those it spends: a limit above the load but below the full
//!   rate (for 2000 rps / 5 s / factor 6 under 500 rps, about 730 rps). A burst of traffic
//!   then warms it up again within the period.
//! - **Paying now or later** ([`Payment`]): by default a request waits for its own cost;
//!   with [`Payment::Later`] a request waits for the earlier ones and its own cost delays the
//!   next.
//! - **Waiting.** [`WarmUp::try_acquire`] never waits; [`WarmUp::reserve`] reserves permits
//!   that will be available within a given wait and says how long to wait; `acquire(n).await`
//!   (`tokio` feature) reserves and sleeps once.
//! - **Live re-rating.** [`WarmUp::set_rate`] changes the rate without a pause or an
//!   allocation; the stored permits keep their share of the maximum.
//! - **A burst, or exact spacing.** By default a request may pass up to one second before its
//!   turn ([`WarmUpBuilder::burst`]), so requests arriving together pass up to a second's
//!   worth of the current rate at once without changing the long-run rate. With a zero burst
//!   requests are spaced exactly, which suits pacing.
//! - **Critical requests first.** [`WarmUpBuilder::critical_share`] keeps a share of the burst
//!   for the `Critical` and `CriticalPlus` [classes](crate::criticality): a cold replica serves
//!   checkouts before prefetches.
//! - **Any period, any rate.** Fractions of a second are fine, and rates far below one per
//!   second work: 1 rps with factor 3 first spaces requests 2 to 3 s apart, then warms up. A
//!   factor of 1 is a plain rate limiter.
//!
//! The [guide](crate::guide::parity) lists where this departs from Guava's model and from
//! Sentinel's controller, and why.
//!
//! The state is one 128-bit word: the schedule (when the next permit is due, in ns since the
//! limiter was built, for 146 years; a refusal mark; the parity of the curve that priced it)
//! and the stored permits (a share of the maximum). Every admission replaces it by one
//! compare-and-swap; a refusal writes only to mark the unmet demand, at most once between two
//! admissions. Lock-free where the target has a 128-bit compare-and-swap (x86_64 with
//! `cmpxchg16b`, detected at run time; aarch64); elsewhere `portable-atomic` guards the word
//! with a lock.
//!
//! # In a tower stack
//!
//! [`WarmUpLayer`] takes one permit per request in axum, tonic or any tower stack, and
//! [`WarmUpInterceptor`] does the same as a tonic interceptor (`tonic` feature).
//!
//! # Cost
//!
//! `try_acquire` reads the clock once and the state. A refusal already marked stops there: a
//! load and a comparison. Otherwise it reads the curve (in place until the first
//! [`set_rate`](WarmUp::set_rate), then a few words under a sequence lock), prices the request
//! in floating point, and puts the new state in force with one 128-bit compare-and-swap.
//! Every decision also adds one to a lifetime total (a plain store on a stripe the thread
//! owns). Nothing allocates.
//!
//! # Memory ordering
//!
//! Admissions are totally ordered by their compare-and-swap (`AcqRel`) on the state: a
//! successful `try_acquire` happens after every earlier successful one it saw, and prices its
//! request on the level that one left. A rejection acts as an `Acquire` load of the state.
//! The curve is read under a sequence lock, so a decision uses one whole curve, the one in
//! force before or after a concurrent [`set_rate`](WarmUp::set_rate), never a mix; a new
//! curve re-tags the state, so a decision priced on the old curve that races it fails its
//! compare-and-swap and decides again. `tests/loom_smooth.rs` model-checks the decisions'
//! interleavings and the curve's replacement.
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
mod payment;
mod reserve;
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
pub use self::payment::Payment;
pub use self::snapshot::{Phase, Totals, WarmUpSnapshot};

/// [`AdmitLayer`](crate::middleware::AdmitLayer) applying a warm-up bucket `B`: each request
/// takes one permit, and requests beyond the limit in force are refused before they reach the
/// service.
///
/// `WarmUpLayer::new(limiter)` takes a [`WarmUp`] (or a [`SentinelWarmUp`](sentinel::SentinelWarmUp)),
/// an `Arc` of one or a `&'static` one;
/// [`http`](crate::middleware::AdmitLayer::http) answers refusals with 503 and `Retry-After`
/// (a [`HttpLayer<WarmUp, Q>`](crate::middleware::HttpLayer)),
/// [`grpc`](crate::middleware::AdmitLayer::grpc) with `RESOURCE_EXHAUSTED` (a
/// [`GrpcLayer<WarmUp, Q>`](crate::middleware::GrpcLayer); for tonic, [`WarmUpInterceptor`]
/// works too). A warm-up bucket learns nothing from outcomes, so the
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
    Q = crate::middleware::ReadNothing,
    H = crate::middleware::AtResponse,
> = crate::middleware::AdmitLayer<B, K, R, Q, H>;
