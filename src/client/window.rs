//! The client's sliding windows: two counts per epoch in a ring, with running sums over the
//! epochs the window holds, under one short lock.

use crate::sync::{Mutex, MutexGuard};

/// A ring behind its lock, and the length of its epochs.
#[derive(Debug)]
pub(super) struct Window {
    ring: Mutex<Ring>,
    buckets: usize,
    bucket_nanos: u64,
}

impl Window {
    /// A window of `buckets` epochs (`buckets >= 1`) of `bucket_nanos` each (`>= 1`).
    pub(super) fn new(buckets: usize, bucket_nanos: u64) -> Self {
        Window {
            ring: Mutex::new(Ring::new(buckets)),
            buckets,
            bucket_nanos,
        }
    }

    /// The ring, moved to `now_nanos`.
    pub(super) fn at(&self, now_nanos: u64) -> MutexGuard<'_, Ring> {
        // Nothing under this lock is left half-updated by a panic.
        let mut ring = self
            .ring
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ring.advance(now_nanos / self.bucket_nanos);
        ring
    }

    /// The length of an epoch.
    pub(super) fn bucket_nanos(&self) -> u64 {
        self.bucket_nanos
    }

    /// How many epochs the window holds.
    pub(super) fn buckets(&self) -> usize {
        self.buckets
    }
}

/// `size` epochs of counts; the newest is the one events count toward.
#[derive(Debug)]
pub(super) struct Ring {
    /// `(requests, accepts)` of epoch `e` in slot `e % size`.
    counts: Box<[(u64, u64)]>,
    /// The newest epoch counted toward.
    newest: u64,
    /// The sums over the ring.
    requests: u64,
    accepts: u64,
}

impl Ring {
    /// A ring of `size` epochs (`size >= 1`), all empty, the newest epoch 0.
    pub(super) fn new(size: usize) -> Self {
        Ring {
            counts: vec![(0, 0); size].into_boxed_slice(),
            newest: 0,
            requests: 0,
            accepts: 0,
        }
    }

    /// Moves the window to `epoch`: the epochs that leave it are emptied. An epoch older than
    /// the newest (a clock reading taken before another thread's) counts toward the newest.
    pub(super) fn advance(&mut self, epoch: u64) {
        let Some(ahead) = epoch.checked_sub(self.newest).filter(|&ahead| ahead > 0) else {
            return;
        };
        let size = self.counts.len() as u64;
        for step in 1..=ahead.min(size) {
            let slot = &mut self.counts[((self.newest + step) % size) as usize];
            self.requests -= slot.0;
            self.accepts -= slot.1;
            *slot = (0, 0);
        }
        self.newest = epoch;
    }

    /// Counts `requests` and `accepts` toward the newest epoch (saturating).
    pub(super) fn add(&mut self, requests: u64, accepts: u64) {
        let size = self.counts.len() as u64;
        let slot = &mut self.counts[(self.newest % size) as usize];
        // The sums are at least each slot's count, so they saturate first: a slot is never
        // subtracted beyond what the sums hold.
        let requests = requests.min(u64::MAX - self.requests);
        let accepts = accepts.min(u64::MAX - self.accepts);
        slot.0 += requests;
        slot.1 += accepts;
        self.requests += requests;
        self.accepts += accepts;
    }

    /// The requests and accepts in the window.
    pub(super) fn sums(&self) -> (u64, u64) {
        (self.requests, self.accepts)
    }
}

#[cfg(test)]
mod tests {
    use super::Ring;

    #[test]
    fn epochs_leave_the_window_as_it_moves() {
        let mut ring = Ring::new(3);
        ring.add(5, 4);
        ring.advance(1);
        ring.add(2, 0);
        ring.advance(2);
        assert_eq!(ring.sums(), (7, 4));
        // Epoch 0 leaves at 3, epoch 1 at 4.
        ring.advance(3);
        assert_eq!(ring.sums(), (2, 0));
        // A late reading counts toward the newest epoch.
        ring.advance(1);
        ring.add(1, 1);
        assert_eq!(ring.sums(), (3, 1));
        // A jump past the whole window empties it.
        ring.advance(1_000);
        assert_eq!(ring.sums(), (0, 0));
    }

    #[test]
    fn counts_saturate_without_underflowing_later() {
        let mut ring = Ring::new(2);
        ring.add(u64::MAX, 1);
        ring.advance(1);
        ring.add(10, 10);
        assert_eq!(ring.sums(), (u64::MAX, 11));
        ring.advance(2);
        assert_eq!(ring.sums(), (0, 10));
    }
}
