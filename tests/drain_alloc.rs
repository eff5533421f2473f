//! `DrainLayer` adds no heap allocation to an admitted request: the call, its response future
//! and its body, while serving and while announced (when the response gains
//! `Connection: close`). The inner service allocates nothing itself: its responses, with a
//! header as real ones have, are built beforehand.
//!
//! Allocations are counted per thread; one test in this file.

#![cfg(all(feature = "http", feature = "tokio"))]

use admit_testkit::counting_alloc;

#[global_allocator]
static ALLOCATOR: counting_alloc::CountingAllocator = counting_alloc::CountingAllocator;

use std::convert::Infallible;
use std::future::ready;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use admit::drain::{Drain, DrainLayer, Phase};
use admit_testkit::poll::call_now;
use counting_alloc::allocations_during;
use http::{Request, Response};
use http_body::Body;
use http_body_util::Empty;
use tower::{Layer, service_fn};

#[test]
fn an_admitted_request_never_allocates() {
    let drain = Drain::default();
    // Built outside the count, as a real handler's response with its headers would be: adding
    // `connection` to an empty header map would allocate the map's storage.
    let responses: Vec<_> = (0..2_000)
        .map(|_| {
            Response::builder()
                .header("content-type", "text/plain")
                .body(Empty::<bytes::Bytes>::new())
                .unwrap()
        })
        .collect();
    let responses = std::sync::Mutex::new(responses);
    let mut service = DrainLayer::new(drain.clone()).layer(service_fn(|_: Request<()>| {
        let response = responses.lock().unwrap().pop().unwrap();
        ready(Ok::<_, Infallible>(response))
    }));
    let request = || Request::new(());

    let mut cx = Context::from_waker(Waker::noop());
    let mut served = 0;
    let allocations = allocations_during(|| {
        for round in 0..2_000 {
            if round == 1_000 {
                drain.start();
            }
            let response = call_now(&mut service, request()).unwrap();
            let mut body = pin!(response.into_body());
            assert!(matches!(
                body.as_mut().poll_frame(&mut cx),
                Poll::Ready(None)
            ));
            served += 1;
        }
    });
    assert_eq!(drain.phase(), Phase::Announced);
    assert_eq!(served, 2_000);
    assert_eq!(allocations, 0, "allocations for 2000 admitted requests");
}
