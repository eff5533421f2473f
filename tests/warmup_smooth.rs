//! `WarmUp` (Guava's smooth model) through the public API, on a manual clock: the ramp under
//! saturation, sub-second warm-up periods, snapshots, and the settings only this bucket
//! accepts. Guava's reference waits (TV-30, TV-31) are checked to the µs, against the model
//! too, in `tests/warmup_guava_model.rs`.

use std::time::Duration;

use admit::ConfigError;
use admit::clock::ManualClock;
use admit::warmup::{Payment, Phase, WarmUp};

fn smooth(
    rate: f64,
    period: Duration,
    factor: u32,
    payment: Payment,
) -> (ManualClock, WarmUp<ManualClock>) {
    let clock = ManualClock::new();
    let limiter = WarmUp::builder(rate)
        .burst(Duration::ZERO)
        .payment(payment)
        .warm_up_period(period)
        .cold_factor(factor)
        .clock(clock.clone())
        .build()
        .unwrap();
    (clock, limiter)
}

/// Saturation: one attempt per millisecond. The admitted rate rises from about 10 / 3 to 10
/// per second and is there by the end of the 10 s period.
#[test]
fn saturation_ramps_to_the_full_rate_within_the_period() {
    let (clock, limiter) = smooth(10.0, Duration::from_secs(10), 3, Payment::Now);
    assert_eq!(limiter.snapshot().phase, Phase::Cold);
    let mut per_second = Vec::new();
    for _ in 0..14 {
        let mut passed = 0;
        for _ in 0..1000 {
            passed += u32::from(limiter.try_acquire().is_ok());
            clock.advance(Duration::from_millis(1));
        }
        per_second.push(passed);
    }
    assert!(per_second[0] <= 4, "{per_second:?}");
    assert!(per_second[10..].iter().all(|&n| n == 10), "{per_second:?}");
    assert_eq!(limiter.snapshot().phase, Phase::Warm);
}

/// A warm-up period of a quarter of a second: cold for the first few requests, warm soon after.
#[test]
fn sub_second_warm_up_periods_work() {
    let (clock, limiter) = smooth(1000.0, Duration::from_millis(250), 3, Payment::Now);
    let mut per_100ms = Vec::new();
    for _ in 0..5 {
        let mut passed = 0;
        for _ in 0..1000 {
            passed += u32::from(limiter.try_acquire().is_ok());
            clock.advance(Duration::from_micros(100));
        }
        per_100ms.push(passed);
    }
    assert!(
        per_100ms[0] < 60,
        "cold: about a third of 100: {per_100ms:?}"
    );
    assert_eq!(per_100ms[3..], [100, 100], "{per_100ms:?}");
}

#[test]
fn refusals_carry_the_time_until_a_permit_is_free() {
    let (clock, limiter) = smooth(10.0, Duration::from_secs(10), 3, Payment::Now);
    limiter.try_acquire().unwrap();
    let rejected = limiter.try_acquire().unwrap_err();
    let retry = rejected.retry_after();
    assert!(
        retry > Duration::from_millis(250) && retry < Duration::from_millis(300),
        "{retry:?}"
    );
    clock.advance(retry - Duration::from_nanos(1));
    assert!(limiter.try_acquire().is_err());
    clock.advance(Duration::from_nanos(1));
    assert!(limiter.try_acquire().is_ok());
    // A bounded wait: the next permit is `retry`-ish away, more than 10 ms.
    assert!(limiter.reserve(1, Duration::from_millis(10)).is_err());
    let wait = limiter.reserve(1, Duration::from_secs(1)).unwrap();
    assert!(wait > Duration::from_millis(250), "{wait:?}");
}

#[test]
fn snapshots_follow_the_curve() {
    let (clock, limiter) = smooth(10.0, Duration::from_secs(10), 3, Payment::Now);
    let curve = limiter.curve();
    assert_eq!((curve.warning_tokens(), curve.max_tokens()), (50.0, 100.0));
    let cold = limiter.snapshot();
    assert_eq!((cold.stored_tokens, cold.phase), (100.0, Phase::Cold));
    assert!((cold.qps_limit - 10.0 / 3.0).abs() < 1e-9, "{cold:?}");
    for _ in 0..30 {
        limiter
            .reserve(1, Duration::MAX)
            .map(|wait| clock.advance(wait))
            .unwrap();
    }
    let warming = limiter.snapshot();
    assert_eq!(warming.phase, Phase::Warming);
    assert!(
        warming.progress() > 0.5 && warming.progress() < 0.7,
        "{warming:?}"
    );
    // Idle refills: a whole period from here is cold again.
    clock.advance(Duration::from_secs(10));
    assert_eq!(limiter.snapshot().phase, Phase::Cold);
}

#[test]
fn smooth_settings_are_validated() {
    let build = |rate: f64, period: Duration, factor: f64| {
        WarmUp::builder(rate)
            .burst(Duration::ZERO)
            .warm_up_period(period)
            .cold_factor(factor)
            .build()
            .map(|_| ())
    };
    assert_eq!(
        build(0.0, Duration::from_secs(1), 3.0),
        Err(ConfigError::InvalidRate {
            permits_per_second: 0.0
        })
    );
    assert!(matches!(
        build(f64::NAN, Duration::from_secs(1), 3.0),
        Err(ConfigError::InvalidRate { .. })
    ));
    assert_eq!(
        build(10.0, Duration::ZERO, 3.0),
        Err(ConfigError::ZeroWarmUpPeriod)
    );
    assert_eq!(
        build(10.0, Duration::from_secs(1), 0.0),
        Err(ConfigError::ColdFactorTooSmall {
            cold_factor: 0.0,
            min: 1.0
        })
    );
    // A factor below 1, or not a finite number, is refused.
    for factor in [0.5, 0.999, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        assert!(
            matches!(
                build(10.0, Duration::from_secs(1), factor),
                Err(ConfigError::ColdFactorTooSmall { min: 1.0, .. })
            ),
            "{factor}"
        );
    }
    // What Sentinel refuses, the smooth profile accepts: fractions of a second, a factor of 1
    // or a fraction (as Guava's), tiny and huge rates.
    assert_eq!(build(10.0, Duration::from_secs(1), 2.5), Ok(()));
    assert_eq!(build(10.0, Duration::from_secs(1), 1.25), Ok(()));
    assert_eq!(build(10.0, Duration::from_millis(1500), 3.0), Ok(()));
    assert_eq!(build(10.0, Duration::from_secs(1), 1.0), Ok(()));
    assert_eq!(build(0.1, Duration::from_secs(10), 3.0), Ok(()));
    assert_eq!(build(1e12, Duration::from_secs(3600), 3.0), Ok(()));
    // Rates whose curve a double cannot hold are refused, not turned into NaN.
    for rate in [1e-300, f64::MIN_POSITIVE, f64::MAX] {
        assert!(
            matches!(
                build(rate, Duration::from_secs(10), 3.0),
                Err(ConfigError::InvalidRate { .. })
            ),
            "{rate}"
        );
    }
}

/// A cached clock: it reads the same instant for a whole millisecond tick.
struct TickingClock(ManualClock);

impl admit::clock::Clock for TickingClock {
    fn now_nanos(&self) -> u64 {
        let now = self.0.now_nanos();
        now - now % 1_000_000
    }

    fn resolution_nanos(&self) -> u64 {
        1_000_000
    }
}

/// A pacing limiter on a cached clock is not capped at one request per tick: requests due
/// within the tick pass, and the long-run rate is the configured one.
#[test]
fn a_cached_clock_does_not_cap_the_rate_at_one_per_tick() {
    let clock = ManualClock::new();
    let limiter = WarmUp::builder(10_000.0)
        .burst(Duration::ZERO)
        .start_warm(true)
        .clock(TickingClock(clock.clone()))
        .build()
        .unwrap();
    let mut passed = 0;
    // One second, ten attempts per 100 µs (the clock reads each ms tick ten times).
    for _ in 0..10_000 {
        for _ in 0..10 {
            passed += u32::from(limiter.try_acquire().is_ok());
        }
        clock.advance(Duration::from_micros(100));
    }
    assert!(
        (10_000..=10_011).contains(&passed),
        "{passed} passed in one second"
    );
}

/// A burst tolerance lets simultaneous requests through up to the burst, and keeps the
/// long-run rate.
#[test]
fn a_burst_lets_simultaneous_requests_through_and_keeps_the_rate() {
    let clock = ManualClock::new();
    let build = |burst| {
        WarmUp::builder(10.0)
            .start_warm(true)
            .burst(burst)
            .clock(clock.clone())
            .build()
            .unwrap()
    };
    let exact = build(Duration::ZERO);
    let at_once = (0..20).filter(|_| exact.try_acquire().is_ok()).count();
    assert_eq!(at_once, 1, "exact spacing: one of simultaneous requests");

    let bursty = build(Duration::from_secs(1));
    let at_once = (0..20).filter(|_| bursty.try_acquire().is_ok()).count();
    assert_eq!(
        at_once, 11,
        "the one on time, then one second's worth at 100 ms each"
    );
    // Spent: the next permit's turn is 1.1 s away.
    assert!(bursty.try_acquire().is_err());
    // Idle time earns the credit again, up to the burst.
    clock.advance(Duration::from_secs(5));
    let at_once = (0..20).filter(|_| bursty.try_acquire().is_ok()).count();
    assert_eq!(at_once, 11, "an idle limiter has the same credit");
    // The next permit's turn is 1.1 s away; it may pass 1 s early.
    assert!(bursty.try_acquire().is_err());
    clock.advance(Duration::from_millis(100));
    assert!(bursty.try_acquire().is_ok());
    assert_eq!(
        bursty.reserve(1, Duration::MAX).unwrap(),
        Duration::from_millis(100)
    );
    // Ten seconds of saturation: the rate, plus the one burst.
    let mut passed = 0;
    for _ in 0..10_000 {
        clock.advance(Duration::from_millis(1));
        passed += u32::from(bursty.try_acquire().is_ok());
    }
    assert!((99..=101).contains(&passed), "{passed} in 10 s at 10/s");
}

#[test]
fn an_impossible_burst_is_refused() {
    let refused = WarmUp::builder(10.0)
        .burst(Duration::MAX)
        .build()
        .map(|_| ());
    assert_eq!(
        refused,
        Err(ConfigError::DurationTooLong {
            setting: "burst",
            value: Duration::MAX
        })
    );
}

/// A limiter overloaded and then left idle cools down again: a refusal marks demand only
/// around the refused requests, not for the idle time after them.
#[test]
fn an_idle_spell_after_overload_cools_the_limiter_down() {
    for payment in [Payment::Now, Payment::Later] {
        let (clock, limiter) = smooth(10.0, Duration::from_secs(10), 3, payment);
        // Twelve seconds of saturation warm it up, ending with a refusal.
        for _ in 0..12_000 {
            let _ = limiter.try_acquire();
            clock.advance(Duration::from_millis(1));
        }
        let _ = limiter.try_acquire();
        assert!(limiter.try_acquire().is_err());
        assert_eq!(limiter.snapshot().phase, Phase::Warm, "{payment:?}");
        // Idle for one warm-up period: cold again, and it acts so.
        clock.advance(Duration::from_secs(10));
        let snapshot = limiter.snapshot();
        assert_eq!(snapshot.phase, Phase::Cold, "{payment:?}: {snapshot:?}");
        let mut passed = 0;
        for _ in 0..1000 {
            passed += u32::from(limiter.try_acquire().is_ok());
            clock.advance(Duration::from_millis(1));
        }
        assert!(
            passed <= 4,
            "{payment:?}: {passed} passed in the first cold second"
        );
    }
}

/// The defaults (Smooth, paying now, a one-second burst): a cold start passes the burst credit
/// at once and then the cold rate, as Sentinel does: no more in its first second than
/// Sentinel's rolling window passes, twice the cold rate. Paying later starts the same way.
#[test]
fn the_default_limiter_starts_with_a_burst_at_the_cold_rate() {
    for payment in [Payment::Now, Payment::Later] {
        let clock = ManualClock::new();
        let limiter = WarmUp::builder(300.0)
            .payment(payment)
            .clock(clock.clone())
            .build()
            .unwrap();
        let at_once = (0..200).filter(|_| limiter.try_acquire().is_ok()).count() as u32;
        let mut first_second = at_once;
        for _ in 1..10_000 {
            clock.advance(Duration::from_micros(100));
            first_second += u32::from(limiter.try_acquire().is_ok());
        }
        // 100 per second cold, 10 ms apart: about 90 of a second's worth at once (the
        // burst less what warming saves), then the cold rate as it warms.
        assert!(
            (85..=95).contains(&at_once),
            "{payment:?}: {at_once} at once"
        );
        assert!(
            (190..=201).contains(&first_second),
            "{payment:?}: {first_second} in the first second"
        );
    }
}

/// Why the default has a burst: random (Poisson) arrivals at half the warm rate pass with it,
/// while exact spacing refuses a large share of them.
#[test]
fn the_default_burst_admits_random_arrivals_below_the_rate() {
    let run = |burst: Option<Duration>| {
        let clock = ManualClock::new();
        let mut builder = WarmUp::builder(1000.0)
            .start_warm(true)
            .clock(clock.clone());
        if let Some(burst) = burst {
            builder = builder.burst(burst);
        }
        let limiter = builder.build().unwrap();
        // 20 000 exponential gaps with a mean of 2 ms (500 per second), from a fixed LCG.
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut refused = 0;
        for _ in 0..20_000 {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let uniform = ((seed >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            clock.advance(Duration::from_secs_f64(-uniform.ln() * 0.002));
            refused += u32::from(limiter.try_acquire().is_err());
        }
        refused
    };
    let with_default_burst = run(None);
    let exact = run(Some(Duration::ZERO));
    assert!(
        with_default_burst <= 20,
        "{with_default_burst} of 20 000 refused with the default burst"
    );
    assert!(
        exact > 4_000,
        "only {exact} of 20 000 refused with exact spacing"
    );
}

/// A fractional cold factor, as Guava allows: 10 rps with factor 2.5 spaces its first requests
/// at the cold interval (250 ms), reaches the full rate within its period, and reports the
/// factor back.
#[test]
fn a_fractional_cold_factor_spaces_by_its_cold_rate() {
    let clock = ManualClock::new();
    let limiter = WarmUp::builder(10.0)
        .cold_factor(2.5)
        .burst(Duration::ZERO)
        .payment(Payment::Later)
        .clock(clock.clone())
        .build()
        .unwrap();
    assert_eq!(limiter.curve().qps_limit(limiter.curve().max_tokens()), 4.0);
    let waits: Vec<Duration> = (0..2)
        .map(|_| {
            let wait = limiter.reserve(1, Duration::MAX).unwrap();
            clock.advance(wait);
            wait
        })
        .collect();
    // Paying later, the second waits for the first permit's price: the mean interval over
    // the top permit of a full bucket, just under the cold interval.
    assert_eq!(waits[0], Duration::ZERO);
    let cold = Duration::from_millis(250);
    assert!(waits[1] < cold && waits[1] > cold * 99 / 100, "{waits:?}");
    let mut passed = 0;
    for _ in 0..20_000 {
        clock.advance(Duration::from_millis(1));
        passed += u32::from(limiter.try_acquire().is_ok());
    }
    // After its 10 s period it runs at the full rate: at least 10 per second on average
    // over the last of the 20 s.
    assert!(passed > 150, "{passed} in 20 s");
    assert_eq!(limiter.snapshot().phase, Phase::Warm);
}
