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

use admit::clock::ManualClock;
use admit::warmup::sentinel::SentinelWarmUp;
use proptest::prelude::*;
use sentinel_model::{SentinelModel, T0};

#[test]
fn the_model_reproduces_the_reference_vectors() {
    sentinel_model::self_check();
    sentinel_model::self_check_extra();
}

/// Exactly the configurations on which Java can never admit a request are refused, including
/// those where `c / f` is exactly 1 but the truncated constants put the cold limit below 1.
#[test]
fn refused_configurations_are_exactly_javas_dead_ones() {
    let mut refused_at_exactly_one = Vec::new();
    for cold_factor in 2..=6 {
        for rate in cold_factor..=60 {
            for period_secs in 1..=30 {
                let model = SentinelModel::new(f64::from(rate), period_secs, cold_factor);
                let dead = model.threshold(model.max_token()) < 1.0;
                let built = SentinelWarmUp::builder(f64::from(rate))
                    .warm_up_period(Duration::from_secs(period_secs as u64))
                    .cold_factor(cold_factor as u32)
                    .build();
                assert_eq!(built.is_err(), dead, "{rate}/{period_secs}/{cold_factor}");
                if dead {
                    assert_eq!(rate, cold_factor, "only c / f = 1 is affected");
                    let mut model = model;
                    let (passes, _) = sentinel_model::saturate(&mut model, T0, 3);
                    assert_eq!(passes, [0, 0, 0], "Java admits nothing");
                    refused_at_exactly_one.push((rate, period_secs, cold_factor));
                }
            }
        }
    }
    assert!(
        refused_at_exactly_one.contains(&(5, 7, 5)),
        "{refused_at_exactly_one:?}"
    );
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

/// A call: how many milliseconds after the previous one, and how many permits.
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
    let permits = prop_oneof![6 => Just(1u32), 2 => 2u32..6, 1 => 6u32..400];
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
