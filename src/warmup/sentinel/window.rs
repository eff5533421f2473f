//! The lock-free state of a [`SentinelWarmUp`](super::SentinelWarmUp).
//!
//! Sentinel keeps three pieces of state for a warm-up rule: the stored tokens with the time of
//! their last sync (two independent atomics), a rolling one-second window of two half-second
//! buckets (`passQps`), and a minute of one-second buckets (`previousPassQps`). Here they are:
//!
//! - **`tokens`**: one `AtomicU64` packing the last synced second and the token count, so a sync
//!   is a single compare-and-swap (Sentinel's two-atomic update can act on an ABA value and lets
//!   readers see negative counts). Beside it, a cache of the window capacity those tokens give.
//! - **`halves`**: a ring of four half-second windows, each one `AtomicU64` packing the window's
//!   index, a *sealed* flag and its pass count. The current and previous windows give `passQps`;
//!   both halves of the previous second give `previousPassQps`; a fourth slot lets a window be
//!   reset while those three are still being read.
//!
//! # Why windows are sealed
//!
//! An admission is a compare-and-swap on the current window that succeeds only if
//! `previous + current + n ≤ limit`, so callers that share a window never overshoot it. A caller
//! that read the clock just before a half-second boundary could still add to the old window
//! after another caller, already past the boundary, has read it as its *previous* window. To rule
//! that out, the first caller to use a window as "previous" seals it with a CAS; a sealed window
//! rejects further increments, and the late caller retries in the next window. Every admission
//! therefore sees the final count of the window before its own.
//!
//! # Time never goes backwards
//!
//! A caller whose clock reading is older than a window or sync another caller has already
//! recorded adopts that newer time instead, so the state never rewinds, whatever the clock does.

use crossbeam_utils::CachePadded;

use super::curve::{MAX_WINDOW_COUNT, SentinelCurve};
use crate::sync::{AtomicU64, Ordering};

const NANOS_PER_SEC: u64 = 1_000_000_000;
const NANOS_PER_HALF: u64 = NANOS_PER_SEC / 2;

/// Half-second windows are numbered from the second the limiter was built in; the index has 33
/// bits (136 years). Two are kept back so that `second + 1` always fits the 32 bits of the token
/// word.
const MAX_HALF: u64 = (1 << 33) - 3;

const SEALED: u64 = 1 << 30;
const HALF_SHIFT: u32 = 31;

/// A half-second window: `[half index: 33 | sealed: 1 | count: 30]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Window {
    half: u64,
    sealed: bool,
    count: u64,
}

impl Window {
    fn unpack(word: u64) -> Self {
        Window {
            half: word >> HALF_SHIFT,
            sealed: word & SEALED != 0,
            count: word & MAX_WINDOW_COUNT,
        }
    }

    fn pack(self) -> u64 {
        debug_assert!(self.half <= MAX_HALF && self.count <= MAX_WINDOW_COUNT);
        self.half << HALF_SHIFT | if self.sealed { SEALED } else { 0 } | self.count
    }
}

/// The token word: `[synced second + 1: 32 | tokens: 32]`; 0 means "never synced". The
/// capacity cache uses the same layout with the window capacity in place of the tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tokens {
    synced: Option<u64>,
    tokens: u32,
}

impl Tokens {
    fn unpack(word: u64) -> Self {
        let tag = word >> 32;
        Tokens {
            synced: tag.checked_sub(1),
            tokens: word as u32,
        }
    }

    fn pack(second: u64, tokens: u32) -> u64 {
        (second + 1) << 32 | u64::from(tokens)
    }
}

/// What a caller observed that was newer than its own clock reading: the half to move to.
struct Newer(u64);

/// The state a snapshot reports.
#[derive(Clone, Copy, Debug)]
pub(crate) struct View {
    pub(crate) tokens: u32,
    pub(crate) window_passes: u64,
}

/// The outcome of a refused acquire: how long until it could pass, absent other traffic.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Refusal {
    pub(crate) retry_after_nanos: u64,
}

/// The once-per-second state, on its own cache line: written once a second, read by every call.
#[derive(Debug)]
struct SecondState {
    /// The stored tokens and the second they were synced for.
    tokens: AtomicU64,
    /// A cache of the window capacity those tokens give (a division and a `nextUp` per call
    /// otherwise), tagged like `tokens` with its second. Every writer for a given second writes
    /// the same value, and `fetch_max` keeps the newest second.
    capacity: AtomicU64,
}

#[derive(Debug)]
pub(crate) struct SentinelWindow {
    second: CachePadded<SecondState>,
    halves: CachePadded<[AtomicU64; 4]>,
    curve: SentinelCurve,
    /// The start of the clock second the limiter was built in: windows are counted from here,
    /// so the 33-bit window index lasts 136 years whatever the clock's origin, while windows
    /// stay aligned to the clock's whole seconds.
    origin_nanos: u64,
}

#[inline]
fn half_of(now_nanos: u64) -> u64 {
    (now_nanos / NANOS_PER_HALF).min(MAX_HALF)
}

impl SentinelWindow {
    /// A limiter built at clock reading `built_at_nanos`: cold (a full bucket at its first
    /// call), or, if `start_warm`, an empty bucket as of the build, refilling from then on.
    pub(crate) fn new(curve: SentinelCurve, start_warm: bool, built_at_nanos: u64) -> Self {
        let tokens = if start_warm {
            Tokens::pack(0, 0)
        } else {
            0 // never synced: the first sync fills the bucket
        };
        SentinelWindow {
            second: CachePadded::new(SecondState {
                tokens: AtomicU64::new(tokens),
                capacity: AtomicU64::new(0),
            }),
            halves: CachePadded::new([
                AtomicU64::new(0),
                AtomicU64::new(0),
                AtomicU64::new(0),
                AtomicU64::new(0),
            ]),
            curve,
            origin_nanos: built_at_nanos - built_at_nanos % NANOS_PER_SEC,
        }
    }

    #[inline]
    fn slot(&self, half: u64) -> &AtomicU64 {
        &self.halves[(half % 4) as usize]
    }

    /// The curve this window follows.
    pub(crate) fn curve(&self) -> SentinelCurve {
        self.curve
    }

    /// Whether the tokens stored at the last sync are at or below the warning level: the full
    /// rate applies.
    #[cfg(feature = "tracing")]
    pub(crate) fn at_full_rate(&self) -> bool {
        let tokens = Tokens::unpack(self.second.tokens.load(Ordering::Relaxed)).tokens;
        f64::from(tokens) <= self.curve.warning_tokens()
    }

    /// Admits `n` permits at clock reading `now_nanos` if the rolling one-second window has room
    /// under the limit in force. `n` may be 0: like Sentinel's `canPass` with `acquireCount` 0,
    /// that syncs the second and is refused only while the window is over the limit.
    ///
    /// The common case (the second already synced, the previous window sealed) is three
    /// independent loads, a few comparisons and, to admit, one compare-and-swap. Everything else
    /// goes through [`acquire`](Self::acquire).
    #[inline]
    pub(crate) fn try_acquire(&self, now_nanos: u64, n: u32) -> Result<(), Refusal> {
        let n = u64::from(n);
        let now_nanos = now_nanos.saturating_sub(self.origin_nanos);
        let half = half_of(now_nanos);
        let capacity = self.second.capacity.load(Ordering::Acquire);
        let previous_half = half.wrapping_sub(1);
        let previous = self.slot(previous_half).load(Ordering::Acquire);
        let slot = self.slot(half);
        let current = slot.load(Ordering::Acquire);
        let previous_count = if previous & !MAX_WINDOW_COUNT == previous_half << HALF_SHIFT | SEALED
        {
            Some(previous & MAX_WINDOW_COUNT)
        } else if half == 0 {
            Some(0) // the clock's first half second has no previous window
        } else {
            None
        };
        let current_head = current & !MAX_WINDOW_COUNT;
        let open_head = half << HALF_SHIFT;
        // The current window is open (this half's, not sealed) or stale (an older half's,
        // to be reset by the admitting CAS).
        if let Some(previous_count) = previous_count
            && capacity >> 32 == half / 2 + 1
            && current_head <= open_head
        {
            let capacity = capacity & u64::from(u32::MAX);
            let current_count = if current_head == open_head {
                current & MAX_WINDOW_COUNT
            } else {
                0
            };
            if previous_count + current_count + n > capacity {
                return Err(Refusal {
                    retry_after_nanos: retry_after(now_nanos, half, current_count, n, capacity),
                });
            }
            // `current_count + n <= capacity` fits the count field.
            let admitted = open_head | (current_count + n);
            if slot
                .compare_exchange_weak(current, admitted, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Ok(());
            }
        }
        self.acquire(now_nanos, n)
    }

    /// The general case of [`try_acquire`](Self::try_acquire): syncs the second, seals the
    /// previous window, opens the current one, retries lost races and adopts newer times.
    /// `now_nanos` counts from `origin_nanos`.
    #[inline(never)]
    fn acquire(&self, now_nanos: u64, n: u64) -> Result<(), Refusal> {
        let mut half = half_of(now_nanos);
        'time: loop {
            let capacity = match self.synced_capacity(half) {
                Ok(capacity) => capacity,
                Err(Newer(later)) => {
                    half = later;
                    continue 'time;
                }
            };
            let previous = match half.checked_sub(1) {
                Some(previous) => match self.seal(previous) {
                    Ok(count) => count,
                    Err(Newer(later)) => {
                        half = later;
                        continue 'time;
                    }
                },
                None => 0,
            };
            let slot = self.slot(half);
            let mut word = slot.load(Ordering::Acquire);
            loop {
                let window = Window::unpack(word);
                let current = if window.half == half {
                    if window.sealed {
                        // Someone has moved past this window: so do we.
                        half += 1;
                        continue 'time;
                    }
                    window.count
                } else if window.half > half {
                    half = window.half;
                    continue 'time;
                } else {
                    0 // a stale window from two seconds ago: this CAS resets it
                };
                if previous + current + n > capacity {
                    return Err(Refusal {
                        retry_after_nanos: retry_after(now_nanos, half, current, n, capacity),
                    });
                }
                let next = Window {
                    half,
                    sealed: false,
                    count: current + n,
                };
                match slot.compare_exchange_weak(
                    word,
                    next.pack(),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => return Ok(()),
                    Err(actual) => word = actual,
                }
            }
        }
    }

    /// The window capacity for `half`'s second, running that second's token sync first if no
    /// caller has yet.
    fn synced_capacity(&self, half: u64) -> Result<u64, Newer> {
        let cached = Tokens::unpack(self.second.capacity.load(Ordering::Acquire));
        if cached.synced == Some(half / 2) {
            return Ok(u64::from(cached.tokens));
        }
        self.sync(half)
    }

    /// The slow path of [`synced_capacity`](Self::synced_capacity): at most once per second
    /// per caller.
    #[cold]
    fn sync(&self, half: u64) -> Result<u64, Newer> {
        let second = half / 2;
        let mut word = self.second.tokens.load(Ordering::Acquire);
        let tokens = loop {
            let state = Tokens::unpack(word);
            match state.synced {
                Some(synced) if synced == second => break state.tokens,
                Some(synced) if synced > second => return Err(Newer(synced * 2)),
                _ => {}
            }
            let previous_passes = self.seal_second(second)?;
            let tokens = self.curve.synced_tokens(
                state.synced.map(|synced| (synced, state.tokens)),
                second,
                previous_passes,
            );
            match self.second.tokens.compare_exchange(
                word,
                Tokens::pack(second, tokens),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break tokens,
                Err(actual) => word = actual,
            }
        };
        let capacity = self.curve.window_capacity(tokens);
        // `capacity <= MAX_WINDOW_COUNT < 2^32`, so it fits the token field.
        self.second
            .capacity
            .fetch_max(Tokens::pack(second, capacity as u32), Ordering::AcqRel);
        Ok(capacity)
    }

    /// Seals both halves of the second before `second` and returns their passes
    /// (Sentinel's `previousPassQps`).
    fn seal_second(&self, second: u64) -> Result<u64, Newer> {
        if second == 0 {
            return Ok(0);
        }
        Ok(self.seal(2 * second - 2)? + self.seal(2 * second - 1)?)
    }

    /// Seals window `half` so it admits nothing more, and returns its final count.
    fn seal(&self, half: u64) -> Result<u64, Newer> {
        let slot = self.slot(half);
        let mut word = slot.load(Ordering::Acquire);
        loop {
            let window = Window::unpack(word);
            if window.half > half {
                return Err(Newer(window.half));
            }
            if window.half == half && window.sealed {
                return Ok(window.count);
            }
            let count = if window.half == half { window.count } else { 0 };
            let sealed = Window {
                half,
                sealed: true,
                count,
            };
            match slot.compare_exchange_weak(
                word,
                sealed.pack(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(count),
                Err(actual) => word = actual,
            }
        }
    }

    /// The passes window `half` holds right now, without sealing it.
    fn peek(&self, half: u64) -> u64 {
        let window = Window::unpack(self.slot(half).load(Ordering::Acquire));
        if window.half == half { window.count } else { 0 }
    }

    /// The state as of clock reading `now_nanos`, computing (without storing) the token sync
    /// the second's first caller would perform, and adopting the newest time any caller has
    /// acted on, as a call would.
    pub(crate) fn view(&self, now_nanos: u64) -> View {
        let newest_window = self
            .halves
            .iter()
            .map(|slot| {
                let window = Window::unpack(slot.load(Ordering::Acquire));
                // A sealed window was sealed by a caller already in the next one.
                window.half + u64::from(window.sealed)
            })
            .max()
            .unwrap_or(0);
        let state = Tokens::unpack(self.second.tokens.load(Ordering::Acquire));
        let half = half_of(now_nanos.saturating_sub(self.origin_nanos))
            .max(newest_window)
            .max(state.synced.map_or(0, |synced| synced * 2));
        let second = half / 2;
        let tokens = if state.synced == Some(second) {
            state.tokens
        } else {
            let previous_passes = match second {
                0 => 0,
                _ => self.peek(2 * second - 2) + self.peek(2 * second - 1),
            };
            self.curve.synced_tokens(
                state.synced.map(|synced| (synced, state.tokens)),
                second,
                previous_passes,
            )
        };
        let previous = half
            .checked_sub(1)
            .map_or(0, |previous| self.peek(previous));
        View {
            tokens,
            window_passes: previous + self.peek(half),
        }
    }
}

/// When a refused acquire of `n` in window `half` could pass if nothing else arrived: once the
/// previous half rolls out of the window, once both have, or, if `n` exceeds the current limit,
/// at the next second, when the limit is recomputed.
#[inline]
fn retry_after(now_nanos: u64, half: u64, current: u64, n: u64, capacity: u64) -> u64 {
    let now = now_nanos.max(half * NANOS_PER_HALF);
    let at = if n > capacity {
        (half / 2 + 1) * NANOS_PER_SEC
    } else if current + n <= capacity {
        (half + 1) * NANOS_PER_HALF
    } else {
        (half + 2) * NANOS_PER_HALF
    };
    at.saturating_sub(now)
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use std::sync::atomic::AtomicU64 as SharedTime;
    use std::thread;
    use std::time::Duration;

    use super::*;

    /// Threads race across a second boundary while some read a clock up to half a second
    /// behind; afterwards every rolling window's final counts must respect the limit of its
    /// second, every admitted permit must be counted, and the sync must have subtracted exactly
    /// what the previous second ended with. Every call moves time on: slowly under light load
    /// until 1.5 s, then quickly, so the last window fills up while callers lagging into the
    /// lightly used one before it still find room there (and must not take it).
    /// (Small cases are model-checked exhaustively in `tests/loom_sentinel.rs`.)
    #[test]
    fn racing_callers_with_lagging_clocks_never_overshoot_a_rolling_window() {
        const START: u64 = 600_000_000; // second 0, half 1
        const END: u64 = 1_950_000_000; // second 1, half 3
        const BUSY: u64 = 1_500_000_000; // half 3: from here on, the load exceeds the limit
        // Time each call adds: 250 calls per half second under light load, 5 000 under heavy.
        let step = |now: u64| if now < BUSY { 2_000_000 } else { 100_000 };
        let curve = SentinelCurve::sentinel(6000.0, Duration::from_secs(10), 3).unwrap();
        let max = curve.max_tokens() as u32;
        for round in 0..100u64 {
            let window = SentinelWindow::new(curve, false, 0);
            let time = SharedTime::new(START);
            let admitted = SharedTime::new(0);
            let start_line = std::sync::Barrier::new(3);
            thread::scope(|scope| {
                for caller in 0..3u64 {
                    let (window, time, admitted) = (&window, &time, &admitted);
                    let start_line = &start_line;
                    scope.spawn(move || {
                        start_line.wait();
                        let mut random = 0x9E37_79B9_7F4A_7C15 ^ (round << 8 | caller);
                        let mut next = move || {
                            random ^= random << 13;
                            random ^= random >> 7;
                            random ^= random << 17;
                            random
                        };
                        loop {
                            let now = time.load(std::sync::atomic::Ordering::Relaxed);
                            if now >= END {
                                return;
                            }
                            time.fetch_add(step(now), std::sync::atomic::Ordering::Relaxed);
                            let lag = if next() % 4 == 0 {
                                next() % NANOS_PER_HALF
                            } else {
                                0
                            };
                            let n = 1 + next() % 3;
                            if window.try_acquire((now - lag).max(START), n as u32).is_ok() {
                                admitted.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                    });
                }
            });
            let count = |half: u64| window.peek(half);
            let admitted = admitted.into_inner();
            assert_eq!(
                admitted,
                count(1) + count(2) + count(3),
                "lost or phantom permits"
            );
            assert!(
                count(1) > 0 && count(2) + count(3) > 0,
                "the race never admitted"
            );
            // Second 0 (cold, full bucket): window (0, 1).
            assert!(count(1) <= curve.window_capacity(max));
            // Second 1: synced once, from second 0's final passes.
            let synced = Tokens::unpack(window.second.tokens.load(Ordering::Acquire));
            assert_eq!(synced.synced, Some(1));
            assert_eq!(
                synced.tokens,
                curve.synced_tokens(Some((0, max)), 1, count(1))
            );
            let capacity = curve.window_capacity(synced.tokens);
            assert!(count(1) + count(2) <= capacity, "window (1, 2) overshot");
            assert!(count(2) + count(3) <= capacity, "window (2, 3) overshot");
        }
    }

    #[test]
    fn window_word_round_trips_at_the_field_limits() {
        for window in [
            Window {
                half: 0,
                sealed: false,
                count: 0,
            },
            Window {
                half: MAX_HALF,
                sealed: true,
                count: MAX_WINDOW_COUNT,
            },
            Window {
                half: 12345,
                sealed: false,
                count: 7,
            },
        ] {
            assert_eq!(Window::unpack(window.pack()), window);
        }
    }

    #[test]
    fn token_word_zero_means_never_synced() {
        assert_eq!(Tokens::unpack(0).synced, None);
        let word = Tokens::pack(MAX_HALF / 2, u32::MAX);
        assert_eq!(
            Tokens::unpack(word),
            Tokens {
                synced: Some(MAX_HALF / 2),
                tokens: u32::MAX
            }
        );
    }

    #[test]
    fn retry_after_points_at_the_first_window_with_room() {
        // In the first half of second 3 (half 6), 100 ms in.
        let now = 3 * NANOS_PER_SEC + 100_000_000;
        // The previous half holds the passes: room once it rolls out, at 3.5 s.
        assert_eq!(retry_after(now, 6, 0, 1, 3), 400_000_000);
        // The current half is full too: room at 4.0 s.
        assert_eq!(retry_after(now, 6, 3, 1, 3), 900_000_000);
        // n above the current limit: the limit changes at the next second, 4.0 s.
        assert_eq!(retry_after(now, 6, 0, 4, 3), 900_000_000);
        // Second half (half 7) with too large an n: still the next second.
        assert_eq!(retry_after(now + NANOS_PER_HALF, 7, 0, 4, 3), 400_000_000);
    }

    #[test]
    fn clock_readings_beyond_the_window_range_stop_at_the_last_window() {
        assert_eq!(half_of(u64::MAX), MAX_HALF);
    }
}
