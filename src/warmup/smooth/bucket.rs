//! The lock-free bucket: its state in one 128-bit word, the curve under a sequence lock.

use super::curve::SmoothCurve;
use super::shared::SharedCurve;
use super::state::{Admission, Ask, State, decide, refused};
use crate::sync::{AtomicU128, Line, Ordering};
use crate::warmup::Payment;

/// The lock-free engine: every decision reads the state, decides, and puts its admission (or
/// its refusal's demand mark) in force with one compare-and-swap of the whole state, trying
/// again on the state that won a race. A refusal writes only to mark demand, at most once
/// between two admissions.
#[derive(Debug)]
pub(crate) struct SmoothBucket {
    curve: SharedCurve,
    payment: Payment,
    /// How far ahead of its turn a request may pass, in ns.
    burst: u64,
    /// The clock's reading when the bucket was built: the schedule counts from it.
    origin: u64,
    /// The [`State`], packed; on a cache line of its own.
    state: Line<AtomicU128>,
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
        SmoothBucket {
            curve: SharedCurve::new(curve),
            payment,
            burst,
            origin: now,
            state: Line::new(AtomicU128::new(State::new(payment, start_warm).pack())),
        }
    }

    /// Reserves `permits` at `now` if they are available within `max_wait` ns: `Ok` with how
    /// long to wait before using them and the stored permits they leave as a fraction of the
    /// maximum, or `Err` with how much longer the caller would have to be willing to wait.
    #[inline]
    pub(crate) fn reserve(&self, now: u64, permits: f64, max_wait: u64) -> Result<(u64, f64), u64> {
        let now = now.saturating_sub(self.origin);
        let mut word = self.state.load(Ordering::Acquire);
        loop {
            let state = State::unpack(word);
            // A refusal already marked needs neither the curve nor a write.
            if state.denied
                && permits == 1.0
                && let Some(short) = refused(self.payment, state, now, max_wait)
            {
                return Err(short);
            }
            // The curve the state was priced on. A curve replaced after the state was read
            // re-tags it, which fails the compare-and-swap below: the decision then runs
            // again on the new curve.
            let force = self.curve.load_for(state.odd_curve);
            let ask = Ask {
                now,
                permits,
                max_wait,
            };
            let (next, decided) = match decide(
                &force.curve,
                force.odd(),
                self.payment,
                state,
                ask,
                self.burst,
            ) {
                Ok(Admission { state, wait }) => (state, Ok((wait, state.fill))),
                Err(short) if state.denied => return Err(short),
                Err(short) => (
                    State {
                        denied: true,
                        ..state
                    },
                    Err(short),
                ),
            };
            match self.state.compare_exchange_weak(
                word,
                next.pack(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return decided,
                Err(actual) => word = actual,
            }
        }
    }

    /// Permits stored at `now`, counting the idle time since the schedule was last free (an
    /// estimate for snapshots: the next decision may credit slightly less, by the price it
    /// pays).
    pub(crate) fn stored_at(&self, now: u64) -> f64 {
        let state = State::unpack(self.state.load(Ordering::Acquire));
        let force = self.curve.load_for(state.odd_curve);
        state.stored_at(&force.curve, now.saturating_sub(self.origin))
    }

    /// How far ahead of its turn a request may pass, in ns.
    pub(crate) fn burst(&self) -> u64 {
        self.burst
    }

    /// The curve in force.
    pub(crate) fn curve(&self) -> SmoothCurve {
        self.curve.load()
    }

    /// Replaces the curve. Stored permits keep their share of `max` (Guava's rescaling); the
    /// time already reserved is kept, so the next caller still waits it out. Paying now, the
    /// price the last admission set for the next permit is re-priced on the new curve.
    ///
    /// Until the state is re-tagged with the new curve's parity, decisions price on the old
    /// curve, as if they came before the replacement; a decision that read the state before
    /// the re-tagging fails its compare-and-swap and decides again. Replacements are one at a
    /// time, so the parity names the curve in force or the one it replaced.
    pub(crate) fn set_curve(&self, curve: &SmoothCurve) {
        self.curve.replace(curve, |old, new| {
            let mut word = self.state.load(Ordering::Acquire);
            loop {
                let state = State::unpack(word);
                let at = match self.payment {
                    // Not yet re-priced: priced on the replaced curve.
                    Payment::Now if state.odd_curve == old.odd() => {
                        state.repriced(&old.curve, &new.curve)
                    }
                    _ => state.at,
                };
                let tagged = State {
                    at,
                    odd_curve: new.odd(),
                    ..state
                };
                match self.state.compare_exchange_weak(
                    word,
                    tagged.pack(),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => return,
                    Err(actual) => word = actual,
                }
            }
        });
    }
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const SEC: u64 = 1_000_000_000;

    impl SmoothBucket {
        /// The state now.
        fn state(&self) -> State {
            State::unpack(self.state.load(Ordering::Acquire))
        }

        /// A reservation's wait, or its refusal.
        fn wait(&self, now: u64, permits: f64, max_wait: u64) -> Result<u64, u64> {
            self.reserve(now, permits, max_wait).map(|(wait, _)| wait)
        }
    }

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

        /// Admissions per second under a try-acquire every millisecond, for `seconds`.
        fn saturate(&mut self, seconds: usize) -> Vec<u32> {
            (0..seconds)
                .map(|_| {
                    let mut passed = 0;
                    for _ in 0..1000 {
                        passed += u32::from(self.bucket.reserve(self.now, 1.0, 0).is_ok());
                        self.now += MS;
                    }
                    passed
                })
                .collect()
        }
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
                    passed += u32::from(t.bucket.reserve(t.now, 1.0, 0).is_ok());
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
        let t = Timeline::new(10.0, 10 * SEC, 3.0, Payment::Now);
        assert_eq!(t.bucket.wait(t.now, 1.0, 0), Ok(0));
        let admitted = t.bucket.state();
        let short = t.bucket.wait(t.now, 1.0, 0).unwrap_err();
        // The price of the next permit: the mean interval between `max − 1` and `max − 2`.
        let interval = t.bucket.curve().interval(t.bucket.curve().max() - 1.5);
        assert!(
            short.abs_diff(interval as u64) < 1000,
            "{short} vs {interval}"
        );
        let marked = t.bucket.state();
        assert!(marked.denied && !admitted.denied);
        assert_eq!(
            marked,
            State {
                denied: true,
                ..admitted
            }
        );
        // A second refusal writes nothing.
        assert_eq!(t.bucket.wait(t.now, 1.0, 0), Err(short));
        assert_eq!(t.bucket.state(), marked);
        // Waiting as long as it said admits.
        assert_eq!(t.bucket.wait(t.now + short, 1.0, 0), Ok(0));
    }

    /// Paying now, a new rate re-prices the next permit: the price the last admission set at
    /// the old rate is replaced by the new rate's, once per replacement.
    #[test]
    fn a_new_rate_reprices_the_next_permit() {
        let curve = SmoothCurve::new(10.0, 10.0 * SEC as f64, 3.0);
        let bucket = SmoothBucket::new(curve, Payment::Now, 0, true, 0);
        assert_eq!(bucket.wait(0, 1.0, 0), Ok(0));
        assert_eq!(bucket.state().at, 100 * MS);
        bucket.set_curve(&SmoothCurve::new(1000.0, 10.0 * SEC as f64, 3.0));
        assert_eq!(bucket.state().at, MS);
        assert_eq!(bucket.wait(MS, 1.0, 0), Ok(0));
        // Back to 10 per second, and again: each replacement re-prices once.
        bucket.set_curve(&curve);
        assert_eq!(bucket.state().at, 101 * MS);
        bucket.set_curve(&curve);
        assert_eq!(bucket.state().at, 101 * MS);
    }

    /// Paying later, a new rate keeps the schedule and rescales the stored permits with `max`.
    #[test]
    fn a_new_rate_keeps_the_stored_share_and_the_schedule() {
        let old = SmoothCurve::new(1000.0, 10.0 * SEC as f64, 3.0);
        let new = SmoothCurve::new(500.0, 10.0 * SEC as f64, 3.0);
        let bucket = SmoothBucket::new(old, Payment::Later, 0, false, SEC);
        for _ in 0..5 {
            bucket.wait(0, 1.0, SEC).unwrap();
        }
        let (before, state) = (bucket.stored_at(0), bucket.state());
        bucket.set_curve(&new);
        assert_eq!(bucket.state().at, state.at);
        assert_eq!(bucket.state().fill, state.fill);
        let share = |stored: f64, curve: &SmoothCurve| stored / curve.max();
        assert!((share(bucket.stored_at(0), &new) - share(before, &old)).abs() < 1e-12);
    }

    /// The schedule counts from the bucket's build, so a clock reading far beyond the
    /// schedule's range (here, ns since 1970) spaces requests as one starting at zero.
    #[test]
    fn a_clock_far_from_zero_spaces_requests_as_one_at_zero() {
        const EPOCH: u64 = 1_800_000_000 * SEC;
        for payment in [Payment::Now, Payment::Later] {
            let curve = SmoothCurve::new(100.0, 10.0 * SEC as f64, 3.0);
            let bucket = SmoothBucket::new(curve, payment, EPOCH, true, 0);
            assert_eq!(bucket.wait(EPOCH, 1.0, 0), Ok(0), "{payment:?}");
            assert_eq!(
                bucket.wait(EPOCH + 5 * MS, 1.0, 0),
                Err(5 * MS),
                "{payment:?}"
            );
            assert_eq!(bucket.wait(EPOCH + 10 * MS, 1.0, 0), Ok(0), "{payment:?}");
        }
    }

    /// The schedule holds 146 years after the build: a bucket 100 years old decides as one
    /// idle for twice its period.
    #[test]
    fn a_century_old_bucket_decides_as_a_young_one() {
        const YEAR: u64 = 365 * 24 * 3600 * SEC;
        for payment in [Payment::Now, Payment::Later] {
            let curve = SmoothCurve::new(100.0, 10.0 * SEC as f64, 3.0);
            let (young, old) = (20 * SEC, 100 * YEAR);
            let [a, b] = [young, old].map(|_| SmoothBucket::new(curve, payment, 0, true, 0));
            for offset in [0, 5 * MS, 10 * MS, 30 * MS, 31 * MS, 100 * MS] {
                assert_eq!(
                    b.wait(old + offset, 1.0, 0),
                    a.wait(young + offset, 1.0, 0),
                    "{payment:?}, {offset} ns"
                );
            }
            assert!(b.wait(old + 100 * MS, 1.0, 0).is_err(), "{payment:?}");
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
    use loom::sync::Arc;
    use loom::thread;

    use super::*;

    const SEC: u64 = 1_000_000_000;

    /// Paying now, a decision racing a new curve is priced on one curve, and the new curve
    /// re-prices the schedule exactly when the decision used the old one: the schedule ends as
    /// a decision after the replacement would leave it, or as a replacement after the
    /// decision would.
    #[test]
    fn loom_a_decision_racing_a_new_curve_is_priced_once_on_the_final_curve() {
        let old = SmoothCurve::new(10.0, 10.0 * SEC as f64, 3.0);
        let new = SmoothCurve::new(1000.0, 10.0 * SEC as f64, 3.0);
        let sequential = move |decision_first: bool| {
            let bucket = SmoothBucket::new(old, Payment::Now, 0, true, 0);
            bucket.reserve(0, 1.0, 0).unwrap();
            if decision_first {
                bucket.reserve(SEC, 1.0, 0).unwrap();
                bucket.set_curve(&new);
            } else {
                bucket.set_curve(&new);
                bucket.reserve(SEC, 1.0, 0).unwrap();
            }
            State::unpack(bucket.state.load(Ordering::Acquire))
        };
        loom::model(move || {
            // Under the model too: the bucket's atomics are loom's.
            let expected = [sequential(true), sequential(false)];
            let bucket = Arc::new(SmoothBucket::new(old, Payment::Now, 0, true, 0));
            bucket.reserve(0, 1.0, 0).unwrap();
            let racer = {
                let bucket = Arc::clone(&bucket);
                thread::spawn(move || bucket.reserve(SEC, 1.0, 0).unwrap())
            };
            bucket.set_curve(&new);
            racer.join().unwrap();
            let state = State::unpack(bucket.state.load(Ordering::Acquire));
            assert!(expected.contains(&state), "{state:?} not in {expected:?}");
        });
    }
}
