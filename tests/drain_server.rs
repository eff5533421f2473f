//! A real axum server on 127.0.0.1 behind `DrainLayer`, its listener tracked by the drain:
//! an idle keep-alive connection, a request in flight and an upgraded connection holding a
//! session, through a whole drain. No timing assertions beyond "before the deadline".

#![cfg(all(feature = "http", feature = "tokio", feature = "axum"))]

use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Duration;

use admit::drain::{Drain, DrainLayer, Outcome, Phase};
use admit_testkit::wait::bounded;
use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, get_service};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

const DELAY: Duration = Duration::from_millis(200);
const DEADLINE: Duration = Duration::from_secs(20);

/// What the app's handlers share with the test.
#[derive(Clone)]
struct Holds {
    drain: Drain,
    entered: Arc<Notify>,
    release: Arc<Notify>,
}

impl Holds {
    fn new(drain: &Drain) -> Self {
        Holds {
            drain: drain.clone(),
            entered: Arc::new(Notify::new()),
            release: Arc::new(Notify::new()),
        }
    }
}

/// `GET /hold`: answers once the test releases it.
async fn hold(holds: Holds) -> &'static str {
    holds.entered.notify_one();
    holds.release.notified().await;
    "released"
}

/// `GET /session` with `Upgrade: echo`: a line echo holding a session; on the drain's notice it
/// writes `goodbye` and closes.
async fn session(holds: Holds, mut request: Request) -> Response {
    let session = holds.drain.session();
    tokio::spawn(async move {
        let upgraded = hyper::upgrade::on(&mut request).await.expect("the upgrade");
        let mut io = BufReader::new(TokioIo::new(upgraded));
        let mut line = String::new();
        loop {
            tokio::select! {
                read = io.read_line(&mut line) => {
                    if read.unwrap_or(0) == 0 {
                        return;
                    }
                    io.get_mut().write_all(line.as_bytes()).await.unwrap();
                    line.clear();
                }
                () = session.reconnect() => {
                    io.get_mut().write_all(b"goodbye\n").await.unwrap();
                    io.get_mut().shutdown().await.unwrap();
                    return;
                }
            }
        }
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header("connection", "upgrade")
        .header("upgrade", "echo")
        .body(Body::empty())
        .unwrap()
}

fn app(holds: &Holds) -> Router {
    let (hold_state, session_state) = (holds.clone(), holds.clone());
    Router::new()
        .route("/hello", get(|| async { "hello" }))
        .route("/hold", get(move || hold(hold_state.clone())))
        .route(
            "/session",
            get(move |request: Request| session(session_state.clone(), request)),
        )
        .layer(DrainLayer::new(holds.drain.clone()))
        // Readiness outside the layer: it must answer while draining.
        .route("/ready", get_service(holds.drain.readiness()))
}

/// One HTTP/1.1 exchange on `stream`: the status, the `connection` header, the body.
async fn exchange(stream: &mut BufReader<TcpStream>, path: &str) -> (u16, Option<String>, String) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n");
    stream
        .get_mut()
        .write_all(request.as_bytes())
        .await
        .unwrap();
    read_response(stream).await
}

async fn read_response(stream: &mut BufReader<TcpStream>) -> (u16, Option<String>, String) {
    let mut status = String::new();
    bounded("a status line", stream.read_line(&mut status))
        .await
        .unwrap();
    let code = status
        .split_whitespace()
        .nth(1)
        .expect(&status)
        .parse()
        .unwrap();
    let (mut connection, mut length) = (None, 0);
    loop {
        let mut line = String::new();
        bounded("a header", stream.read_line(&mut line))
            .await
            .unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        match name.to_ascii_lowercase().as_str() {
            "connection" => connection = Some(value.trim().to_owned()),
            "content-length" => length = value.trim().parse().unwrap(),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    bounded("the body", stream.read_exact(&mut body))
        .await
        .unwrap();
    (code, connection, String::from_utf8(body).unwrap())
}

async fn connect(addr: std::net::SocketAddr) -> BufReader<TcpStream> {
    BufReader::new(bounded("connect", TcpStream::connect(addr)).await.unwrap())
}

/// Reads until the server closes the connection; what was left.
async fn eof(stream: &mut BufReader<TcpStream>) -> String {
    let mut rest = String::new();
    bounded("the server's close", stream.read_to_string(&mut rest))
        .await
        .unwrap();
    rest
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_drain_loses_nothing() {
    let drain = Drain::builder()
        .propagation_delay(DELAY)
        .deadline(DEADLINE)
        .build()
        .unwrap();
    let holds = Holds::new(&drain);
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let server = tokio::spawn(
        axum::serve(drain.listener(tcp), app(&holds))
            .with_graceful_shutdown(drain.stop_accepting())
            .into_future(),
    );

    // A: idle keep-alive. B: a request in flight. C: an upgraded connection with a session.
    let mut idle = connect(addr).await;
    assert_eq!(
        exchange(&mut idle, "/hello").await,
        (200, None, "hello".into())
    );
    let mut held = connect(addr).await;
    held.get_mut()
        .write_all(b"GET /hold HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    bounded("the held request", holds.entered.notified()).await;
    let mut upgraded = connect(addr).await;
    upgraded
        .get_mut()
        .write_all(
            b"GET /session HTTP/1.1\r\nHost: test\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\n",
        )
        .await
        .unwrap();
    let (status, _, _) = read_response(&mut upgraded).await;
    assert_eq!(status, 101);
    upgraded.get_mut().write_all(b"ping\n").await.unwrap();
    let mut echo = String::new();
    bounded("the echo", upgraded.read_line(&mut echo))
        .await
        .unwrap();
    assert_eq!(echo, "ping\n");
    let snapshot = drain.snapshot();
    assert_eq!(
        (snapshot.in_flight, snapshot.sessions, snapshot.connections),
        (1, 1, 3)
    );

    assert!(drain.start());
    // Announced: not ready; the idle connection's next response closes it.
    let mut probe = connect(addr).await;
    let (status, connection, _) = exchange(&mut probe, "/ready").await;
    assert_eq!((status, connection.as_deref()), (503, Some("close")));
    let (status, connection, body) = exchange(&mut idle, "/hello").await;
    assert_eq!(
        (status, connection.as_deref(), body.as_str()),
        (200, Some("close"), "hello")
    );
    assert_eq!(eof(&mut idle).await, "");

    // Draining: the listener is gone.
    bounded("draining", drain.stop_accepting()).await;
    let mut refused = false;
    for _ in 0..1_000 {
        match TcpStream::connect(addr).await {
            Err(_) => {
                refused = true;
                break;
            }
            // Accepted before axum dropped its listener: closed as idle by its shutdown.
            Ok(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    assert!(refused, "connects still accepted while draining");
    // The held request completes, and its connection closes.
    holds.release.notify_one();
    let (status, connection, body) = read_response(&mut held).await;
    assert_eq!(
        (status, connection.as_deref(), body.as_str()),
        (200, Some("close"), "released")
    );
    assert_eq!(eof(&mut held).await, "");
    // The session is told to reconnect and closes.
    let mut goodbye = String::new();
    bounded("the goodbye", upgraded.read_line(&mut goodbye))
        .await
        .unwrap();
    assert_eq!(goodbye, "goodbye\n");
    assert_eq!(eof(&mut upgraded).await, "");

    let outcome = bounded("the drain's end", drain.finished()).await;
    assert!(matches!(outcome, Outcome::Drained { .. }), "{outcome:?}");
    assert_eq!(drain.phase(), Phase::Drained);
    bounded("the server's graceful end", server)
        .await
        .unwrap()
        .unwrap();
    let snapshot = drain.snapshot();
    assert_eq!(
        (snapshot.in_flight, snapshot.sessions, snapshot.connections),
        (0, 0, 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_server_refuses_on_connections_it_still_has() {
    let drain = Drain::builder().build().unwrap();
    let holds = Holds::new(&drain);
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    // No graceful shutdown: connections keep being accepted, as behind a slow load balancer.
    let server = tokio::spawn(axum::serve(drain.listener(tcp), app(&holds)).into_future());
    drain.start_now();
    let mut stream = connect(addr).await;
    stream
        .get_mut()
        .write_all(b"GET /hello HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    let mut head = String::new();
    loop {
        let mut line = String::new();
        bounded("the refusal", stream.read_line(&mut line))
            .await
            .unwrap();
        if line == "\r\n" {
            break;
        }
        head.push_str(&line.to_ascii_lowercase());
    }
    assert!(head.starts_with("http/1.1 503"), "{head}");
    assert!(head.contains("retry-after: 1\r\n"), "{head}");
    assert!(head.contains("connection: close\r\n"), "{head}");
    assert!(head.contains("admit-refusal: draining\r\n"), "{head}");
    assert_eq!(eof(&mut stream).await, "");
    server.abort();
}
