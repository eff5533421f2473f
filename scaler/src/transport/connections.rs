//! A server's connections, counted and capped in all and per peer address, and admitted at once:
//! below the caps a new connection opens; at a cap an idle one is told to close to make room;
//! when none can be, the new one is refused.
//!
//! Each connection's task holds a [`Connection`]; each request it serves holds an [`InFlight`]
//! from its head to the end of its answer. A connection is *idle* while nothing is in flight.
//! [`Connections::admit`] counts against the caps only the connections not told to close: at
//! most `cap` in all and `peer_cap` from one address. At a cap it picks an idle connection (of
//! the newcomer's own address, if that address is at its cap): one that never had a request and
//! is older than [`FRESH`], the oldest first, else the one idle longest. A connection with a
//! request in flight is never picked, nor one that never had a request and is younger than
//! [`FRESH`]. The one picked is told to close ([`Snapshot::closing`]) and the newcomer opens at
//! once; with none to pick, the newcomer is refused: dropped at once, counted in
//! `admit_scaler_connections_refused_total` and logged at debug level. So the accept loop never
//! waits, and one address can hold at most `peer_cap` connections, busy or not.
//!
//! A connection told to close goes within moments when idle (its server gives it a short grace
//! after a GOAWAY), but it is counted apart until it goes: at most `cap` of them, `peer_cap` from
//! one address, before nothing more is picked. So at most twice `cap` connections are ever open
//! (twice `peer_cap` from one address).

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::sync::futures::Notified;
use tokio::time::Instant;

/// How long a connection that never had a request is safe from being picked to make room. A
/// client sends its first call right after its handshakes (TCP, TLS, HTTP/2: a few round trips,
/// milliseconds inside a cluster, tens on a loaded node), so a second leaves a well-behaved
/// client's fresh connection the time to make it, however many connections come after; and a
/// flood of silent connections can be pushed out a second after it came.
pub(super) const FRESH: Duration = Duration::from_secs(1);

/// The open connections of one server. Clones share them.
#[derive(Clone, Debug)]
pub(super) struct Connections {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// `grpc` or `http`, for the metrics.
    server: &'static str,
    cap: usize,
    peer_cap: usize,
    state: Mutex<State>,
    /// A connection closed.
    closed: Notify,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    slots: HashMap<u64, Slot>,
    /// The connections in all...
    all: Counts,
    /// ...and per peer address (an entry while it has one).
    peers: HashMap<IpAddr, Counts>,
}

/// Connections counted against a cap, and those told to close, counted apart.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    open: usize,
    closing: usize,
}

#[derive(Debug)]
struct Slot {
    peer: IpAddr,
    activity: Snapshot,
    /// The next request's number.
    next_request: u64,
    /// The deadlines of the answers in flight that have one, with their request's number.
    deadlines: BTreeSet<(Instant, u64)>,
    /// Wakes the connection's task: told to close, or its activity changed.
    wake: Arc<Notify>,
}

/// What a connection is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Snapshot {
    /// Requests in flight (each from its head to the end of its answer).
    pub(super) in_flight: usize,
    /// Since when `in_flight` has been zero (or, when it is not, since when it has not been).
    pub(super) since: Instant,
    /// Whether it ever had a request.
    pub(super) used: bool,
    /// Whether it was told to close (to make room, or because the server stops).
    pub(super) closing: bool,
    /// The earliest deadline of an answer in flight, if one has a deadline.
    pub(super) answer_deadline: Option<Instant>,
}

/// Why a connection is refused: the cap that is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Full {
    /// The peer address's.
    Peer,
    /// The server's.
    Total,
}

impl Connections {
    /// Room for `cap` connections in all, `peer_cap` from one address (each at least one, the
    /// second at most the first), of the server named `server` in the metrics.
    pub(super) fn new(server: &'static str, cap: usize, peer_cap: usize) -> Self {
        let cap = cap.max(1);
        Connections {
            shared: Arc::new(Shared {
                server,
                cap,
                peer_cap: peer_cap.clamp(1, cap),
                state: Mutex::new(State::default()),
                closed: Notify::new(),
            }),
        }
    }

    /// Counts a connection just accepted from `peer`, telling an idle one to close if a cap is
    /// reached; `None` if it must be refused (drop it).
    pub(super) fn admit(&self, peer: IpAddr) -> Option<Connection> {
        let peer = peer.to_canonical();
        let shared = &*self.shared;
        let mut state = shared.lock();
        let full = if state
            .peers
            .get(&peer)
            .is_some_and(|peer| peer.open >= shared.peer_cap)
        {
            Some(Full::Peer)
        } else {
            (state.all.open >= shared.cap).then_some(Full::Total)
        };
        if let Some(full) = full {
            let only = (full == Full::Peer).then_some(peer);
            let Some(victim) = state.victim(only, shared) else {
                drop(state);
                let cap = match full {
                    Full::Peer => "peer",
                    Full::Total => "total",
                };
                crate::telemetry::connection_refused(shared.server, cap);
                tracing::debug!(
                    target: "admit_scaler",
                    server = shared.server,
                    %peer,
                    cap,
                    "a new connection refused: at the cap, and every connection is busy, new or \
                     closing"
                );
                return None;
            };
            state.tell_to_close(victim);
            crate::telemetry::connection_evicted(shared.server);
        }
        let wake = Arc::new(Notify::new());
        let id = state.next_id;
        state.next_id += 1;
        state.slots.insert(
            id,
            Slot {
                peer,
                activity: Snapshot {
                    in_flight: 0,
                    since: Instant::now(),
                    used: false,
                    closing: false,
                    answer_deadline: None,
                },
                next_request: 0,
                deadlines: BTreeSet::new(),
                wake: Arc::clone(&wake),
            },
        );
        state.all.open += 1;
        state.peers.entry(peer).or_default().open += 1;
        let open = state.slots.len();
        drop(state);
        crate::telemetry::connections(shared.server, open);
        Some(Connection {
            shared: Arc::clone(&self.shared),
            id,
            wake,
        })
    }

    /// Tells every connection to close (the server stops).
    pub(super) fn close_all(&self) {
        let mut state = self.shared.lock();
        let ids: Vec<u64> = state.slots.keys().copied().collect();
        for id in ids {
            state.tell_to_close(id);
        }
    }

    /// Resolves once no connection is open.
    pub(super) async fn closed(&self) {
        loop {
            let closed = self.shared.closed.notified();
            if self.len() == 0 {
                return;
            }
            closed.await;
        }
    }

    /// Sets the gauge of open connections: call it periodically, so that the exporter's idle
    /// timeout keeps it while nothing opens or closes.
    pub(super) fn publish(&self) {
        crate::telemetry::connections(self.shared.server, self.len());
    }

    /// How many connections are open, told to close or not.
    pub(super) fn len(&self) -> usize {
        self.shared.lock().slots.len()
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    /// The connection to tell to close to make room (one from `only`, if given), if one may be.
    fn victim(&self, only: Option<IpAddr>, shared: &Shared) -> Option<u64> {
        if self.all.closing >= shared.cap {
            return None;
        }
        let now = Instant::now();
        self.slots
            .iter()
            .filter(|(_, slot)| {
                let activity = &slot.activity;
                !activity.closing
                    && activity.in_flight == 0
                    && (activity.used || now.saturating_duration_since(activity.since) >= FRESH)
                    && only.is_none_or(|peer| slot.peer == peer)
                    && self
                        .peers
                        .get(&slot.peer)
                        .is_none_or(|peer| peer.closing < shared.peer_cap)
            })
            .min_by_key(|(id, slot)| (slot.activity.used, slot.activity.since, **id))
            .map(|(id, _)| *id)
    }

    /// Tells connection `id` to close: it no longer counts against the caps.
    fn tell_to_close(&mut self, id: u64) {
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        if slot.activity.closing {
            return;
        }
        slot.activity.closing = true;
        slot.wake.notify_one();
        let peer = slot.peer;
        for counts in [Some(&mut self.all), self.peers.get_mut(&peer)]
            .into_iter()
            .flatten()
        {
            counts.open -= 1;
            counts.closing += 1;
        }
    }

    /// Forgets connection `id`.
    fn remove(&mut self, id: u64) {
        let Some(slot) = self.slots.remove(&id) else {
            return;
        };
        let closing = slot.activity.closing;
        let peer = self.peers.get_mut(&slot.peer);
        for counts in [Some(&mut self.all), peer].into_iter().flatten() {
            if closing {
                counts.closing -= 1;
            } else {
                counts.open -= 1;
            }
        }
        if self
            .peers
            .get(&slot.peer)
            .is_some_and(|peer| peer.open == 0 && peer.closing == 0)
        {
            self.peers.remove(&slot.peer);
        }
    }
}

/// One open connection, held by its task: dropping it frees its place.
#[derive(Debug)]
pub(super) struct Connection {
    shared: Arc<Shared>,
    id: u64,
    wake: Arc<Notify>,
}

impl Connection {
    /// What the connection is doing now.
    pub(super) fn snapshot(&self) -> Snapshot {
        self.shared.lock().slots[&self.id].activity
    }

    /// Resolves when the connection is told to close or its activity changes (or changed
    /// since the last call): take a [`snapshot`](Self::snapshot) then.
    pub(super) fn changed(&self) -> Notified<'_> {
        self.wake.notified()
    }

    /// A handle for the connection's requests, to [`start`](RequestTracker::start) each.
    pub(super) fn tracker(&self) -> RequestTracker {
        RequestTracker {
            shared: Arc::clone(&self.shared),
            id: self.id,
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let open = {
            let mut state = self.shared.lock();
            state.remove(self.id);
            state.slots.len()
        };
        crate::telemetry::connections(self.shared.server, open);
        self.shared.closed.notify_one();
    }
}

/// Counts a connection's requests in flight. Clones count for the same connection.
#[derive(Clone, Debug)]
pub(super) struct RequestTracker {
    shared: Arc<Shared>,
    id: u64,
}

impl RequestTracker {
    /// A request's head arrived: it is in flight until the guard is dropped, and its answer
    /// is due by `deadline`, if given.
    pub(super) fn start(&self, deadline: Option<Instant>) -> InFlight {
        let request = self.update(|slot| {
            let request = slot.next_request;
            slot.next_request += 1;
            slot.activity.used = true;
            slot.activity.in_flight += 1;
            if let Some(deadline) = deadline {
                slot.deadlines.insert((deadline, request));
            }
            request
        });
        InFlight {
            tracker: self.clone(),
            deadline: request.and_then(|request| Some((deadline?, request))),
        }
    }

    /// Applies `change` to the connection's slot (if it is still open). When the connection
    /// went from idle to busy or back, the time is noted; when that or its earliest deadline
    /// changed, its task is woken.
    fn update<T>(&self, change: impl FnOnce(&mut Slot) -> T) -> Option<T> {
        let mut state = self.shared.lock();
        // A connection's requests end before its task drops it, but a response body may
        // outlive the task that served it: then there is nothing to count.
        let slot = state.slots.get_mut(&self.id)?;
        let before = (slot.activity.in_flight == 0, slot.activity.answer_deadline);
        let output = change(slot);
        let activity = &mut slot.activity;
        activity.answer_deadline = slot.deadlines.first().map(|&(deadline, _)| deadline);
        let idle = activity.in_flight == 0;
        if idle != before.0 {
            activity.since = Instant::now();
        }
        if (idle, activity.answer_deadline) != before {
            slot.wake.notify_one();
        }
        Some(output)
    }
}

/// A request in flight on a connection; dropped at the end of its answer.
#[derive(Debug)]
pub(super) struct InFlight {
    tracker: RequestTracker,
    /// Its answer's deadline and its number, if it has one.
    deadline: Option<(Instant, u64)>,
}

impl InFlight {
    /// `body`, keeping the request in flight until it is done with: dropped, or its last frame
    /// taken by the server (whose buffers may still hold that frame, so a large answer should
    /// come in chunks).
    pub(super) fn until_sent<B: http_body::Body>(
        self,
        body: B,
    ) -> impl http_body::Body<Data = B::Data, Error = B::Error> {
        http_body_util::BodyExt::map_frame(body, move |frame| {
            let _in_flight = &self;
            frame
        })
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let deadline = self.deadline;
        self.tracker.update(|slot| {
            slot.activity.in_flight = slot.activity.in_flight.saturating_sub(1);
            if let Some(deadline) = deadline {
                slot.deadlines.remove(&deadline);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    /// Whether `future` is ready at once.
    fn ready<F: Future>(future: F) -> bool {
        let mut future = std::pin::pin!(future);
        let waker = std::task::Waker::noop();
        future
            .as_mut()
            .poll(&mut std::task::Context::from_waker(waker))
            .is_ready()
    }

    /// Peer address `n`.
    fn peer(n: u8) -> IpAddr {
        Ipv4Addr::new(10, 0, 0, n).into()
    }

    /// A connection from `peer` that got in.
    fn open(connections: &Connections, n: u8) -> Connection {
        connections.admit(peer(n)).expect("admitted")
    }

    /// Opens a connection from `peer` and makes a request on it, ended at once.
    fn used(connections: &Connections, n: u8) -> Connection {
        let connection = open(connections, n);
        drop(connection.tracker().start(None));
        connection
    }

    #[tokio::test(start_paused = true)]
    async fn below_the_caps_connections_get_in_at_once() {
        let connections = Connections::new("test", 2, 2);
        let first = open(&connections, 1);
        let _second = open(&connections, 2);
        assert_eq!(connections.len(), 2);
        assert!(!first.snapshot().closing);
        drop(first);
        assert_eq!(connections.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_cap_an_old_silent_connection_goes_first_then_the_one_idle_longest() {
        let connections = Connections::new("test", 3, 3);
        let served_long_ago = used(&connections, 1);
        tokio::time::advance(Duration::from_secs(60)).await;
        let silent = open(&connections, 2);
        tokio::time::advance(FRESH).await;
        let busy = open(&connections, 3);
        let _request = busy.tracker().start(None);

        // The newcomer gets in at once; the silent one is told to close, though the other has
        // been idle longer.
        let newcomer = open(&connections, 4);
        assert!(silent.snapshot().closing);
        assert!(ready(silent.changed()));
        assert!(!served_long_ago.snapshot().closing);
        assert!(!busy.snapshot().closing);
        assert_eq!(connections.len(), 4, "the one told to close is still there");

        // Next, the one idle longest; never one with a request in flight.
        drop(newcomer.tracker().start(None));
        let _next = open(&connections, 5);
        assert!(served_long_ago.snapshot().closing);
        assert!(!busy.snapshot().closing);
        assert!(!newcomer.snapshot().closing);
    }

    #[tokio::test(start_paused = true)]
    async fn when_every_connection_is_busy_a_new_one_is_refused_at_once() {
        let connections = Connections::new("test", 2, 2);
        let busy = open(&connections, 1);
        let request = busy.tracker().start(None);
        let streaming = open(&connections, 2);
        let _stream = streaming.tracker().start(None);
        assert!(connections.admit(peer(3)).is_none());
        assert!(!busy.snapshot().closing);
        assert_eq!(connections.len(), 2);
        // The answer ends: the connection is idle, so the next newcomer makes it close.
        drop(request);
        let _newcomer = open(&connections, 3);
        assert!(busy.snapshot().closing);
    }

    #[tokio::test(start_paused = true)]
    async fn a_fresh_connection_is_not_pushed_out_by_newer_ones() {
        let connections = Connections::new("test", 2, 2);
        let fresh = open(&connections, 1);
        let _flood = open(&connections, 2);
        // Newcomers are refused while both are fresh...
        tokio::time::advance(FRESH - Duration::from_millis(1)).await;
        assert!(connections.admit(peer(3)).is_none());
        // ...the first makes its call in time, and is kept.
        drop(fresh.tracker().start(None));
        tokio::time::advance(Duration::from_millis(1)).await;
        let _newcomer = open(&connections, 3);
        assert!(!fresh.snapshot().closing);
        assert_eq!(connections.len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn at_its_own_cap_a_peer_makes_room_among_its_own_connections_or_is_refused() {
        let connections = Connections::new("test", 8, 2);
        let other = used(&connections, 9);
        tokio::time::advance(Duration::from_secs(60)).await;
        let idle = used(&connections, 1);
        let busy = open(&connections, 1);
        let _request = busy.tracker().start(None);
        // Its idle connection goes, not the other peer's, idle far longer.
        let newcomer = open(&connections, 1);
        assert!(idle.snapshot().closing);
        assert!(!other.snapshot().closing);
        // Now both of its connections are busy: it is refused, others are not.
        let _second = newcomer.tracker().start(None);
        assert!(connections.admit(peer(1)).is_none());
        let _another = open(&connections, 2);
        assert!(!other.snapshot().closing);
    }

    #[tokio::test(start_paused = true)]
    async fn connections_told_to_close_are_counted_apart_up_to_the_cap() {
        let connections = Connections::new("test", 2, 2);
        let mut closing = Vec::new();
        let mut idle = vec![used(&connections, 1), used(&connections, 2)];
        // Each newcomer makes an idle one close, and gets in: until as many are closing as
        // the cap.
        for n in 3..5 {
            let newcomer = used(&connections, n);
            let (told, kept): (Vec<_>, Vec<_>) =
                idle.into_iter().partition(|c| c.snapshot().closing);
            closing.extend(told);
            idle = kept;
            idle.push(newcomer);
        }
        assert_eq!((closing.len(), idle.len()), (2, 2));
        assert_eq!(connections.len(), 4, "twice the cap at most");
        assert!(connections.admit(peer(5)).is_none());
        // One goes: room to make room again.
        closing.pop();
        let _newcomer = open(&connections, 5);
        assert_eq!(connections.len(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn a_closing_connection_that_keeps_a_request_does_not_hold_the_door() {
        let connections = Connections::new("test", 2, 2);
        let lingering = open(&connections, 1);
        connections.close_all();
        // A request crossed the GOAWAY: the connection stays until it ends.
        let _request = lingering.tracker().start(None);
        let idle = used(&connections, 2);
        let _second = open(&connections, 3);
        assert!(!idle.snapshot().closing, "room without it");
        assert_eq!(connections.len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn an_ipv4_peer_over_ipv6_is_the_same_peer() {
        let connections = Connections::new("test", 8, 1);
        let _v4 = connections.admit(peer(1)).unwrap();
        let mapped = Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped();
        assert!(connections.admit(mapped.into()).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn requests_in_flight_mark_a_connection_busy_and_then_idle() {
        let connections = Connections::new("test", 4, 4);
        let connection = open(&connections, 1);
        let opened = Instant::now();
        assert_eq!(
            connection.snapshot(),
            Snapshot {
                in_flight: 0,
                since: opened,
                used: false,
                closing: false,
                answer_deadline: None,
            }
        );
        tokio::time::advance(Duration::from_secs(5)).await;
        let tracker = connection.tracker();
        let (first, second) = (tracker.start(None), tracker.start(None));
        assert!(ready(connection.changed()));
        let busy = connection.snapshot();
        assert_eq!(
            (busy.in_flight, busy.since, busy.used),
            (2, opened + Duration::from_secs(5), true)
        );
        tokio::time::advance(Duration::from_secs(5)).await;
        drop(first);
        assert_eq!(connection.snapshot().since, busy.since, "still busy");
        drop(second);
        let idle = connection.snapshot();
        assert_eq!(
            (idle.in_flight, idle.since),
            (0, opened + Duration::from_secs(10))
        );
        assert!(ready(connection.changed()));
    }

    #[tokio::test(start_paused = true)]
    async fn the_earliest_answer_deadline_in_flight_is_tracked() {
        let connections = Connections::new("test", 4, 4);
        let connection = open(&connections, 1);
        let tracker = connection.tracker();
        let now = Instant::now();
        let (soon, later) = (now + Duration::from_secs(1), now + Duration::from_secs(2));
        let stream = tracker.start(None);
        assert_eq!(connection.snapshot().answer_deadline, None);
        let first = tracker.start(Some(soon));
        let second = tracker.start(Some(later));
        assert!(ready(connection.changed()));
        assert_eq!(connection.snapshot().answer_deadline, Some(soon));
        drop(first);
        assert!(ready(connection.changed()), "the deadline moved");
        assert_eq!(connection.snapshot().answer_deadline, Some(later));
        drop(second);
        assert_eq!(connection.snapshot().answer_deadline, None);
        assert_eq!(connection.snapshot().in_flight, 1);
        drop(stream);
    }

    #[tokio::test(start_paused = true)]
    async fn closing_all_tells_each_and_closed_waits_for_the_last() {
        let connections = Connections::new("test", 4, 4);
        let (a, b) = (open(&connections, 1), open(&connections, 2));
        connections.close_all();
        assert!(a.snapshot().closing && b.snapshot().closing);
        let closed = tokio::spawn({
            let connections = connections.clone();
            async move { connections.closed().await }
        });
        drop(a);
        tokio::task::yield_now().await;
        assert!(!closed.is_finished());
        drop(b);
        closed.await.unwrap();
        assert_eq!(connections.len(), 0);
    }
}
