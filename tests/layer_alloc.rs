//! The layers add no heap allocation per request: admitted requests through `ShedLayer` and
//! `WarmUpLayer` (boxed-error and HTTP responders), alone and nested in each other (where the
//! outer one counts the request as offered and the inner one does not), and refusals answered
//! with the boxed, zero-sized errors, by the outer layer or the inner one. The inner service
//! here allocates nothing itself, so every allocation counted would be the layers'.
//!
//! Allocations are counted per thread; one test in this file.

#![cfg(feature = "http")]

use admit_testkit::counting_alloc;

#[global_allocator]
static ALLOCATOR: counting_alloc::CountingAllocator = counting_alloc::CountingAllocator;

#[path = "support/rig.rs"]
mod rig;

use std::convert::Infallible;
use std::future::ready;
use std::sync::Arc;
use std::time::Duration;

use admit::clock::ManualClock;
use admit::respond::Refused;
use admit::shed::ShedLayer;
use admit::shed::Shedder;
use admit::warmup::sentinel::SentinelWarmUp;
use admit::warmup::{WarmUp, WarmUpLayer};
use admit_testkit::poll::{call_now, read_body_now};
use bytes::Bytes;
use counting_alloc::allocations_during;
use http::Response;
use http_body_util::Full;
use rig::Rig;
use tower::Layer;

#[test]
fn layers_allocate_nothing_per_request() {
    // An inner service that allocates nothing: a `Response` has an unallocated header map, and
    // its body is static bytes.
    let inner = tower::service_fn(|()| {
        ready(Ok::<_, Infallible>(Response::new(Full::new(
            Bytes::from_static(b"ok"),
        ))))
    });
    let Rig {
        shedder,
        clock,
        cpu,
    } = Rig::new();
    let fast = Arc::new(
        WarmUp::builder(1_000_000.0)
            .clock(clock.clone())
            .start_warm(true)
            .build()
            .unwrap(),
    );
    let slow = Arc::new(
        SentinelWarmUp::builder(3.0)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );

    let mut shed_boxed = ShedLayer::new(shedder.clone()).layer(inner);
    let mut shed_http = ShedLayer::new(shedder.clone()).http().layer(inner);
    let mut warm_boxed = WarmUpLayer::new(fast.clone()).layer(inner);
    let mut warm_http = WarmUpLayer::new(fast.clone()).http().layer(inner);
    let mut warm_refusing = WarmUpLayer::new(slow.clone()).layer(inner);
    // A process-wide shedder held as `&'static`.
    let forever: &'static Shedder<ManualClock> = Box::leak(Box::new(
        Shedder::builder()
            .clock(clock.clone())
            .cpu(cpu.clone())
            .build()
            .unwrap(),
    ));
    let mut shed_static = ShedLayer::new(forever).http().layer(inner);
    // The layers as axum's `Router::layer` uses them: a fresh service per request.
    let per_request = ShedLayer::new(shedder.clone()).http();
    // Nested both ways; the outer one counts the offered requests.
    let mut warm_outside =
        WarmUpLayer::new(fast.clone()).layer(ShedLayer::new(shedder.clone()).layer(inner));
    let mut shed_outside =
        ShedLayer::new(shedder.clone()).layer(WarmUpLayer::new(fast.clone()).layer(inner));
    let mut slow_outside =
        WarmUpLayer::new(slow.clone()).layer(ShedLayer::new(shedder.clone()).layer(inner));
    let mut slow_inside =
        ShedLayer::new(shedder.clone()).layer(WarmUpLayer::new(slow.clone()).layer(inner));

    // Warm up the lazily initialised parts (the first window, thread-locals).
    call_now(&mut shed_boxed, ()).unwrap();
    call_now(&mut warm_boxed, ()).unwrap();

    let mut held = Vec::with_capacity(20);
    let (mut admitted, mut refused_shed, mut refused_warm) = (0u32, 0u32, 0u32);
    let allocations = allocations_during(|| {
        for round in 0..3_000u32 {
            if round % 10 == 0 {
                clock.advance(Duration::from_millis(7));
            }
            call_now(&mut shed_boxed, ()).unwrap();
            // The HTTP layers hold their permits in the bodies until their last frames.
            read_body_now(call_now(&mut shed_http, ()).unwrap().into_body());
            call_now(&mut warm_boxed, ()).unwrap();
            read_body_now(call_now(&mut warm_http, ()).unwrap().into_body());
            read_body_now(call_now(&mut shed_static, ()).unwrap().into_body());
            let mut fresh = per_request.clone().layer(inner);
            read_body_now(call_now(&mut fresh, ()).unwrap().into_body());
            admitted += 6;
            call_now(&mut warm_outside, ()).unwrap();
            call_now(&mut shed_outside, ()).unwrap();
            admitted += 2;
            // Mostly refused: alone, by the outer layer, by the inner one.
            for answer in [
                call_now(&mut warm_refusing, ()),
                call_now(&mut slow_outside, ()),
                call_now(&mut slow_inside, ()),
            ] {
                match answer {
                    Ok(_) => admitted += 1,
                    Err(error) => {
                        assert!(error.is::<Refused>());
                        refused_warm += 1;
                    }
                }
            }
        }
        // Overload the shedder and refuse with the boxed error.
        held.extend((0..20).map(|_| shedder.allow_owned().unwrap()));
        for permit in held.drain(..5) {
            permit.pass();
        }
        cpu.set(1000);
        for _ in 0..1_000 {
            // Refused alone, inside the open bucket's layer, and outside it.
            for answer in [
                call_now(&mut shed_boxed, ()),
                call_now(&mut warm_outside, ()),
                call_now(&mut shed_outside, ()),
            ] {
                assert!(answer.unwrap_err().is::<Refused>());
                refused_shed += 1;
            }
        }
    });
    assert_eq!(
        allocations,
        0,
        "{allocations} allocations for {admitted} admitted and {} refused requests",
        refused_shed + refused_warm
    );
    assert!(admitted >= 24_000 && refused_warm > 0 && refused_shed == 3_000);
    // Each request counted once, by its outermost layer: the shedder for five services a
    // round and 2000 refusals; the open bucket for three a round and 1000 refusals; the
    // refusing bucket for two a round; the first two also for the warm-up calls.
    assert_eq!(shedder.snapshot().offered, 1 + 3_000 * 5 + 2_000);
    assert_eq!(fast.totals().offered, 1 + 3_000 * 3 + 1_000);
    assert_eq!(slow.totals().offered, 3_000 * 2);
    assert_eq!(forever.snapshot().offered, 3_000);
}
