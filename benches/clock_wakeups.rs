//! How often a `CoarseClock`'s refreshing thread wakes, and how much CPU it takes, while the
//! clock is read in a loop, left unread, and read now and then (Linux: counted from `/proc`).
//!
//! ```text
//! cargo run --release -p admit-benches --bin clock_wakeups
//! ```
//!
//! A wake-up is a voluntary context switch of the thread (`voluntary_ctxt_switches` in
//! `/proc/self/task/<tid>/status`): each time it blocks, in a sleep or parked, it is woken once.
//! Its CPU time is the first field of `/proc/self/task/<tid>/schedstat`. `MonotonicClock`,
//! every limiter's default, has no thread: no wake-ups by construction.

use std::fs;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use admit::clock::{Clock, CoarseClock};

/// The refreshing thread's name as `/proc` shows it: `comm` is truncated to 15 bytes.
const NAME: &str = "admit-coarse-cl";

/// The refreshing thread's `/proc/self/task/<tid>` directory.
fn clock_task() -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = fs::read_dir("/proc/self/task")
            .expect("/proc/self/task")
            .filter_map(|task| Some(task.ok()?.path()))
            .find(|task| {
                fs::read_to_string(task.join("comm")).is_ok_and(|comm| comm.trim_end() == NAME)
            });
        if let Some(task) = found {
            return task;
        }
        assert!(Instant::now() < deadline, "no {NAME} thread");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The thread's voluntary context switches and nanoseconds on a CPU so far.
fn sample(task: &Path) -> (u64, u64) {
    let status = fs::read_to_string(task.join("status")).expect("status");
    let switches = status
        .lines()
        .find_map(|line| line.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|count| count.trim().parse().ok())
        .expect("voluntary_ctxt_switches");
    let schedstat = fs::read_to_string(task.join("schedstat")).expect("schedstat");
    let cpu = schedstat
        .split_whitespace()
        .next()
        .and_then(|nanos| nanos.parse().ok())
        .expect("schedstat");
    (switches, cpu)
}

/// Runs `phase` and prints the thread's wake-ups per second and share of a core meanwhile.
fn measure(task: &Path, label: &str, phase: impl FnOnce()) {
    let (switches, cpu) = sample(task);
    let start = Instant::now();
    phase();
    let seconds = start.elapsed().as_secs_f64();
    let (switches_after, cpu_after) = sample(task);
    println!(
        "{label:<44} {:>8.1} wake-ups/s {:>7.3} % of a core",
        (switches_after - switches) as f64 / seconds,
        (cpu_after - cpu) as f64 / seconds / 1e7,
    );
}

/// Reads `clock` in a loop for `time`.
fn read_in_a_loop(clock: &CoarseClock, time: Duration) {
    let start = Instant::now();
    while start.elapsed() < time {
        for _ in 0..1024 {
            black_box(clock.now_nanos());
        }
    }
}

fn main() {
    let clock = CoarseClock::start(Duration::from_millis(1)).expect("clock thread");
    let task = clock_task();
    println!("CoarseClock, 1 ms resolution:");
    measure(&task, "busy: read in a loop, 1 s", || {
        read_in_a_loop(&clock, Duration::from_secs(1))
    });
    measure(&task, "idle: the first second after the last read", || {
        black_box(clock.now_nanos());
        std::thread::sleep(Duration::from_secs(1));
    });
    measure(&task, "idle: the next 2 s, still unread", || {
        std::thread::sleep(Duration::from_secs(2))
    });
    measure(&task, "sparse: one read every 250 ms, 2 s", || {
        for _ in 0..8 {
            black_box(clock.now_nanos());
            std::thread::sleep(Duration::from_millis(250));
        }
    });
    measure(&task, "busy again: read in a loop, 1 s", || {
        read_in_a_loop(&clock, Duration::from_secs(1))
    });
}
