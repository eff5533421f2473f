//! The bound on the manual clock: entering, waiting, leaving, and how the bound moves.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::clock::ManualClock;
use crate::criticality::Criticality::{self, *};
use crate::middleware::{Finish, Outcome};
use crate::signal::cpu::CpuWait;

type Decision = Admission<BoundPermit<ManualClock>, Busy, Waiting<ManualClock>>;

fn bound(floor: u32, capacity: u32) -> (ManualClock, Shared<Bound<ManualClock>>) {
    let clock = ManualClock::new();
    let bound = Bound::builder()
        .floor(floor)
        .ceiling(64)
        .queue_capacity(capacity)
        .clock(clock.clone())
        .build()
        .unwrap();
    (clock, Shared::new(bound))
}

fn arrive(bound: &Shared<Bound<ManualClock>>, class: Criticality) -> Decision {
    Bound::admit(bound, Arrival::new().with_class(class))
}

fn permit(decision: Decision) -> BoundPermit<ManualClock> {
    match decision {
        Admission::Enter(permit) => permit,
        other => panic!("expected to enter, got {other:?}"),
    }
}

fn waiter(decision: Decision) -> Pin<Box<Waiting<ManualClock>>> {
    match decision {
        Admission::Wait(wait) => Box::pin(wait),
        other => panic!("expected to wait, got {other:?}"),
    }
}

fn poll(wait: &mut Pin<Box<Waiting<ManualClock>>>) -> Poll<Result<BoundPermit<ManualClock>, Busy>> {
    wait.as_mut().poll(&mut Context::from_waker(Waker::noop()))
}

fn refused(wait: &mut Pin<Box<Waiting<ManualClock>>>) -> Why {
    match poll(wait) {
        Poll::Ready(Err(busy)) => busy.why(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn done(mut permit: BoundPermit<ManualClock>, cpu_wait: Duration) {
    permit.finish_after(Outcome::Pass, CpuWait(cpu_wait));
}

#[test]
fn requests_beyond_the_bound_wait_and_enter_highest_class_first() {
    let (_clock, bound) = bound(2, 8);
    let first = permit(arrive(&bound, Critical));
    let _second = permit(arrive(&bound, Critical));
    let mut shed = waiter(arrive(&bound, Sheddable));
    let mut crit = waiter(arrive(&bound, Critical));
    assert_eq!((bound.in_service(), bound.waiting()), (2, 2));
    assert!(poll(&mut shed).is_pending() && poll(&mut crit).is_pending());
    // A new arrival waits behind them, even of the highest class: the queue is not empty.
    let mut plus = waiter(arrive(&bound, CriticalPlus));
    drop(first);
    let plus = match poll(&mut plus) {
        Poll::Ready(Ok(permit)) => permit,
        other => panic!("{other:?}"),
    };
    assert!(poll(&mut crit).is_pending() && poll(&mut shed).is_pending());
    assert_eq!((bound.in_service(), bound.waiting()), (2, 2));
    drop(plus);
    assert!(matches!(poll(&mut crit), Poll::Ready(Ok(_))));
    assert!(matches!(poll(&mut shed), Poll::Ready(Ok(_))));
}

#[test]
fn a_full_queue_pushes_out_a_lower_class_or_refuses() {
    let (_clock, bound) = bound(1, 1);
    let _busy = permit(arrive(&bound, Critical));
    let mut shed = waiter(arrive(&bound, Sheddable));
    match arrive(&bound, Sheddable) {
        Admission::Refuse(busy) => assert_eq!(busy.why(), Why::Full),
        other => panic!("{other:?}"),
    }
    let mut crit = waiter(arrive(&bound, Critical));
    assert_eq!(refused(&mut shed), Why::PushedOut);
    assert!(poll(&mut crit).is_pending());
    assert_eq!(bound.waiting(), 1);
    let counts = bound.snapshot().classes;
    let (shed, crit) = (counts[Sheddable.index()], counts[Critical.index()]);
    assert_eq!((shed.waited, shed.full, shed.pushed_out), (1, 1, 1));
    assert_eq!((crit.waited, crit.entered, crit.pushed_out), (1, 0, 0));
}

#[test]
fn waits_end_after_the_interval_or_the_target_once_the_queue_stays_busy() {
    let (clock, bound) = bound(1, 64);
    let _busy = permit(arrive(&bound, Critical));
    let mut first = waiter(arrive(&bound, Critical));
    clock.advance(Duration::from_millis(99));
    assert!(poll(&mut first).is_pending());
    clock.advance(Duration::from_millis(1));
    assert_eq!(refused(&mut first), Why::Timeout);
    // Waiters keep arriving every 4 ms: after 100 ms of a queue never empty, a wait may last
    // only 5 ms.
    let mut waiters = Vec::new();
    for _ in 0..30 {
        waiters.push(waiter(arrive(&bound, Critical)));
        clock.advance(Duration::from_millis(4));
        for wait in &mut waiters {
            let _ = poll(wait);
        }
    }
    let newest = waiters.last_mut().unwrap();
    assert!(poll(newest).is_pending());
    clock.advance(Duration::from_millis(1));
    assert_eq!(refused(newest), Why::Timeout);
    assert_eq!(bound.waiting(), 0);
    let critical = bound.snapshot().classes[Critical.index()];
    assert_eq!(critical.waited, 31);
    assert_eq!(critical.timed_out, 31);
}

/// With a mean service time of 1 ms and two places: 200 waiters while the queue does not stand
/// (100 ms), `standing` once it does.
fn refuses_at_once_beyond(
    clock: &ManualClock,
    bound: &Shared<Bound<ManualClock>>,
    standing: usize,
) {
    // Teach it a mean service time of 1 ms, in the first window that ends.
    clock.advance(Duration::from_millis(10));
    let first = permit(arrive(bound, Critical));
    clock.advance(Duration::from_millis(1));
    done(first, Duration::ZERO);
    let _busy: Vec<_> = (0..2).map(|_| permit(arrive(bound, Critical))).collect();
    // Not standing, a wait of up to 100 ms: two places serve 200 requests in it.
    let mut waiters: Vec<_> = (0..200).map(|_| waiter(arrive(bound, Critical))).collect();
    match arrive(bound, Critical) {
        Admission::Refuse(busy) => assert_eq!(busy.why(), Why::Full),
        other => panic!("{other:?}"),
    }
    // They time out, and the queue stands.
    clock.advance(Duration::from_millis(100));
    for wait in &mut waiters {
        assert_eq!(refused(wait), Why::Timeout);
    }
    let mut waiting: Vec<_> = (0..standing)
        .map(|_| waiter(arrive(bound, Critical)))
        .collect();
    match arrive(bound, Critical) {
        Admission::Refuse(busy) => assert_eq!(busy.why(), Why::Full),
        other => panic!("{other:?}"),
    }
    assert!(poll(&mut waiting[standing - 1]).is_pending());
}

#[test]
fn a_standing_queue_refuses_at_once_what_the_bound_cannot_serve_in_time() {
    // By default the standing wait is twenty mean service times (above the 5 ms target): 40
    // requests.
    let (clock, bound) = bound(2, 1024);
    refuses_at_once_beyond(&clock, &bound, 40);
    // A fixed target of 5 ms: 10 requests.
    let clock = ManualClock::new();
    let fixed = Bound::builder()
        .floor(2)
        .ceiling(64)
        .wait_limits(Duration::from_millis(5), Duration::from_millis(100))
        .clock(clock.clone())
        .build()
        .unwrap();
    refuses_at_once_beyond(&clock, &Shared::new(fixed), 10);
}

#[test]
fn a_deadline_that_cannot_be_met_refuses_or_ends_the_wait() {
    let (clock, bound) = bound(1, 8);
    // Teach it a mean service time of 10 ms.
    for _ in 0..2 {
        let permit = permit(arrive(&bound, Critical));
        clock.advance(Duration::from_millis(10));
        done(permit, Duration::ZERO);
    }
    let _busy = permit(arrive(&bound, Critical));
    let late = Arrival::new().with_time_left(Duration::from_millis(8));
    match Bound::admit(&bound, late) {
        Admission::Refuse(busy) => assert_eq!(busy.why(), Why::Deadline),
        other => panic!("{other:?}"),
    }
    let mut soon = waiter(Bound::admit(
        &bound,
        Arrival::new().with_time_left(Duration::from_millis(25)),
    ));
    clock.advance(Duration::from_millis(14));
    assert!(poll(&mut soon).is_pending());
    clock.advance(Duration::from_millis(1));
    assert_eq!(refused(&mut soon), Why::Deadline);
}

#[test]
fn a_spent_deadline_is_refused_even_with_room() {
    let (clock, bound) = bound(4, 8);
    let refused_at_once = |arrival: Arrival| match Bound::admit(&bound, arrival) {
        Admission::Refuse(busy) => busy.why() == Why::Deadline,
        _ => false,
    };
    // Nothing known of the service yet: only a deadline already spent is refused.
    assert!(refused_at_once(
        Arrival::new().with_time_left(Duration::ZERO)
    ));
    let waited = Arrival::new().with_wait(Duration::from_millis(30));
    assert!(refused_at_once(
        waited.with_time_left(Duration::from_millis(30))
    ));
    let first = permit(Bound::admit(
        &bound,
        waited.with_time_left(Duration::from_millis(31)),
    ));
    clock.advance(Duration::from_millis(10));
    done(first, Duration::ZERO);
    // With a mean service of 10 ms, 10 ms left no longer fits; 11 ms does.
    assert!(refused_at_once(
        Arrival::new().with_time_left(Duration::from_millis(10))
    ));
    let fits = permit(Bound::admit(
        &bound,
        Arrival::new().with_time_left(Duration::from_millis(11)),
    ));
    done(fits, Duration::ZERO);
}

#[test]
fn a_cancelled_waiter_leaves_and_a_granted_place_goes_to_the_next() {
    let (_clock, bound) = bound(1, 8);
    let busy = permit(arrive(&bound, Critical));
    let gone = waiter(arrive(&bound, Critical));
    let granted_then_dropped = waiter(arrive(&bound, Critical));
    let mut last = waiter(arrive(&bound, Critical));
    drop(gone);
    assert_eq!(bound.waiting(), 2);
    drop(busy);
    // Granted but never polled: dropping it passes the place on.
    drop(granted_then_dropped);
    assert!(matches!(poll(&mut last), Poll::Ready(Ok(_))));
    assert_eq!((bound.in_service(), bound.waiting()), (0, 0));
    let critical = bound.snapshot().classes[Critical.index()];
    assert_eq!(
        (critical.waited, critical.cancelled, critical.entered),
        (3, 2, 1)
    );
}

/// Runs one 10 ms window at the bound: every place taken (and, with `demand`, one request
/// waiting), each request reporting `wait_share` of its service time as CPU wait.
fn window(bound: &Shared<Bound<ManualClock>>, clock: &ManualClock, demand: bool, wait_share: f64) {
    let permits: Vec<_> = (0..bound.limit())
        .map(|_| permit(arrive(bound, Critical)))
        .collect();
    let waiting = demand.then(|| waiter(arrive(bound, Critical)));
    clock.advance(Duration::from_millis(10));
    for permit in permits {
        done(permit, Duration::from_millis(10).mul_f64(wait_share));
    }
    drop(waiting);
}

#[test]
fn contention_cuts_the_bound_and_demand_without_it_raises_it() {
    let (clock, bound) = bound(1, 8);
    // Requests wait and the work reports no CPU wait: the bound grows, an eighth a window.
    let mut last = bound.limit();
    for _ in 0..12 {
        window(&bound, &clock, true, 0.0);
        assert!(bound.limit() >= last);
        last = bound.limit();
    }
    assert!(last >= 8, "{last}");
    // Nobody waits: it stays.
    for _ in 0..3 {
        window(&bound, &clock, false, 0.0);
    }
    assert_eq!(bound.limit(), last);
    // Most of the service time waiting for a CPU halves it each window, down to the floor (a
    // window ends at the first completion after it is due, so the cut shows a window late).
    for _ in 0..3 {
        window(&bound, &clock, true, 0.8);
    }
    assert!(bound.limit() <= last / 2, "{} from {last}", bound.limit());
    for _ in 0..10 {
        window(&bound, &clock, true, 0.8);
    }
    assert_eq!(bound.limit(), 1);
}

#[test]
fn settings_out_of_range_are_refused() {
    let floor = Bound::builder().floor(0).build().unwrap_err();
    assert_eq!(
        floor,
        crate::ConfigError::BoundOutOfRange {
            floor: 0,
            ceiling: 0
        }
    );
    let above = Bound::builder().floor(8).ceiling(4).build().unwrap_err();
    assert_eq!(above.setting(), "floor");
    let long = Bound::builder()
        .queue_capacity(u32::MAX)
        .build()
        .unwrap_err();
    assert_eq!(long.setting(), "queue_capacity");
    let target = Bound::builder()
        .wait_limits(Duration::from_millis(100), Duration::from_millis(100))
        .build()
        .unwrap_err();
    assert_eq!(target.setting(), "target");
    let none = Bound::builder()
        .queue_capacity(0)
        .floor(1)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let none = Shared::new(none);
    let _busy = permit(Bound::admit(&none, Arrival::new()));
    assert!(matches!(
        Bound::admit(&none, Arrival::new()),
        Admission::Refuse(_)
    ));
}

#[derive(Clone, Debug)]
enum Step {
    Arrive(usize),
    Finish(usize, u64),
    Poll(usize),
    Cancel(usize),
    Tick(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..Criticality::COUNT).prop_map(Step::Arrive),
        3 => (0..64usize, 0..3u64).prop_map(|(i, w)| Step::Finish(i, w)),
        3 => (0..64usize).prop_map(Step::Poll),
        1 => (0..64usize).prop_map(Step::Cancel),
        2 => (0..30u64).prop_map(Step::Tick),
    ]
}

proptest! {
    /// Whatever arrives, finishes, waits or gives up: the places in service are the permits
    /// held plus the grants not yet collected, and every waiter ends once (the class order is
    /// the queue's property test).
    #[test]
    fn every_request_ends_once_and_the_counts_stay_exact(
        floor in 1u32..4,
        capacity in 0u32..5,
        steps in proptest::collection::vec(step(), 1..150),
    ) {
        let (clock, bound) = bound(floor, capacity);
        let mut permits: Vec<BoundPermit<ManualClock>> = Vec::new();
        let mut waiters: Vec<Pin<Box<Waiting<ManualClock>>>> = Vec::new();
        for step in steps {
            match step {
                Step::Arrive(class) => {
                    let class = Criticality::ALL[class];
                    match arrive(&bound, class) {
                        Admission::Enter(permit) => {
                            prop_assert!(waiters.is_empty() || bound.waiting() == 0);
                            permits.push(permit);
                        }
                        Admission::Wait(wait) => waiters.push(Box::pin(wait)),
                        Admission::Refuse(_) => {}
                    }
                }
                Step::Finish(i, wait_ms) if !permits.is_empty() => {
                    let permit = permits.swap_remove(i % permits.len());
                    clock.advance(Duration::from_millis(1));
                    done(permit, Duration::from_micros(wait_ms * 400));
                }
                Step::Poll(i) if !waiters.is_empty() => {
                    let i = i % waiters.len();
                    if let Poll::Ready(answer) = poll(&mut waiters[i]) {
                        drop(waiters.swap_remove(i));
                        if let Ok(permit) = answer {
                            permits.push(permit);
                        }
                    }
                }
                Step::Cancel(i) if !waiters.is_empty() => {
                    drop(waiters.swap_remove(i % waiters.len()));
                }
                Step::Tick(ms) => clock.advance(Duration::from_millis(ms)),
                _ => {}
            }
            // Granted waiters hold places in service they have not collected yet.
            prop_assert!(bound.in_service() >= permits.len() as u64);
            prop_assert!(bound.in_service() <= permits.len() as u64 + waiters.len() as u64);
            prop_assert!(bound.waiting() <= waiters.len() as u64);
            prop_assert!((1..=64).contains(&bound.limit()));
        }
        drop(permits);
        // Every waiter resolves once the time runs out, and then the bound is empty.
        clock.advance(Duration::from_secs(1));
        for mut wait in waiters {
            match poll(&mut wait) {
                Poll::Ready(Ok(permit)) => drop(permit),
                Poll::Ready(Err(_)) => {}
                Poll::Pending => prop_assert!(false, "a waiter outlived its longest wait"),
            }
        }
        prop_assert_eq!((bound.in_service(), bound.waiting()), (0, 0));
    }
}
