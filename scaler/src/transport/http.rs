//! The HTTP side (`/metrics`, `/healthz`, `/readyz`): HTTP/1.1 with a bounded number of
//! connections and a deadline for each request head.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::tcp_keepalive;

/// What one HTTP connection may hold.
#[derive(Clone, Copy, Debug)]
pub struct HttpLimits {
    /// A request head (or, between requests, the next one) not read by then closes the
    /// connection: a client that sends nothing, or a byte a second, is dropped.
    pub header_read_timeout: Duration,
    /// The most connections open at once; further ones wait in the listener's backlog.
    pub max_connections: usize,
    /// TCP keepalive on accepted connections (idle time before the first probe).
    pub tcp_keepalive: Duration,
}

impl Default for HttpLimits {
    /// 10 s for a request head, 64 connections, TCP keepalive after 60 s.
    fn default() -> Self {
        HttpLimits {
            header_read_timeout: Duration::from_secs(10),
            max_connections: 64,
            tcp_keepalive: Duration::from_secs(60),
        }
    }
}

/// The smallest read buffer hyper accepts: request heads are at most this long.
const MAX_HEAD_BYTES: usize = 8192;

/// Serves `router` on `listener` until `shutdown` resolves, then waits for the requests in
/// flight (the caller bounds that wait).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    shutdown: impl Future<Output = ()>,
) {
    let connections = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&connections).acquire_owned() => permit,
            () = &mut shutdown => break,
        };
        let Ok(permit) = permit else { break };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(target: "admit_scaler", "accepting an HTTP connection: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        tcp_keepalive(&stream, limits.tcp_keepalive);
        let connection = builder.serve_connection(
            TokioIo::new(stream),
            TowerToHyperService::new(router.clone()),
        );
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
