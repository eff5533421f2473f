//! Every invalid shedder configuration is a typed error naming the setting, never a panic.

use std::time::Duration;

use admit::ConfigError;
use admit::shed::Shedder;
use admit::signal::cpu::ManualCpu;

fn build(
    window: Duration,
    buckets: u32,
    cpu_threshold: u32,
    cool_off: Duration,
) -> Result<(), ConfigError> {
    Shedder::builder()
        .window(window)
        .buckets(buckets)
        .cpu_threshold(cpu_threshold)
        .cool_off(cool_off)
        .cpu(ManualCpu::new(0))
        .build()
        .map(drop)
}

const FIVE_SECONDS: Duration = Duration::from_secs(5);
const ONE_SECOND: Duration = Duration::from_secs(1);

#[test]
fn a_window_needs_two_buckets() {
    for buckets in [0, 1] {
        let err = build(FIVE_SECONDS, buckets, 900, ONE_SECOND).unwrap_err();
        assert_eq!(err, ConfigError::TooFewBuckets { buckets, min: 2 });
        assert_eq!(err.setting(), "buckets");
    }
    assert!(build(FIVE_SECONDS, 2, 900, ONE_SECOND).is_ok());
}

#[test]
fn a_window_has_at_most_65536_buckets() {
    let long = Duration::from_secs(3600);
    let err = build(long, 65_537, 900, ONE_SECOND).unwrap_err();
    assert_eq!(
        err,
        ConfigError::TooManyBuckets {
            buckets: 65_537,
            max: 65_536
        }
    );
    assert_eq!(err.setting(), "buckets");
    let err = build(long, u32::MAX, 900, ONE_SECOND).unwrap_err();
    assert_eq!(
        err,
        ConfigError::TooManyBuckets {
            buckets: u32::MAX,
            max: 65_536
        }
    );
    assert!(build(long, 65_536, 900, ONE_SECOND).is_ok());
}

#[test]
fn buckets_must_last_a_millisecond() {
    for (window, buckets) in [
        (Duration::ZERO, 50),
        (Duration::from_millis(49), 50),
        (FIVE_SECONDS, 5001),
    ] {
        let err = build(window, buckets, 900, ONE_SECOND).unwrap_err();
        assert_eq!(
            err,
            ConfigError::BucketTooShort {
                window,
                buckets,
                min: Duration::from_millis(1)
            }
        );
        assert_eq!(err.setting(), "window / buckets");
    }
    assert!(build(FIVE_SECONDS, 5000, 900, ONE_SECOND).is_ok());
}

#[test]
fn the_cpu_threshold_is_between_1_and_999_permille() {
    for cpu_threshold in [0, 1000, 1001, u32::MAX] {
        let err = build(FIVE_SECONDS, 50, cpu_threshold, ONE_SECOND).unwrap_err();
        assert_eq!(err, ConfigError::CpuThresholdOutOfRange { cpu_threshold });
        assert_eq!(err.setting(), "cpu_threshold");
        assert!(err.to_string().contains("`cpu_threshold`"), "{err}");
    }
    for cpu_threshold in [1, 999] {
        assert!(build(FIVE_SECONDS, 50, cpu_threshold, ONE_SECOND).is_ok());
    }
}

#[test]
fn durations_must_fit_the_clock() {
    let err = build(Duration::MAX, 50, 900, ONE_SECOND).unwrap_err();
    assert_eq!(
        err,
        ConfigError::DurationTooLong {
            setting: "window",
            value: Duration::MAX
        }
    );
    let err = build(FIVE_SECONDS, 50, 900, Duration::MAX).unwrap_err();
    assert_eq!(
        err,
        ConfigError::DurationTooLong {
            setting: "cool_off",
            value: Duration::MAX
        }
    );
    assert_eq!(err.setting(), "cool_off");
    // A zero cool-off is allowed: it disables cooling off.
    assert!(build(FIVE_SECONDS, 50, 900, Duration::ZERO).is_ok());
}
