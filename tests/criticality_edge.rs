//! The guide's edge recipe through a real HAProxy on 127.0.0.1, in front of an axum server that
//! reads the class with `CriticalityHeader`: `http-request del-header` strips what an outside
//! client claims and `set-header` gives a class by route; `add-header` appends the edge's line
//! after the client's, and the appended line decides.
//!
//! Without an HAProxy binary the test prints `SKIPPED: …` and passes, unless
//! `ADMIT_REQUIRE_HAPROXY` is set (see `admit_testkit::haproxy::require`).

#![cfg(feature = "http")]

use std::time::Duration;

use admit::middleware::CriticalityHeader;
use admit::middleware::propagate::{ScopeLayer, current};
use admit_testkit::axum::serve_router;
use admit_testkit::haproxy::{self, Haproxy, HaproxyConfig};
use admit_testkit::wait::bounded;
use axum::Router;
use axum::http::HeaderMap;
use axum::routing::get;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// An HAProxy with `rules` in its frontend, in front of `server`.
async fn edge(rules: &[&str], server: std::net::SocketAddr) -> Haproxy {
    let proxy = haproxy::launch(HaproxyConfig {
        check_interval: Duration::from_millis(100),
        rise: 1,
        frontend_rules: rules.iter().map(|rule| (*rule).to_owned()).collect(),
        ..HaproxyConfig::default()
    })
    .await
    .unwrap_or_else(|error| panic!("{error}"));
    proxy.add_server("r1", server).await.expect("added");
    proxy
}

/// What the server saw for `GET path` sent through `proxy` with the class lines `lines`: the
/// class in scope, and the lines it received joined by `|`.
async fn seen(proxy: &Haproxy, path: &str, lines: &[&str]) -> String {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut request = http::Request::get(format!("{}{path}", proxy.url()));
    for line in lines {
        request = request.header("admit-criticality", *line);
    }
    let response = bounded("GET", client.request(request.body(Empty::new()).unwrap()))
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", proxy.log_tail());
    let body = bounded("the body", response.into_body().collect())
        .await
        .unwrap()
        .to_bytes();
    String::from_utf8(body.to_vec()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_edge_strips_sets_or_appends_the_class() {
    if haproxy::require("the_edge_strips_sets_or_appends_the_class").is_none() {
        return;
    }
    let echo = |headers: HeaderMap| async move {
        let lines = headers.get_all("admit-criticality").iter();
        let lines: Vec<_> = lines.map(|line| line.to_str().unwrap()).collect();
        format!("{} {}", current().unwrap(), lines.join("|"))
    };
    let server = serve_router(
        Router::new()
            .route("/readyz", get(|| async { "ready" }))
            .fallback(echo)
            .layer(ScopeLayer::new(CriticalityHeader::new())),
    )
    .await;

    // The guide's HAProxy lines.
    let strip = edge(
        &[
            "http-request del-header admit-criticality",
            "http-request set-header admit-criticality sheddable if { path_beg /prefetch/ }",
        ],
        server.addr(),
    )
    .await;
    assert_eq!(seen(&strip, "/", &["critical_plus"]).await, "critical ");
    assert_eq!(seen(&strip, "/", &["sheddable"]).await, "critical ");
    assert_eq!(
        seen(&strip, "/prefetch/feed", &["critical_plus", "critical"]).await,
        "sheddable sheddable"
    );

    let append = edge(
        &["http-request add-header admit-criticality sheddable if { path_beg /prefetch/ }"],
        server.addr(),
    )
    .await;
    let appended = seen(&append, "/prefetch/feed", &["critical_plus"]).await;
    println!("appended: {appended}");
    assert_eq!(appended, "sheddable critical_plus|sheddable");
    // Without the edge's line, the reader's cap.
    assert_eq!(
        seen(&append, "/", &["critical_plus"]).await,
        "critical critical_plus"
    );
    assert!(strip.stop().success());
    assert!(append.stop().success());
}
