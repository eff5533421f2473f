//! A `Shedder`'s default clock is the operating system's monotonic clock: building and using
//! one starts no thread, so an idle process stays idle.
//!
//! Alone in its file (and so its own process): it counts the process's threads.
#![cfg(target_os = "linux")]

use admit::shed::Shedder;
use admit::signal::cpu::ManualCpu;

/// How many threads the process has now.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn the_default_clock_starts_no_thread() {
    let before = threads();
    let shedder = Shedder::builder().cpu(ManualCpu::new(0)).build().unwrap();
    let permit = shedder.allow().unwrap();
    permit.pass();
    assert_eq!(
        threads(),
        before,
        "building and using a shedder started a thread"
    );
    let _exact: &Shedder<admit::clock::MonotonicClock> = &shedder;
}
