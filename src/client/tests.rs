use std::time::Duration;

use super::{RetryBudget, Throttle, ThrottleSnapshot, ThrottleTotals};
use crate::ConfigError;
use crate::clock::ManualClock;
use crate::criticality::Criticality::{self, Critical, CriticalPlus, Sheddable, SheddablePlus};

fn throttle(clock: &ManualClock) -> Throttle<ManualClock> {
    Throttle::builder()
        .window(Duration::from_secs(10), 10)
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// Sends `n` requests, the backend accepting them or not; how many were sent.
fn send(throttle: &Throttle<ManualClock>, n: u32, accepting: bool) -> u32 {
    let mut sent = 0;
    for _ in 0..n {
        if throttle.try_send().is_ok() {
            sent += 1;
            if accepting {
                throttle.accepted();
            } else {
                throttle.refused();
            }
        }
    }
    sent
}

#[test]
fn nothing_is_refused_while_the_backend_accepts_everything() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    for _ in 0..50 {
        assert_eq!(send(&throttle, 100, true), 100);
        clock.advance(Duration::from_millis(300));
    }
    assert_eq!(throttle.snapshot().probability, 0.0);
}

#[test]
fn the_probability_is_the_sre_books() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    // 100 tried, 20 accepted: (100 − 2·20) / 101.
    for i in 0..100 {
        if i < 20 {
            throttle.accepted();
        } else {
            throttle.refused();
        }
    }
    let ThrottleSnapshot {
        requests,
        accepts,
        probability,
    } = throttle.snapshot();
    assert_eq!((requests, accepts), (100, 20));
    assert!((probability - 60.0 / 101.0).abs() < 1e-12, "{probability}");
}

#[test]
fn an_overloaded_backend_is_sent_about_k_times_what_it_accepts() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    // The client tries 100 requests each 100 ms; the backend accepts 25 of them at most.
    let mut sent = Vec::new();
    for _ in 0..300 {
        let mut in_slice = 0;
        for _ in 0..100 {
            if throttle.try_send().is_ok() {
                in_slice += 1;
                if in_slice <= 25 {
                    throttle.accepted();
                } else {
                    throttle.refused();
                }
            }
        }
        sent.push(in_slice);
        clock.advance(Duration::from_millis(100));
    }
    // Once the window is full: (100 − 2·25) / 100 refused, 50 sent per slice.
    let settled = &sent[100..];
    let mean = f64::from(settled.iter().sum::<u32>()) / settled.len() as f64;
    assert!((45.0..55.0).contains(&mean), "{mean}: {sent:?}");
}

#[test]
fn refusals_end_once_the_overload_has_left_the_window() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    send(&throttle, 1_000, false);
    assert!(throttle.snapshot().probability > 0.99);
    // The backend accepts again; the overload's epoch leaves the window 10 s after it began.
    clock.advance(Duration::from_millis(9_999));
    assert!(throttle.snapshot().probability > 0.99);
    clock.advance(Duration::from_millis(1));
    assert_eq!(throttle.snapshot().probability, 0.0);
    assert_eq!(send(&throttle, 100, true), 100);
}

#[test]
fn a_request_refused_here_counts_as_tried_and_one_in_flight_not_yet() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    // A burst at start-up: 100 sent, no answer yet.
    assert!((0..100).all(|_| throttle.try_send().is_ok()));
    assert_eq!(throttle.snapshot().requests, 0);
    for _ in 0..100 {
        throttle.refused();
    }
    let refused_here = (0..1_000).filter(|_| throttle.try_send().is_err()).count();
    let sent = 1_000 - refused_here;
    assert!(sent < 20, "{sent}");
    // Those sent are still in flight: the refused ones count.
    assert_eq!(throttle.snapshot().requests, 100 + refused_here as u64);
    let error = loop {
        if let Err(error) = throttle.try_send() {
            break error;
        }
    };
    assert!(error.probability() > 0.99);
    assert!(error.to_string().contains("throttled locally"), "{error}");
}

#[test]
fn bad_settings_are_typed_errors() {
    let build = |window: Duration, buckets: u32, k: f64| {
        Throttle::builder()
            .window(window, buckets)
            .k(k)
            .build()
            .unwrap_err()
    };
    let s = Duration::from_secs(1);
    assert!(matches!(
        build(s, 0, 2.0),
        ConfigError::TooFewBuckets { min: 1, .. }
    ));
    assert!(matches!(
        build(s * 100_000, 1 << 17, 2.0),
        ConfigError::TooManyBuckets { .. }
    ));
    assert!(matches!(
        build(s, 2_000, 2.0),
        ConfigError::BucketTooShort { .. }
    ));
    for k in [0.5, f64::NAN, f64::INFINITY] {
        let error = build(s, 10, k);
        assert!(
            matches!(error, ConfigError::MultiplierOutOfRange { .. }),
            "{error}"
        );
        assert_eq!(error.setting(), "k");
    }
    assert!(matches!(
        build(Duration::MAX, 1, 2.0),
        ConfigError::DurationTooLong { .. }
    ));
    assert_eq!(
        Throttle::builder().name("").build().unwrap_err(),
        ConfigError::EmptyName
    );
}

#[test]
fn totals_count_every_attempt_and_refusal_by_class_and_outlive_the_window() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    assert_eq!(throttle.totals(), ThrottleTotals::default());
    // Sent while nothing is refused: `try_send` counts as critical.
    assert_eq!(send(&throttle, 10, true), 10);
    assert!((0..5).all(|_| throttle.try_send_as(Sheddable).is_ok()));
    let totals = throttle.totals();
    assert_eq!(totals.attempts(Critical), 10);
    assert_eq!(totals.attempts(Sheddable), 5);
    assert!(
        Criticality::ALL
            .iter()
            .all(|&class| totals.throttled(class) == 0)
    );
    // An overload: most attempts are refused here, each counted once in its class.
    for _ in 0..1_000 {
        throttle.refused();
    }
    let refused = |class: Criticality| {
        (0..100)
            .filter(|_| throttle.try_send_as(class).is_err())
            .count() as u64
    };
    let (sheddable, critical_plus) = (refused(Sheddable), refused(CriticalPlus));
    assert!(
        sheddable > 90 && critical_plus > 90,
        "{sheddable} {critical_plus}"
    );
    let totals = throttle.totals();
    assert_eq!(totals.attempts(Sheddable), 105);
    assert_eq!(totals.throttled(Sheddable), sheddable);
    assert_eq!(totals.attempts(CriticalPlus), 100);
    assert_eq!(totals.throttled(CriticalPlus), critical_plus);
    assert_eq!(
        (totals.attempts(SheddablePlus), totals.throttled(Critical)),
        (0, 0)
    );
    let sum = |count: &dyn Fn(Criticality) -> u64| {
        Criticality::ALL.iter().map(|&c| count(c)).sum::<u64>()
    };
    assert_eq!(sum(&|class| totals.attempts(class)), 215);
    assert_eq!(
        sum(&|class| totals.throttled(class)),
        sheddable + critical_plus
    );
    // The window forgets; the totals do not.
    clock.advance(Duration::from_secs(60));
    assert_eq!(throttle.snapshot().requests, 0);
    assert_eq!(throttle.totals(), totals);
}

#[test]
fn a_retry_budget_totals_deposits_and_withdrawals_by_class() {
    let clock = ManualClock::new();
    let budget = RetryBudget::builder()
        .ratio(0.5)
        .floor_per_second(0.0)
        .window(Duration::from_secs(10), 10)
        .name("api")
        .clock(clock.clone())
        .build()
        .unwrap();
    assert!(format!("{budget:?}").contains("\"api\""));
    for _ in 0..4 {
        budget.deposit();
    }
    budget.deposit_as(Sheddable);
    budget.deposit_as(Sheddable);
    // Six requests at 0.5: three retries, then none.
    assert!(budget.try_withdraw_as(Sheddable));
    assert!(budget.try_withdraw());
    assert!(budget.try_withdraw());
    assert!(!budget.try_withdraw_as(Sheddable));
    assert!(!budget.try_withdraw());
    let totals = budget.totals();
    assert_eq!(
        (totals.requests(Critical), totals.requests(Sheddable)),
        (4, 2)
    );
    assert_eq!((totals.spent(Critical), totals.spent(Sheddable)), (2, 1));
    assert_eq!((totals.denied(Critical), totals.denied(Sheddable)), (1, 1));
    assert_eq!(totals.requests(CriticalPlus), 0);
    // The window forgets; the totals do not.
    clock.advance(Duration::from_secs(60));
    assert_eq!(budget.snapshot().requests, 0);
    assert_eq!(budget.totals(), totals);
    assert_eq!(
        RetryBudget::builder().name("").build().unwrap_err(),
        ConfigError::EmptyName
    );
}
