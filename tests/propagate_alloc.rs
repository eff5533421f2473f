//! Carrying a request's class allocates nothing: `ScopeLayer` sets and restores the class in
//! scope around each call and poll, and `PropagateLayer` writes it into an outbound request
//! whose header map has room (a request built with none allocates its map on the first insert,
//! as any header would). Each inbound request here carries, as its body, the outbound request
//! its handler forwards, built before the count.
//!
//! Allocations are counted per thread; one test in this file.

#![cfg(feature = "http")]

use admit_testkit::counting_alloc;

#[global_allocator]
static ALLOCATOR: counting_alloc::CountingAllocator = counting_alloc::CountingAllocator;

use std::convert::Infallible;
use std::future::ready;

use admit::criticality::{CRITICALITY_HEADER, Criticality};
use admit::middleware::CriticalityFrom;
use admit::middleware::propagate::{PropagateLayer, ScopeLayer, current};
use admit_testkit::poll::call_now;
use counting_alloc::allocations_during;
use http::Request;
use tower::Layer;

/// An inbound request whose body is the outbound request to forward, with room for headers.
type Inbound = Request<Request<()>>;

fn inbound(class: Criticality) -> Inbound {
    let mut outbound = Request::new(());
    outbound.headers_mut().reserve(4);
    let mut request = Request::new(outbound);
    request.extensions_mut().insert(class);
    request
}

#[test]
fn scoping_and_propagating_a_class_allocate_nothing() {
    // Downstream: answers with the class it was sent.
    let downstream = tower::service_fn(|request: Request<()>| {
        let class = request.headers()[CRITICALITY_HEADER].to_str();
        ready(Ok::<_, Infallible>(
            class.ok().and_then(|c| c.parse::<Criticality>().ok()),
        ))
    });
    let mut client = PropagateLayer::new().layer(downstream);
    // The handler forwards its request's body while its class is in scope.
    let handler = tower::service_fn(move |request: Inbound| {
        let in_scope = current();
        let forwarded = call_now(&mut client, request.into_body());
        ready(Ok::<_, Infallible>((in_scope, forwarded)))
    });
    let reader = CriticalityFrom(|request: &Inbound| {
        *request
            .extensions()
            .get::<Criticality>()
            .expect("every request carries its class")
    });
    let mut server = ScopeLayer::new(reader).layer(handler);

    let requests: Vec<Inbound> = (0..100)
        .map(|i| inbound(Criticality::ALL[i % Criticality::COUNT]))
        .collect();
    let mut answers = Vec::with_capacity(requests.len());
    let allocations = allocations_during(|| {
        for request in requests {
            answers.push(call_now(&mut server, request).unwrap());
        }
    });
    assert_eq!(allocations, 0);
    for (i, (in_scope, forwarded)) in answers.into_iter().enumerate() {
        assert_eq!(in_scope, Some(Criticality::ALL[i % Criticality::COUNT]));
        assert_eq!(
            forwarded,
            Ok(Some(Criticality::ALL[i % Criticality::COUNT]))
        );
    }
    assert_eq!(current(), None, "the scope ends with the call");
}
