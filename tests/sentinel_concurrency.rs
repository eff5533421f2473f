//! Concurrent callers never overshoot a window: check-and-count is one atomic step.
//!
//! The clock is frozen inside one half-second window, so the exact number of permits that fit
//! is known; threads race for them. (Window boundaries under contention are model-checked with
//! loom in `tests/loom_sentinel.rs`.)

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use admit::clock::ManualClock;
use admit::warmup::sentinel::SentinelWarmUp;

const THREADS: usize = 4;

fn frozen_limiter(rate: f64) -> Arc<SentinelWarmUp<ManualClock>> {
    let clock = ManualClock::new();
    clock.set(Duration::from_millis(1_700_000_000_100));
    Arc::new(SentinelWarmUp::builder(rate).clock(clock).build().unwrap())
}

/// Runs `attempt` from every thread at once, `per_thread` times, and returns the permits
/// admitted in total.
fn race(
    limiter: &Arc<SentinelWarmUp<ManualClock>>,
    per_thread: u32,
    attempt: fn(&SentinelWarmUp<ManualClock>, u32) -> u64,
) -> u64 {
    let barrier = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let limiter = Arc::clone(limiter);
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                (0..per_thread).map(|i| attempt(&limiter, i)).sum::<u64>()
            })
        })
        .collect();
    workers.into_iter().map(|w| w.join().unwrap()).sum()
}

#[test]
fn single_permits_fill_the_window_exactly() {
    // Cold limit 1e6 / 3 ⇒ 333 333 permits fit; 4 × 200 000 attempts race for them.
    let limiter = frozen_limiter(1e6);
    let capacity = limiter.snapshot().qps_limit.floor() as u64;
    assert_eq!(capacity, 333_333);
    let admitted = race(&limiter, 200_000, |l, _| u64::from(l.try_acquire().is_ok()));
    assert_eq!(admitted, capacity);
    assert_eq!(limiter.snapshot().window_passes, capacity);
}

#[test]
fn mixed_sizes_never_exceed_the_window() {
    let limiter = frozen_limiter(1e6);
    let capacity = limiter.snapshot().qps_limit.floor() as u64;
    let admitted = race(&limiter, 200_000, |l, i| {
        let n = i % 5 + 1;
        if l.try_acquire_n(n).is_ok() {
            u64::from(n)
        } else {
            0
        }
    });
    // Every admitted permit is counted (no lost update), none beyond the limit, and since every
    // thread keeps trying single permits long after the window is full, none is left unused.
    assert_eq!(limiter.snapshot().window_passes, admitted);
    assert_eq!(admitted, capacity);
}
