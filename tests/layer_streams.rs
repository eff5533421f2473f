//! End to end: a streamed response is in flight for the shedder until its last byte. Real axum
//! and tonic servers on loopback stream a body (HTTP) and a server stream (gRPC) fed by the
//! test; the shedder's layer holds its permit in the body, so the request stays in flight
//! while the stream is open, passes when it ends, and counts as cancelled when the client
//! leaves first.
//!
//! The shedder's clock and CPU are manual; every network await is bounded by a timeout, and no
//! test asserts on timings.
#![cfg(feature = "tonic")]

#[path = "support/rig.rs"]
mod rig;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use admit::shed::ShedLayer;
use admit_testkit::axum::serve_router;
use admit_testkit::tonic::{listen, spawn_server};
use admit_testkit::wait::{bounded, eventually};
use axum::Router;
use axum::body::Body;
use axum::routing::get;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rig::Rig;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Server};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

/// The sending end of the one stream the server answers with, once a request has opened it.
type Feed<T> = Arc<Mutex<Option<mpsc::Sender<T>>>>;

/// A channel for the next response stream: the server takes the receiver, the test the sender
/// (from `feed`).
fn next_stream<T>(feed: &Feed<T>) -> mpsc::Receiver<T> {
    let (sender, receiver) = mpsc::channel(4);
    *feed.lock().unwrap() = Some(sender);
    receiver
}

fn sender<T>(feed: &Feed<T>) -> mpsc::Sender<T> {
    feed.lock()
        .unwrap()
        .take()
        .expect("the server opened the stream")
}

/// `(flying, passed, failed)`.
fn counts(rig: &Rig) -> (u64, u64, u64) {
    let snapshot = rig.shedder.snapshot();
    (snapshot.flying, snapshot.passed, snapshot.failed)
}

/// Waits, bounded, until the server has ended the request it was streaming: the counts are
/// `want`.
async fn settled(rig: &Rig, what: &str, want: (u64, u64, u64)) {
    eventually(
        what,
        || counts(rig) == want,
        || format!("{:?}", counts(rig)),
    )
    .await;
}

/// An axum server whose `/stream` streams what the test sends, behind `ShedLayer::http()`.
async fn http_server(rig: &Rig) -> (admit_testkit::TestServer, Feed<Result<Bytes, Infallible>>) {
    let feed: Feed<Result<Bytes, Infallible>> = Arc::default();
    let server_feed = Arc::clone(&feed);
    let app = Router::new()
        .route(
            "/stream",
            get(move || {
                let receiver = next_stream(&server_feed);
                async move { Body::from_stream(ReceiverStream::new(receiver)) }
            }),
        )
        .layer(ShedLayer::new(Arc::clone(&rig.shedder)).http());
    (serve_router(app).await, feed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_http_response_is_in_flight_until_its_last_byte() {
    let rig = Rig::new();
    let (server, feed) = http_server(&rig).await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let request = || {
        hyper::Request::get(format!("{}/stream", server.url()))
            .body(Empty::new())
            .unwrap()
    };

    // Read to the end: in flight while it streams, then one pass.
    let response = bounded("GET /stream", client.request(request()))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let chunks = sender(&feed);
    let mut body = response.into_body();
    chunks.send(Ok(Bytes::from_static(b"first"))).await.unwrap();
    let first = bounded("the first chunk", body.frame())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.into_data().unwrap(), "first");
    assert_eq!(
        counts(&rig),
        (1, 0, 0),
        "streaming: in flight, not yet passed"
    );
    chunks.send(Ok(Bytes::from_static(b"last"))).await.unwrap();
    drop(chunks);
    let rest = bounded("the rest", body.collect())
        .await
        .unwrap()
        .to_bytes();
    assert_eq!(rest, "last");
    // The server saw the end before it wrote the terminating chunk the client just read.
    assert_eq!(counts(&rig), (0, 1, 0), "ended: one pass");

    // Leave in the middle: the server drops the body, and the request counts as cancelled.
    let response = bounded("GET /stream", client.request(request()))
        .await
        .unwrap();
    let chunks = sender(&feed);
    let mut body = response.into_body();
    chunks.send(Ok(Bytes::from_static(b"first"))).await.unwrap();
    bounded("the first chunk", body.frame())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(counts(&rig), (1, 1, 0));
    drop(body);
    drop(client);
    settled(&rig, "the server drops the abandoned stream", (0, 1, 1)).await;
    drop(chunks);
    server.shutdown().await;
}

/// A health service whose `Watch` streams what the test sends.
struct StreamingHealth {
    feed: Feed<Result<HealthCheckResponse, tonic::Status>>,
}

#[tonic::async_trait]
impl Health for StreamingHealth {
    type WatchStream = ReceiverStream<Result<HealthCheckResponse, tonic::Status>>;

    async fn check(
        &self,
        _request: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<HealthCheckResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("this test watches"))
    }

    async fn watch(
        &self,
        _request: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<Self::WatchStream>, tonic::Status> {
        Ok(tonic::Response::new(ReceiverStream::new(next_stream(
            &self.feed,
        ))))
    }
}

/// Opens a watch and streams one message through it: the stream and the server's sender.
async fn open_watch(
    client: &HealthClient<Channel>,
    feed: &Feed<Result<HealthCheckResponse, tonic::Status>>,
) -> (
    tonic::Streaming<HealthCheckResponse>,
    mpsc::Sender<Result<HealthCheckResponse, tonic::Status>>,
) {
    let mut client = client.clone();
    let watch = client.watch(HealthCheckRequest::default());
    let mut stream = bounded("watch", watch).await.unwrap().into_inner();
    let messages = sender(feed);
    messages.send(serving()).await.unwrap();
    let first = bounded("the first message", stream.message()).await;
    assert_eq!(first.unwrap(), Some(serving().unwrap()));
    (stream, messages)
}

fn serving() -> Result<HealthCheckResponse, tonic::Status> {
    Ok(HealthCheckResponse {
        status: ServingStatus::Serving as i32,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_server_stream_is_in_flight_until_it_ends() {
    let rig = Rig::new();
    let feed = Feed::default();
    let health = HealthServer::new(StreamingHealth {
        feed: Arc::clone(&feed),
    });
    let (addr, incoming) = listen().await;
    let serve = Server::builder()
        .layer(ShedLayer::new(Arc::clone(&rig.shedder)).grpc())
        .add_service(health)
        .serve_with_incoming(incoming);
    let server = spawn_server(addr, serve);
    let client = HealthClient::new(admit_testkit::tonic::connect(&server).await);

    // To the end: in flight while it streams, then one pass (the trailers carry OK).
    let (mut stream, messages) = open_watch(&client, &feed).await;
    assert_eq!(
        counts(&rig),
        (1, 0, 0),
        "streaming: in flight, not yet passed"
    );
    messages.send(serving()).await.unwrap();
    drop(messages);
    bounded("the second message", stream.message())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(bounded("the end", stream.message()).await.unwrap(), None);
    // The trailers went out with the body's last frame; the server may finish the body a
    // moment after the client has read them.
    settled(&rig, "the ended stream passes", (0, 1, 0)).await;

    // Cancel in the middle: the server drops the stream, and the request counts as cancelled.
    let (stream, messages) = open_watch(&client, &feed).await;
    assert_eq!(counts(&rig), (1, 1, 0));
    drop(stream);
    settled(&rig, "the server drops the cancelled stream", (0, 1, 1)).await;
    drop(messages);
    server.shutdown().await;
}
