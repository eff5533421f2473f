//! Benchmarks for `admit`; run them with `cargo bench -p admit-benches`. This library holds what
//! the benchmark files share.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use admit::clock::CoarseClock;

/// Runs `call` `iters` times on each of two threads at once and returns the wall time: with
/// criterion's `iter_custom`, the time per call per thread under contention.
pub fn on_two_threads(iters: u64, call: &(dyn Fn() -> bool + Sync)) -> Duration {
    let start_line = Barrier::new(3);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                start_line.wait();
                for _ in 0..iters {
                    black_box(call());
                }
            });
        }
        start_line.wait();
        Instant::now()
    })
    .elapsed()
}

/// A coarse clock ticking every millisecond.
pub fn coarse_clock() -> CoarseClock {
    CoarseClock::start(Duration::from_millis(1)).expect("clock thread")
}
