//! The gRPC server: HTTP/2 connections, plain text or TLS, served by hyper with tonic's
//! routes, and what they may hold.
//!
//! What one caller can make the scaler hold is bounded as a product, not factor by factor:
//! connections are capped in all and per peer address ([`GrpcLimits::max_connections`],
//! [`GrpcLimits::max_connections_per_peer`]; an idle one is closed to admit a new one, and a
//! new one is refused when none is idle), and every request in flight on any of them is charged
//! to one budget of bytes ([`GrpcLimits::max_request_bytes_in_flight`]), whatever the number of
//! streams.
//!
//! The server is hyper's, not tonic's `Server`, because tonic closes a connection only when the
//! whole server stops: here each connection has a task that closes it gracefully (a GOAWAY, so
//! that a request crossing it is retried by the client) once it has been idle too long, when a
//! new connection needs its place, or when an answer is not sent within its deadline
//! ([`GrpcLimits::answer_timeout`]).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tonic::Status;
use tonic::body::Body;
use tonic::service::Routes;

use super::budget::{ConnectionBudget, RequestBudget};
use super::connections::{Connection, Connections, RequestTracker};
use super::sleep_until;
use super::tls::ReloadingTls;

/// Streams one connection may have open beyond two per trigger: see
/// [`GrpcLimits::max_concurrent_streams`].
pub const STREAMS_BEYOND_TRIGGERS: u32 = 64;

/// How long a connection told to close (by a GOAWAY) may stay once nothing is in flight on it,
/// or once an answer on it is past its deadline: time for the client to see the GOAWAY and
/// answer its ping.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// How long a unary RPC's answer may take to be sent once its handler has answered (within
/// the request timeout): see [`GrpcLimits::answer_timeout`].
pub const ANSWER_SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// The one server-streaming method: its answer lasts as long as its client keeps it open.
const STREAMING_METHOD: &str = "StreamIsActive";

/// What the gRPC server's connections may hold and how long their parts may take.
#[derive(Clone, Copy, Debug)]
pub struct GrpcLimits {
    /// The longest an RPC may take to answer (the head of a stream's answer, for
    /// `StreamIsActive`); past it the RPC fails with `CANCELLED`.
    pub request_timeout: Duration,
    /// The most streams (RPCs in flight and open `StreamIsActive` streams) per connection.
    pub max_concurrent_streams: u32,
    /// The most connections open at once, not counting those told to close: at the cap, an
    /// idle one is closed to admit a new one, or the new one is refused if none is idle (one
    /// that never made a call counts as idle once it is a second old).
    pub max_connections: usize,
    /// The same, from one peer address: at its cap, one of that address's idle connections is
    /// closed to admit its new one, or the new one is refused. At most `max_connections`.
    pub max_connections_per_peer: usize,
    /// A connection with no RPC in flight for this long is closed (GOAWAY).
    pub idle_timeout: Duration,
    /// A new connection must finish its handshakes (TLS, HTTP/2) and start its first RPC
    /// within this, or it is closed.
    pub handshake_timeout: Duration,
    /// The bytes the requests in flight on all connections may hold: each is charged 2 KiB
    /// until its message begins and 16 KiB from then on, its headers and twice its message's
    /// length as its gRPC prefix announces it, until it is answered, and until its body ends,
    /// also to its address's share, a quarter of this. Past either, a request gets
    /// `RESOURCE_EXHAUSTED`. Once their bodies have ended, one connection's requests may take
    /// all of it (KEDA sends every call over one connection).
    pub max_request_bytes_in_flight: usize,
    /// The longest a request's message may take to arrive whole; past it the RPC fails with
    /// `DEADLINE_EXCEEDED`.
    pub request_body_timeout: Duration,
    /// A unary RPC's answer not sent whole within this of its request's head (its client
    /// grants no flow-control window, say) closes its connection: a GOAWAY, then the
    /// connection is dropped a moment later. `StreamIsActive` streams have no such deadline.
    pub answer_timeout: Duration,
    /// The largest request message charged to the budget: a longer one, which the decoder
    /// refuses (its limit is the service's own), is charged as this long.
    pub max_message_bytes: usize,
    /// HTTP/2 pings on a connection without traffic, every this long...
    pub http2_keepalive_interval: Duration,
    /// ...and how long an answer may take before the connection, and its streams, are closed.
    pub http2_keepalive_timeout: Duration,
    /// TCP keepalive on accepted connections (idle time before the first probe).
    pub tcp_keepalive: Duration,
    /// The largest header list a request may carry.
    pub max_header_list_bytes: u32,
    /// HTTP/2 flow control: the bytes a stream may send before the server reads them (more
    /// than the largest message)...
    pub stream_window_bytes: u32,
    /// ...and all of a connection's streams together.
    pub connection_window_bytes: u32,
}

impl GrpcLimits {
    /// The scaler's limits for up to `max_triggers` triggers and RPCs of at most
    /// `request_timeout`: 32 connections, 8 from one address, idle for at most 5 min, 10 s to
    /// handshake, requests in flight that hold 2 × `max_triggers` calls of KEDA's usual size
    /// (18 KiB each: 70.3 MiB for 2000 triggers; at least 1 MiB, at most 1 GiB), 10 s for a
    /// request's message, answers sent within `request_timeout` + [`ANSWER_SEND_TIMEOUT`],
    /// messages of
    /// [`max_request_bytes`](crate::service::max_request_bytes), 2 × `max_triggers` +
    /// [`STREAMS_BEYOND_TRIGGERS`] streams a connection; pings every 30 s answered within 20 s,
    /// TCP keepalive after 60 s, headers up to 16 KiB, windows of 64 KiB a stream and 256 KiB a
    /// connection.
    ///
    /// The connections: KEDA's operator and its metrics server each keep one, from their own
    /// pod's address; kubelet's gRPC probes open one per probe, from the node's address. A
    /// quarter of the connections per address leaves them room, and takes four addresses to
    /// fill the server with connections that all have an RPC in flight.
    ///
    /// The budget: KEDA's operator and its metrics server may each have a call per trigger
    /// waiting for a slow Prometheus, and they must not be refused.
    ///
    /// The streams: KEDA sends every call over one connection per process (its operator's),
    /// and calls one trigger's RPCs one after the other, so at most one unary RPC per trigger
    /// is in flight, plus one `StreamIsActive` stream per `external-push` trigger, plus the
    /// few calls of reconciles and HPA syncs. grpc-go queues RPCs beyond the server's stream
    /// limit (they wait for a stream to end, not fail), so the limit decides only whether a
    /// call waits behind slow ones, and it is high enough that none does.
    pub fn new(max_triggers: usize, request_timeout: Duration) -> Self {
        let triggers = u32::try_from(max_triggers).unwrap_or(u32::MAX);
        GrpcLimits {
            request_timeout,
            max_concurrent_streams: triggers
                .saturating_mul(2)
                .saturating_add(STREAMS_BEYOND_TRIGGERS),
            max_connections: 32,
            max_connections_per_peer: 8,
            idle_timeout: Duration::from_secs(300),
            handshake_timeout: Duration::from_secs(10),
            max_request_bytes_in_flight: super::budget::for_waiting_calls(
                max_triggers.saturating_mul(2),
            ),
            request_body_timeout: Duration::from_secs(10),
            answer_timeout: request_timeout.saturating_add(ANSWER_SEND_TIMEOUT),
            max_message_bytes: crate::service::max_request_bytes(),
            http2_keepalive_interval: Duration::from_secs(30),
            http2_keepalive_timeout: Duration::from_secs(20),
            tcp_keepalive: Duration::from_secs(60),
            max_header_list_bytes: 16 << 10,
            stream_window_bytes: 64 << 10,
            connection_window_bytes: 256 << 10,
        }
    }

    fn builder(&self) -> http2::Builder<TokioExecutor> {
        let mut builder = http2::Builder::new(TokioExecutor::new());
        builder
            .timer(TokioTimer::new())
            .max_concurrent_streams(self.max_concurrent_streams)
            .keep_alive_interval(self.http2_keepalive_interval)
            .keep_alive_timeout(self.http2_keepalive_timeout)
            .max_header_list_size(self.max_header_list_bytes)
            .initial_stream_window_size(self.stream_window_bytes)
            .initial_connection_window_size(self.connection_window_bytes);
        builder
    }
}

/// What every connection's task shares.
struct Server {
    routes: TowerToHyperService<Routes>,
    tls: Option<Arc<ReloadingTls>>,
    limits: GrpcLimits,
    budget: RequestBudget,
    builder: http2::Builder<TokioExecutor>,
}

/// Serves `routes` on `listener`, over TLS with `tls`'s configuration of the moment if given,
/// until `shutdown` resolves; then stops accepting, closes every connection gracefully
/// (GOAWAY) and waits for them (the caller bounds that wait).
pub async fn serve(
    listener: TcpListener,
    routes: Routes,
    tls: Option<Arc<ReloadingTls>>,
    limits: GrpcLimits,
    shutdown: impl Future<Output = ()>,
) {
    let connections = Connections::new(
        "grpc",
        limits.max_connections,
        limits.max_connections_per_peer,
    );
    let server = Arc::new(Server {
        routes: TowerToHyperService::new(routes.prepare()),
        tls,
        budget: RequestBudget::new(
            limits.max_request_bytes_in_flight,
            limits.max_message_bytes,
            limits.request_body_timeout,
        ),
        builder: limits.builder(),
        limits,
    });
    super::accept(
        "gRPC",
        &listener,
        &connections,
        limits.tcp_keepalive,
        shutdown,
        |stream, peer, admitted| {
            tokio::spawn(connection(stream, peer, admitted, Arc::clone(&server)));
        },
    )
    .await;
    drop(listener);
    server.budget.stop();
    connections.close_all();
    connections.closed().await;
}

/// One connection's life: its TLS handshake if any, then HTTP/2 until it ends or is closed.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    connection: Connection,
    server: Arc<Server>,
) {
    let Some(tls) = &server.tls else {
        return serve_http2(stream, peer, connection, &server).await;
    };
    let deadline = Instant::now() + server.limits.handshake_timeout;
    let handshake = TlsAcceptor::from(tls.config()).accept(stream);
    let handshake = tokio::select! {
        handshake = tokio::time::timeout_at(deadline, handshake) => handshake,
        () = told_to_close(&connection) => return,
    };
    match handshake {
        Ok(Ok(stream)) => serve_http2(stream, peer, connection, &server).await,
        Ok(Err(error)) => tracing::debug!(target: "admit_scaler", %peer, "TLS handshake: {error}"),
        Err(_) => tracing::debug!(target: "admit_scaler", %peer, "TLS handshake timed out"),
    }
}

/// Resolves once `connection` is told to close.
async fn told_to_close(connection: &Connection) {
    loop {
        let changed = connection.changed();
        if connection.snapshot().closing {
            return;
        }
        changed.await;
    }
}

/// Serves HTTP/2 on `io` until the peer closes, the connection has been idle too long, an
/// answer is not sent by its deadline, or it is told to close; then closes it gracefully.
async fn serve_http2<IO>(io: IO, peer: SocketAddr, connection: Connection, server: &Server)
where
    IO: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let service = ConnectionService {
        routes: server.routes.clone(),
        tracker: connection.tracker(),
        budget: server.budget.connection(peer.ip()),
        request_timeout: server.limits.request_timeout,
        answer_timeout: server.limits.answer_timeout,
    };
    let mut served = pin!(server.builder.serve_connection(TokioIo::new(io), service));
    let limits = &server.limits;
    loop {
        let changed = connection.changed();
        let now = connection.snapshot();
        if now.closing {
            break;
        }
        let idle_until = (now.in_flight == 0).then(|| {
            now.since
                + if now.used {
                    limits.idle_timeout
                } else {
                    limits.handshake_timeout
                }
        });
        let clock = Instant::now();
        if idle_until.is_some_and(|until| until <= clock) {
            tracing::debug!(target: "admit_scaler", %peer, used = now.used, "closing an idle gRPC connection");
            break;
        }
        if now
            .answer_deadline
            .is_some_and(|deadline| deadline <= clock)
        {
            tracing::debug!(
                target: "admit_scaler",
                %peer,
                "closing a gRPC connection: an answer not sent within {:?} of its request",
                limits.answer_timeout
            );
            break;
        }
        tokio::select! {
            ended = &mut served => return ended_with(peer, ended),
            () = changed => {}
            () = sleep_until(earliest(idle_until, now.answer_deadline)) => {}
        }
    }
    let now = connection.snapshot();
    if !now.used && now.in_flight == 0 {
        // Nothing was ever asked on it, and it may still be in its handshake, which a GOAWAY
        // does not end: drop it.
        return;
    }
    served.as_mut().graceful_shutdown();
    let goaway = Instant::now();
    // It goes a grace after it is idle, or after an answer's deadline (an answer its client
    // does not take would keep it forever).
    loop {
        let changed = connection.changed();
        let now = connection.snapshot();
        let from = if now.in_flight == 0 {
            Some(now.since)
        } else {
            now.answer_deadline
        };
        let give_up = from.map(|from| from.max(goaway) + CLOSE_GRACE);
        tokio::select! {
            ended = &mut served => return ended_with(peer, ended),
            () = changed => {}
            () = sleep_until(give_up) => return,
        }
    }
}

/// The earlier of two times, either of which may be none.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn ended_with(peer: SocketAddr, ended: Result<(), hyper::Error>) {
    if let Err(error) = ended {
        tracing::debug!(target: "admit_scaler", %peer, "gRPC connection: {error}");
    }
}

/// One connection's requests: each counted in flight until its answer ends (a unary one due
/// within the answer timeout), charged to the budget until its handler answers, and given the
/// request timeout.
#[derive(Clone)]
struct ConnectionService {
    routes: TowerToHyperService<Routes>,
    tracker: RequestTracker,
    budget: ConnectionBudget,
    request_timeout: Duration,
    answer_timeout: Duration,
}

/// Whether `path` names a server-streaming method, whose answer has no deadline.
fn streams(path: &str) -> bool {
    path.strip_prefix('/')
        .and_then(|path| path.strip_prefix(crate::proto::external_scaler_server::SERVICE_NAME))
        .and_then(|path| path.strip_prefix('/'))
        == Some(STREAMING_METHOD)
}

impl hyper::service::Service<http::Request<Incoming>> for ConnectionService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, request: http::Request<Incoming>) -> Self::Future {
        let deadline = if streams(request.uri().path()) {
            None
        } else {
            Instant::now().checked_add(self.answer_timeout)
        };
        let in_flight = self.tracker.start(deadline);
        let charged = self.budget.charge(request);
        let routes = self.routes.clone();
        let request_timeout = self.request_timeout;
        Box::pin(async move {
            let response = match charged {
                Err(status) => status.into_http(),
                Ok((request, held)) => {
                    let (head, body) = request.into_parts();
                    let answered = tokio::time::timeout(request_timeout, async move {
                        let body = body.started().await;
                        routes.call(http::Request::from_parts(head, body)).await
                    })
                    .await;
                    drop(held);
                    match answered {
                        Ok(Ok(response)) => response,
                        Ok(Err(never)) => match never {},
                        Err(_) => Status::cancelled("Timeout expired").into_http(),
                    }
                }
            };
            // In flight until its answer is sent (for `StreamIsActive`, until the stream ends).
            Ok(response.map(|body| Body::new(in_flight.until_sent(body))))
        })
    }
}
