//! The cut: which request classes the shedder serves while it is overloaded.
//!
//! The rule is stated once, in the shedder's [module docs](crate::shed#request-criticality),
//! with [`RISE_STEPS`], [`CALM_STEPS`] and [`CALM_SHARE`] written out as numbers: a change to
//! one of them changes that statement too. This module keeps the rule's state: the classes
//! decided under pressure this step and the step before, the cut as a class index, and the
//! decisions under pressure by class on the callers' stripes, which the first decision of each
//! step reads as differences to move the cut ([`Cut::roll`]).
//!
//! Only decisions made under pressure touch the cut, so a calm shedder pays nothing for it.

use crate::criticality::Criticality;
use crate::sync::{AtomicU64, Ordering, Striped};

/// Steps in a row in which every request of the marginal class was refused, and the classes
/// above it did not fit, before the cut moves up one class.
pub(super) const RISE_STEPS: u64 = 2;
/// Steps in a row in which at most one in [`CALM_SHARE`] of the marginal class's decisions
/// refused (none, for fewer than that many) before the cut moves down one class.
pub(super) const CALM_STEPS: u64 = 3;
/// See [`CALM_STEPS`]: a class refused that rarely fits.
pub(super) const CALM_SHARE: u64 = 64;

/// Where [`Cut::decided`] counts the late requests above the marginal class.
const LATE: usize = 2 * Criticality::COUNT;

/// Where a request's class stands relative to the cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Place {
    /// Less important than the marginal class: refused while overloaded.
    Below,
    /// The marginal class: decided as without classes.
    Marginal,
    /// More important than the marginal class: served.
    Above,
}

/// The cut's state; see the [module](self) docs.
#[derive(Debug)]
pub(super) struct Cut {
    /// The classes ever decided under pressure, one bit per [`Criticality::index`].
    ever: AtomicU64,
    /// The step the state below belongs to, plus one; 0 before the first decision under
    /// pressure of a second class.
    step: AtomicU64,
    /// The classes seen this step, one bit per [`Criticality::index`].
    seen: AtomicU64,
    /// The classes seen the step before.
    seen_before: AtomicU64,
    /// The cut, as a class index.
    level: AtomicU64,
    /// Steps in a row in which every request of the marginal class was refused.
    full: AtomicU64,
    /// Steps in a row without a refusal of the marginal class.
    calm: AtomicU64,
    /// Decisions under pressure by class: admitted at `2·index`, refused at `2·index + 1`;
    /// at [`LATE`], requests above the marginal class that waited longer than a step.
    decided: Striped<{ LATE + 1 }>,
    /// [`decided`](Self::decided)'s sums at the last step change.
    marked: [AtomicU64; LATE + 1],
}

impl Cut {
    pub(super) fn new() -> Self {
        Cut {
            ever: AtomicU64::new(0),
            step: AtomicU64::new(0),
            seen: AtomicU64::new(0),
            seen_before: AtomicU64::new(0),
            level: AtomicU64::new(0),
            full: AtomicU64::new(0),
            calm: AtomicU64::new(0),
            decided: Striped::new(),
            marked: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Where a request of `class`, decided under pressure during the step `step` gives, stands,
    /// and whether to [`count`](Self::count) its decision (while more than one class is in
    /// use). `capacity(step)` gives the most requests the shedder has seen complete in one step
    /// of the window at `step`; it is called only when the step is new. While only one class
    /// has ever been decided under pressure, every request is of the marginal class, and this
    /// is a load.
    #[inline]
    pub(super) fn place(
        &self,
        class: Criticality,
        step: impl FnOnce() -> u64,
        capacity: impl FnOnce(u64) -> u64,
    ) -> (Place, bool) {
        let bit = 1 << class.index();
        let ever = self.ever.load(Ordering::Relaxed);
        if ever == bit {
            return (Place::Marginal, false);
        }
        if ever & bit == 0 {
            self.ever.fetch_or(bit, Ordering::AcqRel);
        }
        let (place, classes) = self.place_at(class, step(), capacity);
        (place, classes > 1)
    }

    /// Where a request of `class`, decided under pressure during `step`, stands, and how many
    /// classes are in use: moves the cut first if `step` is new.
    #[inline]
    fn place_at(
        &self,
        class: Criticality,
        step: u64,
        capacity: impl FnOnce(u64) -> u64,
    ) -> (Place, u32) {
        let tag = step.wrapping_add(1).max(1);
        let current = self.step.load(Ordering::Acquire);
        if current != tag {
            self.roll(current, tag, capacity(step));
        }
        let bit = 1 << class.index();
        let seen = self.seen.load(Ordering::Relaxed);
        let seen = if seen & bit == 0 {
            self.seen.fetch_or(bit, Ordering::AcqRel) | bit
        } else {
            seen
        };
        let in_use = seen | self.seen_before.load(Ordering::Relaxed);
        let place = match class.index().cmp(&self.marginal(in_use)) {
            std::cmp::Ordering::Less => Place::Below,
            std::cmp::Ordering::Equal => Place::Marginal,
            std::cmp::Ordering::Greater => Place::Above,
        };
        (place, in_use.count_ones())
    }

    /// Counts a decision under pressure for a request of `class`.
    #[inline]
    pub(super) fn count(&self, class: Criticality, refused: bool) {
        self.decided
            .add(2 * class.index() + usize::from(refused), 1);
    }

    /// Counts a request above the marginal class that waited longer than a step.
    #[inline]
    pub(super) fn count_late(&self) {
        self.decided.add(LATE, 1);
    }

    /// The marginal class's index: the least important class in `seen` (a mask) at or above
    /// the cut, or the most important one in `seen` if none is.
    fn marginal(&self, seen: u64) -> usize {
        let level = self.level.load(Ordering::Relaxed) as usize;
        if seen == 0 {
            return level;
        }
        let at_or_above = seen >> level << level;
        if at_or_above != 0 {
            at_or_above.trailing_zeros() as usize
        } else {
            63 - seen.leading_zeros() as usize
        }
    }

    /// The marginal class now.
    pub(super) fn level(&self) -> Criticality {
        let seen = self.seen.load(Ordering::Relaxed) | self.seen_before.load(Ordering::Relaxed);
        Criticality::ALL[self.marginal(seen)]
    }

    /// Moves from the step tagged `current` to the one tagged `tag`, if this thread is the
    /// first to see it: the cut moves by what happened to the marginal class during the step
    /// before, and to the classes above it against `capacity` (requests a step).
    #[cold]
    fn roll(&self, current: u64, tag: u64, capacity: u64) {
        if self
            .step
            .compare_exchange(current, tag, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        let seen = self.seen.swap(0, Ordering::AcqRel);
        let before = self.seen_before.swap(seen, Ordering::AcqRel);
        let mut counts = [0; LATE + 1];
        for (index, count) in counts.iter_mut().enumerate() {
            let total = self.decided.sum(index);
            *count = total.wrapping_sub(self.marked[index].swap(total, Ordering::AcqRel));
        }
        // A gap of more than a step: the shedder was calm in between; start again from the
        // least important class.
        if current == 0 || tag.wrapping_sub(current) > 1 {
            self.level.store(0, Ordering::Release);
            self.full.store(0, Ordering::Release);
            self.calm.store(0, Ordering::Release);
            return;
        }
        let in_use = seen | before;
        let marginal = self.marginal(in_use);
        let (admitted, refused) = (counts[2 * marginal], counts[2 * marginal + 1]);
        let above: u64 = (marginal + 1..Criticality::COUNT)
            .map(|index| counts[2 * index])
            .sum();
        let crowded = above >= capacity.max(1) || 2 * counts[LATE] > above;
        let below = in_use & ((1 << marginal) - 1);
        let (full, calm) = if refused > 0 && admitted == 0 && crowded {
            (self.full.fetch_add(1, Ordering::AcqRel) + 1, 0)
        } else if refused <= admitted / CALM_SHARE {
            (0, self.calm.fetch_add(1, Ordering::AcqRel) + 1)
        } else {
            (0, 0)
        };
        let level = if full >= RISE_STEPS {
            // The next class in use becomes marginal.
            marginal as u64 + 1
        } else if calm >= CALM_STEPS && below != 0 {
            // The next class in use below becomes marginal.
            63 - u64::from(below.leading_zeros())
        } else {
            self.full.store(full, Ordering::Release);
            self.calm.store(calm, Ordering::Release);
            return;
        };
        self.level.store(level, Ordering::Release);
        self.full.store(0, Ordering::Release);
        self.calm.store(0, Ordering::Release);
    }
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use super::{CALM_STEPS, Cut, Place, RISE_STEPS};
    use crate::criticality::Criticality::{self, *};

    /// The most requests the tests' shedder has seen complete in a step.
    const CAPACITY: u64 = 5;

    /// Decides `admitted` and `refused` requests of `class` at `step`, returning the place of
    /// the first.
    fn decide(cut: &Cut, step: u64, class: Criticality, admitted: u32, refused: u32) -> Place {
        let (place, _) = cut.place_at(class, step, |_| CAPACITY);
        for _ in 0..admitted {
            cut.count(class, false);
        }
        for _ in 0..refused {
            cut.count(class, true);
        }
        place
    }

    #[test]
    fn one_class_is_always_marginal() {
        let cut = Cut::new();
        for step in 0..20 {
            for class in [Critical, Sheddable, CriticalPlus] {
                let fresh = Cut::new();
                assert_eq!(decide(&fresh, step, class, 0, 5), Place::Marginal);
            }
            assert_eq!(decide(&cut, step, Critical, 0, 5), Place::Marginal);
            assert_eq!(cut.level(), Critical);
        }
    }

    /// Sheddable requests all refused beside served critical ones, from `from` for `steps`.
    fn crowd_out(cut: &Cut, from: u64, steps: u64) {
        for step in from..from + steps {
            decide(cut, step, Sheddable, 0, 10);
            decide(cut, step, Critical, 5, 0);
        }
    }

    #[test]
    fn the_cut_rises_past_a_class_refused_whole_and_falls_when_calm() {
        let cut = Cut::new();
        // Sheddable is marginal, and for RISE_STEPS steps all of it is refused beside critical.
        assert_eq!(decide(&cut, 0, Sheddable, 0, 10), Place::Marginal);
        assert_eq!(decide(&cut, 0, Critical, 5, 0), Place::Above);
        crowd_out(&cut, 1, RISE_STEPS - 1);
        assert_eq!(cut.level(), Sheddable);
        // The next step the cut is critical: sheddable is refused outright.
        let risen = RISE_STEPS;
        assert_eq!(decide(&cut, risen, Sheddable, 0, 10), Place::Below);
        assert_eq!(decide(&cut, risen, Critical, 640, 10), Place::Marginal);
        assert_eq!(cut.level(), Critical);
        // Critical refused at most once in CALM_SHARE: after CALM_STEPS such steps the cut
        // falls back to sheddable.
        for step in risen + 1..risen + CALM_STEPS {
            assert_eq!(cut.level(), Critical, "step {step}");
            decide(&cut, step, Sheddable, 0, 10);
            decide(&cut, step, Critical, 640, 10);
        }
        let fallen = risen + CALM_STEPS;
        assert_eq!(decide(&cut, fallen, Sheddable, 1, 0), Place::Marginal);
        assert_eq!(decide(&cut, fallen, Critical, 5, 0), Place::Above);
    }

    #[test]
    fn one_step_refused_whole_or_a_partly_served_class_keeps_the_cut() {
        let cut = Cut::new();
        for step in 0..10 {
            // Every other step all sheddable requests are refused: never RISE_STEPS in a row.
            let admitted = u32::from(step % 2 == 0);
            assert_eq!(decide(&cut, step, Sheddable, admitted, 7), Place::Marginal);
            assert_eq!(decide(&cut, step, Critical, 5, 0), Place::Above);
        }
        // Nothing above: the least important class is not refused outright whatever happens.
        let alone = Cut::new();
        for step in 0..10 {
            assert_eq!(decide(&alone, step, Sheddable, 0, 7), Place::Marginal);
        }
    }

    #[test]
    fn classes_above_that_fit_keep_the_cut() {
        let cut = Cut::new();
        // Every sheddable request refused, but critical ones admitted below the capacity: the
        // refusals are not for want of room for the critical class.
        for step in 0..10 * RISE_STEPS {
            assert_eq!(decide(&cut, step, Sheddable, 0, 10), Place::Marginal);
            assert_eq!(
                decide(&cut, step, Critical, CAPACITY as u32 - 1, 0),
                Place::Above
            );
        }
        // Two classes above, together at the capacity: the cut rises.
        let cut = Cut::new();
        for step in 0..RISE_STEPS {
            decide(&cut, step, Sheddable, 0, 10);
            decide(&cut, step, Critical, 3, 0);
            decide(&cut, step, CriticalPlus, 2, 0);
        }
        assert_eq!(decide(&cut, RISE_STEPS, Sheddable, 0, 1), Place::Below);
        assert_eq!(cut.level(), Critical);
    }

    #[test]
    fn late_requests_above_raise_the_cut_as_a_full_step_does() {
        // Critical requests admitted below the capacity, but most of them waited longer than a
        // step: work done inline queues before the shedder sees it.
        let late = |share_late: u32| {
            let cut = Cut::new();
            for step in 0..RISE_STEPS {
                decide(&cut, step, Sheddable, 0, 10);
                decide(&cut, step, Critical, 4, 0);
                for _ in 0..share_late {
                    cut.count_late();
                }
            }
            decide(&cut, RISE_STEPS, Sheddable, 0, 1)
        };
        assert_eq!(late(3), Place::Below);
        // Half of them late: they fit.
        assert_eq!(late(2), Place::Marginal);
    }

    #[test]
    fn the_cut_never_leaves_the_classes_in_use() {
        let cut = Cut::new();
        for step in 0..RISE_STEPS {
            decide(&cut, step, Sheddable, 0, 10);
            decide(&cut, step, SheddablePlus, 5, 0);
        }
        decide(&cut, RISE_STEPS, SheddablePlus, 0, 10);
        assert_eq!(cut.level(), SheddablePlus);
        // Only sheddable requests from now: refused outright for one step, as the cut keeps to
        // the classes of the last two steps, then marginal again.
        assert_eq!(decide(&cut, RISE_STEPS + 1, Sheddable, 0, 1), Place::Below);
        assert_eq!(
            decide(&cut, RISE_STEPS + 2, Sheddable, 0, 1),
            Place::Marginal
        );
    }

    #[test]
    fn a_calm_gap_resets_the_cut() {
        let cut = Cut::new();
        decide(&cut, 0, Critical, 5, 0);
        crowd_out(&cut, 0, RISE_STEPS);
        assert_eq!(decide(&cut, RISE_STEPS, Sheddable, 0, 1), Place::Below);
        // No decision under pressure for a few steps: the cut starts again from the bottom.
        assert_eq!(
            decide(&cut, RISE_STEPS + 5, Sheddable, 0, 1),
            Place::Marginal
        );
    }

    proptest::proptest! {
        /// Whatever happened before, the classes of one step stand in the order of their
        /// importance: below the cut, at most one marginal, then above it. So under the same
        /// reading a class is never refused while a less important one is served.
        #[test]
        fn places_follow_importance(
            history in proptest::collection::vec((0u64..3, 0usize..4, 0u32..3, 0u32..3), 0..40),
        ) {
            let cut = Cut::new();
            let mut step = 0;
            for (gap, class, admitted, refused) in history {
                step += gap;
                decide(&cut, step, Criticality::ALL[class], admitted, refused);
            }
            let places: Vec<Place> = Criticality::ALL
                .into_iter()
                .map(|class| cut.place_at(class, step, |_| CAPACITY).0)
                .collect();
            let rank = |place: &Place| match place {
                Place::Below => 0,
                Place::Marginal => 1,
                Place::Above => 2,
            };
            proptest::prop_assert!(places.windows(2).all(|pair| rank(&pair[0]) <= rank(&pair[1])));
            proptest::prop_assert!(places.iter().filter(|&&place| place == Place::Marginal).count() <= 1);
        }
    }
}
