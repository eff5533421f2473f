//! `DrainLayer` in each phase, on tokio's paused clock: whether the inner service is called,
//! what the response carries, and how long the request counts as in flight.

#![cfg(all(feature = "http", feature = "tokio"))]

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use admit::drain::{Drain, DrainBody, DrainLayer, Outcome, Phase};
use admit::middleware::classify::{Classify, GoZeroHttp, Outcome as Classified};
use admit::respond::{REFUSAL_HEADER, Refused};
use bytes::Bytes;
use http::{Request, Response, StatusCode, Version};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Full};
use tower::{Service, ServiceExt, service_fn};

/// A body whose chunks the test sends; ends when the sender drops. (`Default`: empty, as
/// responders build refusals.)
#[derive(Default)]
struct Frames {
    frames: Option<tokio::sync::mpsc::UnboundedReceiver<Bytes>>,
}

impl Body for Frames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match &mut self.frames {
            Some(frames) => frames
                .poll_recv(cx)
                .map(|frame| frame.map(|bytes| Ok(Frame::data(bytes)))),
            None => Poll::Ready(None),
        }
    }
}

type Inner = Response<Full<Bytes>>;

/// The drain, its layered service, and how often the inner service was called.
#[allow(clippy::type_complexity)]
fn rig(
    response: impl Fn() -> Inner + Clone + Send + 'static,
) -> (
    Drain,
    impl Service<Request<()>, Response = Response<DrainBody<Full<Bytes>>>, Error = Infallible> + Clone,
    Arc<AtomicUsize>,
) {
    let drain = Drain::builder()
        .propagation_delay(Duration::from_secs(5))
        .deadline(Duration::from_secs(25))
        .retry_after(Duration::from_secs(3))
        .build()
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let service = DrainLayer::new(drain.clone()).layer(service_fn(move |_: Request<()>| {
        counted.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok::<_, Infallible>(response()))
    }));
    (drain, service, calls)
}

use tower::Layer as _;

fn ok() -> Inner {
    Response::new(Full::new(Bytes::from_static(b"ok")))
}

fn request(version: Version) -> Request<()> {
    Request::builder().version(version).body(()).unwrap()
}

#[tokio::test(start_paused = true)]
async fn serving_passes_and_counts_until_the_body_ends() {
    let (drain, service, calls) = rig(ok);
    let response = service.oneshot(request(Version::HTTP_11)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get("connection").is_none());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // The response is out, its body not yet read: still in flight.
    assert_eq!(drain.snapshot().in_flight, 1);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "ok");
    assert_eq!(drain.snapshot().in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn announced_closes_http1_connections_only() {
    let (drain, service, calls) = rig(ok);
    drain.start();
    let response = service
        .clone()
        .oneshot(request(Version::HTTP_11))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["connection"], "close");
    let response = service
        .clone()
        .oneshot(request(Version::HTTP_10))
        .await
        .unwrap();
    assert_eq!(response.headers()["connection"], "close");
    // HTTP/2 has no Connection header (hyper strips it and warns): GOAWAY does the job.
    let response = service
        .clone()
        .oneshot(request(Version::HTTP_2))
        .await
        .unwrap();
    assert!(response.headers().get("connection").is_none());
    assert_eq!(calls.load(Ordering::SeqCst), 3);

    // A response that already closes keeps its one header.
    let (drain, service, _) = rig(|| {
        let mut response = ok();
        response
            .headers_mut()
            .insert("connection", "Keep-Alive, Close".parse().unwrap());
        response
    });
    drain.start();
    let response = service.oneshot(request(Version::HTTP_11)).await.unwrap();
    let values: Vec<_> = response.headers().get_all("connection").iter().collect();
    assert_eq!(values, ["Keep-Alive, Close"]);
}

#[tokio::test(start_paused = true)]
async fn an_upgrade_ends_its_request_with_the_101() {
    let (drain, service, _) = rig(|| {
        let mut response = ok();
        *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        response
    });
    drain.start();
    let response = service.oneshot(request(Version::HTTP_11)).await.unwrap();
    assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
    assert!(response.headers().get("connection").is_none());
    assert!(!response.body().in_flight());
    assert_eq!(drain.snapshot().in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn draining_refuses_without_calling_the_inner_service() {
    let (drain, service, calls) = rig(ok);
    drain.start();
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(drain.phase(), Phase::Drained);
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let response = service.clone().oneshot(request(version)).await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()["retry-after"], "3");
        assert_eq!(response.headers()[REFUSAL_HEADER], "draining");
        assert!(response.extensions().get::<Refused>().is_some());
        assert_eq!(
            response.headers().get("connection").is_some(),
            version == Version::HTTP_11
        );
        // The shedder's classifier never takes a refusal for proof of capacity.
        assert_eq!(
            GoZeroHttp.classify(Ok::<_, &Infallible>(&response)),
            Classified::Fail
        );
        assert!(!response.body().in_flight());
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(drain.snapshot().in_flight, 0);
}

/// The offered count takes what the replica serves, through the propagation delay too, and
/// not what it refuses while draining: the proxy or the client sends those to another replica,
/// which counts them.
#[tokio::test(start_paused = true)]
async fn requests_refused_while_draining_are_not_offered_here() {
    let (drain, service, _) = rig(ok);
    service
        .clone()
        .oneshot(request(Version::HTTP_2))
        .await
        .unwrap();
    drain.start();
    let announced = service
        .clone()
        .oneshot(request(Version::HTTP_2))
        .await
        .unwrap();
    assert_eq!(announced.status(), StatusCode::OK);
    assert_eq!(drain.snapshot().offered, 2);
    // The delay ends; nothing has looked at the phase since.
    tokio::time::advance(Duration::from_secs(5)).await;
    for _ in 0..3 {
        let refused = service
            .clone()
            .oneshot(request(Version::HTTP_2))
            .await
            .unwrap();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
    assert_eq!(drain.snapshot().offered, 2);
}

#[cfg(feature = "tonic")]
#[tokio::test(start_paused = true)]
async fn grpc_refusals_are_unavailable() {
    let drain = Drain::default();
    let service = DrainLayer::new(drain.clone())
        .grpc()
        .layer(service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(tonic::body::Body::empty()))
        }));
    drain.start_now();
    let response = service.oneshot(request(Version::HTTP_2)).await.unwrap();
    assert_eq!(response.headers()["grpc-status"], "14");
    assert!(response.headers().get("connection").is_none());
}

#[tokio::test(start_paused = true)]
async fn a_streamed_body_holds_its_request_until_its_last_frame() {
    let drain = Drain::default();
    let (frames, receiver) = tokio::sync::mpsc::unbounded_channel();
    // In an `Arc`: the layer's service needs a `Clone` inner service.
    let receiver = Arc::new(std::sync::Mutex::new(Some(receiver)));
    let service = DrainLayer::new(drain.clone()).layer(service_fn(move |_: Request<()>| {
        let frames = receiver.lock().unwrap().take().unwrap();
        async move {
            Ok::<_, Infallible>(Response::new(Frames {
                frames: Some(frames),
            }))
        }
    }));
    let mut body = service
        .oneshot(request(Version::HTTP_11))
        .await
        .unwrap()
        .into_body();
    drain.start_now();
    let finished = tokio::spawn({
        let drain = drain.clone();
        async move { drain.finished().await }
    });
    frames.send(Bytes::from_static(b"one")).unwrap();
    assert_eq!(
        body.frame().await.unwrap().unwrap().into_data().unwrap(),
        "one"
    );
    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(drain.snapshot().in_flight, 1);
    assert!(!finished.is_finished());
    drop(frames);
    assert!(body.frame().await.is_none());
    assert_eq!(drain.snapshot().in_flight, 0);
    assert_eq!(finished.await.unwrap(), Outcome::Drained { connections: 0 });
}

#[tokio::test(start_paused = true)]
async fn dropping_the_body_or_the_future_early_releases_the_request() {
    let (drain, service, _) = rig(ok);
    let response = service
        .clone()
        .oneshot(request(Version::HTTP_11))
        .await
        .unwrap();
    assert_eq!(drain.snapshot().in_flight, 1);
    drop(response);
    assert_eq!(drain.snapshot().in_flight, 0);

    let mut service = service;
    let future = service
        .ready()
        .await
        .unwrap()
        .call(request(Version::HTTP_11));
    assert_eq!(drain.snapshot().in_flight, 1);
    drop(future);
    assert_eq!(drain.snapshot().in_flight, 0);
}
