//! The bound adds no heap allocation per request: requests that enter at once through
//! `BoundLayer` (boxed-error and HTTP responders), requests that wait and then enter, and
//! requests refused because the queue is full. The inner service allocates nothing itself, so
//! every allocation counted would be the layer's. Outside a tokio runtime a waiter arms no
//! timer.
//!
//! Allocations are counted per thread; one test in this file.

#![cfg(feature = "http")]

use admit_testkit::counting_alloc;

#[global_allocator]
static ALLOCATOR: counting_alloc::CountingAllocator = counting_alloc::CountingAllocator;

use std::convert::Infallible;
use std::future::{Future, ready};
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use admit::bound::{Bound, BoundLayer};
use admit::clock::ManualClock;
use admit::respond::Refused;
use admit_testkit::poll::{call_now, read_body_now};
use bytes::Bytes;
use counting_alloc::allocations_during;
use http::Response;
use http_body_util::Full;
use tower::{Layer, Service};

#[test]
fn the_bound_allocates_nothing_per_request() {
    let inner = tower::service_fn(|()| {
        ready(Ok::<_, Infallible>(Response::new(Full::new(
            Bytes::from_static(b"ok"),
        ))))
    });
    let clock = ManualClock::new();
    let bound = Arc::new(
        Bound::builder()
            .floor(1)
            .ceiling(1)
            .queue_capacity(1)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let mut boxed = BoundLayer::new(bound.clone()).layer(inner);
    let mut http = BoundLayer::new(bound.clone()).http().layer(inner);
    // Warm up the lazily initialised parts (the offered counter's stripe, thread-locals).
    call_now(&mut boxed, ()).unwrap();

    let (mut entered, mut waited, mut refused) = (0u32, 0u32, 0u32);
    let mut cx = Context::from_waker(Waker::noop());
    let allocations = allocations_during(|| {
        for round in 0..2_000u32 {
            if round % 10 == 0 {
                clock.advance(Duration::from_millis(3));
            }
            call_now(&mut boxed, ()).unwrap();
            read_body_now(call_now(&mut http, ()).unwrap().into_body());
            entered += 2;
            // One in service (its body unread), one waiting, one refused.
            let held = call_now(&mut http, ()).unwrap();
            assert!(boxed.poll_ready(&mut cx).is_ready());
            let mut waiting = pin!(boxed.call(()));
            assert!(waiting.as_mut().poll(&mut cx).is_pending());
            assert!(call_now(&mut boxed, ()).unwrap_err().is::<Refused>());
            refused += 1;
            // The body ends: the place passes to the waiter.
            read_body_now(held.into_body());
            match waiting.as_mut().poll(&mut cx) {
                Poll::Ready(Ok(_)) => waited += 1,
                other => panic!("the waiter did not enter: {:?}", other.is_ready()),
            }
        }
    });
    assert_eq!(
        allocations, 0,
        "{allocations} allocations for {entered} entered, {waited} waited, {refused} refused"
    );
    assert_eq!((waited, refused), (2_000, 2_000));
    assert_eq!(
        (bound.snapshot().in_service, bound.snapshot().waiting),
        (0, 0)
    );
    let critical = bound.snapshot().classes[2];
    assert_eq!(
        (critical.waited, critical.entered, critical.full),
        (2_000, 2_000, 2_000)
    );
}
