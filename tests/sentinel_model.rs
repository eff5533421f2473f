//! Differential test: `SentinelWarmUp` against an independent, deliberately plain model
//! of Sentinel's Java `WarmUpController` and the statistics it reads
//! (`tests/support/sentinel_model.rs`), on random configurations and random traffic.
//!
//! A cold start is driven from an epoch-like origin, where Java itself starts cold; a warm start
//! (`start_warm(true)`) from origin 0, where Java starts warm. Every decision and every token
//! count must agree.

#[path = "support/sentinel_model.rs"]
mod sentinel_model;

use std::time::Duration;

use admit::ConfigError;
use admit::clock::ManualClock;
use admit::warmup::sentinel::SentinelWarmUp;
use proptest::prelude::*;
use sentinel_model::{SentinelModel, T0};

#[test]
fn the_model_reproduces_the_reference_vectors() {
    sentinel_model::self_check();
    sentinel_model::self_check_extra();
}

/// Exactly the configurations whose cold limit is below one request per second are refused
/// (including those where `c / f` is exactly 1 but the truncated constants put the cold limit
/// below 1), and on each of them Java never warms up: it admits nothing, forever, except where
/// `W = 0 < M` (`(int)(P·c) < f − 1` and `(int)(2·P·c / (1 + f)) ≥ 1`): there its first sync
/// lands in the dead zone at `W`, the tokens stay 0 and it admits the full rate from the first
/// second on. (`W = M = 0` gives NaN limits: nothing.)
#[test]
fn refused_configurations_are_those_on_which_java_admits_nothing_or_never_warms_up() {
    let mut refused_at_exactly_one = Vec::new();
    let mut full_rate = Vec::new();
    for cold_factor in 2..=6 {
        for rate in 1..=60 {
            for period_secs in 1..=30 {
                let model = SentinelModel::new(f64::from(rate), period_secs, cold_factor);
                let cold_limit = model.threshold(model.max_token());
                let dead = cold_limit.is_nan() || cold_limit < 1.0;
                let built = SentinelWarmUp::builder(f64::from(rate))
                    .warm_up_period(Duration::from_secs(period_secs as u64))
                    .cold_factor(cold_factor as u32)
                    .build();
                assert_eq!(built.is_err(), dead, "{rate}/{period_secs}/{cold_factor}");
                if rate < cold_factor {
                    assert!(dead, "{rate}/{period_secs}/{cold_factor}");
                }
                if dead {
                    assert!(
                        matches!(built, Err(ConfigError::ColdRateBelowOne { .. })),
                        "{rate}/{period_secs}/{cold_factor}"
                    );
                    let config = (rate, period_secs, cold_factor);
                    let never_warms = model.warning_token() == 0 && model.max_token() > 0;
                    // Integer rates: `(int)(P·c) < f − 1` and `(int)(2·P·c / (1 + f)) ≥ 1`, i.e.
                    // `2·P·c ≥ f + 1`.
                    let by_formula = period_secs * rate < cold_factor - 1
                        && 2 * period_secs * rate > cold_factor;
                    assert_eq!(never_warms, by_formula, "{config:?}");
                    let mut model = model;
                    let (passes, tokens) = sentinel_model::saturate(&mut model, T0, 5);
                    if never_warms {
                        assert_eq!(passes, [i64::from(rate); 5], "full rate: {config:?}");
                        assert_eq!(tokens, [0; 5], "warm from the start: {config:?}");
                        full_rate.push(config);
                    } else {
                        assert_eq!(passes, [0; 5], "Java admits nothing: {config:?}");
                    }
                    if rate >= cold_factor {
                        assert_eq!(rate, cold_factor, "only c / f = 1 is affected");
                        assert_eq!(passes[..3], [0, 0, 0], "Java admits nothing");
                        refused_at_exactly_one.push(config);
                    }
                }
            }
        }
    }
    assert!(
        refused_at_exactly_one.contains(&(5, 7, 5)),
        "{refused_at_exactly_one:?}"
    );
    full_rate.sort_unstable();
    assert_eq!(
        full_rate,
        [(1, 3, 5), (1, 4, 6), (2, 2, 6), (3, 1, 5), (4, 1, 6)],
        "rate, period, factor"
    );
}

/// 3 rps / 1 s / factor 5: `W = (int)3 / 4 = 0`, so Java's first sync lands in the dead zone
/// and it admits 3 per second from the start, with no warm-up. admit refuses it: its cold limit
/// is 0.6 per second.
#[test]
fn three_per_second_factor_five_never_warms_up_in_java_and_is_refused() {
    let mut model = SentinelModel::new(3.0, 1, 5);
    assert_eq!((model.warning_token(), model.max_token()), (0, 1));
    let (passes, tokens) = sentinel_model::saturate(&mut model, T0, 10);
    assert_eq!(passes, [3; 10]);
    assert_eq!(tokens, [0; 10]);
    assert_eq!(
        SentinelWarmUp::builder(3.0)
            .warm_up_period(Duration::from_secs(1))
            .cold_factor(5)
            .build()
            .unwrap_err(),
        ConfigError::ColdRateBelowOne {
            permits_per_second: 3.0,
            cold_factor: 5,
            cold_limit: 0.6,
        }
    );
}

/// A warm-started limiter on a clock from 0 (Java, from 0, starts warm).
fn warm_sentinel(
    rate: f64,
    period_secs: u64,
    cold_factor: u32,
    clock: &ManualClock,
) -> SentinelWarmUp<ManualClock> {
    SentinelWarmUp::builder(rate)
        .warm_up_period(Duration::from_secs(period_secs))
        .cold_factor(cold_factor)
        .start_warm(true)
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// Java's `canPass` syncs the tokens on every call, whatever `acquireCount`, so a call for 0
/// permits changes what later calls get. 4 rps / 2 s / factor 3 (`W` = 4, `M` = 8), warm start.
#[test]
fn a_zero_permit_call_syncs_the_tokens_as_in_java() {
    let clock = ManualClock::new();
    let limiter = warm_sentinel(4.0, 2, 3, &clock);
    let mut model = SentinelModel::new(4.0, 2, 3);
    // Second 1's sync refills 0 → 4 = W.
    clock.set(Duration::from_millis(1600));
    assert!(model.call(1600, 0));
    assert_eq!(limiter.try_acquire_n(0), Ok(()));
    assert_eq!(model.stored_tokens(), 4);
    // Second 2's sync finds exactly W: the dead zone refills nothing, the limit stays 4.
    // (Without second 1's sync it would refill 0 → 8 = M, cold: a limit of 4 / 3.)
    clock.set(Duration::from_millis(2001));
    assert!(model.call(2001, 2));
    assert_eq!(limiter.try_acquire_n(2), Ok(()));
    assert_eq!(model.stored_tokens(), 4);
    assert_eq!(limiter.snapshot().stored_tokens, 4.0);
}

/// Java refuses even 0 permits while the rolling window holds more passes than the limit:
/// early in a second whose sync raised the tokens (lowered the limit) below the previous half
/// second's passes. 5 rps / 2 s / factor 4 (`W` = 3, `M` = 7), warm start.
#[test]
fn a_zero_permit_call_is_refused_while_the_window_is_over_the_limit_as_in_java() {
    let clock = ManualClock::new();
    let limiter = warm_sentinel(5.0, 2, 4, &clock);
    let mut model = SentinelModel::new(5.0, 2, 4);
    let mut call = |ms: u64, n: u32| {
        clock.set(Duration::from_millis(ms));
        let expected = model.call(ms as i64, i64::from(n));
        let result = limiter.try_acquire_n(n);
        assert_eq!(result.is_ok(), expected, "{n} at {ms} ms");
        (result, model.stored_tokens())
    };
    assert_eq!(call(0, 3), (Ok(()), 0));
    // Second 1: 0 + 5 − 3 = 2 tokens, below W: the full rate, 5.
    assert_eq!(call(1500, 3), (Ok(()), 2));
    // Second 2: 2 + 5 − 3 = 4 tokens, a limit of 2.86, below the 3 passes of 1.5–2 s.
    let (refused, tokens) = call(2000, 0);
    assert_eq!(tokens, 4);
    assert_eq!(
        refused.unwrap_err().retry_after(),
        Some(Duration::from_millis(500))
    );
    assert!(call(2499, 0).0.is_err());
    // Those passes leave the window at 2.5 s.
    assert_eq!(call(2500, 0), (Ok(()), 4));
    assert_eq!(call(2500, 2), (Ok(()), 4));
}

#[derive(Clone, Debug)]
struct Config {
    rate: f64,
    period_secs: u32,
    cold_factor: u32,
    start_warm: bool,
}

fn config() -> impl Strategy<Value = Config> {
    let rate = prop_oneof![
        (3u32..60).prop_map(f64::from),
        (60u32..5000).prop_map(f64::from),
        (30u32..2000).prop_map(|tenths| f64::from(tenths) / 10.0),
    ];
    (rate, 1u32..=30, 2u32..=6, prop::bool::weighted(0.25))
        .prop_map(|(rate, period_secs, cold_factor, start_warm)| Config {
            rate,
            period_secs,
            cold_factor,
            start_warm,
        })
        .prop_filter("the cold rate must be at least 1", |c| {
            c.rate / f64::from(c.cold_factor) >= 1.0
        })
        .prop_filter("the configuration must be accepted", |c| {
            SentinelWarmUp::builder(c.rate)
                .warm_up_period(Duration::from_secs(u64::from(c.period_secs)))
                .cold_factor(c.cold_factor)
                .build()
                .is_ok()
        })
}

/// A call: how many milliseconds after the previous one, and how many permits (0 included:
/// Java's `canPass` syncs the tokens whatever the count).
fn call() -> impl Strategy<Value = (u64, u32)> {
    let gap = prop_oneof![
        8 => Just(0u64),
        20 => 1u64..5,
        6 => 5u64..120,
        3 => 400u64..1200,
        1 => 1200u64..15_000,
        1 => Just(500u64),
        1 => Just(1000u64),
        1 => 55_000u64..70_000,
    ];
    let permits = prop_oneof![6 => Just(1u32), 1 => Just(0u32), 2 => 2u32..6, 1 => 6u32..400];
    (gap, permits)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn every_decision_and_token_count_matches_java(
        config in config(),
        calls in proptest::collection::vec(call(), 1..600),
    ) {
        let origin = if config.start_warm { 0 } else { T0 };
        let clock = ManualClock::new();
        clock.set(Duration::from_millis(origin as u64));
        let limiter = SentinelWarmUp::builder(config.rate)
            .warm_up_period(Duration::from_secs(u64::from(config.period_secs)))
            .cold_factor(config.cold_factor)
            .start_warm(config.start_warm)
            .clock(clock.clone())
            .build()
            .unwrap();
        let mut model = SentinelModel::new(config.rate, config.period_secs as i32, config.cold_factor as i32);
        prop_assert_eq!(limiter.curve().warning_tokens(), model.warning_token() as f64);
        prop_assert_eq!(limiter.curve().max_tokens(), model.max_token() as f64);
        prop_assert_eq!(limiter.curve().slope(), model.slope());

        let mut now_ms = origin;
        for (i, (gap, permits)) in calls.into_iter().enumerate() {
            now_ms += gap as i64;
            clock.set(Duration::from_millis(now_ms as u64));
            let expected = model.call(now_ms, i64::from(permits));
            let admitted = limiter.try_acquire_n(permits).is_ok();
            prop_assert_eq!(admitted, expected, "call {} at {} ms for {}", i, now_ms - origin, permits);
            let snapshot = limiter.snapshot();
            prop_assert_eq!(snapshot.stored_tokens, model.stored_tokens() as f64, "tokens after call {}", i);
            prop_assert_eq!(snapshot.qps_limit, model.threshold(model.stored_tokens()));
        }
    }
}

/// Sentinel's dead zone, kept for parity: with exactly `W` tokens neither branch of
/// `coolDownTokens` refills, so a limiter that goes idle at `W` stays warm until traffic moves
/// its tokens off `W`.
#[test]
fn an_idle_limiter_resting_exactly_at_the_warning_level_stays_warm() {
    let clock = ManualClock::new();
    clock.set(Duration::from_millis(T0 as u64));
    let limiter = SentinelWarmUp::builder(10.0)
        .clock(clock.clone())
        .build()
        .unwrap();
    let mut model = SentinelModel::new(10.0, 10, 3);
    let mut now = T0;
    // TV-11 for 12 seconds: the sync at the start of second 12 lands exactly on W = 50.
    for _ in 0..12_000 {
        clock.set(Duration::from_millis(now as u64));
        assert_eq!(limiter.try_acquire().is_ok(), model.call(now, 1));
        now += 1;
    }
    // Second 12's only call asks for more than can ever pass: it syncs, but nothing passes.
    clock.set(Duration::from_millis(now as u64));
    assert!(limiter.try_acquire_n(11).is_err());
    assert!(!model.call(now, 11));
    assert_eq!(model.stored_tokens(), 50);
    // A minute of idleness later both still hold exactly W: warm, not cold.
    now += 60_000;
    clock.set(Duration::from_millis(now as u64));
    assert!(limiter.try_acquire().is_ok());
    assert!(model.call(now, 1));
    assert_eq!(model.stored_tokens(), 50);
    let snapshot = limiter.snapshot();
    assert_eq!(snapshot.stored_tokens, 50.0);
    assert_eq!(snapshot.phase, admit::warmup::Phase::Warm);
}
