//! The probe's task: sleeps on tokio's timer, measures on the decisions' clock.

use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::probe::{LagProbe, ProbeState};
use crate::clock::Clock;

impl LagProbe {
    /// The probe's task, for you to spawn: `tokio::spawn(probe.run(clock))`. It sleeps on
    /// tokio's timer until each deadline, `interval` apart on `clock`, then
    /// [`tick`](Self::tick)s with the deadline and `clock`'s reading.
    ///
    /// `clock` must be the clock whose readings the decisions are given: a copy of the
    /// shedder's, for instance (two `MonotonicClock::new()` count from different origins). It
    /// must keep pace with tokio's timer: a [`ManualClock`](crate::clock::ManualClock) nobody
    /// advances stretches every sleep.
    ///
    /// Calling `run` arms the heartbeat, so a task that never gets to run is seen stalled.
    /// Missed ticks are not made up: after a tick an interval or more late, the next is due an
    /// interval after it. The task ends at its first tick after the probe's last clone is
    /// dropped. If the task is dropped first (aborted, or its runtime shut down), the probe goes
    /// cold again (heartbeat disarmed, drop probability 0) and another `run` may take over.
    /// One task per probe: while one is alive, `run` returns a future that ends at once.
    ///
    /// # Panics
    ///
    /// Polled outside a tokio runtime with its timer enabled.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use admit::clock::{Clock, MonotonicClock};
    /// use admit::signal::queue::LagProbe;
    /// use admit::signal::{Arrival, OverloadSignal};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let clock = MonotonicClock::new(); // Copy: copies share the origin
    /// let probe = LagProbe::default();
    /// tokio::spawn(probe.run(clock));
    /// tokio::time::sleep(Duration::from_millis(30)).await;
    /// if probe.assess(&Arrival::new().at(clock.now_nanos())).refuses() {
    ///     // Refuse the request: the runtime is lagging.
    /// }
    /// # }
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub fn run<C: Clock + 'static>(
        &self,
        clock: C,
    ) -> impl Future<Output = ()> + Send + 'static + use<C> {
        let start_ns = clock.now_nanos();
        let interval_ns = self.state.interval_ns();
        let claim = self
            .state
            .claim(start_ns)
            .then(|| Claim(Arc::downgrade(&self.state)));
        async move {
            if let Some(claim) = claim {
                claim.ticks(&clock, start_ns, interval_ns).await;
            }
        }
    }
}

/// A task's hold on its probe, which it gives back when the task ends or is dropped. Weak, so
/// that the task never keeps the probe alive.
struct Claim(Weak<ProbeState>);

impl Claim {
    async fn ticks<C: Clock>(&self, clock: &C, start_ns: u64, interval_ns: u64) {
        let mut deadline = start_ns;
        loop {
            deadline = deadline.saturating_add(interval_ns);
            let now = clock.now_nanos();
            if deadline > now {
                tokio::time::sleep(Duration::from_nanos(deadline - now)).await;
            }
            // Held only until the next sleep.
            let Some(state) = self.0.upgrade() else {
                return;
            };
            let now = clock.now_nanos();
            if state.tick(deadline, now) >= interval_ns {
                deadline = now; // re-anchored: the next tick is due an interval from now
            }
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(state) = self.0.upgrade() {
            state.release();
        }
    }
}
