//! The one-permit admission into a busy schedule, worked out from everything but the schedule
//! word, so that only a few integer steps lie between reading the schedule and its
//! compare-and-swap.
//!
//! Under contention, each instruction between the two is time in which another core may take
//! the schedule's cache line and fail the compare-and-swap. [`decide_one`](super::state::decide_one)
//! spends 50–75 instructions there; a [`BusyStep`] spends about 20, after loading the stored
//! permits' word and the run, checking the run's key and unpacking its price before the load.

use super::run::{BASE_BITS, priced};
use super::shared::CurveInForce;
use super::state::{
    LATEST, LevelChange, MAX_PENDING, ODD_CURVE, PENDING_MASK, PENDING_SHIFT, Payment, TIME_MASK,
};

/// Schedules at or after this time leave to the general decision: a price (below
/// `2^BASE_BITS` ns, as a run's base) added to an earlier one stays below [`LATEST`], so the
/// step needs no saturation.
pub(super) const BUSY_LATEST: u64 = LATEST - (1 << BASE_BITS);
const PENDING_BITS: u64 = PENDING_MASK << PENDING_SHIFT;

/// A one-permit request's admission if the schedule is busy, for the stored permits' word it
/// read: with nothing stored (the busy and empty steady state, either payment), the full-rate
/// price, no spend counted; paying now with permits stored, one more spend counted, or the
/// sixteenth, which the bucket then writes to the stored permits' word with the fifteen before
/// it, priced by the run, while the run prices it. It decides exactly as `decide_one` on the
/// same word, stored permits and run.
#[derive(Clone, Copy, Debug)]
pub(super) struct BusyStep {
    /// The stored permits' word the step was worked out for.
    fill_bits: u64,
    now: u64,
    /// The schedule times the request passes at: from `now` (after it, paying now with permits
    /// stored), `span` ns on (up to the wait it accepts).
    earliest: u64,
    span: u64,
    /// A schedule counting fewer spends than this takes the step; `0` takes none.
    steps: u64,
    /// The price with `k` spends counted is `(base − k · slope) >> shift`.
    base: u64,
    slope: u64,
    shift: u32,
    /// Added to the schedule's counted spends: one more (wrapping to none after
    /// [`MAX_PENDING`]) or none.
    count: u64,
    /// The curve's tag.
    odd: u64,
    /// Whether the step leaves the bucket at its full rate.
    warm: bool,
}

impl BusyStep {
    /// The step for a one-permit request at `now` (ns from the bucket's origin), willing to
    /// wait `max_wait` ns, with `fill_bits` and `run` read, on the curve in `force`.
    #[inline(always)]
    pub(super) fn new(
        force: &CurveInForce,
        payment: Payment,
        fill_bits: u64,
        run: u64,
        now: u64,
        max_wait: u64,
    ) -> Self {
        let now = now.min(LATEST);
        let odd = if force.odd() { ODD_CURVE } else { 0 };
        let mut step = BusyStep {
            fill_bits,
            now,
            earliest: now,
            span: 0,
            steps: 0,
            base: 0,
            slope: 0,
            shift: 0,
            count: 0,
            odd,
            warm: true,
        };
        if fill_bits == 0 {
            // Busy and empty, at or after its turn: the full-rate price, no spend counted.
            step.steps = u64::from(force.prices.stable < 1 << BASE_BITS);
            step.base = force.prices.stable;
        } else if let (Payment::Now, Some(priced)) = (payment, priced(run, force, fill_bits)) {
            // Busy before its turn: spend `k + 1`, priced by the run.
            step.earliest = now + 1;
            step.steps = priced.steps;
            step.base = priced.base.wrapping_sub(priced.slope);
            step.slope = priced.slope;
            step.shift = priced.shift;
            step.count = 1 << PENDING_SHIFT;
            step.warm = priced.flat;
        }
        let latest = now.saturating_add(max_wait).min(BUSY_LATEST);
        match latest.checked_sub(step.earliest) {
            Some(span) => step.span = span,
            None => step.steps = 0,
        }
        step
    }

    /// The schedule word after the step, if the schedule read as `word` takes it.
    #[inline(always)]
    pub(super) fn next(&self, word: u64) -> Option<u64> {
        let at = word & TIME_MASK;
        let pending = (word >> PENDING_SHIFT) & PENDING_MASK;
        if at.wrapping_sub(self.earliest) > self.span || pending >= self.steps {
            return None;
        }
        let price = (self.base - pending * self.slope) >> self.shift;
        let counted = word.wrapping_add(self.count) & PENDING_BITS;
        Some(at + price + counted + self.odd)
    }

    /// The change to the stored permits' word the step taken on the schedule `word` makes:
    /// the sixteenth spend writes it with the fifteen counted before; any other step leaves it.
    #[inline(always)]
    pub(super) fn write(&self, word: u64) -> Option<LevelChange> {
        ((word >> PENDING_SHIFT) & PENDING_MASK == MAX_PENDING)
            .then_some(LevelChange::WRITING_SPEND)
    }

    /// The stored permits' word the step was worked out for.
    #[inline(always)]
    pub(super) fn fill(&self) -> f64 {
        f64::from_bits(self.fill_bits)
    }

    /// [`fill`](Self::fill) as bits.
    #[inline(always)]
    pub(super) fn fill_bits(&self) -> u64 {
        self.fill_bits
    }

    /// How long the request admitted on the schedule `word` waits, in ns.
    #[inline(always)]
    pub(super) fn wait(&self, word: u64) -> u64 {
        (word & TIME_MASK) - self.now
    }

    /// Whether the step leaves the bucket at its full rate.
    #[inline(always)]
    pub(super) fn warm(&self) -> bool {
        self.warm
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::curve::{SmoothCurve, any_curve};
    use super::super::run::run;
    use super::super::state::{NEVER, Read, Schedule, decide_one};
    use super::*;

    const SEC: f64 = 1e9;

    fn force(rate: f64, period: f64, factor: f64, burst: u64, generation: u64) -> CurveInForce {
        CurveInForce::new(SmoothCurve::new(rate, period, factor), burst, generation)
    }

    /// The step on `word`, as the bucket takes it: the schedule word after it, the wait, the
    /// stored permits' word it leaves and whether it leaves the full rate.
    fn take(busy: &BusyStep, curve: &SmoothCurve, word: u64) -> Option<(u64, u64, f64, bool)> {
        let next = busy.next(word)?;
        let fill = match busy.write(word) {
            Some(change) => change.apply(curve, busy.fill()),
            None => busy.fill(),
        };
        Some((next, busy.wait(word), fill, busy.warm()))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// A step the schedule takes is `decide_one`'s admission on the same word, stored
        /// permits and run: the same schedule word, wait, stored permits' word and full-rate
        /// flag.
        #[test]
        fn a_busy_step_decides_as_decide_one(
            curve in any_curve(),
            burst in prop_oneof![Just(0u64), 0u64..5_000_000_000],
            generation in 0u64..40,
            payment in prop_oneof![Just(Payment::Now), Just(Payment::Later)],
            fill in prop_oneof![Just(0.0f64), Just(1.0f64), 0.0f64..=1.0],
            pending in 0u64..=MAX_PENDING,
            denied in any::<bool>(),
            odd_curve in any::<bool>(),
            at in prop_oneof![
                4 => 0u64..1_000_000_000_000,
                1 => Just(NEVER),
                1 => BUSY_LATEST - 20..=BUSY_LATEST + 20,
                1 => LATEST - 20..=LATEST,
            ],
            offset in prop_oneof![-2_000_000_000i64..2_000_000_000, -2i64..=2],
            max_wait in prop_oneof![Just(0u64), 0u64..3_000_000_000, Just(u64::MAX)],
            stale_run in prop_oneof![3 => Just(None), 1 => any::<u64>().prop_map(Some)],
        ) {
            let force = CurveInForce::new(curve, burst, generation);
            let run = stale_run.unwrap_or_else(|| run(&force, fill));
            let schedule = Schedule { at, pending, denied, odd_curve };
            let word = schedule.pack();
            let now = at.saturating_add_signed(offset);
            let busy = BusyStep::new(&force, payment, fill.to_bits(), run, now, max_wait);
            if let Some((next, wait, left_fill, warm)) = take(&busy, &curve, word) {
                let read = Read { schedule: Schedule::unpack(word), fill, run };
                let step = decide_one(&force, payment, read, now, max_wait);
                let Some(Ok(step)) = step else {
                    return Err(TestCaseError::fail(format!("decide_one: {step:?}")));
                };
                prop_assert_eq!(next, step.schedule);
                prop_assert_eq!(wait, step.wait);
                prop_assert_eq!(left_fill.to_bits(), step.fill.to_bits());
                prop_assert_eq!(warm, step.left <= curve.threshold());
            }
        }
    }

    /// Each kind of step is taken: busy and empty, a counted spend, and the sixteenth, which
    /// writes; and none on a schedule that is free or too far ahead.
    #[test]
    fn each_kind_of_busy_step_is_taken() {
        let force = force(100.0, 10.0 * SEC, 3.0, 1_000_000_000, 0);
        let curve = force.curve;
        let schedule = |pending| {
            Schedule {
                at: 5_000_000,
                pending,
                denied: false,
                odd_curve: false,
            }
            .pack()
        };
        let step = |fill: f64, now, max_wait| {
            let run = run(&force, fill);
            BusyStep::new(&force, Payment::Now, fill.to_bits(), run, now, max_wait)
        };
        // Busy and empty: the full-rate price, nothing counted, no write.
        let empty = step(0.0, 5_000_000, 0);
        let next = Schedule::unpack(empty.next(schedule(0)).expect("empty"));
        assert_eq!((next.at, next.pending), (5_000_000 + 10_000_000, 0));
        assert_eq!(empty.write(schedule(0)), None);
        assert_eq!(empty.next(schedule(1)), None);
        // Counted spends, then the sixteenth, which writes the fifteen before it.
        let counted = step(1.0, 1_000, SEC as u64);
        for pending in 0..MAX_PENDING {
            let next = Schedule::unpack(counted.next(schedule(pending)).expect("counted"));
            assert_eq!(next.pending, pending + 1);
            assert_eq!(counted.write(schedule(pending)), None);
        }
        let writing = Schedule::unpack(counted.next(schedule(MAX_PENDING)).expect("writing"));
        assert_eq!(writing.pending, 0);
        let written = counted
            .write(schedule(MAX_PENDING))
            .expect("the sixteenth writes");
        assert_eq!((written.pending, written.idle), (MAX_PENDING, 0));
        // Full, the sixteenth costs what the run prices for it: one permit from `max − 16`.
        let price = writing.at - 5_000_000;
        let float = curve.one_after(curve.max(), MAX_PENDING + 1);
        assert!((price as f64 - float).abs() <= 1.0, "{price} vs {float}");
        // Free (the schedule restarts), at its turn with permits stored, beyond the wait, or
        // with a run worked out for another word.
        assert_eq!(counted.next(schedule(0) - 5_000_000 + 500), None);
        assert_eq!(step(1.0, 5_000_000, SEC as u64).next(schedule(0)), None);
        assert_eq!(step(1.0, 1_000, 5_000_000 - 1_001).next(schedule(0)), None);
        assert!(
            step(1.0, 1_000, 5_000_000 - 1_000)
                .next(schedule(0))
                .is_some()
        );
        let stale = run(&force, 0.5);
        let mismatched = BusyStep::new(
            &force,
            Payment::Now,
            1.0f64.to_bits(),
            stale,
            1_000,
            SEC as u64,
        );
        assert_eq!(mismatched.next(schedule(0)), None);
    }
}
