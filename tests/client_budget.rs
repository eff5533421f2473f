//! The retry budget on the manual clock: it never allows a retry that takes its window past
//! its ratio of the requests plus its floor, it allows up to that, and spent retries leave
//! with the window.

use std::time::Duration;

use admit::ConfigError;
use admit::client::RetryBudget;
use admit::clock::ManualClock;
use proptest::prelude::*;

fn budget(clock: &ManualClock, ratio: f64, floor: f64) -> RetryBudget<ManualClock> {
    RetryBudget::builder()
        .ratio(ratio)
        .floor_per_second(floor)
        .window(Duration::from_secs(10), 10)
        .clock(clock.clone())
        .build()
        .unwrap()
}

#[test]
fn the_floor_lets_a_quiet_client_retry_and_leaves_with_the_window() {
    let clock = ManualClock::new();
    let budget = budget(&clock, 0.1, 1.0);
    // No requests yet: the floor, 1 per second over 10 s.
    assert_eq!((0..100).filter(|_| budget.try_withdraw()).count(), 10);
    assert_eq!(budget.snapshot().available, 0);
    // Ten requests add one more.
    for _ in 0..10 {
        budget.deposit();
    }
    assert!(budget.try_withdraw());
    assert!(!budget.try_withdraw());
    // The spent retries leave with their bucket.
    clock.advance(Duration::from_secs(10));
    let snapshot = budget.snapshot();
    assert_eq!((snapshot.requests, snapshot.retries), (0, 0));
    assert_eq!(snapshot.available, 10);
}

#[test]
fn bad_settings_are_typed_errors() {
    for (ratio, floor, setting) in [
        (-0.1, 1.0, "ratio"),
        (f64::NAN, 1.0, "ratio"),
        (1001.0, 1.0, "ratio"),
        (0.1, -1.0, "floor_per_second"),
        (0.1, f64::INFINITY, "floor_per_second"),
        (0.1, f64::NAN, "floor_per_second"),
        (0.1, f64::MAX, "floor_per_second"),
    ] {
        let error = RetryBudget::builder()
            .ratio(ratio)
            .floor_per_second(floor)
            .build()
            .unwrap_err();
        assert!(
            matches!(error, ConfigError::BudgetOutOfRange { .. }),
            "{error}"
        );
        assert_eq!(error.setting(), setting, "{error}");
    }
    let error = RetryBudget::builder()
        .window(Duration::from_secs(1), 0)
        .build()
        .unwrap_err();
    assert!(matches!(error, ConfigError::TooFewBuckets { .. }));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn retries_never_exceed_the_ratio_plus_the_floor(
        ratio in prop_oneof![Just(0.0), Just(0.1), 0.0f64..2.0],
        floor in prop_oneof![Just(0.0), Just(1.0), 0.0f64..20.0],
        steps in prop::collection::vec((0u64..3_000, 0u32..100, 0u32..100), 1..60),
    ) {
        let clock = ManualClock::new();
        let budget = budget(&clock, ratio, floor);
        // What was deposited and withdrawn in each 1 s bucket, to check every window.
        let mut log: Vec<(u64, u64, u64)> = Vec::new();
        for (pause_ms, requests, retries) in steps {
            clock.advance(Duration::from_millis(pause_ms));
            let second = clock.now().as_secs();
            for _ in 0..requests {
                budget.deposit();
            }
            let allowed = (0..retries).filter(|_| budget.try_withdraw()).count() as u64;
            log.push((second, u64::from(requests), allowed));
            // The window holds the buckets of the last 10 s: second − 9 to second.
            let in_window = log.iter().filter(|(s, ..)| s + 10 > second);
            let (made, retried) = in_window.fold((0, 0), |(m, r), &(_, q, a)| (m + q, r + a));
            let cap = (ratio * made as f64 + floor * 10.0).floor() as u64;
            // Once allowed, a retry stays in the window after the requests that allowed it
            // have left; when it is allowed, the window is within the cap.
            if allowed > 0 {
                prop_assert!(retried <= cap, "{retried} retries for {made} requests, cap {cap}");
            }
            // And it allows up to the cap: what it refused would have passed it.
            if allowed < u64::from(retries) {
                prop_assert!(retried >= cap, "{retried} retries for {made} requests, cap {cap}");
            }
        }
    }
}
