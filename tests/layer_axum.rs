//! End to end: the shedder's and the warm-up bucket's tower layers in real axum servers on
//! loopback, driven by a real HTTP/1 client (hyper-util's legacy client).
//!
//! Everything that decides is manual (the shedder's clock and CPU, the bucket's clock), so the
//! outcomes are exact; every network await is bounded by a timeout and no test asserts on
//! timings.
#![cfg(feature = "http")]

#[path = "support/rig.rs"]
mod rig;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use admit::clock::ManualClock;
use admit::respond::{BoxError, HttpResponder, Refused};
use admit::shed::ShedLayer;
use admit::warmup::WarmUpLayer;
use admit::warmup::sentinel::SentinelWarmUp;
use admit_testkit::TestServer;
use admit_testkit::axum::{serve_router, serve_service};
use admit_testkit::wait::{bounded, eventually};
use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::http::StatusCode;
use axum::routing::get;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rig::Rig;
use tower::{Layer, ServiceBuilder};

/// What the client got back.
#[derive(Debug)]
struct Reply {
    status: StatusCode,
    retry_after: Option<String>,
    /// The `admit-refusal` header: why admit refused the request.
    reason: Option<String>,
    body: Bytes,
}

impl Reply {
    /// `Retry-After` as whole seconds; fails the test if it is missing or not an integer.
    fn retry_after_secs(&self) -> u64 {
        let value = self
            .retry_after
            .as_deref()
            .unwrap_or_else(|| panic!("a refusal must carry Retry-After: {self:?}"));
        value.parse().unwrap_or_else(|e| {
            panic!("Retry-After {value:?} is not whole seconds ({e}): {self:?}")
        })
    }
}

/// A hyper-util HTTP/1 client bound to one server.
struct Http {
    client: Client<HttpConnector, Empty<Bytes>>,
    base: String,
}

impl Http {
    /// A client that keeps connections alive and reuses them.
    fn new(server: &TestServer) -> Self {
        Http {
            client: Client::builder(TokioExecutor::new()).build_http(),
            base: server.url(),
        }
    }

    /// A client that keeps no idle connection: every request opens a new one.
    fn without_pool(server: &TestServer) -> Self {
        Http {
            client: Client::builder(TokioExecutor::new())
                .pool_max_idle_per_host(0)
                .build_http(),
            base: server.url(),
        }
    }

    fn request(&self, path: &str) -> hyper::Request<Empty<Bytes>> {
        hyper::Request::get(format!("{}{path}", self.base))
            .body(Empty::new())
            .expect("a valid request")
    }

    /// GETs `path` and reads the whole response.
    async fn get(&self, path: &str) -> Reply {
        let what = format!("GET {path}");
        let response = bounded(&what, self.client.request(self.request(path)))
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let status = response.status();
        let header = |name: &str| {
            response.headers().get(name).map(|value| {
                value
                    .to_str()
                    .unwrap_or_else(|e| panic!("{name} is visible ASCII: {e}"))
                    .to_owned()
            })
        };
        let (retry_after, reason) = (header("retry-after"), header("admit-refusal"));
        let body = bounded(&what, response.into_body().collect())
            .await
            .unwrap_or_else(|e| panic!("{what}: reading the body: {e}"))
            .to_bytes();
        Reply {
            status,
            retry_after,
            reason,
            body,
        }
    }
}

async fn hello() -> &'static str {
    "hello"
}

/// Wraps another layer and counts its `Layer::layer` calls.
#[derive(Clone)]
struct CountLayerCalls<L> {
    inner: L,
    calls: Arc<AtomicUsize>,
}

impl<L> CountLayerCalls<L> {
    fn new(inner: L) -> (Self, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let layer = CountLayerCalls {
            inner,
            calls: calls.clone(),
        };
        (layer, calls)
    }
}

impl<S, L: Layer<S>> Layer<S> for CountLayerCalls<L> {
    type Service = L::Service;

    fn layer(&self, inner: S) -> Self::Service {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.layer(inner)
    }
}

/// The shedding scenario both placements of `ShedLayer::http` go through: 200s while cool,
/// 503 + `Retry-After` in overload, 200s again after the cool-off; the shedder's counters
/// account for every request.
async fn shed_and_recover(rig: &Rig, http: &Http) {
    for i in 0..3 {
        let reply = http.get("/").await;
        assert_eq!(reply.status, 200, "request {i} while cool: {reply:?}");
        assert_eq!(
            reply.body, "hello",
            "request {i} while cool reaches the handler"
        );
    }
    let after_cool = rig.shedder.snapshot();
    assert_eq!(
        (after_cool.passed, after_cool.dropped, after_cool.flying),
        (3, 0, 0),
        "3 requests completed and passed: {after_cool:?}"
    );

    let held = rig.force_overload();
    for i in 0..4 {
        let reply = http.get("/").await;
        assert_eq!(reply.status, 503, "request {i} in overload: {reply:?}");
        assert_eq!(reply.reason.as_deref(), Some("cpu"), "{reply:?}");
        assert!(
            reply.retry_after_secs() >= 1,
            "Retry-After is at least 1 s: {reply:?}"
        );
        assert!(
            reply.body.is_empty(),
            "a refusal has an empty body: {reply:?}"
        );
    }
    let overloaded = rig.shedder.snapshot();
    assert_eq!(
        (overloaded.passed, overloaded.dropped, overloaded.failed),
        (3 + 5, 4, 0),
        "the 5 primed permits passed and the 4 refused requests were dropped: {overloaded:?}"
    );
    assert_eq!(overloaded.flying, 15, "only the held permits are in flight");

    rig.cool_down();
    for i in 0..3 {
        let reply = http.get("/").await;
        assert_eq!(
            reply.status, 200,
            "request {i} after the cool-off: {reply:?}"
        );
        assert_eq!(reply.body, "hello");
    }
    let recovered = rig.shedder.snapshot();
    assert_eq!(
        (recovered.passed, recovered.dropped, recovered.failed),
        (3 + 5 + 3, 4, 0),
        "every request sent is either passed or dropped: {recovered:?}"
    );
    assert_eq!(recovered.flying, 15, "the held permits are still in flight");

    drop(held);
    let end = rig.shedder.snapshot();
    assert_eq!(
        (end.flying, end.failed),
        (0, 15),
        "dropping the held permits counts them as failures: {end:?}"
    );
}

/// `Router::layer(ShedLayer::http())`: the layer wraps each route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shed_layer_per_route_answers_503_in_overload_and_recovers() {
    let rig = Rig::new();
    let app = Router::new()
        .route("/", get(hello))
        .layer(ShedLayer::new(rig.shedder.clone()).http());
    let server = serve_router(app).await;
    let http = Http::new(&server);
    shed_and_recover(&rig, &http).await;
}

/// `ShedLayer::http()` around the whole router (`Layer::layer(&layer, router)`), served as a
/// plain service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shed_layer_around_the_router_answers_503_in_overload_and_recovers() {
    let rig = Rig::new();
    let router = Router::new().route("/", get(hello));
    let app = ShedLayer::new(rig.shedder.clone()).http().layer(router);
    let server = serve_service(app).await;
    let http = Http::new(&server);
    shed_and_recover(&rig, &http).await;

    // The whole router is behind the shedder: an unknown path is admitted and counted too.
    let before = rig.shedder.snapshot().passed;
    let reply = http.get("/missing").await;
    assert_eq!(reply.status, 404, "{reply:?}");
    assert_eq!(
        rig.shedder.snapshot().passed,
        before + 1,
        "a 404 from the router passes through the shedder"
    );
}

/// How a test serves a `Router` carrying a counted layer, and how its client connects.
#[derive(Clone, Copy, Debug)]
enum Serving {
    /// `axum::serve(listener, router)`, one fresh connection per request. axum's make-service
    /// for `Router` calls `Router::with_state` for each connection, which turns every handler
    /// into a service, applying the route layers: one `Layer::layer` call per connection.
    FreshConnections,
    /// The `Router` as a plain service (not made through `with_state`), kept-alive
    /// connections: the router turns the handler into a service, applying the route layers, on
    /// every request.
    KeptAlive,
}

/// Serves `app` as `serving` says, sends 5 requests, and returns the client's replies and how
/// many `Layer::layer` calls `calls` saw while serving them.
async fn five_requests(app: Router, calls: &AtomicUsize, serving: Serving) -> (Vec<Reply>, usize) {
    let at_build = calls.load(Ordering::SeqCst);
    let (server, http) = match serving {
        Serving::FreshConnections => {
            let server = serve_router(app).await;
            let http = Http::without_pool(&server);
            (server, http)
        }
        Serving::KeptAlive => {
            let server = serve_service(app).await;
            let http = Http::new(&server);
            (server, http)
        }
    };
    let mut replies = Vec::with_capacity(5);
    for _ in 0..5 {
        replies.push(http.get("/").await);
    }
    let serving_calls = calls.load(Ordering::SeqCst) - at_build;
    eprintln!(
        "{serving:?}: {at_build} Layer::layer call(s) while building the router, \
         {serving_calls} while serving 5 requests"
    );
    drop(server);
    (replies, serving_calls)
}

/// The services axum builds with `Layer::layer` while serving must share one shedder: axum
/// calls it again for every connection (`axum::serve`) or even every request (a `Router` used
/// as a plain service), so per-service state would limit nothing.
async fn shed_layer_services_share_one_shedder(serving: Serving) {
    let rig = Rig::new();
    let (layer, calls) = CountLayerCalls::new(ShedLayer::new(rig.shedder.clone()).http());
    let app = Router::new().route("/", get(hello)).layer(layer);
    let (replies, serving_calls) = five_requests(app, &calls, serving).await;

    let statuses: Vec<u16> = replies.iter().map(|r| r.status.as_u16()).collect();
    assert_eq!(statuses, [200; 5], "{serving:?}: {replies:?}");
    assert!(
        serving_calls >= 5,
        "{serving:?}: expected a Layer::layer call per request, saw {serving_calls} for 5; \
         if axum changed this, the test no longer proves sharing"
    );
    let snapshot = rig.shedder.snapshot();
    assert_eq!(
        (snapshot.passed, snapshot.flying),
        (5, 0),
        "{serving:?}: all 5 requests, through {serving_calls} services, reached the one \
         shedder: {snapshot:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shed_layer_built_per_connection_still_shares_one_shedder() {
    shed_layer_services_share_one_shedder(Serving::FreshConnections).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shed_layer_built_per_request_still_shares_one_shedder() {
    shed_layer_services_share_one_shedder(Serving::KeptAlive).await;
}

/// The same for the warm-up bucket: 9 permits per second, 3 while cold. Services built per
/// `Layer::layer` call, each with its own bucket, would admit all 5 requests; the shared bucket
/// admits exactly 3 in the (manual, frozen) second.
async fn warm_up_layer_services_share_one_bucket(serving: Serving) {
    let limiter = Arc::new(
        SentinelWarmUp::builder(9.0)
            .clock(ManualClock::new())
            .build()
            .expect("a valid warm-up configuration"),
    );
    let (layer, calls) = CountLayerCalls::new(WarmUpLayer::new(limiter.clone()).http());
    let app = Router::new().route("/", get(hello)).layer(layer);
    let (replies, serving_calls) = five_requests(app, &calls, serving).await;

    let statuses: Vec<u16> = replies.iter().map(|r| r.status.as_u16()).collect();
    assert_eq!(
        statuses,
        [200, 200, 200, 503, 503],
        "{serving:?}: the cold limit is 3 per second and all the services share it: {replies:?}"
    );
    for reply in &replies[3..] {
        assert!(
            reply.retry_after_secs() >= 1,
            "{serving:?}: Retry-After is at least 1 s: {reply:?}"
        );
    }
    assert!(
        serving_calls >= 5,
        "{serving:?}: expected a Layer::layer call per request, saw {serving_calls} for 5"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_up_layer_built_per_connection_still_shares_one_bucket() {
    warm_up_layer_services_share_one_bucket(Serving::FreshConnections).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_up_layer_built_per_request_still_shares_one_bucket() {
    warm_up_layer_services_share_one_bucket(Serving::KeptAlive).await;
}

/// A per-client warm-up bucket answers 429 Too Many Requests with `Retry-After`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_up_layer_answers_429_when_asked() {
    // 3 per second, 1 while cold.
    let limiter = SentinelWarmUp::builder(3.0)
        .clock(ManualClock::new())
        .build()
        .expect("a valid warm-up configuration");
    let app = Router::new()
        .route("/", get(hello))
        .layer(WarmUpLayer::new(limiter).respond_with(HttpResponder::too_many_requests()));
    let server = serve_router(app).await;
    let http = Http::new(&server);

    let first = http.get("/").await;
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(first.body, "hello");
    let second = http.get("/").await;
    assert_eq!(second.status, 429, "{second:?}");
    assert!(second.retry_after_secs() >= 1, "{second:?}");
    assert!(second.body.is_empty(), "{second:?}");
}

/// The layers `http()` returns, kept in struct fields under their aliases and applied from
/// there: `HttpLayer` for the reader of a real stack, `WarmUpLayer` and `ShedLayer` with every
/// parameter spelled out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layers_stored_under_their_aliases_serve() {
    use admit::clock::MonotonicClock;
    use admit::middleware::classify::GoZeroHttp;
    use admit::middleware::{AtBodyEnd, CriticalityHeader, HttpLayer, ReadNothing, RequestStart};
    use admit::shed::Shedder;
    use admit::signal::queue::header::HeaderConfig;
    use admit::warmup::WarmUp;

    struct Layers {
        shed: HttpLayer<Shedder<ManualClock>, (RequestStart, CriticalityHeader)>,
        warm_up: WarmUpLayer<WarmUp, GoZeroHttp, HttpResponder, ReadNothing, AtBodyEnd>,
        plain: ShedLayer<MonotonicClock, GoZeroHttp, HttpResponder, ReadNothing, AtBodyEnd>,
    }
    let shedder = Arc::new(
        Shedder::builder()
            .clock(ManualClock::new())
            .cpu(admit::signal::cpu::ManualCpu::new(0))
            .build()
            .expect("a valid shedder"),
    );
    let reader = (
        RequestStart::new(HeaderConfig::default()).expect("the default header name"),
        CriticalityHeader::new(),
    );
    let layers = Layers {
        shed: ShedLayer::new(Arc::clone(&shedder)).http().inspect(reader),
        warm_up: WarmUpLayer::new(WarmUp::builder(1000.0).build().expect("a valid bucket")).http(),
        plain: ShedLayer::new(Shedder::builder().build().expect("a valid shedder")).http(),
    };
    let app = Router::new()
        .route("/", get(hello))
        .layer(layers.shed)
        .layer(layers.plain)
        .layer(layers.warm_up);
    let server = serve_router(app).await;
    let reply = Http::new(&server).get("/").await;
    assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
    assert_eq!(reply.body, "hello");
    assert_eq!(shedder.snapshot().passed, 1);
}

async fn answer_refusal(error: BoxError) -> (StatusCode, &'static str) {
    if error.is::<Refused>() {
        (StatusCode::SERVICE_UNAVAILABLE, "shed")
    } else {
        (StatusCode::INTERNAL_SERVER_ERROR, "unexpected error")
    }
}

/// The default, tower-style layer (refusals are boxed `Refused` errors) in axum, with a
/// `HandleErrorLayer` above it turning them into 503s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn box_error_shed_layer_with_handle_error_layer() {
    let rig = Rig::new();
    let app = Router::new().route("/", get(hello)).layer(
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(answer_refusal))
            .layer(ShedLayer::new(rig.shedder.clone())),
    );
    let server = serve_router(app).await;
    let http = Http::new(&server);

    let cool = http.get("/").await;
    assert_eq!((cool.status.as_u16(), &cool.body[..]), (200, &b"hello"[..]));

    let held = rig.force_overload();
    let refused = http.get("/").await;
    assert_eq!(
        refused.status, 503,
        "HandleErrorLayer saw a refusal: {refused:?}"
    );
    assert_eq!(refused.body, "shed", "{refused:?}");
    assert_eq!(
        refused.retry_after, None,
        "the boxed error carries no retry hint"
    );

    rig.cool_down();
    let recovered = http.get("/").await;
    assert_eq!(recovered.status, 200, "{recovered:?}");

    let snapshot = rig.shedder.snapshot();
    assert_eq!(
        (snapshot.passed, snapshot.dropped, snapshot.failed),
        (1 + 5 + 1, 1, 0),
        "{snapshot:?}"
    );
    drop(held);
}

/// Sets a flag when dropped: shows that a handler's future was dropped, not completed.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A client that gives up on an admitted request: hyper drops the handler's future when the
/// connection closes, the shedder's response future goes with it, and the permit is counted
/// as a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_disconnect_fails_the_admitted_request() {
    let rig = Rig::new();
    let (started_tx, mut started_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let handler_dropped = Arc::new(AtomicBool::new(false));
    let never = Arc::new(tokio::sync::Notify::new());
    let app = Router::new()
        .route(
            "/wait",
            get({
                let handler_dropped = handler_dropped.clone();
                move || {
                    let started_tx = started_tx.clone();
                    let guard = SetOnDrop(handler_dropped.clone());
                    let never = never.clone();
                    async move {
                        let _guard = guard;
                        started_tx.send(()).expect("the test is listening");
                        // Nobody ever notifies: the handler waits until it is dropped.
                        never.notified().await;
                        "unreachable"
                    }
                }
            }),
        )
        .layer(ShedLayer::new(rig.shedder.clone()).http());
    let server = serve_router(app).await;
    let http = Http::new(&server);

    let request = http.client.request(http.request("/wait"));
    let client = tokio::spawn(request);
    bounded("the handler starts", started_rx.recv())
        .await
        .expect("the handler signals its start");
    let during = rig.shedder.snapshot();
    assert_eq!(
        (during.flying, during.passed, during.failed),
        (1, 0, 0),
        "the waiting request holds a permit: {during:?}"
    );

    client.abort();
    let aborted = bounded("the client task ends", client).await;
    assert!(
        aborted.as_ref().is_err_and(|e| e.is_cancelled()),
        "the client task was aborted before an answer: {aborted:?}"
    );

    let shedder = rig.shedder.clone();
    eventually(
        "the disconnected request leaves the shedder as a failure",
        || {
            let snapshot = shedder.snapshot();
            snapshot.flying == 0 && snapshot.failed == 1
        },
        || format!("{:?}", shedder.snapshot()),
    )
    .await;
    assert!(
        handler_dropped.load(Ordering::SeqCst),
        "the handler's future was dropped"
    );
    let end = rig.shedder.snapshot();
    assert_eq!((end.passed, end.failed, end.dropped), (0, 1, 0), "{end:?}");
}
