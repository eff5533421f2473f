//! A refusal releases what the inner service reserved in `poll_ready`: the shedder's, a warm-up
//! bucket's and the drain's layers over tower's `ConcurrencyLimit` (a semaphore permit) and
//! `Buffer` (a channel slot), each with room for one request. One clone of the layered service
//! is made ready and refused; another clone must then become ready and be answered, though the
//! refused clone lives on, as an idle keep-alive connection's service does.
//!
//! On tokio's paused clock: a clone that never becomes ready lets the clock jump to the
//! timeout, and the test fails at once.

#![cfg(feature = "tower")]

#[path = "support/rig.rs"]
mod rig;

use std::convert::Infallible;
use std::fmt::Debug;
use std::future::{Ready, ready};
use std::sync::Arc;
use std::time::Duration;

use admit::clock::ManualClock;
use admit::respond::{BoxError, Refused};
use admit::shed::ShedLayer;
use admit::warmup::WarmUpLayer;
use admit::warmup::sentinel::SentinelWarmUp;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use tower::buffer::Buffer;
use tower::limit::ConcurrencyLimit;
use tower::{Layer, Service, ServiceExt, service_fn};

use rig::Rig;

type Answer = Response<Full<Bytes>>;

/// An inner service answering `200 OK` at once.
fn answering() -> impl Service<
    Request<()>,
    Response = Answer,
    Error = Infallible,
    Future = Ready<Result<Answer, Infallible>>,
> + Clone
+ Send
+ 'static {
    service_fn(|_: Request<()>| ready(Ok(Response::new(Full::new(Bytes::from_static(b"ok"))))))
}

/// A semaphore of one permit, which `poll_ready` takes.
fn concurrency_limit() -> impl Service<Request<()>, Response = Answer, Error = Infallible> + Clone {
    ConcurrencyLimit::new(answering(), 1)
}

/// A queue of one slot, which `poll_ready` takes (spawns its worker on the test's runtime).
fn buffer() -> impl Service<Request<()>, Response = Answer, Error = BoxError> + Clone {
    Buffer::new(answering(), 1)
}

/// `service`, once ready, within a minute of tokio's paused clock.
async fn ready_soon<S>(service: &mut S) -> &mut S
where
    S: Service<Request<()>>,
    S::Error: Debug,
{
    tokio::time::timeout(Duration::from_secs(60), service.ready())
        .await
        .expect("never ready: a refused clone still holds the inner service's reservation")
        .expect("the inner service failed")
}

/// One request through `service`, once it is ready.
async fn send<S>(service: &mut S) -> Result<S::Response, S::Error>
where
    S: Service<Request<()>>,
    S::Error: Debug,
{
    ready_soon(service).await.call(Request::new(())).await
}

/// The shedder refuses one clone's request in an overload, then admits the other clone's.
async fn shed_refusal_releases<S>(inner: S)
where
    S: Service<Request<()>, Response = Answer> + Clone,
    S::Error: Into<BoxError>,
{
    let f = Rig::new();
    let service = ShedLayer::new(f.shedder.clone()).layer(inner);
    let (mut refused, mut other) = (service.clone(), service);

    let held = f.force_overload();
    let error = send(&mut refused).await.unwrap_err();
    assert!(error.is::<Refused>(), "got {error}");

    // The overload ends: the CPU cools, the held requests end, the cool-off passes.
    f.cpu.set(0);
    drop(held);
    f.clock.advance(Duration::from_secs(2));
    let response = send(&mut other).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    drop(refused);
}

#[tokio::test(start_paused = true)]
async fn a_shed_refusal_releases_a_concurrency_permit() {
    shed_refusal_releases(concurrency_limit()).await;
}

#[tokio::test(start_paused = true)]
async fn a_shed_refusal_releases_a_buffer_slot() {
    shed_refusal_releases(buffer()).await;
}

/// A cold bucket (3 per second, 1 while cold) admits one clone's request and refuses its next;
/// a second later the other clone's request is admitted.
async fn warm_up_refusal_releases<S>(inner: S)
where
    S: Service<Request<()>, Response = Answer> + Clone,
    S::Error: Into<BoxError>,
{
    let clock = ManualClock::new();
    let bucket = SentinelWarmUp::builder(3.0)
        .clock(clock.clone())
        .build()
        .unwrap();
    let service = WarmUpLayer::new(Arc::new(bucket)).layer(inner);
    let (mut refused, mut other) = (service.clone(), service);

    let first = send(&mut refused).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let error = send(&mut refused).await.unwrap_err();
    assert!(error.is::<Refused>(), "got {error}");

    clock.advance(Duration::from_secs(1));
    let response = send(&mut other).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    drop(refused);
}

#[tokio::test(start_paused = true)]
async fn a_warm_up_refusal_releases_a_concurrency_permit() {
    warm_up_refusal_releases(concurrency_limit()).await;
}

#[tokio::test(start_paused = true)]
async fn a_warm_up_refusal_releases_a_buffer_slot() {
    warm_up_refusal_releases(buffer()).await;
}

/// A draining layer refuses one clone's request; the other clone's request is answered (refused
/// too: a draining layer admits nothing), and a still-serving drain's layer over the same inner
/// service then admits its request.
#[cfg(all(feature = "http", feature = "tokio"))]
async fn drain_refusal_releases<S>(inner: S)
where
    S: Service<Request<()>, Response = Answer> + Clone,
    S::Error: Debug,
{
    use admit::drain::{Drain, DrainLayer};

    let draining = Drain::default();
    let service = DrainLayer::new(draining.clone()).layer(inner.clone());
    let (mut refused, mut other) = (service.clone(), service);
    let serving = Drain::default();
    let mut elsewhere = DrainLayer::new(serving).layer(inner);

    draining.start_now();
    for clone in [&mut refused, &mut other] {
        let response = ready_soon(clone)
            .await
            .call(Request::new(()))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
    let response = send(&mut elsewhere).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    drop((refused, other));
}

#[cfg(all(feature = "http", feature = "tokio"))]
#[tokio::test(start_paused = true)]
async fn a_drain_refusal_releases_a_concurrency_permit() {
    drain_refusal_releases(concurrency_limit()).await;
}

#[cfg(all(feature = "http", feature = "tokio"))]
#[tokio::test(start_paused = true)]
async fn a_drain_refusal_releases_a_buffer_slot() {
    drain_refusal_releases(buffer()).await;
}
