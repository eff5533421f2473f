//! A 128-bit atomic for loom, which has none: a word under loom's mutex, so the model checks
//! every interleaving of the operations on it, each one indivisible.

use loom::sync::Mutex;

use super::Ordering;

/// `portable_atomic::AtomicU128`'s operations the crate uses, sequentially consistent.
#[derive(Debug)]
pub(crate) struct AtomicU128(Mutex<u128>);

impl AtomicU128 {
    pub(crate) fn new(value: u128) -> Self {
        AtomicU128(Mutex::new(value))
    }

    pub(crate) fn load(&self, _order: Ordering) -> u128 {
        *self.0.lock().unwrap()
    }

    pub(crate) fn compare_exchange_weak(
        &self,
        current: u128,
        new: u128,
        _success: Ordering,
        _failure: Ordering,
    ) -> Result<u128, u128> {
        let mut word = self.0.lock().unwrap();
        if *word == current {
            *word = new;
            Ok(current)
        } else {
            Err(*word)
        }
    }
}
