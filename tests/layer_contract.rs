//! The tower contract of `ShedLayer` and `WarmUpLayer`, against tower-test's mock service:
//! readiness reserves nothing, refused requests never reach the inner service, dropping a
//! response future ends the request as a failure, the classifiers decide as documented, and
//! every service a layer makes shares one limiter.
//!
//! Futures are polled by hand with a no-op waker: nothing here sleeps or needs a runtime.

#![cfg(feature = "http")]

#[path = "support/rig.rs"]
mod rig;

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use admit::clock::ManualClock;
use admit::middleware::classify::{ErrorsFail, ErrorsPass, GoZeroGrpc, GoZeroHttp, Outcome};
use admit::respond::{BoxError, HttpResponder, Refusal, Refused};
use admit::shed::{ShedLayer, Shedder};
use admit::signal::Cause;
use admit::signal::cpu::{CpuWait, ManualCpu};
use admit::warmup::WarmUpLayer;
use admit::warmup::sentinel::SentinelWarmUp;
use http::{Response, StatusCode};
use tower::{Layer, Service};
use tower_test::mock;

use rig::{Rig, TestShedder};

fn poll_once<F: Future>(future: F) -> Poll<F::Output> {
    let mut future = pin!(future);
    future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
}

fn ready_now<F: Future>(future: F) -> F::Output {
    match poll_once(future) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the future was expected to be ready at once"),
    }
}

fn poll_ready<S: Service<R>, R>(service: &mut S) -> Poll<Result<(), S::Error>> {
    service.poll_ready(&mut Context::from_waker(Waker::noop()))
}

/// Asserts that `service` is ready now.
fn assert_ready<S: Service<R>, R>(service: &mut S) {
    assert!(
        matches!(poll_ready(service), Poll::Ready(Ok(()))),
        "the service is not ready"
    );
}

/// An always-ready inner service answering with `status` (and, for gRPC, a `grpc-status`).
fn answering(
    status: StatusCode,
    grpc_status: Option<&'static str>,
) -> impl Service<
    (),
    Response = Response<String>,
    Error = Infallible,
    Future = Ready<Result<Response<String>, Infallible>>,
> + Clone {
    tower::service_fn(move |()| {
        let mut response = Response::new(String::new());
        *response.status_mut() = status;
        if let Some(code) = grpc_status {
            response
                .headers_mut()
                .insert("grpc-status", http::HeaderValue::from_static(code));
        }
        ready(Ok(response))
    })
}

/// A Sentinel bucket at `rate` on `clock`: the contract tests count its per-second
/// windows (`rate / 3` admitted at once while cold).
fn sentinel_bucket(rate: f64, clock: &ManualClock) -> SentinelWarmUp<ManualClock> {
    SentinelWarmUp::builder(rate)
        .clock(clock.clone())
        .build()
        .unwrap()
}

#[test]
fn poll_ready_on_many_clones_reserves_nothing() {
    let f = Rig::new();
    let limiter = Arc::new(sentinel_bucket(9.0, &f.clock));
    let (inner, mut handle) = mock::pair::<(), ()>();
    handle.allow(1000);
    // The warm-up bucket outside: the shedder sees only the requests it lets through.
    let stack = tower::ServiceBuilder::new()
        .layer(WarmUpLayer::new(limiter.clone()))
        .layer(ShedLayer::new(f.shedder.clone()))
        .service(inner);

    let mut clones: Vec<_> = (0..100).map(|_| stack.clone()).collect();
    for service in &mut clones {
        assert!(matches!(poll_ready(service), Poll::Ready(Ok(()))));
    }
    let shed = f.shedder.snapshot();
    assert_eq!(
        (shed.flying, shed.passed, shed.failed, shed.dropped),
        (0, 0, 0, 0),
        "readiness must not touch the shedder"
    );
    assert_eq!(
        limiter.snapshot().window_passes,
        0,
        "readiness must not take permits"
    );
    // All 100 clones are ready, yet the cold limit of 3 per second still holds for calls.
    let mut admitted = 0;
    for service in &mut clones {
        let future = service.call(());
        if let Poll::Ready(Some((_, send))) = handle.poll_request() {
            send.send_response(());
        }
        if ready_now(future).is_ok() {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 3);
    assert_eq!(f.shedder.snapshot().passed, 3);
}

#[test]
fn readiness_follows_the_inner_service() {
    let f = Rig::new();
    let (inner, mut handle) = mock::pair::<(), ()>();
    let mut service = ShedLayer::new(f.shedder.clone()).layer(inner);
    handle.allow(0);
    assert!(poll_ready(&mut service).is_pending());
    handle.allow(1);
    assert_ready(&mut service);
    handle.send_error("broken");
    let error = match poll_ready(&mut service) {
        Poll::Ready(Err(error)) => error,
        other => panic!("expected the inner error, got {other:?}"),
    };
    assert_eq!(error.to_string(), "broken");
    assert_eq!(f.shedder.snapshot().flying, 0);
}

#[test]
fn a_refused_call_never_reaches_the_inner_service() {
    let f = Rig::new();
    let _held = f.force_overload();
    let (inner, mut handle) = mock::pair::<(), ()>();
    handle.allow(10);
    let mut service = ShedLayer::new(f.shedder.clone()).layer(inner);
    let dropped_before = f.shedder.snapshot().dropped;

    assert_ready(&mut service);
    let error: BoxError = ready_now(service.call(())).unwrap_err();
    assert!(error.is::<Refused>(), "got {error}");
    assert!(
        handle.poll_request().is_pending(),
        "the inner service was called"
    );
    assert_eq!(f.shedder.snapshot().dropped, dropped_before + 1);

    // The same for the warm-up bucket: 3 rps, 1 while cold.
    let limiter = sentinel_bucket(3.0, &f.clock);
    let (inner, mut handle) = mock::pair::<(), ()>();
    handle.allow(10);
    let mut service = WarmUpLayer::new(limiter).layer(inner);
    assert_ready(&mut service);
    let first = service.call(());
    let (_, send) = match handle.poll_request() {
        Poll::Ready(Some(request)) => request,
        _ => panic!("the admitted request did not reach the inner service"),
    };
    send.send_response(());
    assert!(ready_now(first).is_ok());
    assert_ready(&mut service);
    let error = ready_now(service.call(())).unwrap_err();
    assert!(error.is::<Refused>(), "got {error}");
    assert!(handle.poll_request().is_pending());
}

#[test]
fn dropping_a_pending_future_ends_the_request_as_a_failure() {
    let f = Rig::new();
    let (inner, mut handle) = mock::pair::<(), ()>();
    handle.allow(1);
    let mut service = ShedLayer::new(f.shedder.clone()).layer(inner);
    assert_ready(&mut service);
    let mut future = Box::pin(service.call(()));
    assert!(poll_once(future.as_mut()).is_pending());
    assert_eq!(f.shedder.snapshot().flying, 1);

    f.clock.advance(Duration::from_millis(40));
    drop(future);
    let snapshot = f.shedder.snapshot();
    assert_eq!(snapshot.flying, 0, "the in-flight slot was not released");
    assert_eq!((snapshot.passed, snapshot.failed), (0, 1));
    // No latency sample: after the bucket ends, the window still has no pass to average.
    f.clock.advance(Duration::from_secs(1));
    assert_eq!(f.shedder.snapshot().mean_service_time_ms, None);

    // A future dropped before it was ever polled counts the same way.
    handle.allow(1);
    assert_ready(&mut service);
    drop(service.call(()));
    let snapshot = f.shedder.snapshot();
    assert_eq!((snapshot.flying, snapshot.failed), (0, 2));
}

#[test]
fn a_completed_request_records_its_latency() {
    let f = Rig::new();
    let (inner, mut handle) = mock::pair::<(), ()>();
    handle.allow(1);
    let mut service = ShedLayer::new(f.shedder.clone()).layer(inner);
    assert_ready(&mut service);
    let mut future = Box::pin(service.call(()));
    let (_, send) = match handle.poll_request() {
        Poll::Ready(Some(request)) => request,
        _ => panic!("no request"),
    };
    f.clock.advance(Duration::from_millis(30));
    send.send_response(());
    assert!(matches!(poll_once(future.as_mut()), Poll::Ready(Ok(()))));
    f.clock.advance(Duration::from_millis(100));
    let snapshot = f.shedder.snapshot();
    assert_eq!((snapshot.flying, snapshot.passed), (0, 1));
    assert_eq!(snapshot.mean_service_time_ms, Some(30.0));
}

/// The mean latency the shedder learns from one request that took 30 ms and answered with a
/// 25 ms [`CpuWait`] extension, through a shed layer with `classifier`.
fn latency_learned_with<K>(classifier: K) -> Option<f64>
where
    K: admit::middleware::classify::Classify<Response<()>, BoxError> + Clone,
{
    let f = Rig::new();
    let (inner, mut handle) = mock::pair::<(), Response<()>>();
    handle.allow(1);
    let mut service = ShedLayer::new(f.shedder.clone())
        .classify(classifier)
        .layer(inner);
    assert_ready(&mut service);
    let mut future = Box::pin(service.call(()));
    let Poll::Ready(Some((_, send))) = handle.poll_request() else {
        panic!("no request");
    };
    f.clock.advance(Duration::from_millis(30));
    let mut response = Response::new(());
    response
        .extensions_mut()
        .insert(CpuWait(Duration::from_millis(25)));
    send.send_response(response);
    assert!(matches!(poll_once(future.as_mut()), Poll::Ready(Ok(_))));
    f.clock.advance(Duration::from_millis(100));
    let snapshot = f.shedder.snapshot();
    assert_eq!((snapshot.flying, snapshot.passed), (0, 1));
    assert_eq!(snapshot.service_time, Duration::from_millis(30));
    snapshot.mean_service_time_ms
}

#[test]
fn the_go_zero_classifiers_take_a_reported_cpu_wait_off_the_latency() {
    assert_eq!(latency_learned_with(GoZeroHttp), Some(5.0));
    assert_eq!(latency_learned_with(GoZeroGrpc), Some(5.0));
    assert_eq!(latency_learned_with(ErrorsPass), Some(30.0));
}

/// Runs one request answered with `status`/`grpc_status` through a shed layer with
/// `classifier` and reports whether it passed.
fn outcome_of<K>(classifier: K, status: StatusCode, grpc_status: Option<&'static str>) -> Outcome
where
    K: admit::middleware::classify::Classify<Response<String>, Infallible> + Clone,
{
    let f = Rig::new();
    let mut service = ShedLayer::new(f.shedder.clone())
        .classify(classifier)
        .respond_with(HttpResponder::default())
        .layer(answering(status, grpc_status));
    assert_ready(&mut service);
    ready_now(service.call(())).unwrap();
    recorded_outcome(&f.shedder)
}

/// How the shedder recorded the single request it has seen complete.
fn recorded_outcome(shedder: &TestShedder) -> Outcome {
    let snapshot = shedder.snapshot();
    assert_eq!(snapshot.flying, 0);
    match (snapshot.passed, snapshot.failed) {
        (1, 0) => Outcome::Pass,
        (0, 1) => Outcome::Fail,
        other => panic!("unexpected counts {other:?}"),
    }
}

#[test]
fn go_zero_http_fails_only_503() {
    assert_eq!(outcome_of(GoZeroHttp, StatusCode::OK, None), Outcome::Pass);
    assert_eq!(
        outcome_of(GoZeroHttp, StatusCode::INTERNAL_SERVER_ERROR, None),
        Outcome::Pass
    );
    assert_eq!(
        outcome_of(GoZeroHttp, StatusCode::TOO_MANY_REQUESTS, None),
        Outcome::Pass
    );
    assert_eq!(
        outcome_of(GoZeroHttp, StatusCode::SERVICE_UNAVAILABLE, None),
        Outcome::Fail
    );
}

#[test]
fn go_zero_grpc_fails_only_deadline_exceeded() {
    assert_eq!(outcome_of(GoZeroGrpc, StatusCode::OK, None), Outcome::Pass);
    assert_eq!(
        outcome_of(GoZeroGrpc, StatusCode::OK, Some("0")),
        Outcome::Pass
    );
    // INTERNAL, UNAVAILABLE, RESOURCE_EXHAUSTED: errors pass, as in go-zero.
    for code in ["13", "14", "8", "40"] {
        assert_eq!(
            outcome_of(GoZeroGrpc, StatusCode::OK, Some(code)),
            Outcome::Pass,
            "grpc-status {code}"
        );
    }
    assert_eq!(
        outcome_of(GoZeroGrpc, StatusCode::OK, Some("4")),
        Outcome::Fail
    );
    // The HTTP status means nothing to gRPC.
    assert_eq!(
        outcome_of(GoZeroGrpc, StatusCode::SERVICE_UNAVAILABLE, None),
        Outcome::Pass
    );
}

#[test]
fn custom_closures_classify() {
    let server_errors_fail = |result: Result<&Response<String>, &Infallible>| match result {
        Ok(response) if response.status().is_server_error() => Outcome::Fail,
        _ => Outcome::Pass,
    };
    assert_eq!(
        outcome_of(server_errors_fail, StatusCode::BAD_GATEWAY, None),
        Outcome::Fail
    );
    assert_eq!(
        outcome_of(server_errors_fail, StatusCode::NOT_FOUND, None),
        Outcome::Pass
    );
}

/// Runs one request whose inner service fails through a shed layer with `classifier`.
fn error_outcome<K>(classifier: K) -> (Outcome, BoxError)
where
    K: admit::middleware::classify::Classify<Response<()>, &'static str> + Clone,
{
    let f = Rig::new();
    let inner = tower::service_fn(|()| ready(Err::<Response<()>, _>("inner failure")));
    let mut service = ShedLayer::new(f.shedder.clone())
        .classify(classifier)
        .layer(inner);
    assert_ready(&mut service);
    let error = ready_now(service.call(())).unwrap_err();
    (recorded_outcome(&f.shedder), error)
}

#[test]
fn inner_errors_are_classified_and_passed_through() {
    let (outcome, error) = error_outcome(ErrorsPass);
    assert_eq!(outcome, Outcome::Pass, "go-zero parity: errors pass");
    assert_eq!(error.to_string(), "inner failure");
    assert!(!error.is::<Refused>());
    assert_eq!(error_outcome(ErrorsFail).0, Outcome::Fail);
    assert_eq!(
        error_outcome(GoZeroHttp).0,
        Outcome::Fail,
        "no response at all"
    );
    assert_eq!(error_outcome(GoZeroGrpc).0, Outcome::Pass);
}

#[test]
fn the_http_responder_answers_503_with_retry_after_and_keeps_the_error_type() {
    let f = Rig::new();
    let _held = f.force_overload();
    let mut service = ShedLayer::new(f.shedder.clone())
        .http()
        .layer(answering(StatusCode::OK, None));
    assert_ready(&mut service);
    // `Error = Infallible`: the refusal is a response.
    let response: Result<Response<_>, Infallible> = ready_now(service.call(()));
    let response = response.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    // CPU refusal: retry after one bucket (100 ms), rounded up to a whole second.
    assert_eq!(response.headers()["retry-after"], "1");
    assert_eq!(response.headers()["admit-refusal"], "cpu");

    // Cooling off: the CPU has dropped, 0.3 s of the 1 s cool-off have passed.
    f.cpu.set(0);
    f.clock.advance(Duration::from_millis(300));
    let overloaded = f.shedder.allow().unwrap_err();
    assert_eq!(overloaded.reason(), Cause::CoolOff);
    assert_eq!(overloaded.retry_after(), Duration::from_millis(700));
    let response = ready_now(service.call(())).unwrap();
    assert_eq!(response.headers()["retry-after"], "1");
    assert_eq!(response.headers()["admit-refusal"], "cool-off");
    // The request carried no class: the shedder took it as critical.
    assert_eq!(response.headers()["admit-criticality"], "critical");
    assert_eq!(response.headers().len(), 3);

    // And a warm-up refusal with a 429.
    let limiter = sentinel_bucket(3.0, &f.clock);
    let mut service = WarmUpLayer::new(limiter)
        .respond_with(HttpResponder::too_many_requests())
        .layer(answering(StatusCode::OK, None));
    assert_eq!(
        ready_now(service.call(())).unwrap().status(),
        StatusCode::OK
    );
    let refused = ready_now(service.call(())).unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "1");
}

#[test]
fn retry_hints_round_up() {
    let clock = ManualClock::new();
    // 3 rps, cold limit 1: the retry hint is the time until the pass leaves the window.
    let limiter = sentinel_bucket(3.0, &clock);
    limiter.try_acquire().unwrap();
    clock.advance(Duration::from_millis(1));
    let rejected = limiter.try_acquire().unwrap_err();
    assert_eq!(rejected.retry_after(), Duration::from_millis(999));
    assert_eq!(rejected.retry_after_secs(), 1);
    assert_eq!(rejected.retry_after_millis(), 999);
    clock.advance(Duration::from_nanos(1));
    let rejected = limiter.try_acquire().unwrap_err();
    assert_eq!(rejected.retry_after(), Duration::from_nanos(998_999_999));
    assert_eq!(rejected.retry_after_millis(), 999, "rounded up");
    assert_eq!(rejected.retry_after_secs(), 1);
}

#[test]
fn every_service_from_one_layer_shares_the_limiter() {
    let f = Rig::new();
    let layer = ShedLayer::new(f.shedder.clone());
    // As axum's `Router::layer` does: a fresh `layer()` per request, on clones of the layer.
    for _ in 0..5 {
        let mut service = layer.clone().layer(answering(StatusCode::OK, None));
        ready_now(service.call(())).unwrap();
    }
    assert_eq!(f.shedder.snapshot().passed, 5);

    let limiter = Arc::new(sentinel_bucket(9.0, &f.clock));
    let layer = WarmUpLayer::new(limiter.clone());
    let admitted = (0..5)
        .filter(|_| {
            let mut service = layer.layer(answering(StatusCode::OK, None));
            ready_now(service.call(())).is_ok()
        })
        .count();
    assert_eq!(admitted, 3, "the cold limit holds across layer() calls");
    assert_eq!(limiter.snapshot().window_passes, 3);
}

#[test]
fn refusals_by_admit_limiters_further_in_count_as_failures() {
    let f = Rig::new();
    // The wrong order: a per-client bucket answering 429 inside the shedder.
    let limiter = sentinel_bucket(3.0, &f.clock);
    let mut service = tower::ServiceBuilder::new()
        .layer(ShedLayer::new(f.shedder.clone()).http())
        .layer(WarmUpLayer::new(limiter).respond_with(HttpResponder::too_many_requests()))
        .service(answering(StatusCode::OK, None));
    assert_eq!(
        ready_now(service.call(())).unwrap().status(),
        StatusCode::OK
    );
    let refused = ready_now(service.call(())).unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(
        refused
            .extensions()
            .get::<admit::respond::Refused>()
            .is_some()
    );
    let snapshot = f.shedder.snapshot();
    assert_eq!(
        (snapshot.passed, snapshot.failed),
        (1, 1),
        "the bucket's instant refusal must not count as a fast success"
    );
}

/// tonic puts `Server::layer` layers outside each service's interceptors: a
/// `WarmUpInterceptor` refusal reaches the shed layer as a status response.
#[cfg(feature = "tonic")]
#[test]
fn grpc_statuses_from_admit_refusals_count_as_failures() {
    let f = Rig::new();
    let limiter = Arc::new(sentinel_bucket(3.0, &f.clock));
    let inner_limiter = limiter.clone();
    // What tonic makes of an interceptor's `Err(status)`: `status.into_http()`.
    let inner = tower::service_fn(move |()| {
        let response = match inner_limiter.try_acquire() {
            Ok(()) => Response::new(String::new()),
            Err(rejected) => tonic::Status::from(rejected).into_http(),
        };
        ready(Ok::<_, Infallible>(response))
    });
    let mut service = ShedLayer::new(f.shedder.clone()).grpc().layer(inner);
    ready_now(service.call(())).unwrap();
    let refused = ready_now(service.call(())).unwrap();
    assert_eq!(refused.headers()["grpc-status"], "8");
    // An application's own RESOURCE_EXHAUSTED still passes, as in go-zero.
    let mut own = ShedLayer::new(f.shedder.clone())
        .grpc()
        .layer(answering(StatusCode::OK, Some("8")));
    ready_now(own.call(())).unwrap();
    let snapshot = f.shedder.snapshot();
    assert_eq!((snapshot.passed, snapshot.failed), (2, 1));
}

#[test]
fn a_static_shedder_behaves_as_a_shared_one() {
    let clock = ManualClock::new();
    let cpu = ManualCpu::new(0);
    let shedder: &'static TestShedder = Box::leak(Box::new(
        Shedder::builder()
            .clock(clock.clone())
            .cpu(cpu.clone())
            .build()
            .unwrap(),
    ));
    let layer = ShedLayer::new(shedder);
    let mut service = layer.layer(answering(StatusCode::OK, None));
    ready_now(service.call(())).unwrap();
    let (inner, mut handle) = mock::pair::<(), ()>();
    handle.allow(1);
    let mut pending = layer.layer(inner);
    assert_ready(&mut pending);
    let future = pending.call(());
    assert_eq!(shedder.snapshot().flying, 1);
    drop(future);
    let snapshot = shedder.snapshot();
    assert_eq!(
        (snapshot.flying, snapshot.passed, snapshot.failed),
        (0, 1, 1)
    );
}

/// A tower user can tell admit's refusals apart without listing their types: every boxed
/// refusal downcasts to the type its layer's docs name and is recognised by `is_refusal`;
/// the inner service's own errors are not.
#[test]
fn refusals_downcast_to_their_documented_type_and_are_recognised_generically() {
    let f = Rig::new();
    let _held = f.force_overload();
    let mut shed = ShedLayer::new(f.shedder.clone()).layer(tower::service_fn(|()| {
        ready(Err::<(), BoxError>("inner failure".into()))
    }));
    let refused: BoxError = ready_now(shed.call(())).unwrap_err();
    assert!(refused.downcast_ref::<Refused>().is_some());
    assert!(admit::respond::is_refusal(&*refused));
    // The refusal values themselves are recognised too.
    assert!(admit::respond::is_refusal(&f.shedder.allow().unwrap_err()));

    let limiter = sentinel_bucket(3.0, &f.clock);
    let mut warm = WarmUpLayer::new(limiter).layer(tower::service_fn(|()| {
        ready(Err::<(), BoxError>("inner failure".into()))
    }));
    let inner: BoxError = ready_now(warm.call(())).unwrap_err();
    assert!(!admit::respond::is_refusal(&*inner), "{inner}");
    let refused: BoxError = ready_now(warm.call(())).unwrap_err();
    assert!(refused.downcast_ref::<Refused>().is_some());
    assert!(admit::respond::is_refusal(&*refused));
}
