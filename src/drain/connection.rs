//! Counting connections by their IO object: [`Drain::track`] and [`Tracked`].

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::{ConnectionGuard, Drain};

impl Drain {
    /// Wraps an accepted connection's IO so that it counts as an open connection (in
    /// [`snapshot`](Drain::snapshot) and [`Outcome`](super::Outcome)) for as long as the IO
    /// lives, upgrades (WebSockets) included: the count lives in the socket, not in a
    /// per-connection service that an upgrade outlives. For hand-written hyper or tonic accept
    /// loops; with axum, wrap the listener instead (`Drain::listener`, `axum` feature).
    ///
    /// ```
    /// use admit::drain::Drain;
    /// use tokio::io::{AsyncReadExt, AsyncWriteExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let drain = Drain::default();
    /// let (client, server) = tokio::io::duplex(64);
    /// let mut server = drain.track(server);
    /// assert_eq!(drain.snapshot().connections, 1);
    ///
    /// let mut client = client;
    /// client.write_all(b"ping").await?;
    /// let mut buf = [0; 4];
    /// server.read_exact(&mut buf).await?;
    /// assert_eq!(&buf, b"ping");
    ///
    /// drop(server);
    /// assert_eq!(drain.snapshot().connections, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn track<IO>(&self, io: IO) -> Tracked<IO>
    where
        IO: AsyncRead + AsyncWrite,
    {
        Tracked {
            io,
            _guard: self.connection(),
        }
    }
}

pin_project! {
    /// An IO object counted as an open connection until it drops; see [`Drain::track`].
    ///
    /// Reads and writes go straight to the inner IO. There is no `into_inner`: the count
    /// would end while the socket lives on. Reach the IO with [`get_ref`](Self::get_ref) and
    /// [`get_mut`](Self::get_mut) (socket options, peer address).
    #[derive(Debug)]
    pub struct Tracked<IO> {
        // Declared first, so dropped first: the socket closes before the count ends.
        #[pin]
        io: IO,
        _guard: ConnectionGuard,
    }
}

impl<IO> Tracked<IO> {
    /// The inner IO.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    /// The inner IO, mutably.
    pub fn get_mut(&mut self) -> &mut IO {
        &mut self.io
    }

    /// The inner IO, pinned.
    pub fn get_pin_mut(self: Pin<&mut Self>) -> Pin<&mut IO> {
        self.project().io
    }
}

impl<IO: AsyncRead> AsyncRead for Tracked<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.project().io.poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite> AsyncWrite for Tracked<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use std::io::{self, IoSlice};
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

    use super::Tracked;
    use crate::drain::{Drain, Outcome};

    fn assert_io<T: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static>() {}

    #[test]
    fn tracked_is_an_unpin_send_io() {
        assert_io::<Tracked<tokio::io::DuplexStream>>();
        assert_io::<Tracked<tokio::net::TcpStream>>();
    }

    #[tokio::test]
    async fn counts_while_alive_and_forwards_both_ways() {
        let drain = Drain::default();
        let (client, server) = tokio::io::duplex(64);
        let (mut client, mut server) = (drain.track(client), drain.track(server));
        assert_eq!(drain.snapshot().connections, 2);

        client.write_all(b"hello").await.unwrap();
        client.flush().await.unwrap();
        let mut buf = [0; 5];
        server.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hello");

        let bufs = [IoSlice::new(b"ab"), IoSlice::new(b"cd")];
        let written = server.write_vectored(&bufs).await.unwrap();
        server.write_all(&b"abcd"[written..]).await.unwrap();
        let mut buf = [0; 4];
        client.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"abcd");

        // Shutdown reaches the peer as EOF; the connection still counts until dropped.
        server.shutdown().await.unwrap();
        assert_eq!(client.read(&mut buf).await.unwrap(), 0);
        assert_eq!(drain.snapshot().connections, 2);
        drop(server);
        assert_eq!(drain.snapshot().connections, 1);
        drop(client);
        assert_eq!(drain.snapshot().connections, 0);
    }

    /// An IO that takes every slice of a vectored write at once and says so; reads are EOF.
    #[derive(Debug, Default)]
    struct Vectored {
        written: Vec<u8>,
        flushed: bool,
        shut: bool,
    }

    impl AsyncRead for Vectored {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    impl AsyncWrite for Vectored {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.written.extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.flushed = true;
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.shut = true;
            Poll::Ready(Ok(()))
        }

        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let mut total = 0;
            for buf in bufs {
                self.written.extend_from_slice(buf);
                total += buf.len();
            }
            Poll::Ready(Ok(total))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }
    }

    #[tokio::test]
    async fn vectored_writes_flush_and_shutdown_reach_the_inner_io() {
        let drain = Drain::default();
        let mut tracked = drain.track(Vectored::default());
        assert!(tracked.is_write_vectored());
        // The trait's default would write the first slice only.
        let bufs = [IoSlice::new(b"ab"), IoSlice::new(b"cd")];
        assert_eq!(tracked.write_vectored(&bufs).await.unwrap(), 4);
        tracked.flush().await.unwrap();
        tracked.shutdown().await.unwrap();
        let mut rest = Vec::new();
        assert_eq!(tracked.read_to_end(&mut rest).await.unwrap(), 0);
        let inner = tracked.get_ref();
        assert_eq!(inner.written, b"abcd");
        assert!(inner.flushed && inner.shut);
        tracked.get_mut().written.clear();
        assert!(std::pin::pin!(tracked).get_pin_mut().written.is_empty());
        assert_eq!(drain.snapshot().connections, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn open_connections_are_reported_not_awaited() {
        let drain = Drain::default();
        let (client, _server) = tokio::io::duplex(64);
        let client = drain.track(client);
        drain.start_now();
        assert_eq!(drain.finished().await, Outcome::Drained { connections: 1 });
        drop(client);
        assert_eq!(drain.snapshot().connections, 0);
    }
}
