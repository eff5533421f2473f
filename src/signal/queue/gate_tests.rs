//! The queue gate's counts within an interval, its settings, and the waits the metrics read.
//! (Its reference vectors and properties, through its public behaviour, are in
//! `tests/queue_gate.rs`.)

use std::sync::Arc;
use std::time::Duration;

use super::{COUNT_BITS, COUNT_MASK, QueueGate, QueueState, TAG_MASK, TAG_SHIFT};
use crate::signal::{Arrival, OverloadSignal};
use crate::sync::Ordering;

const MS: u64 = 1_000_000;

/// `(waits recorded, waits above the target)` so far in the interval of `now_ns`, if any were.
fn interval_waits(gate: &QueueGate, now_ns: u64) -> Option<(u64, u64)> {
    let word = gate.current.load(Ordering::Acquire);
    (word >> TAG_SHIFT == gate.interval_of(now_ns) & TAG_MASK)
        .then_some(((word >> COUNT_BITS) & COUNT_MASK, word & COUNT_MASK))
}

/// Records the wait of a request deciding at `now`, and whether the gate refuses it.
fn check(gate: &QueueGate, now: u64, sojourn: u64) -> bool {
    gate.assess(
        &Arrival::new()
            .at(now)
            .with_wait(Duration::from_nanos(sojourn)),
    )
    .refuses()
}

/// CoDel's own test: every wait above the target.
fn codel() -> QueueGate {
    QueueGate::builder().hot_share(1.0).build().unwrap()
}

#[test]
fn the_target_is_strict_and_needs_the_interval_before() {
    let gate = codel();
    // Interval 0: {5, 6}: its minimum is not above 5, so interval 1 is cold.
    assert!(!check(&gate, MS, 5 * MS));
    assert!(!check(&gate, 50 * MS, 6 * MS));
    assert_eq!(interval_waits(&gate, 60 * MS), Some((2, 1)));
    assert_eq!(
        gate.state(60 * MS),
        QueueState::Unknown,
        "interval 0 follows none"
    );
    // Interval 1: {5.000001, 10, 10.000001}: all pass, and interval 2 is hot.
    for (t, sojourn) in [(101, 5 * MS + 1), (150, 10 * MS), (199, 10 * MS + 1)] {
        assert!(!check(&gate, t * MS, sojourn), "t = {t}");
        assert_eq!(gate.state(t * MS), QueueState::Cold);
    }
    assert!(
        !check(&gate, 201 * MS, 4 * MS),
        "hot, but 4 ms is not too late"
    );
    assert_eq!(gate.state(250 * MS), QueueState::Hot);
    assert!(check(&gate, 299 * MS, 50 * MS));
    // Interval 2 held 4 ms: interval 3 is cold, and counts the 50 ms wait.
    assert!(!check(&gate, 301 * MS, 50 * MS));
    assert_eq!(gate.state(301 * MS), QueueState::Cold);
    assert_eq!(interval_waits(&gate, 302 * MS), Some((1, 1)));
    assert_eq!(
        interval_waits(&gate, 402 * MS),
        None,
        "nothing of interval 4 yet"
    );
}

/// Threads recording one interval's sojourns at once: every wait is counted, and the next
/// interval's verdict follows the true minimum (share 1), whichever thread lands first.
#[test]
fn racing_threads_keep_the_true_minimum() {
    for (low, hot) in [(6 * MS, true), (5 * MS, false), (MS, false)] {
        let gate = Arc::new(codel());
        let threads: Vec<_> = (0..4u64)
            .map(|thread| {
                let gate = Arc::clone(&gate);
                std::thread::spawn(move || {
                    for i in 0..2_000u64 {
                        let sojourn = if thread == 3 && i == 1_999 {
                            low
                        } else {
                            20 * MS + i
                        };
                        gate.record(100 * MS + i * 1_000, sojourn);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let (recorded, above) = interval_waits(&gate, 150 * MS).unwrap();
        assert_eq!(recorded, 8_000);
        assert_eq!(above, 8_000 - u64::from(low <= 5 * MS));
        gate.record(200 * MS, 0);
        let state = if hot {
            QueueState::Hot
        } else {
            QueueState::Cold
        };
        assert_eq!(gate.state(200 * MS), state, "minimum {low} ns");
    }
}

/// A million waits in one interval settle its share: counting stops short of the tag.
#[test]
fn counting_stops_at_its_bits() {
    let gate = QueueGate::default();
    let full = (COUNT_MASK << COUNT_BITS) | COUNT_MASK;
    gate.current
        .store(((1 & TAG_MASK) << TAG_SHIFT) | full, Ordering::Release);
    gate.record(150 * MS, 0);
    assert_eq!(
        interval_waits(&gate, 150 * MS),
        Some((COUNT_MASK, COUNT_MASK))
    );
    gate.record(200 * MS, 0);
    assert_eq!(
        gate.state(200 * MS),
        QueueState::Hot,
        "every counted wait was late"
    );
}

#[test]
fn the_settings_are_kept_in_nanoseconds_and_parts_per_million() {
    let gate = QueueGate::default();
    assert_eq!((gate.target_ns, gate.interval_ns), (5 * MS, 100 * MS));
    assert_eq!(gate.hot_ppm, 900_000);
    let gate = QueueGate::new(Duration::from_millis(10), Duration::from_secs(1)).unwrap();
    assert_eq!((gate.target_ns, gate.interval_ns), (10 * MS, 1_000 * MS));
    assert_eq!(codel().hot_ppm, 1_000_000);
    let tiny = QueueGate::builder().hot_share(1e-12).build().unwrap();
    assert_eq!(tiny.hot_ppm, 1, "rounded up to one part per million");
}

/// The metrics read every wait by source, and whether the gate is hot.
#[cfg(feature = "metrics")]
#[test]
fn the_snapshot_counts_the_waits_by_source() {
    use super::super::QueueStamp;

    let gate = QueueGate::default();
    gate.record(110 * MS, 3 * MS);
    gate.record(120 * MS, 40 * MS);
    assert!(!check(&gate, 130 * MS, 30 * MS));
    QueueStamp::at(140 * MS).started(&gate, 142 * MS).unwrap();
    let snapshot = gate.snapshot(150 * MS);
    assert!(!snapshot.hot);
    assert_eq!(snapshot.request.count(), 3);
    assert_eq!(
        snapshot.request.cumulative()[2],
        (Duration::from_millis(5), 1),
        "1 wait ≤ 5 ms"
    );
    assert_eq!(snapshot.request.sum(), Duration::from_millis(73));
    assert_eq!(snapshot.pool.count(), 1);
    assert_eq!(
        snapshot.pool.cumulative()[1],
        (Duration::from_micros(2_500), 1)
    );
    assert_eq!(snapshot.pool.sum(), Duration::from_millis(2));
    // Two of the interval's four waits (the pool's included) were late: cold. The next
    // interval's one wait was: hot from 300 ms.
    gate.record(200 * MS, 20 * MS);
    assert!(!gate.snapshot(200 * MS).hot);
    gate.record(300 * MS, 0);
    let snapshot = gate.snapshot(300 * MS);
    assert!(snapshot.hot);
    assert_eq!(snapshot.request.count(), 5);
    assert_eq!(snapshot.pool.count(), 1);
}
