//! The queue-delay gate: the reference vectors for folly's CoDel (through a transcription of
//! folly's rule) and for admit's grid-aligned gate with CoDel's test (hot share 1), the default
//! share's resistance to a few requests that jump the queue, its readings and settings, and a
//! property against a plain model of the grid rule at several shares. (The counts within an
//! interval, threads racing within one, and the target's strictness are unit tests in
//! `src/signal/queue/gate_tests.rs`.)

#[path = "support/folly_codel.rs"]
mod folly_codel;

use std::time::Duration;

use admit::ConfigError;
use admit::signal::queue::QueueGate;
use admit::signal::{Arrival, Cause, OverloadSignal, Pressure};
use folly_codel::FollyCodel;
use proptest::prelude::*;

const MS: u64 = 1_000_000;

/// folly's `check`: records the wait of a request deciding at `now`, and whether the gate
/// refuses it.
fn check(gate: &QueueGate, now: u64, sojourn: u64) -> bool {
    gate.assess(
        &Arrival::new()
            .at(now)
            .with_wait(Duration::from_nanos(sojourn)),
    )
    .refuses()
}

/// Records the wait of a request deciding at `now`, and whether the gate is then hot.
fn observe(gate: &QueueGate, now: u64, sojourn: u64) -> bool {
    gate.assess(
        &Arrival::new()
            .at(now)
            .with_wait(Duration::from_nanos(sojourn)),
    )
    .cause()
    .is_some()
}

/// Whether the gate reads hot at `now` (overloaded by the queue).
fn is_hot(gate: &QueueGate, now: u64) -> bool {
    gate.pressure(now).cause() == Some(Cause::Queue)
}

/// A sojourn given in (possibly fractional) milliseconds, in ns.
fn ms(value: f64) -> u64 {
    (value * 1e6).round() as u64
}

fn folly() -> FollyCodel {
    FollyCodel::new(5 * MS, 100 * MS)
}

/// The gate with CoDel's own test (every wait above the target), which the reference's
/// vectors describe.
fn gate() -> QueueGate {
    QueueGate::builder().hot_share(1.0).build().unwrap()
}

/// `(t ms, sojourn ms)` calls, their verdicts (`true`: shed).
fn run_folly(calls: &[(f64, f64)]) -> Vec<bool> {
    let mut codel = folly();
    calls
        .iter()
        .map(|&(t, sojourn)| codel.overloaded(ms(sojourn), ms(t)))
        .collect()
}

fn run_gate(calls: &[(f64, f64)]) -> Vec<bool> {
    let gate = gate();
    calls
        .iter()
        .map(|&(t, sojourn)| check(&gate, ms(t), ms(sojourn)))
        .collect()
}

const BASIC: [(f64, f64); 5] = [
    (110.0, 100.0),
    (200.0, 50.0),
    (200.0, 50.0),
    (310.0, 2.0),
    (400.0, 20.0),
];

const IDLE: [(f64, f64); 8] = [
    (1.0, 40.0),
    (50.0, 40.0),
    (150.0, 40.0),
    (160.0, 40.0),
    (10160.0, 0.0),
    (10170.0, 30.0),
    (10260.0, 30.0),
    (10270.0, 30.0),
];

/// Every 20 ms from t = 20, sojourn 1 ms up to and including t = 300, then 30 ms, to t = 600.
fn onset() -> Vec<(f64, f64)> {
    (1..=30)
        .map(|i| {
            let t = f64::from(i) * 20.0;
            (t, if t <= 300.0 { 1.0 } else { 30.0 })
        })
        .collect()
}

fn first_shed(verdicts: &[bool], calls: &[(f64, f64)]) -> Option<f64> {
    verdicts.iter().position(|&shed| shed).map(|i| calls[i].0)
}

#[test]
fn folly_basic() {
    assert_eq!(run_folly(&BASIC), [false, false, true, false, true]);
}

#[test]
fn folly_onset_sheds_first_at_540() {
    let calls = onset();
    assert_eq!(first_shed(&run_folly(&calls), &calls), Some(540.0));
}

#[test]
fn folly_target_is_strict() {
    assert_eq!(
        run_folly(&[(1.0, 5.0), (101.0, 5.0), (102.0, 20.0)]),
        [false, false, false]
    );
    assert_eq!(
        run_folly(&[
            (1.0, 5.000001),
            (102.0, 5.000001),
            (103.0, 10.0),
            (104.0, 10.000001)
        ]),
        [false, false, false, true]
    );
}

#[test]
fn folly_idle() {
    assert_eq!(
        run_folly(&IDLE),
        [false, false, true, false, false, true, true, false]
    );
}

#[test]
fn folly_load() {
    for (sojourn, load) in [
        (0.0, 0),
        (2.0, 20),
        (7.0, 70),
        (9.999999, 99),
        (10.0, 100),
        (40.0, 100),
    ] {
        let mut codel = folly();
        codel.overloaded(ms(sojourn), ms(1.0));
        assert_eq!(codel.load(), load, "{sojourn} ms");
    }
}

#[test]
fn gate_basic() {
    assert_eq!(run_gate(&BASIC), [false, true, true, false, false]);
}

#[test]
fn gate_onset_sheds_every_request_from_500() {
    let calls = onset();
    let verdicts = run_gate(&calls);
    assert_eq!(first_shed(&verdicts, &calls), Some(500.0));
    for (&(t, _), &shed) in calls.iter().zip(&verdicts) {
        assert_eq!(shed, t >= 500.0, "t = {t}");
    }
}

#[test]
fn gate_idle() {
    assert_eq!(
        run_gate(&IDLE),
        [false, false, true, true, false, false, false, false]
    );
}

/// tokio runs the task its I/O driver woke last first, so a few fresh requests jump a backlog
/// of any length: with them, CoDel's test never sees a standing queue, the default share does.
#[test]
fn a_few_requests_that_jump_the_queue_do_not_hold_the_default_gate_cold() {
    let codel = gate();
    let shared = QueueGate::default(); // hot share 0.9
    // Interval 1: 60 requests waited 200 ms, 1 in 20 of them jumped the queue (1 ms).
    for i in 0..60u64 {
        let sojourn = if i % 20 == 7 { ms(1.0) } else { ms(200.0) };
        for gate in [&codel, &shared] {
            gate.record(100 * MS + i * MS, sojourn);
        }
    }
    assert!(
        !observe(&codel, 200 * MS, ms(200.0)),
        "CoDel: one short wait is enough"
    );
    assert!(
        observe(&shared, 200 * MS, ms(200.0)),
        "57 of 60 waited long"
    );
    assert!(check(&shared, 201 * MS, ms(30.0)));
}

/// The share is inclusive: 9 waits of 10 above the target is hot at the default 0.9, one fewer
/// is not.
#[test]
fn the_hot_share_is_inclusive() {
    for (above, hot) in [(9u64, true), (8, false)] {
        let gate = QueueGate::default();
        for i in 0..10u64 {
            let sojourn = if i < above { ms(6.0) } else { ms(5.0) };
            gate.record(100 * MS + i * MS, sojourn);
        }
        gate.record(200 * MS, 0);
        assert_eq!(is_hot(&gate, 200 * MS), hot, "{above} of 10 above");
    }
    let gate = QueueGate::builder().hot_share(0.25).build().unwrap();
    for i in 0..4u64 {
        gate.record(100 * MS + i * MS, if i == 0 { ms(9.0) } else { 0 });
    }
    gate.record(200 * MS, 0);
    assert!(is_hot(&gate, 200 * MS), "1 of 4 at share 0.25");
}

#[test]
fn gate_configuration() {
    let invalid = |target: u64, interval: u64| {
        matches!(
            QueueGate::new(
                Duration::from_millis(target),
                Duration::from_millis(interval)
            ),
            Err(ConfigError::QueueTargetOutOfRange { .. })
        )
    };
    assert!(invalid(0, 100));
    assert!(invalid(100, 100));
    assert!(invalid(200, 100));
    assert!(!invalid(99, 100));
    // The target floors every reading's limit; a hot reading hints one interval.
    let gate = QueueGate::new(Duration::from_millis(10), Duration::from_secs(1)).unwrap();
    let floor = Pressure::CALM.with_limit_floor(Duration::from_millis(10));
    assert_eq!(gate.pressure(0), floor);
    gate.record(500 * MS, 20 * MS);
    gate.record(1_000 * MS, 20 * MS);
    assert_eq!(
        gate.pressure(1_000 * MS),
        Pressure::overloaded(Cause::Queue)
            .with_retry_after(Duration::from_secs(1))
            .with_limit_floor(Duration::from_millis(10))
    );
    let late = gate.assess(
        &Arrival::new()
            .at(1_500 * MS)
            .with_wait(Duration::from_nanos(20 * MS + 1)),
    );
    assert_eq!(
        late,
        Pressure::refuse(Cause::QueueDelay)
            .with_retry_after(Duration::from_secs(1))
            .with_limit_floor(Duration::from_millis(10)),
        "more than twice the target"
    );
    assert!(
        !check(&gate, 1_500 * MS, 20 * MS),
        "twice the target is not late"
    );
    let error = QueueGate::new(Duration::ZERO, Duration::from_millis(100)).unwrap_err();
    assert_eq!(error.setting(), "target");
    for share in [0.0, -0.5, 1.000_001, f64::NAN, f64::INFINITY] {
        let error = QueueGate::builder().hot_share(share).build().unwrap_err();
        assert!(
            matches!(error, ConfigError::HotShareOutOfRange { hot_share } if hot_share.to_bits() == share.to_bits()),
            "{share}: {error:?}"
        );
        assert_eq!(error.setting(), "hot_share");
    }
    // A tiny share counts as one part per million: one late wait of a thousand is hot, none
    // is cold.
    for late in [1u64, 0] {
        let tiny = QueueGate::builder().hot_share(1e-12).build().unwrap();
        for i in 0..1_000u64 {
            let sojourn = if i < late { 6 * MS } else { MS };
            tiny.record(100 * MS + i * 1_000, sojourn);
        }
        tiny.record(200 * MS, 0);
        assert_eq!(is_hot(&tiny, 200 * MS), late == 1, "{late} late");
    }
}

/// The grid rule in plain words, over the samples of one run: hot in interval `e` iff
/// interval `e − 1` had samples, at least `share` of them above the target, and a sample of
/// interval `e` has been recorded (the gate learns of a new interval from its first sample).
fn model_hot(samples: &[(u64, u64)], now: u64, share: f64, target: u64, interval: u64) -> bool {
    let e = now / interval;
    if e == 0 || !samples.iter().any(|&(t, _)| t / interval == e) {
        return false;
    }
    let before: Vec<u64> = samples
        .iter()
        .filter(|&&(t, _)| t / interval == e - 1)
        .map(|&(_, sojourn)| sojourn)
        .collect();
    let above = before.iter().filter(|&&sojourn| sojourn > target).count();
    !before.is_empty() && above as f64 >= share * before.len() as f64
}

proptest! {
    /// With samples in time order, the gate is hot exactly when the model says, so never
    /// without at least the hot share of an interval's sojourns above the target before it
    /// (at share 1, a whole interval of them).
    #[test]
    fn the_gate_is_hot_only_after_an_interval_above_target(
        steps in proptest::collection::vec((0u64..60, 0u64..20), 1..300),
        share in prop_oneof![Just(1.0), Just(0.5), Just(0.9), Just(0.25)],
    ) {
        let gate = QueueGate::builder().hot_share(share).build().unwrap();
        let mut now = 0;
        let mut samples = Vec::new();
        for (advance, sojourn_ms) in steps {
            now += advance * MS;
            let sojourn = sojourn_ms * MS / 2;
            samples.push((now, sojourn));
            let shed = check(&gate, now, sojourn);
            let hot = model_hot(&samples, now, share, 5 * MS, 100 * MS);
            prop_assert_eq!(is_hot(&gate, now), hot, "t = {} ns", now);
            prop_assert_eq!(shed, hot && sojourn > 10 * MS);
        }
    }
}
