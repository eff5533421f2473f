//! The engine of [`WarmUp`](super::WarmUp): Guava's `SmoothWarmingUp` model in nanoseconds,
//! lock-free in one 128-bit word (the schedule and the stored permits).
//!
//! Permits are spaced in time rather than counted per window. The limiter stores permits while
//! it is underused, up to `max`; spending a stored permit at level `x` costs the interval
//!
//! ```text
//! interval(x) = stable + max(0, x − threshold) · slope        (ns per permit)
//! ```
//!
//! so a full (cold) bucket spaces requests `cold = stable · cold_factor` apart and an empty one
//! `stable = 1 s / rate` apart. Spending `k` permits from level `x` costs the integral of
//! `interval` over `[x − k, x]`; permits beyond the stored ones cost `stable` each. The constants
//! are Guava's, in continuous form:
//!
//! ```text
//! threshold = 0.5 · period / stable       max = threshold + 2 · period / (stable + cold)
//! slope = (cold − stable) / (max − threshold)       cool_down = period / max   (ns per permit)
//! ```
//!
//! By construction, under saturating demand the bucket drains from `max` to `threshold` (the
//! full rate) in exactly `period`, and an idle bucket refills from empty to `max` in `period`.
//!
//! Two ways to pay for a request:
//!
//! - **Later** (Guava's): a request passes as soon as the previous ones are paid for
//!   (`next_free`), and its own cost delays the next request. An idle limiter passes any
//!   request at once.
//! - **Now** (Sentinel's pacer, the right choice for server admission): a request passes once
//!   the time since the previous one covers its own cost. `next_free` is then the time the
//!   previous request passed.
//!
//! **Demand-aware cooling.** Guava credits every moment after `next_free` as idle time, so a
//! steady load between the cold and the full rate, refused in part, keeps the bucket cold
//! forever: the gaps between the refused requests refill what the admitted ones spend
//! (google/guava#3552). Here a refusal marks the state, and after it the first spacing
//! interval past the schedule is not idle: the next admitted request of a stream refused in
//! part arrives within one of its own intervals, so its gap refills nothing, while a real
//! idle spell after an overload still cools the limiter down.

mod bucket;
mod curve;
mod shared;
mod state;

pub(crate) use self::bucket::SmoothBucket;
pub(crate) use self::curve::SmoothCurve;
