//! Model-checks the lock-free window and token state of `SentinelWarmUp` with loom:
//! every interleaving of the real implementation's atomics (and of the manual clock's).
//!
//! Run with `RUSTFLAGS="--cfg admit_loom" cargo test --release --test loom_sentinel`
//! (see `.ci/run`).
#![cfg(admit_loom)]

use std::time::Duration;

use admit::clock::ManualClock;
use admit::warmup::sentinel::SentinelWarmUp;
use loom::sync::Arc;
use loom::thread;

/// 10 rps, cold: three permits fit a one-second window.
fn cold_ten_per_second() -> (ManualClock, Arc<SentinelWarmUp<ManualClock>>) {
    let clock = ManualClock::new();
    let limiter = SentinelWarmUp::builder(10.0)
        .clock(clock.clone())
        .build()
        .unwrap();
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

#[test]
fn a_straggler_from_the_previous_second_cannot_slip_past_the_sync() {
    loom::model(|| {
        let (clock, limiter) = cold_ten_per_second();
        clock.set(Duration::from_millis(600));
        limiter.try_acquire().unwrap();
        limiter.try_acquire().unwrap();
        clock.set(Duration::from_millis(900));

        // A caller may still read 0.9 s; another moves into second 1, whose first call syncs the
        // tokens from the passes of second 0 and seals its windows.
        let straggler = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.try_acquire().is_ok())
        };
        let next_second = {
            let limiter = Arc::clone(&limiter);
            let clock = clock.clone();
            thread::spawn(move || {
                clock.set(Duration::from_millis(1100));
                limiter.try_acquire().is_ok()
            })
        };
        let straggler_admitted = straggler.join().unwrap();
        let next_second_admitted = next_second.join().unwrap();
        // Second 0's last half and second 1's first form one rolling window with room for one.
        assert!(straggler_admitted ^ next_second_admitted);
        assert_eq!(limiter.snapshot().window_passes, 3);
        // From 1.5 s the window holds only second 1's first half: what second 0 did not get.
        clock.set(Duration::from_millis(1600));
        let snapshot = limiter.snapshot();
        let second_zero_passes = 3 - snapshot.window_passes;
        // Whichever won, the sync subtracted exactly the passes second 0 ended with.
        assert_eq!(snapshot.stored_tokens, (100 - second_zero_passes) as f64);
    });
}
