//! The atomics the crate's lock-free state is built from.
//!
//! Normal builds use `std`. Built with `RUSTFLAGS="--cfg loom"`, the same code runs on loom's
//! model-checked atomics, so `tests/loom_warmup.rs` explores every interleaving of the real
//! implementation rather than of a copy.

#[cfg(loom)]
pub(crate) use loom::sync::Arc;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};

#[cfg(not(loom))]
pub(crate) use std::sync::Arc;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
