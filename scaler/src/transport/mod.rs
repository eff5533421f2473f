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

use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;

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
