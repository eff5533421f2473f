//! A fresh limiter passes a simultaneous burst, in both profiles: six requests arriving at the
//! same instant at a new default limiter (100/s, 10 s, factor 3) all pass, as many pass at once
//! as at one that has idled for a minute, and no second of a saturating load from a cold start
//! admits more than Sentinel's rolling window does.

use std::time::Duration;

use admit::clock::ManualClock;
use admit::warmup::sentinel::SentinelWarmUp;
use admit::warmup::{Payment, WarmUp};

/// How many of `n` requests arriving together pass.
fn together(n: usize, mut try_acquire: impl FnMut() -> bool) -> usize {
    (0..n).filter(|_| try_acquire()).count()
}

#[test]
fn six_at_once_pass_a_fresh_limiter_in_both_profiles() {
    let smooth = WarmUp::builder(100.0)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    assert_eq!(together(6, || smooth.try_acquire().is_ok()), 6);
    let sentinel = SentinelWarmUp::builder(100.0)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    assert_eq!(together(6, || sentinel.try_acquire().is_ok()), 6);
}

fn smooth(payment: Payment, clock: &ManualClock) -> WarmUp<ManualClock> {
    WarmUp::builder(100.0)
        .payment(payment)
        .clock(clock.clone())
        .build()
        .unwrap()
}

#[test]
fn a_fresh_limiter_has_the_credit_of_an_idle_one() {
    for payment in [Payment::Now, Payment::Later] {
        let fresh = smooth(payment, &ManualClock::new());
        let at_once_fresh = together(1_000, || fresh.try_acquire().is_ok());

        let clock = ManualClock::new();
        let idle = smooth(payment, &clock);
        assert!(idle.try_acquire().is_ok());
        clock.advance(Duration::from_secs(60));
        let at_once_idle = together(1_000, || idle.try_acquire().is_ok());

        assert_eq!(at_once_fresh, at_once_idle, "{payment:?}");
        // The request on time and the burst credit at the cold spacing (30 ms at 100/3 per
        // second) less what warming over the first second saves: Sentinel passes 33.
        assert_eq!(at_once_fresh, 32, "{payment:?}");
    }
}

#[test]
fn a_warm_limiter_keeps_the_whole_burst() {
    let clock = ManualClock::new();
    let warm = WarmUp::builder(100.0)
        .start_warm(true)
        .clock(clock.clone())
        .build()
        .unwrap();
    // The request on time and one second at the full rate (10 ms apart).
    assert_eq!(together(1_000, || warm.try_acquire().is_ok()), 101);
}

/// Admissions per millisecond over `millis` ms of a load that tries 50 requests every ms.
fn saturate(millis: u64, clock: &ManualClock, mut try_acquire: impl FnMut() -> bool) -> Vec<u32> {
    (0..millis)
        .map(|_| {
            let admitted = together(50, &mut try_acquire) as u32;
            clock.advance(Duration::from_millis(1));
            admitted
        })
        .collect()
}

/// The most admissions in any 1000 consecutive milliseconds.
fn busiest_second(per_ms: &[u32]) -> u32 {
    per_ms.windows(1000).map(|w| w.iter().sum()).max().unwrap()
}

#[test]
fn the_first_second_stays_within_sentinels_rolling_window() {
    // Sentinel counts passes in two half-second buckets aligned to its clock: a load that
    // starts late in a bucket gets its cold limit at once, and as much again as soon as that
    // bucket leaves the window, half a second later.
    let clock = ManualClock::new();
    let sentinel = SentinelWarmUp::builder(100.0)
        .clock(clock.clone())
        .build()
        .unwrap();
    clock.advance(Duration::from_millis(499));
    let sentinel = saturate(3_000, &clock, || sentinel.try_acquire().is_ok());
    assert_eq!(sentinel[0], 33);
    let sentinel_busiest = busiest_second(&sentinel);
    assert_eq!(sentinel_busiest, 67);

    for payment in [Payment::Now, Payment::Later] {
        let clock = ManualClock::new();
        let limiter = smooth(payment, &clock);
        let per_ms = saturate(3_000, &clock, || limiter.try_acquire().is_ok());
        let first_second: u32 = per_ms[..1000].iter().sum();
        let busiest = busiest_second(&per_ms);
        assert!(
            busiest <= sentinel_busiest,
            "{payment:?}: Smooth's busiest second admits {busiest}, more than Sentinel's \
             ({sentinel_busiest})"
        );
        // The burst at once, then the cold rate as it warms: the most Sentinel allows.
        assert_eq!(first_second, sentinel_busiest, "{payment:?}");
    }
}
