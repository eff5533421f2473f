//! A `CoarseClock`'s refreshing thread ends once the last clone is dropped.
//!
//! Alone in its file (and so its own process): it counts the process's threads.
#![cfg(target_os = "linux")]

use std::time::{Duration, Instant};

use admit::clock::CoarseClock;

/// The refreshing thread's name as `/proc` shows it: `comm` is truncated to 15 bytes.
const NAME: &str = "admit-coarse-cl";

fn clock_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == NAME)
        .count()
}

/// Polls, for at most 10 s, until `count` clock threads exist; returns the last count seen.
fn wait_for_clock_threads(count: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = clock_threads();
        if seen == count || Instant::now() >= deadline {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
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
