//! Model-checks the default warm-up bucket (`WarmUp`, Guava's smooth model) with loom: the
//! state's compare-and-swap and the curve's sequence lock, in every interleaving of the real
//! implementation's atomics (the 128-bit state is one word under loom's mutex).
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

/// A warm admission (busy and empty, due as it arrives) racing `set_rate`: it passes, and the
/// next permit is due at the new rate whichever lands first (the admission's price set on the
/// old curve is re-priced, or it decides on the new curve).
#[test]
fn an_admission_racing_a_rate_change_leaves_the_new_price() {
    loom::model(|| {
        let (clock, limiter) = warm_ten_per_second();
        limiter.try_acquire().unwrap();
        clock.advance(Duration::from_millis(100));
        let writer = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.set_rate(1000.0).unwrap())
        };
        let admitted = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.try_acquire().is_ok())
        };
        assert!(admitted.join().unwrap(), "the due permit was refused");
        writer.join().unwrap();
        let wait = limiter.reserve(1, Duration::MAX).unwrap();
        assert_eq!(wait, Duration::from_millis(1));
    });
}

/// A cold 1000 rps limiter (one permit every 3 ms when cold, 400 ns cheaper per permit
/// spent) after `admissions` at time 0, inside its burst.
fn cold_after(admissions: u32) -> Arc<WarmUp<ManualClock>> {
    let limiter = WarmUp::builder(1000.0)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    for _ in 0..admissions {
        limiter.try_acquire().unwrap();
    }
    Arc::new(limiter)
}

/// Two racing cold admissions of one and `second` permits, after `before` at the same
/// instant: both must pass, and every permit must be spent. Returns when the next thousand
/// permits are due (beyond the burst, so the wait shows how the racers priced their requests).
fn race_cold_admissions(before: u32, second: u32) -> Duration {
    let limiter = cold_after(before);
    let racers: Vec<_> = [1, second]
        .into_iter()
        .map(|permits| {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.try_acquire_n(permits).is_ok())
        })
        .collect();
    for racer in racers {
        assert!(racer.join().unwrap(), "a racer was refused");
    }
    let snapshot = limiter.snapshot();
    let spent = snapshot.max_tokens - snapshot.stored_tokens;
    let expected = f64::from(before + 1 + second);
    assert!(
        (spent - expected).abs() < 1e-9,
        "{spent} permits spent, not {expected}"
    );
    limiter.reserve(1000, Duration::MAX).unwrap()
}

/// Two cold admissions racing inside the burst: no spend is lost, and the second always
/// prices its request on the level after the first.
#[test]
fn racing_admissions_lose_no_spend() {
    static DUE: Mutex<BTreeSet<Duration>> = Mutex::new(BTreeSet::new());
    loom::model(|| {
        let due = race_cold_admissions(1, 1);
        DUE.lock().unwrap().insert(due);
    });
    let due = DUE.lock().unwrap();
    assert_eq!(due.len(), 1, "a pricing on a stale level: {due:?}");
}

/// Two cold admissions of one and two permits racing inside the burst, deep into it: no
/// spend is lost, and each racer prices its request on the level the other left, so the
/// next requests are due when one of the two orders leaves them (here both orders leave the
/// same time: exact prices add up alike in either order).
#[test]
fn racing_admissions_of_different_sizes_price_on_the_level_left() {
    loom::model(|| {
        // The two orders, one after the other (under the model: the limiter's atomics are
        // loom's).
        let orders: Vec<Duration> = [[1, 2], [2, 1]]
            .into_iter()
            .map(|order| {
                let limiter = cold_after(15);
                for permits in order {
                    limiter.try_acquire_n(permits).unwrap();
                }
                limiter.reserve(1000, Duration::MAX).unwrap()
            })
            .collect();
        let due = race_cold_admissions(15, 2);
        assert!(
            orders.contains(&due),
            "{due:?} beyond the two orders' {orders:?}"
        );
    });
}
