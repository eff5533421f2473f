//! `ThrottleLayer` end to end: an HTTP client (hyper) in front of an axum server and a tonic
//! client in front of a tonic server, on 127.0.0.1, both servers refusing through admit's own
//! warm-up layer. The throttle counts admit's refusals as not accepted, errors of the backend's
//! own as accepted, and answers what it refuses without sending it.

#![cfg(feature = "tonic")]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use admit::client::{Throttle, ThrottleLayer, Throttled};
use admit::clock::ManualClock;
use admit::warmup::WarmUpLayer;
use admit::warmup::sentinel::SentinelWarmUp;
use admit_testkit::axum::serve_router;
use admit_testkit::tonic::{connect, listen, spawn_server};
use admit_testkit::wait::bounded;
use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tonic::transport::Server;
use tonic_health::ServingStatus;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tower::{Layer, ServiceExt};

/// A 3-per-second bucket on a frozen manual clock: it admits one request, then refuses all.
fn admits_one() -> Arc<SentinelWarmUp<ManualClock>> {
    Arc::new(
        SentinelWarmUp::builder(3.0)
            .clock(ManualClock::new())
            .build()
            .unwrap(),
    )
}

/// A throttle whose window never moves.
fn throttle() -> Arc<Throttle<ManualClock>> {
    Arc::new(
        Throttle::builder()
            .clock(ManualClock::new())
            .build()
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_client_stops_sending_to_a_refusing_server_and_not_to_a_failing_one() {
    let reached = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&reached);
    let router = Router::new()
        .route(
            "/work",
            get(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                async { "done" }
            }),
        )
        .layer(WarmUpLayer::new(admits_one()).http())
        .route("/fail", get(|| async { StatusCode::INTERNAL_SERVER_ERROR }));
    let server = serve_router(router).await;
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();

    // The server answers 500 to all: it takes every request, so none is throttled.
    let failing = throttle();
    let service = ThrottleLayer::new(Arc::clone(&failing)).layer(client.clone());
    for _ in 0..200 {
        let request = http::Request::get(format!("{}/fail", server.url()))
            .body(Empty::new())
            .unwrap();
        let response = bounded("a request", service.clone().oneshot(request))
            .await
            .unwrap();
        assert_eq!(response.status(), 500);
    }
    let snapshot = failing.snapshot();
    assert_eq!((snapshot.requests, snapshot.accepts), (200, 200));

    // The server admits one request and refuses the rest with 503 and `admit-refusal`.
    let refusing = throttle();
    let service = ThrottleLayer::new(Arc::clone(&refusing)).layer(client);
    let (mut sent, mut throttled) = (0, 0);
    for _ in 0..500 {
        let request = http::Request::get(format!("{}/work", server.url()))
            .body(Empty::new())
            .unwrap();
        match bounded("a request", service.clone().oneshot(request)).await {
            Ok(response) => {
                sent += 1;
                assert!(response.status() == 200 || response.status() == 503);
            }
            Err(error) => {
                assert!(error.is::<Throttled>(), "{error}");
                throttled += 1;
            }
        }
    }
    assert_eq!(reached.load(Ordering::SeqCst), 1);
    let snapshot = refusing.snapshot();
    assert_eq!((snapshot.requests, snapshot.accepts), (500, 1));
    assert_eq!(sent + throttled, 500);
    // Sent: one accepted, then about k · 1 + log-many more before the probability nears 1.
    assert!(sent < 50, "sent {sent}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tonic_client_stops_sending_to_a_server_refusing_with_resource_exhausted() {
    let limiter = admits_one();
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;
    let (addr, incoming) = listen().await;
    let serve = Server::builder()
        .layer(WarmUpLayer::new(Arc::clone(&limiter)).grpc())
        .add_service(health)
        .serve_with_incoming(incoming);
    let server = spawn_server(addr, serve);
    let channel = connect(&server).await;
    let throttle = throttle();
    let mut client = HealthClient::new(ThrottleLayer::new(Arc::clone(&throttle)).layer(channel));
    let (mut served, mut refused, mut throttled) = (0, 0u64, 0);
    for _ in 0..500 {
        let check = client.check(HealthCheckRequest::default());
        match bounded("a check", check).await {
            Ok(_) => served += 1,
            Err(status) if status.code() == tonic::Code::ResourceExhausted => refused += 1,
            Err(status) => {
                let source = std::error::Error::source(&status);
                assert!(
                    source.is_some_and(|error| error.is::<Throttled>()),
                    "{status:?}"
                );
                throttled += 1;
            }
        }
    }
    // What reached the server: one admitted, the rest refused by its bucket.
    let totals = limiter.totals();
    assert_eq!(served, 1);
    assert_eq!((totals.admitted, totals.refused), (1, refused));
    let snapshot = throttle.snapshot();
    assert_eq!((snapshot.requests, snapshot.accepts), (500, 1));
    assert!(
        refused < 50 && throttled > 450,
        "{refused} refused, {throttled} throttled"
    );
    server.shutdown().await;
}
