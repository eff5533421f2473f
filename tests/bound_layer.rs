//! The bound through the tower glue and axum, on tokio's paused clock: requests beyond the bound
//! wait and enter by class, leave with a 503 when their wait or deadline runs out, and give up
//! their place when dropped.

use std::sync::Arc;
use std::time::Duration;

use admit::bound::{Bound, BoundLayer};
use admit::middleware::{CriticalityHeader, GrpcTimeout};
use axum::Router;
use axum::body::Body;
use axum::extract::Query;
use axum::routing::get;
use http::{Request, Response, StatusCode};
use tokio::time::Instant;
use tower::{Service, ServiceExt};

#[path = "support/tokio_clock.rs"]
mod tokio_clock;
use tokio_clock::TokioClock;

#[derive(serde::Deserialize)]
struct Work {
    ms: u64,
}

/// A router whose `/work?ms=N` handler takes N ms, behind a bound of one place and `capacity`
/// waiting places, reading the class and `grpc-timeout`.
fn app(capacity: u32) -> (Arc<Bound<TokioClock>>, Router) {
    let bound = Arc::new(
        Bound::builder()
            .floor(1)
            .ceiling(1)
            .queue_capacity(capacity)
            .clock(TokioClock::now())
            .build()
            .unwrap(),
    );
    let router = Router::new()
        .route(
            "/work",
            get(|Query(work): Query<Work>| async move {
                tokio::time::sleep(Duration::from_millis(work.ms)).await;
                "done"
            }),
        )
        .layer(
            BoundLayer::new(bound.clone())
                .http()
                .inspect((CriticalityHeader::new(), GrpcTimeout)),
        );
    (bound, router)
}

fn work(ms: u64, class: &str) -> Request<Body> {
    Request::get(format!("/work?ms={ms}"))
        .header("admit-criticality", class)
        .body(Body::empty())
        .unwrap()
}

/// Sends `request` on its own task; the answer comes with the time it arrived.
fn send(
    router: &Router,
    request: Request<Body>,
) -> tokio::task::JoinHandle<(StatusCode, String, Instant)> {
    let router = router.clone();
    tokio::spawn(async move {
        let response: Response<_> = router.oneshot(request).await.unwrap();
        let reason = response
            .headers()
            .get("admit-refusal")
            .map(|value| value.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (response.status(), reason, Instant::now())
    })
}

/// Lets the spawned tasks run up to their next wait.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn requests_beyond_the_bound_wait_and_enter_highest_class_first() {
    let (bound, router) = app(8);
    let start = Instant::now();
    let first = send(&router, work(50, "critical"));
    settle().await;
    let sheddable = send(&router, work(10, "sheddable"));
    settle().await;
    let critical = send(&router, work(10, "critical"));
    settle().await;
    assert_eq!(
        (bound.snapshot().in_service, bound.snapshot().waiting),
        (1, 2)
    );
    let (first, sheddable, critical) = (
        first.await.unwrap(),
        sheddable.await.unwrap(),
        critical.await.unwrap(),
    );
    for answer in [&first, &sheddable, &critical] {
        assert_eq!(answer.0, StatusCode::OK);
    }
    // The critical request went in when the first ended, the sheddable one after it.
    assert_eq!(first.2 - start, Duration::from_millis(50));
    assert_eq!(critical.2 - start, Duration::from_millis(60));
    assert_eq!(sheddable.2 - start, Duration::from_millis(70));
    assert_eq!(
        (bound.snapshot().in_service, bound.snapshot().waiting),
        (0, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn a_wait_that_runs_out_is_answered_503_with_its_reason() {
    let (bound, router) = app(8);
    let start = Instant::now();
    let long = send(&router, work(1000, "critical"));
    settle().await;
    let waiter = send(&router, work(1, "critical"));
    let (status, reason, at) = waiter.await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reason, "bound-timeout");
    // The longest wait while the queue has not stayed busy: 100 ms.
    assert_eq!(at - start, Duration::from_millis(100));
    assert_eq!(bound.snapshot().waiting, 0);
    assert_eq!(long.await.unwrap().0, StatusCode::OK);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_the_request_cannot_meet_ends_its_wait() {
    let (_bound, router) = app(8);
    let start = Instant::now();
    let _long = send(&router, work(1000, "critical"));
    settle().await;
    let mut call = work(1, "critical");
    call.headers_mut()
        .insert("grpc-timeout", http::HeaderValue::from_static("20m"));
    let (status, reason, at) = send(&router, call).await.unwrap();
    assert_eq!(
        (status, reason.as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "deadline")
    );
    assert_eq!(at - start, Duration::from_millis(20));
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_pushes_out_the_lower_class_and_a_dropped_waiter_leaves() {
    let (bound, router) = app(1);
    let _long = send(&router, work(1000, "critical"));
    settle().await;
    let sheddable = send(&router, work(1, "sheddable"));
    settle().await;
    // The one place is taken: another sheddable request is refused at once.
    let (status, reason, _) = send(&router, work(1, "sheddable")).await.unwrap();
    assert_eq!(
        (status, reason.as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "bound-full")
    );
    // A critical one takes the sheddable one's place.
    let mut service = router.clone();
    let critical = ServiceExt::<Request<Body>>::ready(&mut service)
        .await
        .unwrap()
        .call(work(1, "critical"));
    let mut critical = Box::pin(critical);
    assert!(futures_poll(&mut critical).is_none());
    let (status, reason, _) = sheddable.await.unwrap();
    assert_eq!(
        (status, reason.as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "bound-pushed-out")
    );
    assert_eq!(bound.snapshot().waiting, 1);
    // Dropped while waiting, it leaves at once.
    drop(critical);
    assert_eq!(bound.snapshot().waiting, 0);
}

/// Polls `future` once: its output if it was ready.
fn futures_poll<F: std::future::Future + Unpin>(future: &mut F) -> Option<F::Output> {
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::Pin::new(future).poll(&mut context) {
        std::task::Poll::Ready(output) => Some(output),
        std::task::Poll::Pending => None,
    }
}
