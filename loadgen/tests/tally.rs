//! Tallies: merging, spans of seconds, and the latency quantiles.

use std::time::Duration;

use admit_loadgen::{Lost, Outcome, Refusal, Report, Tally};
use http::StatusCode;

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

fn refusal(reason: &str) -> Outcome {
    Outcome::Refused(Refusal {
        status: StatusCode::SERVICE_UNAVAILABLE,
        retry_after: None,
        reason: Some(reason.to_owned()),
    })
}

#[test]
fn a_span_adds_up_counts_reasons_and_latencies() {
    let mut seconds = vec![Tally::new(), Tally::new(), Tally::new()];
    // Short latencies in one second, long ones in another: the merged histogram holds both.
    for latency in 1..=99 {
        seconds[0].record(&Outcome::Ok, Duration::from_micros(latency * 10));
    }
    seconds[0].record(&refusal("overload"), ms(2));
    seconds[1].record(&Outcome::Ok, Duration::from_secs(90));
    seconds[1].record(&refusal("overload"), ms(4));
    seconds[1].record(&refusal("rate-limit"), Duration::ZERO);
    seconds[2].record(&Outcome::Lost(Lost::Other), Duration::ZERO);
    let report = Report {
        total: Tally::new(),
        seconds,
    };

    let first_two = report.span(0..2);
    assert_eq!(
        (first_two.offered, first_two.ok, first_two.refused),
        (103, 100, 3)
    );
    assert_eq!(first_two.refusal_reasons.get("overload"), Some(&2));
    assert_eq!(first_two.refusal_reasons.get("rate-limit"), Some(&1));
    assert_eq!(first_two.p50(), Some(Duration::from_micros(500)));
    assert_eq!(first_two.p99(), Some(Duration::from_micros(990)));
    // The refusals' own histogram, an instant one counted as 1 µs.
    assert_eq!(first_two.refusal_us.len(), 3);
    assert_eq!(
        first_two.refusal_quantile(0.5),
        Some(Duration::from_micros(2000))
    );
    assert_eq!(
        first_two.refusal_quantile(0.0),
        Some(Duration::from_micros(1))
    );
    // 90 s, to 0.1 %.
    let max = first_two.max().unwrap();
    assert!(
        max >= Duration::from_secs(90) && max < Duration::from_millis(90_090),
        "{max:?}"
    );

    // Spans are clamped to the run.
    assert_eq!(report.span(2..10).lost.other, 1);
    assert_eq!(report.span(5..10), Tally::new());
}

#[test]
fn failed_counts_every_useless_answer() {
    let mut tally = Tally::new();
    for outcome in [
        Outcome::Ok,
        refusal("overload"),
        Outcome::Status(StatusCode::BAD_GATEWAY),
        Outcome::TimedOut,
        Outcome::Lost(Lost::Reset),
        Outcome::Lost(Lost::Closed),
        Outcome::Dropped,
    ] {
        tally.record(&outcome, ms(1));
    }
    assert_eq!(
        (tally.offered, tally.ok, tally.refused, tally.failed()),
        (7, 1, 1, 5)
    );
    // Only OK answers have a latency, and only refusals a refusal time.
    assert_eq!(tally.latency_us.len(), 1);
    assert_eq!(tally.refusal_us.len(), 1);
}

#[test]
fn a_quantile_needs_an_answer() {
    let mut tally = Tally::new();
    assert_eq!((tally.p50(), tally.p99(), tally.max()), (None, None, None));
    assert_eq!(tally.refusal_quantile(0.5), None);
    tally.record(&Outcome::TimedOut, ms(500));
    assert_eq!(tally.p99(), None);
}
