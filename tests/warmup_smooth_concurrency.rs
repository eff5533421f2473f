//! `WarmUp` under contention: threads racing for permits on a shared manual clock get
//! exactly the configured spacing, no more and no fewer admissions, in both payment styles.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use admit::clock::ManualClock;
use admit::warmup::{Payment, WarmUp};

/// Three threads take permits as fast as they can from a warm 1000/s limiter for one simulated
/// second. Simulated time moves in 50 µs steps, each only after the takers have made attempts,
/// so every millisecond's permit is contended and then taken.
fn racing_for_one_second(payment: Payment) -> u64 {
    let clock = ManualClock::new();
    let limiter = WarmUp::builder(1000.0)
        .burst(Duration::ZERO)
        .payment(payment)
        .start_warm(true)
        .clock(clock.clone())
        .build()
        .unwrap();
    let done = AtomicBool::new(false);
    let admitted = AtomicU64::new(0);
    let attempts = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| {
                while !done.load(Ordering::Acquire) {
                    if limiter.try_acquire().is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                    attempts.fetch_add(1, Ordering::Release);
                }
            });
        }
        for _ in 0..20_000 {
            // Each taker may finish one attempt that read the clock before the last step; a
            // fourth attempt counted after this point must have read it after.
            let target = attempts.load(Ordering::Acquire) + 4;
            while attempts.load(Ordering::Acquire) < target {
                std::hint::spin_loop();
            }
            clock.advance(Duration::from_micros(50));
        }
        // The last step's permit, if any, is taken before the count is read.
        let target = attempts.load(Ordering::Acquire) + 4;
        while attempts.load(Ordering::Acquire) < target {
            std::hint::spin_loop();
        }
        done.store(true, Ordering::Release);
    });
    admitted.into_inner()
}

#[test]
fn racing_threads_get_exactly_the_rate() {
    // Paying now: one at time 0, then one per millisecond up to and including 1 s.
    assert_eq!(racing_for_one_second(Payment::Now), 1001);
    // Paying later: the same schedule.
    assert_eq!(racing_for_one_second(Payment::Later), 1001);
}
