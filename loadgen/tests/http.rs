//! The driver and [`HttpClient`] against real servers on 127.0.0.1: an axum server that
//! answers 200, 503 with `Retry-After`, 429, 418 or never; a TCP server that reads a request
//! and closes or resets the connection; and a port where nothing listens.
//!
//! These run on the real clock (tokio's paused clock would jump to the deadline whenever the
//! runtime waits on a socket). The deadline separates the handler that never answers from the
//! others, which answer at once on loopback: it is long enough never to cut them short.

use std::net::SocketAddr;
use std::time::Duration;

use admit_loadgen::{Arrival, Driver, HttpClient, Lost, Outcome, Refusal, Transport};
use admit_testkit::TestServer;
use admit_testkit::axum::serve_router;
use admit_testkit::wait::bounded;
use axum::Router;
use axum::http::{HeaderName, StatusCode, header};
use axum::routing::get;
use bytes::Bytes;
use http_body_util::Empty;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

const DEADLINE: Duration = Duration::from_secs(3);

/// 200, 503 with `Retry-After` and `admit-refusal`, 429 without, 418, and a handler that never
/// answers.
async fn http_server() -> TestServer {
    let router = Router::new()
        .route("/ok", get(|| async { "fine" }))
        .route(
            "/shed",
            get(|| async {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [
                        (header::RETRY_AFTER, "2"),
                        (HeaderName::from_static("admit-refusal"), "overload"),
                    ],
                )
            }),
        )
        .route("/limit", get(|| async { StatusCode::TOO_MANY_REQUESTS }))
        .route("/teapot", get(|| async { StatusCode::IM_A_TEAPOT }))
        .route("/slow", get(std::future::pending::<()>));
    serve_router(router).await
}

/// Reads each request's head, then closes the connection (`/close`) or resets it (`/reset`).
async fn hanging_up_server() -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    TestServer::start(addr, move |shutdown| async move {
        let accept = async {
            loop {
                let (stream, _) = listener.accept().await?;
                tokio::spawn(hang_up(stream));
            }
        };
        tokio::select! {
            result = accept => result,
            () = shutdown => Ok::<(), std::io::Error>(()),
        }
    })
}

async fn hang_up(mut stream: TcpStream) {
    let mut head = Vec::new();
    let mut buffer = [0; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buffer[..n]),
        }
    }
    if head.starts_with(b"GET /reset ") {
        // An RST instead of a FIN.
        stream.set_zero_linger().unwrap();
    }
}

/// A loopback port where nothing listens: bound, then released.
async fn closed_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

fn request(url: String) -> http::Request<Empty<Bytes>> {
    http::Request::get(url).body(Empty::new()).unwrap()
}

#[tokio::test]
async fn every_outcome_is_classified() {
    let (http, hang_up, nobody) = (
        http_server().await,
        hanging_up_server().await,
        closed_port().await,
    );
    let urls = [
        format!("{}/ok", http.url()),
        format!("{}/shed", http.url()),
        format!("{}/limit", http.url()),
        format!("{}/teapot", http.url()),
        format!("{}/slow", http.url()),
        format!("{}/close", hang_up.url()),
        format!("{}/reset", hang_up.url()),
        format!("http://{nobody}/"),
    ];
    let client = HttpClient::new();
    let outcomes = outcomes_of(&client, &urls).await;
    assert_eq!(
        outcomes,
        [
            Outcome::Ok,
            Outcome::Refused(Refusal {
                status: StatusCode::SERVICE_UNAVAILABLE,
                retry_after: Some("2".to_owned()),
                reason: Some("overload".to_owned()),
            }),
            Outcome::Refused(Refusal {
                status: StatusCode::TOO_MANY_REQUESTS,
                retry_after: None,
                reason: None,
            }),
            Outcome::Status(StatusCode::IM_A_TEAPOT),
            Outcome::TimedOut,
            Outcome::Lost(Lost::Closed),
            Outcome::Lost(Lost::Reset),
            Outcome::Lost(Lost::ConnectionRefused),
        ]
    );
    if let Outcome::Refused(refusal) = &outcomes[1] {
        assert_eq!(refusal.retry_after_secs(), Some(2));
    }
}

/// Each URL's outcome through the client, with the driver's deadline.
async fn outcomes_of(client: &HttpClient<Empty<Bytes>>, urls: &[String]) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    for url in urls {
        let outcome = tokio::time::timeout(DEADLINE, client.send(request(url.clone())))
            .await
            .unwrap_or(Outcome::TimedOut);
        outcomes.push(outcome);
    }
    outcomes
}

#[tokio::test]
async fn a_run_counts_each_outcome_exactly() {
    let (http, hang_up, nobody) = (
        http_server().await,
        hanging_up_server().await,
        closed_port().await,
    );
    // Five rounds of eight requests, 5 ms apart, all in the first second.
    let paths = [
        format!("{}/ok", http.url()),
        format!("{}/shed", http.url()),
        format!("{}/limit", http.url()),
        format!("{}/teapot", http.url()),
        format!("{}/slow", http.url()),
        format!("{}/close", hang_up.url()),
        format!("{}/reset", hang_up.url()),
        format!("http://{nobody}/"),
    ];
    let arrivals = (0..40).map(|index| Arrival {
        index,
        at: Duration::from_millis(5 * index),
        attempt: 0,
    });
    let mut live = Vec::new();
    let report = bounded(
        "the run",
        Driver::new(DEADLINE).run(
            &HttpClient::new(),
            Duration::from_secs(1),
            arrivals,
            |arrival| request(paths[arrival.index as usize % paths.len()].clone()),
            |second, tally| live.push((second, tally.clone())),
        ),
    )
    .await;

    let tally = &report.total;
    assert_eq!(tally.offered, 40);
    assert_eq!((tally.ok, tally.refused, tally.other_status), (5, 10, 5));
    assert_eq!(tally.refusal_reasons.get("overload"), Some(&5));
    assert_eq!(tally.timed_out, 5);
    assert_eq!(
        (
            tally.lost.closed,
            tally.lost.reset,
            tally.lost.connection_refused,
            tally.lost.other
        ),
        (5, 5, 5, 0)
    );
    assert_eq!(tally.dropped, 0);
    assert_eq!(tally.latency_us.len(), 5);
    assert!(tally.p50().is_some_and(|p50| p50 < DEADLINE));
    assert_eq!(report.seconds.len(), 1);
    assert_eq!(live, [(0, report.seconds[0].clone())]);
    http.shutdown().await;
    hang_up.shutdown().await;
}
