//! The run: the prices of the spends the schedule counts after a write of the stored permits'
//! word, and of the spend that writes them, worked out in integers when the word is written, so
//! that a busy admission prices its permit without floating point between reading the state
//! and its compare-and-swap.
//!
//! A run word holds, for the stored permits' word it was worked out from (`W` permits):
//!
//! - the base price in fixed point, `2^-shift` ns units: along the slope `one_above(W)`, at or
//!   below the threshold the full-rate price;
//! - how many spends `k = 1, 2, …` (up to [`MAX_STEPS`]) it prices: those after which `W − k`
//!   permits are still a whole permit above the threshold (along the slope), or all at or below
//!   it and at least one permit (at the full rate);
//! - a key: a hash of the stored permits' word and the curve's generation. A run whose key does
//!   not match the word and curve a decision read prices nothing; the decision then prices as
//!   [`SmoothCurve::one_after`] does.
//!
//! Spend `k` costs `(base − k · slope) >> shift` whole ns along the slope, where `one_after`
//! gives `one_above(W) − k · slope` in floating point: the two differ by less than
//! `(k + 1) · 2^-shift` ns before truncation, and `shift` is as large as the curve's coldest
//! price allows (35 at 10⁹ permits/s, 5 at 1/s) and at least [`MIN_SHIFT`], so that the
//! difference stays below 1 ns. At the full rate both give the same price.

use super::curve::SmoothCurve;
use super::shared::CurveInForce;
use super::state::MAX_PENDING;

/// The spends a run prices: the [`MAX_PENDING`] a schedule counts and the one after them,
/// which writes them to the stored permits' word.
pub(super) const MAX_STEPS: u64 = MAX_PENDING + 1;
/// A run's base is below `2^BASE_BITS`, so a price is too.
pub(super) const BASE_BITS: u32 = 38;
const BASE_MASK: u64 = (1 << BASE_BITS) - 1;
const STEPS_SHIFT: u32 = BASE_BITS;
const STEPS_MASK: u64 = 31;
const FLAT: u64 = 1 << 43;
const _: () = assert!(MAX_STEPS <= STEPS_MASK && STEPS_MASK << STEPS_SHIFT < FLAT);
const KEY_SHIFT: u32 = 44;
const GENERATION_BITS: u32 = 4;
/// The largest fixed-point shift: 2^-48 ns is finer than any price needs.
const MAX_SHIFT: u32 = 48;
/// The smallest fixed-point shift: at `2^-5` ns, the [`MAX_STEPS`] spends of a run stay within
/// 1 ns of their floating-point prices.
const MIN_SHIFT: u32 = 5;
const _: () = assert!(MAX_STEPS < 1 << MIN_SHIFT);
/// A scale's shift when the curve's prices do not fit a run.
const NO_RUNS: u32 = 63;

/// A curve's fixed point for runs: the shift, and the slope in `2^-shift` ns per permit per
/// permit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct RunScale {
    shift: u32,
    slope: u64,
}

impl RunScale {
    /// The largest shift at which every price on `curve` fits the run's base with a bit to
    /// spare, or no runs (a shift of 63) if that is below [`MIN_SHIFT`] (a coldest price of
    /// 2^32 ns, 4.3 s, or more), or its slope does not fit 57 bits at that shift. Fits six bits.
    pub(super) fn shift(curve: &SmoothCurve) -> u32 {
        let cold = curve.interval(curve.max());
        let limit = (1u64 << (BASE_BITS - 1)) as f64;
        let fits = |shift| {
            // Also false for NaN.
            cold * pow2(shift) < limit && curve.slope() * pow2(shift) < (1u64 << 57) as f64
        };
        (MIN_SHIFT..=MAX_SHIFT)
            .rev()
            .find(|&shift| fits(shift))
            .unwrap_or(NO_RUNS)
    }

    /// The scale on `curve` at `shift` (from [`Self::shift`]): a multiplication and a
    /// conversion on the curve's constants, off the path from the state to the decision.
    #[inline(always)]
    pub(super) fn at(curve: &SmoothCurve, shift: u32) -> Self {
        RunScale {
            shift,
            slope: (curve.slope() * pow2(shift)) as u64,
        }
    }

    /// The scale as two words: the shift, then the slope.
    pub(super) fn to_words(self) -> [u64; 2] {
        [u64::from(self.shift), self.slope]
    }

    /// The scale from words in [`Self::to_words`]'s order.
    #[inline(always)]
    pub(super) fn from_words(words: [u64; 2]) -> Self {
        RunScale {
            shift: words[0] as u32,
            slope: words[1],
        }
    }
}

/// `2^exponent`, exactly, for an exponent up to [`MAX_SHIFT`].
#[inline]
fn pow2(exponent: u32) -> f64 {
    f64::from_bits((1023 + u64::from(exponent)) << 52)
}

/// The key that ties a run to the stored permits' word `fill_bits` and the curve of
/// `generation`: 16 bits of a hash of the word above 4 bits of the generation.
#[inline(always)]
fn key(fill_bits: u64, generation: u64) -> u64 {
    let tag = fill_bits.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 48;
    tag << GENERATION_BITS | generation & ((1 << GENERATION_BITS) - 1)
}

/// The run worked out from the stored permits' word `fill` (a fill fraction) on the curve in
/// `force`.
pub(super) fn run(force: &CurveInForce, fill: f64) -> u64 {
    let (curve, scale) = (&force.curve, force.run_scale());
    let key = key(fill.to_bits(), force.generation()) << KEY_SHIFT;
    if scale.shift == NO_RUNS {
        return key;
    }
    let word = fill * curve.max();
    let stored = |k: u64| word - k as f64;
    // `one_after`'s cases, at `W − k` permits stored. Each holds for every spend up to the
    // last it holds for (`W − k` falls with `k`), so a run is checked at its last spend
    // first: the common case, every spend well above or below the threshold, takes one check.
    let sloped = |k| stored(k) - curve.threshold() >= 1.0;
    let flat = |k| stored(k) - curve.threshold() <= 0.0 && stored(k) >= 1.0;
    if sloped(1) {
        let base = (curve.one_above(word) * pow2(scale.shift)) as u64;
        let priced = |k| sloped(k) && k * scale.slope <= base;
        key | last_held(priced) << STEPS_SHIFT | base
    } else if flat(1) {
        key | FLAT | last_held(flat) << STEPS_SHIFT | force.prices.stable << scale.shift
    } else {
        key
    }
}

/// The last spend `k` of `1..=MAX_STEPS` up to which `holds` holds, given that it holds for
/// every `k` up to the last it holds for.
#[inline]
fn last_held(holds: impl Fn(u64) -> bool) -> u64 {
    if holds(MAX_STEPS) {
        return MAX_STEPS;
    }
    (1..MAX_STEPS).take_while(|&k| holds(k)).count() as u64
}

/// What a run prices, unpacked: spend `k` (one to `steps`) costs `(base − k · slope) >> shift`
/// whole ns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Priced {
    pub(super) base: u64,
    /// `0` at the full rate.
    pub(super) slope: u64,
    pub(super) shift: u32,
    /// How many spends the run prices (up to [`MAX_STEPS`]); `k · slope ≤ base` for each.
    pub(super) steps: u64,
    /// Whether the run prices at the full rate (the spends leave the level at or below the
    /// threshold) rather than along the slope.
    pub(super) flat: bool,
}

impl Priced {
    /// What spend `k` costs, for `k` up to [`steps`](Self::steps).
    #[inline(always)]
    pub(super) fn price(self, k: u64) -> u64 {
        (self.base - k * self.slope) >> self.shift
    }
}

/// What `run` prices on the curve in `force`: `None` if it does not match the stored permits'
/// word `fill_bits` and that curve.
#[inline(always)]
pub(super) fn priced(run: u64, force: &CurveInForce, fill_bits: u64) -> Option<Priced> {
    priced_at(run, fill_bits, force.generation(), force.run_scale())
}

/// [`priced`] on a curve replaced `generation` times, whose runs have `scale`.
#[inline(always)]
pub(super) fn priced_at(
    run: u64,
    fill_bits: u64,
    generation: u64,
    scale: RunScale,
) -> Option<Priced> {
    if run >> KEY_SHIFT != key(fill_bits, generation) {
        return None;
    }
    let flat = run & FLAT != 0;
    Some(Priced {
        base: run & BASE_MASK,
        slope: if flat { 0 } else { scale.slope },
        shift: scale.shift,
        steps: (run >> STEPS_SHIFT) & STEPS_MASK,
        flat,
    })
}

/// What spend `k` (one to [`MAX_STEPS`]) costs, in whole ns, by `run` on the curve
/// in `force`: `None` if the run does not match the stored permits' word `fill_bits` and that
/// curve, or does not price spend `k`.
#[inline(always)]
pub(super) fn price(run: u64, force: &CurveInForce, fill_bits: u64, k: u64) -> Option<u64> {
    priced(run, force, fill_bits)
        .filter(|priced| k <= priced.steps)
        .map(|priced| priced.price(k))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::curve::any_curve;
    use super::*;
    use crate::warmup::smooth::state::whole;

    fn force(curve: SmoothCurve, generation: u64) -> CurveInForce {
        CurveInForce::new(curve, 0, generation)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// A run prices each counted spend within a nanosecond of the floating-point price
        /// `one_after` sets (the same at the full rate), for the spends it prices, and prices
        /// every spend that stays a whole permit above the threshold.
        #[test]
        fn a_run_prices_counted_spends_as_one_after(
            curve in any_curve(),
            fill in prop_oneof![Just(1.0f64), 0.0f64..=1.0],
            generation in 0u64..40,
        ) {
            let force = force(curve, generation);
            let (scale, run) = (force.run_scale(), run(&force, fill));
            let word = fill * curve.max();
            for k in 1..=MAX_STEPS {
                let float = whole(curve.one_after(word, k));
                match price(run, &force, fill.to_bits(), k) {
                    Some(fixed) => prop_assert!(fixed.abs_diff(float) <= 1, "{} vs {}", fixed, float),
                    None => prop_assert!(
                        scale.shift == NO_RUNS || word - k as f64 - curve.threshold() < 1.0,
                        "spend {} not priced", k
                    ),
                }
            }
        }
    }

    /// A run prices nothing for another stored permits' word or another curve.
    #[test]
    fn a_run_prices_only_the_word_and_curve_it_was_worked_out_from() {
        let curve = SmoothCurve::new(100.0, 10e9, 3.0);
        let run = run(&force(curve, 3), 0.75);
        assert!(price(run, &force(curve, 3), 0.75f64.to_bits(), 1).is_some());
        assert_eq!(price(run, &force(curve, 3), 0.5f64.to_bits(), 1), None);
        assert_eq!(price(run, &force(curve, 4), 0.75f64.to_bits(), 1), None);
    }

    /// At 1/s, a shift of 5 (the coldest price, 3 s, in 2^-5 ns); at 10⁹/s, 35; curves whose
    /// coldest price is 6 s or an hour have no runs.
    #[test]
    fn the_scale_is_as_fine_as_the_coldest_price_allows() {
        let shift = |rate| RunScale::shift(&SmoothCurve::new(rate, 10e9, 3.0));
        assert_eq!(shift(1.0), 5);
        assert_eq!(shift(1e9), 35);
        assert_eq!(shift(0.5), NO_RUNS);
        assert_eq!(shift(1.0 / 1200.0), NO_RUNS);
    }
}
