//! Separating queue time from clock skew and network time.
//!
//! The raw queue time a request-start header gives
//! ([`parse_request_start`](super::header::parse_request_start)) is the time the request
//! waited, plus the proxy's and the service's clock skew (of either sign), plus the network
//! time between them. Skew and network time change slowly, and some request always waits
//! almost nothing, so the smallest raw queue times seen recently estimate them: the *floor*.
//! [`SkewFloor`] subtracts it, and what remains is the request's sojourn.
//!
//! Raw queue times are kept signed: a negative one means the service's clock is behind the
//! proxy's, and the floor absorbs it (see the [guide](crate::guide::signals)).
//!
//! # Forged stamps
//!
//! A client whose header reaches the service (the edge proxy keeps it) can stamp
//! a request up to the parser's `max_future` (1 s by default) ahead of the service's clock, and
//! a skewed proxy clock does the same by accident. Such a stamp:
//!
//! - always lowers its own request's wait, to 0 if it is below the floor, and so can lower the
//!   queue gate's interval minimum;
//! - fewer than four of them in one window cannot pull the floor below the smallest genuine
//!   raw queue time: the floor is the largest of four lanes' minima, each stamp lowers only
//!   its own lane's, and a lane without one holds the floor up (once genuine requests have
//!   reached every lane). Other requests' waits stay within what the genuine stamps' minimum
//!   would give;
//! - forged in numbers, reaching every lane, pulls the floor down as far as −`max_future`, and
//!   lengthens other requests' waits by as much as it fell: up to `max_future` plus
//!   `floor_cap`.
//!
//! So only trust a header your edge proxy overwrites (or appends to, read with
//! [`Pick::Last`](super::header::Pick::Last)), and set `max_future` to the clocks' worst skew.

use std::fmt;
use std::time::Duration;

use super::rng;
use crate::ConfigError;
use crate::sync::{AtomicU64, Line, Ordering};

/// The lanes a half window's minimum is split into: stamps below the others' in fewer lanes
/// than this cannot lower the floor.
const LANES: usize = 4;
/// A slot's low bits: a raw queue time plus [`BIAS`], so that words of one half window compare
/// like their raw queue times.
const VALUE_BITS: u32 = 40;
const VALUE_MASK: u64 = (1 << VALUE_BITS) - 1;
/// A slot's high bits: the index of its half window, modulo 2²⁴.
const TAG_MASK: u64 = (1 << (64 - VALUE_BITS)) - 1;
const BIAS: i64 = 1 << (VALUE_BITS - 1);
/// The raw queue times a slot holds, ±549.76 s; the largest biased value, all ones, marks an
/// [`EMPTY`] slot.
const MIN_RAW: i64 = -BIAS;
const MAX_RAW: i64 = BIAS - 2;
/// A slot with no sample.
const EMPTY: u64 = u64::MAX;

/// The clock-skew floor: the largest of four lanes' smallest raw queue times over the last one
/// to two half windows, and each request's sojourn above it.
///
/// Time is cut into half windows (150 s of the default 300 s window) on the monotonic clock.
/// Each request records its raw queue time in one of four lanes, drawn at random; a lane's
/// minimum is taken over the current half and the one before, and the floor is the largest
/// minimum of the lanes that hold one. It follows a drifting clock within one to two halves,
/// and a gap of two halves without requests starts it afresh. A stamp far below the others
/// (forged, or from a skewed proxy) lowers only its own lane, so fewer than four of them in a
/// window cannot pull the floor below what the other requests set (see the
/// [module docs](self)); with few requests in a window, the floor is the largest of up to four
/// raw queue times rather than the smallest.
///
/// The floor is applied at most up to `floor_cap` (20 ms by default): a floor below the cap
/// (including any negative one) is skew and network time, but a higher floor means every
/// request waited, and only the cap is deducted:
///
/// `excess = max(0, raw − min(floor, floor_cap))`
///
/// Lock-free and allocation-free: eight atomic words on one cache line, each packing a half
/// window's index (modulo 2²⁴) and a lane's minimum in it, lowered with compare-and-swap. Share
/// it by reference or in an `Arc`; every method takes `&self`. Raw queue times beyond ±549 s
/// are held as ±549 s (the parser's default bounds are −1 s and 60 s).
///
/// # Example
///
/// ```
/// use admit::signal::queue::floor::SkewFloor;
///
/// const MS: i64 = 1_000_000;
/// let floor = SkewFloor::default(); // 300 s window, 20 ms cap
/// let now = 10_000_000_000; // monotonic ns
/// for _ in 0..8 {
///     assert_eq!(floor.excess(-5 * MS / 2, now), 0); // the service's clock is 2.5 ms behind
/// }
/// assert_eq!(floor.floor(now), Some(-5 * MS / 2));
/// // A stamp 0.9 s ahead of the service's clock: its own request waited nothing.
/// assert_eq!(floor.excess(-900 * MS, now), 0);
/// // The first request of a fresh window is its own floor, of which only the cap is deducted.
/// let later = 1_000_000_000_000;
/// assert_eq!(floor.excess(100 * MS, later), 80_000_000);
/// ```
pub struct SkewFloor {
    /// Lane `l`'s minimum in the even half windows at `2l`, in the odd ones at `2l + 1`.
    slots: Line<[AtomicU64; 2 * LANES]>,
    half_nanos: u64,
    floor_cap_nanos: i64,
    window: Duration,
    floor_cap: Duration,
}

impl SkewFloor {
    /// A floor over `window` (two halves of `window / 2`, in whole ns), deducting at most
    /// `floor_cap` (saturated at `i64::MAX` ns: `Duration::MAX` is no cap).
    ///
    /// # Errors
    ///
    /// [`DurationTooShort`](ConfigError::DurationTooShort) if `window` is under 2 ns (zero
    /// included), so that a half would be empty;
    /// [`DurationTooLong`](ConfigError::DurationTooLong) if it is longer than the clock can
    /// count.
    ///
    /// ```
    /// use std::time::Duration;
    /// use admit::ConfigError;
    /// use admit::signal::queue::floor::SkewFloor;
    ///
    /// let floor = SkewFloor::new(Duration::from_secs(60), Duration::from_millis(5))?;
    /// assert_eq!(floor.window(), Duration::from_secs(60));
    /// assert!(SkewFloor::new(Duration::ZERO, Duration::ZERO).is_err());
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn new(window: Duration, floor_cap: Duration) -> Result<Self, ConfigError> {
        let window_nanos =
            u64::try_from(window.as_nanos()).map_err(|_| ConfigError::DurationTooLong {
                setting: "window",
                value: window,
            })?;
        let half_nanos = window_nanos / 2;
        if half_nanos == 0 {
            return Err(ConfigError::DurationTooShort {
                setting: "window",
                value: window,
                min: Duration::from_nanos(2),
            });
        }
        let floor_cap_nanos = i64::try_from(floor_cap.as_nanos()).unwrap_or(i64::MAX);
        Ok(SkewFloor {
            slots: Line::new(std::array::from_fn(|_| AtomicU64::new(EMPTY))),
            half_nanos,
            floor_cap_nanos,
            window,
            floor_cap,
        })
    }

    /// Records a request's raw queue time `raw_ns` (from
    /// [`parse_request_start`](super::header::parse_request_start)) at `now_ns` on the
    /// monotonic clock ([`Clock::now_nanos`](crate::clock::Clock::now_nanos)) in a lane drawn
    /// at random, and returns its sojourn in ns: `max(0, raw − min(floor, floor_cap))`, the
    /// floor including this request.
    ///
    /// A thread whose `now_ns` is two halves behind another's records nothing, and measures
    /// against what it can see.
    pub fn excess(&self, raw_ns: i64, now_ns: u64) -> u64 {
        self.excess_in_lane(raw_ns, now_ns, rng::draw_below(LANES as u32) as usize)
    }

    /// [`excess`](Self::excess), recording in lane `lane` (below [`LANES`]).
    pub(crate) fn excess_in_lane(&self, raw_ns: i64, now_ns: u64, lane: usize) -> u64 {
        let half = now_ns / self.half_nanos;
        let raw = clamp(raw_ns);
        let own = self
            .record(half, lane, raw)
            .into_iter()
            .chain(self.read(lane, half.wrapping_sub(1)))
            .fold(raw, i64::min);
        let floor = (0..LANES)
            .filter(|&other| other != lane)
            .filter_map(|other| self.lane_min(other, half))
            .fold(own, i64::max);
        let deducted = floor.min(self.floor_cap_nanos);
        // Both fit an i64, so their difference fits an i128 and a non-negative one a u64.
        u64::try_from(i128::from(raw_ns) - i128::from(deducted)).unwrap_or(0)
    }

    /// The floor at `now_ns`: the largest of the lanes' smallest raw queue times recorded in
    /// its half window and the one before, or `None` if there is none. Records nothing.
    pub fn floor(&self, now_ns: u64) -> Option<i64> {
        let half = now_ns / self.half_nanos;
        (0..LANES)
            .filter_map(|lane| self.lane_min(lane, half))
            .max()
    }

    /// The window: two half windows.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// The most that is deducted from a raw queue time as skew and network time.
    pub fn floor_cap(&self) -> Duration {
        self.floor_cap
    }

    /// Lowers lane `lane`'s minimum of half `half` to `raw` (replacing an older half's), and
    /// returns the minimum, or `None` if the slot already holds a later half. `raw` must be
    /// [`clamp`]ed.
    fn record(&self, half: u64, lane: usize, raw: i64) -> Option<i64> {
        let tag = half & TAG_MASK;
        let mine = pack(tag, raw);
        let slot = &self.slots[slot_index(lane, half)];
        // Relaxed throughout: each slot is a value on its own, publishing nothing else.
        let mut seen = slot.load(Ordering::Relaxed);
        loop {
            match unpack(seen) {
                Some((seen_tag, min)) if seen_tag == tag && min <= raw => return Some(min),
                Some((seen_tag, _)) if is_later(seen_tag, tag) => return None,
                _ => {}
            }
            match slot.compare_exchange_weak(seen, mine, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(raw),
                Err(actual) => seen = actual,
            }
        }
    }

    /// Lane `lane`'s minimum over half `half` and the one before, if either holds one.
    fn lane_min(&self, lane: usize, half: u64) -> Option<i64> {
        match (self.read(lane, half), self.read(lane, half.wrapping_sub(1))) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Lane `lane`'s minimum of half `half`, if its slot holds that half.
    fn read(&self, lane: usize, half: u64) -> Option<i64> {
        let word = self.slots[slot_index(lane, half)].load(Ordering::Relaxed);
        unpack(word).and_then(|(tag, min)| (tag == half & TAG_MASK).then_some(min))
    }
}

/// 300 s window, 20 ms cap.
impl Default for SkewFloor {
    fn default() -> Self {
        SkewFloor::new(Duration::from_secs(300), Duration::from_millis(20))
            .expect("the default window is valid")
    }
}

impl fmt::Debug for SkewFloor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SkewFloor")
            .field("window", &self.window)
            .field("floor_cap", &self.floor_cap)
            .finish_non_exhaustive()
    }
}

/// Where lane `lane`'s minimum of half `half` lives: the lanes' even and odd halves side by side.
fn slot_index(lane: usize, half: u64) -> usize {
    debug_assert!(lane < LANES, "lane {lane}");
    2 * lane + (half & 1) as usize
}

fn clamp(raw: i64) -> i64 {
    raw.clamp(MIN_RAW, MAX_RAW)
}

/// `raw` must be [`clamp`]ed.
fn pack(tag: u64, raw: i64) -> u64 {
    (tag << VALUE_BITS) | (raw + BIAS) as u64
}

fn unpack(word: u64) -> Option<(u64, i64)> {
    let value = word & VALUE_MASK;
    (value != VALUE_MASK).then(|| (word >> VALUE_BITS, value as i64 - BIAS))
}

/// Whether tag `a` is a later half than `b`, modulo 2²⁴.
fn is_later(a: u64, b: u64) -> bool {
    let ahead = a.wrapping_sub(b) & TAG_MASK;
    ahead != 0 && ahead <= TAG_MASK / 2
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier};
    use std::thread;

    use proptest::prelude::*;

    use super::*;

    const MS: i64 = 1_000_000;
    const SEC: u64 = 1_000_000_000;

    fn secs(s: u64) -> u64 {
        s * SEC
    }

    #[test]
    fn words_round_trip_and_never_look_empty() {
        for raw in [MIN_RAW, -1, 0, 1, MAX_RAW] {
            for tag in [0, 1, TAG_MASK] {
                assert_eq!(unpack(pack(tag, raw)), Some((tag, raw)));
            }
        }
        assert_eq!(unpack(EMPTY), None);
        assert_eq!(clamp(i64::MIN), MIN_RAW);
        assert_eq!(clamp(i64::MAX), MAX_RAW);
    }

    #[test]
    fn later_tags_wrap() {
        assert!(is_later(2, 0));
        assert!(is_later(0, TAG_MASK - 1));
        assert!(!is_later(0, 2));
        assert!(!is_later(5, 5));
    }

    #[test]
    fn the_slots_fill_one_cache_line() {
        assert_eq!(size_of::<[AtomicU64; 2 * LANES]>(), 64);
        let floor = SkewFloor::default();
        assert_eq!(floor.slots.as_ptr() as usize % 64, 0);
        let indices: Vec<usize> = (0..LANES)
            .flat_map(|lane| [slot_index(lane, 0), slot_index(lane, 1)])
            .collect();
        assert_eq!(indices, [0, 1, 2, 3, 4, 5, 6, 7]);
    }

    #[test]
    fn a_late_thread_records_nothing() {
        let floor = SkewFloor::new(Duration::from_nanos(20), Duration::MAX).unwrap();
        // Half 2 (t = 20 ns) holds 7; a thread still in half 0 (t = 5 ns) sees a later half.
        assert_eq!(floor.excess_in_lane(7, 20, 0), 0);
        assert_eq!(floor.excess_in_lane(3, 5, 0), 0);
        assert_eq!(floor.floor(20), Some(7));
        assert_eq!(floor.excess_in_lane(9, 20, 0), 2);
    }

    #[test]
    fn extreme_inputs_neither_panic_nor_wrap() {
        let floor = SkewFloor::new(Duration::from_nanos(2), Duration::MAX).unwrap();
        // The floor is the clamped raw itself, below the cap.
        assert_eq!(
            floor.excess_in_lane(i64::MAX, u64::MAX, 3),
            (i64::MAX - MAX_RAW) as u64
        );
        assert_eq!(floor.excess_in_lane(i64::MIN, u64::MAX, 3), 0);
        let floor = SkewFloor::new(Duration::from_nanos(2), Duration::ZERO).unwrap();
        assert_eq!(floor.excess_in_lane(i64::MAX, 0, 0), i64::MAX as u64);
    }

    /// The reference's floor vectors (queue.md §10.1) were derived from a floor that is the
    /// minimum of every raw queue time: here, every request in one lane. Over several lanes
    /// the floor is the largest lane minimum, so a raw alone in its lane is its own floor.
    #[test]
    fn the_floor_absorbs_skew_within_a_half() {
        let now = secs(10);
        let raws = [-25 * MS / 10, -24 * MS / 10, -25 * MS / 10, 175 * MS / 10];
        let cases: [([usize; 4], [u64; 4], i64); 4] = [
            // The reference's vectors.
            ([0, 0, 0, 0], [0, 100_000, 0, 20_000_000], -25 * MS / 10),
            // Changed: 17.5 ms alone in lane 1 is the floor, and its request waited nothing.
            ([0, 0, 0, 1], [0, 100_000, 0, 0], 175 * MS / 10),
            // Changed: −2.4 ms in a lane of its own lifts the floor to −2.4 ms.
            ([0, 1, 0, 1], [0, 0, 0, 19_900_000], -24 * MS / 10),
            ([0, 1, 2, 3], [0, 0, 0, 0], 175 * MS / 10),
        ];
        for (lanes, excesses, last) in cases {
            let floor = SkewFloor::default();
            for ((raw, lane), excess) in raws.into_iter().zip(lanes).zip(excesses) {
                assert_eq!(
                    floor.excess_in_lane(raw, now, lane),
                    excess,
                    "raw {raw} in lane {lane} of {lanes:?}"
                );
            }
            assert_eq!(floor.floor(now), Some(last), "{lanes:?}");
        }
    }

    #[test]
    fn the_floor_rotates_with_the_half_windows() {
        // The reference's vectors: every request in one lane.
        let floor = SkewFloor::new(Duration::from_secs(300), Duration::from_millis(20)).unwrap();
        assert_eq!(floor.floor(secs(10)), None);
        assert_eq!(floor.excess_in_lane(-25 * MS / 10, secs(10), 2), 0);
        assert_eq!(
            floor.excess_in_lane(MS, secs(200), 2),
            3_500_000,
            "half 0 still counts"
        );
        assert_eq!(floor.floor(secs(200)), Some(-25 * MS / 10));
        assert_eq!(
            floor.excess_in_lane(MS, secs(320), 2),
            0,
            "half 0 has left the window"
        );
        assert_eq!(floor.floor(secs(320)), Some(MS));
        // Two halves without a request: the floor starts afresh.
        assert_eq!(floor.floor(secs(600)), None);
        assert_eq!(floor.excess_in_lane(5 * MS, secs(600), 2), 0);
        assert_eq!(floor.floor(secs(600)), Some(5 * MS));

        // Changed: the 1 ms raw at 200 s in another lane is that lane's minimum, and the floor.
        let floor = SkewFloor::default();
        assert_eq!(floor.excess_in_lane(-25 * MS / 10, secs(10), 0), 0);
        assert_eq!(floor.excess_in_lane(MS, secs(200), 1), 0);
        assert_eq!(floor.floor(secs(200)), Some(MS));
        assert_eq!(
            floor.lane_min(0, secs(200) / floor.half_nanos),
            Some(-25 * MS / 10)
        );
        assert_eq!(
            floor.floor(secs(320)),
            Some(MS),
            "lane 0 has left the window"
        );
    }

    #[test]
    fn the_floor_deducts_at_most_its_cap() {
        let floor = SkewFloor::default();
        // The first sample is its own floor: 100 ms, of which the 20 ms cap is deducted.
        assert_eq!(floor.excess_in_lane(100 * MS, secs(1), 2), 80_000_000);
        assert_eq!(floor.floor(secs(1)), Some(100 * MS));
        let uncapped = SkewFloor::new(Duration::from_secs(300), Duration::MAX).unwrap();
        assert_eq!(uncapped.excess_in_lane(100 * MS, secs(1), 0), 0);
        assert_eq!(uncapped.excess_in_lane(130 * MS, secs(1), 0), 30_000_000);
        assert_eq!(uncapped.excess_in_lane(130 * MS, secs(1), 1), 0);
    }

    #[test]
    fn forged_stamps_lower_only_their_own_lanes() {
        let floor = SkewFloor::default();
        let now = secs(10);
        // Genuine raws −2.5, −1, 0 and 2 ms in lanes 0 to 3: the floor is 2 ms.
        for (lane, raw) in [-25 * MS / 10, -MS, 0, 2 * MS].into_iter().enumerate() {
            floor.excess_in_lane(raw, now, lane);
        }
        assert_eq!(floor.floor(now), Some(2 * MS));
        // Stamps 0.9 s ahead read no wait of their own, and the first three lower only their
        // lanes: the floor stays at or above the smallest genuine raw, −2.5 ms.
        let forged = -900 * MS;
        for (lane, after) in [(3, 0), (2, -MS), (1, -25 * MS / 10)] {
            assert_eq!(floor.excess_in_lane(forged, now, lane), 0);
            assert_eq!(floor.floor(now), Some(after), "lane {lane}");
        }
        assert_eq!(floor.excess_in_lane(5 * MS, now, 0), 75 * MS as u64 / 10);
        // A fourth, in the last lane, is the floor: a genuine 5 ms now reads 905 ms.
        assert_eq!(floor.excess_in_lane(forged, now, 0), 0);
        assert_eq!(floor.floor(now), Some(forged));
        assert_eq!(floor.excess_in_lane(5 * MS, now, 2), 905 * MS as u64);
    }

    #[test]
    fn racing_threads_leave_each_lanes_true_minimum() {
        const THREADS: i64 = 4;
        const SAMPLES: i64 = 20_000;
        /// Thread `t`'s `i`th raw in half `half`: interleaved descending and ascending.
        fn raw(t: i64, i: i64, half: i64) -> i64 {
            let signed = if i % 2 == 0 { -i } else { i };
            signed - half * 1000 - t * SAMPLES
        }
        fn lane(i: i64) -> usize {
            (i / 2 % LANES as i64) as usize
        }
        let floor = Arc::new(SkewFloor::default());
        let start = Arc::new(Barrier::new(THREADS as usize));
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (floor, start) = (floor.clone(), start.clone());
                thread::spawn(move || {
                    start.wait();
                    for (half, now) in [(0, secs(10)), (1, secs(160))] {
                        for i in 0..SAMPLES {
                            let mine = raw(t, i, half);
                            let excess = floor.excess_in_lane(mine, now, lane(i));
                            // The floor is no lower than the lowest raw of all (all of them
                            // far below the 20 ms cap).
                            assert!(excess as i64 <= mine - raw(THREADS - 1, SAMPLES - 2, 1));
                        }
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        // Each lane's minimum over the halves a reading at `now` sees, by brute force.
        let model = |l: usize, halves: &[i64]| -> Option<i64> {
            halves
                .iter()
                .flat_map(|&half| {
                    (0..THREADS).flat_map(move |t| {
                        (0..SAMPLES)
                            .filter(move |&i| lane(i) == l)
                            .map(move |i| raw(t, i, half))
                    })
                })
                .min()
        };
        for (now, halves) in [
            (secs(10), &[0][..]),
            (secs(160), &[0, 1]),
            (secs(310), &[1]),
        ] {
            let mins: Vec<Option<i64>> = (0..LANES).map(|l| model(l, halves)).collect();
            for (l, &min) in mins.iter().enumerate() {
                assert_eq!(
                    floor.lane_min(l, now / floor.half_nanos),
                    min,
                    "lane {l} at {now}"
                );
            }
            assert_eq!(floor.floor(now), mins.iter().flatten().max().copied());
        }
    }

    /// A forged raw: anything, or below the genuine raws and the cap by `lead` ns (a stamp from
    /// the future).
    #[derive(Clone, Copy, Debug)]
    enum Forged {
        Any(i64),
        Below(u64),
    }

    /// Genuine raw queue times with their lanes: at least one in every lane, in any order.
    fn genuine() -> impl Strategy<Value = Vec<(i64, usize)>> {
        let raw = || -50 * MS..=200 * MS;
        (
            proptest::collection::vec(raw(), LANES),
            proptest::collection::vec((raw(), 0..LANES), 0..24),
        )
            .prop_flat_map(|(first, more)| {
                let mut all: Vec<(i64, usize)> = first.into_iter().zip(0..LANES).collect();
                all.extend(more);
                Just(all).prop_shuffle()
            })
    }

    fn forged() -> impl Strategy<Value = Vec<(Forged, usize, prop::sample::Index)>> {
        let raw = prop_oneof![
            any::<i64>().prop_map(Forged::Any),
            (0..=2 * SEC).prop_map(Forged::Below),
        ];
        proptest::collection::vec((raw, 0..LANES, any::<prop::sample::Index>()), 0..=3)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        #[test]
        fn fewer_than_four_forged_raws_cannot_pull_the_floor_below_the_genuine_ones(
            genuine in genuine(),
            forged in forged(),
        ) {
            let floor = SkewFloor::default();
            let cap = 20 * MS;
            let now = secs(10);
            let lowest = genuine.iter().map(|&(raw, _)| raw).min().unwrap();
            let mut stream: Vec<(i64, usize, bool)> =
                genuine.iter().map(|&(raw, lane)| (raw, lane, false)).collect();
            for (raw, lane, at) in forged {
                let raw = match raw {
                    Forged::Any(raw) => raw,
                    Forged::Below(lead) => lowest.min(cap) - lead as i64,
                };
                stream.insert(at.index(stream.len() + 1), (raw, lane, true));
            }
            let mut genuine_mins = [None::<i64>; LANES];
            let mut forged_in = [false; LANES];
            for (raw, lane, is_forged) in stream {
                let excess = floor.excess_in_lane(raw, now, lane);
                if is_forged {
                    forged_in[lane] = true;
                } else {
                    genuine_mins[lane] = Some(genuine_mins[lane].map_or(raw, |min| min.min(raw)));
                }
                // While a lane holds genuine raws only, the floor is at least its minimum.
                let clean = (0..LANES).any(|l| genuine_mins[l].is_some() && !forged_in[l]);
                if !clean {
                    continue;
                }
                let genuine_low = genuine_mins.iter().flatten().min().copied().unwrap();
                prop_assert!(floor.floor(now).unwrap() >= genuine_low);
                if !is_forged {
                    // No longer than the minimum of the genuine raws alone would make it.
                    prop_assert!(excess as i64 <= raw - genuine_low.min(cap));
                } else if raw <= lowest.min(cap) {
                    prop_assert_eq!(excess, 0, "a forged raw reads no wait");
                }
            }
            // Every lane holds a genuine raw, at most three a forged one: the forged raws moved
            // the floor down at most to the smallest genuine raw.
            let alone = SkewFloor::default();
            for &(raw, lane) in &genuine {
                alone.excess_in_lane(raw, now, lane);
            }
            let floor = floor.floor(now).unwrap();
            prop_assert!(lowest <= floor && floor <= alone.floor(now).unwrap());
        }

        #[test]
        fn the_floor_is_the_largest_lane_minimum_of_the_window(
            window in 0u64..1_000,
            cap in any::<u64>(),
            samples in proptest::collection::vec((any::<i64>(), 0u64..3_000, 0..LANES), 1..30),
        ) {
            let Ok(floor) = SkewFloor::new(Duration::from_nanos(window), Duration::from_nanos(cap))
            else {
                prop_assert!(window < 2);
                return Ok(());
            };
            let half = window / 2;
            let mut times: Vec<_> = samples.iter().map(|&(_, t, _)| t).collect();
            times.sort_unstable();
            let samples: Vec<(i64, u64, usize)> = samples
                .iter()
                .zip(times)
                .map(|(&(raw, _, lane), t)| (raw, t, lane))
                .collect();
            for (i, &(raw, now, lane)) in samples.iter().enumerate() {
                let excess = floor.excess_in_lane(raw, now, lane);
                // The model: the largest of the lanes' clamped minima over this half and the
                // one before.
                let h = now / half;
                let model = (0..LANES)
                    .filter_map(|l| {
                        samples[..=i]
                            .iter()
                            .filter(|&&(_, t, in_lane)| in_lane == l && t / half + 1 >= h)
                            .map(|&(r, _, _)| clamp(r))
                            .min()
                    })
                    .max()
                    .unwrap();
                prop_assert_eq!(floor.floor(now), Some(model));
                let deducted = model.min(i64::try_from(cap).unwrap_or(i64::MAX));
                prop_assert_eq!(excess as i128, (raw as i128 - deducted as i128).max(0));
            }
        }
    }
}
