//! The gRPC server's budget of request memory: what every request in flight holds, counted
//! against one global figure, refused with `RESOURCE_EXHAUSTED` past it.
//!
//! A request is charged, from its head until its handler answers, what serving it allocates
//! whatever its size: [`HEAD_COST`] while it waits for its body's first frame (its HTTP/2
//! stream and the server's future), [`REQUEST_COST`] in all once the frame arrives (tonic's
//! and the handler's futures, the decision it waits for); its header bytes; and
//! [`MESSAGE_COPIES`] times each message's length as its gRPC prefix announces it (tonic
//! reserves that much before the bytes arrive; then the request holds the decoded message and
//! the configuration parsed from it), at most the message limit (tonic refuses a longer one
//! at once). So a stream that announces a large message and never sends it holds no more than
//! it was charged.
//!
//! Until its body ends, a request is *in transit*, and what it was charged also counts against
//! its peer's share: a quarter of the budget for all the connections from one address. One
//! address that opens streams and never finishes their messages (or never sends them) thus
//! holds at most a quarter of the budget, and other addresses' requests still get in. A call
//! whose message arrives whole with its end, as KEDA's do, is in transit for a moment: even
//! thousands at once whose heads are read before their messages (after a reconnect, at each
//! HPA sync) fit in a share at [`HEAD_COST`] each.
//!
//! Nothing limits how much of the budget one address's requests take once their bodies have
//! ended: KEDA sends every call over one connection, so a share would refuse KEDA's own calls
//! waiting on a slow Prometheus. The budget is sized for those ([`for_waiting_calls`]); other
//! callers are kept out by the NetworkPolicy.
//!
//! A request body must also end within a deadline, or its RPC fails with `DEADLINE_EXCEEDED`
//! (not `CANCELLED`, which tonic takes for a client that went away), and once the server
//! stops, a body still in transit fails at once with `UNAVAILABLE`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Sleep;
use tonic::Status;

/// What serving one request holds besides its headers and message, in bytes. Measured on the
/// binary (`scaler/tests/edges_memory.rs`, debug and release builds alike): a `GetMetrics` of
/// KEDA's usual size (a 600-byte message) waiting for a slow Prometheus holds 15.5 KB when it
/// starts its trigger's decision (which waits for a slot), 11.1 to 11.9 KB when it joins one;
/// with the largest message (34 812 bytes), 63.7 KB. 16 KiB, with its message counted twice,
/// covers each: 17.9 KB charged for the usual call, 84 KB for the largest.
pub(super) const REQUEST_COST: usize = 16 << 10;

/// What a request holds while it waits for its body's first frame: its HTTP/2 stream and the
/// server's future, before tonic and the handler are called (measured: a tenth of a request
/// being decoded).
pub(super) const HEAD_COST: usize = 2 << 10;

/// How many times a message's length is charged: the bytes tonic buffers while the message
/// arrives, then the decoded request and the configuration parsed from it (measured: 1.46
/// times the largest message's length besides [`REQUEST_COST`]).
const MESSAGE_COPIES: usize = 2;

/// What the budget charges one of KEDA's usual calls, rounded up: [`REQUEST_COST`], grpc-go's
/// headers (under 512 bytes) and twice a message of under 1 KiB.
const USUAL_CALL: usize = 18 << 10;

/// A budget that holds `calls` of KEDA's usual calls at once ([`USUAL_CALL`] each), between
/// 1 MiB and 1 GiB.
pub(super) fn for_waiting_calls(calls: usize) -> usize {
    calls.saturating_mul(USUAL_CALL).clamp(1 << 20, 1 << 30)
}

/// The bytes of a gRPC message prefix: a compression flag and a big-endian `u32` length.
const PREFIX_BYTES: usize = 5;

/// The global budget: request bytes that may be held at once.
#[derive(Clone, Debug)]
pub(super) struct RequestBudget {
    global: Arc<Semaphore>,
    /// Each peer address's share for its requests in transit, while it has a connection.
    peers: Arc<Mutex<HashMap<IpAddr, Weak<Semaphore>>>>,
    bytes: usize,
    max_message: usize,
    body_timeout: Duration,
    /// Set when the server stops: bodies in transit fail.
    stopping: Arc<watch::Sender<bool>>,
}

impl RequestBudget {
    /// A budget of `bytes`, for messages of at most `max_message` bytes (larger ones are
    /// refused by the decoder, and charged as `max_message`), whose bodies must end within
    /// `body_timeout`.
    pub(super) fn new(bytes: usize, max_message: usize, body_timeout: Duration) -> Self {
        let bytes = bytes.clamp(1, Semaphore::MAX_PERMITS);
        RequestBudget {
            global: Arc::new(Semaphore::new(bytes)),
            peers: Arc::default(),
            bytes,
            max_message,
            body_timeout,
            stopping: Arc::new(watch::Sender::new(false)),
        }
    }

    /// The server stops: bodies in transit fail with `UNAVAILABLE`, so that their RPCs end.
    pub(super) fn stop(&self) {
        self.stopping.send_replace(true);
    }

    /// The budget as seen by one new connection from `peer`, with the share for the requests
    /// in transit of all the connections from that address.
    pub(super) fn connection(&self, peer: IpAddr) -> ConnectionBudget {
        let peer = canonical(peer);
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        let share = match peers.get(&peer).and_then(Weak::upgrade) {
            Some(share) => share,
            None => {
                // The addresses whose connections have all gone: a table at most as long as
                // the connections open.
                peers.retain(|_, share| share.strong_count() > 0);
                let share = Arc::new(Semaphore::new((self.bytes / 4).max(1)));
                peers.insert(peer, Arc::downgrade(&share));
                share
            }
        };
        ConnectionBudget {
            budget: self.clone(),
            share,
        }
    }

    /// The bytes not held now.
    #[cfg(test)]
    fn available(&self) -> usize {
        self.global.available_permits()
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is: one peer either way.
fn canonical(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(peer, IpAddr::V4),
        v4 => v4,
    }
}

/// The budget for one connection's requests.
#[derive(Clone, Debug)]
pub(super) struct ConnectionBudget {
    budget: RequestBudget,
    share: Arc<Semaphore>,
}

impl ConnectionBudget {
    /// Charges a request's head to the global budget and its peer's share: its body is
    /// charged as it arrives, to both until it ends. What is held globally is released once
    /// both the returned [`Held`] (keep it until the handler answers) and the body are dropped.
    ///
    /// # Errors
    ///
    /// `RESOURCE_EXHAUSTED` when the global budget or the peer's share cannot cover the head.
    pub(super) fn charge<B>(
        &self,
        request: http::Request<B>,
    ) -> Result<(http::Request<BudgetBody<B>>, Held), Status> {
        let cost = HEAD_COST.saturating_add(header_bytes(request.headers()));
        let exhausted = || exhausted(&self.budget);
        let global = acquire(&self.budget.global, cost).ok_or_else(exhausted)?;
        let share = acquire(&self.share, cost).ok_or_else(exhausted)?;
        let held = Held(Arc::new(Mutex::new(Some(global))));
        let charges = Charges {
            connection: self.clone(),
            held: held.clone(),
            charged: cost,
            share: Some(share),
            begun: false,
        };
        let body_timeout = self.budget.body_timeout;
        let max_message = self.budget.max_message;
        let mut stopping = self.budget.stopping.subscribe();
        let request = request.map(|inner| BudgetBody {
            inner,
            charges,
            framing: Framing::new(max_message),
            deadline: Box::pin(tokio::time::sleep(body_timeout)),
            stopping: Box::pin(async move {
                let _ = stopping.wait_for(|stopping| *stopping).await;
            }),
            body_timeout,
            done: false,
        });
        Ok((request, held))
    }
}

/// Takes `bytes` permits from `semaphore` at once, or none.
fn acquire(semaphore: &Arc<Semaphore>, bytes: usize) -> Option<OwnedSemaphorePermit> {
    let bytes = u32::try_from(bytes).ok()?;
    Arc::clone(semaphore).try_acquire_many_owned(bytes).ok()
}

fn exhausted(budget: &RequestBudget) -> Status {
    crate::telemetry::refused("request_bytes");
    Status::resource_exhausted(format!(
        "the scaler holds as many request bytes as it may ({} bytes, \
         --grpc-max-request-bytes-in-flight); retry later",
        budget.bytes
    ))
}

/// HTTP/2's measure of a header list: each name and value, plus 32 bytes.
fn header_bytes(headers: &HeaderMap) -> usize {
    headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 32)
        .sum()
}

/// A request's global charge: released when the handler's answer and the body are both gone.
#[derive(Clone, Debug)]
pub(super) struct Held(Arc<Mutex<Option<OwnedSemaphorePermit>>>);

impl Held {
    fn add(&self, permit: OwnedSemaphorePermit) {
        let mut held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match held.as_mut() {
            Some(held) => held.merge(permit),
            None => *held = Some(permit),
        }
    }
}

/// What a body's arrival is charged to.
#[derive(Debug)]
struct Charges {
    connection: ConnectionBudget,
    held: Held,
    /// What the request was charged so far: its head and the messages announced.
    charged: usize,
    /// As much of the peer's share, held until the body ends.
    share: Option<OwnedSemaphorePermit>,
    /// Whether the body's first frame came: the rest of [`REQUEST_COST`] is charged then.
    begun: bool,
}

impl Charges {
    /// Charges `bytes` more: to the global budget, and to the share while in transit.
    fn charge(&mut self, bytes: usize) -> Result<(), Status> {
        if bytes == 0 {
            return Ok(());
        }
        let exhausted = || exhausted(&self.connection.budget);
        let global = acquire(&self.connection.budget.global, bytes).ok_or_else(exhausted)?;
        if let Some(share) = self.share.as_mut() {
            share.merge(acquire(&self.connection.share, bytes).ok_or_else(exhausted)?);
        }
        self.held.add(global);
        self.charged = self.charged.saturating_add(bytes);
        Ok(())
    }

    /// The body's first frame came: the request is about to be decoded, and holds all of
    /// [`REQUEST_COST`] from now on.
    fn begin(&mut self) -> Result<(), Status> {
        if self.begun {
            return Ok(());
        }
        self.begun = true;
        self.charge(REQUEST_COST - HEAD_COST)
    }
}

/// Where a body is in its gRPC messages: in a prefix, or in a message's bytes.
#[derive(Debug)]
struct Framing {
    max_message: usize,
    prefix: [u8; PREFIX_BYTES],
    prefix_filled: usize,
    /// Bytes of the current message still to come.
    message_left: usize,
}

impl Framing {
    fn new(max_message: usize) -> Self {
        Framing {
            max_message,
            prefix: [0; PREFIX_BYTES],
            prefix_filled: 0,
            message_left: 0,
        }
    }

    /// Reads `data` and returns what the prefixes completed in it announce: each prefix's
    /// bytes and [`MESSAGE_COPIES`] times its message's length (at most the message limit).
    fn announced(&mut self, mut data: &[u8]) -> usize {
        let mut announced = 0_usize;
        while !data.is_empty() {
            if self.message_left > 0 {
                let skipped = self.message_left.min(data.len());
                self.message_left -= skipped;
                data = &data[skipped..];
                continue;
            }
            let taken = (PREFIX_BYTES - self.prefix_filled).min(data.len());
            self.prefix[self.prefix_filled..self.prefix_filled + taken]
                .copy_from_slice(&data[..taken]);
            self.prefix_filled += taken;
            data = &data[taken..];
            if self.prefix_filled == PREFIX_BYTES {
                self.prefix_filled = 0;
                let [_, a, b, c, d] = self.prefix;
                let length =
                    usize::try_from(u32::from_be_bytes([a, b, c, d])).unwrap_or(usize::MAX);
                self.message_left = length;
                // The decoder refuses a longer message as it reads the prefix, but its limit is
                // set apart from this one: charged as the longest, never more.
                announced = announced
                    .saturating_add(PREFIX_BYTES)
                    .saturating_add(MESSAGE_COPIES * length.min(self.max_message));
            }
        }
        announced
    }
}

pin_project_lite::pin_project! {
    /// A request body charged to the budget as it arrives, with a deadline to end.
    pub(super) struct BudgetBody<B> {
        #[pin]
        inner: B,
        charges: Charges,
        framing: Framing,
        deadline: Pin<Box<Sleep>>,
        stopping: Pin<Box<dyn Future<Output = ()> + Send>>,
        body_timeout: Duration,
        done: bool,
    }
}

impl<B> BudgetBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    /// Waits for the body's first frame (or its end, or its failure) and returns the body with
    /// that frame in front again. Handing the request to tonic only then means that its
    /// decoding buffer and the handler are allocated once there is something to decode: a head
    /// whose message does not come (or waits behind others for flow-control window) holds its
    /// stream and this future alone, a tenth of what a request being decoded holds.
    pub(super) async fn started(mut self) -> Started<B> {
        let first = http_body_util::BodyExt::frame(&mut self).await;
        Started {
            first: Some(first),
            body: self,
        }
    }
}

/// A [`BudgetBody`] whose first frame was read ahead: see [`BudgetBody::started`].
pub(super) struct Started<B> {
    first: Option<Option<Result<Frame<Bytes>, BoxError>>>,
    body: BudgetBody<B>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<B> Body for Started<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.first.take() {
            Some(first) => Poll::Ready(first),
            None => Pin::new(&mut self.body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.first {
            Some(first) => first.is_none(),
            None => self.body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl<B> Body for BudgetBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.project();
        if *this.done {
            return Poll::Ready(None);
        }
        let polled = this.inner.poll_frame(cx);
        let frame = match polled {
            Poll::Pending => {
                let status = if this.stopping.as_mut().poll(cx).is_ready() {
                    Status::unavailable("the scaler is stopping")
                } else {
                    ready!(this.deadline.as_mut().poll(cx));
                    crate::telemetry::refused("slow_request");
                    Status::deadline_exceeded(format!(
                        "the request message did not arrive whole within {:?} \
                         (--grpc-request-body-timeout)",
                        this.body_timeout
                    ))
                };
                *this.done = true;
                this.charges.share = None;
                return Poll::Ready(Some(Err(status.into())));
            }
            Poll::Ready(frame) => frame,
        };
        match frame {
            Some(Ok(frame)) => {
                let announced = frame
                    .data_ref()
                    .map_or(0, |data| this.framing.announced(data));
                let charged = this
                    .charges
                    .begin()
                    .and_then(|()| this.charges.charge(announced));
                if let Err(status) = charged {
                    *this.done = true;
                    this.charges.share = None;
                    return Poll::Ready(Some(Err(status.into())));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(error)) => {
                *this.done = true;
                this.charges.share = None;
                Poll::Ready(Some(Err(error.into())))
            }
            None => {
                // An empty body is decoded too (and refused there).
                let begun = this.charges.begin();
                *this.done = true;
                this.charges.share = None;
                match begun {
                    Ok(()) => Poll::Ready(None),
                    Err(status) => Poll::Ready(Some(Err(status.into()))),
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt, StreamBody};
    use tokio::sync::mpsc;
    use tokio_stream::wrappers::ReceiverStream;

    use super::*;

    type Sent = Result<Frame<Bytes>, std::convert::Infallible>;

    /// A request whose body is fed through the returned sender.
    fn request() -> (
        mpsc::Sender<Sent>,
        http::Request<StreamBody<ReceiverStream<Sent>>>,
    ) {
        let (sender, receiver) = mpsc::channel(16);
        let request = http::Request::builder()
            .header("content-type", "application/grpc")
            .body(StreamBody::new(ReceiverStream::new(receiver)))
            .unwrap();
        (sender, request)
    }

    fn message(announced: u32, bytes: usize) -> Frame<Bytes> {
        let mut data = vec![0];
        data.extend_from_slice(&announced.to_be_bytes());
        data.resize(PREFIX_BYTES + bytes, 7);
        Frame::data(Bytes::from(data))
    }

    /// The header bytes of [`request`]'s head.
    const HEADERS: usize = "content-type".len() + "application/grpc".len() + 32;
    /// What its head holds until its body's first frame, and from then on.
    const HEAD: usize = HEAD_COST + HEADERS;
    const BEGUN: usize = REQUEST_COST + HEADERS;

    /// A peer address, and another.
    const PEER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    const OTHER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

    #[test]
    fn prefixes_are_read_across_frames() {
        let mut framing = Framing::new(1000);
        // A prefix split in two, its message, and the next prefix.
        assert_eq!(framing.announced(&[0, 0, 0]), 0);
        assert_eq!(framing.announced(&[0, 10, 1, 2, 3]), 25);
        assert_eq!(
            framing.announced(&[4, 5, 6, 7, 8, 9, 10, 0, 0, 0, 0, 3]),
            11
        );
        assert_eq!(framing.announced(&[1, 2, 3]), 0);
        // A length over the limit is charged as the limit.
        assert_eq!(framing.announced(&[0, 0xff, 0xff, 0xff, 0xff]), 2005);
    }

    /// The length of `body`'s next frame, which must be data.
    async fn data_len<B: Body<Data = Bytes> + Unpin>(body: &mut B) -> usize
    where
        B::Error: std::fmt::Debug,
    {
        let frame = body.frame().await.expect("a frame").expect("no error");
        frame.into_data().expect("a data frame").len()
    }

    /// Whether `body` has to wait for its next frame, polled once.
    fn waits<B: Body + Unpin>(body: &mut B) -> bool {
        let waker = std::task::Waker::noop();
        std::pin::Pin::new(body)
            .poll_frame(&mut Context::from_waker(waker))
            .is_pending()
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_holds_its_head_and_announced_messages_until_answered_and_read() {
        let budget = RequestBudget::new(1 << 20, 64 << 10, Duration::from_secs(10));
        let connection = budget.connection(PEER);
        let (sender, request) = request();
        let (request, held) = connection.charge(request).unwrap();
        // Its head, in transit, is charged globally and to its peer's share.
        assert_eq!(budget.available(), (1 << 20) - HEAD);
        assert_eq!(connection.share.available_permits(), (1 << 18) - HEAD);
        let mut body = request.into_body();
        // Its first frame: a prefix announcing 40 000 bytes, and 100 of them. The request is
        // decoded from now on, and the whole length is charged, twice.
        sender.send(Ok(message(40_000, 100))).await.unwrap();
        body.frame().await.unwrap().unwrap();
        assert_eq!(budget.available(), (1 << 20) - BEGUN - 80_005);
        assert_eq!(
            connection.share.available_permits(),
            (1 << 18) - BEGUN - 80_005
        );
        // The rest of that message, and a second one whole.
        let mut rest = vec![7; 39_900];
        rest.extend_from_slice(&message(10, 10).into_data().unwrap());
        sender
            .send(Ok(Frame::data(Bytes::from(rest))))
            .await
            .unwrap();
        body.frame().await.unwrap().unwrap();
        assert_eq!(
            connection.share.available_permits(),
            (1 << 18) - BEGUN - 80_005 - 25
        );
        drop(sender);
        assert!(body.frame().await.is_none());
        // The body ended: the peer's share is back, the global charge is not.
        assert_eq!(connection.share.available_permits(), 1 << 18);
        assert_eq!(budget.available(), (1 << 20) - BEGUN - 80_030);
        drop(body);
        assert_eq!(budget.available(), (1 << 20) - BEGUN - 80_030);
        drop(held);
        assert_eq!(budget.available(), 1 << 20);
    }

    #[tokio::test(start_paused = true)]
    async fn requests_in_transit_take_a_quarter_of_the_budget_a_peer() {
        let budget = RequestBudget::new(16 * REQUEST_COST, 100 << 10, Duration::from_secs(10));
        // Two connections from one address share its quarter.
        let (greedy, again) = (budget.connection(PEER), budget.connection(PEER));
        let mut kept = Vec::new();
        // Messages begun and never finished, on one connection then the other.
        let refused = loop {
            let connection = if kept.len() % 2 == 0 { &greedy } else { &again };
            let (sender, request) = request();
            let (request, held) = connection.charge(request).unwrap();
            let mut body = request.into_body();
            sender.send(Ok(message(1000, 10))).await.unwrap();
            match body.frame().await.unwrap() {
                Ok(_) => kept.push((sender, body, held)),
                Err(error) => break Status::from_error(error),
            }
        };
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(refused.message().len() < 200, "{}", refused.message());
        // A quarter of the budget: three requests, whatever the connection.
        assert_eq!(kept.len(), 3);
        // Heads that never send their message take it too.
        let mut heads = Vec::new();
        let refused = loop {
            match greedy.charge(request_only()) {
                Ok(head) => heads.push(head),
                Err(status) => break status,
            }
        };
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert_eq!(heads.len(), (4 * REQUEST_COST - 3 * (BEGUN + 2005)) / HEAD);
        // Another address still gets in.
        let other = budget.connection(OTHER);
        let (sender, request) = request();
        let (request, _held) = other.charge(request).unwrap();
        // A message its share cannot hold is refused as it arrives.
        let mut body = request.into_body();
        sender.send(Ok(message(40_000, 10))).await.unwrap();
        let error = body.frame().await.unwrap().unwrap_err();
        let status = Status::from_error(error);
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        drop((kept, heads));
        assert!(greedy.charge(request_only()).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn calls_whose_messages_come_whole_pass_through_the_share_at_once() {
        let budget = RequestBudget::new(64 * REQUEST_COST, 100 << 10, Duration::from_secs(10));
        let keda = budget.connection(PEER);
        // A burst of calls, more than a quarter of the budget once decoded: all their heads
        // are read before their messages, which then come whole, one after the other.
        let bodies: Vec<_> = (0..24)
            .map(|_| {
                let (sender, request) = request();
                let (request, held) = keda.charge(request).unwrap();
                (sender, request.into_body(), held)
            })
            .collect();
        assert_eq!(
            keda.share.available_permits(),
            16 * REQUEST_COST - 24 * HEAD
        );
        let mut waiting = Vec::new();
        for (sender, mut body, held) in bodies {
            assert!(waits(&mut body));
            sender.send(Ok(message(100, 100))).await.unwrap();
            drop(sender);
            body.frame().await.unwrap().unwrap();
            assert!(body.frame().await.is_none());
            // Decoded; the handler waits for its answer.
            waiting.push(held);
        }
        assert_eq!(keda.share.available_permits(), 16 * REQUEST_COST);
        assert_eq!(budget.available(), 64 * REQUEST_COST - 24 * (BEGUN + 205));
        const { assert!(24 * (BEGUN + 205) > 16 * REQUEST_COST) };
    }

    #[test]
    fn a_peer_is_its_address_and_its_share_lives_with_its_connections() {
        let budget = RequestBudget::new(1 << 20, 64 << 10, Duration::from_secs(10));
        let mapped = IpAddr::V6(std::net::Ipv4Addr::LOCALHOST.to_ipv6_mapped());
        let (a, b) = (budget.connection(PEER), budget.connection(mapped));
        assert!(Arc::ptr_eq(&a.share, &b.share));
        assert!(!Arc::ptr_eq(&a.share, &budget.connection(OTHER).share));
        drop((a, b));
        // The next connection from it starts a new share, and the table forgets the gone.
        let _c = budget.connection(OTHER);
        let peers = budget.peers.lock().unwrap();
        assert_eq!(peers.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_started_body_gives_back_its_first_frame_then_the_rest() {
        let budget = RequestBudget::new(1 << 20, 64 << 10, Duration::from_secs(10));
        let (sender, first) = request();
        let (charged, _held) = budget.connection(PEER).charge(first).unwrap();
        let started = tokio::spawn(charged.into_body().started());
        tokio::task::yield_now().await;
        assert!(!started.is_finished(), "waits for a frame");
        sender.send(Ok(message(3, 3))).await.unwrap();
        let mut body = started.await.unwrap();
        assert!(!body.is_end_stream());
        assert_eq!(data_len(&mut body).await, 8);
        sender.send(Ok(message(1, 1))).await.unwrap();
        drop(sender);
        assert_eq!(data_len(&mut body).await, 6);
        assert!(body.frame().await.is_none());

        // An empty body ends at once.
        let (sender, empty) = request();
        drop(sender);
        let (empty, _held) = budget.connection(PEER).charge(empty).unwrap();
        let body = empty.into_body().started().await;
        assert!(body.is_end_stream());
    }

    #[test]
    fn the_budget_for_keda_is_sized_in_its_usual_calls() {
        assert_eq!(for_waiting_calls(4000), 4000 * USUAL_CALL);
        assert_eq!(for_waiting_calls(1), 1 << 20);
        assert_eq!(for_waiting_calls(usize::MAX), 1 << 30);
    }

    fn request_only() -> http::Request<StreamBody<ReceiverStream<Sent>>> {
        request().1
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_in_transit_fails_when_the_server_stops() {
        let budget = RequestBudget::new(1 << 20, 64 << 10, Duration::from_secs(10));
        let (sender, request) = request();
        let (request, _held) = budget.connection(PEER).charge(request).unwrap();
        let mut body = request.into_body();
        sender.send(Ok(message(100, 50))).await.unwrap();
        body.frame().await.unwrap().unwrap();
        let stopped = tokio::spawn(async move { body.frame().await });
        tokio::task::yield_now().await;
        budget.stop();
        let error = stopped.await.unwrap().unwrap().unwrap_err();
        assert_eq!(Status::from_error(error).code(), tonic::Code::Unavailable);
        drop(sender);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_does_not_end_in_time_fails_and_frees_its_share() {
        let budget = RequestBudget::new(1 << 20, 64 << 10, Duration::from_secs(10));
        let connection = budget.connection(PEER);
        let (sender, request) = request();
        let (request, _held) = connection.charge(request).unwrap();
        let mut body = request.into_body();
        sender.send(Ok(message(100, 50))).await.unwrap();
        body.frame().await.unwrap().unwrap();
        let started = tokio::time::Instant::now();
        let error = body.frame().await.unwrap().unwrap_err();
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        assert_eq!(
            Status::from_error(error).code(),
            tonic::Code::DeadlineExceeded
        );
        assert_eq!(connection.share.available_permits(), 1 << 18);
        assert!(body.frame().await.is_none());
        drop(sender);
    }
}
