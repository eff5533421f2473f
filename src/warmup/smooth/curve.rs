//! The smooth curve's constants and the prices they set.

const NANOS_PER_SEC: f64 = 1e9;

/// How many words [`SmoothCurve::to_words`] makes.
pub(super) const CURVE_WORDS: usize = 7;

/// The smooth curve's constants, in permits and nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SmoothCurve {
    rate: f64,
    stable: f64,
    threshold: f64,
    max: f64,
    slope: f64,
    /// Stored permits gained per idle ns (`max / period`).
    refill_rate: f64,
    /// `1 / max`: a fill fraction is a multiplication, not a division, on the hot path.
    inverse_max: f64,
}

impl SmoothCurve {
    /// The curve for `rate` permits per second, warming up over `period_nanos` with
    /// `cold_factor` (≥ 1; 1 is a flat limiter). The caller validates the inputs: a positive,
    /// finite rate and period.
    pub(crate) fn new(rate: f64, period_nanos: f64, cold_factor: f64) -> Self {
        let stable = NANOS_PER_SEC / rate;
        let cold = stable * cold_factor;
        let threshold = 0.5 * period_nanos / stable;
        let max = threshold + 2.0 * period_nanos / (stable + cold);
        SmoothCurve {
            rate,
            stable,
            threshold,
            max,
            slope: (cold - stable) / (max - threshold),
            refill_rate: max / period_nanos,
            inverse_max: max.recip(),
        }
    }

    /// The curve as words, for the sequence lock; [`Self::from_words`] reads them back in the
    /// same order.
    pub(super) fn to_words(self) -> [u64; CURVE_WORDS] {
        [
            self.rate,
            self.stable,
            self.threshold,
            self.max,
            self.slope,
            self.refill_rate,
            self.inverse_max,
        ]
        .map(f64::to_bits)
    }

    /// The curve from words in [`Self::to_words`]'s order.
    #[inline]
    pub(super) fn from_words(words: [u64; CURVE_WORDS]) -> SmoothCurve {
        let word = words.map(f64::from_bits);
        SmoothCurve {
            rate: word[0],
            stable: word[1],
            threshold: word[2],
            max: word[3],
            slope: word[4],
            refill_rate: word[5],
            inverse_max: word[6],
        }
    }

    /// The full rate, in permits per second.
    #[inline]
    pub(crate) fn rate(&self) -> f64 {
        self.rate
    }

    /// Permits stored at or below which the full rate applies.
    #[inline]
    pub(crate) fn threshold(&self) -> f64 {
        self.threshold
    }

    /// The most permits the bucket stores (cold).
    #[inline]
    pub(crate) fn max(&self) -> f64 {
        self.max
    }

    /// The slope of the spacing above the threshold, in ns per permit per stored permit.
    #[inline]
    pub(crate) fn slope(&self) -> f64 {
        self.slope
    }

    /// The spacing, in ns, of requests spending the stored permit at level `stored`.
    #[inline]
    pub(crate) fn interval(&self, stored: f64) -> f64 {
        self.stable + (stored - self.threshold).max(0.0) * self.slope
    }

    /// What `permits` cost, in ns, with `stored` permits stored; and how many stored ones they
    /// spend.
    #[inline]
    pub(super) fn cost(&self, stored: f64, permits: f64) -> (f64, f64) {
        if permits == 1.0 && stored - self.threshold >= 1.0 {
            return (self.one_above(stored), 1.0);
        }
        let spend = permits.min(stored);
        let above = stored - self.threshold;
        let mut cost = 0.0;
        let mut below = spend;
        if above > 0.0 {
            // The trapezoid over the part of [stored − spend, stored] above the threshold.
            let spent_above = above.min(spend);
            let top = self.stable + above * self.slope;
            let bottom = self.stable + (above - spent_above) * self.slope;
            cost += spent_above * (top + bottom) / 2.0;
            below -= spent_above;
        }
        cost += (below + (permits - spend)) * self.stable;
        (cost, spend)
    }

    /// What one permit costs from `stored` permits, `stored − 1` at or above the threshold:
    /// the mean spacing over `[stored − 1, stored]`, `stable + slope · (stored − ½ − threshold)`,
    /// as one multiplication and one addition on `stored` (the trapezoid in [`Self::cost`]
    /// takes a chain of seven).
    #[inline]
    fn one_above(&self, stored: f64) -> f64 {
        let intercept = self.stable - self.slope * (self.threshold + 0.5);
        intercept + self.slope * stored
    }

    /// How far past the clock a schedule restarting from idle at level `stored` begins, in ns:
    /// the burst credit it leaves is `burst` less this lead.
    ///
    /// Spending stored permits warms the limiter, so the permits a burst credit and the
    /// following second buy get cheaper as they are spent. The lead is what that warming
    /// saves on the `1 s + burst` worth of spacing at `stored`, so a restart passes at most
    /// `1 + (1 s + burst) / interval(stored)` requests in its first second: from cold with the
    /// defaults 67, the most Sentinel's rolling window passes in one second. Zero when warm;
    /// never more than `burst`.
    pub(super) fn restart_lead(&self, stored: f64, burst: u64) -> u64 {
        let above = stored - self.threshold;
        if above <= 0.0 || burst == 0 {
            return 0;
        }
        let span = NANOS_PER_SEC + nanos_to_f64(burst);
        let permits = span / self.interval(stored);
        // Permit `k` of the span is cheaper than the first by `slope · min(k, above)`.
        let warming = if above < permits { above } else { permits };
        let saved = self.slope * (warming * permits - warming * warming / 2.0);
        (saved as i64 as u64).min(burst)
    }

    /// `stored` permits as a fraction of `max`, within `0..=1` (exactly 1 at `max`, so that a
    /// full bucket reads as full again).
    #[inline]
    pub(super) fn fill(&self, stored: f64) -> f64 {
        if stored >= self.max {
            1.0
        } else {
            let fill = stored * self.inverse_max;
            if fill > 0.0 { fill } else { 0.0 }
        }
    }

    /// Stored permits after `idle_nanos` without unmet demand.
    #[inline]
    pub(super) fn refill(&self, stored: f64, idle_nanos: u64) -> f64 {
        let refilled = stored + nanos_to_f64(idle_nanos) * self.refill_rate;
        // A comparison rather than `f64::min`, whose NaN handling costs three more
        // instructions on this hot path; nothing here is NaN.
        if refilled < self.max {
            refilled
        } else {
            self.max
        }
    }
}

/// `nanos` as a float, through `i64` (a cheaper conversion than `u64`'s); spans beyond 292
/// years count as 292 years, which refill any bucket.
#[inline]
pub(super) fn nanos_to_f64(nanos: u64) -> f64 {
    nanos.min(i64::MAX as u64) as i64 as f64
}

/// Curves across what the engine's property tests cover: rates from 0.05/s to 10⁹/s, warm-up
/// periods from 0.1 s to 100 s, cold factors from 1 (a plain rate limiter) to 20.
#[cfg(test)]
pub(super) fn any_curve() -> impl proptest::strategy::Strategy<Value = SmoothCurve> {
    use proptest::prelude::*;
    (
        prop_oneof![0.05f64..10.0, 10.0f64..1e6, Just(1e9)],
        prop_oneof![0.1f64..100.0, Just(10.0)],
        prop_oneof![Just(1.0), Just(3.0), 1.0f64..20.0],
    )
        .prop_map(|(rate, period, factor)| SmoothCurve::new(rate, period * NANOS_PER_SEC, factor))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// One permit fully above the threshold costs the trapezoid's mean spacing over
        /// `[stored − 1, stored]`, to within rounding.
        #[test]
        fn one_permit_above_the_threshold_costs_the_mean_spacing(
            rate in prop_oneof![0.05f64..10.0, 10.0f64..1e6, Just(1e9)],
            period in prop_oneof![0.1f64..100.0, Just(10.0)],
            factor in prop_oneof![Just(3.0), 1.0f64..20.0],
            share in 0.0f64..=1.0,
        ) {
            let curve = SmoothCurve::new(rate, period * NANOS_PER_SEC, factor);
            let stored = curve.threshold() + 1.0 + share * (curve.max() - curve.threshold() - 1.0);
            prop_assume!(stored - curve.threshold() >= 1.0);
            let (cost, spend) = curve.cost(stored, 1.0);
            let mean = (curve.interval(stored) + curve.interval(stored - 1.0)) / 2.0;
            prop_assert_eq!(spend, 1.0);
            prop_assert!((cost - mean).abs() <= mean * 1e-9, "{} vs {}", cost, mean);
        }
    }
}
