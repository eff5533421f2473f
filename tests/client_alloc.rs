//! The client throttle's decisions and counts never touch the heap, nor does its layer on the
//! path of a request it sends; only `build` does. The deadline layer allocates only the value
//! of the time left it writes.

use std::time::Duration;

use admit::client::Throttle;
use admit::clock::ManualClock;
use admit_testkit::counting_alloc::{self, allocations_during};
#[cfg(feature = "http")]
use admit_testkit::poll::call_now;

#[global_allocator]
static ALLOCATOR: counting_alloc::CountingAllocator = counting_alloc::CountingAllocator;

#[test]
fn sending_counting_and_refusing_never_allocate() {
    let clock = ManualClock::new();
    let throttle = Throttle::builder()
        .window(Duration::from_secs(1), 10)
        .clock(clock.clone())
        .build()
        .unwrap();
    let mut refused = 0;
    let allocations = allocations_during(|| {
        for slice in 0..100 {
            for _ in 0..100 {
                match throttle.try_send() {
                    // An overload from the 50th slice on: the backend refuses what it gets.
                    Ok(()) if slice < 50 => throttle.accepted(),
                    Ok(()) => throttle.refused(),
                    Err(_) => refused += 1,
                }
            }
            let _ = throttle.snapshot();
            clock.advance(Duration::from_millis(50));
        }
    });
    assert_eq!(allocations, 0);
    // The refusing path ran.
    assert!(refused > 1_000, "{refused}");
}

/// A backend's answer to every request: OK, at once.
#[cfg(feature = "http")]
fn ok(
    _: http::Request<()>,
) -> std::future::Ready<Result<http::Response<()>, std::convert::Infallible>> {
    std::future::ready(Ok(http::Response::new(())))
}

#[test]
#[cfg(feature = "http")]
fn a_request_sent_through_the_layer_never_allocates() {
    use std::sync::Arc;

    use admit::client::ThrottleLayer;
    use tower::Layer;

    let throttle = Arc::new(
        Throttle::builder()
            .clock(ManualClock::new())
            .build()
            .unwrap(),
    );
    let mut service = ThrottleLayer::new(Arc::clone(&throttle)).layer(tower::service_fn(ok));
    let allocations = allocations_during(|| {
        for _ in 0..1_000 {
            call_now(&mut service, http::Request::new(())).unwrap();
        }
    });
    assert_eq!(allocations, 0);
    assert_eq!(throttle.snapshot().accepts, 1_000);
}

#[test]
#[cfg(feature = "http")]
fn a_request_to_a_known_authority_never_allocates() {
    use std::sync::Arc;

    use admit::client::ThrottleLayer;
    use tower::Layer;

    let throttles = Arc::new(
        Throttle::builder()
            .clock(ManualClock::new())
            .per_destination(8)
            .unwrap(),
    );
    let mut service =
        ThrottleLayer::per_authority(Arc::clone(&throttles)).layer(tower::service_fn(ok));
    let mut requests: Vec<_> = (0..1_001)
        .map(|_| {
            http::Request::get("http://inventory:8080/items")
                // The class header is read on the way, allocating nothing.
                .header(admit::criticality::CRITICALITY_HEADER, "sheddable")
                .body(())
                .unwrap()
        })
        .collect();
    let mut send = |request| call_now(&mut service, request).unwrap();
    // The first request makes the destination's throttle.
    send(requests.pop().unwrap());
    let allocations = allocations_during(|| {
        for request in requests.drain(..) {
            send(request);
        }
    });
    assert_eq!(allocations, 0);
    let authority = http::uri::Authority::from_static("inventory:8080");
    let throttle = throttles.get(&authority);
    assert_eq!(throttle.snapshot().accepts, 1_001);
    let sheddable = admit::criticality::Criticality::Sheddable;
    assert_eq!(throttle.totals().attempts(sheddable), 1_001);
}

#[test]
#[cfg(feature = "http")]
fn the_deadline_layer_allocates_only_the_time_it_writes() {
    use admit::client::DeadlineLayer;
    use tower::Layer;

    let allocations_sending = |layer: DeadlineLayer, left: Option<&'static str>| {
        let mut service = layer.layer(tower::service_fn(ok));
        let mut requests: Vec<_> = (0..1_000)
            .map(|_| {
                let request = http::Request::get("/")
                    .header("accept", "*/*")
                    .header("user-agent", "test");
                match left {
                    Some(left) => request.header("admit-timeout-ms", left),
                    None => request,
                }
                .body(())
                .unwrap()
            })
            .collect();
        allocations_during(|| {
            for request in requests.drain(..) {
                call_now(&mut service, request).unwrap();
            }
        })
    };
    let capped = DeadlineLayer::new().with_timeout(Duration::from_secs(5));
    // No deadline known, or the request's own is the lowest: the request goes as it is.
    assert_eq!(allocations_sending(DeadlineLayer::new(), None), 0);
    assert_eq!(allocations_sending(capped, Some("250")), 0);
    // The cap is lower: its value is written, one allocation for the header's bytes.
    assert_eq!(allocations_sending(capped, None), 1_000);
}
