//! Whose cost a request waits for.

/// How a request pays for its permits in a [`WarmUp`](crate::warmup::WarmUp).
///
/// Both styles space requests by the warm-up curve; they differ in whose cost a request waits
/// for.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::clock::ManualClock;
/// use admit::warmup::{Payment, WarmUp};
///
/// let build = |payment| {
///     WarmUp::builder(10.0)
///         .payment(payment)
///         .burst(Duration::ZERO)
///         .start_warm(true)
///         .clock(ManualClock::new())
///         .build()
/// };
/// // Warm, 100 ms per permit. One permit, then five at once, then one, all at time 0.
/// // Paying now, each request waits for its own cost:
/// let now = build(Payment::Now)?;
/// let waits: Vec<_> = [1, 5, 1].map(|n| now.reserve(n, Duration::MAX).unwrap()).into();
/// assert_eq!(waits, [0, 500, 600].map(Duration::from_millis));
/// // Paying later, each waits for the previous request's cost:
/// let later = build(Payment::Later)?;
/// let waits: Vec<_> = [1, 5, 1].map(|n| later.reserve(n, Duration::MAX).unwrap()).into();
/// assert_eq!(waits, [0, 100, 600].map(Duration::from_millis));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Payment {
    /// A request passes once the time since the previous one covers its own cost, as
    /// Sentinel's pacing controller does. A burst is spread out from its first request on.
    /// The default: right for admitting requests to a server.
    #[default]
    Now,
    /// A request passes as soon as the earlier ones are paid for, and its own cost delays the
    /// next one, as Guava's `RateLimiter` does. An idle limiter passes any request at once.
    Later,
}
