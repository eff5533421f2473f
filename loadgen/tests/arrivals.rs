//! Poisson arrivals over a trace: reproducible, ordered, and with the counts a non-homogeneous
//! Poisson process has. Every seed is fixed, so each statistical check has one fixed outcome;
//! the bounds (four standard deviations) say which outcomes a correct process gives.

use std::time::Duration;

use admit_loadgen::{Arrival, Trace};

fn s(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

/// A trace with every kind of segment: constant, ramps up and down, a pause and a burst.
fn varied() -> Trace {
    Trace::builder()
        .constant(50.0, s(20))
        .ramp(0.0, 400.0, s(10))
        .constant(0.0, s(5))
        .constant(1000.0, s(2))
        .ramp(400.0, 20.0, s(10))
        .build()
        .unwrap()
}

/// How many of `arrivals` fall in `[from, to)`.
fn count(arrivals: &[Arrival], from: Duration, to: Duration) -> u64 {
    arrivals
        .iter()
        .filter(|a| a.at >= from && a.at < to)
        .count() as u64
}

/// Asserts that a Poisson count of mean `expected` came out within four standard deviations.
fn assert_poisson(what: &str, observed: u64, expected: f64) {
    let sd = expected.sqrt();
    assert!(
        (observed as f64 - expected).abs() <= 4.0 * sd,
        "{what}: {observed} arrivals, expected {expected:.1} ± {:.1} (4 sd)",
        4.0 * sd
    );
}

#[test]
fn the_same_seed_gives_the_same_arrivals() {
    let trace = varied();
    let first: Vec<Arrival> = trace.arrivals(7).collect();
    assert_eq!(first, trace.arrivals(7).collect::<Vec<_>>());
    assert_ne!(first, trace.arrivals(8).collect::<Vec<_>>());
}

#[test]
fn arrivals_are_indexed_in_time_order_within_the_trace() {
    let trace = varied();
    let arrivals: Vec<Arrival> = trace.arrivals(1).collect();
    assert!(!arrivals.is_empty());
    for (i, arrival) in arrivals.iter().enumerate() {
        assert_eq!(arrival.index, i as u64);
        assert!(arrival.at < trace.duration(), "{arrival:?}");
    }
    assert!(arrivals.windows(2).all(|w| w[0].at <= w[1].at));
}

#[test]
fn each_segment_gets_its_expected_count() {
    let trace = varied();
    let arrivals: Vec<Arrival> = trace.arrivals(2024).collect();
    for (index, segment) in trace.segments().iter().enumerate() {
        let from = trace.segment_start(index).unwrap();
        let to = from + segment.duration();
        let expected = trace.expected_arrivals(from, to);
        assert_poisson(
            &format!("segment {index} ({segment:?})"),
            count(&arrivals, from, to),
            expected,
        );
    }
    // The pause has a rate of zero: not one arrival.
    assert_eq!(count(&arrivals, s(30), s(35)), 0);
}

#[test]
fn a_ramp_s_arrivals_follow_its_slope() {
    // 0 to 1000/s over 10 s: the first second expects 50 arrivals, the last 950.
    let trace = Trace::builder().ramp(0.0, 1000.0, s(10)).build().unwrap();
    let arrivals: Vec<Arrival> = trace.arrivals(99).collect();
    for second in 0..10 {
        let (from, to) = (s(second), s(second + 1));
        assert_poisson(
            &format!("second {second} of the ramp"),
            count(&arrivals, from, to),
            trace.expected_arrivals(from, to),
        );
    }
}

#[test]
fn counts_per_second_are_as_dispersed_as_a_poisson_process() {
    // A Poisson count's variance equals its mean: the index of dispersion (sample variance
    // over mean) of 400 one-second counts is 1 ± 0.07 (one sd). Evenly spaced arrivals
    // would give 0, bursts more than 1.
    let trace = Trace::constant(100.0, s(400)).unwrap();
    let arrivals: Vec<Arrival> = trace.arrivals(5).collect();
    let counts: Vec<f64> = (0..400)
        .map(|second| count(&arrivals, s(second), s(second + 1)) as f64)
        .collect();
    let mean = counts.iter().sum::<f64>() / counts.len() as f64;
    let variance =
        counts.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / (counts.len() - 1) as f64;
    let dispersion = variance / mean;
    assert!(
        (dispersion - 1.0).abs() <= 4.0 * (2.0 / 399.0_f64).sqrt(),
        "index of dispersion {dispersion:.3} (mean {mean:.1}, variance {variance:.1})"
    );
    assert_poisson("the whole run", arrivals.len() as u64, 40_000.0);
}

#[test]
fn a_silent_trace_has_no_arrivals() {
    let trace = Trace::constant(0.0, s(60)).unwrap();
    assert_eq!(trace.arrivals(3).count(), 0);
}

#[test]
fn a_tiny_rate_is_not_rounded_away() {
    // 0.5 arrivals expected per run: over 400 seeds, about 200 arrivals in all.
    let trace = Trace::constant(0.001, s(500)).unwrap();
    let total: u64 = (0..400)
        .map(|seed| trace.arrivals(seed).count() as u64)
        .sum();
    assert_poisson("400 runs at 0.001/s for 500 s", total, 200.0);
}
