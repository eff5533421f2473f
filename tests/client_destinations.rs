//! Throttles per destination: the map stays within its capacity whatever the keys, keeps the
//! destinations in use, and through `ThrottleLayer::per_authority` one refusing backend does
//! not throttle requests to another.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use admit::ConfigError;
use admit::client::{Throttle, ThrottleLayer, Throttled};
use admit::clock::ManualClock;
use tower::{Layer, ServiceExt, service_fn};

#[test]
fn hostile_keys_never_grow_the_map_past_its_capacity() {
    let throttles = Throttle::builder()
        .clock(ManualClock::new())
        .per_destination::<String>(16)
        .unwrap();
    for i in 0..100_000 {
        // One destination in constant use among a stream of new ones, each counting once.
        throttles.get("inventory").refused();
        throttles.get(format!("host-{i}").as_str()).refused();
        assert!(throttles.len() <= 16);
    }
    assert_eq!(throttles.len(), 16);
    // Kept: the destination in use and the newest, with their counts.
    assert_eq!(throttles.get("inventory").snapshot().requests, 100_000);
    assert_eq!(throttles.get("host-99999").snapshot().requests, 1);
    // Gone long ago: made anew, with nothing counted.
    assert_eq!(throttles.get("host-0").snapshot().requests, 0);
}

#[test]
fn a_destination_keeps_its_throttle_while_it_stays_in_the_map() {
    let throttles = Throttle::builder()
        .clock(ManualClock::new())
        .per_destination::<&'static str>(4)
        .unwrap();
    let a = throttles.get(&"a");
    a.refused();
    assert!(Arc::ptr_eq(&a, &throttles.get(&"a")));
    assert_eq!(throttles.get(&"a").snapshot().requests, 1);
    assert_eq!(throttles.get(&"b").snapshot().requests, 0);
}

#[test]
fn a_capacity_outside_1_to_65536_is_a_typed_error() {
    for capacity in [0, 65_537] {
        let error = Throttle::builder()
            .per_destination::<String>(capacity)
            .unwrap_err();
        assert!(
            matches!(error, ConfigError::TooManyDestinations { .. }),
            "{error}"
        );
        assert_eq!(error.setting(), "capacity");
    }
    // The throttles' own settings are checked too.
    let error = Throttle::builder()
        .k(0.5)
        .per_destination::<String>(8)
        .unwrap_err();
    assert!(matches!(error, ConfigError::MultiplierOutOfRange { .. }));
}

#[tokio::test]
async fn one_refusing_backend_does_not_throttle_another() {
    let reached_healthy = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&reached_healthy);
    // `refusing.example` refuses everything as overloaded; every other host serves.
    let backend = service_fn(move |request: http::Request<()>| {
        let refusing = request.uri().host() == Some("refusing.example");
        if !refusing {
            counter.fetch_add(1, Ordering::SeqCst);
        }
        let status = if refusing { 503 } else { 200 };
        async move {
            Ok::<_, std::convert::Infallible>(
                http::Response::builder().status(status).body(()).unwrap(),
            )
        }
    });
    let throttles = Arc::new(
        Throttle::builder()
            .clock(ManualClock::new())
            .per_destination(8)
            .unwrap(),
    );
    let client = ThrottleLayer::per_authority(Arc::clone(&throttles)).layer(backend);
    let mut throttled = 0;
    for _ in 0..500 {
        for uri in [
            "http://refusing.example/",
            "http://healthy.example/",
            "/relative",
        ] {
            let request = http::Request::get(uri).body(()).unwrap();
            match client.clone().oneshot(request).await {
                Ok(_) => {}
                Err(error) => {
                    assert!(error.is::<Throttled>(), "{error}");
                    assert_eq!(uri, "http://refusing.example/");
                    throttled += 1;
                }
            }
        }
    }
    assert!(throttled > 400, "{throttled}");
    // Every request to the healthy host and without a host reached the backend.
    assert_eq!(reached_healthy.load(Ordering::SeqCst), 1_000);
    assert_eq!(throttles.len(), 2);
}
