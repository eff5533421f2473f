//! A request's class travels on: through a real axum server on 127.0.0.1 whose handler calls a
//! second one with a hyper client behind `PropagateLayer`, the class the first request carried
//! (capped and defaulted by `CriticalityHeader`) arrives on the second. A handler that forwards
//! its incoming headers passes on the capped class, never the client's raw claim; of several
//! header lines the last (an edge proxy's appended one) decides; a trusted caller keeps its
//! higher class.

#![cfg(feature = "http")]

use std::sync::Arc;

use admit::criticality::Criticality;
use admit::middleware::CriticalityHeader;
use admit::middleware::propagate::{PropagateLayer, ScopeLayer, current};
use admit::shed::{ShedLayer, Shedder};
use admit_testkit::axum::serve_router;
use admit_testkit::wait::bounded;
use axum::Router;
use axum::http::HeaderMap;
use axum::routing::get;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::util::MapRequestLayer;
use tower::{Layer, ServiceExt};

#[tokio::test]
async fn the_class_of_a_request_reaches_the_requests_it_makes() {
    // The downstream service answers with the class it was sent.
    let downstream = serve_router(Router::new().route(
        "/",
        get(|headers: HeaderMap| async move {
            headers
                .get("admit-criticality")
                .map_or("none".to_owned(), |value| {
                    value.to_str().unwrap().to_owned()
                })
        }),
    ))
    .await;
    let downstream_url = format!("{}/", downstream.url());

    let client = PropagateLayer::new()
        .layer(Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>());
    let shedder = Arc::new(Shedder::builder().build().unwrap());
    let front = Router::new()
        .route(
            "/",
            get(move || {
                let (client, url) = (client.clone(), downstream_url.clone());
                async move {
                    let class = current().expect("in scope").to_string();
                    let request = http::Request::get(url).body(Empty::new()).unwrap();
                    let response = client.oneshot(request).await.unwrap();
                    let sent = response.into_body().collect().await.unwrap().to_bytes();
                    format!("{class} {}", String::from_utf8(sent.to_vec()).unwrap())
                }
            }),
        )
        .layer(ScopeLayer::new(CriticalityHeader::new()))
        .layer(
            ShedLayer::new(shedder)
                .inspect(CriticalityHeader::new())
                .http(),
        );
    let front = serve_router(front).await;

    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    for (sent, seen) in [
        (Some("sheddable"), "sheddable"),
        (Some("SHEDDABLE-PLUS"), "sheddable_plus"),
        (Some("critical_plus"), "critical"), // capped
        (None, "critical"),
    ] {
        let mut request = http::Request::get(format!("{}/", front.url()));
        if let Some(sent) = sent {
            request = request.header("admit-criticality", sent);
        }
        let response = bounded("GET /", client.request(request.body(Empty::new()).unwrap()))
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let body = bounded("the body", response.into_body().collect())
            .await
            .unwrap()
            .to_bytes();
        // The handler saw the class, and so did the service it called.
        assert_eq!(body, format!("{seen} {seen}"), "sent {sent:?}");
    }
    // Outside any request, nothing is in scope.
    assert_eq!(current(), None);
}

/// What an authentication layer inserts for a caller it trusts.
#[derive(Clone, Copy, Debug)]
struct Internal;

/// The bearer token of the trusted callers.
const INTERNAL_TOKEN: &str = "Bearer internal";

#[tokio::test]
async fn a_handler_that_forwards_its_headers_passes_on_the_capped_class() {
    // The downstream service answers with every class line it was sent, joined by `|`.
    let downstream = serve_router(Router::new().route(
        "/",
        get(|headers: HeaderMap| async move {
            let lines = headers.get_all("admit-criticality").iter();
            let lines: Vec<_> = lines.map(|line| line.to_str().unwrap()).collect();
            lines.join("|")
        }),
    ))
    .await;
    let downstream_url = format!("{}/", downstream.url());

    // The front's handler forwards every header it received (but `host`) to the downstream.
    let client = PropagateLayer::new()
        .layer(Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>());
    let reader = CriticalityHeader::new()
        .with_trusted(Criticality::CriticalPlus, |_, extensions| {
            extensions.get::<Internal>().is_some()
        });
    let front = Router::new()
        .route(
            "/",
            get(move |headers: HeaderMap| {
                let (client, url) = (client.clone(), downstream_url.clone());
                async move {
                    let mut request = http::Request::get(url).body(Empty::new()).unwrap();
                    for (name, value) in &headers {
                        if name != http::header::HOST {
                            request.headers_mut().append(name, value.clone());
                        }
                    }
                    let response = client.oneshot(request).await.unwrap();
                    let sent = response.into_body().collect().await.unwrap().to_bytes();
                    format!(
                        "{} {}",
                        current().unwrap(),
                        std::str::from_utf8(&sent).unwrap()
                    )
                }
            }),
        )
        .layer(ScopeLayer::new(reader.clone()))
        // The authentication layer, before the reader.
        .layer(MapRequestLayer::new(|mut request: http::Request<_>| {
            let token = request.headers().get(http::header::AUTHORIZATION);
            if token.is_some_and(|token| token == INTERNAL_TOKEN) {
                request.extensions_mut().insert(Internal);
            }
            request
        }));
    let front = serve_router(front).await;

    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    for (lines, internal, seen) in [
        // A client's raw claim, forwarded: capped on the way in and on the way out.
        (&["critical_plus"][..], false, "critical"),
        // An edge proxy's appended line wins over the client's, either way.
        (&["critical_plus", "sheddable"], false, "sheddable"),
        (&["sheddable", "critical"], false, "critical"),
        (&["urgent", "sheddable_plus"], false, "sheddable_plus"),
        // Unreadable, or none: the default class, written downstream.
        (&["sheddable", "urgent"], false, "critical"),
        (&[], false, "critical"),
        // A trusted caller keeps its class.
        (&["critical_plus"], true, "critical_plus"),
        (&["sheddable_plus"], true, "sheddable_plus"),
    ] {
        let mut request = http::Request::get(format!("{}/", front.url()));
        for line in lines {
            request = request.header("admit-criticality", *line);
        }
        if internal {
            request = request.header(http::header::AUTHORIZATION, INTERNAL_TOKEN);
        }
        let response = bounded("GET /", client.request(request.body(Empty::new()).unwrap()))
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let body = bounded("the body", response.into_body().collect())
            .await
            .unwrap()
            .to_bytes();
        // The handler's class, and the one line the downstream service received.
        assert_eq!(body, format!("{seen} {seen}"), "sent {lines:?}, {internal}");
    }
    assert_eq!(reader.invalid(), 1);
}
