//! A global allocator that counts, per thread, the heap allocations the code under test makes.
//!
//! A test binary installs it with
//!
//! ```
//! use admit_testkit::counting_alloc::CountingAllocator;
//!
//! #[global_allocator]
//! static ALLOCATOR: CountingAllocator = CountingAllocator;
//! # fn main() {
//! # assert_eq!(admit_testkit::counting_alloc::allocations_during(|| ()), 0);
//! # }
//! ```
//!
//! and measures with [`allocations_during`]. Counting per thread keeps the test harness's own
//! threads (and background threads such as a clock or CPU sampler) out of the count.
// `GlobalAlloc` is an unsafe trait; the workspace denies unsafe code everywhere else.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting this thread's allocations and reallocations; declare it as
/// the test binary's `#[global_allocator]`.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: allocations during thread teardown, after the counter is gone, are not ours.
    let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
}

// SAFETY: forwards every call unchanged to the system allocator; only counts.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Heap allocations made by this thread while `f` runs. Checks first that counting works.
///
/// # Panics
///
/// If [`CountingAllocator`] is not the binary's global allocator.
pub fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    drop(std::hint::black_box(Box::new(1u64)));
    assert_eq!(
        ALLOCATIONS.with(Cell::get),
        before + 1,
        "the allocator does not count"
    );
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

#[cfg(test)]
mod tests {
    use super::*;

    // The kit's unit tests measure with the allocator they test.
    #[global_allocator]
    static ALLOCATOR: CountingAllocator = CountingAllocator;

    #[test]
    fn counts_this_threads_allocations() {
        let allocations = allocations_during(|| {
            let mut numbers = std::hint::black_box(Vec::<u64>::with_capacity(1));
            numbers.push(1);
            numbers.push(2);
        });
        assert_eq!(allocations, 2, "one allocation, one reallocation");
    }

    #[test]
    fn other_threads_are_not_counted() {
        let spawn = |work: fn()| {
            allocations_during(|| {
                std::thread::scope(|scope| {
                    scope.spawn(work);
                });
            })
        };
        // The first spawn may allocate for one-time set-up.
        spawn(|| ());
        let spawning = spawn(|| ());
        let allocating = spawn(|| drop(std::hint::black_box(vec![1u64; 64])));
        assert_eq!(
            allocating, spawning,
            "the vector on the other thread is not counted"
        );
    }
}
