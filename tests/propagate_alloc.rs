//! Carrying a request's class allocates nothing: `CriticalityHeader` reads it from several
//! header lines (the client's, then the edge's) and asks its trusted-caller function,
//! `ScopeLayer` sets and restores the class in scope around each call and poll, and
//! `PropagateLayer` replaces the lines a handler forwards with the class in scope, in an
//! outbound request whose header map has room (a request built with none allocates its map on
//! the first insert, as any header would). Each inbound request here carries, as its body, the
//! outbound request its handler forwards, built before the count.
//!
//! Allocations are counted per thread; one test in this file.

#![cfg(feature = "http")]

use admit_testkit::counting_alloc;

#[global_allocator]
static ALLOCATOR: counting_alloc::CountingAllocator = counting_alloc::CountingAllocator;

use std::convert::Infallible;
use std::future::ready;

use admit::criticality::{CRITICALITY_HEADER, Criticality};
use admit::middleware::CriticalityHeader;
use admit::middleware::propagate::{PropagateLayer, ScopeLayer, current};
use admit_testkit::poll::call_now;
use counting_alloc::allocations_during;
use http::{HeaderValue, Request};
use tower::Layer;

/// An inbound request whose body is the outbound request to forward, with room for headers.
type Inbound = Request<Request<()>>;

/// What an authentication layer inserts for a trusted caller.
#[derive(Clone, Copy, Debug)]
struct Internal;

/// A request whose client claims `critical_plus` and whose edge proxy appended `class`, from
/// a trusted caller where `class` is `critical_plus`; its handler forwards two lines claiming
/// `critical_plus` too.
fn inbound(class: Criticality) -> Inbound {
    let claim = HeaderValue::from_static(Criticality::CriticalPlus.as_str());
    let mut outbound = Request::new(());
    outbound.headers_mut().reserve(4);
    outbound
        .headers_mut()
        .append(CRITICALITY_HEADER, claim.clone());
    outbound
        .headers_mut()
        .append(CRITICALITY_HEADER, claim.clone());
    let mut request = Request::new(outbound);
    request.headers_mut().append(CRITICALITY_HEADER, claim);
    let edge = HeaderValue::from_static(class.as_str());
    request.headers_mut().append(CRITICALITY_HEADER, edge);
    if class == Criticality::CriticalPlus {
        request.extensions_mut().insert(Internal);
    }
    request
}

#[test]
fn reading_scoping_and_propagating_a_class_allocate_nothing() {
    // Downstream: answers with the class it was sent, and how many lines carried it.
    let downstream = tower::service_fn(|request: Request<()>| {
        let lines = request.headers().get_all(CRITICALITY_HEADER);
        let class = lines
            .iter()
            .next()
            .and_then(|c| c.to_str().ok()?.parse().ok());
        ready(Ok::<_, Infallible>((class, lines.iter().count())))
    });
    let mut client = PropagateLayer::new().layer(downstream);
    // The handler forwards its request's body while its class is in scope.
    let handler = tower::service_fn(move |request: Inbound| {
        let in_scope = current();
        let forwarded = call_now(&mut client, request.into_body());
        ready(Ok::<_, Infallible>((in_scope, forwarded)))
    });
    let reader = CriticalityHeader::new()
        .with_trusted(Criticality::CriticalPlus, |_, extensions| {
            extensions.get::<Internal>().is_some()
        });
    let mut server = ScopeLayer::new(reader.clone()).layer(handler);

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
        let class = Criticality::ALL[i % Criticality::COUNT];
        assert_eq!(in_scope, Some(class));
        assert_eq!(forwarded, Ok((Some(class), 1)));
    }
    assert_eq!(reader.invalid(), 0);
    assert_eq!(current(), None, "the scope ends with the call");
}
