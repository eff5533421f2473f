//! The warm-up bucket's share for the critical classes: on a manual clock, a cold replica
//! flooded by sheddable requests still serves its critical ones; with one class in use the
//! decisions are those of a bucket without the share; and a critical request passes wherever
//! a sheddable one would.

use std::time::Duration;

use admit::ConfigError;
use admit::clock::ManualClock;
use admit::criticality::Criticality;
use admit::signal::Arrival;
use admit::warmup::WarmUp;
use admit_loadgen::Trace;
use proptest::prelude::*;

/// A cold bucket at 300 per second once warm, 100 while cold, warming over 10 s.
fn bucket(share: f64, clock: &ManualClock) -> WarmUp<ManualClock> {
    WarmUp::builder(300.0)
        .warm_up_period(Duration::from_secs(10))
        .critical_share(share)
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// Poisson arrivals of two classes over `seconds`, merged in time order.
fn arrivals(critical: f64, sheddable: f64, seconds: u64) -> Vec<(Duration, Criticality)> {
    let span = Duration::from_secs(seconds);
    let of = |rate, seed, class| {
        Trace::constant(rate, span)
            .unwrap()
            .arrivals(seed)
            .map(move |arrival| (arrival.at, class))
    };
    let mut all: Vec<_> = of(critical, 1, Criticality::Critical)
        .chain(of(sheddable, 2, Criticality::Sheddable))
        .collect();
    all.sort();
    all
}

/// Offers `arrivals` to a fresh bucket with `share`, and returns the admitted and offered
/// counts of the critical and the sheddable requests.
fn offer(share: f64, arrivals: &[(Duration, Criticality)]) -> [(u32, u32); 2] {
    let clock = ManualClock::new();
    let limiter = bucket(share, &clock);
    let mut counts = [(0, 0); 2];
    for &(at, class) in arrivals {
        clock.set(at);
        let count = &mut counts[usize::from(class != Criticality::Critical)];
        count.0 += u32::from(
            limiter
                .try_acquire_with(Arrival::new().with_class(class))
                .is_ok(),
        );
        count.1 += 1;
    }
    counts
}

#[test]
fn a_cold_replica_flooded_by_prefetches_serves_its_checkouts() {
    // Checkouts at half the cold rate, prefetches at ten times the full rate, for the whole
    // warm-up and 10 s more.
    let arrivals = arrivals(50.0, 3000.0, 20);
    let [(critical, offered), (sheddable, _)] = offer(0.5, &arrivals);
    assert!(
        f64::from(critical) >= 0.999 * f64::from(offered),
        "{critical} of {offered} critical requests admitted"
    );
    // The bucket still admits its rate, the prefetches what the checkouts leave: only the
    // burst they may not run ahead into, half a second at the full rate, is missing at the end.
    let [(critical_0, _), (sheddable_0, _)] = offer(0.0, &arrivals);
    let (total, total_0) = (critical + sheddable, critical_0 + sheddable_0);
    println!(
        "critical admitted: {critical} of {offered} with the share, {critical_0} without; \
         all admitted: {total} with, {total_0} without"
    );
    assert!(
        total <= total_0 && total_0 - total <= 150 + 3,
        "{total} admitted with the share, {total_0} without"
    );
    // Without the share the checkouts are refused with the flood.
    assert!(
        f64::from(critical_0) < 0.5 * f64::from(offered),
        "{critical_0} of {offered} admitted without the share"
    );
}

#[test]
fn a_share_outside_zero_to_one_is_a_typed_error() {
    for share in [-0.5, 1.01, f64::NAN, f64::NEG_INFINITY] {
        let error = WarmUp::builder(10.0)
            .critical_share(share)
            .build()
            .unwrap_err();
        assert!(
            matches!(error, ConfigError::CriticalShareOutOfRange { critical_share }
                if critical_share.to_bits() == share.to_bits()),
            "{error:?}"
        );
        assert_eq!(error.setting(), "critical_share");
    }
    for share in [0.0, 0.25, 1.0] {
        assert!(WarmUp::builder(10.0).critical_share(share).build().is_ok());
    }
}

/// Gaps between requests, µs: together, close, and spread.
fn gaps() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(
        prop_oneof![Just(0u64), 0u64..20_000, 0u64..2_000_000],
        1..120,
    )
}

fn class() -> impl Strategy<Value = Criticality> {
    prop::sample::select(Criticality::ALL.to_vec())
}

proptest! {
    /// With every request of one critical class, or with none named, the share changes
    /// nothing.
    #[test]
    fn one_critical_class_decides_as_a_bucket_without_the_share(
        gaps in gaps(),
        share in 0.0f64..=1.0,
        class in prop::sample::select(vec![Criticality::Critical, Criticality::CriticalPlus]),
    ) {
        let clock = ManualClock::new();
        let (with, without) = (bucket(share, &clock), bucket(0.0, &clock));
        for gap in gaps {
            clock.advance(Duration::from_micros(gap));
            let expected = without.try_acquire().is_ok();
            prop_assert_eq!(with.try_acquire_with(Arrival::new().with_class(class)).is_ok(), expected);
        }
    }

    /// In any state a history of mixed classes leaves, a critical request passes wherever a
    /// sheddable one would, and a `SheddablePlus` one wherever a `Sheddable` one would.
    #[test]
    fn a_higher_class_passes_wherever_a_lower_one_would(
        history in prop::collection::vec((0u64..50_000, class()), 1..60),
        share in 0.0f64..=1.0,
    ) {
        for end in 1..=history.len() {
            let at = |class: Criticality| {
                let clock = ManualClock::new();
                let limiter = bucket(share, &clock);
                for &(gap, earlier) in &history[..end - 1] {
                    clock.advance(Duration::from_micros(gap));
                    let _ = limiter.try_acquire_with(Arrival::new().with_class(earlier));
                }
                clock.advance(Duration::from_micros(history[end - 1].0));
                limiter.try_acquire_with(Arrival::new().with_class(class)).is_ok()
            };
            let passes: Vec<bool> = Criticality::ALL.iter().map(|&class| at(class)).collect();
            // `ALL` runs from the lowest class up: once one passes, every one above it does.
            prop_assert!(passes.windows(2).all(|pair| !pair[0] || pair[1]), "{:?}", passes);
        }
    }
}
