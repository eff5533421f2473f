//! Rate traces: their validation, shapes and integrals.

use std::time::Duration;

use admit_loadgen::{Segment, Trace, TraceError};

fn s(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

#[test]
fn a_trace_needs_a_segment() {
    assert_eq!(Trace::builder().build(), Err(TraceError::Empty));
}

#[test]
fn rates_must_be_finite_and_non_negative() {
    for bad in [-1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let constant = Trace::builder()
            .constant(10.0, s(1))
            .constant(bad, s(1))
            .build();
        assert!(
            matches!(constant, Err(TraceError::Rate { segment: 1, rate }) if rate.to_bits() == bad.to_bits()),
            "{bad}: {constant:?}"
        );
        let ramp_end = Trace::builder().ramp(10.0, bad, s(1)).build();
        assert!(
            matches!(ramp_end, Err(TraceError::Rate { segment: 0, .. })),
            "{bad}: {ramp_end:?}"
        );
        let ramp_start = Trace::builder().ramp(bad, 10.0, s(1)).build();
        assert!(
            matches!(ramp_start, Err(TraceError::Rate { segment: 0, .. })),
            "{bad}: {ramp_start:?}"
        );
    }
    // Zero is a rate: a pause.
    assert!(Trace::constant(0.0, s(1)).is_ok());
}

#[test]
fn durations_must_be_positive_and_add_up() {
    let zero = Trace::builder()
        .constant(1.0, s(1))
        .ramp(1.0, 2.0, Duration::ZERO)
        .build();
    assert_eq!(zero, Err(TraceError::ZeroDuration { segment: 1 }));
    let too_long = Trace::builder()
        .constant(1.0, Duration::MAX)
        .constant(1.0, s(1))
        .build();
    assert_eq!(too_long, Err(TraceError::TooLong));
}

#[test]
fn a_step_and_its_factor_are_validated() {
    let negative = Trace::step(10.0, -2.0, s(1), s(1), s(1));
    assert!(matches!(negative, Err(TraceError::Rate { segment: 1, .. })));
    let overflow = Trace::spike(f64::MAX, 10.0, s(1), s(1), s(1));
    assert!(matches!(overflow, Err(TraceError::Rate { segment: 1, .. })));
    let no_burst = Trace::spike(10.0, 10.0, s(1), Duration::ZERO, s(1));
    assert_eq!(no_burst, Err(TraceError::ZeroDuration { segment: 1 }));
}

#[test]
fn errors_name_the_segment() {
    let error = Trace::builder()
        .constant(1.0, s(1))
        .constant(-3.0, s(1))
        .build()
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "segment 1: the rate -3 is not a finite, non-negative number of requests per second"
    );
}

#[test]
fn a_step_is_base_then_k_times_then_base() {
    let trace = Trace::step(100.0, 3.0, s(10), s(20), s(5)).unwrap();
    assert_eq!(trace.duration(), s(35));
    assert_eq!(
        trace.segments(),
        [
            Segment::Constant {
                rate: 100.0,
                duration: s(10)
            },
            Segment::Constant {
                rate: 300.0,
                duration: s(20)
            },
            Segment::Constant {
                rate: 100.0,
                duration: s(5)
            },
        ]
    );
    // Each segment's rate holds from its start (inclusive) to its end (exclusive).
    assert_eq!(trace.rate_at(Duration::ZERO), 100.0);
    assert_eq!(trace.rate_at(s(10) - Duration::from_nanos(1)), 100.0);
    assert_eq!(trace.rate_at(s(10)), 300.0);
    assert_eq!(trace.rate_at(s(30)), 100.0);
    assert_eq!(trace.rate_at(s(35)), 0.0);
    assert_eq!(trace.expected_arrivals(Duration::ZERO, s(35)), 7500.0);
    assert_eq!(trace.expected_arrivals(s(5), s(15)), 500.0 + 1500.0);
}

#[test]
fn a_spike_is_a_short_burst_over_the_base() {
    let trace = Trace::spike(50.0, 10.0, s(30), ms(2500), s(30)).unwrap();
    assert_eq!(trace.segment_start(1), Some(s(30)));
    assert_eq!(trace.segment_start(2), Some(s(30) + ms(2500)));
    assert_eq!(trace.segment_start(3), None);
    assert_eq!(trace.rate_at(s(31)), 500.0);
    assert_eq!(trace.rate_at(s(33)), 50.0);
    assert_eq!(trace.expected_arrivals(s(30), s(30) + ms(2500)), 1250.0);
}

#[test]
fn a_ramp_moves_linearly_and_integrates_to_its_mean() {
    let trace = Trace::builder()
        .ramp(100.0, 500.0, s(4))
        .ramp(500.0, 0.0, s(10))
        .build()
        .unwrap();
    assert_eq!(trace.rate_at(Duration::ZERO), 100.0);
    assert_eq!(trace.rate_at(s(1)), 200.0);
    assert_eq!(trace.rate_at(s(3)), 400.0);
    assert_eq!(trace.rate_at(s(4)), 500.0);
    assert_eq!(trace.rate_at(s(9)), 250.0);
    // The integral of a linear rate: the mean of its ends times the length.
    assert_eq!(trace.expected_arrivals(Duration::ZERO, s(4)), 1200.0);
    assert_eq!(trace.expected_arrivals(s(4), s(14)), 2500.0);
    // Within a ramp: 100 t + 50 t² from 0 to 2 s, minus the same to 1 s.
    assert_eq!(trace.expected_arrivals(s(1), s(2)), 400.0 - 150.0);
    // Past the end, and backwards, nothing is expected.
    assert_eq!(trace.expected_arrivals(s(14), s(100)), 0.0);
    assert_eq!(trace.expected_arrivals(s(2), s(1)), 0.0);
}
