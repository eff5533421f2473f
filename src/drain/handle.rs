//! The drain handle: its timeline, its counts and its futures.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering::Relaxed};
use std::task::Poll;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::{Instant, sleep_until};

use super::gate::Gate;
use super::{DrainBuilder, DrainSnapshot, Outcome, Phase};
use crate::sync::{Arc, Striped};

/// Graceful drain for one server process: a cloneable handle whose clones share one
/// timeline (see the [module](super) docs).
#[derive(Clone, Debug)]
pub struct Drain {
    pub(super) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) gate: Gate,
    connections: StdAtomicU64,
    /// Requests the drain's layer saw before any other admit layer.
    offered: Striped<1>,
    next_session: StdAtomicU64,
    pub(super) config: DrainBuilder,
    announced_at: OnceLock<Instant>,
    draining_at: OnceLock<Instant>,
    /// Woken at each phase change, and when the last request or session ends while draining.
    changed: Notify,
}

impl Drain {
    /// A builder with the defaults: 5 s propagation delay, 25 s deadline, no reconnect spread,
    /// `Retry-After: 1`, not ready from `Announced`.
    pub fn builder() -> DrainBuilder {
        DrainBuilder::default()
    }

    pub(super) fn from_builder(config: DrainBuilder) -> Self {
        Drain {
            inner: Arc::new(Inner {
                gate: Gate::new(),
                connections: StdAtomicU64::new(0),
                offered: Striped::new(),
                next_session: StdAtomicU64::new(0),
                config,
                announced_at: OnceLock::new(),
                draining_at: OnceLock::new(),
                changed: Notify::new(),
            }),
        }
    }

    /// Announces the drain (what SIGTERM should do): [`Announced`](Phase::Announced) now,
    /// [`Draining`](Phase::Draining) after the propagation delay. True if this call started it.
    pub fn start(&self) -> bool {
        let inner = &*self.inner;
        let _ = inner.announced_at.set(Instant::now());
        let started = inner.gate.advance(Phase::Serving, Phase::Announced);
        if started {
            inner.changed.notify_waiters();
        }
        started
    }

    /// Starts draining at once, skipping what is left of the propagation delay (SIGINT, or a
    /// second signal). True if this call moved the drain to `Draining`.
    pub fn start_now(&self) -> bool {
        self.start();
        self.inner.begin_draining(Instant::now())
    }

    /// The phase now.
    pub fn phase(&self) -> Phase {
        self.inner.tick()
    }

    /// Whether a readiness probe should pass: before the configured
    /// [`readiness_fails_at`](DrainBuilder::readiness_fails_at) phase.
    pub fn is_ready(&self) -> bool {
        self.phase() < self.inner.config.readiness_fails_at
    }

    /// The phase and counts now.
    pub fn snapshot(&self) -> DrainSnapshot {
        let inner = &*self.inner;
        DrainSnapshot {
            phase: inner.tick(),
            in_flight: inner.gate.in_flight(),
            sessions: inner.gate.sessions(),
            connections: inner.connections.load(Relaxed),
            offered: inner.offered.sum(0),
        }
    }

    /// Counts a request offered to the drain's layer first, unless the drain refuses requests
    /// now: a refused request goes to another replica (the proxy's or the client's retry),
    /// which counts it, and a scaler summing the replicas' offered load must not see it twice.
    #[cfg(feature = "http")]
    #[inline]
    pub(crate) fn count_offered(&self) {
        if !self.inner.tick().refuses() {
            self.inner.offered.add(0, 1);
        }
    }

    /// The `Retry-After` of refusals.
    #[cfg(feature = "http")]
    pub(crate) fn retry_after(&self) -> Duration {
        self.inner.config.retry_after
    }

    /// Counts a request in flight until the guard drops, or refuses it once the drain is
    /// [`Draining`](Phase::Draining). The tower layer does this for every request; use it in
    /// hand-written loops.
    ///
    /// # Errors
    ///
    /// The phase that refused the request.
    pub fn admit(&self) -> Result<RequestGuard, Phase> {
        let inner = &*self.inner;
        let seen = inner.gate.enter();
        let phase = match seen {
            Phase::Serving => {
                return Ok(RequestGuard {
                    drain: self.clone(),
                });
            }
            Phase::Announced => inner.tick(),
            refusing => refusing,
        };
        if phase.refuses() {
            inner.leave();
            Err(phase)
        } else {
            Ok(RequestGuard {
                drain: self.clone(),
            })
        }
    }

    /// Counts an open connection until the guard drops (reported in [`Outcome`], never awaited).
    pub fn connection(&self) -> ConnectionGuard {
        self.inner.connections.fetch_add(1, Relaxed);
        ConnectionGuard {
            drain: self.clone(),
        }
    }

    /// Counts a long-lived session (a WebSocket, an SSE stream, a gRPC stream) until the guard
    /// drops: [`finished`](Self::finished) waits for it, and [`Session::reconnect`] tells the
    /// handler when to ask its client to reconnect elsewhere.
    ///
    /// Open it while the request that starts the session is still counted in flight: in the
    /// handler, before it returns the `101` (not in the upgrade callback, which runs after the
    /// request has ended), so that the drain cannot end between the two.
    pub fn session(&self) -> Session {
        let inner = &*self.inner;
        inner.gate.open_session();
        let id = inner.next_session.fetch_add(1, Relaxed);
        Session {
            drain: self.clone(),
            offset: spread_offset(id, inner.config.reconnect_spread),
        }
    }

    /// Resolves once the drain is announced. The future owns a clone of the handle
    /// (`'static`).
    pub fn announced(&self) -> impl Future<Output = ()> + Send + 'static + use<> {
        let drain = self.clone();
        async move {
            drain.inner.wait(|phase| phase >= Phase::Announced).await;
        }
    }

    /// Resolves when the drain starts refusing requests: hand it to
    /// `axum::serve(..).with_graceful_shutdown(..)` or tonic's `serve_with_shutdown(..)`, which
    /// then stop accepting connections, close idle ones and send GOAWAY. Resolving at
    /// [`start`](Self::start) instead would refuse connections while endpoints still route here.
    ///
    /// The future owns a clone of the handle (`'static`, as axum requires).
    pub fn stop_accepting(&self) -> impl Future<Output = ()> + Send + 'static + use<> {
        let drain = self.clone();
        async move {
            drain.inner.wait(Phase::refuses).await;
        }
    }

    /// Resolves when nothing is in flight and no session is open ([`Outcome::Drained`]), or at
    /// the deadline ([`Outcome::Expired`], with what was left), whichever comes first. Pending
    /// until the drain starts. The future owns a clone of the handle (`'static`).
    pub fn finished(&self) -> impl Future<Output = Outcome> + Send + 'static + use<> {
        let drain = self.clone();
        async move { drain.outcome().await }
    }

    async fn outcome(&self) -> Outcome {
        let inner = &*self.inner;
        let phase = inner.wait(Phase::is_final).await;
        let connections = inner.connections.load(Relaxed);
        match phase {
            Phase::Drained => Outcome::Drained { connections },
            _ => Outcome::Expired {
                in_flight: inner.gate.in_flight(),
                sessions: inner.gate.sessions(),
                connections,
            },
        }
    }
}

impl Default for Drain {
    /// [`Drain::builder`]'s defaults, which are valid.
    fn default() -> Self {
        Drain::from_builder(DrainBuilder::default())
    }
}

impl Inner {
    /// The phase now, after the transitions that are due, in order: the delay's end, `Drained`
    /// once idle, then the deadline (so an idle drain read late is `Drained`, not `Expired`).
    fn tick(&self) -> Phase {
        let phase = self.gate.phase();
        if matches!(phase, Phase::Serving) || phase.is_final() {
            return phase;
        }
        let now = Instant::now();
        if phase == Phase::Announced
            && let Some(end) = self.delay_end()
            && now >= end
        {
            self.begin_draining(end);
        }
        if self.gate.phase() == Phase::Draining
            && self.gate.idle()
            && self.gate.advance(Phase::Draining, Phase::Drained)
        {
            self.changed.notify_waiters();
        }
        if let Some(deadline) = self.deadline()
            && now >= deadline
            && (self.gate.advance(Phase::Announced, Phase::Expired)
                || self.gate.advance(Phase::Draining, Phase::Expired))
        {
            self.changed.notify_waiters();
        }
        self.gate.phase()
    }

    /// `Announced` → `Draining`, dated `at`; true if this call made the move.
    fn begin_draining(&self, at: Instant) -> bool {
        let _ = self.draining_at.set(at);
        let moved = self.gate.advance(Phase::Announced, Phase::Draining);
        if moved {
            self.changed.notify_waiters();
            // Idle already: drained at once.
            self.tick();
        }
        moved
    }

    fn delay_end(&self) -> Option<Instant> {
        let at = self.announced_at.get()?;
        Some(*at + self.config.propagation_delay)
    }

    fn deadline(&self) -> Option<Instant> {
        let at = self.announced_at.get()?;
        Some(*at + self.config.deadline)
    }

    fn leave(&self) {
        if self.gate.leave() {
            self.tick();
            self.changed.notify_waiters();
        }
    }

    fn close_session(&self) {
        if self.gate.close_session() {
            self.tick();
            self.changed.notify_waiters();
        }
    }

    /// Waits until `done(phase)`, waking at each phase change and at the next timed transition
    /// (the delay's end, the deadline), which [`tick`](Self::tick) then makes.
    async fn wait(&self, done: impl Fn(Phase) -> bool) -> Phase {
        loop {
            let mut notified = pin!(self.changed.notified());
            notified.as_mut().enable();
            let phase = self.tick();
            if done(phase) {
                return phase;
            }
            // The next timed transition: the end of the delay, or the deadline.
            let next = match phase {
                Phase::Announced => self.delay_end(),
                Phase::Draining => self.deadline(),
                _ => None,
            };
            match next {
                Some(at) => {
                    let mut sleep = pin!(sleep_until(at));
                    poll_fn(|cx| {
                        if notified.as_mut().poll(cx).is_ready()
                            || sleep.as_mut().poll(cx).is_ready()
                        {
                            Poll::Ready(())
                        } else {
                            Poll::Pending
                        }
                    })
                    .await;
                }
                None => notified.await,
            }
        }
    }
}

/// A request counted in flight; see [`Drain::admit`].
#[derive(Debug)]
#[must_use = "the request counts as in flight only while the guard lives"]
pub struct RequestGuard {
    drain: Drain,
}

impl RequestGuard {
    /// The drain that counts this request.
    #[cfg(feature = "http")]
    pub(crate) fn drain(&self) -> &Drain {
        &self.drain
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.drain.inner.leave();
    }
}

/// An open connection; see [`Drain::connection`].
#[derive(Debug)]
#[must_use = "the connection counts as open only while the guard lives"]
pub struct ConnectionGuard {
    drain: Drain,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.drain.inner.connections.fetch_sub(1, Relaxed);
    }
}

/// A long-lived session; see [`Drain::session`].
#[derive(Debug)]
#[must_use = "the session counts as open only while the guard lives"]
pub struct Session {
    drain: Drain,
    offset: Duration,
}

impl Session {
    /// Resolves when this session should ask its client to reconnect elsewhere (send WebSocket
    /// Close 1001 "going away", or end the stream): at the start of
    /// [`Draining`](Phase::Draining) plus this session's offset within the reconnect spread.
    pub async fn reconnect(&self) {
        let inner = &*self.drain.inner;
        inner.wait(Phase::refuses).await;
        if let Some(at) = inner.draining_at.get() {
            sleep_until(*at + self.offset).await;
        }
    }

    /// This session's delay after the start of `Draining`, in `[0, reconnect_spread)`.
    pub fn offset(&self) -> Duration {
        self.offset
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.drain.inner.close_session();
    }
}

/// A deterministic offset in `[0, spread)` for session `id`: the golden-ratio sequence, so
/// consecutive sessions spread evenly.
fn spread_offset(id: u64, spread: Duration) -> Duration {
    if spread.is_zero() {
        return Duration::ZERO;
    }
    // frac(id · φ⁻¹) in 64-bit fixed point.
    let fraction = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let nanos = (u128::from(fraction) * spread.as_nanos()) >> 64;
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}
