//! The waits a queue gate saw, as a histogram by source.

use std::fmt;
use std::time::Duration;

use crate::sync::Striped;

/// The histogram's upper bounds, in ns (Prometheus' `le`): 1 ms to 5 s; one more bucket
/// counts the longer waits.
pub const BOUNDS_NANOS: [u64; 12] = [
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
];
const BUCKETS: usize = BOUNDS_NANOS.len() + 1;
/// The counter of the summed waits, in µs, after the buckets.
const SUM: usize = BUCKETS;

/// Where a wait was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WaitSource {
    /// Before a request reached the shedder: a layer's reader (`RequestStart`, a proxy's header), or
    /// [`Shedder::allow_with`](crate::shed::Shedder::allow_with).
    Request,
    /// In a pool inside the process ([`QueueStamp`](super::QueueStamp)).
    Pool,
    /// A runtime lag probe's timer lateness ([`LagProbe`](super::LagProbe)).
    Probe,
}

impl WaitSource {
    /// Every source.
    pub const ALL: [WaitSource; 3] = [WaitSource::Request, WaitSource::Pool, WaitSource::Probe];

    /// `request`, `pool` or `probe`: the `source` label.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitSource::Request => "request",
            WaitSource::Pool => "pool",
            WaitSource::Probe => "probe",
        }
    }

    pub(crate) fn index(self) -> usize {
        match self {
            WaitSource::Request => 0,
            WaitSource::Pool => 1,
            WaitSource::Probe => 2,
        }
    }
}

/// How many waits fell in each bucket, and their sum: cumulative since the gate was built.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::signal::queue::{QueueGate, WaitSource};
///
/// let gate = QueueGate::default();
/// gate.record(0, 3_000_000); // 3 ms
/// gate.record(0, 40_000_000); // 40 ms
/// let waits = gate.waits(WaitSource::Request);
/// assert_eq!(waits.count(), 2);
/// assert_eq!(waits.cumulative()[2], (Duration::from_millis(5), 1)); // 1 wait ≤ 5 ms
/// assert_eq!(waits.sum(), Duration::from_millis(43));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waits {
    buckets: [u64; BUCKETS],
    sum_micros: u64,
}

impl Waits {
    /// `(upper bound, waits at or below it)` for each finite bound, as Prometheus' `le` buckets.
    pub fn cumulative(&self) -> [(Duration, u64); BOUNDS_NANOS.len()] {
        let mut total = 0;
        std::array::from_fn(|i| {
            total += self.buckets[i];
            (Duration::from_nanos(BOUNDS_NANOS[i]), total)
        })
    }

    /// How many waits were recorded (the `+Inf` bucket).
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The waits summed (each to the nearest µs).
    pub fn sum(&self) -> Duration {
        Duration::from_micros(self.sum_micros)
    }
}

/// The counters behind [`Waits`], striped by thread: a record is a bucket search and two plain
/// stores on the calling thread's stripe.
pub(crate) struct WaitHistogram(Striped<{ BUCKETS + 1 }>);

impl WaitHistogram {
    pub(crate) fn new() -> Self {
        WaitHistogram(Striped::new())
    }

    #[inline]
    pub(crate) fn record(&self, nanos: u64) {
        let bucket = BOUNDS_NANOS.partition_point(|&bound| bound < nanos);
        self.0
            .add_two((bucket, 1), (SUM, nanos.saturating_add(500) / 1_000));
    }

    pub(crate) fn get(&self) -> Waits {
        Waits {
            buckets: std::array::from_fn(|i| self.0.sum(i)),
            sum_micros: self.0.sum(SUM),
        }
    }
}

impl fmt::Debug for WaitHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("WaitHistogram").field(&self.get()).finish()
    }
}
