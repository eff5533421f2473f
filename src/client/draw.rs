//! Uniform draws from a counter: splitmix64, seeded per owner so that clients started together
//! draw different sequences.

use std::hash::BuildHasher;

use crate::sync::{AtomicU64, Ordering};

/// splitmix64's increment.
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// A lock-free source of uniform draws.
#[derive(Debug)]
pub(super) struct Draws(AtomicU64);

impl Draws {
    /// A sequence seeded from the process's random hasher keys.
    pub(super) fn seeded() -> Self {
        Draws(AtomicU64::new(
            std::collections::hash_map::RandomState::new().hash_one(0u8),
        ))
    }

    /// A uniform draw in `[0, 1)`.
    pub(super) fn next(&self) -> f64 {
        let counter = self
            .0
            .fetch_add(GAMMA, Ordering::Relaxed)
            .wrapping_add(GAMMA);
        (mix(counter) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// splitmix64's finaliser.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
