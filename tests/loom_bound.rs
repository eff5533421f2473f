//! Model-checks the bound's hand-off of places with loom: every interleaving of a request
//! finishing, a request joining the queue and a waiter giving up, on the real implementation's
//! atomics and lock.
//!
//! Run with `RUSTFLAGS="--cfg admit_loom" cargo test --release --test loom_bound`
//! (see `.ci/run`).
#![cfg(admit_loom)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use admit::Shared;
use admit::bound::{Bound, BoundPermit, Busy, Waiting};
use admit::clock::ManualClock;
use admit::middleware::{Admission, Limiter};
use admit::signal::Arrival;
use loom::thread;

type Decision = Admission<BoundPermit<ManualClock>, Busy, Waiting<ManualClock>>;

/// A bound of `floor` places and two waiting places.
fn bound(floor: u32) -> Shared<Bound<ManualClock>> {
    let bound = Bound::builder()
        .floor(floor)
        .ceiling(floor)
        .queue_capacity(2)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    Shared::Arc(Arc::new(bound))
}

fn arrive(bound: &Shared<Bound<ManualClock>>) -> Decision {
    Bound::admit(bound, Arrival::new())
}

fn poll(wait: &mut Pin<Box<Waiting<ManualClock>>>) -> Poll<Result<BoundPermit<ManualClock>, Busy>> {
    wait.as_mut().poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn a_place_freed_while_a_request_joins_the_queue_is_never_lost() {
    loom::model(|| {
        let bound = bound(1);
        let Admission::Enter(held) = arrive(&bound) else {
            panic!("the first request enters");
        };
        let finishing = thread::spawn(move || drop(held));
        let joining = {
            let bound = bound.clone();
            thread::spawn(move || match arrive(&bound) {
                Admission::Enter(permit) => {
                    drop(permit);
                    None
                }
                Admission::Wait(wait) => Some(Box::pin(wait)),
                Admission::Refuse(busy) => panic!("refused: {busy}"),
            })
        };
        finishing.join().unwrap();
        if let Some(mut wait) = joining.join().unwrap() {
            // The place is free: the waiter was granted it, whatever the interleaving.
            match poll(&mut wait) {
                Poll::Ready(Ok(permit)) => drop(permit),
                other => panic!("a free place was not handed on: {other:?}"),
            }
        }
        assert_eq!(
            (bound.snapshot().in_service, bound.snapshot().waiting),
            (0, 0)
        );
    });
}

#[test]
fn two_places_freed_at_once_go_to_two_waiters() {
    loom::model(|| {
        let bound = bound(2);
        let permits: Vec<_> = (0..2)
            .map(|_| match arrive(&bound) {
                Admission::Enter(permit) => permit,
                _ => panic!("two places"),
            })
            .collect();
        let mut waiters: Vec<_> = (0..2)
            .map(|_| match arrive(&bound) {
                Admission::Wait(wait) => Box::pin(wait),
                _ => panic!("the bound is full"),
            })
            .collect();
        let finishing: Vec<_> = permits
            .into_iter()
            .map(|permit| thread::spawn(move || drop(permit)))
            .collect();
        for thread in finishing {
            thread.join().unwrap();
        }
        assert_eq!(
            (bound.snapshot().in_service, bound.snapshot().waiting),
            (2, 0)
        );
        for wait in &mut waiters {
            assert!(matches!(poll(wait), Poll::Ready(Ok(_))));
        }
        assert_eq!(bound.snapshot().in_service, 0);
    });
}

#[test]
fn a_waiter_that_gives_up_as_it_is_granted_returns_its_place() {
    loom::model(|| {
        let bound = bound(1);
        let Admission::Enter(held) = arrive(&bound) else {
            panic!("the first request enters");
        };
        let Admission::Wait(wait) = arrive(&bound) else {
            panic!("the bound is full");
        };
        let finishing = thread::spawn(move || drop(held));
        let giving_up = thread::spawn(move || drop(wait));
        finishing.join().unwrap();
        giving_up.join().unwrap();
        assert_eq!(
            (bound.snapshot().in_service, bound.snapshot().waiting),
            (0, 0)
        );
        let snapshot = bound.snapshot();
        assert_eq!(snapshot.classes[2].cancelled, 1);
    });
}
