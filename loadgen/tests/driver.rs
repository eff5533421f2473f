//! The driver on tokio's paused clock, through a transport that answers as each request's path
//! says: when requests are sent, dropped, timed out, and reported per second.

use std::future::pending;
use std::time::Duration;

use admit_loadgen::{
    Arrival, Backoff, Budget, Driver, Lost, Outcome, Refusal, Report, Retry, Tally, Trace,
    Transport,
};
use http::{Request, StatusCode};
use tokio::time::Instant;

/// Answers after the path's delay: `/ok/<ms>`, `/refuse`, `/status/<code>`, `/reset`, or
/// `/never` (no answer at all).
#[derive(Clone, Debug)]
struct Scripted;

impl Transport<()> for Scripted {
    async fn send(&self, request: Request<()>) -> Outcome {
        let path = request.uri().path().to_owned();
        let mut parts = path.trim_start_matches('/').split('/');
        match (parts.next(), parts.next()) {
            (Some("ok"), Some(millis)) => {
                tokio::time::sleep(Duration::from_millis(millis.parse().unwrap())).await;
                Outcome::Ok
            }
            (Some("refuse"), None) => Outcome::Refused(Refusal {
                status: StatusCode::SERVICE_UNAVAILABLE,
                retry_after: Some("1".to_owned()),
                reason: Some("overload".to_owned()),
            }),
            (Some("status"), Some(code)) => {
                Outcome::Status(StatusCode::from_bytes(code.as_bytes()).unwrap())
            }
            (Some("reset"), None) => Outcome::Lost(Lost::Reset),
            (Some("never"), None) => pending().await,
            _ => panic!("unscripted path {path}"),
        }
    }
}

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

/// Requests to `paths[i]` due at `times[i]`.
fn script(times: &[u64], paths: &[&'static str]) -> (Vec<Arrival>, Vec<&'static str>) {
    assert_eq!(times.len(), paths.len());
    let arrivals = times
        .iter()
        .enumerate()
        .map(|(i, &at)| Arrival {
            index: i as u64,
            at: ms(at),
            attempt: 0,
        })
        .collect();
    (arrivals, paths.to_vec())
}

/// A request for the arrival's scripted path.
fn request(paths: &[&str], arrival: Arrival) -> Request<()> {
    Request::get(paths[arrival.index as usize])
        .body(())
        .unwrap()
}

/// A tally of `outcomes`, each with its latency, to compare with the driver's.
fn tally_of(outcomes: &[(Outcome, u64)]) -> Tally {
    let mut tally = Tally::new();
    for (outcome, latency) in outcomes {
        tally.record(outcome, ms(*latency));
    }
    tally
}

#[tokio::test(start_paused = true)]
async fn every_outcome_counts_in_the_second_it_was_due() {
    let (arrivals, paths) = script(
        &[0, 100, 200, 300, 400, 900, 1_100, 1_200, 2_950],
        &[
            "/ok/10",
            "/refuse",
            "/status/500",
            "/reset",
            "/never",
            "/ok/300",
            "/ok/20",
            "/never",
            "/ok/40",
        ],
    );
    let report = Driver::new(ms(500))
        .run(
            &Scripted,
            Duration::from_secs(3),
            arrivals,
            |a| request(&paths, a),
            |_, _| {},
        )
        .await;

    let refusal = Outcome::Refused(Refusal {
        status: StatusCode::SERVICE_UNAVAILABLE,
        retry_after: Some("1".to_owned()),
        reason: Some("overload".to_owned()),
    });
    let expected = [
        tally_of(&[
            (Outcome::Ok, 10),
            (refusal, 0),
            (Outcome::Status(StatusCode::INTERNAL_SERVER_ERROR), 0),
            (Outcome::Lost(Lost::Reset), 0),
            (Outcome::TimedOut, 500),
            (Outcome::Ok, 300),
        ]),
        tally_of(&[(Outcome::Ok, 20), (Outcome::TimedOut, 500)]),
        tally_of(&[(Outcome::Ok, 40)]),
    ];
    assert_eq!(report.seconds, expected);
    let first = &report.seconds[0];
    assert_eq!(
        (first.offered, first.ok, first.refused, first.other_status),
        (6, 2, 1, 1)
    );
    assert_eq!(
        (first.timed_out, first.lost.reset, first.failed()),
        (1, 1, 3)
    );
    assert_eq!(first.refusal_reasons.get("overload"), Some(&1));
    // The paused clock runs each request exactly as long as the script says; quantiles are
    // the highest value of their histogram bucket (within 0.1 %).
    assert_eq!(first.latency_us.len(), 2);
    assert_eq!(first.p50(), Some(Duration::from_micros(10_007)));
    assert_eq!(first.max(), Some(Duration::from_micros(300_031)));
    let mut total = Tally::new();
    expected.iter().for_each(|t| total.merge(t));
    assert_eq!(report.total, total);
    assert_eq!((report.total.offered, report.total.ok), (9, 4));
}

#[tokio::test(start_paused = true)]
async fn each_second_is_reported_once_in_order_after_its_requests_settle() {
    // Second 0 waits for its last request's deadline (0.9 s + 0.5 s); second 1, without a
    // request, for its own end; second 2 for its end (3 s), after its answer (2.0 s + 0.3 s).
    let (arrivals, paths) = script(&[0, 900, 2_000], &["/ok/10", "/never", "/ok/300"]);
    let start = Instant::now();
    let mut reports: Vec<(usize, Tally, Duration)> = Vec::new();
    let report = Driver::new(ms(500))
        .run(
            &Scripted,
            Duration::from_millis(2_500),
            arrivals,
            |a| request(&paths, a),
            |second, tally| reports.push((second, tally.clone(), start.elapsed())),
        )
        .await;

    let seconds: Vec<usize> = reports.iter().map(|r| r.0).collect();
    assert_eq!(seconds, [0, 1, 2]);
    for (second, tally, _) in &reports {
        assert_eq!(tally, &report.seconds[*second], "second {second}");
    }
    let at: Vec<Duration> = reports.iter().map(|r| r.2).collect();
    assert_eq!(at, [ms(1_400), ms(2_000), ms(3_000)]);
    assert_eq!(report.seconds[1], Tally::new());
}

#[tokio::test(start_paused = true)]
async fn arrivals_beyond_the_in_flight_cap_are_dropped() {
    // Five at once with room for two; once those two time out (at 0.5 s) there is room again.
    let (arrivals, paths) = script(
        &[0, 0, 0, 0, 0, 600],
        &["/never", "/never", "/never", "/ok/10", "/ok/10", "/ok/10"],
    );
    let driver = Driver::new(ms(500)).max_in_flight(2);
    assert_eq!(driver.in_flight_limit(), 2);
    let report = driver
        .run(
            &Scripted,
            Duration::from_secs(1),
            arrivals,
            |a| request(&paths, a),
            |_, _| {},
        )
        .await;
    let tally = &report.total;
    assert_eq!(
        (tally.offered, tally.timed_out, tally.dropped, tally.ok),
        (6, 2, 3, 1)
    );
}

#[tokio::test(start_paused = true)]
async fn a_run_lasts_its_span_and_reports_every_second() {
    let start = Instant::now();
    let mut reported = Vec::new();
    let report = Driver::new(ms(500))
        .run(
            &Scripted,
            Duration::from_millis(2_500),
            Vec::new(),
            |a| request(&[], a),
            |second, _| reported.push(second),
        )
        .await;
    assert_eq!(reported, [0, 1, 2]);
    assert_eq!(
        report,
        Report {
            seconds: vec![Tally::new(); 3],
            total: Tally::new(),
        }
    );
    assert_eq!(start.elapsed(), Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn arrivals_past_the_span_extend_the_run() {
    let (arrivals, paths) = script(&[1_500], &["/ok/10"]);
    let mut reported = Vec::new();
    let report = Driver::new(ms(500))
        .run(
            &Scripted,
            Duration::ZERO,
            arrivals,
            |a| request(&paths, a),
            |second, tally| reported.push((second, tally.ok)),
        )
        .await;
    assert_eq!(reported, [(0, 0), (1, 1)]);
    assert_eq!(report.seconds.len(), 2);

    let mut reported = 0;
    let report = Driver::new(ms(500))
        .run(
            &Scripted,
            Duration::ZERO,
            Vec::new(),
            |a| request(&[], a),
            |_, _| reported += 1,
        )
        .await;
    assert_eq!((reported, report.seconds.len()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_poisson_run_sends_every_arrival_of_its_trace() {
    let trace = Trace::spike(
        20.0,
        5.0,
        Duration::from_secs(3),
        Duration::from_secs(1),
        Duration::from_secs(2),
    )
    .unwrap();
    let expected: Vec<Arrival> = trace.arrivals(11).collect();
    let mut indices = Vec::new();
    let report = Driver::new(ms(500))
        .run(
            &Scripted,
            trace.duration(),
            trace.arrivals(11),
            |arrival| {
                indices.push(arrival.index);
                Request::get("/ok/5").body(()).unwrap()
            },
            |_, _| {},
        )
        .await;
    assert_eq!(indices, (0..expected.len() as u64).collect::<Vec<_>>());
    assert_eq!(report.total.ok, expected.len() as u64);
    assert_eq!(report.seconds.len(), 6);
    for (second, tally) in report.seconds.iter().enumerate() {
        let due = expected.iter().filter(|a| a.second() == second).count() as u64;
        assert_eq!(tally.offered, due, "second {second}");
    }
}

/// A request for the arrival's attempt: `paths[i]` lists one path per attempt, split by `|`
/// (the last one for any attempt beyond).
fn attempt(paths: &[&str], arrival: Arrival) -> Request<()> {
    let attempts: Vec<&str> = paths[arrival.index as usize].split('|').collect();
    let path = attempts[(arrival.attempt as usize).min(attempts.len() - 1)];
    Request::get(path).body(()).unwrap()
}

/// Runs `driver` over 1 s of `arrivals`, each attempt built by [`attempt`]; returns the report
/// and every attempt sent, as `(index, attempt, at)`.
async fn run_attempts(
    driver: Driver,
    arrivals: Vec<Arrival>,
    paths: &[&str],
) -> (Report, Vec<(u64, u32, Duration)>) {
    let mut sent = Vec::new();
    let report = driver
        .run(
            &Scripted,
            Duration::from_secs(1),
            arrivals,
            |a| {
                sent.push((a.index, a.attempt, a.at));
                attempt(paths, a)
            },
            |_, _| {},
        )
        .await;
    (report, sent)
}

#[tokio::test(start_paused = true)]
async fn failed_requests_are_tried_again_and_count_once_with_their_last_outcome() {
    let (arrivals, paths) = script(
        &[0, 100, 200, 300, 400],
        &[
            "/refuse|/refuse|/ok/10",
            "/never|/ok/20",
            "/reset|/reset|/reset|/reset",
            "/status/500|/ok/10",
            "/never",
        ],
    );
    let (report, sent) =
        run_attempts(Driver::new(ms(500)).retry(Retry::new(3)), arrivals, &paths).await;

    let tally = &report.total;
    // Two answered after retries; the reset four times over; the 500 is an answer; the
    // silent one timed out four times.
    assert_eq!(
        (
            tally.offered,
            tally.ok,
            tally.lost.reset,
            tally.other_status,
            tally.timed_out
        ),
        (5, 2, 1, 1, 1)
    );
    assert_eq!(
        (tally.retries, tally.retries_denied, tally.refused),
        (2 + 1 + 3 + 3, 0, 0)
    );
    // Immediate retries: each is sent when the attempt before it ends, with the next
    // attempt number, and latencies run from the first attempt.
    assert!(sent.contains(&(1, 1, ms(600))), "{sent:?}");
    assert!(sent.contains(&(4, 3, ms(1_900))), "{sent:?}");
    assert_eq!(
        sent.iter().filter(|s| s.0 == 3).count(),
        1,
        "the 500 was retried"
    );
    assert_eq!(tally.max(), Some(Duration::from_micros(520_191)));
    // Every request counts in second 0, where it was due, though the last ended at 2.4 s.
    assert_eq!(report.seconds.len(), 1);
    assert_eq!(report.seconds[0], report.total);
}

#[tokio::test(start_paused = true)]
async fn retries_wait_their_backoff_and_keep_their_place_under_the_cap() {
    let (arrivals, paths) = script(&[0, 50], &["/refuse|/refuse|/ok/0", "/ok/10"]);
    let backoff = Backoff::exponential(ms(100), ms(150)).unwrap();
    let driver = Driver::new(ms(500))
        .max_in_flight(1)
        .retry(Retry::new(2).backoff(backoff));
    let (report, sent) = run_attempts(driver, arrivals, &paths).await;
    // The first request holds the only slot through its backoff: the second is dropped.
    assert_eq!((report.total.ok, report.total.dropped), (1, 1));
    let first: Vec<Duration> = sent.iter().filter(|s| s.0 == 0).map(|s| s.2).collect();
    assert_eq!(first.len(), 3);
    let (wait1, wait2) = (first[1] - first[0], first[2] - first[1]);
    assert!(
        wait1 < ms(100) && wait2 < ms(150),
        "waits {wait1:?}, {wait2:?}"
    );
    // Its latency runs from the first attempt: both waits (within the histogram's 0.1 %).
    let latency = report.total.max().unwrap().as_secs_f64();
    let waits = (wait1 + wait2).as_secs_f64();
    assert!(
        (latency - waits).abs() <= waits * 1e-3,
        "{latency} for {waits}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_budget_caps_retries_and_the_rest_end_refused() {
    // A floor of 2 retries per second over 1 s, and no share of requests: of five refused
    // requests, two are retried (and refused again), three are not.
    let (arrivals, paths) = script(&[0, 0, 0, 0, 0], &["/refuse"; 5]);
    let budget = Budget::new(0.0, 2.0, Duration::from_secs(1)).unwrap();
    let driver = Driver::new(ms(500)).retry(Retry::new(1).budget(budget));
    let (report, _) = run_attempts(driver, arrivals, &paths).await;
    let tally = &report.total;
    assert_eq!(
        (
            tally.offered,
            tally.refused,
            tally.retries,
            tally.retries_denied
        ),
        (5, 5, 2, 3)
    );
}

#[test]
fn tallies_serialise_with_a_latency_summary() {
    let mut tally = tally_of(&[
        (Outcome::Ok, 10),
        (Outcome::Ok, 30),
        (Outcome::Lost(Lost::ConnectionRefused), 0),
        (Outcome::Dropped, 0),
    ]);
    let json = serde_json::to_value(&tally).unwrap();
    assert_eq!(json["offered"], 4);
    assert_eq!(json["ok"], 2);
    assert_eq!(json["dropped"], 1);
    assert_eq!(json["lost"]["connection_refused"], 1);
    assert_eq!(json["latency_us"]["count"], 2);
    assert_eq!(json["latency_us"]["p50"], 10_007);
    assert_eq!(json["latency_us"]["max"], 30_015);
    tally = Tally::new();
    let json = serde_json::to_value(&tally).unwrap();
    assert_eq!(json["latency_us"]["p99"], serde_json::Value::Null);
}
