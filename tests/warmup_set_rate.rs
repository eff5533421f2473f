//! `WarmUp::set_rate` for `Profile::Smooth`: Guava's rescaling, refused settings, and a rate
//! flipping under concurrent traffic that never lets more through than the higher rate allows.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use admit::ConfigError;
use admit::clock::ManualClock;
use admit::warmup::{Profile, WarmUp};

fn smooth(rate: f64, clock: &ManualClock, start_warm: bool) -> WarmUp<ManualClock> {
    WarmUp::builder(rate)
        .profile(Profile::Smooth)
        .warm_up_period(Duration::from_secs(10))
        .start_warm(start_warm)
        .clock(clock.clone())
        .build()
        .unwrap()
}

#[test]
fn a_new_rate_keeps_the_share_of_stored_permits() {
    let clock = ManualClock::new();
    let limiter = smooth(10.0, &clock, false);
    for _ in 0..25 {
        let wait = limiter.reserve(1, Duration::MAX).unwrap();
        clock.advance(wait);
    }
    let before = limiter.snapshot();
    assert!((before.progress() - 0.5).abs() < 0.02, "{before:?}");
    limiter.set_rate(20.0).unwrap();
    let after = limiter.snapshot();
    assert_eq!(limiter.permits_per_second(), 20.0);
    assert_eq!(after.max_tokens, 2.0 * before.max_tokens);
    assert!(
        (after.progress() - before.progress()).abs() < 1e-9,
        "{after:?}"
    );
    assert!((after.stored_tokens - 2.0 * before.stored_tokens).abs() < 1e-6);
}

#[test]
fn refused_rates_change_nothing() {
    let clock = ManualClock::new();
    let limiter = smooth(10.0, &clock, false);
    for rate in [0.0, -5.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            limiter.set_rate(rate),
            Err(ConfigError::InvalidRate { .. })
        ));
    }
    assert_eq!(limiter.permits_per_second(), 10.0);
    let sentinel = WarmUp::builder(10.0).clock(clock).build().unwrap();
    assert_eq!(
        sentinel.set_rate(20.0),
        Err(ConfigError::RateChangeUnsupported {
            permits_per_second: 20.0
        })
    );
    assert_eq!(sentinel.permits_per_second(), 10.0);
}

/// Two threads take permits as fast as they can while a third flips the rate between 100 and
/// 1000 per second, over two simulated seconds. Warm and paying now, admissions are at least
/// the interval of the rate in force apart, so no more than 1000 · 2 (+1 for the first) pass.
#[test]
fn flipping_the_rate_under_traffic_never_exceeds_the_higher_rate() {
    let clock = ManualClock::new();
    let limiter = smooth(1000.0, &clock, true);
    let done = AtomicBool::new(false);
    let admitted = AtomicU64::new(0);
    let flips = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                while !done.load(Ordering::Acquire) {
                    if limiter.try_acquire().is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        scope.spawn(|| {
            while !done.load(Ordering::Acquire) {
                for rate in [100.0, 1000.0] {
                    limiter.set_rate(rate).unwrap();
                    flips.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        // Two seconds in 20 µs steps, each long enough for the others to act.
        for _ in 0..100_000 {
            clock.advance(Duration::from_micros(20));
            std::thread::yield_now();
        }
        done.store(true, Ordering::Release);
    });
    let admitted = admitted.into_inner();
    assert!(flips.into_inner() > 0);
    assert!(
        admitted <= 2_001,
        "{admitted} admitted in 2 s at most 1000/s"
    );
    assert!(admitted >= 150, "{admitted}: traffic got through");
}
