//! The Prometheus launcher against the real binary: a scrape of a test server, queries of
//! what was scraped, the server stopped by its process id, and a TSDB backfilled by promtool.
//!
//! Without a Prometheus binary the tests print `SKIPPED: …` and pass, unless
//! `ADMIT_REQUIRE_PROMETHEUS` is set (see `admit_testkit::prometheus::require`).

use std::time::Duration;

use admit_testkit::prometheus::{self, FIRST_SCRAPE_LIMIT, JOB, QueryError, StartError};
use axum::Router;
use axum::routing::get;
use rustix::io::Errno;
use rustix::process::{Pid, test_kill_process};

/// What the test server's `/metrics` serves, in Prometheus' text format.
const METRICS: &str =
    "# TYPE demo_requests_total counter\ndemo_requests_total{outcome=\"passed\"} 42\n";

/// `kill(pid, 0)`: whether a process with this id exists (a zombie still does).
fn exists(pid: u32) -> bool {
    let pid =
        Pid::from_raw(i32::try_from(pid).expect("a pid fits in i32")).expect("a pid is not 0");
    match test_kill_process(pid) {
        Ok(()) => true,
        Err(Errno::SRCH) => false,
        Err(error) => panic!("kill({pid:?}, 0): {error}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_a_test_server_and_stops_by_pid() {
    if prometheus::require("prometheus_scrapes_a_test_server_and_stops_by_pid").is_none() {
        return;
    }
    let server = admit_testkit::axum::serve_router(
        Router::new().route("/metrics", get(|| async { METRICS })),
    )
    .await;
    // 200 ms: Prometheus takes scrape intervals in milliseconds.
    let prometheus = prometheus::start(&[server.addr()], Duration::from_millis(200))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let pid = prometheus.pid();
    let dir = prometheus.dir().to_owned();
    assert!(exists(pid), "Prometheus runs as pid {pid}");

    let up = prometheus.wait_for_scrape(FIRST_SCRAPE_LIMIT).await;
    let instance = server.addr().to_string();
    assert_eq!(up.len(), 1, "{up:?}");
    assert_eq!(up[0].labels["instance"], instance, "{up:?}");
    assert_eq!(up[0].labels["job"], JOB, "{up:?}");

    let samples = prometheus
        .query("demo_requests_total")
        .await
        .expect("query the scraped counter");
    assert_eq!(samples.len(), 1, "{samples:?}");
    assert_eq!(samples[0].value, 42.0, "{samples:?}");
    assert_eq!(samples[0].labels["outcome"], "passed", "{samples:?}");
    assert_eq!(samples[0].labels["instance"], instance, "{samples:?}");

    let up = prometheus.query("up").await.expect("query up");
    assert_eq!(up.len(), 1, "{up:?}");
    assert_eq!(up[0].value, 1.0, "{up:?}");

    // A scalar answer, and Prometheus' own error for a bad expression.
    let scalar = prometheus
        .query("scalar(demo_requests_total) * 2")
        .await
        .expect("query a scalar");
    assert_eq!(scalar.len(), 1, "{scalar:?}");
    assert_eq!(scalar[0].value, 84.0, "{scalar:?}");
    assert!(scalar[0].labels.is_empty(), "{scalar:?}");
    match prometheus.query("demo_requests_total{").await {
        Err(QueryError::Prometheus { error_type, .. }) => assert_eq!(error_type, "bad_data"),
        other => panic!("a syntax error answered {other:?}"),
    }

    let status = prometheus.stop();
    assert!(
        status.success(),
        "Prometheus exits cleanly on SIGTERM: {status}"
    );
    assert!(!exists(pid), "pid {pid} is gone after stop");
    assert!(!dir.exists(), "{dir:?} is removed after stop");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_handle_stops_prometheus() {
    if prometheus::require("dropping_the_handle_stops_prometheus").is_none() {
        return;
    }
    let prometheus = prometheus::start(&[], Duration::from_secs(1))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let (pid, dir) = (prometheus.pid(), prometheus.dir().to_owned());
    assert!(exists(pid), "Prometheus runs as pid {pid}");
    // No targets: nothing to wait for.
    assert_eq!(prometheus.wait_for_scrape(FIRST_SCRAPE_LIMIT).await, vec![]);
    drop(prometheus);
    assert!(!exists(pid), "pid {pid} is gone after drop");
    assert!(!dir.exists(), "{dir:?} is removed after drop");
}

/// The backfilled counter's first timestamp, in seconds, and its rate per second.
const BACKFILL_START: u64 = 1_700_000_000;
const BACKFILL_RATE: u64 = 120;

/// `demo_requests_total` at [`BACKFILL_RATE`] per second, sampled every 15 s for an hour from
/// [`BACKFILL_START`], in OpenMetrics text.
fn backfilled_counter() -> String {
    let mut text = String::from("# TYPE demo_requests counter\n");
    for step in 0..=(3600 / 15) {
        let offset = step * 15;
        text.push_str(&format!(
            "demo_requests_total{{outcome=\"passed\"}} {} {}\n",
            BACKFILL_RATE * offset,
            BACKFILL_START + offset
        ));
    }
    text.push_str("# EOF\n");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_serves_a_backfilled_counter_at_its_timestamps() {
    if prometheus::require("prometheus_serves_a_backfilled_counter_at_its_timestamps").is_none() {
        return;
    }
    let prometheus = prometheus::start_backfilled(&backfilled_counter())
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let dir = prometheus.dir().to_owned();
    // No targets: nothing to wait for.
    assert_eq!(prometheus.wait_for_scrape(FIRST_SCRAPE_LIMIT).await, vec![]);

    let end = (BACKFILL_START + 3600) as f64;
    let rate = prometheus
        .query_at("rate(demo_requests_total[5m])", end)
        .await
        .expect("query the backfilled rate");
    assert_eq!(rate.len(), 1, "{rate:?}");
    let expected = BACKFILL_RATE as f64;
    assert!(
        ((rate[0].value - expected) / expected).abs() <= 1e-9,
        "{rate:?}"
    );
    assert_eq!(rate[0].labels["outcome"], "passed", "{rate:?}");

    let total = prometheus
        .query_at("demo_requests_total", end)
        .await
        .expect("query the backfilled counter");
    assert_eq!(total.len(), 1, "{total:?}");
    assert_eq!(total[0].value, (BACKFILL_RATE * 3600) as f64, "{total:?}");
    // Now is long after the last sample, beyond the 5 min lookback.
    let now = prometheus
        .query("demo_requests_total")
        .await
        .expect("query now");
    assert_eq!(now, vec![], "nothing at the current time");

    let status = prometheus.stop();
    assert!(
        status.success(),
        "Prometheus exits cleanly on SIGTERM: {status}"
    );
    assert!(!dir.exists(), "{dir:?} is removed after stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_openmetrics_is_a_backfill_error() {
    if prometheus::require("malformed_openmetrics_is_a_backfill_error").is_none() {
        return;
    }
    let without_eof = backfilled_counter().replace("# EOF\n", "");
    let error = prometheus::start_backfilled(&without_eof)
        .await
        .expect_err("promtool refuses text without `# EOF`");
    match &error {
        StartError::Backfill(message) => {
            assert!(message.contains("does not end with # EOF"), "{message}")
        }
        other => panic!("not Backfill: {other:?}"),
    }
    assert!(
        error.to_string().starts_with("promtool could not backfill"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovered_targets_come_and_go_with_their_labels() {
    if prometheus::require("discovered_targets_come_and_go_with_their_labels").is_none() {
        return;
    }
    let metrics = Router::new().route("/metrics", get(|| async { METRICS }));
    let a = admit_testkit::axum::serve_router(metrics.clone()).await;
    let b = admit_testkit::axum::serve_router(metrics).await;
    let prometheus = prometheus::start_discovered(Duration::from_millis(200))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let labelled = |pod| [("pod", pod)];
    let (pod_a, pod_b) = (labelled("a"), labelled("b"));
    prometheus
        .set_targets([(a.addr(), &pod_a[..]), (b.addr(), &pod_b[..])])
        .expect("the targets file");
    let samples = prometheus
        .wait_until(
            "both pods scraped",
            "demo_requests_total",
            FIRST_SCRAPE_LIMIT,
            |samples| samples.len() == 2,
        )
        .await;
    let mut pods: Vec<&str> = samples.iter().map(|s| s.labels["pod"].as_str()).collect();
    pods.sort_unstable();
    assert_eq!(pods, ["a", "b"]);
    // A pod that leaves the file leaves the scrape: its series go stale.
    prometheus
        .set_targets([(b.addr(), &pod_b[..])])
        .expect("the targets file");
    let samples = prometheus
        .wait_until(
            "only pod b",
            "demo_requests_total",
            FIRST_SCRAPE_LIMIT,
            |samples| samples.len() == 1,
        )
        .await;
    assert_eq!(samples[0].labels["pod"], "b");
    prometheus.stop();
}
