//! Separating queue time from clock skew and network time.
//!
//! The raw queue time a request-start header gives
//! ([`parse_request_start`](super::header::parse_request_start)) is the time the request
//! waited, plus the proxy's and the service's clock offset (of either sign), plus the network
//! time between them. A request that found the service *idle* waited for nothing but the
//! network: its raw queue time is the offset. [`SkewFloor`] keeps the smallest of those, the
//! *floor*, and each request's wait is its raw queue time less the floor.
//!
//! A request is idle when nothing was in flight in the shedder and nothing ended (or was
//! refused) in the `quiet` time before it: a proxy hands a queued request over the moment a
//! slot frees, and a runtime polls a queued task the moment a worker frees, so a request that
//! queued always finds the service busy or just vacated. Only idle requests can raise the
//! floor; any request can lower it, as no request waits less than nothing. So:
//!
//! - any steady offset is the floor from the first idle request on;
//! - a clock step forward is absorbed once the idle requests from before it have left the
//!   window (one to two half windows); a step back at once;
//! - a queue that never empties never raises the floor, however long it stands: the floor
//!   holds the last offset it saw when no idle request comes;
//! - a service that never idles learns a fall of the offset at once but a rise only when it
//!   next idles. Refusing everything (a floor too low makes every wait long) empties it.
//!
//! Raw queue times are kept signed: a negative one means the service's clock is behind the
//! proxy's. See the [guide](crate::guide::signals).
//!
//! # Forged stamps
//!
//! A client whose header reaches the service (the edge proxy keeps it) can stamp a request up
//! to the parser's `max_future` (1 s by default) ahead of the service's clock, and a skewed
//! proxy clock does the same by accident. Such a stamp:
//!
//! - always lowers its own request's wait, to 0 if it is below the floor, and so can lower the
//!   queue gate's share of long waits;
//! - fewer than four of them in one window cannot pull the floor below the smallest genuine
//!   raw queue time: the floor is the largest of four lanes' minima, each stamp lowers only
//!   its own lane's, and a lane without one holds the floor up (once genuine requests have
//!   reached every lane). Other requests' waits stay within what the genuine stamps' minimum
//!   would give;
//! - forged in numbers, reaching every lane, pulls the floor down as far as −`max_future`, and
//!   lengthens other requests' waits by as much as it fell, until the forged stamps stop and
//!   the window passes (refusing them empties the service, and idle requests then restore
//!   the floor).
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

/// The clock-skew floor a [`Shedder`](crate::shed::Shedder) subtracts from each stamped
/// request's raw queue time (see the [module docs](self) for the rule).
///
/// Time is cut into half windows (2 s of the default 4 s window) on the shedder's clock. A
/// request is recorded, in one of four lanes drawn at random, when it found the service idle
/// (nothing in flight, nothing ended in the last `quiet`, 2 ms by default) or when its raw
/// queue time is below the floor; a lane's minimum is taken over the current half and the one
/// before, and the floor is the largest minimum of the lanes that hold one. When no lane holds
/// one, the floor is the last one read. A request's wait is `max(0, raw − floor)`.
///
/// Lock-free and allocation-free: eight atomic words on one cache line, each packing a half
/// window's index (modulo 2²⁴) and a lane's minimum in it, lowered with compare-and-swap, and
/// one word for the floor last read. Raw queue times beyond ±549 s are held as ±549 s (the
/// parser's default bounds are −1 s and 60 s).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::shed::Shedder;
/// use admit::signal::queue::floor::SkewFloor;
///
/// let floor = SkewFloor::new(Duration::from_secs(10), Duration::from_millis(1))?;
/// assert_eq!(floor.window(), Duration::from_secs(10));
/// let shedder = Shedder::builder().skew_floor(floor).build()?;
/// # let _ = shedder;
/// # Ok::<(), admit::ConfigError>(())
/// ```
pub struct SkewFloor {
    /// Lane `l`'s minimum in the even half windows at `2l`, in the odd ones at `2l + 1`.
    slots: Line<[AtomicU64; 2 * LANES]>,
    /// The floor last read, biased as a slot's value; [`EMPTY`] before the first.
    held: AtomicU64,
    half_nanos: u64,
    quiet_nanos: u64,
    window: Duration,
    quiet: Duration,
}

impl SkewFloor {
    /// A floor over `window` (two halves of `window / 2`, in whole ns) that takes a request
    /// as idle when nothing was in flight and nothing ended in the `quiet` before it
    /// (saturated at `u64::MAX` ns).
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
    /// use admit::signal::queue::floor::SkewFloor;
    ///
    /// assert!(SkewFloor::new(Duration::ZERO, Duration::ZERO).is_err());
    /// ```
    pub fn new(window: Duration, quiet: Duration) -> Result<Self, ConfigError> {
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
        Ok(SkewFloor {
            slots: Line::new(std::array::from_fn(|_| AtomicU64::new(EMPTY))),
            held: AtomicU64::new(EMPTY),
            half_nanos,
            quiet_nanos: u64::try_from(quiet.as_nanos()).unwrap_or(u64::MAX),
            window,
            quiet,
        })
    }

    /// The window: two half windows.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// How long nothing may have ended before a request for it to count as idle.
    pub fn quiet(&self) -> Duration {
        self.quiet
    }

    /// How stale the note of the last request's end may be: an eighth of `quiet`, so that a
    /// shedder writes it at most once a granule, not once a request.
    #[inline]
    pub(crate) fn granule(&self) -> u64 {
        self.quiet_nanos / 8
    }

    /// Whether a request arriving at `now_ns` with `in_flight` requests in flight, the last
    /// one having ended (or been refused) at `ended_ns` (`None`: never), found the service
    /// idle.
    #[inline]
    pub(crate) fn is_idle(&self, in_flight: u64, ended_ns: Option<u64>, now_ns: u64) -> bool {
        in_flight == 0
            && ended_ns.is_none_or(|ended| now_ns.saturating_sub(ended) >= self.quiet_nanos)
    }

    /// Records a request's raw queue time `raw_ns` (from
    /// [`parse_request_start`](super::header::parse_request_start)) at `now_ns` on the
    /// shedder's clock, in a lane drawn at random, if it found the service `idle` or is below
    /// the floor; returns its wait in ns, `max(0, raw − floor)` with the floor that includes
    /// it. `None` only if nothing is known: no request was ever recorded.
    ///
    /// A thread whose `now_ns` is two halves behind another's records nothing, and measures
    /// against what it can see.
    #[inline]
    pub(crate) fn excess(&self, raw_ns: i64, now_ns: u64, idle: bool) -> Option<u64> {
        self.excess_in_lane(raw_ns, now_ns, idle, rng::draw_below(LANES as u32) as usize)
    }

    /// [`excess`](Self::excess), recording in lane `lane` (below [`LANES`]).
    pub(crate) fn excess_in_lane(
        &self,
        raw_ns: i64,
        now_ns: u64,
        idle: bool,
        lane: usize,
    ) -> Option<u64> {
        let half = now_ns / self.half_nanos;
        let raw = clamp(raw_ns);
        let known = self.floor_at(half);
        if idle || known.is_none_or(|floor| raw < floor) {
            self.record(half, lane, raw);
        }
        let floor = self.floor_at(half)?;
        // Written only when it moves: every request reads it, few change it.
        let held = pack(0, floor);
        if self.held.load(Ordering::Relaxed) != held {
            self.held.store(held, Ordering::Relaxed);
        }
        // Both fit an i64, so their difference fits an i128 and a non-negative one a u64.
        Some(u64::try_from(i128::from(raw_ns) - i128::from(floor)).unwrap_or(0))
    }

    /// The floor at `now_ns`: the largest of the lanes' smallest raw queue times recorded in
    /// its half window and the one before, else the floor last read, else `None`. Records
    /// nothing.
    pub(crate) fn floor(&self, now_ns: u64) -> Option<i64> {
        self.floor_at(now_ns / self.half_nanos)
    }

    fn floor_at(&self, half: u64) -> Option<i64> {
        (0..LANES)
            .filter_map(|lane| self.lane_min(lane, half))
            .max()
            .or_else(|| unpack(self.held.load(Ordering::Relaxed)).map(|(_, floor)| floor))
    }

    /// Lowers lane `lane`'s minimum of half `half` to `raw` (replacing an older half's), unless
    /// the slot already holds a later half. `raw` must be [`clamp`]ed.
    fn record(&self, half: u64, lane: usize, raw: i64) {
        let tag = half & TAG_MASK;
        let mine = pack(tag, raw);
        let slot = &self.slots[slot_index(lane, half)];
        // Relaxed throughout: each slot is a value on its own, publishing nothing else.
        let mut seen = slot.load(Ordering::Relaxed);
        loop {
            match unpack(seen) {
                Some((seen_tag, min)) if seen_tag == tag && min <= raw => return,
                Some((seen_tag, _)) if is_later(seen_tag, tag) => return,
                _ => {}
            }
            match slot.compare_exchange_weak(seen, mine, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
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

/// A 4 s window (halves of 2 s), and 2 ms of quiet.
impl Default for SkewFloor {
    fn default() -> Self {
        SkewFloor::new(Duration::from_secs(4), Duration::from_millis(2))
            .expect("the default window is valid")
    }
}

impl fmt::Debug for SkewFloor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SkewFloor")
            .field("window", &self.window)
            .field("quiet", &self.quiet)
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

    /// A floor of 4 s halves: 8 s windows.
    fn floor() -> SkewFloor {
        SkewFloor::new(Duration::from_secs(8), Duration::from_millis(2)).unwrap()
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
    fn idle_means_nothing_in_flight_and_nothing_ended_lately() {
        let floor = SkewFloor::default(); // 2 ms of quiet
        let now = secs(10);
        let ms = MS as u64;
        assert!(floor.is_idle(0, None, now));
        assert!(floor.is_idle(0, Some(now - 2 * ms), now));
        assert!(!floor.is_idle(0, Some(now - 2 * ms + 1), now));
        assert!(!floor.is_idle(1, None, now));
        // An end stamped after `now` (another thread's later clock reading) is recent.
        assert!(!floor.is_idle(0, Some(now + ms), now));
        let eager = SkewFloor::new(Duration::from_secs(4), Duration::ZERO).unwrap();
        assert!(eager.is_idle(0, Some(now), now));
    }

    #[test]
    fn nothing_is_known_until_a_request_is_recorded() {
        let floor = floor();
        assert_eq!(floor.floor(secs(1)), None);
        // The first request is its own floor, whether idle or not (nothing better is known).
        assert_eq!(floor.excess_in_lane(30 * MS, secs(1), false, 0), Some(0));
        assert_eq!(floor.floor(secs(1)), Some(30 * MS));
        assert_eq!(
            floor.excess_in_lane(45 * MS, secs(1), false, 1),
            Some(15_000_000)
        );
    }

    #[test]
    fn any_steady_offset_is_the_floor_from_the_first_idle_request() {
        for offset in [-1000 * MS, -100 * MS, 0, 30 * MS, 100 * MS, 1000 * MS] {
            let floor = floor();
            assert_eq!(floor.excess_in_lane(offset, secs(1), true, 0), Some(0));
            // Busy requests that waited 3 and 12 ms read 3 and 12 ms, however large the offset.
            assert_eq!(
                floor.excess_in_lane(offset + 3 * MS, secs(1), false, 1),
                Some(3 * MS as u64)
            );
            assert_eq!(
                floor.excess_in_lane(offset + 12 * MS, secs(2), false, 2),
                Some(12 * MS as u64)
            );
            assert_eq!(floor.floor(secs(2)), Some(offset), "offset {offset}");
        }
    }

    #[test]
    fn a_standing_queue_never_raises_the_floor() {
        let floor = floor();
        assert_eq!(floor.excess_in_lane(30 * MS, secs(1), true, 0), Some(0));
        // An hour of busy requests that all waited 10 ms: the floor holds, the waits read 10 ms.
        for second in 2..3_600 {
            let lane = (second % 4) as usize;
            assert_eq!(
                floor.excess_in_lane(40 * MS, secs(second), false, lane),
                Some(10_000_000),
                "at {second} s"
            );
        }
        assert_eq!(floor.floor(secs(3_600)), Some(30 * MS));
    }

    #[test]
    fn a_step_forward_is_absorbed_once_the_window_passes_and_a_step_back_at_once() {
        let floor = floor(); // halves of 4 s
        for lane in 0..LANES {
            floor.excess_in_lane(5 * MS, secs(1), true, lane);
        }
        // The service's clock steps 100 ms ahead at 2 s: idle requests read 100 ms at first...
        assert_eq!(
            floor.excess_in_lane(105 * MS, secs(2), true, 0),
            Some(100_000_000)
        );
        assert_eq!(
            floor.excess_in_lane(105 * MS, secs(7), true, 1),
            Some(100_000_000)
        );
        // ...and nothing once the window holds no idle request from before the step (half 0
        // has left it at 8 s).
        assert_eq!(floor.excess_in_lane(105 * MS, secs(8), true, 2), Some(0));
        assert_eq!(floor.floor(secs(8)), Some(105 * MS));
        // A step back of 100 ms: the next request, idle or not, lowers its lane, and the
        // floor is the largest lane minimum: once every lane holds one, the floor is back.
        for lane in 0..LANES {
            floor.excess_in_lane(5 * MS, secs(9), false, lane);
        }
        assert_eq!(floor.floor(secs(9)), Some(5 * MS));
        assert_eq!(
            floor.excess_in_lane(8 * MS, secs(9), false, 0),
            Some(3_000_000)
        );
    }

    #[test]
    fn without_idle_requests_the_last_floor_holds_and_lower_raws_lower_it() {
        let floor = floor();
        floor.excess_in_lane(20 * MS, secs(1), true, 3);
        // Long after the window: the held floor measures busy requests...
        assert_eq!(
            floor.excess_in_lane(27 * MS, secs(100), false, 0),
            Some(7_000_000)
        );
        assert_eq!(floor.floor(secs(100)), Some(20 * MS));
        // ...and a raw below it is recorded: no request waits less than nothing.
        assert_eq!(floor.excess_in_lane(12 * MS, secs(101), false, 1), Some(0));
        assert_eq!(floor.floor(secs(101)), Some(12 * MS));
        assert_eq!(
            floor.floor(secs(200)),
            Some(12 * MS),
            "held past its window"
        );
    }

    #[test]
    fn a_late_thread_records_nothing() {
        let floor = SkewFloor::new(Duration::from_nanos(20), Duration::ZERO).unwrap();
        // Half 2 (t = 20 ns) holds 7; a thread still in half 0 (t = 5 ns) sees a later half.
        assert_eq!(floor.excess_in_lane(7, 20, true, 0), Some(0));
        assert_eq!(floor.excess_in_lane(3, 5, true, 0), Some(0));
        assert_eq!(floor.floor(20), Some(7));
        assert_eq!(floor.excess_in_lane(9, 20, true, 0), Some(2));
    }

    #[test]
    fn extreme_inputs_neither_panic_nor_wrap() {
        let floor = SkewFloor::new(Duration::from_nanos(2), Duration::MAX).unwrap();
        // The floor is the clamped raw itself.
        assert_eq!(
            floor.excess_in_lane(i64::MAX, u64::MAX, true, 3),
            Some((i64::MAX - MAX_RAW) as u64)
        );
        assert_eq!(floor.excess_in_lane(i64::MIN, u64::MAX, true, 3), Some(0));
        assert!(!floor.is_idle(0, Some(0), u64::MAX - 1));
        assert!(floor.is_idle(0, None, 0));
    }

    #[test]
    fn forged_stamps_lower_only_their_own_lanes() {
        let floor = floor();
        let now = secs(10);
        // Genuine idle raws −2.5, −1, 0 and 2 ms in lanes 0 to 3: the floor is 2 ms.
        for (lane, raw) in [-25 * MS / 10, -MS, 0, 2 * MS].into_iter().enumerate() {
            floor.excess_in_lane(raw, now, true, lane);
        }
        assert_eq!(floor.floor(now), Some(2 * MS));
        // Stamps 0.9 s ahead read no wait of their own, and the first three lower only their
        // lanes: the floor stays at or above the smallest genuine raw, −2.5 ms.
        let forged = -900 * MS;
        for (lane, after) in [(3, 0), (2, -MS), (1, -25 * MS / 10)] {
            assert_eq!(floor.excess_in_lane(forged, now, false, lane), Some(0));
            assert_eq!(floor.floor(now), Some(after), "lane {lane}");
        }
        assert_eq!(
            floor.excess_in_lane(5 * MS, now, false, 0),
            Some(75 * MS as u64 / 10)
        );
        // A fourth, in the last lane, is the floor: a genuine 5 ms now reads 905 ms.
        assert_eq!(floor.excess_in_lane(forged, now, false, 0), Some(0));
        assert_eq!(floor.floor(now), Some(forged));
        assert_eq!(
            floor.excess_in_lane(5 * MS, now, false, 2),
            Some(905 * MS as u64)
        );
        // Once the window has passed, idle requests set it again.
        assert_eq!(floor.excess_in_lane(-MS, secs(20), true, 1), Some(0));
        assert_eq!(floor.floor(secs(20)), Some(-MS));
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
        let floor = Arc::new(floor());
        let start = Arc::new(Barrier::new(THREADS as usize));
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (floor, start) = (floor.clone(), start.clone());
                thread::spawn(move || {
                    start.wait();
                    for (half, now) in [(0, secs(1)), (1, secs(5))] {
                        for i in 0..SAMPLES {
                            let mine = raw(t, i, half);
                            let excess = floor.excess_in_lane(mine, now, true, lane(i)).unwrap();
                            // The floor is no lower than the lowest raw of all.
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
        for (now, halves) in [(secs(1), &[0][..]), (secs(5), &[0, 1]), (secs(9), &[1])] {
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

    /// A forged raw: anything, or below the genuine raws by `lead` ns (a stamp from the
    /// future).
    #[derive(Clone, Copy, Debug)]
    enum Forged {
        Any(i64),
        Below(u64),
    }

    /// Genuine idle raw queue times with their lanes: at least one in every lane, any order.
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

    fn forged() -> impl Strategy<Value = Vec<(Forged, usize, bool, prop::sample::Index)>> {
        let raw = prop_oneof![
            any::<i64>().prop_map(Forged::Any),
            (0..=2 * SEC).prop_map(Forged::Below),
        ];
        proptest::collection::vec(
            (raw, 0..LANES, any::<bool>(), any::<prop::sample::Index>()),
            0..=3,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        #[test]
        fn fewer_than_four_forged_raws_cannot_pull_the_floor_below_the_genuine_ones(
            genuine in genuine(),
            forged in forged(),
        ) {
            let floor = floor();
            let now = secs(10);
            let lowest = genuine.iter().map(|&(raw, _)| raw).min().unwrap();
            let mut stream: Vec<(i64, usize, bool, bool)> =
                genuine.iter().map(|&(raw, lane)| (raw, lane, true, false)).collect();
            for (raw, lane, idle, at) in forged {
                let raw = match raw {
                    Forged::Any(raw) => raw,
                    Forged::Below(lead) => lowest - lead as i64,
                };
                stream.insert(at.index(stream.len() + 1), (raw, lane, idle, true));
            }
            let mut genuine_mins = [None::<i64>; LANES];
            let mut forged_in = [false; LANES];
            for (raw, lane, idle, is_forged) in stream {
                let excess = floor.excess_in_lane(raw, now, idle, lane).unwrap();
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
                    prop_assert!(excess as i64 <= raw - genuine_low);
                } else if raw <= lowest {
                    prop_assert_eq!(excess, 0, "a forged raw reads no wait");
                }
            }
            // Every lane holds a genuine raw, at most three a forged one: the forged raws moved
            // the floor down at most to the smallest genuine raw.
            let alone = SkewFloor::default();
            for &(raw, lane) in &genuine {
                alone.excess_in_lane(raw, now, true, lane);
            }
            let floor = floor.floor(now).unwrap();
            prop_assert!(lowest <= floor && floor <= alone.floor(now).unwrap());
        }

        #[test]
        fn the_floor_follows_its_model(
            window in 0u64..1_000,
            samples in proptest::collection::vec(
                (any::<i64>(), 0u64..3_000, 0..LANES, any::<bool>()),
                1..40,
            ),
        ) {
            let Ok(floor) = SkewFloor::new(Duration::from_nanos(window), Duration::ZERO) else {
                prop_assert!(window < 2);
                return Ok(());
            };
            let half = window / 2;
            let mut times: Vec<_> = samples.iter().map(|&(_, t, _, _)| t).collect();
            times.sort_unstable();
            // The model: the recorded samples (clamped raw, half, lane) and the floor last read.
            let mut recorded: Vec<(i64, u64, usize)> = Vec::new();
            let mut held: Option<i64> = None;
            let model_floor = |recorded: &[(i64, u64, usize)], held: Option<i64>, h: u64| {
                (0..LANES)
                    .filter_map(|l| {
                        recorded
                            .iter()
                            .filter(|&&(_, rh, rl)| rl == l && rh + 1 >= h)
                            .map(|&(r, _, _)| r)
                            .min()
                    })
                    .max()
                    .or(held)
            };
            for (&(raw, _, lane, idle), now) in samples.iter().zip(times) {
                let h = now / half;
                let before = model_floor(&recorded, held, h);
                if idle || before.is_none_or(|floor| clamp(raw) < floor) {
                    recorded.push((clamp(raw), h, lane));
                }
                let model = model_floor(&recorded, held, h).unwrap();
                held = Some(model);
                let excess = floor.excess_in_lane(raw, now, idle, lane);
                prop_assert_eq!(floor.floor(now), Some(model));
                prop_assert_eq!(
                    excess.map(i128::from),
                    Some((raw as i128 - model as i128).max(0))
                );
            }
        }
    }
}
