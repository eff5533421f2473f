//! tonic servers on loopback. The test builds the server itself (`Server::builder()`, its
//! layers and services) and hands over the future of `serve_with_incoming(incoming)`:
//!
//! ```no_run
//! # async fn example(routes: tonic::service::Routes) {
//! let (addr, incoming) = admit_testkit::tonic::listen().await;
//! let serve = tonic::transport::Server::builder()
//!     .add_routes(routes)
//!     .serve_with_incoming(incoming);
//! let server = admit_testkit::tonic::spawn_server(addr, serve);
//! # }
//! ```

use std::future::Future;
use std::net::SocketAddr;

use tonic::transport::Channel;
use tonic::transport::server::TcpIncoming;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

use crate::server::{TestServer, loopback};
use crate::wait::bounded;

/// A listener on a free loopback port, as `serve_with_incoming` takes it, and its address.
///
/// # Panics
///
/// Outside a tokio runtime, or if no loopback port can be bound.
pub async fn listen() -> (SocketAddr, TcpIncoming) {
    let (listener, addr) = loopback().await;
    (addr, TcpIncoming::from(listener))
}

/// Runs `serve` (a tonic server's `serve_with_incoming` future, listening on `addr`) in a task.
///
/// That future takes no shutdown signal, so stopping the returned server drops it: the server
/// stops accepting connections, and those already open close with their clients.
///
/// # Panics
///
/// Outside a tokio runtime.
pub fn spawn_server<F>(addr: SocketAddr, serve: F) -> TestServer
where
    F: Future<Output = Result<(), tonic::transport::Error>> + Send + 'static,
{
    TestServer::start(addr, |shutdown| async move {
        tokio::select! {
            served = serve => served,
            () = shutdown => Ok(()),
        }
    })
}

/// A channel connected to `server`, within the test kit's bound.
///
/// # Panics
///
/// If it cannot connect: a test has nothing to do without its server.
pub async fn connect(server: &TestServer) -> Channel {
    let endpoint = Channel::from_shared(server.url()).expect("a valid URI");
    bounded("connect", endpoint.connect())
        .await
        .expect("connect to the test server")
}

/// A gRPC health service that calls `check` with each check it receives and answers SERVING;
/// `watch` is unimplemented. For tests whose server only needs to answer checks.
pub fn check_only<F>(check: F) -> HealthServer<CheckOnly<F>>
where
    F: Fn(&tonic::Request<HealthCheckRequest>) + Send + Sync + 'static,
{
    HealthServer::new(CheckOnly(check))
}

/// The service [`check_only`] serves.
#[derive(Debug)]
pub struct CheckOnly<F>(F);

#[tonic::async_trait]
impl<F> Health for CheckOnly<F>
where
    F: Fn(&tonic::Request<HealthCheckRequest>) + Send + Sync + 'static,
{
    type WatchStream = tonic::codegen::BoxStream<HealthCheckResponse>;

    async fn check(
        &self,
        request: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<HealthCheckResponse>, tonic::Status> {
        (self.0)(&request);
        // 1: SERVING.
        Ok(tonic::Response::new(HealthCheckResponse { status: 1 }))
    }

    async fn watch(
        &self,
        _: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<Self::WatchStream>, tonic::Status> {
        Err(tonic::Status::unimplemented("this server only checks"))
    }
}

#[cfg(test)]
mod tests {
    use tokio::net::TcpStream;

    use super::*;
    use crate::wait::bounded;

    #[tokio::test]
    async fn a_spawned_server_accepts_and_shuts_down() {
        let (addr, incoming) = listen().await;
        assert!(addr.ip().is_loopback(), "{addr}");
        let serve = tonic::transport::Server::builder()
            .add_routes(tonic::service::Routes::default())
            .serve_with_incoming(incoming);
        let server = spawn_server(addr, serve);
        bounded("connect", TcpStream::connect(server.addr()))
            .await
            .expect("the server accepts connections");
        server.shutdown().await;
    }
}
