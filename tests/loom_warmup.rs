//! Model-checks the lock-free window and token state of `Profile::SentinelExact` with loom:
//! every interleaving of the real implementation's atomics (and of the manual clock's).
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release --test loom_warmup` (see `.ci/run`).
#![cfg(loom)]

use std::time::Duration;

use admit::clock::ManualClock;
use admit::warmup::WarmUp;
use loom::sync::Arc;
use loom::thread;

/// 10 rps, cold: three permits fit a one-second window.
fn cold_ten_per_second() -> (ManualClock, Arc<WarmUp<ManualClock>>) {
    let clock = ManualClock::new();
    let limiter = WarmUp::builder(10.0).clock(clock.clone()).build().unwrap();
    (clock, Arc::new(limiter))
}

#[test]
fn a_late_caller_cannot_slip_into_a_window_already_counted() {
    loom::model(|| {
        let (clock, limiter) = cold_ten_per_second();
        // Two passes in the first half second; one permit of room is left in the rolling window.
        limiter.try_acquire().unwrap();
        limiter.try_acquire().unwrap();

        // One caller may still read the clock in the first half; another crosses into the
        // second half and counts the first half as its previous window.
        let late = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.try_acquire().is_ok())
        };
        let crossing = {
            let limiter = Arc::clone(&limiter);
            let clock = clock.clone();
            thread::spawn(move || {
                clock.set(Duration::from_millis(600));
                limiter.try_acquire().is_ok()
            })
        };
        let admitted = u32::from(late.join().unwrap()) + u32::from(crossing.join().unwrap());
        // Both halves form one rolling window: exactly the one remaining permit is handed out.
        assert_eq!(admitted, 1);
        assert_eq!(limiter.snapshot().window_passes, 3);
    });
}

#[test]
fn concurrent_first_callers_of_a_second_sync_the_tokens_once() {
    loom::model(|| {
        let (clock, limiter) = cold_ten_per_second();
        for _ in 0..3 {
            limiter.try_acquire().unwrap();
        }
        clock.set(Duration::from_secs(1));

        let callers: Vec<_> = (0..2)
            .map(|_| {
                let limiter = Arc::clone(&limiter);
                thread::spawn(move || limiter.try_acquire().is_ok())
            })
            .collect();
        for caller in callers {
            // 97 tokens ⇒ limit 3.47: both fit the new window.
            assert!(caller.join().unwrap());
        }
        // The three passes of second 0 were subtracted once, not once per caller.
        assert_eq!(limiter.snapshot().stored_tokens, 97.0);
        assert_eq!(limiter.snapshot().window_passes, 2);
    });
}

#[test]
fn racing_admissions_in_one_window_never_overshoot() {
    loom::model(|| {
        let (_clock, limiter) = cold_ten_per_second();
        limiter.try_acquire().unwrap();
        // Two permits of room; three callers race, one of them for two permits at once.
        let single: Vec<_> = (0..2)
            .map(|_| {
                let limiter = Arc::clone(&limiter);
                thread::spawn(move || u64::from(limiter.try_acquire().is_ok()))
            })
            .collect();
        let double = limiter.try_acquire_n(2).map_or(0, |()| 2);
        let admitted = double + single.into_iter().map(|t| t.join().unwrap()).sum::<u64>();
        assert_eq!(admitted, 2);
        assert_eq!(limiter.snapshot().window_passes, 3);
    });
}
