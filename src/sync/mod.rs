//! The atomics the crate's lock-free state is built from, the one sequence lock, the counters
//! striped by thread, and a cache line for one hot word.
//!
//! Normal builds use `std`. Built with `RUSTFLAGS="--cfg admit_loom"`, the same code runs on
//! loom's model-checked atomics, so the loom tests explore every interleaving of the real
//! implementation rather than of a copy.

mod line;
mod seqlock;
mod striped;
#[cfg(admit_loom)]
mod wide;

#[cfg(admit_loom)]
pub(crate) use loom::hint::spin_loop;
#[cfg(admit_loom)]
pub(crate) use loom::sync::MutexGuard;
#[cfg(admit_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
#[cfg(admit_loom)]
pub(crate) use loom::sync::{Arc, Mutex};
#[cfg(admit_loom)]
pub(crate) use wide::AtomicU128;

#[cfg(not(admit_loom))]
pub(crate) use portable_atomic::AtomicU128;
#[cfg(not(admit_loom))]
pub(crate) use std::hint::spin_loop;
#[cfg(not(admit_loom))]
pub(crate) use std::sync::MutexGuard;
#[cfg(not(admit_loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
#[cfg(not(admit_loom))]
pub(crate) use std::sync::{Arc, Mutex};

pub(crate) use self::line::Line;
pub(crate) use self::seqlock::SeqLock;
pub(crate) use self::striped::Striped;

/// Where `SeqCst` accesses must not be reordered across each other (a store, then a load of
/// another atomic, racing the mirror image: the store-buffering pattern): a `SeqCst` fence
/// under loom, nothing otherwise.
///
/// The accesses alone suffice in the language's memory model: all `SeqCst` operations fall in
/// one total order, so of two threads that each write one atomic and then read the other, at
/// least one reads the other's write. Loom models `SeqCst` accesses as acquire/release, which
/// would allow both to read stale values; its `SeqCst` fences are modelled in full, so the
/// model checks the same guarantee through them.
#[cfg(feature = "tokio")]
#[inline(always)]
pub(crate) fn store_load_barrier() {
    #[cfg(admit_loom)]
    fence(Ordering::SeqCst);
}
