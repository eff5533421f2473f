//! A server task on a loopback port, and the handle that stops it.
//!
//! [`crate::axum`] and [`crate::tonic`] start the servers the end-to-end tests use;
//! [`TestServer::start`] runs any other server that can take a shutdown signal.

use std::fmt::Debug;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::wait::bounded;

/// A server task on a loopback port.
///
/// Dropping the handle asks the server to stop gracefully and does not wait;
/// [`shutdown`](TestServer::shutdown) asks and waits.
#[derive(Debug)]
pub struct TestServer {
    addr: SocketAddr,
    /// Sending, or dropping the sender, completes the server's [`Shutdown`].
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl TestServer {
    /// Runs `serve(shutdown)` in a tokio task: the server listening on `addr`, which must stop
    /// once `shutdown` completes. The task fails (panics) if the server returns an error.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn start<F, Fut, E>(addr: SocketAddr, serve: F) -> TestServer
    where
        F: FnOnce(Shutdown) -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Debug,
    {
        let (stop, signal) = oneshot::channel();
        let serving = serve(Shutdown(signal));
        let task = tokio::spawn(async move {
            serving.await.expect("the server runs");
        });
        TestServer { addr, stop, task }
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's base URL, `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Asks the server to stop and waits until its task has ended.
    ///
    /// # Panics
    ///
    /// If the server failed (the task's panic is resumed here), or did not stop within
    /// [`NET_TIMEOUT`](crate::wait::NET_TIMEOUT).
    pub async fn shutdown(self) {
        let TestServer { addr, stop, task } = self;
        // An error means the server has already stopped: its `Shutdown` is gone.
        let _ = stop.send(());
        let ended = bounded(&format!("stopping the server on {addr}"), task).await;
        if let Err(error) = ended {
            match error.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                Err(error) => panic!("the server on {addr} did not end: {error}"),
            }
        }
    }
}

/// Completes when the server's [`TestServer`] asks it to stop, or is dropped.
#[derive(Debug)]
pub struct Shutdown(oneshot::Receiver<()>);

impl Future for Shutdown {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Either way the handle is done with the server: a sent `()` or a dropped sender.
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

/// A listener on a free loopback port (`127.0.0.1:0`), and its address.
///
/// # Panics
///
/// If binding fails or takes longer than [`NET_TIMEOUT`](crate::wait::NET_TIMEOUT).
pub(crate) async fn loopback() -> (TcpListener, SocketAddr) {
    let listener = bounded("bind", TcpListener::bind("127.0.0.1:0"))
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("the bound address");
    (listener, addr)
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// A server that only waits for its shutdown signal, and records that it saw it.
    fn idle_server(stopped: &Arc<AtomicBool>) -> TestServer {
        let stopped = stopped.clone();
        let addr = SocketAddr::from(([127, 0, 0, 1], 9));
        TestServer::start(addr, |shutdown| async move {
            shutdown.await;
            stopped.store(true, Ordering::SeqCst);
            Ok::<(), Infallible>(())
        })
    }

    #[tokio::test]
    async fn shutdown_signals_the_server_and_waits_for_it() {
        let stopped = Arc::new(AtomicBool::new(false));
        let server = idle_server(&stopped);
        assert_eq!(server.url(), "http://127.0.0.1:9");
        server.shutdown().await;
        assert!(stopped.load(Ordering::SeqCst), "the server saw the signal");
    }

    #[tokio::test]
    async fn dropping_the_handle_signals_the_server() {
        let stopped = Arc::new(AtomicBool::new(false));
        drop(idle_server(&stopped));
        crate::wait::eventually(
            "the server stops",
            || stopped.load(Ordering::SeqCst),
            || "still serving".to_owned(),
        )
        .await;
    }

    #[tokio::test]
    #[should_panic(expected = "the server runs: \"refused\"")]
    async fn shutdown_reports_a_failed_server() {
        let addr = SocketAddr::from(([127, 0, 0, 1], 9));
        let server = TestServer::start(addr, |_| async { Err("refused") });
        server.shutdown().await;
    }
}
