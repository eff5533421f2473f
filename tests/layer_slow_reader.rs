//! A client that never reads its response keeps the request in flight with `until_body_end`
//! (hyper polls a body only while it can write it), for as long as its connection lives; a
//! write timeout on the connection's IO, the remedy the guide gives, ends the connection and
//! so the request. Two real axum servers on 127.0.0.1, each with its own shedder, stream an
//! endless body to a client that never reads: the one whose listener puts a write timeout on
//! each connection releases its permit, and once it has, the other still holds its own.

#![cfg(all(feature = "http", feature = "axum"))]

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use admit::shed::{ShedLayer, Shedder};
use admit_testkit::TestServer;
use admit_testkit::axum::serve_router;
use admit_testkit::wait::eventually;
use axum::Router;
use axum::body::Body;
use axum::routing::get;
use bytes::Bytes;
use tokio_io_timeout::TimeoutStream;

/// The write timeout of the server that has one.
const WRITE_TIMEOUT: Duration = Duration::from_millis(200);

/// A listener whose connections fail a write that makes no progress for `timeout`: the guide's
/// recipe.
struct WriteTimeout {
    listener: tokio::net::TcpListener,
    timeout: Duration,
}

impl axum::serve::Listener for WriteTimeout {
    type Io = Pin<Box<TimeoutStream<tokio::net::TcpStream>>>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        // axum's own accept loop for the TCP listener, which retries failed accepts.
        let (tcp, addr) = axum::serve::Listener::accept(&mut self.listener).await;
        let mut io = TimeoutStream::new(tcp);
        io.set_write_timeout(Some(self.timeout));
        (Box::pin(io), addr)
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        tokio::net::TcpListener::local_addr(&self.listener)
    }
}

/// An endless body of 64 KiB frames, behind `shedder`'s `http()` layer.
fn endless(shedder: Arc<Shedder>) -> Router {
    let body = || {
        let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
        let frames = std::iter::repeat_with(move || Ok::<_, std::io::Error>(chunk.clone()));
        Body::from_stream(tokio_stream::iter(frames))
    };
    Router::new()
        .route("/", get(move || async move { body() }))
        .layer(ShedLayer::new(shedder).http())
}

/// Sends `GET /` and never reads the answer.
fn never_read(addr: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
        .unwrap();
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_timeout_on_the_io_releases_a_slow_readers_permit() {
    let timed = Arc::new(Shedder::builder().build().unwrap());
    let untimed = Arc::new(Shedder::builder().build().unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let timed_addr = listener.local_addr().unwrap();
    let router = endless(timed.clone());
    let _timed_server = TestServer::start(timed_addr, move |shutdown| {
        let listener = WriteTimeout {
            listener,
            timeout: WRITE_TIMEOUT,
        };
        std::future::IntoFuture::into_future(
            axum::serve(listener, router).with_graceful_shutdown(shutdown),
        )
    });
    let untimed_server = serve_router(endless(untimed.clone())).await;

    let started = Instant::now();
    let _untimed_client = never_read(untimed_server.addr());
    let _timed_client = never_read(timed_addr);
    let counts = || {
        let (timed, untimed) = (timed.snapshot(), untimed.snapshot());
        format!(
            "in flight {} and {}; ended {} and {}",
            timed.flying,
            untimed.flying,
            timed.passed + timed.failed,
            untimed.passed + untimed.failed
        )
    };
    let admitted = |shedder: &Shedder| {
        let snapshot = shedder.snapshot();
        snapshot.flying + snapshot.passed + snapshot.failed == 1
    };
    eventually(
        "both requests admitted",
        || admitted(&timed) && admitted(&untimed),
        counts,
    )
    .await;
    eventually(
        "the timed-out request ends",
        || timed.snapshot().flying == 0,
        counts,
    )
    .await;
    let released = started.elapsed();
    // Ended as cancelled (its body dropped with the connection), counted with the failures.
    let snapshot = timed.snapshot();
    assert_eq!((snapshot.passed, snapshot.failed), (0, 1), "{}", counts());
    // The server without a write timeout still holds its slow reader's permit.
    assert_eq!(untimed.snapshot().flying, 1, "{}", counts());
    println!(
        "with a {WRITE_TIMEOUT:?} write timeout the permit was released {released:?} after the \
         request; without one it is still held"
    );
}
