//! The shedder's queue gate through the HTTP layer: the age of the stamp a proxy put in
//! `X-Request-Start`, less the clocks' offset the shedder learned from a request that found the
//! service idle, makes the gate hot, and while it is hot the requests that waited more than
//! twice the target are answered 503, those that waited less are served. Manual clocks: the
//! shedder's monotonic one, and the headers' wall clock, 250 ms ahead of the proxy's.

#![cfg(feature = "http")]

use std::convert::Infallible;
use std::time::Duration;

use admit::clock::ManualClock;
use admit::middleware::RequestStart;
use admit::shed::{ShedLayer, Shedder};
use admit::signal::cpu::ManualCpu;
use admit::signal::queue::QueueGate;
use admit::signal::queue::header::{HeaderConfig, HeaderError};
use http::{Request, Response, StatusCode};
use tokio::sync::watch;
use tower::{Layer, ServiceExt};

/// The proxy's wall clock at the start: 2023-11-14.
const EPOCH_NS: u64 = 1_700_000_000_000_000_000;
/// How far the service's wall clock is ahead of the proxy's.
const SKEW: Duration = Duration::from_millis(250);

#[tokio::test]
async fn stamped_waits_drive_the_gate() {
    let clock = ManualClock::new();
    let wall = ManualClock::new();
    let shedder = std::sync::Arc::new(
        Shedder::builder()
            .clock(clock.clone())
            .cpu(ManualCpu::new(0))
            .queue_gate(QueueGate::default())
            .build()
            .unwrap(),
    );
    let start = RequestStart::new(HeaderConfig::default())
        .unwrap()
        .wall_clock(wall.clone());
    // The handler answers at once, but for a request marked `x-hold`, which it answers once
    // `release` says so.
    let (release, released) = watch::channel(false);
    let service = ShedLayer::new(shedder.clone())
        .http()
        .inspect(start)
        .layer(tower::service_fn(move |request: Request<()>| {
            let mut released = released.clone();
            async move {
                if request.headers().contains_key("x-hold") {
                    released.wait_for(|&released| released).await.unwrap();
                }
                Ok::<_, Infallible>(Response::new(String::new()))
            }
        }));
    // A request at `ms` on the proxy's clock, stamped `waited_ms` before it reaches the
    // service (None: no header), read on the service's clock.
    let request = |ms: u64, waited_ms: Option<u64>| {
        clock.set(Duration::from_millis(ms));
        wall.set(Duration::from_nanos(EPOCH_NS) + Duration::from_millis(ms) + SKEW);
        let mut request = Request::get("/");
        if let Some(waited) = waited_ms {
            let stamp = EPOCH_NS / 1_000_000 + ms - waited; // ms since the epoch
            request = request.header("x-request-start", stamp.to_string());
        }
        request.body(()).unwrap()
    };
    let send = |ms: u64, waited_ms: Option<u64>| service.clone().oneshot(request(ms, waited_ms));
    let status = |response: Result<Response<_>, Infallible>| match response {
        Ok(response) => response.status(),
        Err(never) => match never {},
    };
    // The first request finds the service idle: its stamp's age, 250 ms, is the clocks'
    // offset. It stays in flight, so the requests after it find the service busy.
    let mut first = request(10, Some(0));
    first.headers_mut().insert("x-hold", "1".parse().unwrap());
    let held = tokio::spawn(service.clone().oneshot(first));
    while shedder.snapshot().flying == 0 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        shedder.snapshot().clock_offset_nanos,
        Some(SKEW.as_nanos() as i64)
    );
    // 100–200 ms: every request waited 60 ms.
    for ms in [110, 150, 190] {
        assert_eq!(status(send(ms, Some(60)).await), StatusCode::OK, "{ms} ms");
    }
    // 200–300 ms: the gate is hot; 60 ms waits are refused, short ones served.
    let refused = send(210, Some(60)).await.unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(refused.headers().contains_key("retry-after"));
    assert_eq!(refused.headers()["admit-refusal"], "queue-delay");
    assert_eq!(
        status(send(220, Some(3)).await),
        StatusCode::OK,
        "a short wait"
    );
    assert_eq!(
        status(send(230, None).await),
        StatusCode::OK,
        "no header, no wait known"
    );
    assert_eq!(
        status(send(240, Some(2)).await),
        StatusCode::OK,
        "a short wait"
    );
    assert!(shedder.snapshot().hot);
    // 300 ms on: two of the last interval's three waits were short, so the gate is cold again.
    assert_eq!(status(send(310, Some(60)).await), StatusCode::OK);
    // A malformed header gives no wait and is counted.
    let garbled = Request::get("/")
        .header("x-request-start", "t=soon")
        .body(())
        .unwrap();
    assert_eq!(
        status(service.clone().oneshot(garbled).await),
        StatusCode::OK
    );
    let snapshot = shedder.snapshot();
    let invalid = HeaderError::ALL
        .iter()
        .position(|&error| error == HeaderError::Invalid)
        .unwrap();
    assert_eq!(snapshot.header_errors[invalid], 1);
    assert_eq!(snapshot.header_errors.iter().sum::<u64>(), 1);
    assert_eq!((snapshot.passed, snapshot.dropped), (8, 1));
    release.send_replace(true);
    assert_eq!(status(held.await.unwrap()), StatusCode::OK);
    assert_eq!(shedder.snapshot().passed, 9);
}
