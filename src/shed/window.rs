//! A lock-free rolling window with go-zero's `RollingWindow` semantics.
//!
//! go-zero keeps `size` buckets under a lock and re-aligns them to a grid anchored at the
//! window's construction. Its visible contents have a closed form: at time `t`, with epoch
//! `e(t) = floor((t − construction) / interval)`, a `Reduce` that ignores the current bucket sees
//! exactly the values added during epochs `e − (size − 1) ..= e − 1` (and, without ignoring the
//! current bucket, `e − (size − 1) ..= e`, the oldest visible epoch being `e − (size − 1)` in both
//! cases but for the current one). That is what this window stores: bucket `i` holds epoch
//! `e ≡ i (mod size)`, and every word is tagged with its epoch, so a bucket belonging to an older
//! epoch reads as empty and is reset by the first add of its new epoch.
//!
//! Each bucket is independent words, each a compare-and-swap target packing
//! `[epoch (low 32 bits): 32 | value: 32]`, so an add is exact even against a concurrent reset.
//! Values saturate at `u32::MAX` instead of wrapping.
//!
//! A bucket's counters are read in index order ([`RollingWindow::values`]) and each is written
//! by its own compare-and-swap. A caller that must never show one counter ahead of another
//! (a pass count whose latency is not yet in the latency sum) writes the higher index first:
//! whoever reads the lower index's new value then reads the higher one's too.

use crate::sync::{AtomicU64, Ordering};

/// How many counters a bucket holds.
pub(crate) const COUNTERS: usize = 3;

/// A bucket's counters, one tagged word each.
#[derive(Debug)]
struct Bucket {
    counters: [AtomicU64; COUNTERS],
}

/// The values of one bucket as a reduce sees them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BucketValues(pub(crate) [u64; COUNTERS]);

/// `size` buckets of `COUNTERS` counters each, indexed by epoch.
#[derive(Debug)]
pub(crate) struct RollingWindow {
    buckets: Box<[Bucket]>,
}

/// An epoch's tag: its low 32 bits.
fn tag(epoch: u64) -> u64 {
    epoch & u64::from(u32::MAX)
}

impl RollingWindow {
    /// A window of `size` buckets (`size >= 1`).
    pub(crate) fn new(size: usize) -> Self {
        let buckets = (0..size)
            .map(|_| Bucket {
                counters: std::array::from_fn(|_| AtomicU64::new(tag(u64::MAX) << 32)),
            })
            .collect();
        RollingWindow { buckets }
    }

    fn size(&self) -> u64 {
        self.buckets.len() as u64
    }

    fn bucket(&self, epoch: u64) -> &Bucket {
        &self.buckets[(epoch % self.size()) as usize]
    }

    /// Adds `value` to counter `counter` of `epoch`'s bucket.
    ///
    /// A caller whose epoch is at least a whole window older than the bucket's (a clock reading
    /// so stale that the value would already have left the window) adds nothing.
    #[inline]
    pub(crate) fn add(&self, epoch: u64, counter: usize, value: u64) {
        self.add_to(self.bucket(epoch), epoch, counter, value);
    }

    #[inline]
    fn add_to(&self, bucket: &Bucket, epoch: u64, counter: usize, value: u64) {
        let word = &bucket.counters[counter];
        let own = tag(epoch);
        let mut current = word.load(Ordering::Acquire);
        loop {
            let held = current >> 32;
            let next = if held == own {
                let sum = (current & u64::from(u32::MAX)).saturating_add(value);
                own << 32 | sum.min(u64::from(u32::MAX))
            } else if self.is_newer(held, own) {
                return;
            } else {
                own << 32 | value.min(u64::from(u32::MAX))
            };
            match word.compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    /// Adds a pass and its latency to `epoch`'s bucket: the latency sum ([`LATENCY_SUM`]) first,
    /// then the pass count ([`PASSES`]), so that a reader never sees a pass without its latency.
    ///
    /// [`LATENCY_SUM`]: super::shedder::LATENCY_SUM
    /// [`PASSES`]: super::shedder::PASSES
    #[inline]
    pub(crate) fn add_pass(&self, epoch: u64, latency: u64) {
        let bucket = self.bucket(epoch);
        self.add_to(bucket, epoch, super::shedder::LATENCY_SUM, latency);
        self.add_to(bucket, epoch, super::shedder::PASSES, 1);
    }

    /// Whether tag `held` is a later epoch than `own`: a later epoch in the same bucket is a
    /// whole number of windows ahead, by less than 2^31 epochs. (Tags wrap every 2^32 epochs: a
    /// bucket untouched for 2^31 epochs or more, 24.8 days with 1 ms buckets, can only be told
    /// from a newer one by that whole-windows test.)
    fn is_newer(&self, held: u64, own: u64) -> bool {
        let ahead = held.wrapping_sub(own) & u64::from(u32::MAX);
        ahead != 0 && ahead < 1 << 31 && ahead.is_multiple_of(self.size())
    }

    /// The values `epoch` holds (zeros if its bucket holds another epoch).
    pub(crate) fn values(&self, epoch: u64) -> BucketValues {
        let own = tag(epoch);
        let bucket = self.bucket(epoch);
        BucketValues(std::array::from_fn(|i| {
            let word = bucket.counters[i].load(Ordering::Acquire);
            if word >> 32 == own {
                word & u64::from(u32::MAX)
            } else {
                0
            }
        }))
    }

    /// The epochs a go-zero `Reduce` at epoch `current` visits, oldest first: the `size − 1`
    /// before `current`, and `current` itself unless `ignore_current`. Epochs before the window
    /// began (negative ones) are skipped.
    pub(crate) fn visible(
        &self,
        current: u64,
        ignore_current: bool,
    ) -> impl Iterator<Item = u64> + use<> {
        let oldest = current.saturating_sub(self.size() - 1);
        let end = if ignore_current { current } else { current + 1 };
        oldest..end
    }
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use super::*;

    /// go-zero's `RollingWindow` test helper, on the lock-free window: a window whose epochs are
    /// derived from milliseconds since construction.
    struct Window {
        inner: RollingWindow,
        interval_ms: u64,
        ignore_current: bool,
        now_ms: u64,
    }

    impl Window {
        fn new(size: usize, interval_ms: u64, ignore_current: bool) -> Self {
            Window {
                inner: RollingWindow::new(size),
                interval_ms,
                ignore_current,
                now_ms: 0,
            }
        }

        fn epoch(&self) -> u64 {
            self.now_ms / self.interval_ms
        }

        fn add(&self, value: u64) {
            self.inner.add(self.epoch(), 0, value);
            self.inner.add(self.epoch(), 1, 1);
        }

        /// Sums of the visible buckets, oldest first, as go-zero's tests list them: every bucket
        /// a `Reduce` visits, empty ones included.
        fn reduce(&self) -> Vec<u64> {
            self.inner
                .visible(self.epoch(), self.ignore_current)
                .map(|epoch| self.inner.values(epoch).0[0])
                .collect()
        }
    }

    #[test]
    fn vector_1_add() {
        let mut w = Window::new(3, 50, false);
        assert_eq!(w.reduce(), [0]); // go-zero lists [0,0,0]: buckets before the start are empty
        w.add(1);
        assert_eq!(w.reduce(), [1]);
        w.now_ms = 50;
        w.add(2);
        w.add(3);
        assert_eq!(w.reduce(), [1, 5]);
        w.now_ms = 100;
        w.add(4);
        w.add(5);
        w.add(6);
        assert_eq!(w.reduce(), [1, 5, 15]);
        w.now_ms = 150;
        w.add(7);
        assert_eq!(w.reduce(), [5, 15, 7]);
    }

    #[test]
    fn vector_2_reset_with_ignore_current() {
        let mut w = Window::new(3, 50, true);
        w.add(1);
        w.now_ms = 50;
        assert_eq!(w.reduce(), [1]); // go-zero: [0, 1]; the leading 0 is before the start
        w.now_ms = 100;
        assert_eq!(w.reduce(), [1, 0]);
        w.now_ms = 150;
        assert_eq!(w.reduce(), [0, 0]);
        w.add(1);
        w.now_ms += 500;
        assert_eq!(w.reduce(), [0, 0]);
    }

    #[test]
    fn vector_3_reduce() {
        for (ignore_current, expected) in [(false, 10), (true, 4)] {
            let mut w = Window::new(4, 50, ignore_current);
            for x in 0..4u64 {
                for value in 0..=x {
                    w.add(value);
                }
                if x < 3 {
                    w.now_ms += 50;
                }
            }
            assert_eq!(w.reduce().iter().sum::<u64>(), expected, "{ignore_current}");
        }
    }

    #[test]
    fn vector_4_bucket_boundaries_follow_the_construction_grid() {
        let mut w = Window::new(3, 30, false);
        w.add(1);
        assert_eq!(w.reduce(), [1]);
        w.now_ms = 45;
        w.add(2);
        w.add(3);
        assert_eq!(w.reduce(), [1, 5]);
        w.now_ms = 65; // the bucket boundary is at 60, not 45 + 30
        w.add(4);
        w.add(5);
        w.add(6);
        assert_eq!(w.reduce(), [1, 5, 15]);
        w.now_ms = 165;
        w.add(7);
        w.add(8);
        w.add(9);
        assert_eq!(w.reduce(), [0, 0, 24]);
    }

    #[test]
    fn vector_5_visibility_with_the_shedders_defaults() {
        let mut w = Window::new(50, 100, true);
        w.add(1);
        let visible = |w: &Window| w.reduce().iter().sum::<u64>();
        w.now_ms = 99;
        assert_eq!(visible(&w), 0, "invisible while its bucket is current");
        for now_ms in [100, 2500, 4999] {
            w.now_ms = now_ms;
            assert_eq!(visible(&w), 1, "visible at {now_ms} ms");
        }
        w.now_ms = 5000;
        assert_eq!(visible(&w), 0, "gone after 4.9 s of visibility");
    }

    #[test]
    fn a_bucket_reused_by_a_later_epoch_starts_from_zero() {
        let w = RollingWindow::new(3);
        w.add(1, 0, 7);
        w.add(4, 0, 2);
        assert_eq!(w.values(4).0[0], 2);
        assert_eq!(w.values(1).0[0], 0);
    }

    #[test]
    fn a_stale_caller_cannot_write_into_a_later_epoch() {
        let w = RollingWindow::new(3);
        w.add(4, 0, 2);
        w.add(1, 0, 7); // three epochs behind: its value would already have left the window
        assert_eq!(w.values(4).0[0], 2);
        // However late: 130 windows behind.
        w.add(4 + 3 * 130, 0, 5);
        w.add(4, 0, 7);
        assert_eq!(w.values(4 + 3 * 130).0[0], 5);
    }

    #[test]
    fn tags_that_wrapped_read_as_stale_not_as_the_future() {
        let w = RollingWindow::new(3);
        let old = 3u64;
        w.add(old, 0, 5);
        // 2^32 − 1 epochs later the same bucket comes round again, with a tag one behind the
        // stored one modulo 2^32: not a whole window, so the stored tag is stale, not newer.
        let later = old + (1 << 32) - 1;
        assert_eq!(later % 3, old % 3);
        w.add(later, 0, 1);
        assert_eq!(w.values(later).0[0], 1);
    }

    #[test]
    fn values_saturate_instead_of_wrapping() {
        let w = RollingWindow::new(2);
        w.add(0, 2, u64::from(u32::MAX) - 1);
        w.add(0, 2, 10);
        assert_eq!(w.values(0).0[2], u64::from(u32::MAX));
    }
}
