//! The in-process sojourn: how long a job waited in a pool or behind `spawn_blocking`.

use std::error::Error;
use std::fmt;
use std::time::Duration;

use super::QueueGate;
use super::gate::WaitSource;
use crate::clock::Clock;

/// When a job was queued inside the process (for `spawn_blocking`, a bounded pool, a permit
/// wait), on the shedder's clock. At the job's start, [`started`](Self::started) records its
/// wait in the queue gate and says whether the job is still worth running: a job that waited
/// more than twice the gate's target while the gate is hot is dropped, which keeps the queue
/// short (see the [guide](crate::guide::signals)).
///
/// `Copy`, eight bytes, no allocation.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::clock::{Clock, ManualClock};
/// use admit::signal::queue::{QueueGate, QueueStamp};
///
/// let clock = ManualClock::new();
/// let gate = QueueGate::default(); // 5 ms target, 100 ms intervals
/// // The pool's jobs from 100 ms to 200 ms all waited 50 ms.
/// clock.set(Duration::from_millis(100));
/// let stamp = QueueStamp::now(&clock);
/// clock.set(Duration::from_millis(150));
/// assert_eq!(stamp.started(&gate, clock.now_nanos()), Ok(Duration::from_millis(50)));
/// // From 200 ms the gate is hot: a job that waited 50 ms is expired.
/// clock.set(Duration::from_millis(200));
/// let stamp = QueueStamp::now(&clock);
/// clock.set(Duration::from_millis(250));
/// let expired = stamp.started(&gate, clock.now_nanos()).unwrap_err();
/// assert_eq!(expired.waited(), Duration::from_millis(50));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QueueStamp(u64);

impl QueueStamp {
    /// Stamps a job queued at clock reading `now_ns`.
    pub fn at(now_ns: u64) -> Self {
        QueueStamp(now_ns)
    }

    /// Stamps a job queued now on `clock` (use the shedder's: the wait is measured on it).
    pub fn now(clock: &impl Clock) -> Self {
        QueueStamp(clock.now_nanos())
    }

    /// The job starts at clock reading `now_ns`: records its wait in `gate` and returns it, or
    /// [`Expired`] if the gate is hot and the job waited more than twice the target (drop the
    /// job and answer its request as refused).
    ///
    /// # Errors
    ///
    /// [`Expired`], with the wait.
    pub fn started(self, gate: &QueueGate, now_ns: u64) -> Result<Duration, Expired> {
        let waited = now_ns.saturating_sub(self.0);
        let (_, pressure) = gate.judge(WaitSource::Pool, now_ns, Some(waited));
        if pressure.refuses() {
            Err(Expired(waited))
        } else {
            Ok(Duration::from_nanos(waited))
        }
    }
}

/// A queued job waited too long to be worth running (see [`QueueStamp::started`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Expired(u64);

impl Expired {
    /// How long the job waited.
    pub fn waited(&self) -> Duration {
        Duration::from_nanos(self.0)
    }
}

impl fmt::Display for Expired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the job waited {:?} in the queue while it was overloaded",
            self.waited()
        )
    }
}

impl Error for Expired {}
