//! The offered load: every request is counted once, by the first admit layer that sees it,
//! whichever order a warm-up bucket and a shedder are stacked in and however axum applies them
//! (both with `Router::layer`, both around the router, one of each), while the outer layer
//! refuses some requests and the inner one others; the limiters' own series still count what
//! each of them saw. A drain layer outermost counts every request itself. A panic inside a
//! layer leaves nothing behind.
//!
//! Requests go through the services in process (`oneshot`), on manual clocks and a manual CPU:
//! which layer refuses which request is exact.

#![cfg(all(feature = "http", feature = "metrics"))]

#[path = "support/rig.rs"]
mod rig;

use std::convert::Infallible;
use std::future::{Ready, poll_fn, ready};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use admit::clock::ManualClock;
use admit::metrics::Reporter;
use admit::shed::ShedLayer;
use admit::warmup::{WarmUp, WarmUpLayer};
use admit_testkit::poll::call_now;
use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};
use rig::Rig;
use tower::util::BoxCloneService;
use tower::{Layer, ServiceBuilder, ServiceExt, service_fn};

/// Requests sent in each phase.
const EACH: usize = 4;

type App = BoxCloneService<Request<Body>, Response<Body>, Infallible>;

/// Which layer is outside the other.
#[derive(Clone, Copy, Debug)]
enum Order {
    WarmUpOutside,
    ShedOutside,
}

/// How the two layers are applied.
#[derive(Clone, Copy, Debug)]
enum Wiring {
    /// Both with `Router::layer`: axum wraps the route, the outer layer calling the inner.
    RouterLayer,
    /// Both around the whole router, with `ServiceBuilder`.
    AroundRouter,
    /// The outer one around the router, the inner one with `Router::layer`: the router calls
    /// the inner layer from its future's poll, not from its `call`.
    Mixed,
}

fn routes() -> Router {
    Router::new().route("/", get(|| async { "ok" }))
}

/// The two layers stacked as `wiring` says.
macro_rules! stack {
    ($wiring:expr, $outer:expr, $inner:expr) => {
        match $wiring {
            Wiring::RouterLayer => App::new(routes().layer($inner).layer($outer)),
            // The layers answer with their own body type (the permit rides in it): boxed as
            // axum's, as a router would.
            Wiring::AroundRouter => App::new(
                ServiceBuilder::new()
                    .map_response(|response: Response<_>| response.map(Body::new))
                    .layer($outer)
                    .layer($inner)
                    .service(routes()),
            ),
            Wiring::Mixed => App::new(
                ServiceBuilder::new()
                    .map_response(|response: Response<_>| response.map(Body::new))
                    .layer($outer)
                    .service(routes().layer($inner)),
            ),
        }
    };
}

/// A bucket that admits one request per instant of its clock: spaced exactly, and the clock
/// only moves when the test moves it.
fn exact_bucket(clock: &ManualClock) -> Arc<WarmUp<ManualClock>> {
    Arc::new(
        WarmUp::builder(10.0)
            .name("api")
            .burst(Duration::ZERO)
            .clock(clock.clone())
            .build()
            .unwrap(),
    )
}

async fn status<S>(app: &S, request: Request<Body>) -> StatusCode
where
    S: tower::Service<Request<Body>, Error = Infallible> + Clone,
    S::Response: Into<Response<Body>>,
{
    let response: Response<Body> = app.clone().oneshot(request).await.unwrap().into();
    let status = response.status();
    // Read to its end, as a client does: an admitted request ends with its body.
    response.into_body().collect().await.unwrap();
    status
}

fn get_root() -> Request<Body> {
    Request::get("/").body(Body::empty()).unwrap()
}

/// The rendered value of every sample of `name`, by its labels as rendered.
fn samples(recorder: &PrometheusRecorder, name: &str) -> Vec<(String, f64)> {
    recorder
        .handle()
        .render()
        .lines()
        .filter(|line| line.starts_with(name))
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').unwrap();
            (series[name.len()..].to_owned(), value.parse().unwrap())
        })
        .collect()
}

fn value(recorder: &PrometheusRecorder, series: &str) -> f64 {
    let (name, labels) = series.split_at(series.find('{').unwrap_or(series.len()));
    samples(recorder, name)
        .into_iter()
        .find(|(rendered, _)| rendered == labels)
        .unwrap_or_else(|| panic!("no series {series}"))
        .1
}

/// Twelve requests in three phases: both layers admit; the bucket refuses; the shedder refuses.
/// The offered total is twelve, all counted by the outer layer's limiter, and each limiter's
/// own totals are what it saw.
async fn offered_once(order: Order, wiring: Wiring) {
    let what = format!("{order:?}, {wiring:?}");
    let recorder = PrometheusBuilder::new().build_recorder();
    let rig = Rig::named("api");
    let clock = ManualClock::new();
    let bucket = exact_bucket(&clock);
    let reporter = metrics::with_local_recorder(&recorder, || {
        Reporter::builder()
            .shedder(Arc::clone(&rig.shedder))
            .warm_up(Arc::clone(&bucket))
            .build()
            .unwrap()
    });
    let shed = ShedLayer::new(Arc::clone(&rig.shedder)).http();
    let warm_up = WarmUpLayer::new(Arc::clone(&bucket)).http();
    let app = match order {
        Order::WarmUpOutside => stack!(wiring, warm_up, shed),
        Order::ShedOutside => stack!(wiring, shed, warm_up),
    };

    let mut statuses = Vec::new();
    for _ in 0..EACH {
        clock.advance(Duration::from_secs(1));
        statuses.push(status(&app, get_root()).await);
    }
    // The clock stands still: the bucket refuses.
    for _ in 0..EACH {
        statuses.push(status(&app, get_root()).await);
    }
    let held = rig.force_overload();
    for _ in 0..EACH {
        clock.advance(Duration::from_secs(1));
        statuses.push(status(&app, get_root()).await);
    }
    let ok = StatusCode::OK;
    let refused = StatusCode::SERVICE_UNAVAILABLE;
    let expected: Vec<_> = [ok, refused, refused]
        .into_iter()
        .flat_map(|status| [status; EACH])
        .collect();
    assert_eq!(statuses, expected, "{what}");

    let sent = 3 * EACH as u64;
    let (shedder, totals) = (rig.shedder.snapshot(), bucket.totals());
    // `force_overload` passed 5 requests of its own, straight through the shedder.
    let each = EACH as u64;
    let (shed_seen, warm_up_seen) = match order {
        // The bucket decides every request; the shedder sees those it admitted.
        Order::WarmUpOutside => ((each + 5, 0, each, 0), (2 * each, each, sent)),
        // The shedder decides every request; the bucket sees those it admitted, and its
        // refusals come back to the shedder as failures.
        Order::ShedOutside => ((each + 5, each, each, sent), (each, each, 0)),
    };
    assert_eq!(
        (
            shedder.passed,
            shedder.failed,
            shedder.dropped,
            shedder.offered
        ),
        shed_seen,
        "{what}: {shedder:?}"
    );
    assert_eq!(
        (totals.admitted, totals.refused, totals.offered),
        warm_up_seen,
        "{what}: {totals:?}"
    );

    // The series: the offered ones sum to what was sent, and the limiters' own are their
    // totals.
    metrics::with_local_recorder(&recorder, || reporter.report());
    let offered = samples(&recorder, "admit_offered_requests_total");
    assert_eq!(offered.len(), 2, "{what}: {offered:?}");
    assert_eq!(
        offered.iter().map(|(_, count)| count).sum::<f64>(),
        sent as f64,
        "{what}: {offered:?}"
    );
    assert_eq!(
        value(
            &recorder,
            r#"admit_offered_requests_total{limiter="api",kind="shed"}"#
        ),
        shed_seen.3 as f64
    );
    let shed_outcome = |outcome: &str| {
        value(
            &recorder,
            &format!(r#"admit_shed_requests_total{{limiter="api",outcome="{outcome}"}}"#),
        )
    };
    assert_eq!(
        (
            shed_outcome("passed"),
            shed_outcome("failed"),
            shed_outcome("dropped")
        ),
        (shed_seen.0 as f64, shed_seen.1 as f64, shed_seen.2 as f64),
        "{what}"
    );
    let decisions = |outcome: &str| {
        value(
            &recorder,
            &format!(r#"admit_warmup_requests_total{{limiter="api",outcome="{outcome}"}}"#),
        )
    };
    assert_eq!(
        (decisions("admitted"), decisions("refused")),
        (warm_up_seen.0 as f64, warm_up_seen.1 as f64),
        "{what}"
    );
    drop(held);
}

#[tokio::test]
async fn warm_up_outside_shed_with_router_layer() {
    offered_once(Order::WarmUpOutside, Wiring::RouterLayer).await;
}

#[tokio::test]
async fn shed_outside_warm_up_with_router_layer() {
    offered_once(Order::ShedOutside, Wiring::RouterLayer).await;
}

#[tokio::test]
async fn warm_up_outside_shed_around_the_router() {
    offered_once(Order::WarmUpOutside, Wiring::AroundRouter).await;
}

#[tokio::test]
async fn shed_outside_warm_up_around_the_router() {
    offered_once(Order::ShedOutside, Wiring::AroundRouter).await;
}

#[tokio::test]
async fn warm_up_around_the_router_shed_with_router_layer() {
    offered_once(Order::WarmUpOutside, Wiring::Mixed).await;
}

#[tokio::test]
async fn shed_around_the_router_warm_up_with_router_layer() {
    offered_once(Order::ShedOutside, Wiring::Mixed).await;
}

/// One layer alone: an admitted request and a refused one count once each.
#[test]
fn an_admitted_and_a_refused_request_count_once_each() {
    let inner = service_fn(|()| ready(Ok::<_, Infallible>(())));
    let clock = ManualClock::new();
    let bucket = exact_bucket(&clock);
    let mut service = WarmUpLayer::new(Arc::clone(&bucket)).layer(inner);
    clock.advance(Duration::from_secs(1));
    call_now(&mut service, ()).unwrap();
    assert_eq!((bucket.totals().admitted, bucket.totals().offered), (1, 1));
    call_now(&mut service, ()).unwrap_err();
    assert_eq!((bucket.totals().refused, bucket.totals().offered), (1, 2));

    let rig = Rig::new();
    let mut service = ShedLayer::new(Arc::clone(&rig.shedder)).layer(inner);
    call_now(&mut service, ()).unwrap();
    assert_eq!(rig.shedder.snapshot().offered, 1);
    let held = rig.force_overload();
    call_now(&mut service, ()).unwrap_err();
    let snapshot = rig.shedder.snapshot();
    assert_eq!((snapshot.dropped, snapshot.offered), (1, 2), "{snapshot:?}");
    drop(held);
}

/// An inner service that panics, in its `call` or in its future, inside an admit layer: the
/// next request, through another layer on the same thread, is still counted as offered.
#[test]
fn a_panic_inside_a_layer_leaves_the_next_request_counted() {
    let rig = Rig::new();
    let mut panics_in_call = ShedLayer::new(Arc::clone(&rig.shedder)).layer(service_fn(
        |()| -> Ready<Result<(), Infallible>> { panic!("the inner service's call") },
    ));
    let mut panics_in_poll = ShedLayer::new(Arc::clone(&rig.shedder)).layer(service_fn(|()| {
        poll_fn(|_| -> Poll<Result<(), Infallible>> { panic!("the inner service's future") })
    }));
    let clock = ManualClock::new();
    let bucket = exact_bucket(&clock);
    let mut next = WarmUpLayer::new(Arc::clone(&bucket))
        .layer(service_fn(|()| ready(Ok::<_, Infallible>(()))));

    assert!(catch_unwind(AssertUnwindSafe(|| call_now(&mut panics_in_call, ()))).is_err());
    clock.advance(Duration::from_secs(1));
    call_now(&mut next, ()).unwrap();
    assert_eq!(bucket.totals().offered, 1);

    assert!(catch_unwind(AssertUnwindSafe(|| call_now(&mut panics_in_poll, ()))).is_err());
    clock.advance(Duration::from_secs(1));
    call_now(&mut next, ()).unwrap();
    assert_eq!(bucket.totals().offered, 2);
    // Both panicking requests were offered to the shedder, and ended as failures.
    let snapshot = rig.shedder.snapshot();
    assert_eq!((snapshot.offered, snapshot.failed), (2, 2), "{snapshot:?}");
}

/// A drain layer outermost (around the router, or with `Router::layer` over the limiters'):
/// it counts every request, including the ones the bucket refuses, but not its own refusals
/// once it drains (another replica counts them when they are retried there); the limiters
/// inside count none.
#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn a_drain_layer_outermost_counts_every_request() {
    use admit::drain::{Drain, DrainBody, DrainLayer};

    for around_the_router in [false, true] {
        let rig = Rig::named("api");
        let clock = ManualClock::new();
        let bucket = exact_bucket(&clock);
        let drain = Drain::default();
        let limited = routes()
            .layer(ShedLayer::new(Arc::clone(&rig.shedder)).http())
            .layer(WarmUpLayer::new(Arc::clone(&bucket)).http());
        let app = if around_the_router {
            let drained = DrainLayer::new(drain.clone()).layer(limited);
            App::new(ServiceExt::<Request<Body>>::map_response(
                drained,
                |response: Response<DrainBody<Body>>| response.map(Body::new),
            ))
        } else {
            App::new(limited.layer(DrainLayer::new(drain.clone())))
        };
        let what = if around_the_router {
            "around the router"
        } else {
            "with Router::layer"
        };

        let mut statuses = Vec::new();
        for _ in 0..EACH {
            clock.advance(Duration::from_secs(1));
            statuses.push(status(&app, get_root()).await);
        }
        for _ in 0..EACH {
            statuses.push(status(&app, get_root()).await);
        }
        drain.start_now();
        for _ in 0..EACH {
            clock.advance(Duration::from_secs(1));
            statuses.push(status(&app, get_root()).await);
        }
        let expected: Vec<_> = [StatusCode::OK, StatusCode::SERVICE_UNAVAILABLE]
            .into_iter()
            .flat_map(|status| [status; EACH])
            .chain([StatusCode::SERVICE_UNAVAILABLE; EACH])
            .collect();
        assert_eq!(statuses, expected, "{what}");
        assert_eq!(drain.snapshot().offered, 2 * EACH as u64, "{what}");
        assert_eq!(rig.shedder.snapshot().offered, 0, "{what}");
        let totals = bucket.totals();
        assert_eq!(
            (totals.admitted, totals.refused, totals.offered),
            (EACH as u64, EACH as u64, 0),
            "{what}"
        );
    }
}
