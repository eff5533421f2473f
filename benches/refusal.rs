//! What one refused request costs through hyper: an axum server on its own thread (a
//! current-thread runtime, one serving core), a hyper client on one keep-alive connection over
//! 127.0.0.1, one request at a time, its answer read to the end.
//!
//! ```text
//! cargo bench -p admit-benches --bench refusal
//! ```
//!
//! Each entry is one server:
//! - `axum 200 (no layer)`: the handler answers `200 OK` with an empty body, nothing in front;
//! - `admit ShedLayer .http()`: an overloaded shedder (as in `layer/refuse`) answering 503 with
//!   `Retry-After` and its reason;
//! - `admit BoundLayer .http()`: a bound of one place, held, and no queue (`bound-full`);
//! - `tower load_shed+concurrency_limit`: `concurrency_limit(1)`, its only permit held by a
//!   ready clone, behind axum's `HandleErrorLayer` turning `Overloaded` into the same 503 with
//!   `Retry-After`, as a tower user answers it.
//!
//! Two groups measure the same requests:
//! - **refusal/round trip**: the client's wall time per request (both ends and the loopback);
//! - **refusal/server cpu**: the CPU time the server's thread spent per request, read from its
//!   `/proc/self/task/<tid>/schedstat` (Linux; the group is skipped where it cannot be read).
//!   This is what a refusal costs the serving core.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use admit::bound::BoundLayer;
use admit::clock::MonotonicClock;
use admit::shed::ShedLayer;
use admit_benches::{full_bound, shedder};
use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::routing::get;
use bytes::Bytes;
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, criterion_group, criterion_main};
use http::header::RETRY_AFTER;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tower::{BoxError, Layer, ServiceBuilder, ServiceExt};

/// The handler every server routes `/` to.
async fn ok() -> StatusCode {
    StatusCode::OK
}

/// tower's refusal as its users answer it: 503, retry in a second.
async fn overloaded(_: BoxError) -> (StatusCode, [(http::HeaderName, &'static str); 1]) {
    (StatusCode::SERVICE_UNAVAILABLE, [(RETRY_AFTER, "1")])
}

/// A server running on its own thread, and where its thread's CPU time can be read.
struct Server {
    address: SocketAddr,
    /// `/proc/self/task/<tid>/schedstat` of the serving thread.
    schedstat: String,
}

impl Server {
    /// Runs `serve` on a listener on 127.0.0.1, on a thread of its own with a current-thread
    /// runtime, until the process ends.
    fn start<F, Fut>(serve: F) -> Self
    where
        F: FnOnce(tokio::net::TcpListener) -> Fut + Send + 'static,
        Fut: Future<Output = ()>,
    {
        let (ready, started) = mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            let tid = std::fs::read_link("/proc/thread-self")
                .ok()
                .and_then(|link| Some(link.file_name()?.to_str()?.to_owned()))
                .unwrap_or_default();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("a port on 127.0.0.1");
                let address = listener.local_addr().expect("bound");
                ready.send((address, tid)).expect("the bench waits");
                serve(listener).await;
            });
        });
        let (address, tid) = started.recv().expect("the server starts");
        Self {
            address,
            schedstat: format!("/proc/self/task/{tid}/schedstat"),
        }
    }

    /// The serving thread's CPU time so far, if this system reports it.
    fn cpu(&self) -> Option<Duration> {
        let stat = std::fs::read_to_string(&self.schedstat).ok()?;
        Some(Duration::from_nanos(
            stat.split_whitespace().next()?.parse().ok()?,
        ))
    }
}

/// Serves `app` with axum.
async fn serve(listener: tokio::net::TcpListener, app: Router) {
    axum::serve(listener, app).await.expect("serving");
}

/// The servers, by entry name.
fn servers() -> Vec<(&'static str, StatusCode, Server)> {
    let routes = || Router::new().route("/", get(ok));
    let bare = Server::start(move |listener| serve(listener, routes()));
    let shed = Server::start(move |listener| {
        let layer = ShedLayer::new(shedder(MonotonicClock::new(), true)).http();
        serve(listener, routes().layer(layer))
    });
    let bound = Server::start(move |listener| async move {
        let (bound, held) = full_bound();
        serve(listener, routes().layer(BoundLayer::new(bound).http())).await;
        drop(held);
    });
    let tower = Server::start(move |listener| async move {
        let limited = ServiceBuilder::new()
            .load_shed()
            .concurrency_limit(1)
            .service(routes());
        // A clone ready to call holds the only permit, for as long as it lives. (axum's
        // `HandleError` is always ready and drives a fresh clone of its inner service per
        // request.)
        let held = ServiceExt::<Request<axum::body::Body>>::ready_oneshot(limited.clone()).await;
        let app = HandleErrorLayer::new(overloaded).layer(limited);
        let make = tower::make::Shared::new(app);
        axum::serve(listener, make).await.expect("serving");
        drop(held);
    });
    vec![
        ("axum 200 (no layer)", StatusCode::OK, bare),
        (
            "admit ShedLayer .http()",
            StatusCode::SERVICE_UNAVAILABLE,
            shed,
        ),
        (
            "admit BoundLayer .http()",
            StatusCode::SERVICE_UNAVAILABLE,
            bound,
        ),
        (
            "tower load_shed+concurrency_limit",
            StatusCode::SERVICE_UNAVAILABLE,
            tower,
        ),
    ]
}

/// A client of one server: one keep-alive HTTP/1.1 connection.
struct Client {
    runtime: tokio::runtime::Runtime,
    sender: SendRequest<Empty<Bytes>>,
}

impl Client {
    fn connect(address: SocketAddr) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let sender = runtime.block_on(async {
            let stream = tokio::net::TcpStream::connect(address)
                .await
                .expect("the server listens");
            stream.set_nodelay(true).expect("TCP_NODELAY");
            let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .expect("an HTTP/1.1 connection");
            tokio::spawn(connection);
            sender
        });
        Self { runtime, sender }
    }

    /// Sends `iters` requests one after another, each answer read to its end, and returns the
    /// status of the last.
    fn run(&mut self, iters: u64) -> StatusCode {
        self.runtime.block_on(async {
            let mut status = StatusCode::OK;
            for _ in 0..iters {
                let request = Request::get("/")
                    .body(Empty::<Bytes>::new())
                    .expect("a valid request");
                self.sender.ready().await.expect("the connection is open");
                let response = self.sender.send_request(request).await.expect("an answer");
                status = response.status();
                response.into_body().collect().await.expect("the body");
            }
            status
        })
    }
}

/// Benchmarks every server, timing each run by the difference of two `readings` of it.
fn each_server(
    group: &mut BenchmarkGroup<'_, WallTime>,
    servers: &[(&str, StatusCode, Server)],
    reading: impl Fn(&Server) -> Duration,
) {
    for (name, expected, server) in servers {
        let mut client = Client::connect(server.address);
        assert_eq!(client.run(1), *expected, "{name}");
        group.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                let began = reading(server);
                client.run(iters);
                reading(server).saturating_sub(began)
            })
        });
    }
}

fn refusal(c: &mut Criterion) {
    let servers = servers();
    let epoch = Instant::now();
    each_server(
        &mut c.benchmark_group("refusal/round trip"),
        &servers,
        |_| epoch.elapsed(),
    );
    if servers[0].2.cpu().is_some() {
        each_server(
            &mut c.benchmark_group("refusal/server cpu"),
            &servers,
            |server| server.cpu().expect("the server's schedstat"),
        );
    } else {
        println!("refusal/server cpu: skipped, no /proc/self/task/<tid>/schedstat here");
    }
}

criterion_group!(benches, refusal);
criterion_main!(benches);
