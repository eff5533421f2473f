//! The engine of the smooth warm-up profile: Guava's `SmoothWarmingUp` model in nanoseconds,
//! as one lock-free 128-bit state word.
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

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use portable_atomic::AtomicU128;

const NANOS_PER_SEC: f64 = 1e9;

/// The smooth curve's constants, in permits and nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SmoothCurve {
    rate: f64,
    stable: f64,
    threshold: f64,
    max: f64,
    slope: f64,
    /// Stored permits gained per idle ns (`max / period`).
    refill_rate: f64,
    /// `1 / max`: a fill fraction is a multiplication, not a division, on the hot path.
    inverse_max: f64,
}

impl SmoothCurve {
    /// The curve for `rate` permits per second, warming up over `period_nanos` with
    /// `cold_factor` (≥ 1; 1 is a flat limiter). The caller validates the inputs: a positive,
    /// finite rate and period.
    pub(crate) fn new(rate: f64, period_nanos: f64, cold_factor: f64) -> Self {
        let stable = NANOS_PER_SEC / rate;
        let cold = stable * cold_factor;
        let threshold = 0.5 * period_nanos / stable;
        let max = threshold + 2.0 * period_nanos / (stable + cold);
        SmoothCurve {
            rate,
            stable,
            threshold,
            max,
            slope: (cold - stable) / (max - threshold),
            refill_rate: max / period_nanos,
            inverse_max: max.recip(),
        }
    }

    /// The full rate, in permits per second.
    pub(crate) fn rate(&self) -> f64 {
        self.rate
    }

    /// Permits stored at or below which the full rate applies.
    pub(crate) fn threshold(&self) -> f64 {
        self.threshold
    }

    /// The most permits the bucket stores (cold).
    pub(crate) fn max(&self) -> f64 {
        self.max
    }

    /// The slope of the spacing above the threshold, in ns per permit per stored permit.
    pub(crate) fn slope(&self) -> f64 {
        self.slope
    }

    /// The spacing, in ns, of requests spending the stored permit at level `stored`.
    pub(crate) fn interval(&self, stored: f64) -> f64 {
        self.stable + (stored - self.threshold).max(0.0) * self.slope
    }

    /// What `permits` cost, in ns, with `stored` permits stored; and how many stored ones they
    /// spend.
    fn cost(&self, stored: f64, permits: f64) -> (f64, f64) {
        let spend = permits.min(stored);
        let above = stored - self.threshold;
        let mut cost = 0.0;
        let mut below = spend;
        if above > 0.0 {
            // The trapezoid over the part of [stored − spend, stored] above the threshold.
            let spent_above = above.min(spend);
            let top = self.stable + above * self.slope;
            let bottom = self.stable + (above - spent_above) * self.slope;
            cost += spent_above * (top + bottom) / 2.0;
            below -= spent_above;
        }
        cost += (below + (permits - spend)) * self.stable;
        (cost, spend)
    }

    /// `stored` permits as a fraction of `max`, within `0..=1` (exactly 1 at `max`, so that a
    /// full bucket reads as full again).
    fn fill(&self, stored: f64) -> f64 {
        if stored >= self.max {
            1.0
        } else {
            let fill = stored * self.inverse_max;
            if fill > 0.0 { fill } else { 0.0 }
        }
    }

    /// Stored permits after `idle_nanos` without unmet demand.
    fn refill(&self, stored: f64, idle_nanos: u64) -> f64 {
        let refilled = stored + nanos_to_f64(idle_nanos) * self.refill_rate;
        // A comparison rather than `f64::min`, whose NaN handling costs three more
        // instructions on this hot path; nothing here is NaN.
        if refilled < self.max {
            refilled
        } else {
            self.max
        }
    }

    /// Stored permits at `now`, for a state whose schedule was free from `free_from` on: the
    /// time since then is idle, except, after a refusal, one spacing at the stored level.
    ///
    /// A refusal proves demand only before `free_from` (any request after it would have
    /// passed), but a steady stream refused in part also leaves a gap of less than one of its
    /// own intervals between `free_from` and its next admitted request. Crediting that gap
    /// keeps a load between the cold and the full rate cold forever (google/guava#3552), so
    /// after a refusal the first spacing is not idle; anything longer is, so a limiter left
    /// idle after an overload still cools down.
    fn stored_after(&self, stored: f64, denied: bool, free_from: u64, now: u64) -> f64 {
        let busy_until = if denied {
            saturating_add(free_from, self.interval(stored))
        } else {
            free_from
        };
        self.refill(stored, now.saturating_sub(busy_until))
    }
}

/// How a request pays for its permits in [`Profile::Smooth`](super::Profile::Smooth).
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
const NEVER: u64 = u64::MAX;

/// The engine's state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SmoothState {
    /// [`Payment::Later`]: when the permits reserved so far are paid for.
    /// [`Payment::Now`]: when the last request passed ([`NEVER`] before the first).
    next_free: u64,
    /// Permits stored, as a fraction of `max` (`0..=1`): a new rate rescales the stored
    /// permits with `max`, as Guava's `setRate` does, without touching the state.
    fill: f64,
    /// Whether a request was refused since the last admission.
    denied: bool,
}

impl SmoothState {
    fn pack(self) -> u128 {
        // `fill` is never negative, so its sign bit carries `denied`.
        let fill = self.fill.to_bits() | u64::from(self.denied) << 63;
        u128::from(self.next_free) << 64 | u128::from(fill)
    }

    fn unpack(word: u128) -> Self {
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
pub(crate) type Decision = Result<(SmoothState, u64), u64>;

/// `permits` asked for at `now` by a caller willing to wait up to `max_wait` ns; `opening` is
/// how far ahead of the clock the schedule starts (the burst: a new limiter has no credit).
pub(crate) fn decide(
    curve: &SmoothCurve,
    payment: Payment,
    state: SmoothState,
    now: u64,
    permits: f64,
    max_wait: u64,
    opening: u64,
) -> Decision {
    match payment {
        Payment::Later => {
            let ready = now.max(state.next_free);
            let wait = ready - now;
            if wait > max_wait {
                return Err(wait - max_wait);
            }
            let stored =
                curve.stored_after(state.fill * curve.max, state.denied, state.next_free, now);
            let (cost, spend) = curve.cost(stored, permits);
            let next = SmoothState {
                next_free: saturating_add(ready, cost),
                fill: curve.fill(stored - spend),
                denied: false,
            };
            Ok((next, wait))
        }
        Payment::Now => {
            let stored = state.fill * curve.max;
            let (cost, spend) = curve.cost(stored, permits);
            let fresh = state.next_free == NEVER;
            let due = if fresh {
                0
            } else {
                saturating_add(state.next_free, cost)
            };
            let ready = now.max(due);
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
            let next = SmoothState {
                // The first request passes at once, with no credit for a burst after it.
                next_free: if fresh {
                    ready.saturating_add(opening)
                } else {
                    ready
                },
                fill: curve.fill(stored - spend),
                denied: false,
            };
            Ok((next, wait))
        }
    }
}

/// `at + nanos`, saturating.
fn saturating_add(at: u64, nanos: f64) -> u64 {
    // Through `i64`, one instruction on x86_64 where `u64` takes several: `as` saturates at
    // `i64::MAX` ns (292 years, beyond any wait) and maps NaN, which cannot occur here, to 0.
    at.saturating_add(nanos as i64 as u64)
}

/// `nanos` as a float, through `i64` (one instruction on x86_64 where `u64` takes several);
/// spans beyond 292 years count as 292 years, which refill any bucket.
fn nanos_to_f64(nanos: u64) -> f64 {
    nanos.min(i64::MAX as u64) as i64 as f64
}

/// The lock-free engine: the state in one 128-bit word, updated by one compare-and-swap per
/// admission. A refusal writes only to mark demand, at most once between two admissions.
#[derive(Debug)]
pub(crate) struct SmoothBucket {
    curve: SharedCurve,
    payment: Payment,
    /// How far ahead of its turn a request may pass, in ns; a new schedule starts this far
    /// ahead of the clock (no credit earned yet).
    burst: u64,
    state: AtomicU128,
}

/// The curve, replaceable at run time: a sequence lock over its words. Readers (every
/// decision) retry if a writer was active; writers take a lock, off the hot path.
#[derive(Debug)]
struct SharedCurve {
    /// Odd while a writer is replacing the words.
    version: AtomicU64,
    words: [AtomicU64; CURVE_WORDS],
    writer: Mutex<()>,
}

const CURVE_WORDS: usize = 7;

impl SharedCurve {
    fn new(curve: SmoothCurve) -> Self {
        SharedCurve {
            version: AtomicU64::new(0),
            words: Self::words(&curve).map(AtomicU64::new),
            writer: Mutex::new(()),
        }
    }

    /// The curve as stored words; [`Self::curve`] reads them back in the same order.
    fn words(curve: &SmoothCurve) -> [u64; CURVE_WORDS] {
        [
            curve.rate,
            curve.stable,
            curve.threshold,
            curve.max,
            curve.slope,
            curve.refill_rate,
            curve.inverse_max,
        ]
        .map(f64::to_bits)
    }

    /// The curve from words in [`Self::words`]'s order.
    fn curve(words: [u64; CURVE_WORDS]) -> SmoothCurve {
        let word = words.map(f64::from_bits);
        SmoothCurve {
            rate: word[0],
            stable: word[1],
            threshold: word[2],
            max: word[3],
            slope: word[4],
            refill_rate: word[5],
            inverse_max: word[6],
        }
    }

    #[inline]
    fn load(&self) -> SmoothCurve {
        loop {
            let before = self.version.load(Ordering::Acquire);
            if before & 1 == 0 {
                let words = std::array::from_fn(|i| self.words[i].load(Ordering::Acquire));
                // The words are read with `Acquire`, so this re-read cannot move before them.
                if self.version.load(Ordering::Acquire) == before {
                    return Self::curve(words);
                }
            }
            std::hint::spin_loop();
        }
    }

    fn store(&self, curve: &SmoothCurve) {
        // A writer that panicked left nothing half-written that the version does not cover.
        let _serialised = self
            .writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let version = self.version.load(Ordering::Relaxed);
        self.version.store(version + 1, Ordering::Release);
        std::sync::atomic::fence(Ordering::Release);
        for (word, value) in self.words.iter().zip(Self::words(curve)) {
            word.store(value, Ordering::Release);
        }
        self.version.store(version + 2, Ordering::Release);
    }
}

impl SmoothBucket {
    /// A bucket built at `now`: cold (full), or warm (empty) if `start_warm`. A request may
    /// pass up to `burst` ns before its turn, but a new bucket has earned no such credit yet:
    /// its schedule starts `burst` ahead, so the first second of a cold start admits the cold
    /// rate, not a burst on top of it.
    pub(crate) fn new(
        curve: SmoothCurve,
        payment: Payment,
        now: u64,
        start_warm: bool,
        burst: u64,
    ) -> Self {
        let state = SmoothState {
            next_free: match payment {
                Payment::Later => now.saturating_add(burst),
                Payment::Now => NEVER,
            },
            fill: if start_warm { 0.0 } else { 1.0 },
            denied: false,
        };
        SmoothBucket {
            curve: SharedCurve::new(curve),
            payment,
            burst,
            state: AtomicU128::new(state.pack()),
        }
    }

    /// Reserves `permits` at `now` if they are available within `max_wait` ns: `Ok` with how
    /// long to wait before using them, or `Err` with how much longer the caller would have to
    /// be willing to wait.
    pub(crate) fn reserve(&self, now: u64, permits: f64, max_wait: u64) -> Result<u64, u64> {
        let mut word = self.state.load(Ordering::Acquire);
        loop {
            // A curve replaced between this read and the compare-and-swap below only means
            // this decision used the rate in force when it started.
            let curve = self.curve.load();
            let state = SmoothState::unpack(word);
            let (next, wait) = match decide(
                &curve,
                self.payment,
                state,
                now,
                permits,
                max_wait,
                self.burst,
            ) {
                Ok(admitted) => admitted,
                Err(short) => {
                    if state.denied {
                        return Err(short);
                    }
                    // Mark the unmet demand once; a lost race means someone else changed
                    // the state, so decide again.
                    let marked = SmoothState {
                        denied: true,
                        ..state
                    };
                    match self.state.compare_exchange_weak(
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
            match self.state.compare_exchange_weak(
                word,
                next.pack(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(wait),
                Err(actual) => word = actual,
            }
        }
    }

    /// Permits stored at `now`, counting the idle time since the last decision (an estimate
    /// for snapshots: the next decision may credit slightly less, by the cost it pays).
    pub(crate) fn stored_at(&self, now: u64) -> f64 {
        let curve = self.curve.load();
        let state = self.state();
        let stored = state.fill * curve.max;
        if state.next_free == NEVER {
            return stored;
        }
        curve.stored_after(stored, state.denied, state.next_free, now)
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
    /// time already reserved is kept, so the next caller still waits it out.
    pub(crate) fn set_curve(&self, curve: &SmoothCurve) {
        self.curve.store(curve);
    }

    /// The state now, as the next decision would see it before deciding.
    pub(crate) fn state(&self) -> SmoothState {
        SmoothState::unpack(self.state.load(Ordering::Acquire))
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

    /// TV-13 in the smooth profile: where Sentinel admits nothing, 1 permit/s with factor 3
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
        let after_admission = t.bucket.state();
        let short = t.bucket.reserve(t.now, 1.0, 0).unwrap_err();
        // The cost of the next permit: the mean interval between `max − 1` and `max − 2`.
        let interval = t.bucket.curve().interval(t.bucket.curve().max() - 1.5);
        assert!(
            short.abs_diff(interval as u64) < 1000,
            "{short} vs {interval}"
        );
        let marked = t.bucket.state();
        assert!(marked.denied && !after_admission.denied);
        assert_eq!(
            (marked.next_free, marked.fill),
            (after_admission.next_free, after_admission.fill)
        );
        // A second refusal writes nothing.
        assert_eq!(t.bucket.reserve(t.now, 1.0, 0), Err(short));
        assert_eq!(t.bucket.state(), marked);
        // Waiting as long as it said admits.
        t.now += short;
        assert_eq!(t.bucket.reserve(t.now, 1.0, 0), Ok(0));
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

    #[test]
    fn states_pack_and_unpack() {
        for state in [
            SmoothState {
                next_free: NEVER,
                fill: 1.0,
                denied: true,
            },
            SmoothState {
                next_free: 0,
                fill: 0.0,
                denied: false,
            },
            SmoothState {
                next_free: 12_345,
                fill: 0.3,
                denied: true,
            },
        ] {
            assert_eq!(SmoothState::unpack(state.pack()), state);
        }
    }
}
