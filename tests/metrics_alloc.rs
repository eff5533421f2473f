//! With a real Prometheus recorder installed and a reporter publishing both limiters, admitted
//! and refused requests through `ShedLayer` and `WarmUpLayer` allocate nothing, and neither do
//! the reports once every series exists. Refusals are answered with the boxed zero-sized
//! errors: an HTTP refusal is a response with a `Retry-After` header, whose map allocates.
//!
//! Allocations are counted per thread; one test in this file.

#![cfg(all(feature = "metrics", feature = "http"))]

use admit_testkit::counting_alloc;

#[global_allocator]
static ALLOCATOR: counting_alloc::CountingAllocator = counting_alloc::CountingAllocator;

#[path = "support/rig.rs"]
mod rig;

use std::convert::Infallible;
use std::future::ready;
use std::sync::Arc;
use std::time::Duration;

use admit::metrics::Reporter;
use admit::shed::ShedLayer;
use admit::warmup::{WarmUp, WarmUpLayer};
use admit_testkit::poll::{call_now, read_body_now};
use bytes::Bytes;
use counting_alloc::allocations_during;
use http::Response;
use http_body_util::Full;
use metrics_exporter_prometheus::PrometheusBuilder;
use rig::Rig;
use tower::Layer;

#[test]
fn requests_and_reports_allocate_nothing_with_a_recorder() {
    let prometheus = PrometheusBuilder::new()
        .install_recorder()
        .expect("the only recorder of this test binary");
    let inner = tower::service_fn(|()| {
        ready(Ok::<_, Infallible>(Response::new(Full::new(
            Bytes::from_static(b"ok"),
        ))))
    });
    let rig = Rig::named("api");
    let bucket = Arc::new(
        WarmUp::builder(1000.0)
            .name("api")
            .clock(rig.clock.clone())
            .build()
            .unwrap(),
    );
    let reporter = Reporter::builder()
        .shedder(Arc::clone(&rig.shedder))
        .warm_up(Arc::clone(&bucket))
        .build()
        .unwrap();

    let mut shed_boxed = ShedLayer::new(Arc::clone(&rig.shedder)).layer(inner);
    let mut shed_http = ShedLayer::new(Arc::clone(&rig.shedder)).http().layer(inner);
    let mut warm_boxed = WarmUpLayer::new(Arc::clone(&bucket)).layer(inner);
    let mut warm_http = WarmUpLayer::new(Arc::clone(&bucket)).http().layer(inner);

    // The lazily created parts: the first window, the thread's stripe, the CPU series.
    call_now(&mut shed_boxed, ()).unwrap();
    call_now(&mut warm_boxed, ()).unwrap();
    reporter.report();

    let (mut admitted, mut refused) = (0u32, 0u32);
    let mut allocations = allocations_during(|| {
        for round in 0..2_000u32 {
            rig.clock.advance(Duration::from_millis(1));
            call_now(&mut shed_boxed, ()).unwrap();
            // The HTTP layer holds the permit in the body until its last frame.
            read_body_now(call_now(&mut shed_http, ()).unwrap().into_body());
            admitted += 2;
            // A cold bucket at 1000 / 3 per second, asked up to twice a millisecond: both
            // outcomes. The HTTP layer only once a refusal is out of the question: its
            // refusal is a response with a `Retry-After` header, which allocates.
            match call_now(&mut warm_boxed, ()) {
                Ok(_) => admitted += 1,
                Err(_) => refused += 1,
            }
            if round % 10 == 0 {
                rig.clock.advance(Duration::from_millis(10));
                assert!(call_now(&mut warm_http, ()).unwrap().status().is_success());
                admitted += 1;
            }
            if round % 100 == 0 {
                reporter.report();
            }
        }
    });
    // Overload the shedder (the permits held are a `Vec`: outside the count).
    let held = rig.force_overload();
    allocations += allocations_during(|| {
        for _ in 0..2_000 {
            assert!(call_now(&mut shed_boxed, ()).is_err());
            refused += 1;
        }
        reporter.report();
    });
    assert_eq!(
        allocations, 0,
        "{allocations} allocations for {admitted} admitted and {refused} refused requests"
    );
    assert!(
        admitted > 4_000 && refused > 2_000,
        "{admitted} admitted, {refused} refused"
    );
    // The recorder saw it all.
    let text = prometheus.render();
    assert!(
        text.contains(r#"admit_shed_requests_total{limiter="api",outcome="dropped"} 2000"#),
        "{text}"
    );
    drop(held);
}
