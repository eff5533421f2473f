//! Prices the common decisions need, worked out once per curve so that those decisions take
//! integer steps only.

use super::curve::SmoothCurve;

/// How many words [`Prices::to_words`] makes.
pub(super) const PRICE_WORDS: usize = 5;

/// The outcomes of the two steady states, for one curve and burst, in whole ns as the general
/// decision truncates them:
///
/// - **busy and empty** (warm under load): a permit costs the full-rate spacing and leaves the
///   bucket empty;
/// - **full after idling** (cold and lightly used): the bucket refilled to `max`; one permit
///   leaves `max − 1` and restarts the schedule with that level's lead.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Prices {
    /// What one permit costs with nothing stored.
    pub(super) stable: u64,
    /// [`Payment::Now`](super::Payment::Now): the price set for the next request after one
    /// permit is taken from a full bucket (one permit at `max − 1`).
    pub(super) next_after_full: u64,
    /// [`Payment::Later`](super::Payment::Later): what one permit taken from a full bucket
    /// costs (one permit at `max`).
    pub(super) one_from_full: u64,
    /// The restart lead at `max − 1`.
    pub(super) lead_after_full: u64,
    /// `max − 1` as a fill fraction.
    pub(super) fill_after_full: f64,
}

impl Prices {
    /// The prices on `curve` with `burst` ns of burst credit.
    pub(super) fn new(curve: &SmoothCurve, burst: u64) -> Self {
        let after_full = curve.max() - 1.0;
        let whole = |nanos: f64| nanos as i64 as u64;
        Prices {
            stable: whole(curve.cost(0.0, 1.0).0),
            next_after_full: whole(curve.cost(after_full, 1.0).0),
            one_from_full: whole(curve.cost(curve.max(), 1.0).0),
            lead_after_full: curve.restart_lead(after_full, burst),
            fill_after_full: curve.fill(after_full),
        }
    }

    /// The prices as words, for the sequence lock.
    pub(super) fn to_words(self) -> [u64; PRICE_WORDS] {
        [
            self.stable,
            self.next_after_full,
            self.one_from_full,
            self.lead_after_full,
            self.fill_after_full.to_bits(),
        ]
    }

    /// The prices from words in [`Self::to_words`]'s order.
    #[inline]
    pub(super) fn from_words(words: [u64; PRICE_WORDS]) -> Self {
        Prices {
            stable: words[0],
            next_after_full: words[1],
            one_from_full: words[2],
            lead_after_full: words[3],
            fill_after_full: f64::from_bits(words[4]),
        }
    }
}
