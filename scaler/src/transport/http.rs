//! The HTTP side (`/metrics`, `/healthz`, `/readyz`): HTTP/1.1 with a capped number of
//! connections, in all and per peer address, a deadline for each request head, and one for
//! each answer.
//!
//! At a cap, a connection with no request in flight (between requests, or waiting for its
//! first head for over a second) is closed to admit a new one, so idle clients cannot keep a
//! probe out, and a new one is refused when none is idle; a connection whose answer is not
//! sent whole within [`HttpLimits::request_timeout`] of its head is dropped, so a client that
//! never reads frees its place and what its answer held.

use std::convert::Infallible;
use std::future::Future;
use std::pin::{Pin, pin};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use super::connections::{Connection, Connections, RequestTracker};
use super::sleep_until;

/// What the HTTP side's connections may hold.
#[derive(Clone, Copy, Debug)]
pub struct HttpLimits {
    /// A request head (or, between requests, the next one) not read by then closes the
    /// connection: a client that sends nothing, or a byte a second, is dropped.
    pub header_read_timeout: Duration,
    /// A request's answer not sent whole by then, from its head, drops the connection. (An
    /// answer counts as sent once hyper has taken its last chunk.)
    pub request_timeout: Duration,
    /// The most connections open at once, not counting those told to close: at the cap, one
    /// with no request in flight is closed to admit a new one, or the new one is refused.
    pub max_connections: usize,
    /// The same, from one peer address (at most `max_connections`).
    pub max_connections_per_peer: usize,
    /// TCP keepalive on accepted connections (idle time before the first probe).
    pub tcp_keepalive: Duration,
}

impl Default for HttpLimits {
    /// 10 s for a request head, 10 s for an answer, 64 connections, 16 from one address, TCP
    /// keepalive after 60 s.
    ///
    /// Prometheus keeps a connection per scraping replica, kubelet one per probe from the
    /// node's address: a quarter of the connections per address leaves them room, and takes
    /// four addresses to fill the server.
    fn default() -> Self {
        HttpLimits {
            header_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(10),
            max_connections: 64,
            max_connections_per_peer: 16,
            tcp_keepalive: Duration::from_secs(60),
        }
    }
}

/// The smallest read buffer hyper accepts: request heads are at most this long.
const MAX_HEAD_BYTES: usize = 8192;

/// How long an idle connection may stay once it should have closed.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Serves `router` on `listener` until `shutdown` resolves, then closes idle connections and
/// waits for the requests in flight (each within its deadline).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    shutdown: impl Future<Output = ()>,
) {
    let connections = Connections::new(
        "http",
        limits.max_connections,
        limits.max_connections_per_peer,
    );
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    let router = TowerToHyperService::new(router);
    super::accept(
        "HTTP",
        &listener,
        &connections,
        limits.tcp_keepalive,
        shutdown,
        |stream, _, admitted| {
            tokio::spawn(connection(
                stream,
                admitted,
                builder.clone(),
                router.clone(),
                limits,
            ));
        },
    )
    .await;
    drop(listener);
    connections.close_all();
    connections.closed().await;
}

/// Serves one connection until the peer closes it, it is told to close (after the answer in
/// flight, if any), or it outlives a deadline: an answer `request_timeout` after its head, an
/// idle connection [`CLOSE_GRACE`] after hyper's own header deadline (a connection whose last
/// bytes the client never reads is idle to us but not to hyper), one told to close
/// [`CLOSE_GRACE`] after it became idle.
async fn connection(
    stream: TcpStream,
    connection: Connection,
    builder: http1::Builder,
    router: TowerToHyperService<Router>,
    limits: HttpLimits,
) {
    let service = TrackedService {
        router,
        tracker: connection.tracker(),
        request_timeout: limits.request_timeout,
    };
    let mut served = pin!(builder.serve_connection(TokioIo::new(stream), service));
    let mut closing_since = None;
    loop {
        let changed = connection.changed();
        let now = connection.snapshot();
        if now.closing && closing_since.is_none() {
            // Closes at once if no request is in flight, or after its answer.
            served.as_mut().graceful_shutdown();
            closing_since = Some(Instant::now());
        }
        let deadline = if now.in_flight > 0 {
            now.answer_deadline
        } else {
            Some(match closing_since {
                Some(closing) => now.since.max(closing) + CLOSE_GRACE,
                None => now.since + limits.header_read_timeout + CLOSE_GRACE,
            })
        };
        tokio::select! {
            _ = &mut served => return,
            () = changed => {}
            () = sleep_until(deadline) => {
                if now.in_flight > 0 {
                    tracing::debug!(
                        target: "admit_scaler",
                        "an HTTP answer not sent within {:?}: closing",
                        limits.request_timeout
                    );
                }
                return;
            }
        }
    }
}

/// The router, with each request counted in flight until its answer is sent, due within the
/// request timeout.
#[derive(Clone)]
struct TrackedService {
    router: TowerToHyperService<Router>,
    tracker: RequestTracker,
    request_timeout: Duration,
}

impl hyper::service::Service<http::Request<Incoming>> for TrackedService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, request: http::Request<Incoming>) -> Self::Future {
        let in_flight = self
            .tracker
            .start(Instant::now().checked_add(self.request_timeout));
        let answer = self.router.call(request);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| Body::new(in_flight.until_sent(body))))
        })
    }
}
