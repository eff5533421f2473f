//! Per-thread random draws: SplitMix64, seeded once per thread.
//!
//! The probe's drop decision needs one fair coin per request, and the skew floor one lane per
//! request, not cryptographic randomness, and neither may contend: each thread keeps its own
//! 64-bit state in a `thread_local!` `Cell` (no destructor, so nothing is registered or
//! allocated). A thread seeds its state at its first draw from a process-wide counter, so no
//! two threads of a process share a sequence, and from the address of its state, which differs
//! between processes (ASLR), so replicas do not drop in step.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// SplitMix64's increment (2⁶⁴ / φ, odd).
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
/// A draw is uniform in `0..PPM`.
const PPM: u64 = 1_000_000;
/// A state of zero means "not seeded yet".
const UNSEEDED: u64 = 0;

/// Seeds handed out so far: every thread's seed differs.
static SEEDS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's SplitMix64 state, or [`UNSEEDED`].
    static STATE: Cell<u64> = const { Cell::new(UNSEEDED) };
}

/// SplitMix64's output function: a bijection that scatters neighbouring inputs.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Maps 64 random bits onto `0..n` by multiply-and-shift (bias below `n` / 2⁶⁴).
#[inline]
fn below(bits: u64, n: u32) -> u32 {
    // `bits · n < 2⁶⁴ · n`, so the high half is below `n`.
    ((u128::from(bits) * u128::from(n)) >> 64) as u32
}

/// Maps 64 random bits onto `0..PPM` (bias below 10⁻¹³).
#[inline]
fn to_ppm(bits: u64) -> u32 {
    below(bits, PPM as u32)
}

/// A fresh, non-zero state for this thread.
#[cold]
fn seed(state: &Cell<u64>) -> u64 {
    let count = SEEDS.fetch_add(1, Ordering::Relaxed);
    let address = std::ptr::from_ref(state) as usize as u64;
    match mix(count.wrapping_mul(GOLDEN) ^ mix(address)) {
        UNSEEDED => GOLDEN,
        seeded => seeded,
    }
}

/// A uniform draw in `0..1_000_000` from a generator every thread shares (one atomic add):
/// a seeded probe's, for deterministic runs.
#[inline]
pub(super) fn draw_shared_ppm(state: &crate::sync::AtomicU64) -> u32 {
    let next = state
        .fetch_add(GOLDEN, crate::sync::Ordering::Relaxed)
        .wrapping_add(GOLDEN);
    to_ppm(mix(next))
}

/// A uniform draw in `0..1_000_000` from this thread's generator: what
/// [`LagProbe::should_drop`](super::LagProbe::should_drop) compares with the drop probability.
///
/// Lock-free and allocation-free: one thread-local load and store (the first draw on a thread
/// also takes a seed from a process-wide counter). Not for cryptography.
#[inline]
pub(super) fn draw_ppm() -> u32 {
    to_ppm(next_bits())
}

/// A uniform draw in `0..n` (`n > 0`) from this thread's generator: the lane
/// [`SkewFloor`](super::floor::SkewFloor) records a request in.
#[inline]
pub(super) fn draw_below(n: u32) -> u32 {
    below(next_bits(), n)
}

/// The next 64 bits of this thread's generator.
#[inline]
fn next_bits() -> u64 {
    STATE.with(|state| {
        let mut current = state.get();
        if current == UNSEEDED {
            current = seed(state);
        }
        // A state that wraps to zero (after 2⁶⁴ draws) is simply reseeded.
        let next = current.wrapping_add(GOLDEN);
        state.set(next);
        mix(next)
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::{PPM, below, draw_ppm, to_ppm};

    #[test]
    fn the_draw_is_uniform() {
        const DRAWS: u64 = 100_000;
        let mut bins = [0u64; 10];
        let mut sum = 0;
        for _ in 0..DRAWS {
            let u = draw_ppm();
            assert!(u < 1_000_000, "{u}");
            bins[(u / 100_000) as usize] += 1;
            sum += u64::from(u);
        }
        // The mean's standard deviation is 10⁶ / √12 / √10⁵ ≈ 913; a bin's ≈ 95.
        let mean = sum as f64 / DRAWS as f64;
        assert!((mean - 499_999.5).abs() < 5_000.0, "mean {mean}");
        for bin in bins {
            assert!((9_400..=10_600).contains(&bin), "{bins:?}");
        }
    }

    #[test]
    fn threads_draw_different_sequences() {
        let sequences: HashSet<Vec<u32>> = (0..8)
            .map(|_| std::thread::spawn(|| (0..16).map(|_| draw_ppm()).collect::<Vec<_>>()))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|thread| thread.join().expect("the thread drew"))
            .collect();
        assert_eq!(sequences.len(), 8);
    }

    #[test]
    fn the_mapping_covers_the_range_and_no_more() {
        assert_eq!(to_ppm(0), 0);
        assert_eq!(u64::from(to_ppm(u64::MAX)), PPM - 1);
        assert_eq!(to_ppm(1 << 63), 500_000);
        // Four lanes: the top two bits.
        for (bits, lane) in [(0, 0), ((1 << 62) - 1, 0), (1 << 62, 1), (3 << 62, 3)] {
            assert_eq!(below(bits, 4), lane);
        }
        assert_eq!(below(u64::MAX, 4), 3);
    }
}
