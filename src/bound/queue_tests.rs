use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Wake, Waker};

use proptest::prelude::*;

use super::{Cancelled, Left, Limits, Queue, State, Ticket, Turn};
use crate::criticality::Criticality::{self, *};

const NEVER: u64 = u64::MAX;
/// Waits that never end.
const OPEN: Limits = Limits {
    target: u64::MAX,
    interval: u64::MAX,
};
/// 5 while the queue stands for a class, 100 otherwise.
const SHORT: Limits = Limits {
    target: 5,
    interval: 100,
};

/// Counts its wakes.
#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn counter() -> (Arc<Count>, Waker) {
    let count = Arc::new(Count::default());
    (count.clone(), Waker::from(count))
}

fn look(queue: &mut Queue, ticket: Ticket, now: u64) -> Turn {
    queue.poll(ticket, now, Waker::noop())
}

#[test]
fn the_standing_wait_follows_the_service_time_between_the_target_and_the_interval() {
    let mut queue = Queue::new(4, SHORT);
    let (ticket, _) = queue.join(Sheddable, 0, NEVER, usize::MAX).unwrap();
    // Standing from 100 on (a waiter since 0).
    assert_eq!(queue.allowed(Sheddable, 100), 5);
    queue.follow_service(1);
    assert_eq!(queue.allowed(Sheddable, 100), 20);
    queue.follow_service(50);
    assert_eq!(queue.allowed(Sheddable, 100), 100);
    queue.follow_service(0);
    assert_eq!(queue.allowed(Sheddable, 100), 5);
    assert_eq!(queue.cancel(ticket, 100), Cancelled::Waiting);
}

#[test]
fn the_highest_class_goes_first_and_each_class_in_order() {
    let mut queue = Queue::new(8, OPEN);
    let shed_1 = queue.join(Sheddable, 1, NEVER, usize::MAX).unwrap().0;
    let crit_1 = queue.join(Critical, 2, NEVER, usize::MAX).unwrap().0;
    let shed_2 = queue.join(Sheddable, 3, NEVER, usize::MAX).unwrap().0;
    let crit_2 = queue.join(Critical, 4, NEVER, usize::MAX).unwrap().0;
    let plus = queue.join(CriticalPlus, 5, NEVER, usize::MAX).unwrap().0;
    let mut order = Vec::new();
    while queue.grant_next(6) {
        for (name, ticket) in [
            ("shed_1", shed_1),
            ("crit_1", crit_1),
            ("shed_2", shed_2),
            ("crit_2", crit_2),
            ("plus", plus),
        ] {
            if look(&mut queue, ticket, 6) == Turn::Granted {
                order.push(name);
            }
        }
    }
    assert_eq!(order, ["plus", "crit_1", "crit_2", "shed_1", "shed_2"]);
    assert_eq!(queue.len(), 0);
}

#[test]
fn a_full_queue_pushes_out_the_newest_of_the_lowest_class_below() {
    let mut queue = Queue::new(3, OPEN);
    let (woken, waker) = counter();
    let old = queue.join(Sheddable, 1, NEVER, usize::MAX).unwrap().0;
    let newest = queue.join(Sheddable, 2, NEVER, usize::MAX).unwrap().0;
    let plus = queue.join(SheddablePlus, 3, NEVER, usize::MAX).unwrap().0;
    assert_eq!(queue.poll(newest, 3, &waker), Turn::Waiting);
    // A request of the lowest class finds no one below it.
    assert!(queue.join(Sheddable, 4, NEVER, usize::MAX).is_none());
    // A critical one pushes out the newest sheddable, not the sheddable-plus.
    let (critical, pushed_out) = queue.join(Critical, 5, NEVER, usize::MAX).unwrap();
    assert_eq!(pushed_out, Some(Sheddable));
    assert_eq!(woken.0.load(Ordering::Relaxed), 1);
    assert_eq!(look(&mut queue, newest, 5), Turn::Left(Left::PushedOut));
    assert_eq!(look(&mut queue, old, 5), Turn::Waiting);
    assert_eq!(look(&mut queue, plus, 5), Turn::Waiting);
    assert_eq!(queue.len(), 3);
    assert!(queue.grant_next(6));
    assert_eq!(look(&mut queue, critical, 6), Turn::Granted);
}

#[test]
fn a_queue_holding_its_room_takes_only_higher_classes() {
    let mut queue = Queue::new(8, OPEN);
    let _a = queue.join(Sheddable, 0, NEVER, 2).unwrap().0;
    let b = queue.join(Sheddable, 0, NEVER, 2).unwrap().0;
    assert!(queue.join(Sheddable, 0, NEVER, 2).is_none());
    let (_c, pushed_out) = queue.join(Critical, 0, NEVER, 2).unwrap();
    assert_eq!(pushed_out, Some(Sheddable));
    assert_eq!(look(&mut queue, b, 0), Turn::Left(Left::PushedOut));
    assert_eq!(queue.len(), 2);
    // More room, and places free: it joins.
    assert!(queue.join(Sheddable, 0, NEVER, 3).is_some());
}

#[test]
fn waiters_past_the_allowed_wait_or_their_deadline_leave() {
    let mut queue = Queue::new(4, SHORT);
    let (woken, waker) = counter();
    let first = queue.join(Critical, 10, NEVER, usize::MAX).unwrap().0;
    let second = queue.join(Critical, 20, NEVER, usize::MAX).unwrap().0;
    let due = queue.join(Sheddable, 20, 25, usize::MAX).unwrap().0;
    assert_eq!(queue.poll(first, 20, &waker), Turn::Waiting);
    assert_eq!(queue.expire(109), 1);
    assert_eq!(look(&mut queue, due, 109), Turn::Left(Left::Deadline));
    // At 110 the first has waited 100, and critical requests have waited without a break
    // for as long: the queue stands for them, and the second, 90 into its wait, leaves too.
    assert_eq!(queue.expire(110), 2);
    assert_eq!(woken.0.load(Ordering::Relaxed), 1);
    assert_eq!(look(&mut queue, first, 110), Turn::Left(Left::Timeout));
    assert_eq!(look(&mut queue, second, 110), Turn::Left(Left::Timeout));
    // A waiter checks itself when it looks: the timeouts keep the queue standing.
    let third = queue.join(Critical, 120, NEVER, usize::MAX).unwrap().0;
    assert_eq!(queue.poll(third, 124, &waker), Turn::Waiting);
    assert_eq!(queue.poll(third, 125, &waker), Turn::Left(Left::Timeout));
    assert_eq!(queue.len(), 0);
}

#[test]
fn a_waiter_behind_the_head_sees_its_own_deadline() {
    let mut queue = Queue::new(4, OPEN);
    let head = queue.join(Critical, 0, NEVER, usize::MAX).unwrap().0;
    let due = queue.join(Critical, 1, 5, usize::MAX).unwrap().0;
    assert_eq!(queue.expire(6), 0);
    assert_eq!(look(&mut queue, due, 6), Turn::Left(Left::Deadline));
    assert_eq!(look(&mut queue, head, 6), Turn::Waiting);
}

#[test]
fn cancelling_frees_the_place_and_returns_a_grant() {
    let mut queue = Queue::new(2, OPEN);
    let a = queue.join(Critical, 0, NEVER, usize::MAX).unwrap().0;
    let b = queue.join(Critical, 0, NEVER, usize::MAX).unwrap().0;
    assert_eq!(queue.cancel(b, 1), Cancelled::Waiting);
    assert_eq!(queue.len(), 1);
    assert!(queue.grant_next(2));
    assert_eq!(queue.cancel(a, 3), Cancelled::Granted);
    // Both places are free again.
    assert!(queue.join(Sheddable, 4, NEVER, usize::MAX).is_some());
    assert!(queue.join(Sheddable, 4, NEVER, usize::MAX).is_some());
    assert!(queue.join(Sheddable, 4, NEVER, usize::MAX).is_none());
}

#[test]
fn the_queue_stands_once_it_was_not_empty_for_an_interval() {
    let mut queue = Queue::new(4, SHORT);
    let a = queue.join(Critical, 100, NEVER, usize::MAX).unwrap().0;
    let _b = queue.join(Critical, 140, NEVER, usize::MAX).unwrap().0;
    assert!(queue.grant_next(150));
    assert_eq!(look(&mut queue, a, 150), Turn::Granted);
    // One still waits: the busy spell goes on.
    assert!(!queue.standing(Critical, 199));
    assert!(queue.standing(Critical, 200));
    assert_eq!(queue.allowed(Critical, 200), 5);
    assert!(queue.grant_next(210));
    assert!(!queue.standing(Critical, 300));
    assert_eq!(queue.allowed(Critical, 300), 100);
    let c = queue.join(Critical, 400, NEVER, usize::MAX).unwrap().0;
    assert_eq!(queue.cancel(c, 410), Cancelled::Waiting);
    assert!(!queue.standing(Critical, 600));
}

#[test]
fn lower_classes_waiting_do_not_make_the_queue_stand_for_a_higher_one() {
    let mut queue = Queue::new(4, SHORT);
    let _shed = queue.join(Sheddable, 0, NEVER, usize::MAX).unwrap().0;
    let critical = queue.join(Critical, 50, NEVER, usize::MAX).unwrap().0;
    assert!(queue.grant_next(60));
    assert_eq!(look(&mut queue, critical, 60), Turn::Granted);
    // The sheddable request has waited 100 without a break: the queue stands for it, not for
    // the critical class, none of which has waited since 60.
    assert!(queue.standing(Sheddable, 100));
    assert!(!queue.standing(Critical, 100));
    let late = queue.join(Critical, 100, NEVER, usize::MAX).unwrap().0;
    assert_eq!(look(&mut queue, late, 150), Turn::Waiting);
    assert_eq!(queue.expire(150), 1);
    // A sheddable timeout does not make it stand for the critical class either.
    assert!(!queue.standing(Critical, 151));
    assert_eq!(look(&mut queue, late, 199), Turn::Waiting);
}

#[test]
fn a_push_out_does_not_break_the_lower_classes_busy_spell() {
    let mut queue = Queue::new(1, SHORT);
    let _shed = queue.join(Sheddable, 0, NEVER, usize::MAX).unwrap().0;
    let (_critical, pushed_out) = queue.join(Critical, 60, NEVER, usize::MAX).unwrap();
    assert_eq!(pushed_out, Some(Sheddable));
    // Someone of the sheddable class or above has waited since 0, the critical class since 60.
    assert!(queue.standing(Sheddable, 100));
    assert!(!queue.standing(Critical, 100));
    assert!(queue.standing(Critical, 160));
}

#[test]
fn a_timeout_keeps_the_queue_standing_for_an_interval() {
    let mut queue = Queue::new(4, SHORT);
    let _a = queue.join(Critical, 0, NEVER, usize::MAX).unwrap().0;
    assert_eq!(queue.expire(100), 1);
    assert_eq!(queue.len(), 0);
    assert!(queue.standing(Critical, 150));
    assert!(queue.standing(Sheddable, 150));
    assert!(!queue.standing(CriticalPlus, 150));
    let b = queue.join(Critical, 160, NEVER, usize::MAX).unwrap().0;
    assert!(queue.grant_next(165));
    assert_eq!(look(&mut queue, b, 165), Turn::Granted);
    assert!(queue.standing(Critical, 170));
    assert!(!queue.standing(Critical, 200));
}

#[derive(Clone, Debug)]
enum Op {
    Join(usize, u64),
    Grant,
    Expire,
    Poll(usize),
    Cancel(usize),
    Tick(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..Criticality::COUNT, 0..50u64).prop_map(|(c, d)| Op::Join(c, d)),
        3 => Just(Op::Grant),
        1 => Just(Op::Expire),
        3 => (0..64usize).prop_map(Op::Poll),
        1 => (0..64usize).prop_map(Op::Cancel),
        2 => (0..10u64).prop_map(Op::Tick),
    ]
}

proptest! {
    /// Whatever happens: a grant goes to the oldest waiter of the highest waiting class, every
    /// waiter ends exactly once (granted or left), and the count of waiters is exact.
    #[test]
    fn every_waiter_ends_once_and_no_higher_class_waits_behind_a_lower(
        capacity in 1u32..6,
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        let mut queue = Queue::new(capacity, Limits { target: 10, interval: 40 });
        let mut now = 0;
        // Every ticket: its class, when it joined, and how it ended.
        let mut tickets: Vec<(Ticket, Criticality, u64, Option<Turn>)> = Vec::new();
        for op in ops {
            match op {
                Op::Join(class, due) => {
                    let class = Criticality::ALL[class];
                    if let Some((ticket, _)) = queue.join(class, now, now + due, usize::MAX) {
                        tickets.push((ticket, class, now, None));
                    } else {
                        // Refused only when every place is taken (granted places count until
                        // their waiters collect them) and nobody lower waits.
                        let lower = tickets.iter().filter(|t| t.1 < class
                            && queue.state(t.0) == Some(State::Waiting)).count();
                        prop_assert_eq!(queue.occupied(), capacity as usize);
                        prop_assert_eq!(lower, 0);
                    }
                }
                Op::Grant => {
                    let waiting: Vec<usize> = (0..tickets.len())
                        .filter(|&i| tickets[i].3.is_none() && queue.state(tickets[i].0) == Some(State::Waiting))
                        .collect();
                    let granted = queue.grant_next(now);
                    prop_assert_eq!(granted, !waiting.is_empty());
                    if granted {
                        let best = waiting.iter().copied().max_by(|&a, &b| {
                            tickets[a].1.cmp(&tickets[b].1).then(b.cmp(&a))
                        }).unwrap();
                        prop_assert_eq!(queue.state(tickets[best].0), Some(State::Granted));
                    }
                }
                Op::Expire => {
                    queue.expire(now);
                }
                Op::Poll(i) | Op::Cancel(i) if tickets.is_empty() => { let _ = i; }
                Op::Poll(i) => {
                    let i = i % tickets.len();
                    if tickets[i].3.is_none() {
                        let turn = queue.poll(tickets[i].0, now, Waker::noop());
                        if turn != Turn::Waiting {
                            tickets[i].3 = Some(turn);
                        }
                    }
                }
                Op::Cancel(i) => {
                    let i = i % tickets.len();
                    if tickets[i].3.is_none() {
                        queue.cancel(tickets[i].0, now);
                        tickets[i].3 = Some(Turn::Left(Left::Timeout));
                    }
                }
                Op::Tick(by) => now += by,
            }
            let open = tickets.iter().filter(|t| t.3.is_none()).count();
            prop_assert!(queue.len() <= open);
            prop_assert!(queue.len() <= capacity as usize);
        }
        // Every open ticket ends exactly once once its longest wait is over, and then stays
        // ended.
        now += 40;
        for ticket in tickets.iter_mut().filter(|t| t.3.is_none()) {
            let turn = queue.poll(ticket.0, now, Waker::noop());
            prop_assert_ne!(turn, Turn::Waiting);
            let again = queue.poll(ticket.0, now, Waker::noop());
            prop_assert_eq!(again, Turn::Left(Left::PushedOut));
        }
        prop_assert_eq!(queue.len(), 0);
    }
}

impl Queue {
    /// How many places are not free.
    fn occupied(&self) -> usize {
        self.places
            .iter()
            .filter(|place| place.state != State::Free)
            .count()
    }

    /// The state of `ticket`'s place, if the place is still its.
    fn state(&self, ticket: Ticket) -> Option<State> {
        self.place_of(ticket).map(|place| place.state)
    }
}
