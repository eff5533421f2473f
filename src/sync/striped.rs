//! Counters striped by thread, written without a locked instruction: the warm-up buckets'
//! decision totals and the shedder's service time.
//!
//! A thread claims one of [`SLOTS`] process-wide slots at its first count and keeps it until
//! it exits; in every set of counters, the stripe of that slot is written by that thread alone,
//! so a count is a plain load and store (no read-modify-write, no cache line shared with
//! another thread). The release of a slot at thread exit happens before the next claim of it,
//! so the next owner continues from the last count: the sums stay exact. Threads beyond
//! [`SLOTS`] alive at once share one more stripe, counted with an atomic add.
//!
//! Claiming a slot registers its release as a thread-local destructor, once per thread (the
//! platform may allocate for that registration; counts after it never do).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering as StdOrdering};

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU64, Ordering};

/// Slots a thread can own: stripes written without a locked instruction. Under loom every
/// thread counts on the shared stripe, so one slot keeps the model's state small.
const SLOTS: usize = if cfg!(admit_loom) { 1 } else { 31 };
/// The stripe threads without a slot share: the last of a power-of-two count, so that a
/// stripe index masked with `STRIPES - 1` needs no bounds check.
const SHARED: usize = SLOTS;
const STRIPES: usize = SLOTS + 1;
/// Not claimed yet.
const UNCLAIMED: usize = usize::MAX;

/// Which slots are owned by a live thread.
static CLAIMED: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];

thread_local! {
    /// This thread's slot: an index below [`SLOTS`], [`SHARED`], or [`UNCLAIMED`].
    static SLOT: Cell<usize> = const { Cell::new(UNCLAIMED) };
    /// Releases this thread's slot when the thread exits.
    static RELEASE: SlotRelease = const { SlotRelease };
}

/// Gives the thread's slot back at thread exit.
struct SlotRelease;

impl Drop for SlotRelease {
    fn drop(&mut self) {
        let slot = SLOT.get();
        SLOT.set(UNCLAIMED);
        if slot < SLOTS {
            CLAIMED[slot].store(false, StdOrdering::Release);
        }
    }
}

/// This thread's stripe, claiming a slot at its first count.
#[inline]
fn stripe() -> usize {
    let slot = SLOT.get();
    if slot != UNCLAIMED {
        return slot;
    }
    claim()
}

#[cold]
fn claim() -> usize {
    // Under loom, threads are coroutines sharing one OS thread's locals: count atomically.
    if cfg!(admit_loom) {
        return SHARED;
    }
    let slot = (0..SLOTS)
        .find(|&slot| {
            CLAIMED[slot]
                .compare_exchange(false, true, StdOrdering::Acquire, StdOrdering::Relaxed)
                .is_ok()
        })
        .unwrap_or(SHARED);
    // Registers the release (a thread already past its locals' destruction keeps `SHARED`).
    if slot < SLOTS && RELEASE.try_with(|_| ()).is_err() {
        CLAIMED[slot].store(false, StdOrdering::Release);
        SLOT.set(SHARED);
        return SHARED;
    }
    SLOT.set(slot);
    slot
}

/// `N` counters, striped by thread: statistics, ordered with nothing else, and exact once the
/// stripes are summed.
#[derive(Debug)]
pub(crate) struct Striped<const N: usize> {
    stripes: [CachePadded<[AtomicU64; N]>; STRIPES],
}

impl<const N: usize> Striped<N> {
    pub(crate) fn new() -> Self {
        Striped {
            stripes: std::array::from_fn(|_| {
                CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0)))
            }),
        }
    }

    /// Adds `value` to counter `index` (below `N`) on this thread's stripe.
    #[inline]
    pub(crate) fn add(&self, index: usize, value: u64) {
        let stripe = stripe() & (STRIPES - 1);
        Self::bump(&self.stripes[stripe][index], stripe, value);
    }

    /// Two [`add`](Self::add)s on this thread's stripe, found once.
    #[inline]
    pub(crate) fn add_two(&self, (first, a): (usize, u64), (second, b): (usize, u64)) {
        let stripe = stripe() & (STRIPES - 1);
        let counters = &self.stripes[stripe];
        Self::bump(&counters[first], stripe, a);
        Self::bump(&counters[second], stripe, b);
    }

    #[inline]
    fn bump(counter: &AtomicU64, stripe: usize, value: u64) {
        if stripe == SHARED {
            counter.fetch_add(value, Ordering::Relaxed);
        } else {
            // Only this thread writes this stripe.
            counter.store(
                counter.load(Ordering::Relaxed).wrapping_add(value),
                Ordering::Relaxed,
            );
        }
    }

    /// Counter `index` now: the sum over the stripes (wrapping at 2^64, like each stripe).
    pub(crate) fn sum(&self, index: usize) -> u64 {
        self.stripes
            .iter()
            .map(|stripe| stripe[index].load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use super::{SLOTS, Striped};

    /// More threads than slots, in waves, some outliving others: every count lands
    /// once, whichever stripe it went to.
    #[test]
    fn stripes_sum_exactly() {
        let counters = Striped::<2>::new();
        let mut expected_refused = 0;
        for wave in 0..3u64 {
            std::thread::scope(|scope| {
                for thread in 0..(SLOTS as u64 + 8) {
                    let counters = &counters;
                    scope.spawn(move || {
                        for i in 0..500u64 {
                            let refused = (i + thread + wave) % 3 == 0;
                            counters.add(usize::from(refused), 1);
                        }
                    });
                }
            });
            expected_refused += (0..(SLOTS as u64 + 8))
                .map(|t| (0..500u64).filter(|i| (i + t + wave) % 3 == 0).count() as u64)
                .sum::<u64>();
        }
        assert_eq!(
            counters.sum(0) + counters.sum(1),
            3 * (SLOTS as u64 + 8) * 500
        );
        assert_eq!(counters.sum(1), expected_refused);
    }
}
