//! Deadlines end to end on 127.0.0.1: a hyper client's time left reaches an axum server, whose
//! bound refuses a spent deadline before its handler runs; a tonic client's reaches a tonic
//! server as `grpc-timeout`, and a call with none left is not sent.

#![cfg(all(feature = "tonic", feature = "retry"))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use admit::bound::{Bound, BoundLayer};
use admit::client::{DeadlineExceeded, DeadlineLayer};
use admit::middleware::TimeoutHeader;
use admit_testkit::axum::serve_router;
use admit_testkit::tonic::{check_only, connect, listen, spawn_server};
use admit_testkit::wait::bounded;
use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tonic::transport::Server;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tower::{Layer, ServiceExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_http_deadline_costs_the_handler_nothing() {
    let handled = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&handled);
    let bound = Arc::new(Bound::builder().build().unwrap());
    let router = Router::new()
        .route(
            "/work",
            get(move |headers: http::HeaderMap| {
                counter.fetch_add(1, Ordering::SeqCst);
                let left = headers.get("admit-timeout-ms");
                let left = left.map_or(String::new(), |left| left.to_str().unwrap().to_owned());
                async move { left }
            }),
        )
        .layer(BoundLayer::new(bound).http().inspect(TimeoutHeader::new()));
    let server = serve_router(router).await;
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let url = format!("{}/work", server.url());

    // Sent with none left (a client without the layer, or a proxy's queue that took it all):
    // refused at the door.
    for _ in 0..20 {
        let spent = http::Request::get(&url)
            .header("admit-timeout-ms", "0")
            .body(Empty::new())
            .unwrap();
        let response = bounded("a spent request", client.request(spent))
            .await
            .unwrap();
        assert_eq!(response.status(), 503);
        assert_eq!(response.headers()["admit-refusal"], "deadline");
    }
    assert_eq!(handled.load(Ordering::SeqCst), 0);

    // Through the layer: the handler sees what is left.
    let service = DeadlineLayer::new()
        .with_timeout(Duration::from_secs(5))
        .layer(client);
    let request = http::Request::get(&url).body(Empty::new()).unwrap();
    let response = bounded("a request", service.clone().oneshot(request))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap();
    let left: u64 = String::from_utf8(body.to_bytes().to_vec())
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=5000).contains(&left), "{left}");
    assert_eq!(handled.load(Ordering::SeqCst), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tonic_call_carries_its_time_left_as_grpc_timeout() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (addr, incoming) = listen().await;
    // The `grpc-timeout` of each check.
    let recorded = Arc::clone(&seen);
    let health = check_only(move |request| {
        let timeout = request.metadata().get("grpc-timeout");
        let timeout = timeout.map_or("none", |value| value.to_str().unwrap_or("?"));
        recorded.lock().unwrap().push(timeout.to_owned());
    });
    let serve = Server::builder()
        .add_service(health)
        .serve_with_incoming(incoming);
    let server = spawn_server(addr, serve);
    let layer = DeadlineLayer::new().with_timeout(Duration::from_millis(250));
    let mut client = HealthClient::new(layer.layer(connect(&server).await));

    bounded("a check", client.check(HealthCheckRequest::default()))
        .await
        .unwrap();
    // The call's own, lower, timeout is kept as tonic wrote it.
    let mut own = tonic::Request::new(HealthCheckRequest::default());
    own.set_timeout(Duration::from_millis(40));
    bounded("a check with its own timeout", client.check(own))
        .await
        .unwrap();
    // None left: not sent.
    let mut spent = tonic::Request::new(HealthCheckRequest::default());
    spent.set_timeout(Duration::ZERO);
    let status = bounded("a spent check", client.check(spent))
        .await
        .unwrap_err();
    let source = std::error::Error::source(&status);
    assert!(
        source.is_some_and(|error| error.is::<DeadlineExceeded>()),
        "{status:?}"
    );

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    // 250 ms, less what passed before the layer read the clock, in µs.
    let first = seen[0].strip_suffix('u').unwrap().parse::<u64>().unwrap();
    assert!((1..=250_000).contains(&first), "{seen:?}");
    assert_eq!(seen[1], "40000000n", "{seen:?}");
    server.shutdown().await;
}
