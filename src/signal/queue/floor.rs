//! Separating queue time from clock skew and network time.
//!
//! The raw queue time a request-start header gives
//! ([`parse_request_start`](super::header::parse_request_start)) is the time the request
//! waited, plus the proxy's and the service's clock skew (of either sign), plus the network
//! time between them. Skew and network time change slowly, and some request always waits
//! almost nothing, so the smallest raw queue time seen recently estimates them: the *floor*.
//! [`SkewFloor`] subtracts it, and what remains is the request's sojourn.
//!
//! Raw queue times are kept signed: a negative one means the service's clock is behind the
//! proxy's, and the floor absorbs it. (Clamping negatives to zero first, as New Relic and
//! Judoscale do, hides skew: a clock 3 ms behind hides the first 3 ms of every wait.)

use std::fmt;
use std::time::Duration;

use crate::ConfigError;
use crate::sync::{AtomicU64, Ordering};

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

/// The clock-skew floor: the smallest raw queue time of the last one to two half windows,
/// and each request's sojourn above it.
///
/// Time is cut into half windows (150 s of the default 300 s window) on the monotonic clock;
/// the floor is the minimum raw queue time recorded in the current half and the one before, so
/// it follows a drifting clock within one to two halves, and a gap of two halves without
/// requests starts it afresh. The floor is applied at most up to `floor_cap` (20 ms by
/// default): a floor below the cap (including any negative one) is skew and network time, but a
/// higher floor means every request waited, and only the cap is deducted:
///
/// `excess = max(0, raw − min(floor, floor_cap))`
///
/// Lock-free and allocation-free: two atomic words, each packing a half window's index
/// (modulo 2²⁴) and its minimum, lowered with compare-and-swap. Share it by reference or in an
/// `Arc`; every method takes `&self`. Raw queue times beyond ±549 s are held as ±549 s (the
/// parser's default bounds are −1 s and 60 s).
///
/// # Example
///
/// ```
/// use admit::signal::queue::floor::SkewFloor;
///
/// const MS: i64 = 1_000_000;
/// let floor = SkewFloor::default(); // 300 s window, 20 ms cap
/// let now = 10_000_000_000; // monotonic ns
/// assert_eq!(floor.excess(-5 * MS / 2, now), 0); // the service's clock is 2.5 ms behind
/// assert_eq!(floor.excess(-24 * MS / 10, now), 100_000); // so this request waited 0.1 ms
/// assert_eq!(floor.excess(35 * MS / 2, now), 20_000_000); // and this one 20 ms
/// assert_eq!(floor.floor(now), Some(-5 * MS / 2));
/// ```
pub struct SkewFloor {
    /// The minimum of the even and of the odd half windows.
    slots: [AtomicU64; 2],
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
            slots: [AtomicU64::new(EMPTY), AtomicU64::new(EMPTY)],
            half_nanos,
            floor_cap_nanos,
            window,
            floor_cap,
        })
    }

    /// Records a request's raw queue time `raw_ns` (from
    /// [`parse_request_start`](super::header::parse_request_start)) at `now_ns` on the
    /// monotonic clock ([`Clock::now_nanos`](crate::clock::Clock::now_nanos)), and returns its
    /// sojourn in ns: `max(0, raw − min(floor, floor_cap))`, the floor including this request.
    ///
    /// A thread whose `now_ns` is two halves behind another's records nothing, and measures
    /// against what it can see.
    pub fn excess(&self, raw_ns: i64, now_ns: u64) -> u64 {
        let half = now_ns / self.half_nanos;
        let floor = self
            .record(half, raw_ns)
            .into_iter()
            .chain(self.read(half.wrapping_sub(1)))
            .fold(clamp(raw_ns), i64::min);
        let deducted = floor.min(self.floor_cap_nanos);
        // Both fit an i64, so their difference fits an i128 and a non-negative one a u64.
        u64::try_from(i128::from(raw_ns) - i128::from(deducted)).unwrap_or(0)
    }

    /// The floor at `now_ns`: the smallest raw queue time recorded in its half window and the
    /// one before, or `None` if there is none. Records nothing.
    pub fn floor(&self, now_ns: u64) -> Option<i64> {
        let half = now_ns / self.half_nanos;
        match (self.read(half), self.read(half.wrapping_sub(1))) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The window: two half windows.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// The most that is deducted from a raw queue time as skew and network time.
    pub fn floor_cap(&self) -> Duration {
        self.floor_cap
    }

    /// Lowers half `half`'s minimum to `raw` (replacing an older half's), and returns the
    /// minimum, or `None` if the slot already holds a later half.
    fn record(&self, half: u64, raw: i64) -> Option<i64> {
        let raw = clamp(raw);
        let tag = half & TAG_MASK;
        let mine = pack(tag, raw);
        let slot = &self.slots[(half & 1) as usize];
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

    /// Half `half`'s minimum, if its slot holds that half.
    fn read(&self, half: u64) -> Option<i64> {
        let word = self.slots[(half & 1) as usize].load(Ordering::Relaxed);
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
    use super::*;

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
    fn a_late_thread_records_nothing() {
        let floor = SkewFloor::new(Duration::from_nanos(20), Duration::MAX).unwrap();
        // Half 2 (t = 20 ns) holds 7; a thread still in half 0 (t = 5 ns) sees a later half.
        assert_eq!(floor.excess(7, 20), 0);
        assert_eq!(floor.excess(3, 5), 0);
        assert_eq!(floor.floor(20), Some(7));
        assert_eq!(floor.excess(9, 20), 2);
    }

    #[test]
    fn extreme_inputs_neither_panic_nor_wrap() {
        let floor = SkewFloor::new(Duration::from_nanos(2), Duration::MAX).unwrap();
        // The floor is the clamped raw itself, below the cap.
        assert_eq!(
            floor.excess(i64::MAX, u64::MAX),
            (i64::MAX - MAX_RAW) as u64
        );
        assert_eq!(floor.excess(i64::MIN, u64::MAX), 0);
        let floor = SkewFloor::new(Duration::from_nanos(2), Duration::ZERO).unwrap();
        assert_eq!(floor.excess(i64::MAX, 0), i64::MAX as u64);
    }
}
