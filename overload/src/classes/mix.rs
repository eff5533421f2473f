//! Critical and sheddable requests offered together to a fresh server, each class tallied on
//! its own.

use std::collections::BTreeMap;
use std::time::Duration;

use admit::criticality::{CRITICALITY_HEADER, Criticality};
use admit_loadgen::{Driver, HttpClient, Report, Tally, Trace};
use bytes::Bytes;
use http::Uri;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::time::Instant;

use crate::process::ServerProcess;
use crate::run::Schedule;
use crate::server::ServeArgs;
use crate::{BoxError, request_start};

/// The seeds of the two classes' Poisson arrivals.
const CRITICAL_SEED: u64 = 0xc0ff_ee01;
const SHEDDABLE_SEED: u64 = 0xc0ff_ee02;

/// How often the server's cut is read while it is watched.
const CUT_EVERY: Duration = Duration::from_millis(25);

/// Each class's offered load, as a multiple of the capacity.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mix {
    pub(crate) critical: f64,
    pub(crate) sheddable: f64,
}

/// What one class got, over a span of seconds.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub(crate) struct ClassFigures {
    /// Requests offered per second.
    pub(crate) offered_per_s: f64,
    /// Share of the requests answered OK within the deadline; none if none was offered.
    pub(crate) availability: Option<f64>,
    /// Latency of the OK answers, ms.
    pub(crate) p50_ms: Option<f64>,
    pub(crate) p99_ms: Option<f64>,
    /// Share of the requests refused (503 or 429).
    pub(crate) refused: f64,
    /// Refusals by the reason the server gave (admit's `admit-refusal` header).
    pub(crate) refusal_reasons: BTreeMap<String, u64>,
    /// Share of the requests with no useful answer (timed out, lost or another status).
    pub(crate) failed: f64,
}

impl ClassFigures {
    /// The figures of `tally`, over `seconds`.
    pub(crate) fn of(tally: &Tally, seconds: f64) -> ClassFigures {
        let offered = tally.offered.max(1) as f64;
        let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1e3);
        ClassFigures {
            offered_per_s: tally.offered as f64 / seconds.max(1.0),
            availability: (tally.offered > 0).then(|| tally.ok as f64 / offered),
            p50_ms: ms(tally.latency_quantile(0.5)),
            p99_ms: ms(tally.latency_quantile(0.99)),
            refused: tally.refused as f64 / offered,
            refusal_reasons: tally.refusal_reasons.clone(),
            failed: tally.failed() as f64 / offered,
        }
    }
}

/// What a point measured.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct ClassPoint {
    /// The offered load, as a multiple of the capacity.
    pub(crate) load: f64,
    pub(crate) critical: ClassFigures,
    pub(crate) sheddable: ClassFigures,
    /// OK answers of both classes per second, over the capacity.
    pub(crate) goodput: f64,
    /// The share of the measured time the shedder's cut was at each place: none (not
    /// shedding), then each class from `sheddable` up.
    pub(crate) cut_time: [f64; 1 + Criticality::COUNT],
}

/// What a run of both classes left: each class's report and, if watched, the cut over time.
#[derive(Debug)]
pub(crate) struct Offered {
    pub(crate) critical: Report,
    pub(crate) sheddable: Report,
    /// `(s from the start, the cut)`, every [`CUT_EVERY`] (none from a server without a
    /// shedder).
    pub(crate) cuts: Vec<(f64, Option<Criticality>)>,
}

/// Holds `mix` on a fresh server for the schedule and measures its last part.
pub(crate) async fn run(
    server: &ServeArgs,
    pinned: bool,
    capacity: f64,
    mix: Mix,
    schedule: Schedule,
) -> Result<ClassPoint, BoxError> {
    let span = Duration::from_secs(schedule.warm + schedule.measured);
    let trace = |share: f64| {
        (share > 0.0)
            .then(|| Trace::constant(share * capacity, span))
            .transpose()
    };
    let offered = offer(
        server,
        pinned,
        [trace(mix.critical)?, trace(mix.sheddable)?],
        schedule.deadline,
    )
    .await?;
    let measured = schedule.warm as usize..(schedule.warm + schedule.measured) as usize;
    let mut cut_time = [0.0; 1 + Criticality::COUNT];
    let readings: Vec<_> = offered
        .cuts
        .iter()
        .filter(|&&(at, _)| at >= measured.start as f64)
        .collect();
    for &&(_, cut) in &readings {
        cut_time[cut.map_or(0, |class| 1 + class.index())] += 1.0 / readings.len() as f64;
    }
    let (critical, sheddable) = (
        offered.critical.span(measured.clone()),
        offered.sheddable.span(measured),
    );
    let seconds = schedule.measured as f64;
    Ok(ClassPoint {
        load: mix.critical + mix.sheddable,
        critical: ClassFigures::of(&critical, seconds),
        sheddable: ClassFigures::of(&sheddable, seconds),
        goodput: (critical.ok + sheddable.ok) as f64 / seconds / capacity,
        cut_time,
    })
}

/// Starts a fresh server and offers it the critical and the sheddable traces at once (a class
/// without a trace sends nothing), each request a GET of `/work` with its class in
/// `admit-criticality`, and reads the server's cut meanwhile.
pub(crate) async fn offer(
    server: &ServeArgs,
    pinned: bool,
    [critical, sheddable]: [Option<Trace>; 2],
    deadline: Duration,
) -> Result<Offered, BoxError> {
    let process = ServerProcess::start(server, pinned)?;
    let work: Uri = format!("http://{}/work", process.addr()).parse()?;
    let cut: Uri = format!("http://{}/cut", process.addr()).parse()?;
    let client = HttpClient::new();
    let driver = Driver::new(deadline);
    let span = [&critical, &sheddable]
        .into_iter()
        .flatten()
        .map(Trace::duration)
        .max()
        .unwrap_or_default();
    let start = Instant::now();
    let class = |trace: Option<Trace>, class: Criticality, seed: u64| {
        let (client, work) = (&client, &work);
        async move {
            let Some(trace) = trace else {
                return Report::default();
            };
            driver
                .run(
                    client,
                    trace.duration(),
                    trace.arrivals(seed),
                    |_| get(work, class),
                    |_, _| {},
                )
                .await
        }
    };
    let (critical, sheddable, cuts) = tokio::join!(
        class(critical, Criticality::Critical, CRITICAL_SEED),
        class(sheddable, Criticality::Sheddable, SHEDDABLE_SEED),
        watch(&cut, start, span),
    );
    drop(process);
    Ok(Offered {
        critical,
        sheddable,
        cuts: cuts?,
    })
}

/// Reads the server's cut at `uri` every [`CUT_EVERY`] from `start` for `span`.
async fn watch(
    uri: &Uri,
    start: Instant,
    span: Duration,
) -> Result<Vec<(f64, Option<Criticality>)>, BoxError> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut cuts = Vec::new();
    let mut tick = tokio::time::interval(CUT_EVERY);
    while start.elapsed() < span {
        tick.tick().await;
        let at = start.elapsed().as_secs_f64();
        let answer = client.get(uri.clone()).await?;
        let body = answer.into_body().collect().await?.to_bytes();
        let cut = match std::str::from_utf8(&body)? {
            "-" => None,
            class => Some(class.parse::<Criticality>()?),
        };
        cuts.push((at, cut));
    }
    Ok(cuts)
}

/// A GET of `uri` for a request of `class`, stamped with `X-Request-Start` as a proxy would.
fn get(uri: &Uri, class: Criticality) -> http::Request<Empty<Bytes>> {
    http::Request::get(uri.clone())
        .header("x-request-start", request_start())
        .header(CRITICALITY_HEADER, class.as_str())
        .body(Empty::new())
        .expect("a GET of a parsed URI with ASCII headers")
}
