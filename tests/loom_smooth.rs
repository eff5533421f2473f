//! Model-checks the default warm-up bucket (`WarmUp`, Guava's smooth model) with loom: the
//! schedule's compare-and-swap, the stored permits' write after it and the curve's sequence
//! lock, in every interleaving of the real implementation's atomics.
//!
//! Run with `RUSTFLAGS="--cfg admit_loom" cargo test --release --test loom_smooth` (see
//! `.ci/run`).
#![cfg(admit_loom)]

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use admit::clock::ManualClock;
use admit::warmup::WarmUp;
use loom::sync::Arc;
use loom::thread;

/// A warm 10 rps limiter with exact spacing: one permit every 100 ms.
fn warm_ten_per_second() -> (ManualClock, Arc<WarmUp<ManualClock>>) {
    let clock = ManualClock::new();
    let limiter = WarmUp::builder(10.0)
        .burst(Duration::ZERO)
        .start_warm(true)
        .clock(clock.clone())
        .build()
        .unwrap();
    (clock, Arc::new(limiter))
}

/// Two threads call `try_acquire` at once; how many were admitted.
fn admitted_by_two_racers(limiter: &Arc<WarmUp<ManualClock>>) -> u32 {
    let racers: Vec<_> = (0..2)
        .map(|_| {
            let limiter = Arc::clone(limiter);
            thread::spawn(move || limiter.try_acquire().is_ok())
        })
        .collect();
    racers
        .into_iter()
        .map(|racer| u32::from(racer.join().unwrap()))
        .sum()
}

#[test]
fn racing_callers_at_one_instant_admit_exactly_one() {
    loom::model(|| {
        let (_clock, limiter) = warm_ten_per_second();
        assert_eq!(admitted_by_two_racers(&limiter), 1);
    });
}

#[test]
fn a_refusal_racing_an_admission_never_loses_the_admission() {
    loom::model(|| {
        let (clock, limiter) = warm_ten_per_second();
        limiter.try_acquire().unwrap();
        // 100 ms later exactly one more permit is due; two callers race for it while the
        // state carries the refusal's demand mark.
        clock.advance(Duration::from_millis(50));
        assert!(limiter.try_acquire().is_err());
        clock.advance(Duration::from_millis(50));
        assert_eq!(admitted_by_two_racers(&limiter), 1);
    });
}

#[test]
fn a_rate_change_is_seen_whole_or_not_at_all() {
    // How many explored executions read the old curve and the new one: both must occur, or
    // the reader never overlapped the write and the test proves nothing.
    static OLD: AtomicUsize = AtomicUsize::new(0);
    static NEW: AtomicUsize = AtomicUsize::new(0);
    loom::model(|| {
        let (_clock, limiter) = warm_ten_per_second();
        let before = limiter.curve();
        let writer = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.set_rate(1000.0).unwrap())
        };
        // The reader is a thread of its own: read right after the spawn, in the spawning
        // thread, one load of the curve's version was never preceded by the writer in loom's
        // exploration (one execution, the old curve).
        let reader = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.curve())
        };
        let seen = reader.join().unwrap();
        writer.join().unwrap();
        let after = limiter.curve();
        assert_eq!(after.permits_per_second(), 1000.0);
        assert!(seen == before || seen == after, "a torn curve: {seen:?}");
        let counter = if seen == before { &OLD } else { &NEW };
        counter.fetch_add(1, Ordering::Relaxed);
    });
    let (old, new) = (OLD.load(Ordering::Relaxed), NEW.load(Ordering::Relaxed));
    assert!(
        old > 0 && new > 0,
        "old curve read {old} times, new {new} times"
    );
}

/// Two cold admissions racing inside the burst both spend a stored permit: whichever order
/// their level writes land in, and even when one priced its request with the level from
/// before the other, neither spend is lost.
#[test]
fn racing_admissions_lose_no_spend() {
    // When the next requests are due, per explored execution: the second admission priced on
    // the level after the first, or on the one before it (4 ms apart). Both must occur.
    static DUE: Mutex<BTreeSet<Duration>> = Mutex::new(BTreeSet::new());
    loom::model(|| {
        let clock = ManualClock::new();
        let limiter = Arc::new(WarmUp::builder(10.0).clock(clock.clone()).build().unwrap());
        limiter.try_acquire().unwrap();
        assert_eq!(admitted_by_two_racers(&limiter), 2);
        let snapshot = limiter.snapshot();
        let spent = snapshot.max_tokens - snapshot.stored_tokens;
        assert!((spent - 3.0).abs() < 1e-9, "{spent} permits spent, not 3");
        let due = limiter.reserve(10, Duration::MAX).unwrap();
        DUE.lock().unwrap().insert(due);
    });
    let due = DUE.lock().unwrap();
    assert_eq!(due.len(), 2, "one pricing explored, not both: {due:?}");
}
