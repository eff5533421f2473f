//! The atomics the crate's lock-free state is built from.
//!
//! Normal builds use `std`. Built with `RUSTFLAGS="--cfg admit_loom"`, the same code runs on
//! loom's model-checked atomics, so `tests/loom_warmup.rs` explores every interleaving of the
//! real implementation rather than of a copy.

#[cfg(admit_loom)]
pub(crate) use loom::sync::Arc;
#[cfg(admit_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[cfg(not(admit_loom))]
pub(crate) use std::sync::Arc;
#[cfg(not(admit_loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
