//! A server's connections, counted and capped: at the cap, the connection idle longest is told
//! to close so that a new one gets in.
//!
//! Each connection's task holds a [`Connection`]; each request it serves holds an [`InFlight`]
//! from its head to the end of its answer. A connection is *idle* while nothing is in flight. At
//! the cap, [`Connections::admit`] picks the idle connection that never served a request (a
//! silent TCP connection, a stalled handshake) and was opened first, or else the one idle
//! longest, and tells it to close ([`Snapshot::closing`]); a connection serving a request is
//! never picked. So idle connections cannot keep a well-behaved client out; connections that
//! all have requests in flight can, until those end (an answer has a deadline, a
//! `StreamIsActive` stream lasts as long as its client keeps it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;
use tokio::sync::futures::Notified;
use tokio::time::Instant;

/// The open connections of one server, at most `cap`. Clones share them.
#[derive(Clone, Debug)]
pub(super) struct Connections {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// `grpc` or `http`, for the metrics.
    server: &'static str,
    cap: usize,
    state: Mutex<State>,
    /// A connection closed or became idle: room may be made.
    changed: Notify,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    open: HashMap<u64, Slot>,
}

#[derive(Debug)]
struct Slot {
    activity: Snapshot,
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
}

impl Connections {
    /// Room for `cap` connections (at least one) of the server named `server` in the metrics.
    pub(super) fn new(server: &'static str, cap: usize) -> Self {
        Connections {
            shared: Arc::new(Shared {
                server,
                cap: cap.max(1),
                state: Mutex::new(State::default()),
                changed: Notify::new(),
            }),
        }
    }

    /// Waits until a connection just accepted may be [opened](Self::open): at the cap, tells
    /// the idle connection that never had a request and is oldest, or else the one idle
    /// longest, to close, and waits for a connection to go. Call it from the one task that
    /// opens connections, so the room lasts until it does.
    pub(super) async fn admit(&self) {
        loop {
            let changed = self.shared.changed.notified();
            if self.make_room() {
                return;
            }
            changed.await;
        }
    }

    /// `true` if there is room; otherwise tells one idle connection to close, unless an idle
    /// one is closing already (it goes within moments; one closing with requests in flight
    /// may take as long as they do, so it is not waited for).
    fn make_room(&self) -> bool {
        let mut state = self.shared.lock();
        if state.open.len() < self.shared.cap {
            return true;
        }
        let idle = |slot: &Slot| slot.activity.in_flight == 0;
        if state
            .open
            .values()
            .any(|slot| idle(slot) && slot.activity.closing)
        {
            return false;
        }
        let victim = state
            .open
            .values_mut()
            .filter(|slot| idle(slot) && !slot.activity.closing)
            .min_by_key(|slot| (slot.activity.used, slot.activity.since));
        if let Some(victim) = victim {
            victim.activity.closing = true;
            victim.wake.notify_one();
            crate::telemetry::connection_evicted(self.shared.server);
        }
        false
    }

    /// Counts a connection just accepted.
    pub(super) fn open(&self) -> Connection {
        let wake = Arc::new(Notify::new());
        let mut state = self.shared.lock();
        let id = state.next_id;
        state.next_id += 1;
        state.open.insert(
            id,
            Slot {
                activity: Snapshot {
                    in_flight: 0,
                    since: Instant::now(),
                    used: false,
                    closing: false,
                },
                wake: Arc::clone(&wake),
            },
        );
        crate::telemetry::connections(self.shared.server, state.open.len());
        Connection {
            shared: Arc::clone(&self.shared),
            id,
            wake,
        }
    }

    /// Tells every connection to close (the server stops).
    pub(super) fn close_all(&self) {
        let mut state = self.shared.lock();
        for slot in state.open.values_mut() {
            slot.activity.closing = true;
            slot.wake.notify_one();
        }
    }

    /// Resolves once no connection is open.
    pub(super) async fn closed(&self) {
        loop {
            let changed = self.shared.changed.notified();
            if self.len() == 0 {
                return;
            }
            changed.await;
        }
    }

    /// Sets the gauge of open connections: call it periodically, so that the exporter's idle
    /// timeout keeps it while nothing opens or closes.
    pub(super) fn publish(&self) {
        crate::telemetry::connections(self.shared.server, self.len());
    }

    /// How many connections are open.
    pub(super) fn len(&self) -> usize {
        self.shared.lock().open.len()
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
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
        self.shared.lock().open[&self.id].activity
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
            wake: Arc::clone(&self.wake),
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let open = {
            let mut state = self.shared.lock();
            state.open.remove(&self.id);
            state.open.len()
        };
        crate::telemetry::connections(self.shared.server, open);
        self.shared.changed.notify_one();
    }
}

/// Counts a connection's requests in flight. Clones count for the same connection.
#[derive(Clone, Debug)]
pub(super) struct RequestTracker {
    shared: Arc<Shared>,
    id: u64,
    wake: Arc<Notify>,
}

impl RequestTracker {
    /// A request's head arrived: it is in flight until the guard is dropped.
    pub(super) fn start(&self) -> InFlight {
        self.update(|activity| {
            activity.used = true;
            activity.in_flight += 1;
            activity.in_flight == 1
        });
        InFlight {
            tracker: self.clone(),
        }
    }

    /// Applies `change` to the connection's activity; when it returns `true`, the connection
    /// went from idle to busy or back: the time is noted and the connection's task woken.
    fn update(&self, change: impl FnOnce(&mut Snapshot) -> bool) {
        let mut state = self.shared.lock();
        // A connection's requests end before its task drops it, but a response body may
        // outlive the task that served it: then there is nothing to count.
        let Some(slot) = state.open.get_mut(&self.id) else {
            return;
        };
        if change(&mut slot.activity) {
            slot.activity.since = Instant::now();
            self.wake.notify_one();
            self.shared.changed.notify_one();
        }
    }
}

/// A request in flight on a connection; dropped at the end of its answer.
#[derive(Debug)]
pub(super) struct InFlight {
    tracker: RequestTracker,
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
        self.tracker.update(|activity| {
            activity.in_flight = activity.in_flight.saturating_sub(1);
            activity.in_flight == 0
        });
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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

    #[tokio::test(start_paused = true)]
    async fn below_the_cap_connections_get_in_at_once() {
        let connections = Connections::new("test", 2);
        assert!(ready(connections.admit()));
        let first = connections.open();
        assert!(ready(connections.admit()));
        let _second = connections.open();
        assert_eq!(connections.len(), 2);
        assert!(!first.snapshot().closing);
        drop(first);
        assert_eq!(connections.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_cap_the_idle_connection_that_never_served_goes_first() {
        let connections = Connections::new("test", 3);
        let served_long_ago = connections.open();
        drop(served_long_ago.tracker().start());
        tokio::time::advance(Duration::from_secs(60)).await;
        let silent = connections.open();
        tokio::time::advance(Duration::from_secs(1)).await;
        let busy = connections.open();
        let _request = busy.tracker().start();

        let admitted = tokio::spawn({
            let connections = connections.clone();
            async move { connections.admit().await }
        });
        tokio::task::yield_now().await;
        // The silent one is told to close, though the other has been idle longer.
        assert!(silent.snapshot().closing);
        assert!(ready(silent.changed()));
        assert!(!served_long_ago.snapshot().closing);
        assert!(!busy.snapshot().closing);
        assert!(!admitted.is_finished());
        drop(silent);
        admitted.await.unwrap();

        // Next, the one idle longest; never one with a request in flight.
        let newcomer = connections.open();
        drop(newcomer.tracker().start());
        let admitted = tokio::spawn({
            let connections = connections.clone();
            async move { connections.admit().await }
        });
        tokio::task::yield_now().await;
        assert!(served_long_ago.snapshot().closing);
        assert!(!busy.snapshot().closing);
        drop(served_long_ago);
        admitted.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn when_every_connection_is_busy_a_new_one_waits_for_an_answer() {
        let connections = Connections::new("test", 1);
        let busy = connections.open();
        let request = busy.tracker().start();
        let admitted = tokio::spawn({
            let connections = connections.clone();
            async move { connections.admit().await }
        });
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(!admitted.is_finished());
        assert!(!busy.snapshot().closing);
        // The answer ends: the connection is idle, so it is told to close.
        drop(request);
        tokio::task::yield_now().await;
        assert!(busy.snapshot().closing);
        drop(busy);
        admitted.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_closing_connection_that_keeps_a_request_does_not_hold_the_door() {
        let connections = Connections::new("test", 2);
        let lingering = connections.open();
        connections.close_all();
        // A request crossed the GOAWAY: the connection stays until it ends.
        let _request = lingering.tracker().start();
        let idle = connections.open();
        let admitted = tokio::spawn({
            let connections = connections.clone();
            async move { connections.admit().await }
        });
        tokio::task::yield_now().await;
        assert!(idle.snapshot().closing, "the idle one is told to close");
        drop(idle);
        admitted.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn requests_in_flight_mark_a_connection_busy_and_then_idle() {
        let connections = Connections::new("test", 4);
        let connection = connections.open();
        let opened = Instant::now();
        assert_eq!(
            connection.snapshot(),
            Snapshot {
                in_flight: 0,
                since: opened,
                used: false,
                closing: false
            }
        );
        tokio::time::advance(Duration::from_secs(5)).await;
        let tracker = connection.tracker();
        let (first, second) = (tracker.start(), tracker.start());
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
    async fn closing_all_tells_each_and_closed_waits_for_the_last() {
        let connections = Connections::new("test", 4);
        let (a, b) = (connections.open(), connections.open());
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
