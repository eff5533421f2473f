//! go-zero's `RollingWindow`, kept as marks on lifetime totals.
//!
//! go-zero keeps `size` buckets under a lock and re-aligns them to a grid anchored at the
//! window's construction. Its visible contents have a closed form: at time `t`, with epoch
//! `e(t) = floor((t − construction) / interval)`, a `Reduce` that ignores the current bucket sees
//! exactly the values added during epochs `e − (size − 1) ..= e − 1` (and, without ignoring the
//! current bucket, `e − (size − 1) ..= e`).
//!
//! Completions write nothing here. The shedder keeps lifetime totals ([`Totals`]), and the first
//! event of an epoch later than any before (a completion, a refusal, a decision that reads the
//! limit) records them as that epoch's mark before counting itself. An epoch's values are its
//! mark subtracted from the next mark, or from the totals now for the newest epoch: everything
//! counted while it was the newest. An epoch without a mark saw no event and is empty. A
//! completion whose clock reading lags the newest epoch counts toward the newest, as in go-zero,
//! which reads the clock under its lock when it adds.
//!
//! Marks live in a ring of `size` slots, slot `e mod size` holding epoch `e`'s mark tagged with
//! `e + 1` (0: none), each slot under the crate's sequence lock. A mark is written once, by the
//! first thread to see its epoch; later ones find it and write nothing.
//!
//! Passes and their latencies share one word ([`pass_code`](super::ledger::pass_code)): a reading of the totals never
//! splits a pass from its latency, which would understate a bucket's mean (down to 0 in a
//! bucket of one pass, and with it the limit). The word's pass field wraps every 2^20 passes; the
//! exact pass count, read beside it, tells how many times.

use super::ledger::{Ledger, MAX_LATENCY_MS, PASS_BITS, PASS_MASK, Totals};
use crate::sync::{AtomicU64, Ordering, SeqLock};

impl Totals {
    /// The values counted from `start` to `self`.
    fn since(self, start: Totals) -> Bucket {
        let others = self.others.saturating_sub(start.others);
        let Some(exact) = self.passes.checked_sub(start.passes) else {
            // Marks read out of order (a marking thread stalled past the next epoch's).
            return Bucket {
                passes: 0,
                latency_ms: None,
                others,
            };
        };
        let code = self.pass_code.wrapping_sub(start.pass_code);
        // The code holds its passes modulo 2^20. They differ from the exact count only by the
        // completions between the two words' readings, far fewer than 2^19: the nearest value
        // with the code's residue is the code's count.
        let ahead = code.wrapping_sub(exact) & PASS_MASK;
        let passes = if ahead < 1 << (PASS_BITS - 1) {
            exact + ahead
        } else {
            exact.saturating_sub((1 << PASS_BITS) - ahead)
        };
        let latency = code.wrapping_sub(passes) >> PASS_BITS;
        // A latency past half the field is a negative difference: marks read out of order.
        let latency_ms = (latency <= MAX_LATENCY_MS >> 1).then_some(latency);
        Bucket {
            passes,
            latency_ms,
            others,
        }
    }

    fn words(self, epoch: u64) -> [u64; 4] {
        [epoch + 1, self.passes, self.pass_code, self.others]
    }
}

/// What one epoch counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Bucket {
    pub(crate) passes: u64,
    /// The passes' latency sum, in ms; `None` if the marks disagree (see [`Totals::since`]).
    pub(crate) latency_ms: Option<u64>,
    pub(crate) others: u64,
}

impl Bucket {
    /// An epoch that counted nothing.
    const EMPTY: Bucket = Bucket {
        passes: 0,
        latency_ms: Some(0),
        others: 0,
    };
}

/// go-zero's window over the shedder's [`Ledger`], which it owns: the marks, and what they
/// mark.
#[derive(Debug)]
pub(super) struct RollingWindow {
    marks: Marks,
    ledger: Ledger,
}

impl RollingWindow {
    /// A window of `size` buckets (`size >= 1`) of `bucket_nanos` each (`>= 1`) over a ledger
    /// with nothing counted yet.
    pub(super) fn new(size: usize, bucket_nanos: u64) -> Self {
        RollingWindow {
            marks: Marks::new(size, bucket_nanos),
            ledger: Ledger::new(),
        }
    }

    /// The counts the window marks.
    #[inline]
    pub(super) fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The epoch `elapsed` ns after the window's origin falls in. The first caller in a new
    /// epoch marks it: call this before counting an event.
    #[inline]
    pub(super) fn epoch(&self, elapsed: u64) -> u64 {
        self.marks.epoch(elapsed, || self.ledger.totals())
    }

    /// Each bucket visible at epoch `current` (that one too unless `ignore_current`), from the
    /// newest, with its epoch.
    pub(super) fn for_each_visible(
        &self,
        current: u64,
        ignore_current: bool,
        each: impl FnMut(u64, Bucket),
    ) {
        self.marks
            .for_each_visible(current, ignore_current, || self.ledger.totals(), each);
    }
}

/// `size` epoch marks and the newest epoch marked, read against totals the caller gives.
#[derive(Debug)]
struct Marks {
    marks: Box<[SeqLock<4>]>,
    /// The newest epoch marked: most events fall in it and need no division.
    newest: AtomicU64,
    bucket_nanos: u64,
}

impl Marks {
    /// `size` marks (`size >= 1`) of epochs of `bucket_nanos` each (`>= 1`), epoch 0 starting
    /// with every total at zero.
    fn new(size: usize, bucket_nanos: u64) -> Self {
        let marks = (0..size)
            .map(|slot| SeqLock::new(if slot == 0 { [1, 0, 0, 0] } else { [0; 4] }))
            .collect();
        Marks {
            marks,
            newest: AtomicU64::new(0),
            bucket_nanos,
        }
    }

    fn size(&self) -> u64 {
        self.marks.len() as u64
    }

    fn slot(&self, epoch: u64) -> &SeqLock<4> {
        &self.marks[(epoch % self.size()) as usize]
    }

    /// The epoch `elapsed` ns after construction falls in. The first caller in an epoch later
    /// than any before marks it with `totals()`: call this before counting an event.
    #[inline]
    fn epoch(&self, elapsed: u64, totals: impl FnOnce() -> Totals) -> u64 {
        let newest = self.newest.load(Ordering::Relaxed);
        // `newest` is some earlier `elapsed / bucket_nanos`: the product cannot overflow.
        let start = newest * self.bucket_nanos;
        if elapsed >= start && elapsed - start < self.bucket_nanos {
            return newest;
        }
        let epoch = elapsed / self.bucket_nanos;
        if epoch > newest {
            self.open(epoch, totals);
        }
        epoch
    }

    /// Marks `epoch` unless its mark, or a later epoch's in its slot, is there already.
    #[cold]
    #[inline(never)]
    fn open(&self, epoch: u64, totals: impl FnOnce() -> Totals) {
        let slot = self.slot(epoch);
        let tag = epoch + 1;
        if slot.try_read().is_some_and(|[held, ..]| held >= tag) {
            return;
        }
        let totals = totals();
        // A writer active in the same slot is marking this epoch, unless it stalled for a whole
        // window: then this epoch's events count toward the one before.
        slot.try_update(|[held, ..]| (held < tag).then(|| totals.words(epoch)));
        self.newest.fetch_max(epoch, Ordering::Relaxed);
    }

    /// `epoch`'s mark, if it has one.
    fn mark(&self, epoch: u64) -> Option<Totals> {
        let [tag, passes, pass_code, others] = self.slot(epoch).read();
        (tag == epoch + 1).then_some(Totals {
            passes,
            pass_code,
            others,
        })
    }

    /// Calls `each` with every epoch a go-zero `Reduce` at epoch `current` visits and its
    /// values, newest first: the `size − 1` before `current`, and `current` itself unless
    /// `ignore_current` (epochs before construction are skipped). `live` gives the totals now,
    /// and is called only if the newest visible epoch's values run up to now.
    fn for_each_visible(
        &self,
        current: u64,
        ignore_current: bool,
        live: impl FnOnce() -> Totals,
        mut each: impl FnMut(u64, Bucket),
    ) {
        let oldest = current.saturating_sub(self.size() - 1);
        let mut live = Some(live);
        // Where the epoch being read ends: `None` for now.
        let mut end: Option<Totals> = None;
        for epoch in (oldest..=current).rev() {
            let mark = self.mark(epoch);
            if epoch == current && ignore_current {
                end = mark;
                continue;
            }
            let Some(start) = mark else {
                each(epoch, Bucket::EMPTY);
                continue;
            };
            let end_totals = match end {
                Some(totals) => totals,
                None => live.take().map_or(start, |live| live()),
            };
            each(epoch, end_totals.since(start));
            end = Some(start);
        }
    }
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use super::super::ledger::{one_pass, pass_code};
    use super::*;

    /// go-zero's `RollingWindow` test helper, on marks: a window whose epochs are derived from
    /// milliseconds since construction, over totals it keeps itself.
    struct Window {
        inner: Marks,
        ignore_current: bool,
        now_ms: u64,
        totals: Totals,
    }

    impl Window {
        fn new(size: usize, interval_ms: u64, ignore_current: bool) -> Self {
            Window {
                inner: Marks::new(size, interval_ms),
                ignore_current,
                now_ms: 0,
                totals: Totals::default(),
            }
        }

        fn epoch(&self) -> u64 {
            let totals = self.totals;
            self.inner.epoch(self.now_ms, || totals)
        }

        /// A pass of `value` ms.
        fn add(&mut self, value: u64) {
            self.epoch();
            self.totals.passes += 1;
            self.totals.pass_code = self.totals.pass_code.wrapping_add(one_pass(value));
        }

        /// Latency sums of the visible buckets, oldest first, as go-zero's tests list them:
        /// every bucket a `Reduce` visits, empty ones included.
        fn reduce(&self) -> Vec<u64> {
            let mut sums = Vec::new();
            let totals = self.totals;
            self.inner.for_each_visible(
                self.epoch(),
                self.ignore_current,
                || totals,
                |_, b| {
                    sums.push(b.latency_ms.unwrap());
                },
            );
            sums.reverse();
            sums
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
    fn a_late_event_counts_toward_the_newest_epoch() {
        let mut w = Window::new(3, 10, false);
        w.now_ms = 25;
        w.add(4);
        w.now_ms = 5; // a clock reading from epoch 0, after epoch 2 began
        w.add(6);
        w.now_ms = 25;
        assert_eq!(w.reduce(), [0, 0, 10]);
    }

    #[test]
    fn a_slot_reused_by_a_later_epoch_forgets_the_earlier_one() {
        let mut w = Window::new(3, 10, true);
        w.now_ms = 10;
        w.add(7); // epoch 1, slot 1
        w.now_ms = 40;
        w.add(2); // epoch 4, slot 1 again
        w.now_ms = 50;
        assert_eq!(w.reduce(), [0, 2]); // epochs 3 (no events) and 4
    }

    #[test]
    fn passes_beyond_the_code_field_are_recovered_from_the_exact_count() {
        let w = Marks::new(3, 10);
        let many = 3 << PASS_BITS | 5; // 3 · 2^20 + 5 passes of 2 ms each
        let totals = Totals {
            passes: many,
            pass_code: pass_code(many, 2 * many),
            others: 0,
        };
        w.epoch(10, || totals); // marks epoch 1
        let mut buckets = Vec::new();
        w.for_each_visible(1, true, || totals, |epoch, b| buckets.push((epoch, b)));
        assert_eq!(
            buckets,
            [(
                0,
                Bucket {
                    passes: many,
                    latency_ms: Some(2 * many),
                    others: 0
                }
            )]
        );
        // The exact count read a few completions apart from the code still resolves it.
        for skew in [-3i64, 3] {
            let start = Totals::default();
            let end = Totals {
                passes: many.wrapping_add_signed(skew),
                ..totals
            };
            let bucket = end.since(start);
            assert_eq!(
                (bucket.passes, bucket.latency_ms),
                (many, Some(2 * many)),
                "{skew}"
            );
        }
    }

    #[test]
    fn marks_read_out_of_order_give_no_latency() {
        let later = Totals {
            passes: 10,
            pass_code: pass_code(10, 50),
            others: 3,
        };
        let earlier = Totals {
            passes: 10,
            pass_code: pass_code(9, 45),
            others: 2,
        };
        // `earlier` taken as the bucket's end: its code is behind the start's.
        assert_eq!(
            earlier.since(later),
            Bucket {
                passes: 0,
                latency_ms: None,
                others: 0
            }
        );
        assert_eq!(later.since(earlier).latency_ms, Some(5));
    }
}

#[cfg(all(test, admit_loom))]
mod loom_tests {
    use std::sync::atomic::AtomicBool;
    use std::sync::atomic::Ordering::Relaxed;

    use loom::sync::Arc;
    use loom::thread;

    use super::super::ledger::pass_code;
    use super::*;

    /// Totals whose latency sum is 5 ms a pass and whose others equal the passes: any mix of two
    /// of them shows up as a bucket breaking that pattern.
    fn totals(passes: u64) -> Totals {
        Totals {
            passes,
            pass_code: pass_code(passes, 5 * passes),
            others: passes,
        }
    }

    fn whole(bucket: Bucket) -> bool {
        bucket.latency_ms == Some(5 * bucket.passes) && bucket.others == bucket.passes
    }

    /// The bucket before epoch 1, read at epoch 1: its end is epoch 1's mark, or the live
    /// totals (9 passes) while there is none.
    fn bucket_zero(window: &Marks) -> Bucket {
        let mut seen = None;
        window.for_each_visible(1, true, || totals(9), |_, bucket| seen = Some(bucket));
        seen.expect("epoch 0 is visible")
    }

    /// Two threads opening the same epoch with different totals: the epoch is marked exactly
    /// once, with one thread's totals whole; once one opener has returned the mark is there and
    /// never changes.
    #[test]
    fn loom_an_epoch_is_marked_once_and_whole() {
        loom::model(|| {
            let window = Arc::new(Marks::new(2, 10));
            let mut openers = [1, 2].map(|passes| {
                let window = Arc::clone(&window);
                Some(thread::spawn(move || window.epoch(10, || totals(passes))))
            });
            assert_eq!(openers[0].take().unwrap().join().unwrap(), 1);
            let marked = bucket_zero(&window);
            assert!(
                whole(marked) && [1, 2].contains(&marked.passes),
                "{marked:?}"
            );
            assert_eq!(openers[1].take().unwrap().join().unwrap(), 1);
            assert_eq!(bucket_zero(&window), marked, "a mark never changes");
        });
    }

    /// A reader racing the opener of an epoch sees no mark yet or the whole mark, never a mix
    /// (or `None` from a read that overlapped the write). The reader is a thread of its own: on
    /// the spawning thread, right after the spawn, it never saw a mark in loom's exploration.
    /// The test asserts that it saw both.
    #[test]
    fn loom_a_reader_sees_no_mark_or_the_whole_mark() {
        static SAW_MARK: AtomicBool = AtomicBool::new(false);
        static SAW_NONE: AtomicBool = AtomicBool::new(false);
        loom::model(|| {
            let window = Arc::new(Marks::new(2, 10));
            let opener = {
                let window = Arc::clone(&window);
                thread::spawn(move || window.epoch(10, || totals(1)))
            };
            let reader = {
                let window = Arc::clone(&window);
                thread::spawn(move || window.slot(1).try_read())
            };
            match reader.join().unwrap() {
                Some([0, ..]) => SAW_NONE.store(true, Relaxed),
                Some(words) => {
                    assert_eq!(words, totals(1).words(1), "a torn mark");
                    SAW_MARK.store(true, Relaxed);
                }
                None => {}
            }
            assert_eq!(opener.join().unwrap(), 1);
        });
        assert!(SAW_MARK.load(Relaxed) && SAW_NONE.load(Relaxed));
    }
}
