//! The two steady states of a one-permit request, decided from the schedule word and the
//! stored permits' word alone with constants worked out once per curve: a handful of integer
//! steps where the general decisions take a call and a frame.
//!
//! - **Busy and empty** (warm under load): nothing stored, no spend counted, the schedule's
//!   turn within the wait the request accepts; the full-rate price is added to the schedule.
//! - **Full after idling** (cold and lightly used): the stored permits' word is `max − 1` as
//!   the last such admission left it, no spend counted, and the schedule was free long enough
//!   that the refill reaches `max`; the schedule restarts a fixed time after `now`.
//!
//! Each takes the admission [`decide_one`](super::state::decide_one) makes on the same words,
//! bit for bit, and leaves the stored permits' word as it was, so the bucket only swaps the
//! schedule.

use super::shared::CurveInForce;
use super::state::{LATEST, ODD_CURVE, Payment, level, refills_to_max};

/// How many words [`SteadyLanes::to_words`] makes.
pub(super) const LANE_WORDS: usize = 8;

/// A stored permits' word no bucket holds (a NaN): the full-after-idling lane of a curve
/// that has none.
const NO_LANE: u64 = u64::MAX;

/// The constants of the two lanes on one curve and payment.
#[derive(Clone, Copy, Debug)]
pub(super) struct SteadyLanes {
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
}

/// A lane's admission: the schedule word after it, and how long the request waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LaneStep {
    pub(super) next: u64,
    pub(super) wait: u64,
    /// Whether it leaves the bucket at its full rate.
    pub(super) warm: bool,
}

impl SteadyLanes {
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
        SteadyLanes {
            stable: prices.stable,
            busy_latest: LATEST.saturating_sub(prices.stable),
            full_fill: full.map_or(NO_LANE, |_| full_fill.to_bits()),
            full_idle: full.map_or(u64::MAX, |(idle, _)| idle),
            full_advance: full.map_or(0, |(_, advance)| advance),
            full_latest: full.map_or(0, |(_, advance)| LATEST - advance),
            full_warm: left <= curve.threshold(),
            tag: if force.odd() { ODD_CURVE } else { 0 },
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
        ]
    }

    /// The lanes from words in [`Self::to_words`]'s order.
    #[inline(always)]
    pub(super) fn from_words(words: [u64; LANE_WORDS]) -> Self {
        SteadyLanes {
            stable: words[0],
            busy_latest: words[1],
            full_fill: words[2],
            full_idle: words[3],
            full_advance: words[4],
            full_latest: words[5],
            full_warm: words[6] != 0,
            tag: words[7],
        }
    }

    /// The admission of a one-permit request at `now` (ns from the bucket's origin), willing
    /// to wait `max_wait` ns, if the schedule `word` and the stored permits' word `fill_bits`
    /// are one of the steady states.
    #[inline(always)]
    pub(super) fn step(
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
            });
        }
        if fill_bits == self.full_fill {
            let idle = now.checked_sub(at)?;
            return (idle >= self.full_idle && now <= self.full_latest).then_some(LaneStep {
                next: (now + self.full_advance) | self.tag,
                wait: 0,
                warm: self.full_warm,
            });
        }
        None
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
    use super::super::state::{
        MAX_PENDING, NEVER, PENDING_SHIFT, Read, Schedule, TIME_MASK, decide_one,
    };
    use super::*;

    fn force(curve: SmoothCurve, burst: u64, generation: u64) -> CurveInForce {
        CurveInForce::new(curve, burst, generation)
    }

    /// `decide_one`'s admission on the same words: the schedule word, the wait, whether it
    /// leaves the stored permits' word as read, and the full-rate flag.
    fn decided(
        force: &CurveInForce,
        payment: Payment,
        word: u64,
        fill: f64,
        now: u64,
        max_wait: u64,
    ) -> Option<(LaneStep, bool)> {
        let read = Read {
            schedule: Schedule::unpack(word),
            fill,
            run: run(force, fill),
        };
        match decide_one(force, payment, read, now, max_wait)? {
            Ok(step) => Some((
                LaneStep {
                    next: step.schedule,
                    wait: step.wait,
                    warm: step.left <= force.curve.threshold(),
                },
                step.fill.to_bits() == fill.to_bits(),
            )),
            Err(_) => None,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// A lane's admission is `decide_one`'s on the same words, which leaves the stored
        /// permits' word as read.
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
            pending in prop_oneof![3 => Just(0u64), 1 => 0u64..=MAX_PENDING],
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
        ) {
            let force = force(curve, burst, generation);
            let lanes = SteadyLanes::from_words(SteadyLanes::new(&force, payment).to_words());
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
            if let Some(step) = lanes.step(word, fill.to_bits(), now, max_wait) {
                prop_assert_eq!(
                    decided(&force, payment, word, fill, now, max_wait),
                    Some((step, true))
                );
            }
        }
    }

    /// Warm under load and cold after idling each take their lane; a refusal mark, a counted
    /// spend, a turn beyond the wait or a short idle spell do not.
    #[test]
    fn each_steady_state_takes_its_lane() {
        let sec = 1_000_000_000;
        // 100/s, 10 s warm-up, factor 3: 10 ms per permit warm.
        let force_of = |generation| force(SmoothCurve::new(100.0, 10e9, 3.0), 0, generation);
        let force = force_of(0);
        let lanes = SteadyLanes::new(&force, Payment::Now);
        let empty = 0.0f64.to_bits();
        let busy = lanes.step(5 * sec, empty, 5 * sec, 0).unwrap();
        assert_eq!(
            busy,
            LaneStep {
                next: 5 * sec + 10_000_000,
                wait: 0,
                warm: true
            }
        );
        assert_eq!(lanes.step(5 * sec, empty, 5 * sec - 1, 0), None);
        assert_eq!(lanes.step((5 * sec) | (1 << 63), empty, 5 * sec, 0), None);
        assert_eq!(lanes.step((5 * sec) | (1 << 59), empty, 5 * sec, 0), None);
        assert_eq!(lanes.step((5 * sec) | ODD_CURVE, empty, 5 * sec, 0), None);
        // Replaced once: the words carry the odd curve's tag, and keep it.
        let odd = SteadyLanes::new(&force_of(1), Payment::Now);
        let tagged = odd.step((5 * sec) | ODD_CURVE, empty, 5 * sec, 0).unwrap();
        assert_eq!(tagged.next, (5 * sec + 10_000_000) | ODD_CURVE);
        assert_eq!(odd.step(5 * sec, empty, 5 * sec, 0), None);
        let full = force.prices.fill_after_full.to_bits();
        // Refilling the permit spent takes the cool-down: 10 s / 1000 permits.
        let idle = lanes.full_idle;
        assert!(idle.abs_diff(10_000_000) <= 1, "{idle} ns");
        let cold = lanes.step(sec, full, sec + idle, 0).unwrap();
        assert!(!cold.warm && cold.wait == 0 && cold.next > sec + idle);
        assert_eq!(lanes.step(sec, full, sec + idle - 1, 0), None);
        assert_eq!(lanes.step(sec, 0.5f64.to_bits(), sec + idle, 0), None);
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
