//! The curve in force, replaceable at run time, with its prices and a generation count.

use super::curve::{CURVE_WORDS, SmoothCurve};
use super::prices::{PRICE_WORDS, Prices};
use crate::sync::SeqLock;

const WORDS: usize = CURVE_WORDS + PRICE_WORDS + 1;
const GENERATION: usize = WORDS - 1;

/// The curve, its [`Prices`] and how many times it was replaced, under the crate's sequence
/// lock: every decision reads one whole curve; replacements are serialised by the lock.
#[derive(Debug)]
pub(super) struct SharedCurve {
    words: SeqLock<WORDS>,
    /// The burst the prices were worked out for.
    burst: u64,
}

/// One read of a [`SharedCurve`].
#[derive(Clone, Copy, Debug)]
pub(super) struct CurveInForce {
    pub(super) curve: SmoothCurve,
    pub(super) prices: Prices,
    /// Whether the curve was replaced an odd number of times.
    pub(super) odd: bool,
}

impl SharedCurve {
    pub(super) fn new(curve: SmoothCurve, burst: u64) -> Self {
        SharedCurve {
            words: SeqLock::new(to_words(&curve, burst, 0)),
            burst,
        }
    }

    #[inline]
    pub(super) fn load(&self) -> CurveInForce {
        from_words(self.words.read())
    }

    /// Puts `curve` in force and returns the one it replaced.
    pub(super) fn replace(&self, curve: &SmoothCurve) -> CurveInForce {
        loop {
            let mut replaced = None;
            let written = self.words.try_update(|old| {
                replaced = Some(old);
                Some(to_words(curve, self.burst, old[GENERATION].wrapping_add(1)))
            });
            if let (true, Some(old)) = (written, replaced) {
                return from_words(old);
            }
            crate::sync::spin_loop();
        }
    }
}

fn to_words(curve: &SmoothCurve, burst: u64, generation: u64) -> [u64; WORDS] {
    let curve_words = curve.to_words();
    let price_words = Prices::new(curve, burst).to_words();
    std::array::from_fn(|i| match i {
        GENERATION => generation,
        i if i < CURVE_WORDS => curve_words[i],
        i => price_words[i - CURVE_WORDS],
    })
}

#[inline]
fn from_words(words: [u64; WORDS]) -> CurveInForce {
    CurveInForce {
        curve: SmoothCurve::from_words(std::array::from_fn(|i| words[i])),
        prices: Prices::from_words(std::array::from_fn(|i| words[CURVE_WORDS + i])),
        odd: words[GENERATION] & 1 == 1,
    }
}
