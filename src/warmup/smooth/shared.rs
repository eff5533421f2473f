//! The curve in force, shared between decisions and replaced by `set_rate`.

use super::curve::{CURVE_WORDS, SmoothCurve};
use crate::sync::{Mutex, SeqLock};

/// The words under the sequence lock: the curve's, the replaced curve's, then the
/// generation.
const WORDS: usize = 2 * CURVE_WORDS + 1;

/// A curve and how many times the curve was replaced before it.
#[derive(Clone, Copy, Debug)]
pub(super) struct CurveInForce {
    pub(super) curve: SmoothCurve,
    generation: u64,
}

impl CurveInForce {
    /// Whether the curve was replaced an odd number of times: the parity the state records
    /// for the curve that priced it.
    #[inline]
    pub(super) fn odd(&self) -> bool {
        self.generation & 1 == 1
    }
}

/// The curve in force and the one it replaced under a sequence lock, so that a decision reads
/// one whole curve: the one its state was priced on. Until the first replacement, decisions
/// read the curve built with in place.
#[derive(Debug)]
pub(super) struct SharedCurve {
    initial: CurveInForce,
    words: SeqLock<WORDS>,
    /// Held by a replacement until the state is re-tagged, so that replacements never
    /// interleave (see [`SmoothBucket::set_curve`](super::SmoothBucket::set_curve)).
    replacing: Mutex<()>,
}

impl SharedCurve {
    pub(super) fn new(curve: SmoothCurve) -> Self {
        let initial = CurveInForce {
            curve,
            generation: 0,
        };
        SharedCurve {
            initial,
            words: SeqLock::new(to_words(&initial, &initial.curve)),
            replacing: Mutex::new(()),
        }
    }

    /// The curve a state tagged `odd_curve` was priced on: the curve in force, or while a
    /// replacement has not yet re-tagged the state, the one it replaced. (A state read before
    /// a replacement that finished re-tagging may get either; its compare-and-swap fails.)
    #[inline]
    pub(super) fn load_for(&self, odd_curve: bool) -> CurveInForce {
        if self.words.untouched() {
            return self.initial;
        }
        let words = self.words.read();
        let generation = words[2 * CURVE_WORDS];
        let (curve, generation) = if generation & 1 == u64::from(odd_curve) {
            (curve_at(&words, 0), generation)
        } else {
            (curve_at(&words, CURVE_WORDS), generation.wrapping_sub(1))
        };
        CurveInForce { curve, generation }
    }

    /// The curve in force.
    pub(super) fn load(&self) -> SmoothCurve {
        if self.words.untouched() {
            self.initial.curve
        } else {
            curve_at(&self.words.read(), 0)
        }
    }

    /// Puts `curve` in force and runs `then` with the replaced curve and the new one, before
    /// any other replacement may start.
    pub(super) fn replace<T>(
        &self,
        curve: &SmoothCurve,
        then: impl FnOnce(&CurveInForce, &CurveInForce) -> T,
    ) -> T {
        // A replacement that panicked left the words whole (a write cannot fail).
        let _one_at_a_time = self
            .replacing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let words = self.words.read();
        let replaced = CurveInForce {
            curve: curve_at(&words, 0),
            generation: words[2 * CURVE_WORDS],
        };
        let new = CurveInForce {
            curve: *curve,
            generation: replaced.generation.wrapping_add(1),
        };
        self.words.write(to_words(&new, &replaced.curve));
        then(&replaced, &new)
    }
}

fn to_words(force: &CurveInForce, replaced: &SmoothCurve) -> [u64; WORDS] {
    let (curve, replaced) = (force.curve.to_words(), replaced.to_words());
    std::array::from_fn(|i| match i {
        i if i < CURVE_WORDS => curve[i],
        i if i < 2 * CURVE_WORDS => replaced[i - CURVE_WORDS],
        _ => force.generation,
    })
}

#[inline]
fn curve_at(words: &[u64; WORDS], first: usize) -> SmoothCurve {
    SmoothCurve::from_words(std::array::from_fn(|i| words[first + i]))
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use super::*;

    #[test]
    fn reads_the_curve_a_state_was_priced_on() {
        let curves = [100.0, 50.0, 20.0].map(|rate| SmoothCurve::new(rate, 1e10, 3.0));
        let shared = SharedCurve::new(curves[0]);
        assert_eq!(shared.load(), curves[0]);
        assert_eq!(shared.load_for(false).curve, curves[0]);
        assert!(!shared.load_for(false).odd());
        for (generation, curve) in curves.iter().enumerate().skip(1) {
            let odd = generation % 2 == 1;
            let (old, new) = shared.replace(curve, |old, new| (old.curve, new.odd()));
            assert_eq!(old, curves[generation - 1]);
            assert_eq!(new, odd);
            assert_eq!(shared.load(), *curve);
            assert_eq!(shared.load_for(odd).curve, *curve);
            assert_eq!(shared.load_for(odd).odd(), odd);
            assert_eq!(shared.load_for(!odd).curve, curves[generation - 1]);
            assert_eq!(shared.load_for(!odd).odd(), !odd);
        }
    }
}
