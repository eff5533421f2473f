//! A deterministic random source for the simulations (SplitMix64).
//!
//! Include it with `#[path = "support/random.rs"] mod random;`.

#![allow(dead_code, unreachable_pub)]

/// SplitMix64 from a seed: the same sequence on every run.
pub struct Random(pub u64);

impl Random {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1).
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// An exponential duration with the given mean, in ns (at least 1).
    pub fn exponential(&mut self, mean_nanos: f64) -> u64 {
        ((-self.uniform().ln() * mean_nanos) as u64).max(1)
    }
}
