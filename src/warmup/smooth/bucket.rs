//! The lock-free bucket: the schedule, the stored permits and their run in one 64-bit word
//! each, the curve under a sequence lock.

use super::busy::BusyStep;
use super::curve::SmoothCurve;
use super::lanes::{LaneStep, Lanes};
use super::run::run;
use super::shared::{CurveInForce, SharedCurve};
use super::state::{
    Ask, LevelChange, NEVER, Payment, Read, Schedule, Step, busy_until, decide, decide_one, flush,
    later, level, refused, whole,
};
use crate::sync::{AtomicU64, Line, Ordering};

/// The lock-free engine.
///
/// Admissions are ordered by one 64-bit compare-and-swap of the schedule, on a cache line of
/// its own; a refusal writes only to mark demand, at most once between two admissions. The
/// stored permits (a fill fraction, `f64` bits) are a second word, less the whole permits the
/// schedule counts as spent since it was written (up to
/// [`MAX_PENDING`](super::state::MAX_PENDING)). It is written after the schedule, and only when
/// an admission changes the stored permits other than by one more counted permit: in a busy run
/// every sixteenth admission writes it with the fifteen counted before; the two steady states
/// (busy and empty, full after idling) never do. A decision that reads the word while another
/// admission is between its two writes prices its request with the level from before that
/// admission and the spends it deducted; the admission that then writes re-applies its change
/// to the newest word, so no change is lost. With each write of the stored permits, the
/// [run](super::run) worked out from them is stored: the prices of the spends the schedule will
/// count and of the sixteenth, in integers.
///
/// A one-permit request takes a [lane](super::lanes) where one applies (the two steady states;
/// paying now, a spend the schedule counts): the schedule word, the stored permits' word (and
/// the run), a few comparisons with constants worked out once per curve, and the
/// compare-and-swap. Otherwise, on the curve it was built with, it works out its [`BusyStep`]
/// from the stored permits and the run before it reads the schedule again, so that a few
/// integer steps separate that read from the compare-and-swap: under contention, a longer gap
/// lets another core's admission land in between and fail it. Reading the stored permits
/// again after the schedule keeps the step's word no older than a decision reading them after
/// the schedule would see.
#[derive(Debug)]
pub(crate) struct SmoothBucket {
    curve: SharedCurve,
    payment: Payment,
    /// How far ahead of its turn a request may pass, in ns.
    burst: u64,
    /// The clock's reading when the bucket was built: the schedule counts from it.
    origin: u64,
    /// On a cache line of its own.
    schedule: Line<AtomicU64>,
    /// Stored permits as a fraction of `max` (`0..=1`, `f64` bits): a new rate rescales them
    /// with `max`, as Guava's `setRate` does, without touching this word.
    fill: AtomicU64,
    /// The [run](super::run) worked out from the stored permits' word, written after it.
    run: AtomicU64,
}

impl SmoothBucket {
    /// A bucket built at `now`: cold (full), or warm (empty) if `start_warm`. A request may
    /// pass up to `burst` ns before its turn; the first request restarts the schedule as after
    /// an idle spell, so a new bucket has the credit an idle one has.
    pub(crate) fn new(
        curve: SmoothCurve,
        payment: Payment,
        now: u64,
        start_warm: bool,
        burst: u64,
    ) -> Self {
        let schedule = Schedule {
            at: match payment {
                Payment::Later => 0,
                Payment::Now => NEVER,
            },
            pending: 0,
            denied: false,
            odd_curve: false,
        };
        let fill: f64 = if start_warm { 0.0 } else { 1.0 };
        let curve = SharedCurve::new(curve, burst, payment);
        let run = run(&curve.load(), fill);
        SmoothBucket {
            curve,
            payment,
            burst,
            origin: now,
            schedule: Line::new(AtomicU64::new(schedule.pack())),
            fill: AtomicU64::new(fill.to_bits()),
            run: AtomicU64::new(run),
        }
    }

    /// [`reserve_watched`](Self::reserve_watched) without the full-rate flag.
    #[cfg(test)]
    pub(crate) fn reserve(&self, now: u64, permits: f64, max_wait: u64) -> Result<u64, u64> {
        self.reserve_watched(now, permits, max_wait)
            .map(|(wait, _)| wait)
    }

    /// Reserves `permits` at `now` if they are available within `max_wait` ns: `Ok` with how
    /// long to wait before using them, or `Err` with how much longer the caller would have to
    /// be willing to wait.
    ///
    /// With the `tracing` feature, `Ok` also says whether the admission left the bucket at its
    /// full rate (stored permits at or below the threshold); without it, always `false`, at no
    /// cost.
    #[inline]
    pub(crate) fn reserve_watched(
        &self,
        now: u64,
        permits: f64,
        max_wait: u64,
    ) -> Result<(u64, bool), u64> {
        let now = now.saturating_sub(self.origin);
        if permits == 1.0 {
            let word = self.schedule.load(Ordering::Acquire);
            let schedule = Schedule::unpack(word);
            if schedule.denied {
                // A refusal already marked needs neither the curve nor a write.
                if let Some(short) = refused(self.payment, schedule, now, max_wait) {
                    return Err(short);
                }
            } else if let Some(admitted) = self.take_lane(word, now, max_wait) {
                return Ok(admitted);
            }
            return self.reserve_one(now, max_wait);
        }
        self.reserve_any(
            self.schedule.load(Ordering::Acquire),
            now,
            permits,
            max_wait,
        )
    }

    /// The admission a [lane](super::lanes) of the curve in force makes on the schedule read
    /// as `word`, if one takes it and wins the compare-and-swap (a lost race in a steady lane
    /// leaves to the decisions that read the schedule again; the counted lane tries again).
    ///
    /// On the curve built with, the lanes are read in place, field by field as a lane needs
    /// them, and the counted lane is inline too. On a replacement they are copied out of the
    /// lock, and the counted lane is out of line, so that the steady lanes keep a small frame.
    #[inline(always)]
    fn take_lane(&self, word: u64, now: u64, max_wait: u64) -> Option<(u64, bool)> {
        let Some(lanes) = self.curve.initial_lanes() else {
            let lanes = self.curve.lanes()?;
            let fill = self.fill.load(Ordering::Acquire);
            return match lanes.steady(word, fill, now, max_wait) {
                Some(step) => self.swap_lane(word, step),
                None => self.take_counted(word, fill, now, max_wait),
            };
        };
        let fill = self.fill.load(Ordering::Acquire);
        match lanes.steady(word, fill, now, max_wait) {
            Some(step) => self.swap_lane(word, step),
            None => self.count_spend(lanes, word, fill, now, max_wait),
        }
    }

    /// [`take_lane`](Self::take_lane)'s counted lane on a replaced curve, with the stored
    /// permits' word `fill`. It reads the lanes again rather than taking them as an argument,
    /// which would leave them stored to the stack in the steady lanes' frame.
    #[inline(never)]
    fn take_counted(&self, word: u64, fill: u64, now: u64, max_wait: u64) -> Option<(u64, bool)> {
        self.count_spend(&self.curve.lanes()?, word, fill, now, max_wait)
    }

    /// The counted lane's admission on `lanes`, with the stored permits' word `fill`, and the
    /// write of the stored permits if it is the writing spend. A lost race is tried again on
    /// the schedule that won it, with the stored permits read again, while the lane takes it.
    #[inline(always)]
    fn count_spend(
        &self,
        lanes: &Lanes,
        word: u64,
        fill: u64,
        now: u64,
        max_wait: u64,
    ) -> Option<(u64, bool)> {
        let (mut word, mut fill) = (word, fill);
        loop {
            let run = self.run.load(Ordering::Acquire);
            let step = lanes.counted(word, fill, run, now, max_wait)?;
            match self.schedule.compare_exchange_weak(
                word,
                step.next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    if step.writes {
                        self.store_writing_spend(fill);
                    }
                    return Some(step.admitted());
                }
                Err(actual) => {
                    word = actual;
                    fill = self.fill.load(Ordering::Acquire);
                }
            }
        }
    }

    /// Swaps the schedule from `word` to a lane's `step`: the wait and the full-rate flag, or
    /// `None` if another decision changed the schedule first.
    #[inline(always)]
    fn swap_lane(&self, word: u64, step: LaneStep) -> Option<(u64, bool)> {
        self.schedule
            .compare_exchange_weak(word, step.next, Ordering::AcqRel, Ordering::Acquire)
            .ok()?;
        Some(step.admitted())
    }

    /// [`reserve_watched`](Self::reserve_watched) for one permit: on the curve built with
    /// (read in place), a [`BusyStep`] where the schedule takes one; else, and on a
    /// replacement (copied out of the lock by
    /// [`reserve_one_replaced`](Self::reserve_one_replaced)), the decisions [`decide_one`]
    /// makes, in one attempt and a small frame; a lost race, a refusal to mark and any other
    /// decision through [`reserve_any`](Self::reserve_any).
    #[inline(never)]
    fn reserve_one(&self, now: u64, max_wait: u64) -> Result<(u64, bool), u64> {
        match self.curve.initial() {
            Some(force) => self.attempt_busy(force, now, max_wait),
            None => self.reserve_one_replaced(now, max_wait),
        }
    }

    /// [`reserve_one`](Self::reserve_one) on a replaced curve, out of its frame: the
    /// [`decide_one`] decisions on the schedule read after copying the curve.
    ///
    /// Not a [`BusyStep`]: worked out from the copy, its constants are stores to the stack the
    /// compare-and-swap waits for, and single-threaded it took 23 ns in the steady states
    /// where this takes 18.
    #[inline(never)]
    fn reserve_one_replaced(&self, now: u64, max_wait: u64) -> Result<(u64, bool), u64> {
        let force = self.curve.read();
        let word = self.schedule.load(Ordering::Acquire);
        self.attempt_one(&force, word, now, max_wait)
    }

    /// A [`BusyStep`] while the schedule takes one, else [`attempt_one`](Self::attempt_one).
    #[inline(always)]
    fn attempt_busy(
        &self,
        force: &CurveInForce,
        now: u64,
        max_wait: u64,
    ) -> Result<(u64, bool), u64> {
        let busy_step = |fill| {
            let run = self.run.load(Ordering::Acquire);
            BusyStep::new(force, self.payment, fill, run, now, max_wait)
        };
        let mut busy = busy_step(self.fill.load(Ordering::Acquire));
        let mut word = self.schedule.load(Ordering::Acquire);
        // Retried on the word that won a race while it still takes the step.
        loop {
            // The stored permits' word, read after the schedule: a step worked out for an
            // older one is worked out again.
            let fill = self.fill.load(Ordering::Acquire);
            if fill != busy.fill_bits() {
                busy = busy_step(fill);
            }
            let Some(next) = busy.next(word) else {
                return self.attempt_one(force, word, now, max_wait);
            };
            match self.schedule.compare_exchange_weak(
                word,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    if let Some(change) = busy.write(word) {
                        self.store_change(busy.fill(), change, &force.curve);
                    }
                    return Ok((busy.wait(word), cfg!(feature = "tracing") && busy.warm()));
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// One attempt at a [`decide_one`] decision on `force` and the schedule read as `word`,
    /// else the general loop.
    #[inline(always)]
    fn attempt_one(
        &self,
        force: &CurveInForce,
        word: u64,
        now: u64,
        max_wait: u64,
    ) -> Result<(u64, bool), u64> {
        let read = self.read(word);
        let decision = decide_one(force, self.payment, read, now, max_wait);
        if let Some(Ok(step)) = decision {
            return match self.admit(word, read.fill, &step, &force.curve) {
                Ok(admitted) => Ok(admitted),
                // Lost a race: decide again on the word that won it.
                Err(actual) => self.reserve_any(actual, now, 1.0, max_wait),
            };
        }
        if let Some(Err(short)) = decision
            && read.schedule.denied
        {
            return Err(short);
        }
        self.reserve_any(word, now, 1.0, max_wait)
    }

    /// The schedule `word` and the stored permits' and run words now.
    #[inline(always)]
    fn read(&self, word: u64) -> Read {
        Read {
            schedule: Schedule::unpack(word),
            fill: f64::from_bits(self.fill.load(Ordering::Acquire)),
            run: self.run.load(Ordering::Acquire),
        }
    }

    /// [`reserve_watched`](Self::reserve_watched) for any request on any curve, from the
    /// schedule read as `word`, retrying until its compare-and-swap succeeds.
    #[inline(never)]
    fn reserve_any(
        &self,
        mut word: u64,
        now: u64,
        permits: f64,
        max_wait: u64,
    ) -> Result<(u64, bool), u64> {
        loop {
            // A curve replaced between this read and the compare-and-swap below only means
            // this decision used the rate in force when it started.
            let force = self.curve.load();
            let read = self.read(word);
            let schedule = read.schedule;
            let decision = decide(
                &force,
                self.payment,
                read,
                Ask {
                    now,
                    permits,
                    max_wait,
                },
                self.burst,
            );
            let step = match decision {
                Ok(step) => step,
                Err(short) => {
                    if schedule.denied {
                        return Err(short);
                    }
                    // Mark the unmet demand once; a lost race means someone else changed
                    // the schedule, so decide again.
                    let marked = Schedule {
                        denied: true,
                        ..schedule
                    };
                    match self.schedule.compare_exchange_weak(
                        word,
                        marked.pack(),
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => return Err(short),
                        Err(actual) => {
                            word = actual;
                            continue;
                        }
                    }
                }
            };
            match self.admit(word, read.fill, &step, &force.curve) {
                Ok(admitted) => return Ok(admitted),
                Err(actual) => word = actual,
            }
        }
    }

    /// Puts the admission `step`, decided on the schedule `word` and the stored permits `fill`,
    /// in force if the schedule is still `word`: the wait and the full-rate flag, or the word
    /// that won the race.
    #[inline(always)]
    fn admit(
        &self,
        word: u64,
        fill: f64,
        step: &Step,
        curve: &SmoothCurve,
    ) -> Result<(u64, bool), u64> {
        self.schedule.compare_exchange_weak(
            word,
            step.schedule,
            Ordering::AcqRel,
            Ordering::Acquire,
        )?;
        self.store_level(fill, step.fill, step.change, curve);
        // Whether the admission left the bucket at its full rate, with `tracing` only.
        let warm = cfg!(feature = "tracing") && step.left <= curve.threshold();
        Ok((step.wait, warm))
    }

    /// Records the writing spend (the sixteenth) a lane admitted on the stored permits' word
    /// `fill_bits`, on the curve in force.
    #[inline(never)]
    fn store_writing_spend(&self, fill_bits: u64) {
        let force = self.curve.load();
        let read = f64::from_bits(fill_bits);
        let change = LevelChange::WRITING_SPEND;
        self.store_level(read, change.apply(&force.curve, read), change, &force.curve);
    }

    /// Records the `change` a [`BusyStep`] decided on the stored permits `read` makes, out of
    /// the step's frame.
    #[inline(never)]
    fn store_change(&self, read: f64, change: LevelChange, curve: &SmoothCurve) {
        self.store_level(read, change.apply(curve, read), change, curve);
    }

    /// Records an admission's `change` to the stored permits, which were `read` when it
    /// decided and which it leaves as `fill`: nothing if that is the word read, else the change
    /// applied to the newest level, and the run worked out from what it wrote.
    ///
    /// The run is worked out before the word is written, so that a decision seldom reads the
    /// new word with the old run (which prices nothing), and stored after it, not swapped: a
    /// writer delayed past a later one may leave a run that does not match the word, which
    /// then prices nothing until the next write.
    #[inline]
    fn store_level(&self, read: f64, fill: f64, change: LevelChange, curve: &SmoothCurve) {
        let (mut current, mut next) = (read.to_bits(), fill.to_bits());
        while next != current {
            let run = self.run_for(f64::from_bits(next));
            match self.fill.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return self.run.store(run, Ordering::Release),
                Err(actual) => {
                    current = actual;
                    next = change.apply(curve, f64::from_bits(actual)).to_bits();
                }
            }
        }
    }

    /// The run worked out from the stored permits' word `fill` on the curve in force. Out of
    /// line, so that the decisions that call it keep the curve they read in registers.
    #[inline(never)]
    fn run_for(&self, fill: f64) -> u64 {
        run(&self.curve.load(), fill)
    }

    /// Permits stored at `now`, counting the idle time since the schedule was last free (an
    /// estimate for snapshots: the next decision may credit slightly less, by the price it
    /// pays).
    pub(crate) fn stored_at(&self, now: u64) -> f64 {
        let now = now.saturating_sub(self.origin);
        let curve = self.curve.load().curve;
        let schedule = self.schedule();
        let stored = level(&curve, self.fill(), schedule.pending);
        if schedule.at == NEVER {
            return stored;
        }
        curve.refill(
            stored,
            now.saturating_sub(busy_until(&curve, schedule, stored)),
        )
    }

    /// How far ahead of its turn a request may pass, in ns.
    pub(crate) fn burst(&self) -> u64 {
        self.burst
    }

    /// The curve in force.
    pub(crate) fn curve(&self) -> SmoothCurve {
        self.curve.load().curve
    }

    /// Replaces the curve. Stored permits keep their share of `max` (Guava's rescaling); the
    /// time already reserved is kept, so the next caller still waits it out. Paying now, the
    /// price the last admission set for the next permit is re-priced on the new curve.
    ///
    /// The spends the schedule counts are deducted from the stored permits' word first, so
    /// that they are rescaled with the rest; spends counted by admissions racing the
    /// replacement stay whole permits.
    pub(crate) fn set_curve(&self, curve: &SmoothCurve) {
        self.flush_pending();
        let replaced = self.curve.replace(curve);
        self.run.store(self.run_for(self.fill()), Ordering::Release);
        if self.payment == Payment::Later {
            return;
        }
        let odd = !replaced.odd();
        let mut word = self.schedule.load(Ordering::Acquire);
        loop {
            let schedule = Schedule::unpack(word);
            if schedule.odd_curve == odd || schedule.at == NEVER {
                // Priced on the new curve already, or nothing priced yet.
                return;
            }
            let fill = self.fill();
            let old_level = level(&replaced.curve, fill, schedule.pending);
            let old_price = replaced.curve.cost(old_level, 1.0).0;
            let passed = schedule.at.saturating_sub(whole(old_price));
            let new_level = level(curve, fill, schedule.pending);
            let repriced = Schedule {
                at: later(passed, whole(curve.cost(new_level, 1.0).0)),
                odd_curve: odd,
                ..schedule
            };
            match self.schedule.compare_exchange_weak(
                word,
                repriced.pack(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(actual) => word = actual,
            }
        }
    }

    /// Deducts the spends the schedule counts from the stored permits' word.
    fn flush_pending(&self) {
        let mut word = self.schedule.load(Ordering::Acquire);
        loop {
            let read = self.read(word);
            let force = self.curve.load();
            let Some(step) = flush(&force.curve, read) else {
                return;
            };
            match self.schedule.compare_exchange_weak(
                word,
                step.schedule,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return self.store_level(read.fill, step.fill, step.change, &force.curve),
                Err(actual) => word = actual,
            }
        }
    }

    /// The schedule now.
    pub(super) fn schedule(&self) -> Schedule {
        Schedule::unpack(self.schedule.load(Ordering::Acquire))
    }

    /// The stored permits now, as a fraction of `max`.
    pub(super) fn fill(&self) -> f64 {
        f64::from_bits(self.fill.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const SEC: u64 = 1_000_000_000;

    /// A bucket on a manual timeline, driven as Guava's `acquire()` is in its tests: each
    /// acquire waits as long as the bucket says, and the clock moves on by that much.
    struct Timeline {
        bucket: SmoothBucket,
        now: u64,
    }

    impl Timeline {
        fn new(rate: f64, period: u64, factor: f64, payment: Payment) -> Self {
            let curve = SmoothCurve::new(rate, period as f64, factor);
            Timeline {
                bucket: SmoothBucket::new(curve, payment, 0, false, 0),
                now: 0,
            }
        }

        /// One blocking acquire: the wait, in µs rounded to the nearest (Guava's waits are
        /// whole µs, truncated per step).
        fn acquire(&mut self) -> u64 {
            let wait = self.bucket.reserve(self.now, 1.0, u64::MAX).unwrap();
            self.now += wait;
            wait
        }

        fn waits_us(&mut self, n: usize) -> Vec<u64> {
            (0..n).map(|_| (self.acquire() + 500) / 1000).collect()
        }

        /// Admissions per second under a try-acquire every millisecond, for `seconds`.
        fn saturate(&mut self, seconds: usize) -> Vec<u32> {
            (0..seconds)
                .map(|_| {
                    let mut passed = 0;
                    for _ in 0..1000 {
                        if self.bucket.reserve(self.now, 1.0, 0).is_ok() {
                            passed += 1;
                        }
                        self.now += MS;
                    }
                    passed
                })
                .collect()
        }
    }

    /// Each wait within a µs or two of Guava's (which truncates every step to whole µs).
    fn assert_close(actual: &[u64], expected: &[u64]) {
        assert_eq!(actual.len(), expected.len());
        for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
            assert!(
                a.abs_diff(*e) <= 2,
                "wait {i}: {a} µs, Guava {e} µs ({actual:?})"
            );
        }
    }

    /// TV-30, Guava's `testWarmUp`: 2 permits/s, 4 s, factor 3, paying later.
    #[test]
    fn guava_warm_up() {
        let mut t = Timeline::new(2.0, 4 * SEC, 3.0, Payment::Later);
        let cold = [
            0, 1_375_000, 1_125_000, 875_000, 625_000, 500_000, 500_000, 500_000,
        ];
        assert_close(&t.waits_us(8), &cold);
        t.now += 500 * MS + 4 * SEC; // cold again
        assert_close(&t.waits_us(8), &cold);
        t.now += 500 * MS + 2 * SEC; // half way: still warm
        assert_close(
            &t.waits_us(8),
            &[
                0, 500_000, 500_000, 500_000, 500_000, 500_000, 500_000, 500_000,
            ],
        );
    }

    /// TV-31, Guava's `testWarmUpWithColdFactor` (factor 10) and its factor-1 variant.
    #[test]
    fn guava_warm_up_with_cold_factor() {
        let mut t = Timeline::new(5.0, 4 * SEC, 10.0, Payment::Later);
        let cold = [
            0, 1_752_500, 1_257_500, 762_500, 300_227, 200_000, 200_000, 200_000,
        ];
        assert_close(&t.waits_us(8), &cold);
        t.now += 200 * MS + 4 * SEC;
        assert_close(&t.waits_us(8), &cold);
        t.now += 200 * MS + SEC;
        assert_close(
            &t.waits_us(8),
            &[
                0, 200_000, 200_000, 200_000, 200_000, 200_000, 200_000, 200_000,
            ],
        );

        let mut flat = Timeline::new(5.0, 4 * SEC, 1.0, Payment::Later);
        let steady = [
            0, 200_000, 200_000, 200_000, 200_000, 200_000, 200_000, 200_000,
        ];
        assert_close(&flat.waits_us(8), &steady);
        flat.now += 340 * MS;
        assert_close(&flat.waits_us(8), &steady);
    }

    /// Under saturation the admitted rate climbs from the cold rate to the full rate within the
    /// warm-up period, in both payment styles.
    #[test]
    fn saturation_reaches_the_full_rate_within_the_period() {
        for payment in [Payment::Now, Payment::Later] {
            let mut t = Timeline::new(10.0, 10 * SEC, 3.0, payment);
            let per_second = t.saturate(16);
            assert!(per_second[0] <= 4, "{payment:?}: {per_second:?}");
            assert!(
                per_second.windows(2).all(|w| w[1] + 1 >= w[0]),
                "{payment:?}: the rate never falls back: {per_second:?}"
            );
            assert!(
                per_second[10..].iter().all(|&n| n == 10),
                "{payment:?}: full rate from second 10 on: {per_second:?}"
            );
        }
    }

    /// A warm limiter under 1 s on / 1 s off load stays warm (Sentinel's bulk subtraction
    /// re-cools it).
    #[test]
    fn bursty_load_keeps_it_warm() {
        for payment in [Payment::Now, Payment::Later] {
            let curve = SmoothCurve::new(10.0, 10.0 * SEC as f64, 3.0);
            let mut t = Timeline {
                bucket: SmoothBucket::new(curve, payment, 0, true, 0),
                now: 0,
            };
            for cycle in 0..30 {
                let on = t.saturate(1)[0];
                assert!(on >= 10, "{payment:?}, cycle {cycle}: {on} admitted");
                t.now += SEC;
            }
        }
    }

    /// A steady load between the cold and the full rate warms the limiter up (google/guava#3552:
    /// Guava keeps it cold forever).
    #[test]
    fn a_steady_load_below_the_full_rate_warms_it_up() {
        for payment in [Payment::Now, Payment::Later] {
            let mut t = Timeline::new(10.0, 10 * SEC, 3.0, payment);
            let mut per_second = Vec::new();
            for _ in 0..60 {
                let mut passed = 0;
                for _ in 0..5 {
                    if t.bucket.reserve(t.now, 1.0, 0).is_ok() {
                        passed += 1;
                    }
                    t.now += 200 * MS;
                }
                per_second.push(passed);
            }
            assert!(
                per_second[0] < 5,
                "{payment:?}: starts cold: {per_second:?}"
            );
            assert!(
                per_second[30..].iter().all(|&n| n == 5),
                "{payment:?}: every request passes once warm: {per_second:?}"
            );
        }
    }

    /// TV-13 for the smooth bucket: where Sentinel admits nothing, 1 permit/s with factor 3
    /// admits requests spaced by the cold interval (3 s at `max`) and warms up. Paying now, the
    /// first passes at once; the next pay 2.4, 2.0 and 1.6 s (the mean intervals between 9 and 8,
    /// 8 and 7, 7 and 6 stored permits, on a curve from 10 permits at 3 s to 5 at 1 s).
    #[test]
    fn a_tiny_rate_admits_one_request_per_cold_interval() {
        let mut t = Timeline::new(1.0, 10 * SEC, 3.0, Payment::Now);
        let mut passed_at = Vec::new();
        for second in 0..12 {
            for _ in 0..10 {
                if t.bucket.reserve(t.now, 1.0, 0).is_ok() {
                    passed_at.push(second);
                }
                t.now += 100 * MS;
            }
        }
        assert_eq!(passed_at[..4], [0, 2, 4, 6], "{passed_at:?}");
    }

    #[test]
    fn a_refusal_reports_the_wait_and_marks_demand_once() {
        let mut t = Timeline::new(10.0, 10 * SEC, 3.0, Payment::Now);
        assert_eq!(t.bucket.reserve(t.now, 1.0, 0), Ok(0));
        let after_admission = (t.bucket.schedule(), t.bucket.fill());
        let short = t.bucket.reserve(t.now, 1.0, 0).unwrap_err();
        // The price of the next permit: the mean interval between `max − 1` and `max − 2`.
        let interval = t.bucket.curve().interval(t.bucket.curve().max() - 1.5);
        assert!(
            short.abs_diff(interval as u64) < 1000,
            "{short} vs {interval}"
        );
        let marked = t.bucket.schedule();
        assert!(marked.denied && !after_admission.0.denied);
        assert_eq!(marked.at, after_admission.0.at);
        assert_eq!(t.bucket.fill(), after_admission.1);
        // A second refusal writes nothing.
        assert_eq!(t.bucket.reserve(t.now, 1.0, 0), Err(short));
        assert_eq!(t.bucket.schedule(), marked);
        // Waiting as long as it said admits.
        t.now += short;
        assert_eq!(t.bucket.reserve(t.now, 1.0, 0), Ok(0));
    }

    /// Paying now, a new rate re-prices the next permit: the price the last admission set at
    /// the old rate is replaced by the new rate's, once.
    #[test]
    fn a_new_rate_reprices_the_next_permit() {
        let curve = SmoothCurve::new(10.0, 10.0 * SEC as f64, 3.0);
        let bucket = SmoothBucket::new(curve, Payment::Now, 0, true, 0);
        assert_eq!(bucket.reserve(0, 1.0, 0), Ok(0));
        assert_eq!(bucket.schedule().at, 100 * MS);
        bucket.set_curve(&SmoothCurve::new(1000.0, 10.0 * SEC as f64, 3.0));
        assert_eq!(bucket.schedule().at, MS);
        assert_eq!(bucket.reserve(MS, 1.0, 0), Ok(0));
        // Back to 10 per second, and again: each replacement re-prices once.
        bucket.set_curve(&curve);
        assert_eq!(bucket.schedule().at, 101 * MS);
        bucket.set_curve(&curve);
        assert_eq!(bucket.schedule().at, 101 * MS);
    }

    /// The schedule counts from the bucket's build, so a clock reading far beyond the
    /// schedule's 59 bits (here, ns since 1970) spaces requests as one starting at zero.
    #[test]
    fn a_clock_far_from_zero_spaces_requests_as_one_at_zero() {
        const EPOCH: u64 = 1_800_000_000 * SEC;
        for payment in [Payment::Now, Payment::Later] {
            let curve = SmoothCurve::new(100.0, 10.0 * SEC as f64, 3.0);
            let bucket = SmoothBucket::new(curve, payment, EPOCH, true, 0);
            assert_eq!(bucket.reserve(EPOCH, 1.0, 0), Ok(0), "{payment:?}");
            assert_eq!(
                bucket.reserve(EPOCH + 5 * MS, 1.0, 0),
                Err(5 * MS),
                "{payment:?}"
            );
            assert_eq!(
                bucket.reserve(EPOCH + 10 * MS, 1.0, 0),
                Ok(0),
                "{payment:?}"
            );
        }
    }

    /// The schedule holds 9.1 years after the build: a bucket older than that admits every
    /// request, as the README says.
    #[test]
    fn a_bucket_older_than_the_schedule_admits_every_request() {
        for payment in [Payment::Now, Payment::Later] {
            let curve = SmoothCurve::new(100.0, 10.0 * SEC as f64, 3.0);
            let bucket = SmoothBucket::new(curve, payment, 0, true, 0);
            let young = 1 << 57;
            assert_eq!(bucket.reserve(young, 1.0, 0), Ok(0), "{payment:?}");
            assert!(bucket.reserve(young, 1.0, 0).is_err(), "{payment:?}");
            let old = (1 << 58) + SEC;
            for _ in 0..3 {
                assert_eq!(bucket.reserve(old, 1.0, 0), Ok(0), "{payment:?}");
            }
        }
    }

    /// After two new curves (the schedule's tag back to the first curve's parity) the lanes
    /// are the curve in force's, not the first's: a busy, empty bucket spaces its admissions
    /// by the third curve's full rate.
    #[test]
    fn the_lanes_after_two_new_curves_are_the_last_ones() {
        let curve = |rate| SmoothCurve::new(rate, 10.0 * SEC as f64, 3.0);
        let bucket = SmoothBucket::new(curve(1000.0), Payment::Now, 0, true, SEC);
        bucket.set_curve(&curve(500.0));
        bucket.set_curve(&curve(100.0));
        let mut at = Vec::new();
        for _ in 0..3 {
            bucket.reserve(0, 1.0, SEC).unwrap();
            at.push(bucket.schedule().at);
        }
        assert_eq!([at[1] - at[0], at[2] - at[1]], [10_000_000; 2], "{at:?}");
    }

    /// `set_curve` deducts the spends the schedule counts before rescaling, so that the
    /// stored permits keep their share of `max` exactly as without counting.
    #[test]
    fn a_new_curve_rescales_the_counted_spends_with_the_rest() {
        let old = SmoothCurve::new(1000.0, 10.0 * SEC as f64, 3.0);
        let new = SmoothCurve::new(500.0, 10.0 * SEC as f64, 3.0);
        let bucket = SmoothBucket::new(old, Payment::Now, 0, false, SEC);
        for _ in 0..5 {
            bucket.reserve(0, 1.0, SEC).unwrap();
        }
        assert_eq!(bucket.schedule().pending, 5);
        let before = bucket.stored_at(0);
        assert_eq!(before, old.max() - 5.0);
        bucket.set_curve(&new);
        assert_eq!(bucket.schedule().pending, 0);
        let share = |stored: f64, curve: &SmoothCurve| stored / curve.max();
        assert!((share(bucket.stored_at(0), &new) - share(before, &old)).abs() < 1e-12);
    }

    /// Whether the bucket's run prices the next spend (counted, or the sixteenth, which writes
    /// the stored permits) for its stored permits' word and curve now.
    fn run_prices(bucket: &SmoothBucket) -> bool {
        let read = bucket.read(bucket.schedule.load(Ordering::Acquire));
        read.run_price(&bucket.curve.load(), read.schedule.pending + 1)
            .is_some()
    }

    /// A busy run prices from the run worked out at each write of the stored permits, and a
    /// new curve gets its own run: every spend of a cold bucket's busy run is priced in integers,
    /// before and after `set_curve` (which fails without storing a run for the new curve).
    #[test]
    fn every_write_and_every_new_curve_leaves_a_run_that_prices() {
        let old = SmoothCurve::new(1000.0, 10.0 * SEC as f64, 3.0);
        let new = SmoothCurve::new(500.0, 10.0 * SEC as f64, 3.0);
        let bucket = SmoothBucket::new(old, Payment::Now, 0, false, SEC);
        bucket.reserve(0, 1.0, SEC).unwrap();
        for _ in 0..40 {
            assert!(run_prices(&bucket));
            bucket.reserve(0, 1.0, SEC).unwrap();
        }
        bucket.set_curve(&new);
        for _ in 0..40 {
            assert!(run_prices(&bucket));
            bucket.reserve(0, 1.0, SEC).unwrap();
        }
    }

    proptest::proptest! {
        /// A bucket deciding on the curve it was built with, and one built at another rate
        /// whose curve was replaced by it (one attempt for one-permit requests in the integer
        /// steps, on the curve read in place or copied out of its lock), decide exactly as one
        /// that sends every request through the general loop.
        #[test]
        fn the_one_attempt_path_decides_as_the_general_loop(
            payment in proptest::prop_oneof![
                proptest::strategy::Just(Payment::Now),
                proptest::strategy::Just(Payment::Later)
            ],
            start_warm: bool,
            burst in proptest::prop_oneof![
                proptest::strategy::Just(0u64),
                proptest::strategy::Just(SEC)
            ],
            calls in proptest::collection::vec(
                (
                    proptest::prop_oneof![0u64..30 * MS, 0u64..300 * MS, 10 * SEC..20 * SEC],
                    proptest::prop_oneof![proptest::strategy::Just(1.0f64), 0.5f64..4.0],
                    proptest::prop_oneof![proptest::strategy::Just(0u64), 0u64..5 * SEC],
                ),
                1..200,
            ),
        ) {
            let curve = SmoothCurve::new(100.0, 10.0 * SEC as f64, 3.0);
            let bucket = |curve| SmoothBucket::new(curve, payment, 0, start_warm, burst);
            let (built, general) = (bucket(curve), bucket(curve));
            // Built at another rate, replaced before its first request.
            let replaced = bucket(SmoothCurve::new(50.0, 10.0 * SEC as f64, 3.0));
            replaced.set_curve(&curve);
            let mut now = 0;
            for (step, permits, max_wait) in calls {
                now += step;
                let word = general.schedule.load(Ordering::Acquire);
                let expected = general.reserve_any(word, now, permits, max_wait);
                for one_attempt in [&built, &replaced] {
                    proptest::prop_assert_eq!(
                        one_attempt.reserve_watched(now, permits, max_wait),
                        expected
                    );
                    let (a, b) = (one_attempt.schedule(), general.schedule());
                    proptest::prop_assert_eq!((a.at, a.denied), (b.at, b.denied));
                    proptest::prop_assert_eq!(one_attempt.fill().to_bits(), general.fill().to_bits());
                }
            }
        }
    }

    /// Threads racing at one instant: exactly one request passes, in either payment style.
    #[test]
    fn racing_callers_never_overshoot() {
        for payment in [Payment::Now, Payment::Later] {
            let curve = SmoothCurve::new(1000.0, 10.0 * SEC as f64, 3.0);
            let bucket = SmoothBucket::new(curve, payment, 5 * SEC, false, 0);
            let admitted = std::sync::atomic::AtomicU32::new(0);
            std::thread::scope(|scope| {
                for _ in 0..4 {
                    scope.spawn(|| {
                        for _ in 0..10_000 {
                            if bucket.reserve(5 * SEC, 1.0, 0).is_ok() {
                                admitted.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    });
                }
            });
            assert_eq!(admitted.into_inner(), 1, "{payment:?}");
        }
    }
}

#[cfg(all(test, admit_loom))]
mod loom_tests {
    use std::sync::atomic::{AtomicBool, Ordering as StdOrdering};

    use loom::sync::Arc;
    use loom::thread;

    use super::super::run::{MAX_STEPS, price};
    use super::super::state::MAX_PENDING;
    use super::*;

    const SEC: u64 = 1_000_000_000;

    /// The sixteenth spend since the stored permits were written (a write of them) racing
    /// either a two-permit request (another write) or a new curve (a run stored for it):
    /// whatever order the words and runs land in, the run left prices each counted spend
    /// exactly as the run worked out from the final word on the final curve, or prices nothing
    /// (a run stored after a later one keeps the older word's or curve's key). Each race must
    /// leave a stale run in some explored execution.
    #[test]
    fn loom_a_run_left_by_racing_writers_prices_its_word_or_nothing() {
        for new_curve in [false, true] {
            static STALE: AtomicBool = AtomicBool::new(false);
            STALE.store(false, StdOrdering::Relaxed);
            loom::model(move || {
                let curve = SmoothCurve::new(1000.0, 10.0 * SEC as f64, 3.0);
                let bucket = Arc::new(SmoothBucket::new(curve, Payment::Now, 0, false, SEC));
                for _ in 0..MAX_PENDING {
                    bucket.reserve(0, 1.0, SEC).unwrap();
                }
                let racer = {
                    let bucket = Arc::clone(&bucket);
                    thread::spawn(move || {
                        bucket.reserve(0, 1.0, SEC).unwrap();
                    })
                };
                if new_curve {
                    bucket.set_curve(&SmoothCurve::new(500.0, 10.0 * SEC as f64, 3.0));
                } else {
                    bucket.reserve(0, 2.0, SEC).unwrap();
                }
                racer.join().unwrap();
                let (force, fill) = (bucket.curve.load(), bucket.fill().to_bits());
                let left = bucket.run.load(Ordering::Acquire);
                let fresh = run(&force, f64::from_bits(fill));
                if left != fresh {
                    STALE.store(true, StdOrdering::Relaxed);
                }
                for k in 1..=MAX_STEPS {
                    let priced = price(left, &force, fill, k);
                    assert!(
                        priced.is_none() || priced == price(fresh, &force, fill, k),
                        "spend {k}: {priced:?} from a stale run"
                    );
                }
            });
            assert!(
                STALE.load(StdOrdering::Relaxed),
                "new curve: {new_curve}: no stale run explored"
            );
        }
    }
}
