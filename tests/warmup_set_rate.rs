//! `WarmUp::set_rate`: Guava's rescaling, refused settings, and a rate
//! flipping under concurrent traffic that never lets more through than the higher rate allows.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use admit::ConfigError;
use admit::clock::ManualClock;
use admit::warmup::WarmUp;

fn smooth(rate: f64, clock: &ManualClock, start_warm: bool) -> WarmUp<ManualClock> {
    WarmUp::builder(rate)
        .burst(Duration::ZERO)
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
}

/// Two threads take permits as fast as they can while the rate flips between 100 and 1000 per
/// second at every step of two simulated seconds. Warm and paying now, admissions are at least
/// the interval of the rate in force apart, so no more than 1000 · 2 (+1 for the first) pass.
#[test]
fn flipping_the_rate_under_traffic_never_exceeds_the_higher_rate() {
    let clock = ManualClock::new();
    let limiter = smooth(1000.0, &clock, true);
    let done = AtomicBool::new(false);
    let admitted = AtomicU64::new(0);
    let attempts = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                while !done.load(Ordering::Acquire) {
                    if limiter.try_acquire().is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                    attempts.fetch_add(1, Ordering::Release);
                }
            });
        }
        // Two seconds in 100 µs steps. Each step changes the rate while the takers decide,
        // then lets them make a few attempts before time moves on, however the threads are
        // scheduled.
        for step in 0..20_000u32 {
            limiter
                .set_rate(if step % 2 == 0 { 100.0 } else { 1000.0 })
                .unwrap();
            clock.advance(Duration::from_micros(100));
            // A third attempt counted after this point read the clock after the step.
            let target = attempts.load(Ordering::Acquire) + 3;
            while attempts.load(Ordering::Acquire) < target {
                std::hint::spin_loop();
            }
        }
        done.store(true, Ordering::Release);
    });
    let admitted = admitted.into_inner();
    assert!(
        admitted <= 2_001,
        "{admitted} admitted in 2 s at most 1000/s"
    );
    assert!(admitted >= 150, "{admitted}: traffic got through");
}
