//! The smooth engine's state and its decision, free of atomics.

use super::curve::SmoothCurve;
use super::run;
use super::shared::CurveInForce;

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

/// The largest time the schedule holds, in ns after the bucket was built (9.1 years); later
/// times count as this.
pub(super) const TIME_MASK: u64 = (1 << 58) - 1;
/// The schedule before the first admission in [`Payment::Now`]: the first request passes at
/// once.
pub(super) const NEVER: u64 = TIME_MASK;
/// The last time a schedule can name.
pub(super) const LATEST: u64 = TIME_MASK - 1;
pub(super) const PENDING_SHIFT: u32 = 58;
/// The schedule's four bits for counted spends, below [`ODD_CURVE`].
pub(super) const PENDING_MASK: u64 = 15;
/// The most one-permit spends a schedule counts before an admission deducts them from the
/// stored permits' word.
pub(super) const MAX_PENDING: u64 = 15;
const _: () = assert!(MAX_PENDING <= PENDING_MASK && PENDING_MASK << PENDING_SHIFT < ODD_CURVE);
pub(super) const ODD_CURVE: u64 = 1 << 62;
const DENIED: u64 = 1 << 63;

/// The schedule: the state that orders admissions, one 64-bit word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Schedule {
    /// When a one-permit request may pass, in ns: [`Payment::Later`], when the permits
    /// reserved so far are paid for; [`Payment::Now`], when the last request passed plus the
    /// price it set for the next permit ([`NEVER`] before the first).
    pub(super) at: u64,
    /// Whole permits spent from the stored ones by admissions that left the stored permits'
    /// word as it was (at most [`MAX_PENDING`]): the stored permits are the word's level less
    /// these.
    pub(super) pending: u64,
    /// Whether a request was refused since the last admission.
    pub(super) denied: bool,
    /// Whether the curve that set the price in `at` was replaced an odd number of times, so a
    /// new curve can re-price it once ([`Payment::Now`]).
    pub(super) odd_curve: bool,
}

impl Schedule {
    #[inline]
    pub(super) fn pack(self) -> u64 {
        self.at.min(TIME_MASK)
            | self.pending << PENDING_SHIFT
            | if self.odd_curve { ODD_CURVE } else { 0 }
            | if self.denied { DENIED } else { 0 }
    }

    #[inline]
    pub(super) fn unpack(word: u64) -> Self {
        Schedule {
            at: word & TIME_MASK,
            pending: (word >> PENDING_SHIFT) & PENDING_MASK,
            denied: word & DENIED != 0,
            odd_curve: word & ODD_CURVE != 0,
        }
    }
}

/// How a decision changed the stored permits' word: the schedule's `pending` spends deducted,
/// refilled for `idle` ns, then `spend` taken. Applied to the word the decision read, and again
/// to a newer one if another decision changed it meanwhile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct LevelChange {
    pub(super) pending: u64,
    pub(super) idle: u64,
    pub(super) spend: f64,
}

impl LevelChange {
    /// No change.
    const NONE: LevelChange = LevelChange {
        pending: 0,
        idle: 0,
        spend: 0.0,
    };

    /// The writing spend: the one-permit spend in a busy run after [`MAX_PENDING`] counted
    /// (the sixteenth), which deducts them and itself.
    pub(super) const WRITING_SPEND: LevelChange = LevelChange {
        pending: MAX_PENDING,
        idle: 0,
        spend: 1.0,
    };

    /// The fill fraction after this change to `fill`.
    pub(super) fn apply(self, curve: &SmoothCurve, fill: f64) -> f64 {
        let level = level(curve, fill, self.pending);
        curve.fill(curve.refill(level, self.idle) - self.spend)
    }
}

/// The stored permits: `fill` of the maximum less the `pending` spends the schedule counts.
#[inline]
pub(super) fn level(curve: &SmoothCurve, fill: f64, pending: u64) -> f64 {
    fill * curve.max() - pending as f64
}

/// Whether `level` stored permits refill to `max` in `idle` ns.
#[inline]
pub(super) fn refills_to_max(curve: &SmoothCurve, level: f64, idle: u64) -> bool {
    level + super::curve::nanos_to_f64(idle) * curve.refill_rate() >= curve.max()
}

/// An admission: the schedule after it, the stored permits' word after it (a fill fraction)
/// and how it changed, the stored permits left, and how long the request waits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Step {
    /// The schedule's word after the admission, packed where the decision computed it: the
    /// compare-and-swap reads it back whole, never a field stored a byte at a time.
    pub(super) schedule: u64,
    pub(super) fill: f64,
    pub(super) change: LevelChange,
    pub(super) left: f64,
    pub(super) wait: u64,
}

/// What a decision read: the schedule, the stored permits' word and the run worked out from
/// it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Read {
    pub(super) schedule: Schedule,
    pub(super) fill: f64,
    /// The [run] word.
    pub(super) run: u64,
}

impl Read {
    /// What spend `k` since the word was written costs by the run read, if it prices it for
    /// this word and curve.
    #[inline(always)]
    pub(super) fn run_price(self, force: &CurveInForce, k: u64) -> Option<u64> {
        run::price(self.run, force, self.fill.to_bits(), k)
    }
}

impl Step {
    /// An admission that sets the schedule to `at` and leaves `left` permits stored, clearing
    /// the refusal mark and tagging the schedule with the curve in `force`. One whole permit
    /// spent without a refill is counted in the schedule (the stored permits' word stays as
    /// `read`) until [`MAX_PENDING`] are; any other change writes the word, `fill` (a function
    /// of `left`, computed only then), and deducts the pending spends with it.
    #[inline(always)]
    fn new(
        force: &CurveInForce,
        read: Read,
        at: u64,
        left: f64,
        fill: impl FnOnce() -> f64,
        change: LevelChange,
        wait: u64,
    ) -> Self {
        let pending = read.schedule.pending;
        let (pending, fill, change) = if counts(change, pending) {
            (pending + 1, read.fill, LevelChange::NONE)
        } else {
            (0, fill(), LevelChange { pending, ..change })
        };
        let schedule = Schedule {
            at,
            pending,
            denied: false,
            odd_curve: force.odd(),
        };
        Step {
            schedule: schedule.pack(),
            fill,
            change,
            left,
            wait,
        }
    }
}

/// Whether `change`, decided on a schedule counting `pending` spends, is one more to count
/// rather than a write of the stored permits' word: one whole permit without a refill, fewer
/// than [`MAX_PENDING`] counted. The price of the next permit after it is then the
/// [run]'s, or [`one_after`](SmoothCurve::one_after) the word's level where the run
/// prices nothing. (The run also prices the whole permit after [`MAX_PENDING`] counted, which
/// writes them.)
#[inline(always)]
fn counts(change: LevelChange, pending: u64) -> bool {
    spends_one(change) && pending < MAX_PENDING
}

/// Whether `change` spends one whole permit without a refill: a spend a [run]
/// prices (the next one the schedule counts, or the one that writes them).
#[inline(always)]
fn spends_one(change: LevelChange) -> bool {
    change.idle == 0 && change.spend == 1.0
}

/// A decision: the admission, or how long until the request could pass within the wait it
/// accepted.
pub(super) type Decision = Result<Step, u64>;

/// What a request asks for: `permits` at `now`, waiting up to `max_wait` ns (the burst
/// included).
#[derive(Clone, Copy, Debug)]
pub(super) struct Ask {
    pub(super) now: u64,
    pub(super) permits: f64,
    pub(super) max_wait: u64,
}

/// `at + nanos`, within the schedule's range.
#[inline]
pub(super) fn later(at: u64, nanos: u64) -> u64 {
    at.saturating_add(nanos).min(LATEST)
}

/// How much longer than `max_wait` a one-permit request at `now` would have to wait, if the
/// schedule alone refuses it (no curve needed).
#[inline]
pub(super) fn refused(
    payment: Payment,
    schedule: Schedule,
    now: u64,
    max_wait: u64,
) -> Option<u64> {
    let wait = schedule.at.saturating_sub(now.min(LATEST));
    (!fresh(payment, schedule) && wait > max_wait).then(|| wait - max_wait)
}

/// Whether `schedule` has admitted nothing yet paying now: the first request passes at once.
#[inline]
fn fresh(payment: Payment, schedule: Schedule) -> bool {
    payment == Payment::Now && schedule.at == NEVER
}

/// `permits` asked for at `now` by a caller willing to wait up to `max_wait` ns (the burst
/// included), on what the decision `read`. A request that finds the schedule free restarts it:
/// a fresh or idle limiter earns the burst credit less the curve's
/// [restart lead](SmoothCurve::restart_lead).
///
/// One-permit requests in the two steady states, a busy empty bucket and a full bucket after
/// idling, take the curve's precomputed [`Prices`](super::prices::Prices) in integer steps;
/// the results are the same as the general path's, bit for bit.
#[inline]
pub(super) fn decide(
    force: &CurveInForce,
    payment: Payment,
    read: Read,
    ask: Ask,
    burst: u64,
) -> Decision {
    if ask.permits == 1.0
        && let Some(decision) = decide_one(force, payment, read, ask.now, ask.max_wait)
    {
        return decision;
    }
    let ask = Ask {
        now: ask.now.min(LATEST),
        ..ask
    };
    match payment {
        Payment::Later => pay_later(force, read, ask, burst),
        Payment::Now => pay_now(force, read, ask, burst),
    }
}

/// A one-permit decision at `now`, if it is one the integer steps make on a started schedule:
/// a refusal, one of the steady states, or paying now within a busy schedule.
#[inline(always)]
pub(super) fn decide_one(
    force: &CurveInForce,
    payment: Payment,
    read: Read,
    now: u64,
    max_wait: u64,
) -> Option<Decision> {
    let Read { schedule, fill, .. } = read;
    if fresh(payment, schedule) {
        return None;
    }
    let now = now.min(LATEST);
    let (curve, prices) = (&force.curve, &force.prices);
    let at = schedule.at;
    let admitted = |at, left, fill: f64, change, wait| {
        Some(Ok(Step::new(force, read, at, left, || fill, change, wait)))
    };
    if now <= at {
        let wait = at - now;
        if wait > max_wait {
            return Some(Err(wait - max_wait));
        }
        // Busy and empty: no refill, nothing stored to spend, the full-rate price.
        if fill.to_bits() == 0 && schedule.pending == 0 {
            return admitted(later(at, prices.stable), 0.0, 0.0, LevelChange::NONE, wait);
        }
        // Busy (paying now; at `at` itself the schedule restarts): no refill; a whole permit
        // is spent from the level, counted in the schedule or, the sixteenth, written with the
        // fifteen before it, and priced by the run. Where the run does not price it, the
        // sixteenth is priced as `cost` prices it: above the threshold along the slope, at or
        // below it (from a whole permit left) at the full rate. (Any other spend the run does
        // not price, within a permit above the threshold or below one permit, through the
        // general path: the trapezoid is a call, whose saved registers every admission would
        // pay for.)
        if payment == Payment::Now && now < at {
            let left = level(curve, fill, schedule.pending) - 1.0;
            let change = LevelChange {
                pending: schedule.pending,
                idle: 0,
                spend: 1.0,
            };
            let price = match read.run_price(force, schedule.pending + 1) {
                Some(price) => price,
                None if counts(change, schedule.pending) => return None,
                None => {
                    let above = left - curve.threshold();
                    if above >= 1.0 {
                        whole(curve.one_above(left))
                    } else if above <= 0.0 && left >= 1.0 {
                        // `cost(left, 1.0)`: `(1 + 0) · stable`.
                        prices.stable
                    } else {
                        return None;
                    }
                }
            };
            let at = later(at, price);
            let step = Step::new(force, read, at, left, || curve.fill(left), change, wait);
            return Some(Ok(step));
        }
        return None;
    }
    // Free since `at`: full after idling if the refill reaches `max` and a whole permit is
    // spent from it.
    let level = level(curve, fill, schedule.pending);
    let idle = now - at;
    let full = !schedule.denied && refills_to_max(curve, level, idle);
    let change = LevelChange {
        pending: schedule.pending,
        idle,
        spend: 1.0,
    };
    let left = curve.max() - 1.0;
    match payment {
        Payment::Now if full && level >= 1.0 => {
            let next_free = later(now, prices.lead_after_full);
            let at = later(next_free, prices.next_after_full);
            admitted(at, left, prices.fill_after_full, change, 0)
        }
        Payment::Later if full && curve.max() >= 1.0 => {
            let next_free = later(now, prices.one_from_full);
            let at = later(next_free, prices.lead_after_full);
            admitted(at, left, prices.fill_after_full, change, 0)
        }
        _ => None,
    }
}

/// The general decision paying later: `at` is when the earlier permits are paid for.
fn pay_later(force: &CurveInForce, read: Read, ask: Ask, burst: u64) -> Decision {
    let Ask {
        now,
        permits,
        max_wait,
    } = ask;
    let (curve, schedule) = (&force.curve, read.schedule);
    let restart = now >= schedule.at;
    let ready = if restart { now } else { schedule.at };
    let wait = ready - now;
    if wait > max_wait {
        return Err(wait - max_wait);
    }
    let level = level(curve, read.fill, schedule.pending);
    let idle = now.saturating_sub(busy_until(curve, schedule, level));
    let stored = curve.refill(level, idle);
    let (cost, spend) = curve.cost(stored, permits);
    let left = stored - spend;
    let mut next_free = later(ready, whole(cost));
    if restart {
        next_free = later(next_free, curve.restart_lead(left, burst));
    }
    let change = LevelChange {
        pending: schedule.pending,
        idle,
        spend,
    };
    let fill = || curve.fill(left);
    Ok(Step::new(force, read, next_free, left, fill, change, wait))
}

/// The general decision paying now: `at` is when a one-permit request is due; `permits` are
/// due once the time since the last pass covers their price.
fn pay_now(force: &CurveInForce, read: Read, ask: Ask, burst: u64) -> Decision {
    let Ask {
        now,
        permits,
        max_wait,
    } = ask;
    let (curve, schedule) = (&force.curve, read.schedule);
    let level = level(curve, read.fill, schedule.pending);
    let (cost, spend) = curve.cost(level, permits);
    let fresh = schedule.at == NEVER;
    let due = if fresh {
        0
    } else if permits == 1.0 {
        schedule.at
    } else {
        // The price of the permits beyond the first, which `at` already includes.
        later(schedule.at, whole(cost - curve.cost(level, 1.0).0))
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
        let busy = Schedule {
            at: due,
            ..schedule
        };
        now.saturating_sub(busy_until(curve, busy, level))
    };
    let left = curve.refill(level, idle) - spend;
    let next_free = if restart {
        later(ready, curve.restart_lead(left, burst))
    } else {
        ready
    };
    let change = LevelChange {
        pending: schedule.pending,
        idle,
        spend,
    };
    let k = schedule.pending + 1;
    let run_price = spends_one(change)
        .then(|| read.run_price(force, k))
        .flatten();
    let price = match run_price {
        Some(price) => price,
        None if counts(change, schedule.pending) => {
            whole(curve.one_after(read.fill * curve.max(), k))
        }
        None => whole(curve.cost(left, 1.0).0),
    };
    let at = later(next_free, price);
    let fill = || curve.fill(left);
    Ok(Step::new(force, read, at, left, fill, change, wait))
}

/// The step that deducts the spends `read.schedule` counts from the stored permits' word and
/// changes nothing else, if it counts any.
pub(super) fn flush(curve: &SmoothCurve, read: Read) -> Option<Step> {
    let pending = read.schedule.pending;
    (pending > 0).then(|| {
        let change = LevelChange {
            pending,
            ..LevelChange::NONE
        };
        Step {
            schedule: Schedule {
                pending: 0,
                ..read.schedule
            }
            .pack(),
            fill: change.apply(curve, read.fill),
            change,
            left: level(curve, read.fill, pending),
            wait: 0,
        }
    })
}

/// Until when the schedule was busy, with `level` permits stored: `at`, or after a refusal one
/// spacing at that level later. Time after it is idle and refills the bucket.
///
/// A refusal proves demand only before `at` (any request after it would have passed), but a
/// steady stream refused in part also leaves a gap of less than one of its own intervals
/// between `at` and its next admitted request. Crediting that gap keeps a load between the
/// cold and the full rate cold forever (google/guava#3552), so after a refusal the first
/// spacing is not idle; anything longer is, so a limiter left idle after an overload still
/// cools down.
pub(super) fn busy_until(curve: &SmoothCurve, schedule: Schedule, level: f64) -> u64 {
    if schedule.denied {
        later(schedule.at, whole(curve.interval(level)))
    } else {
        schedule.at
    }
}

/// Whole ns of a non-negative span, through `i64`: one instruction on x86_64 where `u64` takes
/// several; `as` saturates at `i64::MAX` ns (292 years, beyond any wait) and maps NaN, which
/// cannot occur here, to 0.
#[inline]
pub(super) fn whole(nanos: f64) -> u64 {
    nanos as i64 as u64
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::curve::any_curve;
    use super::*;

    const SEC: f64 = 1e9;

    fn force(rate: f64, period: f64, factor: f64, burst: u64) -> CurveInForce {
        let curve = SmoothCurve::new(rate, period, factor);
        CurveInForce::new(curve, burst, 0)
    }

    /// What a decision reads with the run worked out from `fill`.
    fn read(force: &CurveInForce, schedule: Schedule, fill: f64) -> Read {
        Read {
            schedule,
            fill,
            run: run::run(force, fill),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// The integer steps of the steady states decide exactly as the general path: the same
        /// schedule, level, change and wait, bit for bit, or the same refusal.
        #[test]
        fn the_steady_states_decide_as_the_general_path(
            curve in any_curve(),
            burst in prop_oneof![Just(0u64), Just(1_000_000_000u64), 0u64..5_000_000_000],
            payment in prop_oneof![Just(Payment::Now), Just(Payment::Later)],
            fill in prop_oneof![Just(0.0f64), Just(1.0f64), 0.0f64..=1.0],
            full_minus_one in any::<bool>(),
            few in prop_oneof![Just(None), (0.0f64..4.0).prop_map(Some)],
            pending in prop_oneof![Just(0u64), 0u64..=MAX_PENDING],
            denied in any::<bool>(),
            at in 0u64..1_000_000_000_000,
            offset in prop_oneof![-2_000_000_000i64..2_000_000_000, Just(0)],
            max_wait in prop_oneof![Just(0u64), 0u64..3_000_000_000],
            stale_run in prop_oneof![3 => Just(None), 1 => any::<u64>().prop_map(Some)],
        ) {
            let force = CurveInForce::new(curve, burst, 0);
            let fill = match (full_minus_one, few) {
                (true, _) => force.prices.fill_after_full,
                // A few permits stored: the last ones before an empty bucket.
                (false, Some(few)) => force.curve.fill(few),
                (false, None) => fill,
            };
            // No more spends counted than the word's level holds.
            let pending = pending.min((fill * force.curve.max()) as u64);
            let schedule = Schedule { at, pending, denied, odd_curve: false };
            // The run worked out from the word, or (as after a race) any other.
            let read = Read {
                run: stale_run.unwrap_or(run::run(&force, fill)),
                ..read(&force, schedule, fill)
            };
            let now = at.saturating_add_signed(offset);
            let ask = Ask { now, permits: 1.0, max_wait };
            let general = match payment {
                Payment::Later => pay_later(&force, read, ask, burst),
                Payment::Now => pay_now(&force, read, ask, burst),
            };
            if let Some(steady) = decide_one(&force, payment, read, now, max_wait) {
                match (steady, general) {
                    (Ok(a), Ok(b)) => {
                        prop_assert_eq!(a.schedule, b.schedule);
                        prop_assert_eq!(a.fill.to_bits(), b.fill.to_bits());
                        prop_assert_eq!(a.left.to_bits(), b.left.to_bits());
                        prop_assert_eq!(a.wait, b.wait);
                        prop_assert_eq!(a.change.pending, b.change.pending);
                        prop_assert_eq!(a.change.idle, b.change.idle);
                        prop_assert_eq!(a.change.spend.to_bits(), b.change.spend.to_bits());
                    }
                    (a, b) => prop_assert_eq!(a, b),
                }
            }
        }
    }

    /// Both steady states occur: the property above is not vacuous.
    #[test]
    fn the_steady_states_are_taken() {
        let force = force(100.0, 10.0 * SEC, 3.0, 1_000_000_000);
        let busy = Schedule {
            at: 5_000,
            pending: 0,
            denied: false,
            odd_curve: false,
        };
        let read = |fill| read(&force, busy, fill);
        let empty = decide_one(&force, Payment::Now, read(0.0), 1_000, u64::MAX);
        let at = Schedule::unpack(empty.unwrap().unwrap().schedule).at;
        assert_eq!(at, 5_000 + 10_000_000);
        let idle = decide_one(&force, Payment::Now, read(1.0), 100_000_000_000, 0);
        assert_eq!(idle.unwrap().unwrap().fill, force.prices.fill_after_full);
        let later = decide_one(&force, Payment::Later, read(1.0), 100_000_000_000, 0);
        assert!(later.unwrap().is_ok());
    }

    /// A busy run counts whole-permit spends in the schedule and writes the stored permits'
    /// word at every sixteenth, deducting the counted ones; the level stays exact.
    #[test]
    fn a_busy_run_counts_its_spends_and_writes_every_sixteenth() {
        let force = force(100.0, 10.0 * SEC, 3.0, 1_000_000_000);
        let max = force.curve.max();
        let start = Schedule {
            at: 5_000,
            pending: 0,
            denied: false,
            odd_curve: false,
        };
        let mut read = read(&force, start, 1.0);
        for n in 1..=40u64 {
            let step = decide_one(&force, Payment::Now, read, 1_000, u64::MAX)
                .expect("a busy decision")
                .expect("admitted");
            let schedule = Schedule::unpack(step.schedule);
            let written = n % (MAX_PENDING + 1) == 0;
            assert_eq!(schedule.pending, n % (MAX_PENDING + 1), "after {n}");
            assert_eq!(step.fill != read.fill, written, "after {n}");
            assert_eq!(
                level(&force.curve, step.fill, schedule.pending),
                max - n as f64
            );
            assert_eq!(step.left, max - n as f64);
            read = Read {
                schedule,
                fill: step.fill,
                // Written with the word.
                run: if written {
                    run::run(&force, step.fill)
                } else {
                    read.run
                },
            };
        }
    }

    #[test]
    fn schedules_pack_and_unpack() {
        for schedule in [
            Schedule {
                at: NEVER,
                pending: MAX_PENDING,
                denied: true,
                odd_curve: false,
            },
            Schedule {
                at: 0,
                pending: 0,
                denied: false,
                odd_curve: true,
            },
            Schedule {
                at: 12_345,
                pending: 3,
                denied: true,
                odd_curve: true,
            },
        ] {
            assert_eq!(Schedule::unpack(schedule.pack()), schedule);
        }
    }
}
