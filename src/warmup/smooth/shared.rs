//! The curve in force, replaceable at run time, with its prices, its lanes and a generation
//! count.

use std::borrow::Cow;

use super::curve::{CURVE_WORDS, SmoothCurve};
use super::lanes::{LANE_WORDS, Lanes};
use super::prices::{PRICE_WORDS, Prices};
use super::run::RunScale;
use super::state::Payment;
use crate::sync::SeqLock;

const STAMP: usize = CURVE_WORDS + PRICE_WORDS;
const LANES: usize = STAMP + 1;
const WORDS: usize = LANES + LANE_WORDS;

/// The curve, its [`Prices`], how many times it was replaced and its [`Lanes`], under
/// the crate's sequence lock: every decision reads one whole curve, or the lanes alone;
/// replacements are serialised by the lock. Until the first replacement a decision reads the
/// curve the bucket was built with in place, without copying it out of the lock.
#[derive(Debug)]
pub(super) struct SharedCurve {
    /// The curve built with, exactly as the lock's first words decode.
    initial: CurveInForce,
    /// Its lanes, as the lock's last words decode.
    initial_lanes: Lanes,
    words: SeqLock<WORDS>,
    /// The burst the prices were worked out for.
    burst: u64,
    /// How requests pay, which the lanes were worked out for.
    payment: Payment,
}

/// One read of a [`SharedCurve`].
#[derive(Clone, Copy, Debug)]
pub(super) struct CurveInForce {
    pub(super) curve: SmoothCurve,
    pub(super) prices: Prices,
    /// How many times the curve was replaced, below the curve's [run](super::run) shift in
    /// the top six bits: one word, as the lock holds it.
    stamp: u64,
}

const SHIFT_AT: u32 = 58;
const GENERATION_MASK: u64 = (1 << SHIFT_AT) - 1;

impl CurveInForce {
    /// `curve` with its prices for `burst`, replaced `generation` times.
    pub(super) fn new(curve: SmoothCurve, burst: u64, generation: u64) -> Self {
        CurveInForce {
            curve,
            prices: Prices::new(&curve, burst),
            stamp: generation & GENERATION_MASK | u64::from(RunScale::shift(&curve)) << SHIFT_AT,
        }
    }

    /// How many times the curve was replaced (modulo 2^58).
    #[inline]
    pub(super) fn generation(&self) -> u64 {
        self.stamp & GENERATION_MASK
    }

    /// Whether the curve was replaced an odd number of times.
    #[inline]
    pub(super) fn odd(&self) -> bool {
        self.stamp & 1 == 1
    }

    /// The fixed point of the curve's runs.
    #[inline(always)]
    pub(super) fn run_scale(&self) -> RunScale {
        RunScale::at(&self.curve, (self.stamp >> SHIFT_AT) as u32)
    }
}

impl SharedCurve {
    pub(super) fn new(curve: SmoothCurve, burst: u64, payment: Payment) -> Self {
        let words = to_words(&curve, burst, 0, payment);
        SharedCurve {
            initial: from_words(words),
            initial_lanes: lanes_from_words(&words),
            words: SeqLock::new(words),
            burst,
            payment,
        }
    }

    /// The curve in force: the one built with in place, or a copy of a replacement.
    ///
    /// Copying the curve and its prices to the stack left a store per word pending when the
    /// decision's compare-and-swap came, which waits for them: about 3 ns of a 22 ns admission
    /// in the steady states.
    #[inline]
    pub(super) fn load(&self) -> Cow<'_, CurveInForce> {
        match self.initial() {
            Some(initial) => Cow::Borrowed(initial),
            None => Cow::Owned(self.read()),
        }
    }

    /// A copy of the curve in force, out of the lock.
    #[inline]
    pub(super) fn read(&self) -> CurveInForce {
        from_words(self.words.read())
    }

    /// The curve built with, if it is still in force.
    #[inline]
    pub(super) fn initial(&self) -> Option<&CurveInForce> {
        self.words.untouched().then_some(&self.initial)
    }

    /// The lanes of the curve in force, copied out of the lock (`None` while a replacement is
    /// being written); [`initial_lanes`](Self::initial_lanes) reads the first curve's in place.
    #[inline(always)]
    pub(super) fn lanes(&self) -> Option<Lanes> {
        self.words.try_read_from(LANES).map(Lanes::from_words)
    }

    /// The lanes of the curve built with, in place, while it is still in force.
    #[inline(always)]
    pub(super) fn initial_lanes(&self) -> Option<&Lanes> {
        self.words.untouched().then_some(&self.initial_lanes)
    }

    /// Puts `curve` in force and returns the one it replaced.
    pub(super) fn replace(&self, curve: &SmoothCurve) -> CurveInForce {
        loop {
            let mut replaced = None;
            let written = self.words.try_update(|old| {
                replaced = Some(old);
                let generation = from_words(old).generation().wrapping_add(1);
                Some(to_words(curve, self.burst, generation, self.payment))
            });
            if let (true, Some(old)) = (written, replaced) {
                return from_words(old);
            }
            crate::sync::spin_loop();
        }
    }
}

fn to_words(curve: &SmoothCurve, burst: u64, generation: u64, payment: Payment) -> [u64; WORDS] {
    let force = CurveInForce::new(*curve, burst, generation);
    let (curve_words, price_words) = (curve.to_words(), force.prices.to_words());
    let lane_words = Lanes::new(&force, payment).to_words();
    std::array::from_fn(|i| match i {
        i if i < CURVE_WORDS => curve_words[i],
        i if i < STAMP => price_words[i - CURVE_WORDS],
        STAMP => force.stamp,
        i => lane_words[i - LANES],
    })
}

fn lanes_from_words(words: &[u64; WORDS]) -> Lanes {
    Lanes::from_words(std::array::from_fn(|i| words[LANES + i]))
}

#[inline]
fn from_words(words: [u64; WORDS]) -> CurveInForce {
    CurveInForce {
        curve: SmoothCurve::from_words(std::array::from_fn(|i| words[i])),
        prices: Prices::from_words(std::array::from_fn(|i| words[CURVE_WORDS + i])),
        stamp: words[STAMP],
    }
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use super::*;

    fn words(force: &CurveInForce) -> ([u64; CURVE_WORDS], [u64; PRICE_WORDS], bool) {
        (force.curve.to_words(), force.prices.to_words(), force.odd())
    }

    /// The curve built with is read in place until a replacement, which is then read from the
    /// lock, with its own prices and the flipped parity.
    #[test]
    fn reads_the_initial_curve_in_place_until_replaced() {
        let (first, second) = (
            SmoothCurve::new(100.0, 1e10, 3.0),
            SmoothCurve::new(50.0, 1e10, 3.0),
        );
        let shared = SharedCurve::new(first, 1_000_000_000, Payment::Now);
        let initial = shared.load();
        assert!(matches!(initial, Cow::Borrowed(f) if std::ptr::eq(f, &shared.initial)));
        assert_eq!(words(&initial), words(&from_words(shared.words.read())));
        assert_eq!(words(&shared.replace(&second)), words(&initial));
        let replaced = shared.load();
        assert!(matches!(replaced, Cow::Owned(_)));
        let expected = (
            second.to_words(),
            Prices::new(&second, 1_000_000_000).to_words(),
            true,
        );
        assert_eq!(words(&replaced), expected);
    }

    /// The lanes are the curve in force's, in place until a replacement, then from the lock,
    /// also after a second replacement, whose words carry the first curve's tag again.
    #[test]
    fn the_lanes_are_the_curve_in_forces() {
        let curves = [100.0, 50.0, 20.0].map(|rate| SmoothCurve::new(rate, 1e10, 3.0));
        let shared = SharedCurve::new(curves[0], 0, Payment::Later);
        for (generation, curve) in curves.iter().enumerate() {
            if generation > 0 {
                shared.replace(curve);
            }
            let force = CurveInForce::new(*curve, 0, generation as u64);
            let expected = Lanes::new(&force, Payment::Later).to_words();
            assert_eq!(shared.lanes().map(Lanes::to_words), Some(expected));
        }
    }
}
