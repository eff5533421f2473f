//! Properties of `SentinelWarmUp` under random traffic on a `ManualClock`: snapshot invariants,
//! that a rejection changes nothing, and that `retry_after` is exact.

use std::time::Duration;

use admit::clock::ManualClock;
use admit::warmup::sentinel::{SentinelSnapshot, SentinelWarmUp};
use admit::warmup::{AcquireError, Phase};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Config {
    rate: f64,
    period_secs: u64,
    cold_factor: u32,
    start_warm: bool,
}

fn config() -> impl Strategy<Value = Config> {
    (
        prop_oneof![
            (3u32..200).prop_map(f64::from),
            (30u32..3000).prop_map(|t| f64::from(t) / 10.0)
        ],
        1u64..=20,
        2u32..=5,
        any::<bool>(),
    )
        .prop_map(|(rate, period_secs, cold_factor, start_warm)| Config {
            rate,
            period_secs,
            cold_factor,
            start_warm,
        })
        .prop_filter("accepted configurations only", |c| build(c).is_ok())
}

fn build(config: &Config) -> Result<SentinelWarmUp<ManualClock>, admit::ConfigError> {
    let clock = ManualClock::new();
    // Start somewhere other than zero, off a second boundary.
    clock.set(Duration::from_millis(86_400_123));
    SentinelWarmUp::builder(config.rate)
        .warm_up_period(Duration::from_secs(config.period_secs))
        .cold_factor(config.cold_factor)
        .start_warm(config.start_warm)
        .clock(clock)
        .build()
}

/// Calls: the time since the previous one (µs) and the permits asked for.
fn calls() -> impl Strategy<Value = Vec<(u64, u32)>> {
    let gap = prop_oneof![
        6 => Just(0u64),
        10 => 1u64..5_000,
        4 => 5_000u64..600_000,
        1 => 600_000u64..30_000_000,
    ];
    proptest::collection::vec(
        (
            gap,
            prop_oneof![5 => Just(1u32), 2 => 2u32..8, 1 => 8u32..300],
        ),
        1..400,
    )
}

fn check_invariants(
    limiter: &SentinelWarmUp<ManualClock>,
    s: &SentinelSnapshot,
) -> Result<(), TestCaseError> {
    let curve = limiter.curve();
    prop_assert!(s.warning_tokens < s.max_tokens);
    prop_assert!(
        0.0 <= s.stored_tokens && s.stored_tokens <= s.max_tokens,
        "{s:?}"
    );
    prop_assert_eq!(s.stored_tokens.fract(), 0.0);
    prop_assert_eq!(s.qps_limit, curve.qps_limit(s.stored_tokens));
    let cold = curve.qps_limit(curve.max_tokens());
    let warm = curve
        .qps_limit(curve.warning_tokens())
        .max(curve.permits_per_second());
    prop_assert!(
        cold >= 1.0 && cold <= s.qps_limit && s.qps_limit <= warm,
        "{s:?}"
    );
    prop_assert!(s.window_passes <= u64::from(curve.capacity()), "{s:?}");
    let expected_phase = if s.stored_tokens == s.max_tokens {
        Phase::Cold
    } else if s.stored_tokens <= s.warning_tokens {
        Phase::Warm
    } else {
        Phase::Warming
    };
    prop_assert_eq!(s.phase, expected_phase);
    prop_assert!((0.0..=1.0).contains(&s.progress()));
    prop_assert_eq!(s.progress() == 0.0, s.phase == Phase::Cold);
    prop_assert_eq!(s.progress() == 1.0, s.phase == Phase::Warm);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn snapshots_stay_consistent(config in config(), calls in calls()) {
        let limiter = build(&config).unwrap();
        check_invariants(&limiter, &limiter.snapshot())?;
        for (gap, n) in calls {
            limiter.clock().advance(Duration::from_micros(gap));
            let before = limiter.snapshot();
            let outcome = limiter.try_acquire_n(n);
            let after = limiter.snapshot();
            check_invariants(&limiter, &after)?;
            // A call never changes the tokens of the second it is made in: the snapshot
            // already shows that second's sync.
            prop_assert_eq!(before.stored_tokens, after.stored_tokens);
            match outcome {
                Ok(()) => prop_assert_eq!(after.window_passes, before.window_passes + u64::from(n)),
                Err(_) => prop_assert_eq!(after, before),
            }
        }
    }

    /// Two limiters see the same traffic; one of them also sees extra rejected calls, repeated
    /// at the instant of every rejection. Their decisions and states never diverge.
    #[test]
    fn rejections_change_no_state(config in config(), calls in calls(), repeats in 1usize..4) {
        let plain = build(&config).unwrap();
        let retried = build(&config).unwrap();
        for (gap, n) in calls {
            plain.clock().advance(Duration::from_micros(gap));
            retried.clock().advance(Duration::from_micros(gap));
            let outcome = plain.try_acquire_n(n);
            prop_assert_eq!(retried.try_acquire_n(n), outcome);
            if outcome.is_err() {
                for _ in 0..repeats {
                    prop_assert_eq!(retried.try_acquire_n(n), outcome);
                    prop_assert!(retried.try_acquire_n(n.saturating_mul(2)).is_err());
                }
            }
            prop_assert_eq!(retried.snapshot(), plain.snapshot());
        }
    }

    /// `retry_after` names the earliest instant at which the same request passes, provided no
    /// other traffic arrives and the limit in force does not change in between. Checked at up
    /// to eight rejections per case, each on a fresh limiter replaying the traffic before it.
    #[test]
    fn retry_after_is_the_earliest_instant_that_admits(config in config(), calls in calls()) {
        let replay = |upto: usize| {
            let limiter = build(&config).unwrap();
            let mut outcome = Ok(());
            for &(gap, n) in &calls[..=upto] {
                limiter.clock().advance(Duration::from_micros(gap));
                outcome = limiter.try_acquire_n(n);
            }
            (limiter, outcome)
        };
        let rejected: Vec<usize> = {
            let limiter = build(&config).unwrap();
            calls
                .iter()
                .enumerate()
                .filter(|&(_, &(gap, n))| {
                    limiter.clock().advance(Duration::from_micros(gap));
                    matches!(limiter.try_acquire_n(n), Err(AcquireError::Rejected(_)))
                })
                .map(|(i, _)| i)
                .collect()
        };
        let stride = rejected.len().div_ceil(8).max(1);
        for &index in rejected.iter().step_by(stride) {
            let (limiter, outcome) = replay(index);
            let n = calls[index].1;
            let limit = limiter.snapshot().qps_limit;
            let retry_after = match outcome {
                Err(AcquireError::Rejected(rejected)) => rejected.retry_after(),
                other => return Err(TestCaseError::fail(format!("replay diverged: {other:?}"))),
            };
            prop_assert!(retry_after > Duration::ZERO);
            limiter.clock().advance(retry_after - Duration::from_nanos(1));
            if limiter.snapshot().qps_limit == limit {
                prop_assert!(limiter.try_acquire_n(n).is_err(), "admitted before retry_after");
            }
            limiter.clock().advance(Duration::from_nanos(1));
            if limiter.snapshot().qps_limit == limit && f64::from(n) <= limit {
                prop_assert!(limiter.try_acquire_n(n).is_ok(), "rejected at retry_after");
            }
        }
    }

    /// Even when the clock jumps backwards, a snapshot taken just before a call predicts the
    /// call's decision: the limiter acts on the latest time it has seen, and so does the view.
    #[test]
    fn snapshots_predict_decisions_even_when_the_clock_goes_back(
        config in config(),
        calls in proptest::collection::vec((-2_000_000i64..3_000_000, 1u32..6), 1..300),
    ) {
        let limiter = build(&config).unwrap();
        for (jump, n) in calls {
            let clock = limiter.clock();
            let now = clock.now().as_micros() as i64;
            clock.set(Duration::from_micros((now + jump).max(0) as u64));
            let snapshot = limiter.snapshot();
            let fits = snapshot.window_passes + u64::from(n) <= snapshot.qps_limit.floor() as u64;
            prop_assert_eq!(limiter.try_acquire_n(n).is_ok(), fits, "{:?}", snapshot);
        }
    }
}
