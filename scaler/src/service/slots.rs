//! Decision slots shared fairly between namespaces.
//!
//! At most `total` decisions run at once, and at most `per_namespace` of them for one
//! namespace, so that one namespace's slow triggers never hold every slot: another namespace
//! always finds one free unless several namespaces fill their shares. A decision that finds no
//! free slot waits in its namespace's queue (first come, first served). When a slot comes free
//! it goes to the namespaces with waiters in turn (round robin), skipping those at their
//! share. A wait has a deadline: past it the decision is not made.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;

/// The slots, and who holds or waits for them.
#[derive(Debug)]
pub(super) struct Slots {
    total: usize,
    per_namespace: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Slots held.
    running: usize,
    /// Namespaces that hold a slot or wait for one.
    namespaces: HashMap<Arc<str>, Namespace>,
    /// Namespaces with waiters, in the order their turns come.
    turns: VecDeque<Arc<str>>,
}

#[derive(Debug, Default)]
struct Namespace {
    running: usize,
    /// Waiters, oldest first; a waiter that gave up has a closed sender.
    waiting: VecDeque<oneshot::Sender<Slot>>,
}

/// One decision slot, given back when dropped.
#[derive(Debug)]
pub(super) struct Slot {
    /// `None` once given back (or never handed out).
    slots: Option<Arc<Slots>>,
    namespace: Arc<str>,
}

impl Slots {
    /// `total` slots, at most `per_namespace` held by one namespace (each at least 1).
    pub(super) fn new(total: usize, per_namespace: usize) -> Arc<Self> {
        let total = total.max(1);
        Arc::new(Slots {
            total,
            per_namespace: per_namespace.clamp(1, total),
            state: Mutex::new(State::default()),
        })
    }

    /// A slot for a decision of `namespace`, waiting at most `within` for one: `None` if none
    /// came free in time.
    pub(super) async fn acquire(
        self: &Arc<Self>,
        namespace: &Arc<str>,
        within: Duration,
    ) -> Option<Slot> {
        let receiver = {
            let mut state = lock(&self.state);
            let State {
                running,
                namespaces,
                turns,
            } = &mut *state;
            let entry = namespaces.entry(Arc::clone(namespace)).or_default();
            // Waiters whose wait was dropped before its end are no one's turn.
            if !entry.waiting.is_empty() {
                entry.waiting.retain(|waiter| !waiter.is_closed());
                if entry.waiting.is_empty() {
                    turns.retain(|turn| turn != namespace);
                }
            }
            // A free slot goes to a namespace below its share with no one waiting before it;
            // waiters elsewhere are at their own share, or they would hold it already.
            if *running < self.total
                && entry.running < self.per_namespace
                && entry.waiting.is_empty()
            {
                *running += 1;
                entry.running += 1;
                return Some(Slot {
                    slots: Some(Arc::clone(self)),
                    namespace: Arc::clone(namespace),
                });
            }
            let (sender, receiver) = oneshot::channel();
            if entry.waiting.is_empty() {
                turns.push_back(Arc::clone(namespace));
            }
            entry.waiting.push_back(sender);
            receiver
        };
        match tokio::time::timeout(within, receiver).await {
            Ok(Ok(slot)) => Some(slot),
            // The sender is dropped only with the slots; a slot granted as the wait ends is
            // dropped with the receiver, which gives it back.
            Ok(Err(_)) | Err(_) => {
                self.forget_given_up(namespace);
                None
            }
        }
    }

    /// Drops the waiters of `namespace` that gave up.
    fn forget_given_up(&self, namespace: &Arc<str>) {
        let mut state = lock(&self.state);
        let State {
            namespaces, turns, ..
        } = &mut *state;
        if let Some(entry) = namespaces.get_mut(namespace) {
            entry.waiting.retain(|waiter| !waiter.is_closed());
            if entry.waiting.is_empty() {
                turns.retain(|turn| turn != namespace);
                if entry.running == 0 {
                    namespaces.remove(namespace);
                }
            }
        }
    }

    /// Gives back a slot of `namespace` and hands free slots to the next waiters.
    fn release(self: &Arc<Self>, namespace: &Arc<str>) {
        let mut state = lock(&self.state);
        state.running -= 1;
        if let Some(entry) = state.namespaces.get_mut(namespace) {
            entry.running -= 1;
            if entry.running == 0 && entry.waiting.is_empty() {
                state.namespaces.remove(namespace);
            }
        }
        self.grant(&mut state);
    }

    /// Hands free slots to waiters, a namespace at a time in turn, until no slot is free or
    /// no waiter can take one.
    fn grant(self: &Arc<Self>, state: &mut State) {
        let State {
            running,
            namespaces,
            turns,
        } = state;
        // Each namespace in the rotation is looked at once per slot handed out: a whole round
        // without one means every waiter's namespace is at its share.
        let mut unlucky = 0;
        while *running < self.total && unlucky < turns.len() {
            let Some(namespace) = turns.pop_front() else {
                break;
            };
            let Some(entry) = namespaces.get_mut(&namespace) else {
                continue;
            };
            if entry.running >= self.per_namespace {
                turns.push_back(namespace);
                unlucky += 1;
                continue;
            }
            let mut handed = false;
            while let Some(waiter) = entry.waiting.pop_front() {
                *running += 1;
                entry.running += 1;
                let slot = Slot {
                    slots: Some(Arc::clone(self)),
                    namespace: Arc::clone(&namespace),
                };
                match waiter.send(slot) {
                    Ok(()) => {
                        handed = true;
                        break;
                    }
                    // It gave up: the slot was never out, and its drop must not lock again.
                    Err(mut slot) => {
                        slot.slots = None;
                        *running -= 1;
                        entry.running -= 1;
                    }
                }
            }
            if entry.waiting.is_empty() {
                if entry.running == 0 {
                    namespaces.remove(&namespace);
                }
            } else {
                turns.push_back(namespace);
            }
            unlucky = if handed { 0 } else { unlucky };
        }
    }

    #[cfg(test)]
    fn held(&self, namespace: &str) -> usize {
        lock(&self.state)
            .namespaces
            .get(namespace)
            .map_or(0, |entry| entry.running)
    }

    #[cfg(test)]
    fn is_idle(&self) -> bool {
        let state = lock(&self.state);
        state.running == 0 && state.namespaces.is_empty() && state.turns.is_empty()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(slots) = self.slots.take() {
            slots.release(&self.namespace);
        }
    }
}

/// The guard, whether or not another thread panicked holding the lock: every critical
/// section here leaves the counts consistent.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(3600);

    fn ns(name: &str) -> Arc<str> {
        name.into()
    }

    #[tokio::test(start_paused = true)]
    async fn one_namespace_holds_at_most_its_share() {
        let slots = Slots::new(4, 2);
        let a = ns("a");
        let first = slots.acquire(&a, LONG).await.unwrap();
        let _second = slots.acquire(&a, LONG).await.unwrap();
        // A third decision of `a` waits though two slots are free...
        let third = tokio::time::timeout(Duration::from_secs(1), slots.acquire(&a, LONG)).await;
        assert!(third.is_err());
        // ...and another namespace gets one at once.
        let b = slots.acquire(&ns("b"), Duration::ZERO).await;
        assert!(b.is_some());
        assert_eq!((slots.held("a"), slots.held("b")), (2, 1));
        drop((first, b));
        let third = slots.acquire(&a, Duration::ZERO).await;
        assert!(third.is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_past_its_deadline_gets_nothing_and_leaves_no_trace() {
        let slots = Slots::new(1, 1);
        let held = slots.acquire(&ns("a"), LONG).await.unwrap();
        let start = tokio::time::Instant::now();
        assert!(
            slots
                .acquire(&ns("b"), Duration::from_secs(5))
                .await
                .is_none()
        );
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        // No trace of `b` even before a slot frees (a release would clean up after it).
        {
            let state = lock(&slots.state);
            assert!(!state.namespaces.contains_key("b"));
            assert!(state.turns.is_empty());
        }
        drop(held);
        assert!(slots.is_idle());
    }

    #[tokio::test(start_paused = true)]
    async fn freed_slots_go_to_waiting_namespaces_in_turn() {
        let slots = Slots::new(1, 1);
        let held = slots.acquire(&ns("a"), LONG).await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiters = tokio::task::JoinSet::new();
        // Three of `a` wait first, then one of `b` and one of `c`.
        for name in ["a", "a", "a", "b", "c"] {
            let (slots, order) = (Arc::clone(&slots), Arc::clone(&order));
            waiters.spawn(async move {
                let slot = slots.acquire(&ns(name), LONG).await.unwrap();
                lock(&order).push(name);
                tokio::time::sleep(Duration::from_secs(1)).await;
                drop(slot);
            });
            tokio::task::yield_now().await;
        }
        drop(held);
        waiters.join_all().await;
        assert_eq!(*lock(&order), ["a", "b", "c", "a", "a"]);
        assert!(slots.is_idle());
    }

    #[tokio::test(start_paused = true)]
    async fn a_slot_granted_to_a_waiter_that_gave_up_goes_to_the_next() {
        let slots = Slots::new(1, 1);
        let held = slots.acquire(&ns("a"), LONG).await.unwrap();
        let gave_up = {
            let slots = Arc::clone(&slots);
            tokio::spawn(async move { slots.acquire(&ns("b"), LONG).await })
        };
        tokio::task::yield_now().await;
        let next = {
            let slots = Arc::clone(&slots);
            tokio::spawn(async move { slots.acquire(&ns("c"), LONG).await.is_some() })
        };
        tokio::task::yield_now().await;
        gave_up.abort();
        // Its wait, and so its receiver, is dropped before the slot frees: the hand-off finds
        // it closed, and goes on to `c`.
        assert!(gave_up.await.unwrap_err().is_cancelled());
        drop(held);
        assert!(next.await.unwrap());
        assert!(slots.is_idle());
    }
}
