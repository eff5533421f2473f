//! `CoarseClock::shared` hands out one clock (one refreshing thread) while a clone is alive,
//! and starts a new one after the last is dropped.
//!
//! Alone in its file (and so its own process): it counts the process's threads.
#![cfg(target_os = "linux")]

use admit::clock::{Clock, CoarseClock};

#[path = "support/clock_threads.rs"]
mod clock_threads;

use clock_threads::{clock_threads, eventually};

#[test]
fn one_shared_clock_while_a_clone_lives() {
    assert!(eventually(|| clock_threads() == 0));
    let a = CoarseClock::shared();
    let b = CoarseClock::shared();
    assert_eq!(a.resolution_nanos(), 1_000_000);
    assert_eq!(b.resolution_nanos(), 1_000_000);
    assert!(eventually(|| clock_threads() == 1), "one thread for both");
    // It ticks, and both read the same time.
    let first = a.now_nanos();
    assert!(eventually(|| a.now_nanos() > first));
    let (x, y) = (a.now_nanos(), b.now_nanos());
    assert!(y >= x && y - x <= 1_000_000_000, "{x} then {y}");

    drop((a, b));
    assert!(
        eventually(|| clock_threads() == 0),
        "the thread outlived its clocks"
    );
    let _c = CoarseClock::shared();
    assert!(
        eventually(|| clock_threads() == 1),
        "a new clock after the last one died"
    );
}
