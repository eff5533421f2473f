//! Separating queue time from clock skew and network time.
//!
//! The raw queue time a request-start header gives (its stamp's age, see
//! [`header`](super::header)) is the time the request
//! waited, plus the proxy's and the service's clock offset (of either sign), plus the network
//! time between them. A request that found the service *idle* waited for nothing but the
//! network: its raw queue time is the offset. [`SkewFloor`] keeps the offset, the *floor*, and
//! each request's wait is its raw queue time less the floor.
//!
//! A request is idle when nothing was in flight in the shedder and nothing completed or was
//! refused in the `quiet` time before it (2 ms): a proxy hands a queued request over the moment
//! a slot frees, and a runtime polls a queued task the moment a worker frees, so a request that
//! queued finds the service busy or just vacated. Refusals stop counting once the shedder has
//! admitted nothing for 500 times `quiet` (1 s): refusing is so fast that any queue behind them
//! has emptied by then, and what remains is a floor so low that every wait looks long.
//!
//! Idle requests raise the floor, only once every one of them in the window is above it;
//! requests below the floor lower it, only once they have reached all four lanes. So:
//!
//! - any steady offset is the floor from the first request on (it finds the service idle);
//! - a clock step forward is absorbed once the idle requests from before it have left the
//!   window (within 4 s), and on a service that never idles, after a second of refusing every
//!   request; a step back once a few requests have reached every lane;
//! - a queue that never empties never raises the floor, however long it stands, and a queued
//!   request taken for idle raises nothing while an idle one is in the window.
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
//! - in fewer than four lanes per window cannot pull the floor down at all: each stamp below
//!   the floor lowers only the lane it draws, and the floor comes down only to the largest of
//!   the four lanes' minima;
//! - forged in numbers, reaching every lane, pulls the floor down as far as −`max_future`, and
//!   lengthens other requests' waits by as much as it fell, until idle requests raise it again
//!   once the forged stamps stop and their window passes.
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
/// How many times `quiet` (1 s by default) the shedder must have admitted nothing for its
/// refusals not to count as activity: refusals drain a queue far faster than requests arrive
/// (a refusal frees a proxy's slot in one round trip), so a queue the gate found empties well
/// within it, after which refusing every request can only be the floor's own doing.
const SETTLE: u64 = 500;

/// The clock-skew floor a [`Shedder`](crate::shed::Shedder) subtracts from each stamped
/// request's raw queue time (see the [module docs](self) for the rule).
///
/// Time is cut into half windows (2 s of the default 4 s window) on the shedder's clock, and a
/// window is the current half and the one before. The floor is held between requests, and
/// moves:
///
/// - **up**, to the smallest raw queue time of the requests that found the service idle
///   (nothing in flight, nothing completed in the last `quiet`, 2 ms by default, and nothing
///   refused in it unless nothing was admitted in 500 times it), once every such request in
///   the window is above it;
/// - **down**, to the largest of four lanes' smallest raw queue times below it, once each lane
///   holds one in the window: each request below the floor records its raw queue time in a
///   lane drawn at random;
/// - before anything is known, to the first request's raw queue time.
///
/// A request's wait is `max(0, raw − floor)`.
///
/// Lock-free and allocation-free: eight atomic words on one cache line for the lanes, each
/// packing a half window's index (modulo 2²⁴) and a lane's minimum in it, lowered with
/// compare-and-swap; two more for the idle requests' minimum, and one for the floor. Raw queue
/// times beyond ±549 s are held as ±549 s (the parser's default bounds are −1 s and 60 s).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::shed::Shedder;
/// use admit::signal::queue::floor::SkewFloor;
///
/// let floor = SkewFloor::new(Duration::from_secs(10), Duration::from_millis(1))?;
/// let shedder = Shedder::builder().skew_floor(floor).build()?;
/// # let _ = shedder;
/// # Ok::<(), admit::ConfigError>(())
/// ```
pub struct SkewFloor {
    /// Raw queue times below the floor: lane `l`'s minimum in the even half windows at `2l`,
    /// in the odd ones at `2l + 1`.
    lanes: Line<[AtomicU64; 2 * LANES]>,
    /// The idle requests' smallest raw queue time in the even half windows at 0, in the odd
    /// ones at 1.
    idle: [AtomicU64; 2],
    /// The floor, biased as a slot's value; [`EMPTY`] before the first request.
    floor: AtomicU64,
    half_nanos: u64,
    quiet_nanos: u64,
    granule_nanos: u64,
    window: Duration,
    quiet: Duration,
}

/// When a shedder last completed and last refused a request, on its clock (`None`: never):
/// what tells whether a request found the service idle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LastActivity {
    pub(crate) completed: Option<u64>,
    pub(crate) refused: Option<u64>,
}

impl SkewFloor {
    /// A floor over `window` (two halves of `window / 2`, in whole ns) that takes a request
    /// as idle when nothing was in flight and nothing completed or was refused in the `quiet`
    /// before it (saturated at `u64::MAX` ns).
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
        let quiet_nanos = u64::try_from(quiet.as_nanos()).unwrap_or(u64::MAX);
        Ok(SkewFloor {
            lanes: Line::new(std::array::from_fn(|_| AtomicU64::new(EMPTY))),
            idle: std::array::from_fn(|_| AtomicU64::new(EMPTY)),
            floor: AtomicU64::new(EMPTY),
            half_nanos,
            quiet_nanos,
            granule_nanos: (quiet_nanos / 8).max(1),
            window,
            quiet,
        })
    }

    /// How stale the note of the last refusal may be: an eighth of `quiet` (at least 1 ns), so
    /// that a shedder writes it at most once a granule, not once a refusal.
    #[inline]
    pub(crate) fn granule(&self) -> u64 {
        self.granule_nanos
    }

    /// Whether a request arriving at `now_ns` with `in_flight` requests in flight, after
    /// `last`'s activity, found the service idle: nothing in flight, nothing completed in the
    /// quiet time, and nothing refused in it unless nothing was admitted for [`SETTLE`] times
    /// it (with nothing in flight, nothing completed for that long).
    #[inline]
    pub(crate) fn is_idle(&self, in_flight: u64, last: LastActivity, now_ns: u64) -> bool {
        let since =
            |at: Option<u64>, least: u64| at.is_none_or(|at| now_ns.saturating_sub(at) >= least);
        let quiet = self.quiet_nanos;
        in_flight == 0
            && since(last.completed, quiet)
            && (since(last.refused, quiet) || since(last.completed, quiet.saturating_mul(SETTLE)))
    }

    /// Records a request's raw queue time `raw_ns` (from
    /// [`Arrival::stamp_age`](crate::signal::Arrival::stamp_age)) at `now_ns` on the
    /// shedder's clock, among the idle requests' if it found the service `idle`, and in a lane
    /// drawn at random if it is below the floor; moves the floor as the rule says, and returns
    /// the request's wait in ns: `max(0, raw − floor)`. `None` only if the floor is unknown,
    /// which it is not after the first request.
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
        let held = self.held();
        if idle {
            lower(&self.idle[(half & 1) as usize], half, raw);
        }
        if held.is_none_or(|floor| raw < floor) {
            lower(&self.lanes[slot_index(lane, half)], half, raw);
        }
        let floor = self.moved(held, half)?;
        if held != Some(floor) {
            self.floor.store(pack(0, floor), Ordering::Relaxed);
        }
        // Both fit an i64, so their difference fits an i128 and a non-negative one a u64.
        Some(u64::try_from(i128::from(raw_ns) - i128::from(floor)).unwrap_or(0))
    }

    /// The floor at `now_ns`, `None` before the first request. Records nothing.
    pub(crate) fn floor(&self, now_ns: u64) -> Option<i64> {
        self.moved(self.held(), now_ns / self.half_nanos)
    }

    /// The floor last stored.
    fn held(&self) -> Option<i64> {
        unpack(self.floor.load(Ordering::Relaxed)).map(|(_, floor)| floor)
    }

    /// `held` moved by what the window of half `half` holds: up to the idle requests' minimum
    /// if above it, then down to the lanes' largest minimum if every lane holds one below it.
    /// Before anything is held, the idle minimum, else the smallest lane minimum.
    fn moved(&self, held: Option<i64>, half: u64) -> Option<i64> {
        let idle = window_min(&self.idle, half, |parity| parity);
        let lanes: [Option<i64>; LANES] = std::array::from_fn(|lane| {
            window_min(&*self.lanes, half, |parity| slot_index(lane, parity as u64))
        });
        let Some(held) = held else {
            return idle.or_else(|| lanes.iter().flatten().min().copied());
        };
        let raised = idle.filter(|&idle| idle > held).unwrap_or(held);
        // Every lane's minimum below the floor, or none: the largest of them.
        let lowered = lanes.iter().try_fold(i64::MIN, |largest, min| {
            min.filter(|&min| min < raised).map(|min| largest.max(min))
        });
        Some(lowered.unwrap_or(raised))
    }
}

/// Lowers `slot`'s minimum of half `half` to `raw` (replacing an older half's), unless it
/// holds a later half. `raw` must be [`clamp`]ed.
fn lower(slot: &AtomicU64, half: u64, raw: i64) {
    let tag = half & TAG_MASK;
    let mine = pack(tag, raw);
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

/// The minimum over half `half` and the one before of the slots in `slots` that `index` gives
/// for a half's parity (0 or 1), if either holds one of its half.
fn window_min(slots: &[AtomicU64], half: u64, index: impl Fn(usize) -> usize) -> Option<i64> {
    let read = |half: u64| {
        let word = slots[index((half & 1) as usize)].load(Ordering::Relaxed);
        unpack(word).and_then(|(tag, min)| (tag == half & TAG_MASK).then_some(min))
    };
    match (read(half), read(half.wrapping_sub(1))) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// 4 s window (halves of 2 s), and 2 ms of quiet.
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
    fn the_lanes_fill_one_cache_line() {
        assert_eq!(size_of::<[AtomicU64; 2 * LANES]>(), 64);
        let floor = SkewFloor::default();
        assert_eq!(floor.lanes.as_ptr() as usize % 64, 0);
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
        let completed = |at| LastActivity {
            completed: Some(at),
            refused: None,
        };
        assert!(floor.is_idle(0, LastActivity::default(), now));
        assert!(floor.is_idle(0, completed(now - 2 * ms), now));
        assert!(!floor.is_idle(0, completed(now - 2 * ms + 1), now));
        assert!(!floor.is_idle(1, LastActivity::default(), now));
        // An end stamped after `now` (another thread's later clock reading) is recent.
        assert!(!floor.is_idle(0, completed(now + ms), now));
        let eager = SkewFloor::new(Duration::from_secs(4), Duration::ZERO).unwrap();
        assert!(eager.is_idle(0, completed(now), now));
        assert_eq!(SkewFloor::default().granule(), 250_000);
    }

    #[test]
    fn a_refusal_is_activity_unless_everything_was_refused() {
        let floor = SkewFloor::default();
        let now = secs(10);
        let ms = MS as u64;
        let last = |completed, refused| LastActivity {
            completed: Some(completed),
            refused: Some(refused),
        };
        // A refusal 1 ms ago, and a completion 5 ms ago: the service turns requests away
        // while it serves others (a queue drains through it).
        assert!(!floor.is_idle(0, last(now - 5 * ms, now - ms), now));
        // Nothing completed (so, with nothing in flight, nothing admitted) for 1 s, 500 times
        // the quiet: every request is refused, and no queue stands behind the refusals.
        assert!(floor.is_idle(0, last(now - 1_000 * ms, now - ms), now));
        assert!(!floor.is_idle(0, last(now - 1_000 * ms + 1, now - ms), now));
        assert!(floor.is_idle(0, last(now - 5 * ms, now - 3 * ms), now));
        // Never anything completed, and refusals only: idle.
        let refused_only = LastActivity {
            completed: None,
            refused: Some(now - ms),
        };
        assert!(floor.is_idle(0, refused_only, now));
    }

    #[test]
    fn the_first_request_sets_the_floor() {
        let floor = floor();
        assert_eq!(floor.floor(secs(1)), None);
        // Whether idle or not: nothing better is known.
        assert_eq!(floor.excess_in_lane(30 * MS, secs(1), false, 0), Some(0));
        assert_eq!(floor.floor(secs(1)), Some(30 * MS));
        assert_eq!(
            floor.excess_in_lane(45 * MS, secs(1), false, 1),
            Some(15_000_000)
        );
        let idle = SkewFloor::default();
        assert_eq!(idle.excess_in_lane(-7 * MS, secs(1), true, 2), Some(0));
        assert_eq!(idle.floor(secs(100)), Some(-7 * MS));
    }

    #[test]
    fn any_steady_offset_is_the_floor_from_the_first_idle_request() {
        for offset in [-1000 * MS, -100 * MS, 0, 30 * MS, 100 * MS, 1000 * MS] {
            let floor = floor();
            assert_eq!(floor.excess_in_lane(offset, secs(1), true, 0), Some(0));
            // Busy requests that waited 3 and 12 ms read 3 and 12 ms, however large the offset.
            assert_eq!(
                floor.excess_in_lane(offset + 3 * MS, secs(1), false, 1),
                Some(3_000_000)
            );
            assert_eq!(
                floor.excess_in_lane(offset + 12 * MS, secs(2), false, 2),
                Some(12_000_000)
            );
            // Idle requests a little later on the network raise nothing while the first is
            // in the window.
            assert_eq!(
                floor.excess_in_lane(offset + MS / 10, secs(3), true, 3),
                Some(100_000)
            );
            assert_eq!(floor.floor(secs(3)), Some(offset), "offset {offset}");
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
    fn a_queued_request_taken_for_idle_raises_nothing_beside_an_idle_one() {
        let floor = floor();
        floor.excess_in_lane(5 * MS, secs(1), true, 0);
        // Long after: an idle request at the offset, and one that queued 20 ms but found the
        // service idle (a proxy handing over a queue the service refuses).
        assert_eq!(floor.excess_in_lane(5 * MS, secs(20), true, 1), Some(0));
        assert_eq!(
            floor.excess_in_lane(25 * MS, secs(21), true, 2),
            Some(20_000_000)
        );
        assert_eq!(floor.floor(secs(22)), Some(5 * MS));
        // Alone in its window, it would: every idle request in the window is above the floor.
        assert_eq!(floor.excess_in_lane(25 * MS, secs(40), true, 2), Some(0));
        assert_eq!(floor.floor(secs(40)), Some(25 * MS));
    }

    #[test]
    fn a_step_forward_is_absorbed_once_the_window_passes_and_a_step_back_in_four_lanes() {
        let floor = floor(); // halves of 4 s
        floor.excess_in_lane(5 * MS, secs(1), true, 0);
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
        // A step back of 100 ms: each request below the floor lowers its lane, and once every
        // lane holds one, the floor is the largest of them.
        for (lane, raw) in [5, 6, 4, 7].into_iter().enumerate() {
            assert_eq!(
                floor.excess_in_lane(raw * MS, secs(9), false, lane),
                Some(0)
            );
            let expected = if lane < 3 { 105 * MS } else { 7 * MS };
            assert_eq!(floor.floor(secs(9)), Some(expected), "lane {lane}");
        }
        assert_eq!(
            floor.excess_in_lane(8 * MS, secs(9), false, 0),
            Some(1_000_000)
        );
    }

    #[test]
    fn without_idle_requests_the_last_floor_holds() {
        let floor = floor();
        floor.excess_in_lane(20 * MS, secs(1), true, 3);
        // Long after the window: the held floor measures busy requests.
        assert_eq!(
            floor.excess_in_lane(27 * MS, secs(100), false, 0),
            Some(7_000_000)
        );
        assert_eq!(floor.floor(secs(100)), Some(20 * MS));
        assert_eq!(floor.floor(secs(10_000)), Some(20 * MS));
    }

    #[test]
    fn a_late_thread_records_nothing() {
        let floor = SkewFloor::new(Duration::from_nanos(20), Duration::ZERO).unwrap();
        // Half 2 (t = 20 ns) holds 7; a thread still in half 0 (t = 5 ns) sees a later half.
        assert_eq!(floor.excess_in_lane(7, 20, true, 0), Some(0));
        assert_eq!(floor.excess_in_lane(3, 5, true, 0), Some(0));
        assert_eq!(window_min(&floor.idle, 20 / 10, |parity| parity), Some(7));
    }

    #[test]
    fn the_floor_rejects_windows_without_halves() {
        for window in [Duration::ZERO, Duration::from_nanos(1)] {
            assert_eq!(
                SkewFloor::new(window, Duration::ZERO).unwrap_err(),
                ConfigError::DurationTooShort {
                    setting: "window",
                    value: window,
                    min: Duration::from_nanos(2),
                }
            );
        }
        assert!(matches!(
            SkewFloor::new(Duration::MAX, Duration::ZERO),
            Err(ConfigError::DurationTooLong {
                setting: "window",
                ..
            })
        ));
        let floor = SkewFloor::new(Duration::from_nanos(2), Duration::MAX).unwrap();
        assert_eq!(
            (floor.window, floor.quiet),
            (Duration::from_nanos(2), Duration::MAX)
        );
        assert_eq!((floor.half_nanos, floor.quiet_nanos), (1, u64::MAX));
        let default = SkewFloor::default();
        assert_eq!(default.window, Duration::from_secs(4));
        assert_eq!(default.quiet, Duration::from_millis(2));
        assert!(format!("{default:?}").starts_with("SkewFloor { window: 4s, quiet: 2ms"));
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
        let long_ago = LastActivity {
            completed: Some(0),
            refused: Some(0),
        };
        assert!(!floor.is_idle(0, long_ago, u64::MAX - 1));
        assert!(floor.is_idle(0, LastActivity::default(), 0));
    }

    #[test]
    fn forged_stamps_lower_the_floor_only_from_every_lane() {
        let floor = floor();
        let now = secs(10);
        floor.excess_in_lane(2 * MS, now, true, 0);
        // Stamps 0.9 s ahead read no wait of their own, and in three lanes lower nothing.
        let forged = -900 * MS;
        for lane in [3, 2, 1] {
            assert_eq!(floor.excess_in_lane(forged, now, false, lane), Some(0));
            assert_eq!(floor.floor(now), Some(2 * MS), "lane {lane}");
        }
        assert_eq!(floor.excess_in_lane(5 * MS, now, false, 0), Some(3_000_000));
        // A fourth, in the last lane, is the floor: a genuine 5 ms now reads 905 ms.
        assert_eq!(floor.excess_in_lane(forged, now, false, 0), Some(0));
        assert_eq!(floor.floor(now), Some(forged));
        assert_eq!(
            floor.excess_in_lane(5 * MS, now, false, 2),
            Some(905_000_000)
        );
        // Once the window has passed, the idle requests raise it again.
        assert_eq!(floor.excess_in_lane(-MS, secs(20), true, 1), Some(0));
        assert_eq!(floor.floor(secs(20)), Some(-MS));
    }

    #[test]
    fn racing_threads_leave_each_slots_true_minimum() {
        const THREADS: i64 = 4;
        const SAMPLES: i64 = 20_000;
        /// Thread `t`'s `i`th raw in half `half`: interleaved descending and ascending.
        fn raw(t: i64, i: i64, half: i64) -> i64 {
            let signed = if i % 2 == 0 { -i } else { i };
            signed - half * 1000 - t * SAMPLES
        }
        let slots: Arc<[AtomicU64; 2]> = Arc::new(std::array::from_fn(|_| AtomicU64::new(EMPTY)));
        let start = Arc::new(Barrier::new(THREADS as usize));
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (slots, start) = (slots.clone(), start.clone());
                thread::spawn(move || {
                    start.wait();
                    for half in [0, 1] {
                        for i in 0..SAMPLES {
                            lower(&slots[half as usize], half, raw(t, i, half as i64));
                        }
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        let lowest = |half: i64| {
            (0..THREADS)
                .flat_map(|t| (0..SAMPLES).map(move |i| raw(t, i, half)))
                .min()
        };
        assert_eq!(window_min(&*slots, 0, |parity| parity), lowest(0));
        assert_eq!(
            window_min(&*slots, 1, |parity| parity),
            lowest(0).min(lowest(1))
        );
        assert_eq!(window_min(&*slots, 2, |parity| parity), lowest(1));
        assert_eq!(window_min(&*slots, 3, |parity| parity), None);
    }

    /// The rule, written plainly over every recorded sample: what the floor must follow.
    #[derive(Default)]
    struct Model {
        held: Option<i64>,
        /// (clamped raw, half) of the idle requests.
        idle: Vec<(i64, u64)>,
        /// (clamped raw, half, lane) of the requests below the floor.
        lanes: Vec<(i64, u64, usize)>,
    }

    impl Model {
        fn moved(&self, h: u64) -> Option<i64> {
            let in_window = |half: u64| half + 1 >= h && half <= h;
            let idle = self
                .idle
                .iter()
                .filter(|s| in_window(s.1))
                .map(|s| s.0)
                .min();
            let lanes: Vec<Option<i64>> = (0..LANES)
                .map(|l| {
                    self.lanes
                        .iter()
                        .filter(|s| s.2 == l && in_window(s.1))
                        .map(|s| s.0)
                        .min()
                })
                .collect();
            let Some(held) = self.held else {
                return idle.or_else(|| lanes.iter().flatten().min().copied());
            };
            let raised = idle.filter(|&idle| idle > held).unwrap_or(held);
            if lanes.iter().all(|min| min.is_some_and(|min| min < raised)) {
                lanes.iter().flatten().max().copied()
            } else {
                Some(raised)
            }
        }

        fn excess(
            &mut self,
            raw: i64,
            now: u64,
            idle: bool,
            lane: usize,
            half: u64,
        ) -> Option<u64> {
            let h = now / half;
            let clamped = clamp(raw);
            if idle {
                self.idle.push((clamped, h));
            }
            if self.held.is_none_or(|floor| clamped < floor) {
                self.lanes.push((clamped, h, lane));
            }
            let floor = self.moved(h)?;
            self.held = Some(floor);
            Some((raw as i128 - floor as i128).max(0) as u64)
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        #[test]
        fn the_floor_follows_its_rule(
            window in 0u64..1_000,
            samples in proptest::collection::vec(
                (prop_oneof![any::<i64>(), -50 * MS..=50 * MS], 0u64..3_000, 0..LANES, any::<bool>()),
                1..60,
            ),
        ) {
            let Ok(floor) = SkewFloor::new(Duration::from_nanos(window), Duration::ZERO) else {
                prop_assert!(window < 2);
                return Ok(());
            };
            let half = window / 2;
            let mut times: Vec<_> = samples.iter().map(|&(_, t, _, _)| t).collect();
            times.sort_unstable();
            let mut model = Model::default();
            for (&(raw, _, lane, idle), now) in samples.iter().zip(times) {
                let expected = model.excess(raw, now, idle, lane, half);
                prop_assert_eq!(floor.excess_in_lane(raw, now, idle, lane), expected);
                prop_assert_eq!(floor.floor(now), model.moved(now / half));
            }
        }

        #[test]
        fn stamps_below_the_floor_in_three_lanes_cannot_lower_it(
            genuine in proptest::collection::vec((-50 * MS..=50 * MS, any::<bool>()), 1..20),
            forged in proptest::collection::vec((any::<i64>(), 0..LANES - 1), 0..12),
            order in any::<prop::sample::Index>(),
        ) {
            // Genuine requests in lane 3 (idle or not) and anywhere else; forged ones below
            // everything, never in lane 3: the floor stays at or above the genuine minimum.
            let floor = floor();
            let now = secs(10);
            let lowest = genuine.iter().map(|&(raw, _)| raw).min().unwrap();
            let mut stream: Vec<(i64, bool, usize)> = genuine
                .iter()
                .enumerate()
                .map(|(i, &(raw, idle))| (raw, idle || i == 0, if i % 2 == 0 { 3 } else { i % 4 }))
                .collect();
            let at = order.index(stream.len()) + 1;
            for (raw, lane) in forged {
                stream.insert(at, (raw.min(lowest - 1), false, lane));
            }
            for (raw, idle, lane) in stream {
                floor.excess_in_lane(raw, now, idle, lane);
                prop_assert!(floor.floor(now).unwrap() >= lowest.min(MAX_RAW));
            }
        }
    }
}
