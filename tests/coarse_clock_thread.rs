//! A `CoarseClock`'s refreshing thread ends once the last clone is dropped.
//!
//! Alone in its file (and so its own process): it counts the process's threads.
#![cfg(target_os = "linux")]

use std::time::Duration;

use admit::clock::CoarseClock;

#[path = "support/clock_threads.rs"]
mod clock_threads;

use clock_threads::{clock_threads, eventually};

/// Polls until `count` clock threads exist; returns the last count seen.
fn wait_for_clock_threads(count: usize) -> usize {
    eventually(|| clock_threads() == count);
    clock_threads()
}

#[test]
fn the_refreshing_thread_exits_after_the_last_clone_is_dropped() {
    assert_eq!(wait_for_clock_threads(0), 0);
    let clock = CoarseClock::start(Duration::from_millis(1)).unwrap();
    let clone = clock.clone();
    assert_eq!(wait_for_clock_threads(1), 1, "clones share one thread");
    drop(clock);
    // Give a wrongly exiting thread many ticks to do so.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(clock_threads(), 1, "a clone is still alive");
    drop(clone);
    assert_eq!(
        wait_for_clock_threads(0),
        0,
        "the thread outlived its clock"
    );
}
