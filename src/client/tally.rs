//! Cumulative counts by request class: one relaxed atomic per class.

use crate::criticality::Criticality;
use crate::sync::{AtomicU64, Ordering};

/// A count per [`Criticality`], only ever increased.
#[derive(Debug)]
pub(super) struct Tally([AtomicU64; Criticality::COUNT]);

impl Tally {
    /// Every class at 0.
    pub(super) fn new() -> Self {
        Tally(std::array::from_fn(|_| AtomicU64::new(0)))
    }

    /// Counts one of `class`.
    #[inline]
    pub(super) fn add(&self, class: Criticality) {
        self.0[class.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts, by [`Criticality::index`].
    pub(super) fn get(&self) -> [u64; Criticality::COUNT] {
        std::array::from_fn(|class| self.0[class].load(Ordering::Relaxed))
    }
}
