//! The waits a queue gate or a lag probe saw, as a histogram for the metrics.

use std::fmt;
use std::time::Duration;

use crate::sync::Striped;

/// The histogram's upper bounds, in ns (Prometheus' `le`): 1 ms to 5 s; one more bucket
/// counts the longer waits.
pub(crate) const BOUNDS_NANOS: [u64; 12] = [
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

/// How many waits fell in each bucket, and their sum: cumulative since the histogram was built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Waits {
    buckets: [u64; BUCKETS],
    sum_micros: u64,
}

impl Waits {
    /// `(upper bound, waits at or below it)` for each finite bound, as Prometheus' `le` buckets.
    pub(crate) fn cumulative(&self) -> [(Duration, u64); BOUNDS_NANOS.len()] {
        let mut total = 0;
        std::array::from_fn(|i| {
            total += self.buckets[i];
            (Duration::from_nanos(BOUNDS_NANOS[i]), total)
        })
    }

    /// How many waits were recorded (the `+Inf` bucket).
    pub(crate) fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The waits summed (each to the nearest µs).
    pub(crate) fn sum(&self) -> Duration {
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

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use std::time::Duration;

    use super::WaitHistogram;

    #[test]
    fn waits_land_in_cumulative_buckets_and_sum_to_the_microsecond() {
        let histogram = WaitHistogram::new();
        histogram.record(3_000_000); // 3 ms
        histogram.record(40_000_000); // 40 ms
        histogram.record(5_000_000); // on a bound: at or below it
        histogram.record(6_000_000_000); // beyond the last bound: only in `+Inf`
        histogram.record(1_499); // 1 µs, rounded to the nearest
        let waits = histogram.get();
        assert_eq!(waits.count(), 5);
        let cumulative = waits.cumulative();
        assert_eq!(cumulative[0], (Duration::from_millis(1), 1));
        assert_eq!(cumulative[2], (Duration::from_millis(5), 3));
        assert_eq!(cumulative[5], (Duration::from_millis(50), 4));
        assert_eq!(cumulative[11], (Duration::from_secs(5), 4));
        assert_eq!(
            waits.sum(),
            Duration::from_millis(6_048) + Duration::from_micros(1)
        );
    }
}
