//! The gRPC server's limits: how long an RPC may take, how many streams a connection may
//! open, and how a connection whose peer vanished is noticed.

use std::time::Duration;

use tokio::net::TcpListener;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;

/// Streams one connection may have open beyond one per trigger: KEDA sends every
/// ScaledObject's calls, and every `StreamIsActive` stream, over one connection.
pub const STREAMS_BEYOND_TRIGGERS: u32 = 256;

/// What a gRPC connection may hold and how long its parts may take.
#[derive(Clone, Copy, Debug)]
pub struct GrpcLimits {
    /// The longest an RPC may take to answer (the head of a stream's answer, for
    /// `StreamIsActive`); past it the RPC fails with `CANCELLED`.
    pub request_timeout: Duration,
    /// The most streams (RPCs in flight and open `StreamIsActive` streams) per connection.
    pub max_concurrent_streams: u32,
    /// HTTP/2 pings on a connection without traffic, every this long...
    pub http2_keepalive_interval: Duration,
    /// ...and how long an answer may take before the connection, and its streams, are closed.
    pub http2_keepalive_timeout: Duration,
    /// TCP keepalive on accepted connections (idle time before the first probe).
    pub tcp_keepalive: Duration,
    /// The largest header list a request may carry.
    pub max_header_list_bytes: u32,
}

impl GrpcLimits {
    /// The scaler's limits for up to `max_triggers` triggers and RPCs of at most
    /// `request_timeout`: pings every 30 s answered within 20 s, TCP keepalive after 60 s,
    /// headers up to 16 KiB, and `max_triggers` + [`STREAMS_BEYOND_TRIGGERS`] streams.
    pub fn new(max_triggers: usize, request_timeout: Duration) -> Self {
        let triggers = u32::try_from(max_triggers).unwrap_or(u32::MAX);
        GrpcLimits {
            request_timeout,
            max_concurrent_streams: triggers.saturating_add(STREAMS_BEYOND_TRIGGERS),
            http2_keepalive_interval: Duration::from_secs(30),
            http2_keepalive_timeout: Duration::from_secs(20),
            tcp_keepalive: Duration::from_secs(60),
            max_header_list_bytes: 16 << 10,
        }
    }

    /// A tonic server builder with these limits.
    pub fn server(&self) -> Server {
        Server::builder()
            .timeout(self.request_timeout)
            .max_concurrent_streams(self.max_concurrent_streams)
            .http2_keepalive_interval(Some(self.http2_keepalive_interval))
            .http2_keepalive_timeout(Some(self.http2_keepalive_timeout))
            .http2_max_header_list_size(self.max_header_list_bytes)
    }

    /// The plain-text connections of `listener`, with TCP keepalive and no Nagle delay.
    pub fn incoming(&self, listener: TcpListener) -> TcpIncoming {
        TcpIncoming::from(listener)
            .with_nodelay(Some(true))
            .with_keepalive(Some(self.tcp_keepalive))
    }
}
