//! The shedder's queue gate through the HTTP layer: the wait a proxy stamped in
//! `X-Request-Start` makes the gate hot, and while it is hot the requests that waited more than
//! twice the target are answered 503, those that waited less are served. Manual clocks: the
//! monotonic one the shedder and the skew floor share, and the headers' wall clock.

#![cfg(feature = "http")]

use std::convert::Infallible;
use std::time::Duration;

use admit::clock::ManualClock;
use admit::middleware::RequestStart;
use admit::shed::{ShedLayer, Shedder};
use admit::signal::cpu::ManualCpu;
use admit::signal::queue::QueueGate;
use admit::signal::queue::header::HeaderConfig;
use http::{Request, Response, StatusCode};
use tower::{Layer, ServiceExt};

/// The wall clock's epoch offset: 2023-11-14.
const EPOCH_NS: u64 = 1_700_000_000_000_000_000;

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
        .wall_clock(wall.clone())
        .clock(clock.clone());
    let service = ShedLayer::new(shedder.clone())
        .http()
        .inspect(start.clone())
        .layer(tower::service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
    // A request at `ms` on both clocks, stamped `waited_ms` earlier (None: no header).
    let send = |ms: u64, waited_ms: Option<u64>| {
        clock.set(Duration::from_millis(ms));
        wall.set(Duration::from_nanos(EPOCH_NS) + Duration::from_millis(ms));
        let mut request = Request::get("/");
        if let Some(waited) = waited_ms {
            let stamp = EPOCH_NS / 1_000_000 + ms - waited; // ms since the epoch
            request = request.header("x-request-start", stamp.to_string());
        }
        service.clone().oneshot(request.body(()).unwrap())
    };
    let status = |response: Result<Response<_>, Infallible>| match response {
        Ok(response) => response.status(),
        Err(never) => match never {},
    };
    // The first stamp, with no wait, sets its lane's floor (the clocks' offset) at 0. A 60 ms
    // wait recorded in another, still empty, lane is that lane's floor and reads 40 ms (less
    // the 20 ms cap) instead of 60 ms: above the target either way.
    assert_eq!(status(send(10, Some(0)).await), StatusCode::OK);
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
    let invalid = start
        .errors()
        .find(|(error, _)| error.as_str() == "invalid")
        .map(|(_, count)| count);
    assert_eq!(invalid, Some(1));
    let snapshot = shedder.snapshot();
    assert_eq!((snapshot.passed, snapshot.dropped), (9, 1));
}
