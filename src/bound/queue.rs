//! The waiting room: a fixed number of places, allocated once, each class in arrival order.
//!
//! Single-threaded: the [`Bound`](super::Bound) holds it under its lock. Each place is linked
//! into its class's list (oldest at the head) or into the free list, so joining, leaving from
//! the middle (a cancelled waiter), granting the oldest of the highest class and pushing out the
//! newest of a lower class are all O(1), and nothing allocates after [`Queue::new`].
//!
//! A waiter holds a [`Ticket`]: its place and the place's generation. A place keeps the outcome
//! of its waiter (granted, or left with a reason) until the waiter collects it with
//! [`Queue::poll`] or gives up with [`Queue::cancel`]; only a push-out frees a place at once, for
//! the request that pushed, and bumps the generation, which is how the pushed-out ticket learns
//! its outcome.

use std::task::Waker;

use crate::criticality::Criticality;

/// No place: the end of a list.
const NONE: u32 = u32::MAX;

/// A waiter's claim on its place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ticket {
    index: u32,
    generation: u32,
}

/// Why a waiter left without entering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Left {
    /// It waited longer than the queue allows.
    Timeout,
    /// Its deadline could no longer be met.
    Deadline,
    /// A request of a higher class took its place.
    PushedOut,
}

/// What a waiter finds when it looks at its place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Still waiting.
    Waiting,
    /// It may enter: it holds a place in service, taken when it was granted.
    Granted,
    /// It left without entering.
    Left(Left),
}

/// What cancelling a ticket found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cancelled {
    /// The waiter was still waiting: it leaves now.
    Waiting,
    /// It had been granted a place in service it will not use: the caller gives it back.
    Granted,
    /// It had left already, for this reason.
    Left(Left),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Free,
    Waiting,
    Granted,
    Left(Left),
}

#[derive(Debug)]
struct Place {
    generation: u32,
    state: State,
    class: Criticality,
    /// When it started waiting, on the bound's clock.
    since: u64,
    /// When its deadline can no longer be met (`u64::MAX`: never).
    leave_by: u64,
    waker: Option<Waker>,
    prev: u32,
    next: u32,
}

/// The waiting requests, by class.
#[derive(Debug)]
pub(crate) struct Queue {
    places: Box<[Place]>,
    /// The first free place, linked through `next`.
    free: u32,
    heads: [u32; Criticality::COUNT],
    tails: [u32; Criticality::COUNT],
    waiting: usize,
    limits: Limits,
    /// The wait allowed while the queue stands: the limits' target, or more for long requests
    /// ([`follow_service`](Self::follow_service)).
    target: u64,
    /// By class: the last time no request of that class or above waited, on the bound's clock.
    last_empty: [u64; Criticality::COUNT],
    /// By class: the last time a waiter of that class or above left for having waited too long
    /// (`None`: never).
    last_timeout: [Option<u64>; Criticality::COUNT],
}

/// While the queue stands, a request may wait this many mean service times, if that is longer
/// than the target.
pub(crate) const TARGET_SERVICES: u64 = 20;

/// How long a request may wait (controlled delay), ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// While the queue stands for the request's class.
    pub(crate) target: u64,
    /// Otherwise.
    pub(crate) interval: u64,
}

impl Queue {
    /// A queue of `capacity` places (none: nobody waits; at most `u32::MAX - 1`), its waits
    /// limited by `limits`.
    pub(crate) fn new(capacity: u32, limits: Limits) -> Self {
        let capacity = capacity.min(NONE - 1);
        let places = (0..capacity)
            .map(|index| Place {
                generation: 0,
                state: State::Free,
                class: Criticality::default(),
                since: 0,
                leave_by: u64::MAX,
                waker: None,
                prev: NONE,
                next: if index + 1 < capacity {
                    index + 1
                } else {
                    NONE
                },
            })
            .collect();
        Queue {
            places,
            free: if capacity == 0 { NONE } else { 0 },
            heads: [NONE; Criticality::COUNT],
            tails: [NONE; Criticality::COUNT],
            waiting: 0,
            target: limits.target,
            limits,
            last_empty: [0; Criticality::COUNT],
            last_timeout: [None; Criticality::COUNT],
        }
    }

    /// How many requests wait.
    pub(crate) fn len(&self) -> usize {
        self.waiting
    }

    /// Whether the queue stands for `class` at `now`: requests of `class` or above have waited
    /// without a break for an interval, or one of them left for having waited too long within
    /// the last interval (a queue emptied by timeouts is still overloaded). Lower classes
    /// waiting do not make it stand for a higher one, which is served before them.
    pub(crate) fn standing(&self, class: Criticality, now: u64) -> bool {
        let c = class.index();
        let interval = self.limits.interval;
        let waiting = (c..Criticality::COUNT).any(|above| self.heads[above] != NONE);
        (waiting && now.saturating_sub(self.last_empty[c]) >= interval)
            || self.last_timeout[c].is_some_and(|at| now.saturating_sub(at) < interval)
    }

    /// Sets the wait allowed while the queue stands from the mean time in service, `mean` ns:
    /// [`TARGET_SERVICES`] of them, at least the limits' target and at most their interval.
    pub(crate) fn follow_service(&mut self, mean: u64) {
        self.target = mean
            .saturating_mul(TARGET_SERVICES)
            .clamp(self.limits.target, self.limits.interval);
    }

    /// How long a request of `class` may wait at `now`: the target while the queue stands for
    /// its class, the interval otherwise.
    pub(crate) fn allowed(&self, class: Criticality, now: u64) -> u64 {
        if self.standing(class, now) {
            self.target
        } else {
            self.limits.interval
        }
    }

    /// Lets a request of `class` wait from `now`, leaving by `leave_by` at the latest. When
    /// every place is taken, or `room` requests already wait, the newest waiter of the lowest
    /// class below `class` is pushed out (woken, its place given to this one): its class comes
    /// with the ticket. `None` if there is none to push out.
    pub(crate) fn join(
        &mut self,
        class: Criticality,
        now: u64,
        leave_by: u64,
        room: usize,
    ) -> Option<(Ticket, Option<Criticality>)> {
        let pushed_out = if self.free != NONE && self.waiting < room {
            None
        } else {
            Some((0..class.index()).find(|&c| self.tails[c] != NONE)?)
        };
        // It will wait: the classes nobody waits in start a busy spell now.
        self.note_empty(now);
        let index = match pushed_out {
            None => {
                let index = self.free;
                self.free = self.places[index as usize].next;
                index
            }
            Some(lower) => {
                let index = self.tails[lower];
                self.unlink(index);
                let place = &mut self.places[index as usize];
                place.generation = place.generation.wrapping_add(1);
                if let Some(waker) = place.waker.take() {
                    waker.wake();
                }
                index
            }
        };
        let place = &mut self.places[index as usize];
        place.state = State::Waiting;
        place.class = class;
        place.since = now;
        place.leave_by = leave_by;
        place.waker = None;
        let ticket = Ticket {
            index,
            generation: place.generation,
        };
        self.link_tail(index, class);
        Some((ticket, pushed_out.map(|lower| Criticality::ALL[lower])))
    }

    /// Grants the oldest waiter of the highest class at `now`, waking it. Whether there was
    /// one.
    pub(crate) fn grant_next(&mut self, now: u64) -> bool {
        let Some(class) = (0..Criticality::COUNT)
            .rev()
            .find(|&c| self.heads[c] != NONE)
        else {
            return false;
        };
        let index = self.heads[class];
        self.unlink(index);
        self.settle(index, State::Granted, now);
        true
    }

    /// Sends away every waiter that has waited as long as its class [may](Self::allowed) by
    /// `now`, and every waiter at the head of its class whose deadline has passed. How many
    /// left.
    pub(crate) fn expire(&mut self, now: u64) -> usize {
        let mut left = 0;
        for class in 0..Criticality::COUNT {
            if self.heads[class] == NONE {
                continue;
            }
            let allowed = self.allowed(Criticality::ALL[class], now);
            loop {
                let index = self.heads[class];
                if index == NONE {
                    break;
                }
                let place = &self.places[index as usize];
                let reason = if now.saturating_sub(place.since) >= allowed {
                    Left::Timeout
                } else if now >= place.leave_by {
                    Left::Deadline
                } else {
                    break;
                };
                self.unlink(index);
                self.settle(index, State::Left(reason), now);
                left += 1;
            }
        }
        left
    }

    /// What `ticket`'s waiter finds at `now`: a waiter that has waited as long as its class
    /// [may](Self::allowed), or is past its deadline, leaves now. A waiter that finds itself
    /// granted or gone gives its place back; one still waiting is woken through `waker` when
    /// that changes.
    pub(crate) fn poll(&mut self, ticket: Ticket, now: u64, waker: &Waker) -> Turn {
        let Some(place) = self.place_of(ticket) else {
            return Turn::Left(Left::PushedOut);
        };
        match place.state {
            State::Waiting => {
                let allowed = self.allowed(place.class, now);
                let place = &self.places[ticket.index as usize];
                let reason = if now.saturating_sub(place.since) >= allowed {
                    Left::Timeout
                } else if now >= place.leave_by {
                    Left::Deadline
                } else {
                    match &mut self.places[ticket.index as usize].waker {
                        Some(kept) if kept.will_wake(waker) => {}
                        kept => *kept = Some(waker.clone()),
                    }
                    return Turn::Waiting;
                };
                let class = place.class;
                self.unlink(ticket.index);
                self.release(ticket.index);
                self.left(class, reason, now);
                Turn::Left(reason)
            }
            State::Granted => {
                self.release(ticket.index);
                Turn::Granted
            }
            State::Left(reason) => {
                self.release(ticket.index);
                Turn::Left(reason)
            }
            // A ticket's place is free only after the ticket gave it back.
            State::Free => Turn::Left(Left::PushedOut),
        }
    }

    /// Gives up `ticket`'s place: a waiter leaves the queue at once.
    pub(crate) fn cancel(&mut self, ticket: Ticket, now: u64) -> Cancelled {
        let Some(place) = self.place_of(ticket) else {
            return Cancelled::Left(Left::PushedOut);
        };
        match place.state {
            State::Waiting => {
                self.unlink(ticket.index);
                self.release(ticket.index);
                self.note_empty(now);
                Cancelled::Waiting
            }
            State::Granted => {
                self.release(ticket.index);
                Cancelled::Granted
            }
            State::Left(reason) => {
                self.release(ticket.index);
                Cancelled::Left(reason)
            }
            State::Free => Cancelled::Left(Left::PushedOut),
        }
    }

    fn place_of(&self, ticket: Ticket) -> Option<&Place> {
        self.places
            .get(ticket.index as usize)
            .filter(|place| place.generation == ticket.generation)
    }

    /// Marks a place just unlinked at `now` with its waiter's outcome, and wakes the waiter.
    fn settle(&mut self, index: u32, state: State, now: u64) {
        let place = &mut self.places[index as usize];
        place.state = state;
        let class = place.class;
        if let Some(waker) = place.waker.take() {
            waker.wake();
        }
        match state {
            State::Left(reason) => self.left(class, reason, now),
            _ => self.note_empty(now),
        }
    }

    /// Notes a waiter of `class` that left unserved at `now`, for
    /// [`standing`](Self::standing).
    fn left(&mut self, class: Criticality, reason: Left, now: u64) {
        if reason == Left::Timeout {
            for at_or_below in &mut self.last_timeout[..=class.index()] {
                *at_or_below = Some(now);
            }
        }
        self.note_empty(now);
    }

    /// Notes, for each class, whether no request of that class or above waits at `now`.
    fn note_empty(&mut self, now: u64) {
        let mut waiting = false;
        for class in (0..Criticality::COUNT).rev() {
            waiting |= self.heads[class] != NONE;
            if !waiting {
                self.last_empty[class] = now;
            }
        }
    }

    /// Returns an unlinked place to the free list.
    fn release(&mut self, index: u32) {
        let place = &mut self.places[index as usize];
        place.state = State::Free;
        place.waker = None;
        place.generation = place.generation.wrapping_add(1);
        place.next = self.free;
        place.prev = NONE;
        self.free = index;
    }

    fn link_tail(&mut self, index: u32, class: Criticality) {
        let c = class.index();
        let tail = self.tails[c];
        {
            let place = &mut self.places[index as usize];
            place.prev = tail;
            place.next = NONE;
        }
        if tail == NONE {
            self.heads[c] = index;
        } else {
            self.places[tail as usize].next = index;
        }
        self.tails[c] = index;
        self.waiting += 1;
    }

    /// Takes a waiting place out of its class's list.
    fn unlink(&mut self, index: u32) {
        let (prev, next, c) = {
            let place = &self.places[index as usize];
            (place.prev, place.next, place.class.index())
        };
        if prev == NONE {
            self.heads[c] = next;
        } else {
            self.places[prev as usize].next = next;
        }
        if next == NONE {
            self.tails[c] = prev;
        } else {
            self.places[next as usize].prev = prev;
        }
        let place = &mut self.places[index as usize];
        place.prev = NONE;
        place.next = NONE;
        self.waiting -= 1;
    }
}

#[cfg(all(test, not(admit_loom)))]
#[path = "queue_tests.rs"]
mod tests;
