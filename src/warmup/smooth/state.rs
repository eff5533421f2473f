//! The bucket's state and the decision on it, free of atomics.

use super::curve::SmoothCurve;
use crate::warmup::Payment;

/// The schedule's time field: 62 bits of ns after the bucket was built (146 years).
const TIME_MASK: u64 = (1 << 62) - 1;
/// The schedule before the first admission in [`Payment::Now`]: the first request passes at
/// once.
pub(super) const NEVER: u64 = TIME_MASK;
/// The last time a schedule can name; later times count as this.
const LATEST: u64 = TIME_MASK - 1;
/// Set while the schedule was priced on a curve replaced an odd number of times.
const ODD_CURVE: u64 = 1 << 62;
/// Set while a request was refused since the last admission.
const DENIED: u64 = 1 << 63;

/// The whole state, one 128-bit word: the schedule and the stored permits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct State {
    /// When a one-permit request may pass, in ns after the bucket was built:
    /// [`Payment::Later`], when the permits reserved so far are paid for; [`Payment::Now`],
    /// when the last request passed plus the price it set for the next permit ([`NEVER`]
    /// before the first).
    pub(super) at: u64,
    /// Whether a request was refused since the last admission.
    pub(super) denied: bool,
    /// Whether the curve that priced `at` was replaced an odd number of times, so that a new
    /// curve re-prices it exactly once.
    pub(super) odd_curve: bool,
    /// Stored permits as a fraction of `max` (`0..=1`): a new rate rescales them with `max`,
    /// as Guava's `setRate` does, without a write.
    pub(super) fill: f64,
}

impl State {
    /// A new bucket's state: full (cold), or empty (warm); nothing scheduled.
    pub(super) fn new(payment: Payment, start_warm: bool) -> Self {
        State {
            at: match payment {
                Payment::Later => 0,
                Payment::Now => NEVER,
            },
            denied: false,
            odd_curve: false,
            fill: if start_warm { 0.0 } else { 1.0 },
        }
    }

    #[inline]
    pub(super) fn pack(self) -> u128 {
        let schedule = self.at.min(TIME_MASK)
            | if self.odd_curve { ODD_CURVE } else { 0 }
            | if self.denied { DENIED } else { 0 };
        u128::from(self.fill.to_bits()) << 64 | u128::from(schedule)
    }

    #[inline]
    pub(super) fn unpack(word: u128) -> Self {
        let schedule = word as u64;
        State {
            at: schedule & TIME_MASK,
            denied: schedule & DENIED != 0,
            odd_curve: schedule & ODD_CURVE != 0,
            fill: f64::from_bits((word >> 64) as u64),
        }
    }

    /// The stored permits on `curve`.
    #[inline]
    pub(super) fn level(self, curve: &SmoothCurve) -> f64 {
        self.fill * curve.max()
    }

    /// Until when the schedule was busy, with `level` permits stored: `at`, or after a refusal
    /// one spacing at that level later. Time after it is idle and refills the bucket.
    ///
    /// A refusal proves demand only before `at` (any request after it would have passed), but
    /// a steady stream refused in part also leaves a gap of less than one of its own intervals
    /// between `at` and its next admitted request. Crediting that gap keeps a load between the
    /// cold and the full rate cold forever (google/guava#3552), so after a refusal the first
    /// spacing is not idle; anything longer is, so a limiter left idle after an overload still
    /// cools down.
    #[inline]
    fn busy_until(self, curve: &SmoothCurve, at: u64, level: f64) -> u64 {
        if self.denied {
            later(at, whole(curve.interval(level)))
        } else {
            at
        }
    }

    /// Permits stored at `now` (an estimate for snapshots: the next decision may credit
    /// slightly less idle time, by the price it pays).
    pub(super) fn stored_at(self, curve: &SmoothCurve, now: u64) -> f64 {
        let level = self.level(curve);
        if self.at == NEVER {
            return level;
        }
        let idle = now.saturating_sub(self.busy_until(curve, self.at, level));
        curve.refill(level, idle)
    }

    /// This state with `at` re-priced from the curve `old` to `new`, paying now: the price of
    /// the next permit that the last admission added to the time it passed, at the same share
    /// of the maximum stored.
    pub(super) fn repriced(self, old: &SmoothCurve, new: &SmoothCurve) -> u64 {
        if self.at == NEVER {
            return NEVER;
        }
        let passed = self.at.saturating_sub(one_permit(old, self.level(old)));
        later(passed, one_permit(new, self.level(new)))
    }
}

/// A request: `permits` at `now` (ns after the bucket was built), by a caller willing to wait
/// up to `max_wait` ns (the burst included).
#[derive(Clone, Copy, Debug)]
pub(super) struct Ask {
    pub(super) now: u64,
    pub(super) permits: f64,
    pub(super) max_wait: u64,
}

/// An admission: the state after it, and how long the request waits.
#[derive(Clone, Copy, Debug)]
pub(super) struct Admission {
    pub(super) state: State,
    pub(super) wait: u64,
}

/// How much longer than `max_wait` a one-permit request at `now` would have to wait, if the
/// schedule alone refuses it (no curve needed).
#[inline]
pub(super) fn refused(payment: Payment, state: State, now: u64, max_wait: u64) -> Option<u64> {
    let fresh = payment == Payment::Now && state.at == NEVER;
    let wait = state.at.saturating_sub(now.min(LATEST));
    (!fresh && wait > max_wait).then(|| wait - max_wait)
}

/// The decision on `ask` from `state`, on `curve`, with `burst` ns of credit: the admission,
/// or how much longer than `max_wait` the request would have to wait. The admission's state
/// is tagged with `odd_curve`, the parity of the curve it was priced on.
///
/// A request that finds the schedule free restarts it: a fresh or idle limiter earns the burst
/// credit less the curve's [restart lead](SmoothCurve::restart_lead).
pub(super) fn decide(
    curve: &SmoothCurve,
    odd_curve: bool,
    payment: Payment,
    state: State,
    ask: Ask,
    burst: u64,
) -> Result<Admission, u64> {
    let ask = Ask {
        now: ask.now.min(LATEST),
        ..ask
    };
    let (at, wait, left) = match payment {
        Payment::Later => pay_later(curve, state, ask, burst)?,
        Payment::Now => pay_now(curve, state, ask, burst)?,
    };
    let state = State {
        at,
        denied: false,
        odd_curve,
        fill: curve.fill(left),
    };
    Ok(Admission { state, wait })
}

/// Paying later: the request is due when the earlier permits are paid for, and its price,
/// on the level refilled by the idle time, delays the next one. The new `at`, the wait and the
/// permits left.
fn pay_later(
    curve: &SmoothCurve,
    state: State,
    ask: Ask,
    burst: u64,
) -> Result<(u64, u64, f64), u64> {
    let Ask {
        now,
        permits,
        max_wait,
    } = ask;
    let restart = now >= state.at;
    let ready = if restart { now } else { state.at };
    let wait = ready - now;
    if wait > max_wait {
        return Err(wait - max_wait);
    }
    let level = state.level(curve);
    let idle = now.saturating_sub(state.busy_until(curve, state.at, level));
    let stored = curve.refill(level, idle);
    let (cost, spend) = curve.cost(stored, permits);
    let left = stored - spend;
    let mut next_free = later(ready, whole(cost));
    if restart {
        next_free = later(next_free, curve.restart_lead(left, burst));
    }
    Ok((next_free, wait, left))
}

/// Paying now: `at` is when a one-permit request is due, and more permits are due once the
/// time since the last pass covers their price (on the level before any refill); the new `at`
/// is when this request passes plus the price of the next permit. The new `at`, the wait and
/// the permits left.
fn pay_now(
    curve: &SmoothCurve,
    state: State,
    ask: Ask,
    burst: u64,
) -> Result<(u64, u64, f64), u64> {
    let Ask {
        now,
        permits,
        max_wait,
    } = ask;
    let level = state.level(curve);
    let (cost, spend) = curve.cost(level, permits);
    let fresh = state.at == NEVER;
    let due = if fresh {
        0
    } else if permits == 1.0 {
        state.at
    } else {
        // The price of the permits beyond the first, which `at` already includes.
        later(state.at, whole(cost - curve.cost(level, 1.0).0))
    };
    let restart = now >= due;
    let ready = if restart { now } else { due };
    let wait = ready - now;
    if wait > max_wait {
        return Err(wait - max_wait);
    }
    // Time beyond what this request's price needed was idle.
    let idle = if fresh {
        0
    } else {
        now.saturating_sub(state.busy_until(curve, due, level))
    };
    let left = curve.refill(level, idle) - spend;
    let passed = if restart {
        later(ready, curve.restart_lead(left, burst))
    } else {
        ready
    };
    Ok((later(passed, one_permit(curve, left)), wait, left))
}

/// What one permit costs from `level` stored permits, in whole ns: the price that paying now
/// adds to the time a request passed to set `at`.
#[inline]
fn one_permit(curve: &SmoothCurve, level: f64) -> u64 {
    whole(curve.cost(level, 1.0).0)
}

/// `at + nanos`, within the schedule's range.
#[inline]
fn later(at: u64, nanos: u64) -> u64 {
    at.saturating_add(nanos).min(LATEST)
}

/// Whole ns of a non-negative span, through `i64` (a cheaper conversion than `u64`'s); `as`
/// saturates at `i64::MAX` ns (292 years, beyond any wait) and maps NaN, which cannot occur
/// here, to 0.
#[inline]
fn whole(nanos: f64) -> u64 {
    nanos as i64 as u64
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::curve::any_curve;
    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// The packed word gives back every field; times past the range count as its end.
        #[test]
        fn a_state_packs_and_unpacks_whole(
            at in prop_oneof![0u64..=LATEST, Just(NEVER), any::<u64>()],
            denied: bool,
            odd_curve: bool,
            fill in prop_oneof![Just(0.0f64), Just(1.0f64), 0.0f64..=1.0],
        ) {
            let state = State { at, denied, odd_curve, fill };
            let back = State::unpack(state.pack());
            prop_assert_eq!(back, State { at: at.min(NEVER), ..state });
        }

        /// Every decision keeps the stored permits within `0..=max`, waits no longer than it
        /// accepted, refuses with the exact shortfall, and schedules within range.
        #[test]
        fn a_decision_stays_within_its_bounds(
            curve in any_curve(),
            payment in prop_oneof![Just(Payment::Now), Just(Payment::Later)],
            at in prop_oneof![0u64..1_000_000_000_000, Just(NEVER), Just(LATEST)],
            denied: bool,
            fill in prop_oneof![Just(0.0f64), Just(1.0f64), 0.0f64..=1.0],
            now in prop_oneof![0u64..1_000_000_000_000, Just(u64::MAX)],
            permits in prop_oneof![Just(1.0f64), 1.0f64..1000.0],
            max_wait in prop_oneof![Just(0u64), 0u64..10_000_000_000, Just(u64::MAX)],
            burst in prop_oneof![Just(0u64), Just(1_000_000_000u64)],
        ) {
            let state = State { at, denied, odd_curve: false, fill };
            let ask = Ask { now, permits, max_wait };
            match decide(&curve, true, payment, state, ask, burst) {
                Ok(Admission { state: next, wait }) => {
                    prop_assert!(wait <= max_wait);
                    prop_assert!((0.0..=1.0).contains(&next.fill), "{}", next.fill);
                    prop_assert!(next.at <= LATEST);
                    prop_assert!(!next.denied && next.odd_curve);
                }
                Err(short) => {
                    prop_assert!(short > 0);
                    let enough = Ask { max_wait: max_wait + short, ..ask };
                    prop_assert!(decide(&curve, true, payment, state, enough, burst).is_ok());
                }
            }
        }
    }
}
