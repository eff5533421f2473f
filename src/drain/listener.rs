//! An axum listener whose connections count: [`Drain::listener`] and [`DrainListener`].

use std::io;

use axum::serve::Listener;

use super::{Drain, Tracked};

impl Drain {
    /// Wraps an [`axum::serve::Listener`] so that each accepted connection counts as open
    /// until its socket closes, upgrades included (see [`track`](Drain::track)).
    ///
    /// Hand [`stop_accepting`](Drain::stop_accepting) to axum's graceful shutdown, and race
    /// the server against [`finished`](Drain::finished): axum waits for every connection
    /// without a timeout, and returning from `main` closes what is left.
    ///
    /// ```no_run
    /// use admit::drain::{Drain, DrainLayer};
    /// use axum::Router;
    /// use axum::routing::{get, get_service};
    ///
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let drain = Drain::default();
    /// let app = Router::new()
    ///     .route("/", get(|| async { "hello" }))
    ///     .layer(DrainLayer::new(drain.clone()))
    ///     // Readiness outside the drain layer, so that it answers while draining.
    ///     .route("/readyz", get_service(drain.readiness()));
    /// let tcp = tokio::net::TcpListener::bind("0.0.0.0:8080").await?;
    /// let server = axum::serve(drain.listener(tcp), app)
    ///     .with_graceful_shutdown(drain.stop_accepting());
    /// tokio::select! {
    ///     served = server => served?,
    ///     outcome = drain.finished() => eprintln!("drain: {outcome:?}"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// For `ConnectInfo`, tap the wrapped listener (`axum::serve::ListenerExt::tap_io`): axum
    /// gives the address of a `TapIo` over any listener.
    #[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
    pub fn listener<L: Listener>(&self, listener: L) -> DrainListener<L> {
        DrainListener {
            listener,
            drain: self.clone(),
        }
    }
}

/// An [`axum::serve::Listener`] whose accepted IOs are [`Tracked`]; see [`Drain::listener`].
#[derive(Debug)]
pub struct DrainListener<L> {
    listener: L,
    drain: Drain,
}

impl<L> DrainListener<L> {
    /// The wrapped listener.
    pub fn get_ref(&self) -> &L {
        &self.listener
    }

    /// The wrapped listener, mutably.
    pub fn get_mut(&mut self) -> &mut L {
        &mut self.listener
    }

    /// The wrapped listener; connections accepted earlier still count.
    pub fn into_inner(self) -> L {
        self.listener
    }
}

impl<L: Listener> Listener for DrainListener<L> {
    type Io = Tracked<L::Io>;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (io, addr) = self.listener.accept().await;
        (self.drain.track(io), addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use axum::serve::{Listener, ListenerExt};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use crate::drain::Drain;

    #[tokio::test]
    async fn accepted_connections_count_until_dropped() {
        let drain = Drain::default();
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut listener = drain.listener(tcp);
        let addr = listener.local_addr().unwrap();
        assert_eq!(listener.get_ref().local_addr().unwrap(), addr);

        let mut client = TcpStream::connect(addr).await.unwrap();
        let (mut server, peer) = Listener::accept(&mut listener).await;
        assert_eq!(peer, client.local_addr().unwrap());
        assert_eq!(drain.snapshot().connections, 1);

        client.write_all(b"ping").await.unwrap();
        let mut buf = [0; 4];
        server.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
        server.write_all(b"pong").await.unwrap();
        client.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pong");

        drop(server);
        assert_eq!(drain.snapshot().connections, 0);
        // The server's side closed: the client reads EOF.
        assert_eq!(client.read(&mut buf).await.unwrap(), 0);
        // The listener lives on without the drain's count.
        assert_eq!(listener.into_inner().local_addr().unwrap(), addr);
    }

    /// axum serves through it, upgrades and all; `tap_io` gives `ConnectInfo` its address.
    #[tokio::test]
    async fn axum_serves_through_it_with_connect_info() {
        use axum::Router;
        use axum::extract::ConnectInfo;
        use axum::routing::get;

        let drain = Drain::default();
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let listener = drain.listener(tcp).tap_io(|_| ());
        let addr = listener.local_addr().unwrap();
        let app = Router::new().route(
            "/",
            get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }),
        );
        let server = tokio::spawn(
            axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .with_graceful_shutdown(drain.stop_accepting())
            .into_future(),
        );

        let mut client = TcpStream::connect(addr).await.unwrap();
        client
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut response = String::new();
        client.read_to_string(&mut response).await.unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        let local = client.local_addr().unwrap().to_string();
        assert!(response.ends_with(&local), "{response}");
        drop(client);

        drain.start_now();
        server.await.unwrap().unwrap();
        assert_eq!(drain.snapshot().connections, 0);
    }
}
