//! End to end: the shedder's and the warm-up bucket's gRPC answers in a real tonic server on
//! loopback (tonic-health's health service), called by a real tonic client.
//!
//! Everything that decides is manual (the shedder's clock and CPU, the bucket's clock), so the
//! outcomes are exact; every network await is bounded by a timeout and no test asserts on
//! timings.
#![cfg(feature = "tonic")]

#[path = "support/rig.rs"]
mod rig;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use admit::clock::ManualClock;
use admit::respond::GrpcResponder;
use admit::shed::ShedLayer;
use admit::warmup::sentinel::SentinelWarmUp;
use admit::warmup::{WarmUpInterceptor, WarmUpLayer};
use admit_testkit::TestServer;
use admit_testkit::tonic::{listen, spawn_server};
use admit_testkit::wait::bounded;
use rig::Rig;
use tonic::Code;
use tonic::transport::{Channel, Server};
use tonic_health::ServingStatus;
use tonic_health::pb::health_check_response::ServingStatus as WireStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use tonic_health::server::{HealthReporter, HealthService};

/// The service name the tests mark SERVING and check.
const SERVICE: &str = "admit.test.Echo";

/// A health reporter with [`SERVICE`] marked SERVING.
async fn reporter() -> HealthReporter {
    let reporter = HealthReporter::new();
    bounded(
        "mark the service serving",
        reporter.set_service_status(SERVICE, ServingStatus::Serving),
    )
    .await;
    reporter
}

/// A client connected to `server`.
async fn client(server: &TestServer) -> HealthClient<Channel> {
    HealthClient::new(admit_testkit::tonic::connect(server).await)
}

/// One health check of `service`, bounded.
async fn check(
    client: &mut HealthClient<Channel>,
    service: &str,
) -> Result<HealthCheckResponse, tonic::Status> {
    let request = HealthCheckRequest {
        service: service.to_owned(),
    };
    bounded("health check", client.check(request))
        .await
        .map(tonic::Response::into_inner)
}

/// Checks [`SERVICE`] and fails the test unless the server answered SERVING.
async fn check_serving(client: &mut HealthClient<Channel>, what: &str) {
    match check(client, SERVICE).await {
        Ok(response) => assert_eq!(
            response.status,
            WireStatus::Serving as i32,
            "{what}: the health service answers SERVING: {response:?}"
        ),
        Err(status) => panic!("{what}: expected OK, got {status:?}"),
    }
}

/// Checks [`SERVICE`], expects a refusal with `code` and `admit-refusal: <reason>`, and
/// returns its `grpc-retry-pushback-ms` (which must be present and an integer).
async fn check_refused(
    client: &mut HealthClient<Channel>,
    code: Code,
    reason: &str,
    what: &str,
) -> i64 {
    let status = match check(client, SERVICE).await {
        Ok(response) => panic!("{what}: expected {code:?}, got OK {response:?}"),
        Err(status) => status,
    };
    assert_eq!(status.code(), code, "{what}: {status:?}");
    let named = status.metadata().get("admit-refusal");
    assert_eq!(
        named.and_then(|value| value.to_str().ok()),
        Some(reason),
        "{what}: {status:?}"
    );
    let pushback = status
        .metadata()
        .get("grpc-retry-pushback-ms")
        .unwrap_or_else(|| {
            panic!("{what}: the refusal carries grpc-retry-pushback-ms: {status:?}")
        });
    let text = pushback
        .to_str()
        .unwrap_or_else(|e| panic!("{what}: pushback {pushback:?} is not ASCII: {e}"));
    text.parse()
        .unwrap_or_else(|e| panic!("{what}: pushback {text:?} is not an integer: {e}"))
}

/// tonic-health's health service, counting the checks that reach it: it shows whether a
/// refused call got as far as the handler.
struct CountingHealth {
    inner: HealthService,
    checks: Arc<AtomicUsize>,
}

/// A [`CountingHealth`] with [`SERVICE`] marked SERVING, and its check counter.
async fn counting_health() -> (CountingHealth, Arc<AtomicUsize>) {
    let checks = Arc::new(AtomicUsize::new(0));
    let health = CountingHealth {
        inner: HealthService::from_health_reporter(reporter().await),
        checks: checks.clone(),
    };
    (health, checks)
}

#[tonic::async_trait]
impl Health for CountingHealth {
    type WatchStream = <HealthService as Health>::WatchStream;

    async fn check(
        &self,
        request: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<HealthCheckResponse>, tonic::Status> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        self.inner.check(request).await
    }

    async fn watch(
        &self,
        request: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<Self::WatchStream>, tonic::Status> {
        self.inner.watch(request).await
    }
}

/// `Server::builder().layer(ShedLayer::grpc())`: OK while cool, `RESOURCE_EXHAUSTED` with a
/// positive pushback in overload (without reaching the service), OK again after the cool-off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shed_layer_grpc_answers_resource_exhausted_in_overload_and_recovers() {
    let rig = Rig::new();
    let (health, reached) = counting_health().await;
    let health = HealthServer::new(health);
    let (addr, incoming) = listen().await;
    let serve = Server::builder()
        .layer(ShedLayer::new(rig.shedder.clone()).grpc())
        .add_service(health)
        .serve_with_incoming(incoming);
    let server = spawn_server(addr, serve);
    let mut client = client(&server).await;

    for i in 0..3 {
        check_serving(&mut client, &format!("call {i} while cool")).await;
    }
    let cool = rig.shedder.snapshot();
    assert_eq!(
        (cool.passed, cool.dropped, cool.flying),
        (3, 0, 0),
        "3 calls completed and passed: {cool:?}"
    );
    assert_eq!(reached.load(Ordering::SeqCst), 3);

    let held = rig.force_overload();
    for i in 0..4 {
        let pushback = check_refused(
            &mut client,
            Code::ResourceExhausted,
            "cpu",
            &format!("call {i} in overload"),
        )
        .await;
        assert!(
            pushback > 0,
            "call {i}: the pushback is positive: {pushback}"
        );
    }
    let overloaded = rig.shedder.snapshot();
    assert_eq!(
        (overloaded.passed, overloaded.dropped, overloaded.failed),
        (3 + 5, 4, 0),
        "refused calls pass nothing and are counted as dropped: {overloaded:?}"
    );
    assert_eq!(
        reached.load(Ordering::SeqCst),
        3,
        "refused calls never reached the handler"
    );

    rig.cool_down();
    for i in 0..2 {
        check_serving(&mut client, &format!("call {i} after the cool-off")).await;
    }
    let recovered = rig.shedder.snapshot();
    assert_eq!(
        (recovered.passed, recovered.dropped, recovered.failed),
        (3 + 5 + 2, 4, 0),
        "{recovered:?}"
    );
    assert_eq!(reached.load(Ordering::SeqCst), 5);
    drop(held);
}

/// `respond_with(GrpcResponder::unavailable())` answers `UNAVAILABLE` instead, still with the
/// pushback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shed_layer_grpc_can_answer_unavailable() {
    let rig = Rig::new();
    let health = HealthServer::new(HealthService::from_health_reporter(reporter().await));
    let (addr, incoming) = listen().await;
    let serve = Server::builder()
        .layer(
            ShedLayer::new(rig.shedder.clone())
                .grpc()
                .respond_with(GrpcResponder::unavailable()),
        )
        .add_service(health)
        .serve_with_incoming(incoming);
    let server = spawn_server(addr, serve);
    let mut client = client(&server).await;

    check_serving(&mut client, "while cool").await;
    let held = rig.force_overload();
    let pushback = check_refused(&mut client, Code::Unavailable, "cpu", "in overload").await;
    assert!(pushback > 0, "the pushback is positive: {pushback}");
    let snapshot = rig.shedder.snapshot();
    assert_eq!(
        (snapshot.passed, snapshot.dropped),
        (1 + 5, 1),
        "{snapshot:?}"
    );
    drop(held);
}

/// go-zero's gRPC rule: an admitted call answered with an error status other than
/// `DEADLINE_EXCEEDED` (here `NOT_FOUND` for an unknown service) still passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shed_layer_grpc_counts_an_error_status_as_passed() {
    let rig = Rig::new();
    let health = HealthServer::new(HealthService::from_health_reporter(reporter().await));
    let (addr, incoming) = listen().await;
    let serve = Server::builder()
        .layer(ShedLayer::new(rig.shedder.clone()).grpc())
        .add_service(health)
        .serve_with_incoming(incoming);
    let server = spawn_server(addr, serve);
    let mut client = client(&server).await;

    let status = check(&mut client, "no.such.Service")
        .await
        .expect_err("an unknown service is an error");
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    let snapshot = rig.shedder.snapshot();
    assert_eq!(
        (snapshot.passed, snapshot.failed, snapshot.flying),
        (1, 0, 0),
        "{snapshot:?}"
    );
}

/// A 3-per-second bucket on a frozen manual clock: 1 permit while cold.
fn cold_limit_one() -> Arc<SentinelWarmUp<ManualClock>> {
    let limiter = SentinelWarmUp::builder(3.0)
        .clock(ManualClock::new())
        .build()
        .expect("a valid warm-up configuration");
    Arc::new(limiter)
}

/// Against a server whose warm-up limit admits one call while cold: the first call is served,
/// the next `refusals` are refused with `code` and a positive pushback, and only the first
/// reached the handler.
async fn assert_one_admitted(
    client: &mut HealthClient<Channel>,
    reached: &AtomicUsize,
    code: Code,
    refusals: usize,
) {
    check_serving(client, "the first call").await;
    for i in 0..refusals {
        let pushback =
            check_refused(client, code, "rate-limit", &format!("refused call {i}")).await;
        assert!(pushback > 0, "the pushback is positive: {pushback}");
    }
    assert_eq!(
        reached.load(Ordering::SeqCst),
        1,
        "only the admitted call reached the handler"
    );
}

/// `WarmUpInterceptor` on the health service: the second call in the cold second is refused
/// with `RESOURCE_EXHAUSTED` and a positive pushback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_up_interceptor_refuses_beyond_the_cold_limit() {
    let limiter = cold_limit_one();
    let (health, reached) = counting_health().await;
    let interceptor = WarmUpInterceptor::new(Arc::clone(&limiter));
    let health = HealthServer::with_interceptor(health, interceptor);
    let (addr, incoming) = listen().await;
    let serve = Server::builder()
        .add_service(health)
        .serve_with_incoming(incoming);
    let server = spawn_server(addr, serve);
    let mut client = client(&server).await;

    assert_one_admitted(&mut client, &reached, Code::ResourceExhausted, 2).await;
    // No admit layer outside: the interceptor counts every call as offered.
    let totals = limiter.totals();
    assert_eq!(
        (totals.admitted, totals.refused, totals.offered),
        (1, 2, 3),
        "{totals:?}"
    );
}

/// The interceptor beside a shed layer in `Server::layer`: each call is counted once as
/// offered, by the shedder, which sees it first, whether the interceptor refuses it or the
/// shedder does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_offered_once_to_the_shed_layer_outside_the_interceptor() {
    let rig = Rig::new();
    let limiter = cold_limit_one();
    let (health, reached) = counting_health().await;
    let interceptor = WarmUpInterceptor::new(Arc::clone(&limiter));
    let health = HealthServer::with_interceptor(health, interceptor);
    let (addr, incoming) = listen().await;
    let serve = Server::builder()
        .layer(ShedLayer::new(rig.shedder.clone()).grpc())
        .add_service(health)
        .serve_with_incoming(incoming);
    let server = spawn_server(addr, serve);
    let mut client = client(&server).await;

    // One call served, two refused by the interceptor, then two refused by the shedder.
    assert_one_admitted(&mut client, &reached, Code::ResourceExhausted, 2).await;
    let held = rig.force_overload();
    for i in 0..2 {
        check_refused(
            &mut client,
            Code::ResourceExhausted,
            "cpu",
            &format!("call {i} in overload"),
        )
        .await;
    }
    let snapshot = rig.shedder.snapshot();
    assert_eq!(
        (snapshot.failed, snapshot.dropped, snapshot.offered),
        (2, 2, 5),
        "{snapshot:?}"
    );
    let totals = limiter.totals();
    assert_eq!(
        (totals.admitted, totals.refused, totals.offered),
        (1, 2, 0),
        "{totals:?}"
    );
    drop(held);
}

/// tonic's `Server::layer` puts the process-wide shed layer outside the service's
/// interceptor: the interceptor's refusals come back through the shedder, which must count them
/// as failures, not as fast successful calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interceptor_refusals_inside_the_shed_layer_count_as_failures() {
    let rig = Rig::new();
    let (health, reached) = counting_health().await;
    let health = HealthServer::with_interceptor(health, WarmUpInterceptor::new(cold_limit_one()));
    let (addr, incoming) = listen().await;
    let serve = Server::builder()
        .layer(ShedLayer::new(rig.shedder.clone()).grpc())
        .add_service(health)
        .serve_with_incoming(incoming);
    let server = spawn_server(addr, serve);
    let mut client = client(&server).await;

    assert_one_admitted(&mut client, &reached, Code::ResourceExhausted, 3).await;
    let snapshot = rig.shedder.snapshot();
    assert_eq!(
        (
            snapshot.passed,
            snapshot.failed,
            snapshot.dropped,
            snapshot.flying
        ),
        (1, 3, 0, 0),
        "{snapshot:?}"
    );
}

/// `WarmUpInterceptor::code(Code::Unavailable)` refuses with `UNAVAILABLE`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_up_interceptor_can_answer_unavailable() {
    let (health, reached) = counting_health().await;
    let interceptor = WarmUpInterceptor::new(cold_limit_one()).code(Code::Unavailable);
    let health = HealthServer::with_interceptor(health, interceptor);
    let (addr, incoming) = listen().await;
    let serve = Server::builder()
        .add_service(health)
        .serve_with_incoming(incoming);
    let server = spawn_server(addr, serve);
    let mut client = client(&server).await;

    assert_one_admitted(&mut client, &reached, Code::Unavailable, 1).await;
}

/// `Server::builder().layer(WarmUpLayer::grpc())`: the second call in the cold second is refused
/// with `RESOURCE_EXHAUSTED` and a positive pushback, without reaching the service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_up_layer_grpc_refuses_beyond_the_cold_limit() {
    let limiter = cold_limit_one();
    let (health, reached) = counting_health().await;
    let health = HealthServer::new(health);
    let (addr, incoming) = listen().await;
    let serve = Server::builder()
        .layer(WarmUpLayer::new(limiter).grpc())
        .add_service(health)
        .serve_with_incoming(incoming);
    let server = spawn_server(addr, serve);
    let mut client = client(&server).await;

    assert_one_admitted(&mut client, &reached, Code::ResourceExhausted, 2).await;
}
