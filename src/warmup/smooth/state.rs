//! The smooth engine's state and its decision, free of atomics.

use super::curve::{SmoothCurve, saturating_add};

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

/// `next_free` before the first admission in [`Payment::Now`]: the first request passes at
/// once.
pub(super) const NEVER: u64 = u64::MAX;

/// The engine's state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct SmoothState {
    /// [`Payment::Later`]: when the permits reserved so far are paid for.
    /// [`Payment::Now`]: when the last request passed ([`NEVER`] before the first).
    pub(super) next_free: u64,
    /// Permits stored, as a fraction of `max` (`0..=1`): a new rate rescales the stored
    /// permits with `max`, as Guava's `setRate` does, without touching the state.
    pub(super) fill: f64,
    /// Whether a request was refused since the last admission.
    pub(super) denied: bool,
}

impl SmoothState {
    pub(super) fn pack(self) -> u128 {
        // `fill` is never negative, so its sign bit carries `denied`.
        let fill = self.fill.to_bits() | u64::from(self.denied) << 63;
        u128::from(self.next_free) << 64 | u128::from(fill)
    }

    pub(super) fn unpack(word: u128) -> Self {
        let low = word as u64;
        SmoothState {
            next_free: (word >> 64) as u64,
            fill: f64::from_bits(low & !(1 << 63)),
            denied: low >> 63 == 1,
        }
    }
}

/// A decision: the state after it and how long the request waits, or how long until it could
/// pass within the wait it accepted.
pub(super) type Decision = Result<(SmoothState, u64), u64>;

/// `permits` asked for at `now` by a caller willing to wait up to `max_wait` ns (the burst
/// included). A request that finds the schedule free restarts it: a fresh or idle limiter
/// earns the burst credit less the curve's [restart lead](SmoothCurve::restart_lead).
pub(super) fn decide(
    curve: &SmoothCurve,
    payment: Payment,
    state: SmoothState,
    now: u64,
    permits: f64,
    max_wait: u64,
    burst: u64,
) -> Decision {
    match payment {
        Payment::Later => {
            let restart = now >= state.next_free;
            let ready = if restart { now } else { state.next_free };
            let wait = ready - now;
            if wait > max_wait {
                return Err(wait - max_wait);
            }
            let stored =
                curve.stored_after(state.fill * curve.max(), state.denied, state.next_free, now);
            let (cost, spend) = curve.cost(stored, permits);
            let left = stored - spend;
            let mut next_free = saturating_add(ready, cost);
            if restart {
                next_free = next_free.saturating_add(curve.restart_lead(left, burst));
            }
            let next = SmoothState {
                next_free,
                fill: curve.fill(left),
                denied: false,
            };
            Ok((next, wait))
        }
        Payment::Now => {
            let stored = state.fill * curve.max();
            let (cost, spend) = curve.cost(stored, permits);
            let fresh = state.next_free == NEVER;
            let due = if fresh {
                0
            } else {
                saturating_add(state.next_free, cost)
            };
            let restart = now >= due;
            let ready = if restart { now } else { due };
            let wait = ready - now;
            if wait > max_wait {
                return Err(wait - max_wait);
            }
            // Time beyond what this request's cost needed was idle.
            let stored = if fresh {
                stored
            } else {
                curve.stored_after(stored, state.denied, due, now)
            };
            let left = stored - spend;
            let next_free = if restart {
                ready.saturating_add(curve.restart_lead(left, burst))
            } else {
                ready
            };
            let next = SmoothState {
                next_free,
                fill: curve.fill(left),
                denied: false,
            };
            Ok((next, wait))
        }
    }
}
