//! Both warm-up buckets carry a user-given name and count their decisions, as the shedder does.

use std::time::Duration;

use admit::ConfigError;
use admit::clock::ManualClock;
use admit::warmup::sentinel::SentinelWarmUp;
use admit::warmup::{Totals, WarmUp};

fn totals(admitted: u64, refused: u64) -> (u64, u64) {
    (admitted, refused)
}

fn pair(t: Totals) -> (u64, u64) {
    (t.admitted, t.refused)
}

#[test]
fn the_smooth_bucket_counts_every_decision_once() {
    let clock = ManualClock::new();
    let limiter = WarmUp::builder(10.0)
        .burst(Duration::ZERO)
        .clock(clock.clone())
        .build()
        .unwrap();
    assert_eq!(pair(limiter.totals()), totals(0, 0));
    limiter.try_acquire().unwrap();
    assert!(limiter.try_acquire().is_err());
    assert!(limiter.try_acquire_n(3).is_err());
    assert!(limiter.reserve(1, Duration::from_millis(1)).is_err());
    // Zero permits decide nothing.
    limiter.try_acquire_n(0).unwrap();
    assert_eq!(limiter.reserve(0, Duration::ZERO).unwrap(), Duration::ZERO);
    assert_eq!(pair(limiter.totals()), totals(1, 3));
    // A reservation that waits is an admission.
    assert!(limiter.reserve(1, Duration::from_secs(1)).unwrap() > Duration::ZERO);
    assert_eq!(pair(limiter.totals()), totals(2, 3));
}

#[test]
fn the_sentinel_bucket_counts_every_decision_once() {
    let limiter = SentinelWarmUp::builder(10.0)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    for _ in 0..5 {
        let _ = limiter.try_acquire();
    }
    // Cold: 10 / 3 per rolling second, three fit.
    assert_eq!(pair(limiter.totals()), totals(3, 2));
    assert!(
        limiter.try_acquire_n(11).is_err(),
        "beyond any capacity: refused"
    );
    assert_eq!(pair(limiter.totals()), totals(3, 3));
}

#[test]
fn buckets_carry_their_names() {
    let smooth = WarmUp::builder(10.0).name("checkout").build().unwrap();
    assert!(format!("{smooth:?}").contains(r#"name: Some("checkout")"#));
    let sentinel = SentinelWarmUp::builder(10.0)
        .name(String::from("search"))
        .build()
        .unwrap();
    assert!(format!("{sentinel:?}").contains(r#"name: Some("search")"#));
    let unnamed = WarmUp::builder(10.0).build().unwrap();
    assert!(format!("{unnamed:?}").contains("name: None"));
}

#[test]
fn an_empty_name_is_a_typed_error() {
    assert_eq!(
        WarmUp::builder(10.0).name("").build().unwrap_err(),
        ConfigError::EmptyName
    );
    assert_eq!(
        SentinelWarmUp::builder(10.0).name("").build().unwrap_err(),
        ConfigError::EmptyName
    );
}
