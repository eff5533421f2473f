//! The lanes: the commonest one-permit decisions, made from the schedule word and the stored
//! permits' word (and the run) alone with constants worked out once per curve, a handful of
//! integer steps where the general decisions take a call and a frame. Two are the steady
//! states:
//!
//! - **Busy and empty** (warm under load): nothing stored, no spend counted, the schedule's
//!   turn within the wait the request accepts; the full-rate price is added to the schedule.
//! - **Full after idling** (cold and lightly used): the stored permits' word is `max − 1` as
//!   the last such admission left it, no spend counted, and the schedule was free long enough
//!   that the refill reaches `max`; the schedule restarts a fixed time after `now`.
//!
//! and, paying now, a third is the common one under load:
//!
//! - **Counted** (cold under load): busy before its turn with permits stored, the spend the
//!   schedule counts next, priced by the [run](super::run); the sixteenth writes the fifteen
//!   counted before it to the stored permits' word.
//!
//! Each takes the admission [`decide_one`](super::state::decide_one) makes on the same words,
//! bit for bit. The steady lanes leave the stored permits' word as it was, so the bucket only
//! swaps the schedule.

use super::busy::BUSY_LATEST;
use super::run::{RunScale, priced_at};
use super::shared::CurveInForce;
use super::state::{
    LATEST, MAX_PENDING, ODD_CURVE, PENDING_MASK, PENDING_SHIFT, Payment, TIME_MASK, level,
    refills_to_max,
};

/// How many words [`Lanes::to_words`] makes.
pub(super) const LANE_WORDS: usize = 12;

/// A stored permits' word no bucket holds (a NaN): the full-after-idling lane of a curve
/// that has none.
const NO_LANE: u64 = u64::MAX;

/// The constants of the lanes on one curve and payment.
#[derive(Clone, Copy, Debug)]
pub(super) struct Lanes {
    /// The full-rate price: busy and empty, the next schedule is `at + stable`.
    stable: u64,
    /// The last schedule time the busy-and-empty lane takes: later ones saturate.
    busy_latest: u64,
    /// The stored permits' word after a permit is taken from a full bucket, or [`NO_LANE`].
    full_fill: u64,
    /// The shortest time free after which the refill reaches `max`, in ns (at least 1: a
    /// schedule free since exactly `now` is busy).
    full_idle: u64,
    /// Full after idling, the next schedule is `now + full_advance`.
    full_advance: u64,
    /// The last `now` the full-after-idling lane takes.
    full_latest: u64,
    /// Whether an admission from full leaves the bucket at its full rate.
    full_warm: bool,
    /// The curve's tag, which the schedule words the lanes take carry and the ones they set
    /// keep.
    tag: u64,
    /// Whether requests pay now, so that busy spends are counted.
    counts: bool,
    /// How many times the curve was replaced, which the run's key names.
    generation: u64,
    /// The curve's fixed point for runs.
    scale: RunScale,
}

/// A lane's admission: the schedule word after it, how long the request waits, and what it
/// leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LaneStep {
    pub(super) next: u64,
    pub(super) wait: u64,
    /// Whether it leaves the bucket at its full rate.
    pub(super) warm: bool,
    /// Whether it is the writing spend (the sixteenth), which writes the fifteen counted before
    /// it and itself to the stored permits' word.
    pub(super) writes: bool,
}

impl LaneStep {
    /// What an admission by this step returns: the wait, and whether it left the bucket at its
    /// full rate (always `false` without the `tracing` feature).
    #[inline(always)]
    pub(super) fn admitted(self) -> (u64, bool) {
        (self.wait, cfg!(feature = "tracing") && self.warm)
    }
}

impl Lanes {
    /// The lanes on the curve in `force` for requests paying by `payment`.
    pub(super) fn new(force: &CurveInForce, payment: Payment) -> Self {
        let (curve, prices) = (&force.curve, &force.prices);
        let left = curve.max() - 1.0;
        let full_fill = prices.fill_after_full;
        let stored = level(curve, full_fill, 0);
        let (first, second, admits) = match payment {
            Payment::Now => (
                prices.lead_after_full,
                prices.next_after_full,
                stored >= 1.0,
            ),
            Payment::Later => (
                prices.one_from_full,
                prices.lead_after_full,
                curve.max() >= 1.0,
            ),
        };
        let full_idle = least_idle(|idle| refills_to_max(curve, stored, idle));
        let full_advance = first
            .checked_add(second)
            .filter(|&advance| advance <= LATEST);
        let full = match (admits, full_idle, full_advance) {
            (true, Some(idle), Some(advance)) => Some((idle, advance)),
            _ => None,
        };
        Lanes {
            stable: prices.stable,
            busy_latest: LATEST.saturating_sub(prices.stable),
            full_fill: full.map_or(NO_LANE, |_| full_fill.to_bits()),
            full_idle: full.map_or(u64::MAX, |(idle, _)| idle),
            full_advance: full.map_or(0, |(_, advance)| advance),
            full_latest: full.map_or(0, |(_, advance)| LATEST - advance),
            full_warm: left <= curve.threshold(),
            tag: if force.odd() { ODD_CURVE } else { 0 },
            counts: payment == Payment::Now,
            generation: force.generation(),
            scale: force.run_scale(),
        }
    }

    /// The lanes as words, for the curve's sequence lock.
    pub(super) fn to_words(self) -> [u64; LANE_WORDS] {
        [
            self.stable,
            self.busy_latest,
            self.full_fill,
            self.full_idle,
            self.full_advance,
            self.full_latest,
            u64::from(self.full_warm),
            self.tag,
            u64::from(self.counts),
            self.generation,
            self.scale.to_words()[0],
            self.scale.to_words()[1],
        ]
    }

    /// The lanes from words in [`Self::to_words`]'s order.
    #[inline(always)]
    pub(super) fn from_words(words: [u64; LANE_WORDS]) -> Self {
        Lanes {
            stable: words[0],
            busy_latest: words[1],
            full_fill: words[2],
            full_idle: words[3],
            full_advance: words[4],
            full_latest: words[5],
            full_warm: words[6] != 0,
            tag: words[7],
            counts: words[8] != 0,
            generation: words[9],
            scale: RunScale::from_words([words[10], words[11]]),
        }
    }

    /// The admission of a one-permit request at `now` (ns from the bucket's origin), willing
    /// to wait `max_wait` ns, if the schedule `word` and the stored permits' word `fill_bits`
    /// are one of the two steady states.
    #[inline(always)]
    pub(super) fn steady(
        &self,
        word: u64,
        fill_bits: u64,
        now: u64,
        max_wait: u64,
    ) -> Option<LaneStep> {
        // The schedule's time if the word carries the curve's tag and nothing else; a word
        // with a spend counted, a refusal marked or another tag is above both lanes' latest
        // times.
        let at = word ^ self.tag;
        if fill_bits == 0 {
            let wait = at.checked_sub(now)?;
            return (wait <= max_wait && at <= self.busy_latest).then_some(LaneStep {
                next: word + self.stable,
                wait,
                warm: true,
                writes: false,
            });
        }
        if fill_bits == self.full_fill {
            let idle = now.checked_sub(at)?;
            return (idle >= self.full_idle && now <= self.full_latest).then_some(LaneStep {
                next: (now + self.full_advance) | self.tag,
                wait: 0,
                warm: self.full_warm,
                writes: false,
            });
        }
        None
    }

    /// The counted lane's admission, with the run read after the stored permits' word
    /// `fill_bits`: paying now, with the schedule `word` busy before its turn, within the wait
    /// and the counted spends the run prices.
    #[inline(always)]
    pub(super) fn counted(
        &self,
        word: u64,
        fill_bits: u64,
        run: u64,
        now: u64,
        max_wait: u64,
    ) -> Option<LaneStep> {
        let priced = priced_at(run, fill_bits, self.generation, self.scale)?;
        // Counted spends above the time bits, with a refusal mark or another tag above them.
        let counted = word ^ self.tag;
        let pending = counted >> PENDING_SHIFT;
        let at = counted & TIME_MASK;
        let wait = at.checked_sub(now)?;
        let admits = self.counts
            && pending < priced.steps
            && wait > 0
            && wait <= max_wait
            && at <= BUSY_LATEST;
        admits.then(|| LaneStep {
            next: (at + priced.price(pending + 1))
                | ((pending + 1) & PENDING_MASK) << PENDING_SHIFT
                | self.tag,
            wait,
            warm: priced.flat,
            writes: pending == MAX_PENDING,
        })
    }
}

/// The least idle time (at least 1 ns) for which `refills` holds, given that it holds for
/// every longer one once it holds: `None` if it never does.
fn least_idle(refills: impl Fn(u64) -> bool) -> Option<u64> {
    if !refills(u64::MAX) {
        return None;
    }
    // `refills(holds)`, and `fails` is 0 or `!refills(fails)`.
    let (mut fails, mut holds) = (0, u64::MAX);
    while holds - fails > 1 {
        let mid = fails + (holds - fails) / 2;
        if refills(mid) {
            holds = mid;
        } else {
            fails = mid;
        }
    }
    Some(holds)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::curve::{SmoothCurve, any_curve};
    use super::super::run::run;
    use super::super::state::{LevelChange, NEVER, Read, Schedule, decide_one};
    use super::*;

    /// `decide_one`'s admission on the same words and run: the schedule word, the wait, the
    /// full-rate flag and whether it is the writing spend (a lane's step), and the stored
    /// permits' word it leaves.
    fn decided(
        force: &CurveInForce,
        payment: Payment,
        (word, fill, run): (u64, f64, u64),
        now: u64,
        max_wait: u64,
    ) -> Option<(LaneStep, u64)> {
        let read = Read {
            schedule: Schedule::unpack(word),
            fill,
            run,
        };
        let step = decide_one(force, payment, read, now, max_wait)?.ok()?;
        let lane = LaneStep {
            next: step.schedule,
            wait: step.wait,
            warm: step.left <= force.curve.threshold(),
            writes: step.change == LevelChange::WRITING_SPEND,
        };
        Some((lane, step.fill.to_bits()))
    }

    /// The stored permits' word a lane's `step` leaves, from `fill`, as the bucket writes it.
    fn left_by(step: LaneStep, curve: &SmoothCurve, fill: f64) -> u64 {
        let left = if step.writes {
            LevelChange::WRITING_SPEND.apply(curve, fill)
        } else {
            fill
        };
        left.to_bits()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// A lane's admission is `decide_one`'s on the same words and run: the steady lanes
        /// leave the stored permits' word as read, the counted lane writes it on the sixteenth.
        #[test]
        fn a_lane_decides_as_decide_one(
            curve in any_curve(),
            burst in prop_oneof![Just(0u64), 0u64..5_000_000_000],
            generation in 0u64..4,
            payment in prop_oneof![Just(Payment::Now), Just(Payment::Later)],
            fill in prop_oneof![
                2 => Just(None),
                2 => Just(Some(0.0f64)),
                1 => (0.0f64..=1.0).prop_map(Some),
            ],
            pending in prop_oneof![1 => Just(0u64), 1 => 0u64..=MAX_PENDING],
            flags in prop_oneof![3 => Just(0u64), 1 => Just(ODD_CURVE), 1 => Just(1u64 << 63)],
            at in prop_oneof![
                4 => 0u64..1_000_000_000_000,
                1 => Just(NEVER),
                1 => LATEST - 5_000_000_000..=LATEST,
            ],
            gap in prop_oneof![
                2 => -3_000_000_000i64..3_000_000_000,
                1 => -3i64..=3,
                1 => Just(i64::MAX),
                1 => Just(i64::MIN),
            ],
            near_idle in -3i64..=3,
            within in 0.0f64..=1.0,
            max_wait in prop_oneof![Just(0u64), 0u64..3_000_000_000, Just(u64::MAX)],
            stale_run in prop_oneof![3 => Just(None), 1 => any::<u64>().prop_map(Some)],
        ) {
            let force = CurveInForce::new(curve, burst, generation);
            let lanes = Lanes::from_words(Lanes::new(&force, payment).to_words());
            // The full-after-idling word unless another is drawn; besides any gap, one near the
            // least idle time that refills it, or a turn within the wait.
            let fill = fill.unwrap_or(force.prices.fill_after_full);
            let word = at.min(TIME_MASK) | pending << PENDING_SHIFT | flags;
            let now = match gap {
                i64::MAX if lanes.full_idle != u64::MAX => {
                    at.saturating_add(lanes.full_idle).saturating_add_signed(near_idle)
                }
                i64::MIN => at - (max_wait.min(at) as f64 * within) as u64,
                gap => at.saturating_add_signed(gap),
            };
            let run = stale_run.unwrap_or_else(|| run(&force, fill));
            let decided = decided(&force, payment, (word, fill, run), now, max_wait);
            if let Some(step) = lanes.steady(word, fill.to_bits(), now, max_wait) {
                prop_assert!(!step.writes);
                prop_assert_eq!(decided, Some((step, fill.to_bits())));
            }
            if let Some(step) = lanes.counted(word, fill.to_bits(), run, now, max_wait) {
                prop_assert_eq!(decided, Some((step, left_by(step, &curve, fill))));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Spends counted before the turn, where the counted lane applies most: its admission
        /// is `decide_one`'s on the same words and run.
        #[test]
        fn the_counted_lane_decides_as_decide_one(
            curve in any_curve(),
            burst in prop_oneof![Just(0u64), 0u64..5_000_000_000],
            generation in 0u64..4,
            fill in prop_oneof![Just(1.0f64), 0.0f64..=1.0],
            pending in 0u64..=MAX_PENDING,
            odd_tag in any::<bool>(),
            at in prop_oneof![
                4 => 1u64..1_000_000_000_000,
                1 => BUSY_LATEST - 20..=BUSY_LATEST + 20,
            ],
            before in prop_oneof![1u64..=3, 1u64..3_000_000_000],
            max_wait in prop_oneof![0u64..3_000_000_000, Just(u64::MAX)],
            stale_run in prop_oneof![9 => Just(None), 1 => any::<u64>().prop_map(Some)],
        ) {
            let force = CurveInForce::new(curve, burst, generation);
            let lanes = Lanes::from_words(Lanes::new(&force, Payment::Now).to_words());
            let tag = if odd_tag { ODD_CURVE } else { 0 };
            let word = at | pending << PENDING_SHIFT | tag;
            let now = at.saturating_sub(before);
            let run = stale_run.unwrap_or_else(|| run(&force, fill));
            if let Some(step) = lanes.counted(word, fill.to_bits(), run, now, max_wait) {
                let decided = decided(&force, Payment::Now, (word, fill, run), now, max_wait);
                prop_assert_eq!(decided, Some((step, left_by(step, &curve, fill))));
            }
        }
    }

    /// Warm under load and cold after idling each take their lane; a refusal mark, a counted
    /// spend, a turn beyond the wait or a short idle spell do not.
    #[test]
    fn each_steady_state_takes_its_lane() {
        let sec = 1_000_000_000;
        // 100/s, 10 s warm-up, factor 3: 10 ms per permit warm.
        let force_of =
            |generation| CurveInForce::new(SmoothCurve::new(100.0, 10e9, 3.0), 0, generation);
        let force = force_of(0);
        let lanes = Lanes::new(&force, Payment::Now);
        let empty = 0.0f64.to_bits();
        let busy = lanes.steady(5 * sec, empty, 5 * sec, 0).unwrap();
        let expected = LaneStep {
            next: 5 * sec + 10_000_000,
            wait: 0,
            warm: true,
            writes: false,
        };
        assert_eq!(busy, expected);
        assert_eq!(lanes.steady(5 * sec, empty, 5 * sec - 1, 0), None);
        assert_eq!(lanes.steady((5 * sec) | (1 << 63), empty, 5 * sec, 0), None);
        assert_eq!(
            lanes.steady((5 * sec) | (1 << PENDING_SHIFT), empty, 5 * sec, 0),
            None
        );
        assert_eq!(lanes.steady((5 * sec) | ODD_CURVE, empty, 5 * sec, 0), None);
        // Replaced once: the words carry the odd curve's tag, and keep it.
        let odd = Lanes::new(&force_of(1), Payment::Now);
        let tagged = odd
            .steady((5 * sec) | ODD_CURVE, empty, 5 * sec, 0)
            .unwrap();
        assert_eq!(tagged.next, (5 * sec + 10_000_000) | ODD_CURVE);
        assert_eq!(odd.steady(5 * sec, empty, 5 * sec, 0), None);
        let full = force.prices.fill_after_full.to_bits();
        // Refilling the permit spent takes the cool-down: 10 s / 1000 permits.
        let idle = lanes.full_idle;
        assert!(idle.abs_diff(10_000_000) <= 1, "{idle} ns");
        let cold = lanes.steady(sec, full, sec + idle, 0).unwrap();
        assert!(!cold.warm && cold.wait == 0 && cold.next > sec + idle);
        assert_eq!(lanes.steady(sec, full, sec + idle - 1, 0), None);
        assert_eq!(lanes.steady(sec, 0.5f64.to_bits(), sec + idle, 0), None);
    }

    /// Cold under load, paying now: spends are counted until the sixteenth, which writes; not
    /// paying later, nor with a run for another stored permits' word, nor at the turn itself.
    #[test]
    fn spends_before_the_turn_take_the_counted_lane() {
        let sec = 1_000_000_000;
        let force = CurveInForce::new(SmoothCurve::new(100.0, 10e9, 3.0), 0, 0);
        let lanes = Lanes::new(&force, Payment::Now);
        let (full, run) = (1.0f64.to_bits(), run(&force, 1.0));
        let at = 5 * sec;
        for pending in 0..=MAX_PENDING {
            let word = at | pending << PENDING_SHIFT;
            let step = lanes.counted(word, full, run, at - 1, sec).unwrap();
            let counted = (step.next >> PENDING_SHIFT) & PENDING_MASK;
            assert_eq!(counted, (pending + 1) % (MAX_PENDING + 1));
            assert_eq!(step.writes, pending == MAX_PENDING);
            // Cold: about 30 ms a permit.
            let price = (step.next & TIME_MASK) - at;
            assert!(price.abs_diff(30_000_000) < 1_000_000, "{price} ns");
        }
        assert_eq!(lanes.counted(at, full, run, at, sec), None);
        assert_eq!(lanes.counted(at, 0.5f64.to_bits(), run, at - 1, sec), None);
        let later = Lanes::new(&force, Payment::Later);
        assert_eq!(later.counted(at, full, run, at - 1, sec), None);
    }

    /// The least idle time is the boundary of the refill condition.
    #[test]
    fn the_least_idle_time_is_the_boundary() {
        assert_eq!(least_idle(|idle| idle >= 1_000), Some(1_000));
        assert_eq!(least_idle(|_| true), Some(1));
        assert_eq!(least_idle(|idle| idle == u64::MAX), Some(u64::MAX));
        assert_eq!(least_idle(|_| false), None);
    }
}
