//! The decision counters behind [`Totals`], on their own cache line.

use crossbeam_utils::CachePadded;

use super::snapshot::Totals;
use crate::sync::{AtomicU64, Ordering};

/// How many decisions admitted and refused. Each decision adds one with a relaxed atomic add:
/// the totals are statistics, ordered with nothing else.
#[derive(Debug)]
pub(crate) struct Counters {
    counts: CachePadded<[AtomicU64; 2]>,
}

const ADMITTED: usize = 0;
const REFUSED: usize = 1;

impl Counters {
    pub(crate) fn new() -> Self {
        Counters {
            counts: CachePadded::new([AtomicU64::new(0), AtomicU64::new(0)]),
        }
    }

    /// Counts a decision and returns it.
    #[inline]
    pub(crate) fn count<T, E>(&self, decision: Result<T, E>) -> Result<T, E> {
        let which = if decision.is_ok() { ADMITTED } else { REFUSED };
        self.counts[which].fetch_add(1, Ordering::Relaxed);
        decision
    }

    /// The totals now.
    pub(crate) fn get(&self) -> Totals {
        Totals {
            admitted: self.counts[ADMITTED].load(Ordering::Relaxed),
            refused: self.counts[REFUSED].load(Ordering::Relaxed),
        }
    }
}
