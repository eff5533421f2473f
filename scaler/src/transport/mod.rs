//! The scaler's network edges and their limits: the gRPC server ([`grpc`]), gRPC over TLS
//! with certificates that rotate ([`tls`]), and the HTTP side for metrics and probes
//! ([`http`]). Both servers count and cap their connections, in all and per peer address,
//! closing an idle one to admit a new one or refusing the new one when none is idle, and give
//! each answer a deadline; the gRPC server also charges its requests to a budget of bytes.

mod budget;
mod connections;
pub mod grpc;
pub mod http;
pub mod tls;

use std::net::SocketAddr;
use std::pin::pin;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use self::connections::{Connection, Connections};

/// How often a server's gauge of open connections is refreshed.
const PUBLISH_PERIOD: Duration = Duration::from_secs(15);

/// Accepts connections on `listener` until `shutdown` resolves, and hands each one
/// `connections` admits (at a cap, an idle one is closed to make room, or the newcomer is
/// refused, dropped at once) to `serve`, with TCP keepalive after `keepalive_idle` and no Nagle
/// delay. `server` names it in the logs. Refreshes the gauge of open connections meanwhile.
async fn accept(
    server: &str,
    listener: &TcpListener,
    connections: &Connections,
    keepalive_idle: Duration,
    shutdown: impl Future<Output = ()>,
    mut serve: impl FnMut(TcpStream, SocketAddr, Connection),
) {
    let mut shutdown = pin!(shutdown);
    let mut publish = tokio::time::interval(PUBLISH_PERIOD);
    loop {
        let accepted = tokio::select! {
            biased;
            () = &mut shutdown => return,
            _ = publish.tick() => {
                connections.publish();
                continue;
            }
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors, say: wait rather than spin.
                tracing::warn!(target: "admit_scaler", "accepting a {server} connection: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(admitted) = connections.admit(peer.ip()) else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tcp_keepalive(&stream, keepalive_idle);
        serve(stream, peer, admitted);
    }
}

/// Turns on TCP keepalive, probing after `idle` without traffic: a peer that vanished without
/// closing (a node gone, a dropped NAT entry) is noticed and its connection released.
fn tcp_keepalive(stream: &TcpStream, idle: Duration) {
    let keepalive = socket2::TcpKeepalive::new().with_time(idle).with_interval(
        idle.min(Duration::from_secs(10))
            .max(Duration::from_secs(1)),
    );
    if let Err(error) = socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive) {
        tracing::debug!(target: "admit_scaler", "TCP keepalive: {error}");
    }
}

/// Sleeps until `until`, or forever.
async fn sleep_until(until: Option<Instant>) {
    match until {
        Some(until) => tokio::time::sleep_until(until).await,
        None => std::future::pending().await,
    }
}
