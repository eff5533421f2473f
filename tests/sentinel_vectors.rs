//! The reference vectors of `shared/reference/warmup.md` §6 for `SentinelWarmUp`.

use std::time::Duration;

use admit::ConfigError;
use admit::clock::ManualClock;
use admit::warmup::Phase;
use admit::warmup::sentinel::SentinelWarmUp;

/// Sentinel's tests run on an epoch-millisecond clock; a whole second keeps windows aligned.
const T0: Duration = Duration::from_millis(1_700_000_000_000);

fn sentinel(
    rate: f64,
    period_secs: u64,
    cold_factor: u32,
) -> Result<SentinelWarmUp<ManualClock>, ConfigError> {
    let clock = ManualClock::new();
    clock.set(T0);
    SentinelWarmUp::builder(rate)
        .warm_up_period(Duration::from_secs(period_secs))
        .cold_factor(cold_factor)
        .clock(clock)
        .build()
}

/// Drives `limiter` with one single-permit attempt per millisecond for `seconds` seconds and
/// returns, per second, the passes and the stored tokens right after that second's first call.
fn saturate(limiter: &SentinelWarmUp<ManualClock>, seconds: usize) -> (Vec<u32>, Vec<f64>) {
    let mut passes = Vec::new();
    let mut tokens = Vec::new();
    for _ in 0..seconds {
        let mut passed = 0;
        for ms in 0..1000 {
            if limiter.try_acquire().is_ok() {
                passed += 1;
            }
            if ms == 0 {
                tokens.push(limiter.snapshot().stored_tokens);
            }
            limiter.clock().advance(Duration::from_millis(1));
        }
        passes.push(passed);
    }
    (passes, tokens)
}

#[test]
fn tv10_constructor_constants_are_bit_exact() {
    // c, P, f, W, M, slope, limit at M (cold), limit at W
    let rows = [
        (
            10.0,
            10,
            3,
            50.0,
            100.0,
            0.004,
            3.3333333333333335,
            10.000000000000002,
        ),
        (
            100.0,
            10,
            3,
            500.0,
            1000.0,
            4e-5,
            33.33333333333334,
            100.00000000000001,
        ),
        (
            20.0,
            10,
            3,
            100.0,
            200.0,
            0.001,
            6.666666666666667,
            20.000000000000004,
        ),
        (
            5.0,
            10,
            3,
            25.0,
            50.0,
            0.016,
            1.6666666666666667,
            5.000000000000001,
        ),
        (
            10.0,
            5,
            3,
            25.0,
            50.0,
            0.008,
            3.3333333333333335,
            10.000000000000002,
        ),
        (
            3.0,
            10,
            3,
            15.0,
            30.0,
            0.04444444444444444,
            1.0000000000000002,
            3.0000000000000004,
        ),
        (
            10.0,
            10,
            2,
            100.0,
            166.0,
            0.0015151515151515152,
            5.000000000000001,
            10.000000000000002,
        ),
        (
            10.0,
            10,
            5,
            25.0,
            58.0,
            0.012121212121212121,
            2.0000000000000004,
            10.000000000000002,
        ),
        (
            10.5,
            10,
            3,
            52.0,
            104.0,
            0.003663003663003663,
            3.5000000000000004,
            10.500000000000002,
        ),
    ];
    for (c, p, f, w, m, slope, cold, warm) in rows {
        let curve = sentinel(c, p, f).unwrap().curve();
        let row = format!("{c}/{p}/{f}");
        assert_eq!(curve.warning_tokens(), w, "W for {row}");
        assert_eq!(curve.max_tokens(), m, "M for {row}");
        assert_eq!(curve.slope(), slope, "slope for {row}");
        assert_eq!(curve.qps_limit(m), cold, "limit at M for {row}");
        assert_eq!(curve.qps_limit(w), warm, "limit at W for {row}");
    }
}

#[test]
fn tv10_rows_that_could_never_admit_are_refused() {
    // 2/10/3 and 1/10/3 have a cold limit below one request; 0.1/10/3 has W = M = 0 and an
    // infinite slope (NaN limits in Java). All would admit nothing, forever.
    for c in [2.0, 1.0, 0.1] {
        assert_eq!(
            sentinel(c, 10, 3).unwrap_err(),
            ConfigError::ColdRateBelowOne {
                permits_per_second: c,
                cold_factor: 3,
                cold_limit: c / 3.0,
            }
        );
    }
}

#[test]
fn tv11_saturating_load_from_cold() {
    let limiter = sentinel(10.0, 10, 3).unwrap();
    assert_eq!(limiter.snapshot().phase, Phase::Cold);
    let (passes, tokens) = saturate(&limiter, 16);
    assert_eq!(passes, [3, 3, 3, 3, 3, 4, 4, 4, 5, 5, 6, 7, 10, 10, 10, 10]);
    assert_eq!(
        tokens,
        [
            100.0, 97.0, 94.0, 91.0, 88.0, 85.0, 81.0, 77.0, 73.0, 68.0, 63.0, 57.0, 50.0, 40.0,
            40.0, 40.0
        ]
    );
    assert_eq!(limiter.snapshot().phase, Phase::Warm);
}

#[test]
fn tv11_snapshot_before_a_seconds_first_call_already_shows_its_sync() {
    let limiter = sentinel(10.0, 10, 3).unwrap();
    saturate(&limiter, 1);
    // Second 1 has begun but nobody has called yet: the snapshot reports the tokens the first
    // call is about to compute (100 − 3), and the rolling window still holds no passes from the
    // second half of second 0.
    let before = limiter.snapshot();
    assert_eq!(before.stored_tokens, 97.0);
    assert_eq!(before.window_passes, 0);
    limiter.try_acquire().unwrap();
    let after = limiter.snapshot();
    assert_eq!(after.stored_tokens, 97.0);
    assert_eq!(after.window_passes, 1);
}

#[test]
fn tv13_cold_rate_of_exactly_one_warms_one_token_per_second() {
    let limiter = sentinel(3.0, 10, 3).unwrap();
    let (passes, tokens) = saturate(&limiter, 6);
    assert_eq!(passes, [1; 6]);
    assert_eq!(tokens, [30.0, 29.0, 28.0, 27.0, 26.0, 25.0]);
}

#[test]
fn tv13_four_per_second_admits_one_per_second_while_cold() {
    let limiter = sentinel(4.0, 10, 3).unwrap();
    let (passes, _) = saturate(&limiter, 3);
    assert_eq!(passes, [1, 1, 1]);
}

#[test]
fn tv13_dead_configurations_are_refused() {
    for (c, f) in [(1.0, 3), (2.0, 3), (0.5, 3), (0.1, 3), (2.9, 3), (9.0, 10)] {
        let err = sentinel(c, 10, f).unwrap_err();
        assert_eq!(
            err,
            ConfigError::ColdRateBelowOne {
                permits_per_second: c,
                cold_factor: f,
                cold_limit: c / f64::from(f),
            }
        );
        assert_eq!(err.setting(), "permits_per_second / cold_factor");
    }
}

#[test]
fn tv14_max_tokens_follow_java_not_sentinel_rust() {
    // sentinel-rust truncates P·c/(f + 1) before doubling and gets 49.
    assert_eq!(sentinel(5.0, 10, 3).unwrap().curve().max_tokens(), 50.0);
    assert_eq!(sentinel(10.0, 5, 3).unwrap().curve().max_tokens(), 50.0);
}

#[test]
fn tv17_starts_cold_whatever_the_clock_origin() {
    // Java, with a clock starting at 0, never syncs in its first second and starts warm.
    let clock = ManualClock::new();
    let limiter = SentinelWarmUp::builder(10.0).clock(clock).build().unwrap();
    let (passes, tokens) = saturate(&limiter, 2);
    assert_eq!(passes, [3, 3]);
    assert_eq!(tokens, [100.0, 97.0]);
}

#[test]
fn tv17_start_warm_reproduces_javas_zero_origin_behaviour() {
    let clock = ManualClock::new();
    let limiter = SentinelWarmUp::builder(10.0)
        .start_warm(true)
        .clock(clock)
        .build()
        .unwrap();
    assert_eq!(limiter.snapshot().phase, Phase::Warm);
    let (passes, tokens) = saturate(&limiter, 5);
    assert_eq!(passes, [10; 5]);
    assert_eq!(tokens, [0.0; 5]);
}

#[test]
fn tv11_holds_for_any_clock_origin() {
    // Windows are counted from the second the limiter is built in, so readings beyond 2^32
    // seconds (a clock counting from the UNIX epoch, in 2106) behave like any other. (A
    // `ManualClock` itself saturates at 2^64 ns, about 584 years.)
    for origin_secs in [0, 1_700_000_000, 1 << 32, 500 * 365 * 86_400] {
        let clock = ManualClock::new();
        clock.set(Duration::from_secs(origin_secs));
        let limiter = SentinelWarmUp::builder(10.0).clock(clock).build().unwrap();
        let (passes, tokens) = saturate(&limiter, 13);
        assert_eq!(
            passes,
            [3, 3, 3, 3, 3, 4, 4, 4, 5, 5, 6, 7, 10],
            "origin {origin_secs} s"
        );
        assert_eq!(tokens[12], 50.0, "origin {origin_secs} s");
    }
}
