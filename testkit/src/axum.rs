//! axum servers on loopback, in the two ways a router can be served. They differ in when axum
//! turns handlers into services (and so applies route layers): [`serve_router`] does it once
//! per connection, [`serve_service`] leaves it to the router on every request.

use std::convert::Infallible;
use std::future::IntoFuture;

use axum::Router;
use axum::extract::Request;
use axum::response::IntoResponse;
use tower::ServiceExt;
use tower_service::Service;

use crate::server::{TestServer, loopback};

/// Serves `router` the ordinary way, `axum::serve(listener, router)`: axum's make-service for
/// `Router` calls `Router::with_state` for each connection.
///
/// # Panics
///
/// Outside a tokio runtime, or if no loopback port can be bound.
pub async fn serve_router(router: Router) -> TestServer {
    let (listener, addr) = loopback().await;
    TestServer::start(addr, move |shutdown| {
        axum::serve(listener, router)
            .with_graceful_shutdown(shutdown)
            .into_future()
    })
}

/// Serves any request service through `axum::ServiceExt::into_make_service`: a `Router`
/// wrapped by a layer is no longer a `Router`, and a `Router` served this way is one plain
/// service shared by every connection. Its responses become axum's (`IntoResponse`), as
/// `axum::serve` requires: a layer around the router may answer with a body of its own.
///
/// # Panics
///
/// Outside a tokio runtime, or if no loopback port can be bound.
pub async fn serve_service<S>(service: S) -> TestServer
where
    S: Service<Request, Error = Infallible> + Clone + Send + 'static,
    S::Response: IntoResponse,
    S::Future: Send,
{
    let (listener, addr) = loopback().await;
    let service = service.map_response(IntoResponse::into_response);
    let make_service = axum::ServiceExt::<Request>::into_make_service(service);
    TestServer::start(addr, move |shutdown| {
        axum::serve(listener, make_service)
            .with_graceful_shutdown(shutdown)
            .into_future()
    })
}

#[cfg(test)]
mod tests {
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;
    use crate::wait::bounded;

    /// The whole response to `GET /` on a fresh connection that asks to be closed.
    async fn get_root(server: &TestServer) -> String {
        let mut stream = bounded("connect", TcpStream::connect(server.addr()))
            .await
            .expect("connect to the test server");
        let request = b"GET / HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n";
        bounded("send", stream.write_all(request))
            .await
            .expect("send the request");
        let mut response = String::new();
        bounded("read", stream.read_to_string(&mut response))
            .await
            .expect("read the response");
        response
    }

    fn app() -> Router {
        Router::new().route("/", get(|| async { "hello" }))
    }

    #[tokio::test]
    async fn serve_router_answers_and_shuts_down() {
        let server = serve_router(app()).await;
        let response = get_root(&server).await;
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(response.ends_with("\r\n\r\nhello"), "{response}");
        server.shutdown().await;
    }

    #[tokio::test]
    async fn serve_service_answers_and_shuts_down() {
        let server = serve_service(app()).await;
        let response = get_root(&server).await;
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(response.ends_with("\r\n\r\nhello"), "{response}");
        server.shutdown().await;
    }
}
