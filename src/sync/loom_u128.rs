//! A 128-bit atomic for loom, which has none: the word under a loom mutex, so every load and
//! compare-and-swap is one atomic step of the model (as `cmpxchg16b` or `casp` is on
//! hardware), interleaved with the model's other atomics in every order loom explores.

use std::fmt;

use loom::sync::Mutex;

use super::Ordering;

pub(crate) struct AtomicU128(Mutex<u128>);

impl AtomicU128 {
    pub(crate) fn new(value: u128) -> Self {
        AtomicU128(Mutex::new(value))
    }

    pub(crate) fn load(&self, _order: Ordering) -> u128 {
        *self.0.lock().expect("never poisoned")
    }

    pub(crate) fn compare_exchange_weak(
        &self,
        current: u128,
        new: u128,
        _success: Ordering,
        _failure: Ordering,
    ) -> Result<u128, u128> {
        let mut word = self.0.lock().expect("never poisoned");
        if *word == current {
            *word = new;
            Ok(current)
        } else {
            Err(*word)
        }
    }
}

impl fmt::Debug for AtomicU128 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AtomicU128")
    }
}
