//! A value alone on a cache line.

use std::ops::Deref;

/// A value of up to 64 bytes alone on a 64-byte cache line: the second half of a 128-byte block
/// (the unit some processors prefetch in pairs of lines) whose first half is left empty.
///
/// In the second half rather than the first, so that its address bits differ from those of
/// the decision counters' [stripes](super::Striped), which start at 128-byte boundaries.
#[derive(Debug)]
#[repr(C, align(128))]
pub(crate) struct Line<T> {
    _first_half: [u8; 64],
    value: T,
}

impl<T> Line<T> {
    pub(crate) fn new(value: T) -> Self {
        const { assert!(size_of::<T>() <= 64) };
        Line {
            _first_half: [0; 64],
            value,
        }
    }
}

impl<T> Deref for Line<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}
