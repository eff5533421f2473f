//! The metric names against a real Prometheus (Debian's `prometheus` package): an axum server
//! runs both layers and serves `/metrics`; Prometheus scrapes it every 200 ms while a known
//! workload runs (a manual CPU signal, a bounded number of requests); then the PromQL queries
//! the guide documents must answer what the workload did: λ, from the offered requests, is
//! every request sent, though the shedder sits inside a warm-up bucket's layer, and the
//! critical classes' λ is their requests' (`/work?sheddable` is a sheddable request).
//!
//! Without a Prometheus binary the test prints `SKIPPED:` and returns (it fails instead when
//! `ADMIT_REQUIRE_PROMETHEUS` is set, as `.ci/run` does once it has installed the package).

#![cfg(all(feature = "metrics", feature = "http"))]

use std::sync::Arc;
use std::time::Duration;

use admit::criticality::Criticality;
use admit::metrics::Reporter;
use admit::middleware::CriticalityFrom;
use admit::respond::HttpResponder;
use admit::shed::{ShedLayer, Shedder};
use admit::signal::cpu::ManualCpu;
use admit::warmup::{WarmUp, WarmUpLayer};
use admit_testkit::axum::serve_router;
use admit_testkit::prometheus::{self, FIRST_SCRAPE_LIMIT, Prometheus};
use admit_testkit::wait::bounded;
use axum::Router;
use axum::body::Bytes;
use axum::routing::get;
use http::StatusCode;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use metrics_exporter_prometheus::PrometheusBuilder;
use tokio::task::JoinSet;

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// How long each request to `/work` takes, at least.
const WORK: Duration = Duration::from_millis(20);
/// Servers per pod in the utilisation query.
const SERVERS: f64 = 4.0;

async fn status(client: HttpClient, url: String) -> StatusCode {
    let request = http::Request::get(&url).body(Empty::new()).unwrap();
    let response = bounded(&url, client.request(request))
        .await
        .unwrap_or_else(|error| panic!("GET {url}: {error}"));
    let status = response.status();
    bounded(&url, response.into_body().collect())
        .await
        .unwrap_or_else(|error| panic!("GET {url}: the body: {error}"));
    status
}

/// `count` GETs of `url`, `concurrency` at a time: how many answered each status.
async fn load(client: &HttpClient, url: &str, count: usize, concurrency: usize) -> Vec<StatusCode> {
    let mut statuses = Vec::with_capacity(count);
    for wave in 0..count.div_ceil(concurrency) {
        let mut requests = JoinSet::new();
        for _ in 0..concurrency.min(count - wave * concurrency) {
            requests.spawn(status(client.clone(), url.to_owned()));
        }
        statuses.extend(requests.join_all().await);
    }
    statuses
}

fn tally(statuses: &[StatusCode], status: StatusCode) -> f64 {
    statuses.iter().filter(|&&s| s == status).count() as f64
}

/// The one value of an instant query.
async fn one(prometheus: &Prometheus, promql: &str) -> f64 {
    let samples = prometheus
        .query(promql)
        .await
        .unwrap_or_else(|error| panic!("{promql}: {error}"));
    assert_eq!(samples.len(), 1, "{promql}: {samples:?}");
    samples[0].value
}

fn close(actual: f64, expected: f64, relative: f64) -> bool {
    (actual - expected).abs() <= relative * expected.abs()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_answers_the_documented_queries() {
    if prometheus::require("prometheus_answers_the_documented_queries").is_none() {
        return;
    }
    let recorder = PrometheusBuilder::new()
        .install_recorder()
        .expect("the only recorder of this test binary");
    let cpu = ManualCpu::new(0);
    let shedder = Arc::new(
        Shedder::builder()
            .name("api")
            .cpu(cpu.clone())
            .build()
            .unwrap(),
    );
    let open = Arc::new(
        WarmUp::builder(1e6)
            .name("api")
            .start_warm(true)
            .build()
            .unwrap(),
    );
    // A new bucket has earned no burst yet (its first requests are spaced exactly): one
    // decision now, and the idle time until the workload earns it.
    open.try_acquire().unwrap();
    // 6 per second once warm, 2 while cold: a burst is mostly refused.
    let cold = Arc::new(WarmUp::builder(6.0).name("cold").build().unwrap());
    let reporter = Arc::new(
        Reporter::builder()
            .shedder(Arc::clone(&shedder))
            .warm_up(Arc::clone(&open))
            .warm_up(Arc::clone(&cold))
            .build()
            .unwrap(),
    );
    let app = Router::new()
        .route(
            "/work",
            get(|| async {
                tokio::time::sleep(WORK).await;
                "done"
            }),
        )
        .layer(
            ShedLayer::new(Arc::clone(&shedder))
                .http()
                .inspect(CriticalityFrom(
                    |request: &http::Request<_>| match request.uri().query() {
                        Some("sheddable") => Criticality::Sheddable,
                        _ => Criticality::Critical,
                    },
                )),
        )
        .layer(WarmUpLayer::new(Arc::clone(&open)).http())
        .merge(
            Router::new()
                .route("/cold", get(|| async { "done" }))
                .layer(
                    WarmUpLayer::new(Arc::clone(&cold))
                        .respond_with(HttpResponder::too_many_requests()),
                ),
        )
        .route(
            "/metrics",
            get(move || async move {
                reporter.report();
                recorder.render()
            }),
        );
    let server = serve_router(app).await;
    let prometheus = prometheus::start(&[server.addr()], Duration::from_millis(200))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    // A first scrape before any request: the baseline the rates start from.
    prometheus.wait_for_scrape(FIRST_SCRAPE_LIMIT).await;

    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let work = format!("{}/work", server.url());
    // Calm: 40 requests, 4 at a time, all served.
    let calm = load(&client, &work, 40, 4).await;
    assert_eq!(tally(&calm, StatusCode::OK), 40.0, "{calm:?}");
    // Overload: 20 requests admitted directly, 5 of them passed at once, the CPU at 100 %;
    // then 30 requests, one at a time, all shed; the 15 held fail.
    let mut held: Vec<_> = (0..20).map(|_| shedder.allow_owned().unwrap()).collect();
    for permit in held.drain(..5) {
        permit.pass();
    }
    cpu.set(1000);
    let shed = load(&client, &work, 30, 1).await;
    assert_eq!(
        tally(&shed, StatusCode::SERVICE_UNAVAILABLE),
        30.0,
        "{shed:?}"
    );
    for permit in held {
        permit.fail();
    }
    // Calm again: one at a time, nothing over the limit, all served.
    cpu.set(0);
    let after = load(&client, &work, 20, 1).await;
    assert_eq!(tally(&after, StatusCode::OK), 20.0, "{after:?}");
    // Sheddable requests, calm: all served.
    let prefetch = load(&client, &format!("{work}?sheddable"), 8, 1).await;
    assert_eq!(tally(&prefetch, StatusCode::OK), 8.0, "{prefetch:?}");
    // A burst at the cold bucket.
    let burst = load(&client, &format!("{}/cold", server.url()), 12, 12).await;
    let (admitted, refused) = (
        tally(&burst, StatusCode::OK),
        tally(&burst, StatusCode::TOO_MANY_REQUESTS),
    );
    assert_eq!(admitted + refused, 12.0, "{burst:?}");
    assert!(refused > 0.0, "{burst:?}");

    let (passed, failed, dropped) = (73.0, 15.0, 30.0);
    let snapshot = shedder.snapshot();
    assert_eq!(
        (snapshot.passed, snapshot.failed, snapshot.dropped),
        (73, 15, 30)
    );
    let busy = snapshot.service_time.as_secs_f64();
    // Every series at its final value: scraped after the workload.
    prometheus
        .wait_until(
            "the last scrape",
            r#"admit_warmup_requests_total{limiter="cold"}"#,
            Duration::from_secs(10),
            |samples| samples.iter().map(|s| s.value).sum::<f64>() == 12.0,
        )
        .await;
    for (outcome, count) in [("passed", passed), ("failed", failed), ("dropped", dropped)] {
        let series = format!(r#"admit_shed_requests_total{{limiter="api",outcome="{outcome}"}}"#);
        assert_eq!(one(&prometheus, &series).await, count, "{series}");
    }
    for (outcome, count) in [("admitted", admitted), ("refused", refused)] {
        let series =
            format!(r#"admit_warmup_requests_total{{limiter="cold",outcome="{outcome}"}}"#);
        assert_eq!(one(&prometheus, &series).await, count, "{series}");
    }
    let total_busy = one(
        &prometheus,
        r#"admit_shed_service_seconds_total{limiter="api"}"#,
    )
    .await;
    assert!(close(total_busy, busy, 1e-9), "{total_busy} ≠ {busy}");

    // Every request sent, counted once: `/work`'s by its outer warm-up bucket (the shedder
    // inside counts none; the 20 permits taken from the shedder directly are no requests),
    // `/cold`'s by its bucket.
    let sent = (calm.len() + shed.len() + after.len() + prefetch.len() + burst.len()) as f64;
    for (series, count) in [
        (
            r#"admit_offered_requests_total{limiter="api",kind="warmup"}"#,
            sent - 12.0,
        ),
        (
            r#"admit_offered_requests_total{limiter="api",kind="shed"}"#,
            0.0,
        ),
        (
            r#"admit_offered_requests_total{limiter="cold",kind="warmup"}"#,
            12.0,
        ),
    ] {
        assert_eq!(one(&prometheus, series).await, count, "{series}");
    }

    // The guide's queries. The rates share their scrapes, so their ratios are exact.
    let lambda = one(&prometheus, "sum(rate(admit_offered_requests_total[1m]))").await;
    // A rate over one minute of a run shorter than that: the increase, extrapolated by at most
    // half a scrape interval at each end, over 60 s.
    assert!(
        lambda * 60.0 >= sent && lambda * 60.0 <= sent * 1.2,
        "λ = {lambda}/s for {sent} requests sent"
    );
    let arrivals = passed + failed + dropped;
    let mean = one(
        &prometheus,
        r#"sum by (limiter) (rate(admit_shed_service_seconds_total{limiter="api"}[1m]))
         / sum by (limiter) (rate(admit_shed_requests_total{limiter="api",outcome!="dropped"}[1m]))"#,
    )
    .await;
    assert!(
        close(mean, busy / (passed + failed), 1e-6),
        "mean service time {mean} s, expected {}",
        busy / (passed + failed)
    );
    // 68 of the 88 completed requests took at least `WORK`.
    assert!(mean >= 68.0 * WORK.as_secs_f64() / 88.0, "{mean}");
    let utilisation = one(
        &prometheus,
        &format!(
            r#"sum by (limiter) (rate(admit_shed_service_seconds_total{{limiter="api"}}[1m])) / {SERVERS}"#
        ),
    )
    .await;
    // λ·s is the time the service was busy per second: over one minute, the busy time.
    assert!(
        utilisation * 60.0 * SERVERS >= busy && utilisation * 60.0 * SERVERS <= busy * 1.2,
        "utilisation {utilisation} for {busy} s busy on {SERVERS} servers"
    );
    let in_flight = one(
        &prometheus,
        r#"avg by (limiter) (admit_shed_requests_in_flight{limiter="api"})"#,
    )
    .await;
    assert_eq!(in_flight, 0.0);
    let shed_ratio = one(
        &prometheus,
        r#"sum by (limiter) (rate(admit_shed_requests_total{limiter="api",outcome="dropped"}[1m]))
         / sum by (limiter) (rate(admit_shed_requests_total{limiter="api"}[1m]))"#,
    )
    .await;
    assert!(close(shed_ratio, dropped / arrivals, 1e-9), "{shed_ratio}");
    // λ of the classes that must be served: every decision but the sheddable requests'.
    let sheddable = one(
        &prometheus,
        r#"admit_shed_class_requests_total{limiter="api",class="sheddable",outcome="admitted"}"#,
    )
    .await;
    assert_eq!(sheddable, prefetch.len() as f64);
    let critical = arrivals - sheddable;
    let lambda_critical = one(
        &prometheus,
        r#"sum(rate(admit_shed_class_requests_total{limiter="api",class=~"critical|critical_plus"}[1m]))"#,
    )
    .await;
    assert!(
        lambda_critical * 60.0 >= critical && lambda_critical * 60.0 <= critical * 1.2,
        "critical λ = {lambda_critical}/s for {critical} critical decisions"
    );

    let pid = prometheus.pid();
    assert!(prometheus.stop().success());
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "Prometheus {pid} still runs"
    );
    server.shutdown().await;
}
