//! One point of the overload curve: a fresh server held at one offered load.

use std::collections::BTreeMap;
use std::time::Duration;

use admit_loadgen::{Driver, HttpClient, Report, Tally, Trace, Transport};
use bytes::Bytes;
use http::Uri;
use http_body_util::Empty;
use tokio::time::Instant;

use crate::process::ServerProcess;
use crate::run::Schedule;
use crate::server::ServeArgs;
use crate::{BoxError, request_start};

/// The seed of every point's Poisson arrivals.
const SEED: u64 = 0x5eed_0fc0_ffee;

/// What a point measured, over its measured seconds.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct Point {
    /// Offered load, as a multiple of the capacity.
    pub(crate) load: f64,
    /// Requests offered per second.
    pub(crate) offered_per_s: f64,
    /// OK answers within the deadline per second, over the capacity.
    pub(crate) goodput: f64,
    /// Latency of the OK answers, ms.
    pub(crate) p50_ms: Option<f64>,
    pub(crate) p99_ms: Option<f64>,
    pub(crate) p999_ms: Option<f64>,
    /// Share of the requests refused (503 or 429).
    pub(crate) refused: f64,
    /// Refusals by the reason the server gave (admit's `admit-refusal` header).
    pub(crate) refusal_reasons: BTreeMap<String, u64>,
    /// How long a refusal took to arrive, ms.
    pub(crate) refusal_p50_ms: Option<f64>,
    pub(crate) refusal_p99_ms: Option<f64>,
    /// Share of the requests without a useful answer: timed out, lost, dropped for the load
    /// generator's cap, or another status.
    pub(crate) timed_out: f64,
}

impl Point {
    /// The figures of `tally`, over `seconds` measured at `load` × `capacity`.
    pub(crate) fn of(tally: &Tally, load: f64, capacity: f64, seconds: u64) -> Point {
        let seconds = seconds.max(1) as f64;
        let offered = tally.offered.max(1) as f64;
        let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1e3);
        Point {
            load,
            offered_per_s: tally.offered as f64 / seconds,
            goodput: tally.ok as f64 / seconds / capacity,
            p50_ms: ms(tally.latency_quantile(0.5)),
            p99_ms: ms(tally.latency_quantile(0.99)),
            p999_ms: ms(tally.latency_quantile(0.999)),
            refused: tally.refused as f64 / offered,
            refusal_reasons: tally.refusal_reasons.clone(),
            refusal_p50_ms: ms(tally.refusal_quantile(0.5)),
            refusal_p99_ms: ms(tally.refusal_quantile(0.99)),
            timed_out: tally.failed() as f64 / offered,
        }
    }
}

/// Starts a fresh server as `server` says, offers `load` × `capacity` for the schedule, and
/// measures the last part.
pub(crate) async fn run(
    server: &ServeArgs,
    pinned: bool,
    capacity: f64,
    load: f64,
    schedule: Schedule,
) -> Result<Point, BoxError> {
    let trace = Trace::constant(
        load * capacity,
        Duration::from_secs(schedule.warm + schedule.measured),
    )?;
    let driver = Driver::new(schedule.deadline);
    let (report, _) = offer(server, pinned, &trace, SEED, driver, &HttpClient::new()).await?;
    let warm = schedule.warm as usize;
    let measured = report.span(warm..warm + schedule.measured as usize);
    Ok(Point::of(&measured, load, capacity, schedule.measured))
}

/// Starts a fresh server as `server` says and offers it `trace` (its arrivals drawn from
/// `seed`) through `driver` and `transport`, each request a GET of `/work`; returns the report
/// and when the run started.
pub(crate) async fn offer<T: Transport<Empty<Bytes>>>(
    server: &ServeArgs,
    pinned: bool,
    trace: &Trace,
    seed: u64,
    driver: Driver,
    transport: &T,
) -> Result<(Report, Instant), BoxError> {
    let process = ServerProcess::start(server, pinned)?;
    let work: Uri = format!("http://{}/work", process.addr()).parse()?;
    let start = Instant::now();
    let report = driver
        .run(
            transport,
            trace.duration(),
            trace.arrivals(seed),
            |_| get(&work),
            |_, _| {},
        )
        .await;
    drop(process);
    Ok((report, start))
}

/// A GET of `uri`, stamped with `X-Request-Start` as a proxy would.
fn get(uri: &Uri) -> http::Request<Empty<Bytes>> {
    http::Request::get(uri.clone())
        .header("x-request-start", request_start())
        .body(Empty::new())
        .expect("a GET of a parsed URI with an ASCII header")
}

#[cfg(test)]
mod tests {
    use admit_loadgen::{Outcome, Refusal};
    use http::StatusCode;

    use super::*;

    #[test]
    fn a_point_reads_its_shares_and_quantiles_from_the_tally() {
        let mut tally = Tally::new();
        for ms in 1..=8 {
            tally.record(&Outcome::Ok, Duration::from_millis(ms));
        }
        let refusal = Outcome::Refused(Refusal {
            status: StatusCode::SERVICE_UNAVAILABLE,
            retry_after: Some("1".to_owned()),
            reason: Some("overload".to_owned()),
        });
        tally.record(&refusal, Duration::from_micros(300));
        tally.record(&Outcome::TimedOut, Duration::from_millis(500));
        // 10 requests over 2 s at a capacity of 4/s: 8 answered, 4 per second, all of it.
        let point = Point::of(&tally, 1.25, 4.0, 2);
        assert_eq!(point.offered_per_s, 5.0);
        assert_eq!(point.goodput, 1.0);
        assert_eq!(point.refused, 0.1);
        assert_eq!(point.timed_out, 0.1);
        // The histogram keeps three significant digits.
        let near =
            |ms: Option<f64>, want: f64| ms.is_some_and(|ms| (ms - want).abs() <= want * 1e-3);
        assert!(near(point.p50_ms, 4.0), "{point:?}");
        assert!(near(point.p99_ms, 8.0), "{point:?}");
        assert!(near(point.refusal_p50_ms, 0.3), "{point:?}");
        assert_eq!(point.refusal_reasons.get("overload"), Some(&1));
    }

    #[test]
    fn an_empty_tally_has_no_quantiles_and_no_division_by_zero() {
        let point = Point::of(&Tally::new(), 2.0, 100.0, 0);
        assert_eq!(
            (point.goodput, point.refused, point.timed_out),
            (0.0, 0.0, 0.0)
        );
        assert_eq!((point.p99_ms, point.refusal_p50_ms), (None, None));
    }
}
