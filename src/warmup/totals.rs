//! The decision counters behind [`Totals`].

use super::snapshot::Totals;
use crate::sync::Striped;

const ADMITTED: usize = 0;
const REFUSED: usize = 1;
const OFFERED: usize = 2;

/// How many decisions admitted and refused, and how many requests a layer offered to the bucket
/// first, striped by thread.
#[derive(Debug)]
pub(crate) struct Counters(Striped<3>);

impl Counters {
    pub(crate) fn new() -> Self {
        Counters(Striped::new())
    }

    /// Counts a decision and returns it.
    #[inline]
    pub(crate) fn count<T, E>(&self, decision: Result<T, E>) -> Result<T, E> {
        self.0
            .add(if decision.is_ok() { ADMITTED } else { REFUSED }, 1);
        decision
    }

    /// Counts a request offered to the bucket first.
    #[cfg(feature = "tower")]
    #[inline]
    pub(crate) fn offered(&self) {
        self.0.add(OFFERED, 1);
    }

    /// The totals now.
    pub(crate) fn get(&self) -> Totals {
        Totals {
            admitted: self.0.sum(ADMITTED),
            refused: self.0.sum(REFUSED),
            offered: self.0.sum(OFFERED),
        }
    }
}
