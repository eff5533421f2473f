//! Deadlines that travel: the scope dates a served request's deadline, the client layer sends
//! the rest on or fails a spent request unsent, and the retry policy retries only within the
//! deadline. Deterministic: a manual clock, or tokio's paused one.

#![cfg(feature = "retry")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use admit::client::{DeadlineExceeded, DeadlineLayer, RetryBudget, RetryPolicy};
use admit::clock::ManualClock;
use admit::middleware::propagate::ScopeLayer;
use admit::middleware::{GrpcTimeout, Inspect, TimeoutHeader};
use admit::signal::Arrival;
use tower::retry::RetryLayer;
use tower::util::BoxCloneService;
use tower::{BoxError, Layer, ServiceExt, service_fn};

#[path = "support/tokio_clock.rs"]
mod tokio_clock;
use tokio_clock::TokioClock;

type Log = Arc<Mutex<Vec<String>>>;

/// A backend recording in `log` the time-left headers of each request it gets, answering 200.
fn recording(log: &Log) -> BoxCloneService<http::Request<()>, http::Response<()>, BoxError> {
    let log = Arc::clone(log);
    BoxCloneService::new(service_fn(move |request: http::Request<()>| {
        let headers = request.headers();
        let left = ["admit-timeout-ms", "grpc-timeout"]
            .iter()
            .filter_map(|name| Some(format!("{name}: {}", headers.get(*name)?.to_str().ok()?)))
            .collect::<Vec<_>>()
            .join(", ");
        log.lock().unwrap().push(left);
        async { Ok::<_, BoxError>(http::Response::new(())) }
    }))
}

#[tokio::test]
async fn a_handler_sends_on_what_its_request_has_left_and_nothing_once_it_is_spent() {
    let clock = Arc::new(ManualClock::new());
    let seen = Log::default();
    let backend = recording(&seen);
    let client = DeadlineLayer::new()
        .with_clock(Arc::clone(&clock))
        .layer(backend);
    let tick = Arc::clone(&clock);
    let handler = service_fn(move |_: http::Request<()>| {
        let (client, clock) = (client.clone(), Arc::clone(&tick));
        async move {
            // 100 ms of work, then a call made for the request: 150 ms of 250 left.
            clock.advance(Duration::from_millis(100));
            client.clone().oneshot(http::Request::new(())).await?;
            // A gRPC call gets the rest as `grpc-timeout`, in the finest unit it fits.
            clock.advance(Duration::from_millis(50));
            let call = http::Request::post("/pkg.Svc/Get")
                .header("content-type", "application/grpc")
                .body(())?;
            client.clone().oneshot(call).await?;
            // Spent: the call fails here and is not sent.
            clock.advance(Duration::from_millis(100));
            let error = client.oneshot(http::Request::new(())).await.unwrap_err();
            assert!(error.is::<DeadlineExceeded>(), "{error}");
            Ok::<_, BoxError>(())
        }
    });
    let server = ScopeLayer::new(TimeoutHeader::new())
        .with_clock(Arc::clone(&clock))
        .layer(handler);
    let request = http::Request::get("/")
        .header("admit-timeout-ms", "250")
        .body(())
        .unwrap();
    server.oneshot(request).await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        ["admit-timeout-ms: 150", "grpc-timeout: 100000u"]
    );
}

/// The wait a load balancer wrote, in ms.
#[derive(Clone)]
struct QueuedMs;

impl<B> Inspect<http::Request<B>> for QueuedMs {
    fn inspect(&self, request: &http::Request<B>) -> Arrival {
        let waited = request.headers()["x-queued-ms"].to_str().unwrap().parse();
        Arrival::new().with_wait(Duration::from_millis(waited.unwrap()))
    }
}

#[tokio::test]
async fn the_wait_before_the_server_counts_and_the_least_time_left_wins() {
    let clock = Arc::new(ManualClock::new());
    let seen = Log::default();
    let backend = recording(&seen);
    let client = DeadlineLayer::new()
        .with_clock(Arc::clone(&clock))
        .with_timeout(Duration::from_millis(220));
    let backend = client.layer(backend);
    let handler = service_fn(move |_: http::Request<()>| {
        let backend = backend.clone();
        async move {
            // The call's own, lower, time left stays as it is.
            let own = http::Request::get("/")
                .header("admit-timeout-ms", "30")
                .body(())?;
            backend.clone().oneshot(own).await?;
            // Otherwise the 210 ms left after the 40 ms queued, below the layer's 220 ms cap.
            backend.oneshot(http::Request::new(())).await?;
            Ok::<_, BoxError>(())
        }
    });
    let server = ScopeLayer::new((GrpcTimeout, QueuedMs))
        .with_clock(Arc::clone(&clock))
        .layer(handler);
    let call = http::Request::post("/")
        .header("grpc-timeout", "250m")
        .header("x-queued-ms", "40")
        .body(())
        .unwrap();
    server.oneshot(call).await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        ["admit-timeout-ms: 30", "admit-timeout-ms: 210"]
    );
}

/// Sends one request carrying `timeout_ms` through a retrying client whose backend answers
/// each attempt with `answer`; the time left each attempt carried.
async fn retried(timeout_ms: &'static str, answer: fn() -> http::Response<()>) -> Vec<String> {
    let clock = TokioClock::now();
    let budget = RetryBudget::builder().clock(clock).build().unwrap();
    let policy = RetryPolicy::builder(Arc::new(budget)).build().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let backend = service_fn(move |request: http::Request<()>| {
        let left = request.headers()["admit-timeout-ms"].to_str().unwrap();
        log.lock().unwrap().push(left.to_owned());
        async move { Ok::<_, BoxError>(answer()) }
    });
    let client = RetryLayer::new(policy).layer(backend);
    let request = http::Request::get("/")
        .header("admit-timeout-ms", timeout_ms)
        .body(())
        .unwrap();
    let _ = client.oneshot(request).await;
    seen.lock().unwrap().clone()
}

#[tokio::test(start_paused = true)]
async fn a_retry_carries_what_is_left_and_none_is_made_past_the_deadline() {
    let refused = || {
        http::Response::builder()
            .status(503)
            .header("admit-refusal", "bound-full")
            .header("retry-after", "1")
            .body(())
            .unwrap()
    };
    // After the 1 s the server asked for, 500 ms are left; another second would pass the
    // deadline, so there is no third attempt though the policy allows three.
    assert_eq!(retried("1500", refused).await, ["1500", "500"]);
    // A deadline the wait alone would pass: no retry.
    assert_eq!(retried("900", refused).await, ["900"]);
    // A refusal because the deadline could not be met is final.
    let late = || {
        http::Response::builder()
            .status(503)
            .header("admit-refusal", "deadline")
            .body(())
            .unwrap()
    };
    assert_eq!(retried("60000", late).await, ["60000"]);
}
