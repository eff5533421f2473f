//! The Prometheus launcher against the real binary: a scrape of a test server, queries of
//! what was scraped, and the server stopped by its process id.
//!
//! Without a Prometheus binary the tests print `SKIPPED: …` and pass, unless
//! `ADMIT_REQUIRE_PROMETHEUS` is set (see `admit_testkit::prometheus::require`).

use std::time::Duration;

use admit_testkit::prometheus::{self, FIRST_SCRAPE_LIMIT, JOB, QueryError};
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
