//! End to end: the bound in a real tonic server on loopback, called by a real tonic client. A
//! call's `grpc-timeout` is its deadline: a call that cannot be served within it is refused at
//! once with `RESOURCE_EXHAUSTED`; a call with time to spare waits for a place and is served.
//!
//! The bound's clock is manual and the handler advances it, so what the bound learns of the
//! service time is exact; every network await is bounded and no test asserts on timings.
#![cfg(all(feature = "tonic", feature = "tokio"))]

use std::sync::Arc;
use std::time::Duration;

use admit::Shared;
use admit::bound::{Bound, BoundLayer};
use admit::clock::ManualClock;
use admit::criticality::Criticality;
use admit::middleware::{Admission, GrpcTimeout, Limiter};
use admit::signal::Arrival;
use admit_testkit::tonic::{check_only, connect, listen, spawn_server};
use admit_testkit::wait::bounded;
use tonic::Code;
use tonic::transport::Server;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// How long each check takes on the bound's manual clock.
const SERVICE_TIME: Duration = Duration::from_millis(30);

/// A check with `timeout` as its `grpc-timeout`, if any.
fn check(timeout: Option<Duration>) -> tonic::Request<HealthCheckRequest> {
    let mut request = tonic::Request::new(HealthCheckRequest::default());
    if let Some(timeout) = timeout {
        request.set_timeout(timeout);
    }
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_deadline_cannot_be_met_is_refused_at_once_and_one_that_can_waits() {
    let clock = ManualClock::new();
    let bound = Arc::new(
        Bound::builder()
            .floor(1)
            .ceiling(1)
            .queue_capacity(4)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let (addr, incoming) = listen().await;
    // Every check takes `SERVICE_TIME` on the manual clock.
    let slow = clock.clone();
    let serve = Server::builder()
        .layer(BoundLayer::new(bound.clone()).grpc().inspect(GrpcTimeout))
        .add_service(check_only(move |_| slow.advance(SERVICE_TIME)))
        .serve_with_incoming(incoming);
    let server = spawn_server(addr, serve);
    let mut client = HealthClient::new(connect(&server).await);

    // One call teaches the bound the service time.
    bounded("a first check", client.check(check(None)))
        .await
        .expect("served");

    // The only place is taken: a call with 20 ms left cannot wait for a 30 ms service.
    let Admission::Enter(held) = Bound::admit(&Shared::Arc(bound.clone()), Arrival::new()) else {
        panic!("the place is free");
    };
    let status = bounded(
        "a check with 20 ms left",
        client.check(check(Some(Duration::from_millis(20)))),
    )
    .await
    .expect_err("refused");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(
        status
            .metadata()
            .get("admit-refusal")
            .and_then(|value| value.to_str().ok()),
        Some("deadline"),
        "{status:?}"
    );

    // A call with 10 s left waits for the place, and is served once it is freed.
    let mut waiting_client = client.clone();
    let waiter = tokio::spawn(async move {
        waiting_client
            .check(check(Some(Duration::from_secs(10))))
            .await
    });
    bounded("the call joins the queue", async {
        while bound.snapshot().waiting == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    drop(held);
    bounded("the waiting check", waiter)
        .await
        .expect("the task ends")
        .expect("served after waiting");

    let counts = bound.snapshot().classes[Criticality::default().index()];
    assert_eq!(
        (counts.deadline, counts.waited, counts.entered),
        (1, 1, 1),
        "{counts:?}"
    );
}
