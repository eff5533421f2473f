//! End to end, live: an axum server behind admit's `ShedLayer` exports admit's metrics, a real
//! Prometheus scrapes it every 100 ms while a paced load runs, and the scaler, asked by the
//! KEDA stand-in, answers what `min_servers` gives for the load the server itself measured.
//!
//! Without a Prometheus binary the test prints `SKIPPED:` and returns (it fails instead when
//! `ADMIT_REQUIRE_PROMETHEUS` is set, as `.ci/run` does).

mod support;

use std::sync::Arc;
use std::time::Duration;

use admit::erlang::{MMc, Target};
use admit::metrics::Reporter;
use admit::shed::{ShedLayer, Shedder};
use admit::signal::cpu::ManualCpu;
use admit_scaler::service::ServiceOptions;
use admit_testkit::prometheus::{self, FIRST_SCRAPE_LIMIT};
use admit_testkit::wait::bounded;
use axum::Router;
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusBuilder;
use tokio::time::Instant;

use support::{OpenLoop, Scaler, metadata, metrics_request, object, serve_with_metrics};

/// Each request's work.
const WORK: Duration = Duration::from_millis(40);
/// The paced arrival rate: one request every 10 ms.
const PERIOD: Duration = Duration::from_millis(10);
/// How long the load runs before the scaler is asked; the rate window is 5 s.
const WARM: Duration = Duration::from_secs(7);
const WINDOW: Duration = Duration::from_secs(5);

const LAMBDA: &str = r#"sum(rate(admit_offered_requests_total{limiter=~"checkout|"}[5s]))"#;
const S: &str = r#"sum(rate(admit_shed_service_seconds_total{limiter="checkout"}[5s])) / sum(rate(admit_shed_requests_total{limiter="checkout",outcome!="dropped"}[5s]))"#;

fn servers(arrival_rate: f64, service_time: f64) -> u64 {
    MMc::new(arrival_rate, 1.0 / service_time)
        .unwrap()
        .min_servers(Target::ServiceLevel {
            within: 0.02,
            at_least: 0.9,
        })
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scaler_sizes_what_the_server_measured() {
    if prometheus::require("the_scaler_sizes_what_the_server_measured").is_none() {
        return;
    }
    let recorder = PrometheusBuilder::new()
        .install_recorder()
        .expect("the only recorder of this test binary");
    let shedder = Arc::new(
        Shedder::builder()
            .name("checkout")
            .cpu(ManualCpu::new(0))
            .build()
            .unwrap(),
    );
    let reporter = Reporter::builder()
        .shedder(Arc::clone(&shedder))
        .build()
        .unwrap();
    let app = Router::new()
        .route(
            "/work",
            get(|| async {
                tokio::time::sleep(WORK).await;
                "done"
            }),
        )
        .layer(ShedLayer::new(Arc::clone(&shedder)).http());
    let server = serve_with_metrics(app, reporter, recorder).await;
    let prometheus = prometheus::start(&[server.addr()], Duration::from_millis(100))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    prometheus.wait_for_scrape(FIRST_SCRAPE_LIMIT).await;

    let load = OpenLoop::start(format!("{}/work", server.url()), PERIOD);

    // The server's own measure over the last WINDOW before the scaler is asked.
    tokio::time::sleep(WARM - WINDOW).await;
    let (first, from) = (shedder.snapshot(), Instant::now());
    tokio::time::sleep(WINDOW).await;
    let (last, to) = (shedder.snapshot(), Instant::now());

    let mut scaler = Scaler::start(ServiceOptions::default()).await;
    let trigger = object(
        "checkout",
        metadata(
            &prometheus.url(),
            &[
                ("arrivalRateQuery", LAMBDA),
                ("serviceTimeQuery", S),
                ("waitThresholdSeconds", "0.02"),
                ("targetSL", "0.9"),
            ],
        ),
    );
    let answer = bounded(
        "GetMetrics",
        scaler.client.get_metrics(metrics_request(trigger.clone())),
    )
    .await
    .expect("a decision");
    let replicas = answer.get_ref().metric_values[0].metric_value as u64;
    let active = scaler
        .client
        .is_active(trigger)
        .await
        .unwrap()
        .get_ref()
        .result;
    let statuses = load.stop().await;
    assert!(
        statuses.iter().all(|status| status.is_success()),
        "{statuses:?}"
    );
    let sent = statuses.len();

    let count = |s: &admit::shed::ShedSnapshot| (s.passed + s.failed + s.dropped) as f64;
    let completed = count(&last) - count(&first);
    let arrival_rate = completed / to.duration_since(from).as_secs_f64();
    let service_time = (last.service_time - first.service_time).as_secs_f64() / completed;
    assert_eq!(last.dropped, 0, "nothing is shed at a calm CPU");
    // The noise of a 5 s rate window on 100 ms scrapes, and of the pacing: ±15 % in λ.
    let (low, high) = (
        servers(arrival_rate * 0.85, service_time),
        servers(arrival_rate * 1.15, service_time),
    );
    let measured = servers(arrival_rate, service_time);
    assert!(
        (low..=high).contains(&replicas),
        "the scaler recommends {replicas}; the server measured λ = {arrival_rate:.1}/s, \
         s = {service_time:.4} s, which need {measured} servers ({low}..={high} within the \
         window's noise); {sent} requests sent"
    );
    assert!(active);
    println!(
        "live: the scaler recommends {replicas}; the server measured λ = {arrival_rate:.2}/s, \
         s = {service_time:.5} s: {measured} servers ({low}..={high}); {sent} requests"
    );
    prometheus.stop();
}
