//! A real tonic server on 127.0.0.1 drained end to end: `DrainLayer::grpc()` in front of a
//! health service whose `Check` is held by the test and whose `Watch` stream holds a session,
//! served with `serve_with_incoming_shutdown(.., drain.stop_accepting())`.

#![cfg(all(feature = "tonic", feature = "tokio"))]

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use admit::drain::{Drain, DrainLayer, Outcome};
use admit_testkit::tonic::listen;
use admit_testkit::wait::bounded;
use tokio::sync::Notify;
use tonic::Code;
use tonic::codegen::tokio_stream::Stream;
use tonic::transport::{Channel, Server};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

#[derive(Clone)]
struct Held {
    drain: Drain,
    checks: Arc<std::sync::atomic::AtomicUsize>,
    entered: Arc<Notify>,
    release: Arc<Notify>,
}

type Watch = Pin<Box<dyn Stream<Item = Result<HealthCheckResponse, tonic::Status>> + Send>>;

fn serving() -> HealthCheckResponse {
    HealthCheckResponse {
        status: ServingStatus::Serving as i32,
    }
}

#[tonic::async_trait]
impl Health for Held {
    type WatchStream = Watch;

    /// Answers once the test releases it.
    async fn check(
        &self,
        _: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<HealthCheckResponse>, tonic::Status> {
        self.checks
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.entered.notify_one();
        self.release.notified().await;
        Ok(tonic::Response::new(serving()))
    }

    /// One SERVING, then nothing until the drain asks the session to reconnect: then the
    /// stream ends.
    async fn watch(
        &self,
        _: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<Watch>, tonic::Status> {
        let session = self.drain.session();
        let (sender, receiver) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            let _ = sender.send(Ok(serving())).await;
            session.reconnect().await;
        });
        let stream = tonic::codegen::tokio_stream::wrappers::ReceiverStream::new(receiver);
        Ok(tonic::Response::new(Box::pin(stream)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tonic_server_drains_its_calls_and_streams() {
    let drain = Drain::builder()
        .propagation_delay(Duration::from_millis(200))
        .deadline(Duration::from_secs(20))
        .build()
        .unwrap();
    let held = Held {
        drain: drain.clone(),
        checks: Arc::default(),
        entered: Arc::new(Notify::new()),
        release: Arc::new(Notify::new()),
    };
    let (addr, incoming) = listen().await;
    let server = tokio::spawn(
        Server::builder()
            .layer(DrainLayer::new(drain.clone()).grpc())
            .add_service(HealthServer::new(held.clone()))
            .serve_with_incoming_shutdown(incoming, drain.stop_accepting()),
    );
    let channel = bounded(
        "connect",
        Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect(),
    )
    .await
    .unwrap();
    let mut client = HealthClient::new(channel);

    let mut checking = client.clone();
    let check = tokio::spawn(async move {
        checking
            .check(HealthCheckRequest::default())
            .await
            .map(|response| response.into_inner().status)
    });
    bounded("the held check", held.entered.notified()).await;
    let mut watch = client
        .watch(HealthCheckRequest::default())
        .await
        .unwrap()
        .into_inner();
    let first = bounded("the first status", watch.message()).await.unwrap();
    assert_eq!(first.unwrap().status, ServingStatus::Serving as i32);
    let snapshot = drain.snapshot();
    // The held call, and the stream's call whose body is still streaming.
    assert_eq!((snapshot.in_flight, snapshot.sessions), (2, 1));

    drain.start();
    bounded("draining", drain.stop_accepting()).await;
    // A new call fails without reaching the service. Who answers it races with the server's
    // GOAWAY: the layer (UNAVAILABLE), or the client's transport, which reports a stream the
    // server will not take as CANCELLED or INTERNAL ("GoAway"). The layer's own answer is
    // checked in `drain_layer.rs`.
    let refused = bounded(
        "a call while draining",
        client.check(HealthCheckRequest::default()),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            refused.code(),
            Code::Unavailable | Code::Cancelled | Code::Internal
        ),
        "{refused:?}"
    );
    assert_eq!(held.checks.load(std::sync::atomic::Ordering::SeqCst), 1);
    // The held call completes; the stream ends when its session is told to reconnect.
    held.release.notify_one();
    let status = bounded("the held check's answer", check)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, ServingStatus::Serving as i32);
    assert!(
        bounded("the stream's end", watch.message())
            .await
            .unwrap()
            .is_none()
    );

    let outcome = bounded("the drain's end", drain.finished()).await;
    assert!(matches!(outcome, Outcome::Drained { .. }), "{outcome:?}");
    drop(client);
    bounded("the server's graceful end", server)
        .await
        .unwrap()
        .unwrap();
}
