//! The two transients: a step from 0.5 × to 4 × capacity, and a retry storm.

use std::collections::BTreeMap;
use std::time::Duration;

use admit_loadgen::{Driver, HttpClient, Report, Trace, Transport};
use bytes::Bytes;
use http_body_util::Empty;
use tokio::time::Instant;

use super::clients::{Attempts, ClientStyle, StyleClient};
use super::point::offer;
use super::timeline::{Recording, Timeline};
use crate::BoxError;
use crate::server::ServeArgs;

/// The seed of the transients' Poisson arrivals.
const SEED: u64 = 0x57e9_5709;

/// The step: 0.5 × capacity for [`STEP_BEFORE`], then 4 × for [`STEP_AFTER`].
pub(crate) const STEP_FROM: f64 = 0.5;
pub(crate) const STEP_TO: f64 = 4.0;
const STEP_BEFORE: f64 = 5.0;
const STEP_AFTER: f64 = 7.0;

/// The storm: 1 × capacity, a peak (4 × by default) for [`STORM_OVERLOAD`], 1 × again
/// for [`STORM_AFTER`]; the clients retry a refusal, a timeout or a lost request up to 3 times,
/// in each [`ClientStyle`].
pub(crate) const STORM_BASE: f64 = 1.0;
const STORM_BEFORE: f64 = 5.0;
const STORM_OVERLOAD: f64 = 10.0;
const STORM_AFTER: f64 = 13.0;

/// How long each transient runs, s, with a second to start its server.
pub(crate) const STEP_SECONDS: u64 = (STEP_BEFORE + STEP_AFTER) as u64 + 1;
pub(crate) const STORM_SECONDS: u64 = (STORM_BEFORE + STORM_OVERLOAD + STORM_AFTER) as u64 + 1;

/// The goodput windows: short enough to see a transient, long enough to count.
const WINDOW: f64 = 0.25;
/// How long a settled state must hold.
const HOLD: f64 = 1.0;
/// The goodput band around the settled value.
const TOLERANCE: f64 = 0.05;

/// The step response of one policy.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct Step {
    /// From the step until goodput stays within `band` of its settled value for 1 s, s.
    pub(crate) settle_s: Option<f64>,
    /// The band used: 5 %, or Poisson counting noise if wider, as a share.
    pub(crate) band: f64,
    /// The settled goodput (the last 3 s), over the capacity.
    pub(crate) settled_goodput: f64,
    /// From the step until the p99 latency of answers stays within the latency target for
    /// 1 s, s.
    pub(crate) latency_settle_s: Option<f64>,
    /// Goodput per 100 ms over the capacity, `(s from the step, goodput)`.
    pub(crate) goodput: Vec<(f64, f64)>,
}

/// What a retry storm left behind.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct Storm {
    /// The overload, as a multiple of the capacity.
    pub(crate) peak: f64,
    /// How the clients retried.
    pub(crate) clients: ClientStyle,
    /// Attempts that reached the server per request offered, during the overload.
    pub(crate) attempts_per_request: f64,
    /// Goodput over the capacity during the overload.
    pub(crate) goodput_during: f64,
    /// From the overload's end until goodput stays ≥ 95 % of capacity for 1 s, s.
    pub(crate) recovery_s: Option<f64>,
    /// Goodput over the capacity in the 4 s before the overload, at 1 ×.
    pub(crate) goodput_before: f64,
    /// From the overload's end until goodput stays ≥ 95 % of `goodput_before` for 1 s, s.
    pub(crate) recovery_to_before_s: Option<f64>,
    /// Goodput over the capacity 10 s after the overload ended (over 9 to 11 s).
    pub(crate) goodput_after_10s: f64,
    /// Retries sent per first attempt, over the whole run (the load generator's own retries;
    /// admit's clients retry inside their transport, counted in `attempts_per_request`).
    pub(crate) retries_per_request: f64,
    /// Requests the clients refused themselves, during the overload and after it.
    pub(crate) local_refusals: (usize, usize),
    /// The last request the clients refused themselves, s from the overload's end.
    pub(crate) last_local_refusal_s: Option<f64>,
    /// The last 8 s of the run: requests refused by reason (`throttled-locally` for the
    /// clients' own), timed out and lost.
    pub(crate) late_refusals: BTreeMap<String, u64>,
    pub(crate) late_failed: u64,
    /// Goodput per 500 ms over the capacity, `(s from the overload's end, goodput)`.
    pub(crate) goodput: Vec<(f64, f64)>,
}

/// Runs the step against a fresh server; `latency_target` is the p99 (s) to settle under.
pub(crate) async fn step(
    server: &ServeArgs,
    pinned: bool,
    capacity: f64,
    deadline: Duration,
    latency_target: f64,
) -> Result<Step, BoxError> {
    let trace = Trace::builder()
        .constant(STEP_FROM * capacity, Duration::from_secs_f64(STEP_BEFORE))
        .constant(STEP_TO * capacity, Duration::from_secs_f64(STEP_AFTER))
        .build()?;
    let (timeline, ..) = record(
        server,
        pinned,
        &trace,
        Driver::new(deadline),
        HttpClient::new(),
    )
    .await?;
    let end = STEP_BEFORE + STEP_AFTER;
    let (settle_s, band) = timeline.settle(STEP_BEFORE, end, WINDOW, HOLD, TOLERANCE);
    let latency_settle_s = timeline.first_holding(STEP_BEFORE, end, WINDOW, HOLD, |from, to| {
        timeline
            .latency_quantile(from, to, 0.99)
            .is_some_and(|p99| p99 <= latency_target)
    });
    Ok(Step {
        settle_s,
        band,
        settled_goodput: timeline.rate(end - 3.0, end) / capacity,
        latency_settle_s,
        goodput: relative(&timeline.bins(0.1, end), STEP_BEFORE, capacity),
    })
}

/// Runs the retry storm at `peak` × `capacity` against a fresh server, its clients retrying
/// in `style`.
pub(crate) async fn storm(
    server: &ServeArgs,
    pinned: bool,
    capacity: f64,
    deadline: Duration,
    peak: f64,
    style: ClientStyle,
) -> Result<Storm, BoxError> {
    let seconds = Duration::from_secs_f64;
    let trace = Trace::builder()
        .constant(STORM_BASE * capacity, seconds(STORM_BEFORE))
        .constant(peak * capacity, seconds(STORM_OVERLOAD))
        .constant(STORM_BASE * capacity, seconds(STORM_AFTER))
        .build()?;
    let attempts = Attempts::default();
    let client = StyleClient::new(style, deadline, attempts.clone())?;
    let driver = style.driver(deadline)?;
    let (timeline, report, start) = record(server, pinned, &trace, driver, client).await?;
    let total = &report.total;
    let end = STORM_BEFORE + STORM_OVERLOAD;
    let until = end + STORM_AFTER;
    let offered = report.span(STORM_BEFORE as usize..end as usize).offered;
    let late = report.span((until - 8.0) as usize..until as usize);
    let recovered = |threshold: f64| {
        timeline.first_holding(end, until, 1.0, HOLD, |from, to| {
            timeline.rate(from, to) >= threshold
        })
    };
    let before = timeline.rate(STORM_BEFORE - 4.0, STORM_BEFORE);
    Ok(Storm {
        peak,
        clients: style,
        attempts_per_request: attempts.sent_between(start, STORM_BEFORE, end) as f64
            / offered.max(1) as f64,
        goodput_during: timeline.rate(STORM_BEFORE, end) / capacity,
        recovery_s: recovered(0.95 * capacity),
        goodput_before: before / capacity,
        recovery_to_before_s: recovered(0.95 * before),
        goodput_after_10s: timeline.rate(end + 9.0, end + 11.0) / capacity,
        retries_per_request: total.retries as f64 / total.offered.max(1) as f64,
        local_refusals: (
            attempts.throttled_between(start, STORM_BEFORE, end),
            attempts.throttled_between(start, end, f64::INFINITY),
        ),
        last_local_refusal_s: attempts.last_throttled(start).map(|at| at - end),
        late_refusals: late.refusal_reasons.clone(),
        late_failed: late.failed(),
        goodput: relative(&timeline.bins(0.5, until), end, capacity),
    })
}

/// Offers `trace` to a fresh server through `driver` and `client`, and returns the OK answers
/// over time, the run's report and when it started.
async fn record<T: Transport<Empty<Bytes>>>(
    server: &ServeArgs,
    pinned: bool,
    trace: &Trace,
    driver: Driver,
    client: T,
) -> Result<(Timeline, Report, Instant), BoxError> {
    let recording = Recording::new(client);
    let (report, start) = offer(server, pinned, trace, SEED, driver, &recording).await?;
    Ok((Timeline::new(recording.answers(start)), report, start))
}

/// Bins with time from `origin` and goodput over `capacity`.
fn relative(bins: &[(f64, f64)], origin: f64, capacity: f64) -> Vec<(f64, f64)> {
    bins.iter()
        .map(|&(t, rate)| (t - origin, rate / capacity))
        .collect()
}
