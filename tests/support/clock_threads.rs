//! Counting a process's `CoarseClock` refreshing threads, for tests alone in their file.

use std::time::{Duration, Instant};

/// The refreshing thread's name as `/proc` shows it: `comm` is truncated to 15 bytes.
const NAME: &str = "admit-coarse-cl";

/// How many refreshing threads the process has now.
pub(crate) fn clock_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == NAME)
        .count()
}

/// Polls, for at most 10 s, until `done` holds; returns whether it did.
pub(crate) fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}
