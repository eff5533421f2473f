//! The decision counters behind [`Totals`]: striped, so threads deciding at once do not fight
//! over one cache line.

use std::cell::Cell;
use std::sync::atomic::AtomicUsize;

use crossbeam_utils::CachePadded;

use super::snapshot::Totals;
use crate::sync::{AtomicU64, Ordering};

/// How many stripes: threads are spread over them round-robin, so up to this many threads
/// count without sharing a line.
const STRIPES: usize = 8;

const ADMITTED: usize = 0;
const REFUSED: usize = 1;

/// The next stripe a thread is given.
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's stripe, `usize::MAX` until its first decision.
    static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's stripe.
#[inline]
fn stripe() -> usize {
    STRIPE.with(|stripe| {
        let mut index = stripe.get();
        if index == usize::MAX {
            index = NEXT_STRIPE.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % STRIPES;
            stripe.set(index);
        }
        index
    })
}

/// How many decisions admitted and refused, one relaxed add per decision on the calling
/// thread's stripe: the totals are statistics, ordered with nothing else, and exact once the
/// stripes are summed.
#[derive(Debug)]
pub(crate) struct Counters {
    stripes: [CachePadded<[AtomicU64; 2]>; STRIPES],
}

impl Counters {
    pub(crate) fn new() -> Self {
        Counters {
            stripes: std::array::from_fn(|_| {
                CachePadded::new([AtomicU64::new(0), AtomicU64::new(0)])
            }),
        }
    }

    /// Counts a decision and returns it.
    #[inline]
    pub(crate) fn count<T, E>(&self, decision: Result<T, E>) -> Result<T, E> {
        let which = if decision.is_ok() { ADMITTED } else { REFUSED };
        self.stripes[stripe()][which].fetch_add(1, Ordering::Relaxed);
        decision
    }

    /// The totals now: the sum over the stripes.
    pub(crate) fn get(&self) -> Totals {
        let sum = |which: usize| {
            self.stripes
                .iter()
                .map(|stripe| stripe[which].load(Ordering::Relaxed))
                .sum()
        };
        Totals {
            admitted: sum(ADMITTED),
            refused: sum(REFUSED),
        }
    }
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use super::Counters;

    /// Threads on different stripes add up exactly.
    #[test]
    fn stripes_sum_exactly() {
        let counters = Counters::new();
        std::thread::scope(|scope| {
            for thread in 0..12u64 {
                let counters = &counters;
                scope.spawn(move || {
                    for i in 0..1000u64 {
                        let _ = counters.count(if (i + thread) % 3 == 0 {
                            Err(())
                        } else {
                            Ok(())
                        });
                    }
                });
            }
        });
        let totals = counters.get();
        assert_eq!(totals.admitted + totals.refused, 12_000);
        assert_eq!(
            totals.refused,
            (0..12u64)
                .map(|t| (0..1000u64).filter(|i| (i + t) % 3 == 0).count() as u64)
                .sum::<u64>()
        );
    }
}
