//! Properties and large-scale checks of the Erlang module.
// The references are quoted to the 17 significant digits they were computed to.
#![allow(clippy::excessive_precision)]

use admit::erlang::{
    ErlangA, ErlangError, ImpatientTarget, MMc, QueueModel, StaffingOptions, Target,
};
use proptest::prelude::*;

/// Loads from a fraction of an erlang to ten million, with varied service rates.
fn queue() -> impl Strategy<Value = MMc> {
    (
        prop_oneof![0.01f64..10.0, 10.0f64..1e3, 1e3f64..1e5, 1e5f64..1e7],
        prop_oneof![Just(1.0), 0.01f64..100.0],
    )
        .prop_map(|(load, mu)| MMc::new(load * mu, mu).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn probabilities_stay_in_the_unit_interval(queue in queue(), offset in -30.0f64..60.0, t in 0.0f64..10.0) {
        let a = queue.offered_load();
        let servers = (a + offset * a.sqrt()).max(1.0).ceil() as u64;
        let b = queue.erlang_b(servers).unwrap();
        prop_assert!((0.0..=1.0).contains(&b), "B = {b}");
        match queue.with_servers(servers) {
            Ok(staffed) => {
                let c = staffed.prob_wait();
                prop_assert!((0.0..=1.0).contains(&c) && c >= b, "C = {c}, B = {b}");
                let sl = staffed.service_level(t).unwrap();
                let tail = staffed.prob_wait_exceeds(t).unwrap();
                prop_assert!((0.0..=1.0).contains(&sl) && (0.0..=1.0).contains(&tail));
                prop_assert!((sl + tail - 1.0).abs() < 1e-12, "SL {sl} + tail {tail}");
                prop_assert!(staffed.mean_wait() >= 0.0 && staffed.mean_wait().is_finite());
                prop_assert!(staffed.occupancy() < 1.0);
            }
            Err(ErlangError::Unstable { rho }) => prop_assert!(rho >= 1.0),
            Err(other) => prop_assert!(false, "{other:?}"),
        }
    }

    #[test]
    fn the_service_level_never_falls_as_servers_are_added(queue in queue(), t in 0.0f64..2.0) {
        let a = queue.offered_load();
        let first = a.floor() as u64 + 1;
        let (mut previous_level, mut previous_tail) = (0.0, 1.0);
        for servers in first..first + 40 {
            let Ok(staffed) = queue.with_servers(servers) else { continue };
            // The tail P(Wq > t) keeps full relative accuracy: it never rises.
            let tail = staffed.prob_wait_exceeds(t).unwrap();
            prop_assert!(tail <= previous_tail, "tail({servers}) = {tail} > {previous_tail}");
            // SL = 1 − tail rounds near 1: it never falls by more than that rounding.
            let level = staffed.service_level(t).unwrap();
            prop_assert!(level >= previous_level - 4.0 * f64::EPSILON, "SL({servers}) = {level} < {previous_level}");
            (previous_level, previous_tail) = (level, tail);
        }
    }

    #[test]
    fn min_servers_is_the_smallest_that_meets_the_target(
        queue in queue(),
        within in prop_oneof![Just(0.0), 0.0f64..1.0],
        at_least in prop_oneof![0.0f64..0.5, 0.5f64..0.999, Just(0.999_999)],
    ) {
        let servers = queue.min_servers(Target::ServiceLevel { within, at_least }).unwrap();
        // Compared through the tail, as the search does: accurate even next to 1.
        let tail = 1.0 - at_least;
        let exceeds = |c| queue.with_servers(c)?.prob_wait_exceeds(within);
        prop_assert!(exceeds(servers).unwrap() <= tail);
        match exceeds(servers - 1) {
            Ok(below) => prop_assert!(below > tail, "c − 1 = {} also meets it", servers - 1),
            Err(ErlangError::Unstable { .. } | ErlangError::ZeroServers) => {}
            Err(other) => prop_assert!(false, "{other:?}"),
        }
    }

    #[test]
    fn min_servers_for_a_mean_wait_is_the_smallest(queue in queue(), at_most in 1e-6f64..10.0) {
        let servers = queue.min_servers(Target::MeanWait { at_most }).unwrap();
        prop_assert!(queue.mean_wait(servers).unwrap() <= at_most);
        if let Ok(below) = queue.mean_wait(servers - 1) {
            prop_assert!(below > at_most);
        }
    }
}

#[test]
fn halfin_whitt_agrees_at_every_scale() {
    // ⌈a + β√a⌉ − c* is 0 or −1 for P(wait) ≤ 0.2 and −1 or −2 for ≤ 0.01 (spec §3.2).
    for a in [10.0, 100.0, 1e3, 1e4, 1e5, 1e6, 1e7] {
        let queue = MMc::new(a, 1.0).unwrap();
        for (at_least, beta, allowed) in
            [(0.8, 1.061516275, [0, -1]), (0.99, 2.374888148, [-1, -2])]
        {
            let exact = queue
                .min_servers(Target::ServiceLevel {
                    within: 0.0,
                    at_least,
                })
                .unwrap();
            let approx = (a + beta * a.sqrt()).ceil() as i64;
            let diff = approx - exact as i64;
            assert!(
                allowed.contains(&diff),
                "a {a}, p {at_least}: exact {exact}, H–W {approx}"
            );
        }
    }
}

#[test]
fn huge_loads_stay_finite_where_the_series_overflows() {
    // The textbook series returns NaN from a ≈ 710; at 1e7 erlangs every value is sound.
    let queue = MMc::new(1e7, 1.0).unwrap();
    let servers = queue
        .min_servers(Target::ServiceLevel {
            within: 0.01,
            at_least: 0.8,
        })
        .unwrap();
    let staffed = queue.with_servers(servers).unwrap();
    assert!(servers > 10_000_000 && servers < 10_010_000, "{servers}");
    let erlang_b = queue.erlang_b(servers).unwrap();
    for value in [erlang_b, staffed.prob_wait(), staffed.mean_wait()] {
        assert!(value.is_finite() && value > 0.0 && value < 1.0, "{value}");
    }
    assert!(staffed.service_level(0.01).unwrap() >= 0.8);
}

#[test]
fn an_empty_system_waits_for_nothing() {
    let queue = MMc::new(0.0, 2.0).unwrap();
    let staffed = queue.with_servers(1).unwrap();
    assert_eq!(queue.offered_load(), 0.0);
    assert_eq!(queue.erlang_b(1), Ok(0.0));
    assert_eq!(staffed.prob_wait(), 0.0);
    assert_eq!(staffed.mean_wait(), 0.0);
    assert_eq!(staffed.mean_queue_len(), 0.0);
    assert_eq!(staffed.occupancy(), 0.0);
    assert_eq!(staffed.service_level(0.0), Ok(1.0));
    assert_eq!(staffed.wait_percentile(0.99), Ok(0.0));
    let target = Target::ServiceLevel {
        within: 0.0,
        at_least: 0.99,
    };
    assert_eq!(queue.min_servers(target), Ok(1));
    let floor = StaffingOptions {
        min_servers: 3,
        ..StaffingOptions::default()
    };
    assert_eq!(queue.min_servers_with(target, &floor), Ok(3));
    // −0.0 is 0.
    assert_eq!(MMc::new(-0.0, 1.0).unwrap().offered_load(), 0.0);
}

#[test]
fn staffing_options_adjust_and_bound_the_answer() {
    let queue = MMc::new(100.0, 1.0).unwrap();
    let target = Target::ServiceLevel {
        within: 0.1,
        at_least: 0.9,
    };
    let plain = queue.min_servers(target).unwrap();
    let with = |options: StaffingOptions| queue.min_servers_with(target, &options);
    let defaults = StaffingOptions::default();
    assert_eq!(with(defaults), Ok(plain));
    assert_eq!(
        with(StaffingOptions {
            max_occupancy: Some(0.5),
            ..defaults
        }),
        Ok(200)
    );
    assert_eq!(
        with(StaffingOptions {
            shrinkage: 0.2,
            ..defaults
        }),
        Ok((plain as f64 / 0.8).ceil() as u64)
    );
    assert_eq!(
        with(StaffingOptions {
            min_servers: 500,
            ..defaults
        }),
        Ok(500)
    );
    assert_eq!(
        with(StaffingOptions {
            max_servers: Some(plain - 1),
            ..defaults
        }),
        Err(ErlangError::Unreachable {
            max_servers: plain - 1
        })
    );
    for (field, options) in [
        (
            "max_occupancy",
            StaffingOptions {
                max_occupancy: Some(0.0),
                ..defaults
            },
        ),
        (
            "max_occupancy",
            StaffingOptions {
                max_occupancy: Some(1.5),
                ..defaults
            },
        ),
        (
            "shrinkage",
            StaffingOptions {
                shrinkage: 1.0,
                ..defaults
            },
        ),
        (
            "shrinkage",
            StaffingOptions {
                shrinkage: -0.1,
                ..defaults
            },
        ),
    ] {
        assert!(
            matches!(with(options), Err(ErlangError::OutOfRange { field: f, .. }) if f == field),
            "{options:?}"
        );
    }
}

#[test]
fn non_finite_options_are_named() {
    let queue = MMc::new(100.0, 1.0).unwrap();
    let target = Target::MeanWait { at_most: 0.1 };
    let nan_occupancy = StaffingOptions {
        max_occupancy: Some(f64::NAN),
        ..StaffingOptions::default()
    };
    assert_eq!(
        queue.min_servers_with(target, &nan_occupancy),
        Err(ErlangError::NonFinite {
            field: "max_occupancy"
        })
    );
}

#[test]
fn target_validation() {
    let queue = MMc::new(5.0, 1.0).unwrap();
    let level = |within, at_least| queue.min_servers(Target::ServiceLevel { within, at_least });
    assert_eq!(
        level(1.0, 1.0),
        Err(ErlangError::TargetOutOfRange { target: 1.0 })
    );
    assert_eq!(
        level(1.0, -0.1),
        Err(ErlangError::TargetOutOfRange { target: -0.1 })
    );
    assert_eq!(
        level(f64::INFINITY, 0.5),
        Err(ErlangError::NonFinite { field: "within" })
    );
    assert_eq!(
        level(-1.0, 0.5),
        Err(ErlangError::Negative { field: "within" })
    );
    // p = 0 is met by the smallest stable system.
    assert_eq!(level(0.0, 0.0), Ok(6));
    let wait = |at_most| queue.min_servers(Target::MeanWait { at_most });
    assert_eq!(
        wait(0.0),
        Err(ErlangError::OutOfRange {
            field: "at_most",
            value: 0.0
        })
    );
    assert_eq!(wait(-1.0), Err(ErlangError::Negative { field: "at_most" }));
    assert_eq!(
        queue.with_servers(6).unwrap().wait_percentile(1.0),
        Err(ErlangError::TargetOutOfRange { target: 1.0 })
    );
    assert_eq!(
        queue.with_servers(6).unwrap().wait_percentile(f64::NAN),
        Err(ErlangError::NonFinite { field: "q" })
    );
    assert_eq!(queue.occupancy(5), Err(ErlangError::Unstable { rho: 1.0 }));
    assert_eq!(queue.erlang_b(0), Err(ErlangError::ZeroServers));
    // Erlang B alone stays defined in overload.
    assert!(queue.erlang_b(3).unwrap() > 0.3);
}

#[test]
fn erlang_a_limits() {
    // θ = μ: M/M/∞, so P(W > 0) = P(Poisson(10) ≥ 12).
    let infinite = ErlangA::new(10.0, 1.0, 1.0).unwrap();
    let p = infinite.prob_wait(12).unwrap();
    assert!((p - 0.303_223_853_696_893_3).abs() < 1e-14, "{p}");
    // θ → 0: Erlang C.
    let patient = ErlangA::new(10.0, 1.0, 1e-9).unwrap();
    let erlang_c = MMc::new(10.0, 1.0).unwrap().prob_wait(12).unwrap();
    let p = patient.prob_wait(12).unwrap();
    assert!(
        ((p - erlang_c) / erlang_c).abs() < 1e-7,
        "{p} vs {erlang_c}"
    );
    // λ = 0: nobody waits; P(Ab | W > 0) takes its limit 1/(x + 1).
    let empty = ErlangA::new(0.0, 1.0, 0.5).unwrap();
    assert_eq!(empty.prob_wait(3), Ok(0.0));
    assert_eq!(empty.prob_abandon(3), Ok(0.0));
    assert_eq!(empty.prob_abandon_given_wait(3), Ok(1.0 / 7.0));
    assert_eq!(empty.service_level(3, 1.0), Ok(1.0));
    // Fewer servers than the load is fine with abandonment, and a heavy overload stays finite.
    let overloaded = ErlangA::new(5_000.0, 1.0, 0.01).unwrap();
    for n in [100, 1_000, 4_000] {
        let p_wait = overloaded.prob_wait(n).unwrap();
        let p_ab = overloaded.prob_abandon(n).unwrap();
        assert!(
            (0.0..=1.0).contains(&p_wait) && (0.0..=1.0).contains(&p_ab),
            "{n}: {p_wait} {p_ab}"
        );
        let served = overloaded.service_level(n, 1.0).unwrap();
        assert!((0.0..=1.0).contains(&served), "{served}");
    }
    assert_eq!(
        ErlangA::new(1.0, 1.0, 0.0),
        Err(ErlangError::NonPositiveRate {
            field: "abandon_rate"
        })
    );
    assert_eq!(infinite.prob_wait(0), Err(ErlangError::ZeroServers));
}

#[test]
fn erlang_a_min_servers_is_the_smallest() {
    let queue = ErlangA::new(50.0, 1.0, 0.2).unwrap();
    let target = ImpatientTarget::ServedWithin {
        within: 0.5,
        at_least: 0.9,
    };
    let n = queue.min_servers(target).unwrap();
    assert!(queue.service_level(n, 0.5).unwrap() >= 0.9);
    assert!(queue.service_level(n - 1, 0.5).unwrap() < 0.9);
    let n = queue
        .min_servers(ImpatientTarget::AbandonAtMost { at_most: 0.01 })
        .unwrap();
    assert!(queue.prob_abandon(n).unwrap() <= 0.01);
    assert!(queue.prob_abandon(n - 1).unwrap() > 0.01);
    assert_eq!(
        queue.min_servers(ImpatientTarget::AbandonAtMost { at_most: 0.0 }),
        Err(ErlangError::TargetOutOfRange { target: 0.0 })
    );
    assert_eq!(
        queue.min_servers(ImpatientTarget::AbandonAtMost { at_most: 1.0 }),
        Err(ErlangError::TargetOutOfRange { target: 1.0 })
    );
}

/// 45-digit references (mpmath, `B = pois(c; a)/Q(c+1, a)` with `a = λ/μ` exact) at loads up to
/// ten million erlangs with service rates whose `λ/μ` does not round exactly:
/// `(λ, μ, c, t, B, C, P(Wq > t), E[Wq])`.
type LargeLoad = (f64, f64, u64, f64, f64, f64, f64, f64);
const LARGE_LOADS: [LargeLoad; 6] = [
    (
        1330000.0,
        13.3,
        100475,
        0.01,
        0.000_437_083_438_875_117_38,
        0.084_664_068_042_253_588,
        3.098_455_319_609_841_6e-29,
        1.340_151_452_983_816_9e-5,
    ),
    (
        370000.0,
        0.37,
        1002001,
        0.5,
        5.515_284_924_791_770_4e-5,
        0.026_876_995_121_971_026,
        4.571_702_161_759_637e-163,
        3.630_211_262_202_842_8e-5,
    ),
    (
        12500000.0,
        12.5,
        1000500,
        0.0,
        0.000_508_881_860_540_903_66,
        0.504_654_034_713_444_94,
        0.504_654_034_713_444_94,
        8.074_464_555_415_119e-5,
    ),
    (
        133000000.0,
        13.3,
        10003163,
        0.001,
        9.090_663_559_016_941_4e-5,
        0.223_315_097_081_364_88,
        1.199_668_481_754_397_9e-19,
        5.308_444_136_296_966_4e-6,
    ),
    (
        3700000.0,
        0.37,
        10009487,
        0.1,
        1.404_478_116_020_329_7e-6,
        0.001_479_637_846_983_548_1,
        5.303_232_752_647_733_5e-156,
        4.215_264_264_850_526_2e-7,
    ),
    (
        864.197523,
        0.007,
        124336,
        10.0,
        5.010_468_887_429_002_7e-5,
        0.007_036_186_316_870_054,
        1.314_568_828_617_859_8e-29,
        0.001_143_263_077_735_132_7,
    ),
];

#[test]
fn large_loads_match_high_precision_references() {
    for (lambda, mu, servers, t, b, c, tail, mean_wait) in LARGE_LOADS {
        let queue = MMc::new(lambda, mu).unwrap();
        let staffed = queue.with_servers(servers).unwrap();
        for (what, actual, expected) in [
            ("B", queue.erlang_b(servers).unwrap(), b),
            ("C", staffed.prob_wait(), c),
            ("tail", staffed.prob_wait_exceeds(t).unwrap(), tail),
            ("E[Wq]", staffed.mean_wait(), mean_wait),
        ] {
            let error = ((actual - expected) / expected).abs();
            assert!(
                error < 1e-13,
                "λ {lambda}, μ {mu}, c {servers}: {what} off by {error:e}"
            );
        }
    }
}

/// 200-digit references (mpmath, `A = ₁F₁(1; x+1; y)`) for fewer servers than the load:
/// `(λ, μ, θ, N, t, [P(W>0), P(Ab), P(V>t), served within t, P(W≤t)])`.
type FewerServers = (f64, f64, f64, u64, f64, [f64; 5]);
const FEWER_SERVERS: [FewerServers; 4] = [
    (
        10.0,
        1.0,
        0.01,
        8,
        1.0,
        [
            0.999_999_999_987_124_7,
            0.200_000_000_002_691_46,
            0.999_999_999_823_007_93,
            1.759_250_839_241_337_1e-10,
            0.009_950_166_426_062_919_1,
        ],
    ),
    (
        1000.0,
        1.0,
        1.0,
        500,
        0.01,
        [
            1.0,
            0.5,
            1.0,
            5.921_398_106_880_907_4e-67,
            0.009_950_166_250_831_946_6,
        ],
    ),
    (
        50.0,
        1.0,
        0.2,
        40,
        0.5,
        [
            0.999_606_329_069_947_55,
            0.200_026_128_523_624_98,
            0.964_259_730_528_178_16,
            0.033_209_929_696_922_108,
            0.127_501_715_112_833_13,
        ],
    ),
    (
        10.0,
        1.0,
        1e-3,
        8,
        1.0,
        [
            1.0,
            0.2,
            1.0,
            6.008_290_628_368_600_1e-95,
            0.000_999_500_166_625_008_35,
        ],
    ),
];

#[test]
fn erlang_a_with_fewer_servers_than_the_load() {
    for (lambda, mu, theta, n, t, expected) in FEWER_SERVERS {
        let queue = ErlangA::new(lambda, mu, theta).unwrap();
        let actual = [
            queue.prob_wait(n).unwrap(),
            queue.prob_abandon(n).unwrap(),
            queue.prob_virtual_wait_exceeds(n, t).unwrap(),
            queue.service_level(n, t).unwrap(),
            queue.prob_wait_within(n, t).unwrap(),
        ];
        for (i, (actual, expected)) in actual.into_iter().zip(expected).enumerate() {
            assert!((0.0..=1.0).contains(&actual));
            // The served-within-t fraction is computed as a difference: accurate in absolute
            // terms (1e-12) when it is tiny; everything else relative.
            let error = if i == 3 {
                (actual - expected).abs()
            } else {
                ((actual - expected) / expected).abs()
            };
            assert!(
                error < 1e-11,
                "λ {lambda}, θ {theta}, N {n}: quantity {i} = {actual:e}, expected {expected:e}"
            );
        }
    }
}

#[test]
fn erlang_a_refuses_overloads_too_deep_to_sum() {
    // (λ − Nμ)/θ = 2e8 growing terms: refused at once instead of summing for seconds.
    let patient = ErlangA::new(10.0, 1.0, 1e-8).unwrap();
    let started = std::time::Instant::now();
    assert_eq!(
        patient.prob_wait(8),
        Err(ErlangError::OutOfRange {
            field: "abandon_rate",
            value: 1e-8
        })
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
    // With enough servers the same queue is fine.
    assert!(patient.prob_wait(12).unwrap() < 1.0);
    assert_eq!(
        ErlangA::new(1.0, 1.0, 1e-320).unwrap().prob_wait(1),
        Err(ErlangError::OutOfRange {
            field: "abandon_rate",
            value: 1e-320
        })
    );
}

#[test]
fn loads_beyond_the_supported_range_are_refused() {
    for (lambda, mu) in [(1.0, 1e-320), (1e20, 1.0), (1e13, 1.0)] {
        assert!(
            matches!(
                MMc::new(lambda, mu),
                Err(ErlangError::OutOfRange {
                    field: "offered_load",
                    ..
                })
            ),
            "{lambda}/{mu}"
        );
    }
    assert!(MMc::new(1e12, 1.0).is_ok());
    // Finiteness is checked for every input before any sign or range.
    assert_eq!(
        MMc::new(-1.0, f64::NAN),
        Err(ErlangError::NonFinite {
            field: "service_rate"
        })
    );
    assert_eq!(
        ErlangA::new(-1.0, 1.0, f64::NAN),
        Err(ErlangError::NonFinite {
            field: "abandon_rate"
        })
    );
    let queue = MMc::new(5.0, 1.0).unwrap();
    assert_eq!(
        queue.min_servers(Target::ServiceLevel {
            within: -1.0,
            at_least: f64::NAN
        }),
        Err(ErlangError::NonFinite { field: "at_least" })
    );
}

#[test]
fn wait_percentiles_are_never_negative() {
    // q at 1 − C, where a separately rounded 1 − C used to give −1.9e-10.
    let staffed = MMc::new(278.22817252422936, 1.0)
        .unwrap()
        .with_servers(379)
        .unwrap();
    assert!(staffed.wait_percentile(0.9999999940406185).unwrap() >= 0.0);
    for a in [1.0, 7.3, 278.22817252422936, 1e4] {
        let queue = MMc::new(a, 1.0).unwrap();
        for servers in [a.ceil() as u64 + 1, (a + 3.0 * a.sqrt()) as u64 + 2] {
            let staffed = queue.with_servers(servers).unwrap();
            let c = staffed.prob_wait();
            for q in [
                1.0 - c,
                (1.0 - c).next_up(),
                (1.0 - c).next_down(),
                0.5,
                0.999999,
            ] {
                if (0.0..1.0).contains(&q) {
                    let t = staffed.wait_percentile(q).unwrap();
                    assert!(t >= 0.0, "a {a}, c {servers}, q {q}: {t}");
                }
            }
        }
    }
}

#[test]
fn shrinkage_rounds_up_exactly() {
    let queue = MMc::new(10.0, 1.0).unwrap();
    let target = Target::ServiceLevel {
        within: 0.0,
        at_least: 0.0,
    };
    let options = StaffingOptions {
        min_servers: 21,
        shrinkage: 0.3,
        ..StaffingOptions::default()
    };
    // 30 · 0.7 = 21 exactly enough; 21 / 0.7 rounds to 30.000000000000004.
    assert_eq!(queue.min_servers_with(target, &options), Ok(30));
}
