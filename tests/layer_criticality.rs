//! A request's class reaches the limiter through the layer: read from a header (gRPC metadata
//! is the same on the wire) by `CriticalityHeader`, capped and defaulted, or from a function of
//! the request; and a pair of readers gives the limiter both the wait and the class.

#![cfg(feature = "http")]

use std::sync::Mutex;
use std::time::Duration;

use admit::Shared;
use admit::criticality::Criticality;
use admit::middleware::{
    Admission, AdmitLayer, CriticalityFrom, CriticalityHeader, Inspect, Limiter, NoWait,
};
use admit::shed::Overloaded;
use admit::signal::Arrival;
use axum::Router;
use axum::body::Body;
use axum::routing::get;
use tower::ServiceExt;

/// Records what each request told it, and refuses none.
#[derive(Debug, Default)]
struct Recorder(Mutex<Vec<Arrival>>);

impl Limiter for Recorder {
    type Permit = ();
    type Refusal = Overloaded;
    type Wait = NoWait<(), Overloaded>;

    fn admit(this: &Shared<Self>, arrival: Arrival) -> Admission<(), Overloaded, Self::Wait> {
        this.0.lock().unwrap().push(arrival);
        Admission::Enter(())
    }
}

/// Sends one request with `class` in the header `admit-criticality` through `reader`'s layer,
/// and returns what the limiter saw.
async fn seen<Q>(reader: Q, class: Option<&str>) -> Arrival
where
    Q: Inspect<http::Request<Body>> + Clone + Send + Sync + 'static,
{
    let recorder = std::sync::Arc::new(Recorder::default());
    let app: Router = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(AdmitLayer::new(recorder.clone()).inspect(reader).http());
    let mut request = http::Request::get("/");
    if let Some(class) = class {
        request = request.header("admit-criticality", class);
    }
    let response = app
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let seen = recorder.0.lock().unwrap();
    assert_eq!(seen.len(), 1);
    seen[0]
}

#[tokio::test]
async fn the_header_gives_the_limiter_the_class() {
    let header = CriticalityHeader::new();
    for (value, class) in [
        (Some("sheddable"), Criticality::Sheddable),
        (Some("SHEDDABLE_PLUS"), Criticality::SheddablePlus),
        (Some("critical_plus"), Criticality::Critical), // capped
        (Some("nonsense"), Criticality::Critical),
        (None, Criticality::Critical),
    ] {
        assert_eq!(seen(header.clone(), value).await.class(), Some(class));
    }
    assert_eq!(header.invalid(), 1);
    let trusted = CriticalityHeader::new().with_cap(Criticality::CriticalPlus);
    assert_eq!(
        seen(trusted, Some("critical_plus")).await.class(),
        Some(Criticality::CriticalPlus)
    );
}

#[tokio::test]
async fn a_function_or_a_pair_of_readers_gives_the_class_and_the_wait() {
    let by_path = CriticalityFrom(|_: &http::Request<Body>| Criticality::SheddablePlus);
    assert_eq!(
        seen(by_path, Some("critical")).await.class(),
        Some(Criticality::SheddablePlus)
    );

    /// A wait of 4 ms for every request.
    #[derive(Clone)]
    struct Waited;
    impl Inspect<http::Request<Body>> for Waited {
        fn inspect(&self, _: &http::Request<Body>) -> Arrival {
            Arrival::new().with_wait(Duration::from_millis(4))
        }
    }
    let both = seen((Waited, CriticalityHeader::new()), Some("sheddable")).await;
    assert_eq!(both.wait_nanos(), Some(4_000_000));
    assert_eq!(both.class(), Some(Criticality::Sheddable));
    // No reader: nothing known, and the shedder takes the request as critical.
    assert_eq!(
        seen(admit::middleware::ReadNothing, Some("sheddable")).await,
        Arrival::new()
    );
}

#[tokio::test]
async fn the_warm_up_layer_keeps_its_critical_share_for_critical_requests() {
    use admit::clock::ManualClock;
    use admit::warmup::{WarmUp, WarmUpLayer};

    // Cold at 10 per second, half the one-second burst kept for the critical classes.
    let limiter = std::sync::Arc::new(
        WarmUp::builder(30.0)
            .critical_share(0.5)
            .clock(ManualClock::new())
            .build()
            .unwrap(),
    );
    let app: Router = Router::new().route("/", get(|| async { "ok" })).layer(
        WarmUpLayer::new(limiter)
            .inspect(CriticalityHeader::new())
            .http(),
    );
    let status = |class: &'static str| {
        let app = app.clone();
        async move {
            let request = http::Request::get("/").header("admit-criticality", class);
            let response = app.oneshot(request.body(Body::empty()).unwrap()).await;
            response.unwrap().status().as_u16()
        }
    };
    // The sheddable requests stop halfway through the burst; the critical ones pass on.
    let mut sheddable = 0;
    while status("sheddable").await == 200 {
        sheddable += 1;
        assert!(sheddable < 100, "the sheddable requests were never refused");
    }
    assert_eq!(status("critical").await, 200);
    assert_eq!(status("sheddable").await, 503);
    assert!(sheddable >= 2, "{sheddable}");
}
