//! Every invalid warm-up configuration is a typed error naming the setting, never a panic.

use std::time::Duration;

use admit::ConfigError;
use admit::clock::ManualClock;
use admit::warmup::AcquireError;
use admit::warmup::sentinel::SentinelWarmUp;

fn build(rate: f64, period: Duration, cold_factor: u32) -> Result<(), ConfigError> {
    SentinelWarmUp::builder(rate)
        .warm_up_period(period)
        .cold_factor(cold_factor)
        .build()
        .map(drop)
}

const TEN_SECONDS: Duration = Duration::from_secs(10);

#[test]
fn rates_must_be_finite_and_positive() {
    for rate in [0.0, -0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let err = build(rate, TEN_SECONDS, 3).unwrap_err();
        assert!(
            matches!(err, ConfigError::InvalidRate { permits_per_second } if permits_per_second.to_bits() == rate.to_bits()),
            "{rate}: {err:?}"
        );
        assert_eq!(err.setting(), "permits_per_second");
        assert!(err.to_string().contains("`permits_per_second`"), "{err}");
    }
}

#[test]
fn rates_beyond_the_window_counter_are_refused() {
    let err = build(2e9, Duration::from_secs(1), 3).unwrap_err();
    assert_eq!(
        err,
        ConfigError::RateTooHigh {
            permits_per_second: 2e9,
            max: 1_073_741_822.0
        }
    );
    // The largest accepted rate builds and admits.
    let limiter = SentinelWarmUp::builder(1_073_741_822.0)
        .warm_up_period(Duration::from_secs(1))
        .build()
        .unwrap();
    assert!(limiter.try_acquire().is_ok());
    assert!(limiter.try_acquire_n(limiter.curve().capacity()).is_err());
}

#[test]
fn cold_factor_must_be_at_least_two() {
    for cold_factor in [0, 1] {
        let err = build(100.0, TEN_SECONDS, cold_factor).unwrap_err();
        assert_eq!(
            err,
            ConfigError::ColdFactorTooSmall {
                cold_factor: f64::from(cold_factor),
                min: 2.0
            }
        );
        assert_eq!(err.setting(), "cold_factor");
    }
    assert!(build(100.0, TEN_SECONDS, 2).is_ok());
}

#[test]
fn warm_up_period_must_be_whole_positive_seconds() {
    let err = build(100.0, Duration::ZERO, 3).unwrap_err();
    assert_eq!(err, ConfigError::ZeroWarmUpPeriod);
    assert_eq!(err.setting(), "warm_up_period");
    for period in [
        Duration::from_millis(1500),
        Duration::from_nanos(1),
        Duration::from_millis(999),
    ] {
        let err = build(100.0, period, 3).unwrap_err();
        assert_eq!(
            err,
            ConfigError::FractionalWarmUpPeriod {
                warm_up_period: period
            }
        );
        assert_eq!(err.setting(), "warm_up_period");
    }
}

#[test]
fn token_counts_must_fit_javas_int_arithmetic() {
    let cases = [
        // M = W + (int)(2Pc / (1 + f)) = 1.5·10⁹ + 10⁹ beyond 2³¹: Java would wrap the sum
        (1.5e8, 10, 2),
        // P · c beyond 2³¹, although M would fit: Java would saturate W silently
        (1e9, 3, 3),
        (1e6, 10_000, 10),
        (3e6, 1_000, 50),
        (1e8, 100, 20),
        // 2 · P beyond 2³¹ (Java wraps `2 * warmUpPeriodInSec`)
        (10.0, 1 << 30, 3),
        (2.0, (i32::MAX / 2 + 1) as u64, 2),
        // periods whose doubling overflows 64 bits
        (10.0, 1 << 62, 3),
        (10.0, i64::MAX as u64, 3),
        (100.0, u64::MAX, 3),
    ];
    for (rate, secs, cold_factor) in cases {
        let period = Duration::from_secs(secs);
        let err = build(rate, period, cold_factor).unwrap_err();
        assert_eq!(
            err,
            ConfigError::TokenOverflow {
                permits_per_second: rate,
                warm_up_period: period
            },
            "{rate} × {secs} s, factor {cold_factor}"
        );
        assert_eq!(err.setting(), "permits_per_second × warm_up_period");
    }
    // Inside the limits: P · c = 10⁹ and M = 5·10⁸ + 5·10⁸ = 10⁹, both below 2³¹.
    let curve = SentinelWarmUp::builder(1e9)
        .warm_up_period(Duration::from_secs(1))
        .build()
        .unwrap()
        .curve();
    assert_eq!(curve.warning_tokens(), 5e8);
    assert_eq!(curve.max_tokens(), 1e9);
    // Long periods are fine while the products fit.
    assert!(build(3.0, Duration::from_secs(100_000_000), 3).is_ok());
}

#[test]
fn the_first_invalid_setting_is_reported() {
    assert!(matches!(
        build(f64::NAN, Duration::ZERO, 0).unwrap_err(),
        ConfigError::InvalidRate { .. }
    ));
    assert_eq!(
        build(100.0, Duration::ZERO, 0).unwrap_err(),
        ConfigError::ColdFactorTooSmall {
            cold_factor: 0.0,
            min: 2.0
        }
    );
}

#[test]
fn every_message_names_its_setting() {
    let errors = [
        build(-1.0, TEN_SECONDS, 3).unwrap_err(),
        build(2e9, TEN_SECONDS, 3).unwrap_err(),
        build(100.0, TEN_SECONDS, 1).unwrap_err(),
        build(100.0, Duration::ZERO, 3).unwrap_err(),
        build(100.0, Duration::from_millis(10), 3).unwrap_err(),
        build(1e6, Duration::from_secs(10_000), 3).unwrap_err(),
        build(2.0, TEN_SECONDS, 3).unwrap_err(),
    ];
    for err in errors {
        let message = err.to_string();
        for name in err
            .setting()
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        {
            if !name.is_empty() {
                assert!(message.contains(&format!("`{name}`")), "{message}");
            }
        }
    }
}

#[test]
fn every_accepted_configuration_admits_every_second() {
    // Exhaustive over small rates and factors: whatever `build` accepts admits at least one
    // request in each of its first, coldest seconds, so no accepted limiter is dead.
    for cold_factor in 2..=8u32 {
        for rate in 1..=120u32 {
            let clock = ManualClock::new();
            let Ok(limiter) = SentinelWarmUp::builder(f64::from(rate))
                .cold_factor(cold_factor)
                .clock(clock.clone())
                .build()
            else {
                assert!(rate < cold_factor, "{rate}/{cold_factor} refused");
                continue;
            };
            for second in 0..3 {
                let admitted = (0..100)
                    .filter(|_| {
                        let admitted = limiter.try_acquire().is_ok();
                        clock.advance(Duration::from_millis(10));
                        admitted
                    })
                    .count();
                assert!(
                    admitted >= 1,
                    "{rate}/{cold_factor}: nothing in second {second}"
                );
            }
        }
    }
}

#[test]
fn acquiring_more_than_the_capacity_is_a_distinct_error() {
    let limiter = SentinelWarmUp::builder(10.5).build().unwrap();
    assert_eq!(limiter.curve().capacity(), 10);
    let err = limiter.try_acquire_n(11).unwrap_err();
    assert_eq!(
        err,
        AcquireError::ExceedsCapacity {
            requested: 11,
            capacity: 10
        }
    );
    assert_eq!(err.retry_after(), None);
    assert_eq!(limiter.try_acquire_n(0), Ok(()));
    assert_eq!(limiter.snapshot().window_passes, 0);
}
