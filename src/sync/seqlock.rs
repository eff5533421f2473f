//! A sequence lock over a few 64-bit words: readers never block or write, writers are rare.
//!
//! Readers load the version, the words and the version again, and keep the words only if the
//! version was even and unchanged: no writer was active in between, so the words belong to one
//! write. A writer makes the version odd with a compare-and-swap (so two writers never
//! interleave their words), stores the words and makes it even again. Everything is an atomic
//! word, so a torn read is merely discarded, never undefined.
//!
//! Orderings, as in crossbeam's and the Linux kernel's sequence locks: the writer's CAS is
//! followed by a release fence, so no word store becomes visible before the odd version; the
//! final version store releases the words. The reader's first version load acquires, and an
//! acquire fence after the word loads orders them before the second version load.

use super::{AtomicU64, Ordering, fence};

/// `N` words under one version.
#[derive(Debug)]
pub(crate) struct SeqLock<const N: usize> {
    /// Odd while a writer is storing the words.
    version: AtomicU64,
    words: [AtomicU64; N],
}

impl<const N: usize> SeqLock<N> {
    pub(crate) fn new(words: [u64; N]) -> Self {
        SeqLock {
            version: AtomicU64::new(0),
            words: words.map(AtomicU64::new),
        }
    }

    /// The words of one complete write, or `None` if a writer was active meanwhile.
    #[inline]
    pub(crate) fn try_read(&self) -> Option<[u64; N]> {
        self.try_read_from(0)
    }

    /// `K` words from word `first` on (`first + K ≤ N`) of one complete write, or `None` if a
    /// writer was active meanwhile.
    #[inline]
    pub(crate) fn try_read_from<const K: usize>(&self, first: usize) -> Option<[u64; K]> {
        let before = self.version.load(Ordering::Acquire);
        if before & 1 == 1 {
            return None;
        }
        let words = std::array::from_fn(|i| self.words[first + i].load(Ordering::Relaxed));
        fence(Ordering::Acquire);
        (self.version.load(Ordering::Relaxed) == before).then_some(words)
    }

    /// Whether no write has ever begun: the words are still the ones built with.
    #[inline]
    pub(crate) fn untouched(&self) -> bool {
        self.version.load(Ordering::Acquire) == 0
    }

    /// The words of one complete write, retrying while writers are active.
    #[inline]
    pub(crate) fn read(&self) -> [u64; N] {
        loop {
            if let Some(words) = self.try_read() {
                return words;
            }
            super::spin_loop();
        }
    }

    /// Stores `words` unless another writer is active (then nothing is written): `true` if
    /// written.
    pub(crate) fn try_write(&self, words: [u64; N]) -> bool {
        self.try_update(|_| Some(words))
    }

    /// Replaces the words with `update(current)` unless another writer is active or `update`
    /// returns `None` (then nothing is written): `true` if written. `update` sees the words no
    /// other writer can change meanwhile.
    pub(crate) fn try_update(&self, update: impl FnOnce([u64; N]) -> Option<[u64; N]>) -> bool {
        let version = self.version.load(Ordering::Relaxed);
        if version & 1 == 1
            || self
                .version
                .compare_exchange(version, version + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return false;
        }
        fence(Ordering::Release);
        let current = std::array::from_fn(|i| self.words[i].load(Ordering::Relaxed));
        let written = update(current).inspect(|words| {
            for (word, &value) in self.words.iter().zip(words) {
                word.store(value, Ordering::Relaxed);
            }
        });
        self.version.store(version + 2, Ordering::Release);
        written.is_some()
    }

    /// Stores `words`, waiting for any other writer to finish first.
    pub(crate) fn write(&self, words: [u64; N]) {
        while !self.try_write(words) {
            super::spin_loop();
        }
    }
}

#[cfg(all(test, admit_loom))]
mod loom_tests {
    use loom::sync::Arc;
    use loom::thread;

    use super::SeqLock;

    /// Readers racing two writers see one complete write or nothing, never a mix; a writer
    /// that finds another active gives up and leaves the other's words. (A reader started
    /// right after the spawns never sees a finished write in loom's exploration, so a second
    /// reader starts after the first writer has returned, racing the other.)
    #[test]
    fn loom_readers_never_see_a_torn_write() {
        loom::model(|| {
            let lock = Arc::new(SeqLock::new([0, 0]));
            let mut writers = [1, 2].map(|value| {
                let lock = Arc::clone(&lock);
                Some(thread::spawn(move || lock.try_write([value, value])))
            });
            if let Some([a, b]) = lock.try_read() {
                assert_eq!(a, b, "a torn read");
            }
            let first = writers[0].take().unwrap().join().unwrap();
            if let Some([a, b]) = lock.try_read() {
                assert_eq!(a, b, "a torn read");
                assert!(!first || a != 0, "the first writer's write is visible");
            }
            let second = writers[1].take().unwrap().join().unwrap();
            let wrote = [first, second];
            let [a, b] = lock.read();
            assert_eq!(a, b);
            match (wrote[0], wrote[1]) {
                (true, false) => assert_eq!(a, 1),
                (false, true) => assert_eq!(a, 2),
                (true, true) => assert!(a == 1 || a == 2),
                (false, false) => panic!("a writer only gives up while another is writing"),
            }
        });
    }

    /// `write` waits for a concurrent writer instead of giving up: both writes land, in
    /// some order.
    #[test]
    fn loom_blocking_writers_both_land() {
        loom::model(|| {
            let lock = Arc::new(SeqLock::new([0, 0]));
            let other = {
                let lock = Arc::clone(&lock);
                thread::spawn(move || lock.write([1, 1]))
            };
            lock.write([2, 2]);
            other.join().unwrap();
            let [a, b] = lock.read();
            assert_eq!(a, b);
            assert!(a == 1 || a == 2);
        });
    }
}
