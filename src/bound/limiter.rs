//! The bound on the work in service, and the queue in front of it.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use super::control::{self, WINDOW, Window};
use super::error::Why;
use super::queue::{Cancelled, Left, Limits, Queue};
use super::snapshot::{BoundSnapshot, WaitCounts};
use crate::clock::{Clock, MonotonicClock, saturating_nanos};
use crate::criticality::Criticality;
use crate::signal::Arrival;
use crate::signal::cpu::CpuWait;
use crate::sync::{
    AtomicBool, AtomicU64, Line, Mutex, MutexGuard, Ordering, Striped, store_load_barrier,
};

/// A bound on the requests in service, and a short queue, ordered by class, in front of it.
///
/// A request enters at once while fewer than the bound are in service and nobody waits;
/// otherwise it waits, asynchronously, in a queue of fixed size: the highest class first, in
/// arrival order within a class. A full queue (every place taken, or as many waiters as the
/// bound serves within the wait allowed) makes room for a request by pushing out the newest
/// waiter of the lowest class below it, or refuses it. A waiter leaves with a refusal
/// ([`Busy`](super::Busy)) once it has waited as long as the queue allows (controlled delay:
/// a target while the queue stands for its class, by default twenty mean times in service but
/// at least 5 ms, and an interval, 100 ms, otherwise), or once its deadline
/// ([`Arrival::with_time_left`]) can no longer be met; one whose future is dropped leaves at
/// once. A request whose deadline has passed (the wait a reader read before it reached the
/// limiter counts) or that the mean time in service no longer fits in is refused at once,
/// room or not: nothing works for a caller that has given up.
///
/// The bound starts at the floor and moves at most every 10 ms with what the completed requests
/// report: it falls when their work spent more than two fifths of its time waiting for a CPU
/// ([`CpuWait`], which [`spawn_blocking`](super::spawn_blocking) measures), and rises by an
/// eighth when requests had to wait and the CPU was not contended. The
/// [guide](crate::guide::bound) explains the law, the queue and the settings.
///
/// Apply it with [`BoundLayer`](super::BoundLayer). Build it with [`Bound::builder`].
pub struct Bound<C = MonotonicClock> {
    in_service: Line<AtomicU64>,
    waiting: Line<AtomicU64>,
    limit: AtomicU64,
    floor: u64,
    ceiling: u64,
    window: Line<Tally>,
    queue: Mutex<Queue>,
    /// The longest a request may wait (controlled delay's interval), ns.
    interval: u64,
    /// Whether the standing target follows the mean time in service.
    follow_service: bool,
    /// What became of the requests that could not enter at once, by class and [`Count`].
    counts: [[AtomicU64; Count::ALL]; Criticality::COUNT],
    offered: Striped<1>,
    name: Option<Cow<'static, str>>,
    clock: C,
}

/// The columns of [`Bound::counts`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Count {
    Waited,
    Entered,
    Cancelled,
    Full,
    PushedOut,
    TimedOut,
    Deadline,
}

impl Count {
    const ALL: usize = 7;
}

/// The completions of the current window.
#[derive(Debug, Default)]
struct Tally {
    service: AtomicU64,
    wait: AtomicU64,
    done: AtomicU64,
    demand: AtomicBool,
    /// When the bound may move next, ns.
    next_move: AtomicU64,
    /// The mean time in service of the last window with completions, ns.
    mean_service: AtomicU64,
}

/// What [`Bound::decide`] decides.
pub(crate) enum Entry {
    /// Enter now.
    Now,
    /// Wait with this ticket, until this time at the latest.
    Wait(super::queue::Ticket, u64),
    /// Refused.
    Refused(Why),
}

/// The settings [`BoundBuilder`](super::BoundBuilder) checked.
#[derive(Debug)]
pub(crate) struct Settings<C> {
    pub(crate) floor: u32,
    pub(crate) ceiling: u32,
    pub(crate) capacity: u32,
    pub(crate) target: Duration,
    pub(crate) interval: Duration,
    /// Whether the standing target follows the mean time in service.
    pub(crate) follow_service: bool,
    pub(crate) name: Option<Cow<'static, str>>,
    pub(crate) clock: C,
}

impl<C: Clock> Bound<C> {
    pub(crate) fn new(settings: Settings<C>) -> Self {
        let now = settings.clock.now_nanos();
        let floor = u64::from(settings.floor);
        Bound {
            in_service: Line::new(AtomicU64::new(0)),
            waiting: Line::new(AtomicU64::new(0)),
            limit: AtomicU64::new(floor),
            floor,
            ceiling: u64::from(settings.ceiling),
            window: Line::new(Tally {
                next_move: AtomicU64::new(now.saturating_add(saturating_nanos(WINDOW))),
                ..Tally::default()
            }),
            queue: Mutex::new(Queue::new(
                settings.capacity,
                Limits {
                    target: saturating_nanos(settings.target),
                    interval: saturating_nanos(settings.interval),
                },
            )),
            interval: saturating_nanos(settings.interval),
            follow_service: settings.follow_service,
            counts: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            offered: Striped::new(),
            name: settings.name,
            clock: settings.clock,
        }
    }

    /// The bound now: how many requests may be in service.
    pub(crate) fn limit(&self) -> u64 {
        self.limit.load(Ordering::Relaxed)
    }

    /// How many requests are in service.
    pub(crate) fn in_service(&self) -> u64 {
        self.in_service.load(Ordering::Relaxed)
    }

    /// How many requests wait.
    pub(crate) fn waiting(&self) -> u64 {
        self.waiting.load(Ordering::Relaxed)
    }

    /// The name given to the builder, which labels the bound's metrics.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The bound, the requests in service and waiting, and what became of the requests that
    /// could not enter at once, by class. Each field is read on its own: under load they may
    /// be a moment apart.
    pub fn snapshot(&self) -> BoundSnapshot {
        let count =
            |class: usize, which: Count| self.counts[class][which as usize].load(Ordering::Relaxed);
        BoundSnapshot {
            limit: self.limit(),
            floor: self.floor,
            ceiling: self.ceiling,
            in_service: self.in_service(),
            waiting: self.waiting(),
            offered: self.offered.sum(0),
            classes: std::array::from_fn(|class| WaitCounts {
                waited: count(class, Count::Waited),
                entered: count(class, Count::Entered),
                cancelled: count(class, Count::Cancelled),
                full: count(class, Count::Full),
                pushed_out: count(class, Count::PushedOut),
                timed_out: count(class, Count::TimedOut),
                deadline: count(class, Count::Deadline),
            }),
        }
    }

    /// Counts one request of `class` under `which`.
    pub(crate) fn count(&self, class: Criticality, which: Count) {
        self.counts[class.index()][which as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a request offered to this bound's layer first.
    #[inline]
    pub(crate) fn offer(&self) {
        self.offered.add(0, 1);
    }

    pub(crate) fn now(&self) -> u64 {
        self.clock.now_nanos()
    }

    /// Decides a request arriving at `now`.
    #[inline]
    pub(crate) fn decide(&self, arrival: &Arrival, now: u64) -> Entry {
        let leave_by = match arrival.time_left_nanos() {
            None => u64::MAX,
            Some(left) => match self.leave_by(arrival, left, now) {
                Some(leave_by) => leave_by,
                None => {
                    self.count(arrival.class().unwrap_or_default(), Count::Deadline);
                    return Entry::Refused(Why::Deadline);
                }
            },
        };
        if self.waiting.load(Ordering::Relaxed) == 0 && self.try_take() {
            return Entry::Now;
        }
        self.decide_slowly(arrival, now, leave_by)
    }

    /// The latest a request with `left` ns before its deadline may start, at the mean service
    /// time: `None` if its deadline has passed (the wait before the limiter counts) or its
    /// service no longer fits before it.
    #[inline]
    fn leave_by(&self, arrival: &Arrival, left: u64, now: u64) -> Option<u64> {
        let expected = self.window.mean_service.load(Ordering::Relaxed);
        let spent = arrival.wait_nanos().unwrap_or(0).saturating_add(expected);
        match left.checked_sub(spent) {
            Some(spare) if spare > 0 => Some(now.saturating_add(spare)),
            _ => None,
        }
    }

    #[cold]
    fn decide_slowly(&self, arrival: &Arrival, now: u64, leave_by: u64) -> Entry {
        self.window.demand.store(true, Ordering::Relaxed);
        let class = arrival.class().unwrap_or_default();
        let mut queue = self.lock();
        queue.expire(now);
        if queue.len() == 0 && self.try_take() {
            return Entry::Now;
        }
        let room = self.room(&queue, class, now);
        let Some((ticket, pushed_out)) = queue.join(class, now, leave_by, room) else {
            self.count(class, Count::Full);
            return Entry::Refused(Why::Full);
        };
        self.count(class, Count::Waited);
        if let Some(lower) = pushed_out {
            self.count(lower, Count::PushedOut);
        }
        self.grant_while_room(&mut queue, now);
        Entry::Wait(ticket, leave_by.min(now.saturating_add(self.interval)))
    }

    /// Takes a place in service if the bound allows.
    #[inline]
    fn try_take(&self) -> bool {
        let limit = self.limit.load(Ordering::Relaxed);
        let mut current = self.in_service.load(Ordering::SeqCst);
        while current < limit {
            match self.in_service.compare_exchange_weak(
                current,
                current + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return true,
                Err(now) => current = now,
            }
        }
        false
    }

    /// Ends a request's time in service at `now`, having spent `service` ns in it while its
    /// work waited `cpu_wait` for a CPU (`None`: cancelled, it teaches nothing).
    pub(crate) fn finish(&self, now: u64, service: Option<(u64, CpuWait)>) {
        if let Some((service, cpu_wait)) = service {
            self.record(now, service, saturating_nanos(cpu_wait.0));
        }
        self.in_service.fetch_sub(1, Ordering::SeqCst);
        store_load_barrier();
        if self.waiting.load(Ordering::SeqCst) > 0 {
            let mut queue = self.lock();
            queue.expire(now);
            self.grant_while_room(&mut queue, now);
        }
    }

    fn record(&self, now: u64, service: u64, wait: u64) {
        let tally = &*self.window;
        tally.service.fetch_add(service, Ordering::Relaxed);
        tally.wait.fetch_add(wait, Ordering::Relaxed);
        tally.done.fetch_add(1, Ordering::Relaxed);
        let due = tally.next_move.load(Ordering::Relaxed);
        if now >= due
            && tally
                .next_move
                .compare_exchange(
                    due,
                    now.saturating_add(saturating_nanos(WINDOW)),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            self.move_bound();
        }
    }

    /// Moves the bound with what the window saw, and starts the next one.
    #[cold]
    fn move_bound(&self) {
        let tally = &*self.window;
        let window = Window {
            service_nanos: tally.service.swap(0, Ordering::Relaxed),
            wait_nanos: tally.wait.swap(0, Ordering::Relaxed),
            demand: tally.demand.swap(false, Ordering::Relaxed),
        };
        let done = tally.done.swap(0, Ordering::Relaxed);
        if let Some(mean) = window.service_nanos.checked_div(done) {
            tally.mean_service.store(mean, Ordering::Relaxed);
            // Never waits for the queue's lock: while it is taken, the target follows at a
            // later window.
            if self.follow_service
                && let Ok(mut queue) = self.queue.try_lock()
            {
                queue.follow_service(mean);
            }
        }
        let limit = self.limit.load(Ordering::Relaxed);
        let next = control::next(limit, self.floor, self.ceiling, window);
        self.limit.store(next, Ordering::Relaxed);
    }

    /// How many waiters the bound can serve within the wait a request of `class` is allowed at
    /// `now`: `allowed · bound / mean service time`, at least one. A request beyond them would
    /// only wait to be refused, so it is refused at once, which costs the core far less.
    fn room(&self, queue: &Queue, class: Criticality, now: u64) -> usize {
        let mean = self.window.mean_service.load(Ordering::Relaxed);
        if mean == 0 {
            return usize::MAX;
        }
        let allowed = u128::from(queue.allowed(class, now));
        let served = allowed * u128::from(self.limit.load(Ordering::Relaxed)) / u128::from(mean);
        usize::try_from(served).unwrap_or(usize::MAX).max(1)
    }

    /// Grants waiters, highest class first, while the bound has room, and publishes how many
    /// still wait.
    fn grant_while_room(&self, queue: &mut Queue, now: u64) {
        while queue.len() > 0 {
            // Publish the waiters before looking for room, so that a request finishing now
            // either sees them or leaves the room this sees.
            self.waiting.store(queue.len() as u64, Ordering::SeqCst);
            store_load_barrier();
            if !self.try_take() {
                return;
            }
            queue.grant_next(now);
        }
        self.waiting.store(0, Ordering::SeqCst);
    }

    /// What a waiter finds at `now`; see [`Queue::poll`].
    pub(crate) fn look(
        &self,
        ticket: super::queue::Ticket,
        now: u64,
        waker: &std::task::Waker,
    ) -> super::queue::Turn {
        let mut queue = self.lock();
        let turn = queue.poll(ticket, now, waker);
        if turn != super::queue::Turn::Waiting {
            self.waiting.store(queue.len() as u64, Ordering::SeqCst);
        }
        turn
    }

    /// A waiter of `class` gives up at `now`: a place granted to it goes to the next.
    pub(crate) fn cancel(&self, ticket: super::queue::Ticket, class: Criticality, now: u64) {
        let mut queue = self.lock();
        match queue.cancel(ticket, now) {
            Cancelled::Waiting => self.count(class, Count::Cancelled),
            Cancelled::Granted => {
                self.count(class, Count::Cancelled);
                self.in_service.fetch_sub(1, Ordering::SeqCst);
            }
            // Counted when it was pushed out.
            Cancelled::Left(Left::PushedOut) => {}
            Cancelled::Left(reason) => self.count_left(class, reason),
        }
        queue.expire(now);
        self.grant_while_room(&mut queue, now);
    }

    /// Counts a waiter of `class` that left for `reason` (a push-out is counted as it happens).
    pub(crate) fn count_left(&self, class: Criticality, reason: Left) {
        match reason {
            Left::Timeout => self.count(class, Count::TimedOut),
            Left::Deadline => self.count(class, Count::Deadline),
            Left::PushedOut => {}
        }
    }

    /// The retry hint of a refusal: the controlled-delay interval.
    pub(crate) fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.interval)
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // Nothing under this lock is left half-updated by a panic.
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl<C> fmt::Debug for Bound<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bound")
            .field("limit", &self.limit.load(Ordering::Relaxed))
            .field("in_service", &self.in_service.load(Ordering::Relaxed))
            .field("waiting", &self.waiting.load(Ordering::Relaxed))
            .field("floor", &self.floor)
            .field("ceiling", &self.ceiling)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}
