//! Alibaba Sentinel's warm-up controller, number for number: [`SentinelWarmUp`].
//!
//! Use it where Sentinel's exact numbers matter (a migration, a parity test); the
//! [guide](crate::guide::limiters) compares it with [`WarmUp`](super::WarmUp).
//!
//! Reproduces Alibaba Sentinel's `WarmUpController` (1.8.x) number for number:
//!
//! - **One-second semantics.** Tokens are updated once per second, by the first call of each
//!   second (seconds and half seconds are aligned to the clock's whole seconds): first refilled
//!   by `permits_per_second` per second elapsed since the last update (capped at `M`), then
//!   reduced in bulk by the passes of the previous second. The limit chosen from the tokens then
//!   holds for the whole second. Every call counts, admitted or not and for any number of
//!   permits, 0 included, as in Sentinel.
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
//! - **Tiny rates.** Configurations whose cold limit is below one request per second are
//!   refused with [`ConfigError::ColdRateBelowOne`](crate::ConfigError::ColdRateBelowOne)
//!   (including the few where `permits_per_second / cold_factor` is exactly one but Java's
//!   truncations put the computed limit just below it): Sentinel never warms up on them. At a
//!   cold limit of exactly one (3 rps, factor 3) the limiter admits one request per second
//!   while cold and warms very slowly, as Sentinel does.
//! - **Range.** Windows are numbered from the second the limiter was built in, so any clock
//!   origin works; a limiter can run for 136 years.
//!
//! Two deliberate differences, which change no number in a single-threaded run from an epoch
//! clock:
//!
//! - **It always starts cold**, whatever the clock's origin; [`SentinelBuilder::start_warm`]
//!   starts it warm, as Sentinel does when its clock starts at zero.
//! - **Check-and-count is one atomic step**: an admission is a single compare-and-swap on the
//!   window, which no caller can slip past.
//!
//! The [guide](crate::guide::parity) lists every difference from Sentinel and why.
//!
//! # Cost
//!
//! `try_acquire` reads the clock once, loads three words and, when it admits, performs one
//! compare-and-swap, plus one relaxed add for the decision totals. A rejection writes nothing
//! else except, at most once per half second, the bookkeeping the first caller of a window
//! performs anyway (the second's token update and the sealing of the finished window). Nothing
//! allocates.
//!
//! # Memory ordering
//!
//! Admissions are totally ordered by their compare-and-swap (`AcqRel`) on the window: a
//! successful `try_acquire` happens after every earlier successful one it saw. A rejection acts
//! as an `Acquire` load of the state.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use admit::clock::ManualClock;
//! use admit::warmup::Phase;
//! use admit::warmup::sentinel::SentinelWarmUp;
//!
//! // Saturate 10 rps / 10 s / factor 3 for 15 seconds, one attempt per millisecond.
//! let clock = ManualClock::new();
//! let limiter = SentinelWarmUp::builder(10.0)
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
//! // Sentinel's numbers: the full rate only in second 12.
//! assert_eq!(passed_per_second, [3, 3, 3, 3, 3, 4, 4, 4, 5, 5, 6, 7, 10, 10, 10]);
//! assert_eq!(limiter.snapshot().phase, Phase::Warm);
//! # Ok::<(), admit::ConfigError>(())
//! ```

mod builder;
mod curve;
mod limiter;
mod snapshot;
mod window;

pub use self::builder::SentinelBuilder;
pub use self::curve::SentinelCurve;
pub use self::limiter::SentinelWarmUp;
pub use self::snapshot::SentinelSnapshot;
