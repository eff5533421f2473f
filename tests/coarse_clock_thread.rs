//! A `CoarseClock`'s refreshing thread ends once the last clone is dropped, parked or not.
//!
//! Alone in its file (and so its own process), its tests one at a time: they count the
//! process's threads.
#![cfg(target_os = "linux")]

use std::time::Duration;

use admit::clock::CoarseClock;

#[path = "support/clock_threads.rs"]
mod clock_threads;

use clock_threads::{clock_threads, eventually};

/// The voluntary context switches (wake-ups) of the process's one refreshing thread so far.
fn clock_thread_wakeups() -> u64 {
    let task = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| Some(task.ok()?.path()))
        .find(|task| {
            std::fs::read_to_string(task.join("comm"))
                .is_ok_and(|comm| comm.trim_end() == "admit-coarse-cl")
        })
        .expect("a refreshing thread");
    std::fs::read_to_string(task.join("status"))
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|count| count.trim().parse().ok())
        .unwrap()
}

/// Polls until `count` clock threads exist; returns the last count seen.
fn wait_for_clock_threads(count: usize) -> usize {
    eventually(|| clock_threads() == count);
    clock_threads()
}

/// Each test holds it: both count the process's threads.
static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn the_refreshing_thread_exits_after_the_last_clone_is_dropped() {
    let _alone = ALONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
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

#[test]
fn a_parked_thread_exits_when_the_last_clone_is_dropped() {
    let _alone = ALONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let clock = CoarseClock::start(Duration::from_millis(1)).unwrap();
    assert_eq!(wait_for_clock_threads(1), 1);
    // Unread, it parks: no wake-up in 20 ticks.
    assert!(
        eventually(|| {
            let before = clock_thread_wakeups();
            std::thread::sleep(Duration::from_millis(20));
            clock_thread_wakeups() == before
        }),
        "the unread clock kept waking"
    );
    drop(clock);
    assert_eq!(
        wait_for_clock_threads(0),
        0,
        "the parked thread outlived its clock"
    );
}
