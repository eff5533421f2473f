//! A request's class travels on: through a real axum server on 127.0.0.1 whose handler calls a
//! second one with a hyper client behind `PropagateLayer`, the class the first request carried
//! (capped and defaulted by `CriticalityHeader`) arrives on the second.

#![cfg(feature = "http")]

use std::sync::Arc;

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
