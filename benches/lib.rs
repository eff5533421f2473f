//! Benchmarks for `admit`; run them with `cargo bench -p admit-benches`. This library holds what
//! the benchmark files share.

use std::cell::Cell;
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use std::sync::Arc;

use admit::Shared;
use admit::bound::{Bound, BoundPermit};
use admit::clock::{Clock, CoarseClock, MonotonicClock};
use admit::criticality::Criticality;
use admit::middleware::{Admission, Limiter};
use admit::shed::Shedder;
use admit::signal::Arrival;
use admit::signal::cpu::ManualCpu;

/// Runs `call` `iters` times on each of two threads at once and returns the wall time: with
/// criterion's `iter_custom`, the time per call per thread under contention.
pub fn on_two_threads(iters: u64, call: &(dyn Fn() -> bool + Sync)) -> Duration {
    on_threads(2, &|| {
        for _ in 0..iters {
            black_box(call());
        }
    })
}

/// Runs `work` on `threads` threads released together and returns the wall time from their
/// release until the last one finishes.
pub fn on_threads(threads: usize, work: &(dyn Fn() + Sync)) -> Duration {
    let start_line = Barrier::new(threads + 1);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                start_line.wait();
                work();
            });
        }
        start_line.wait();
        Instant::now()
    })
    .elapsed()
}

/// The class of each call on this thread: one in five critical, the others sheddable, so that
/// the limiters decide with two classes in use.
pub fn two_classes() -> Criticality {
    thread_local! {
        static NEXT: Cell<u8> = const { Cell::new(0) };
    }
    NEXT.with(|next| {
        let n = next.get();
        next.set((n + 1) % 5);
        if n == 0 {
            Criticality::Critical
        } else {
            Criticality::Sheddable
        }
    })
}

/// A coarse clock ticking every millisecond.
pub fn coarse_clock() -> CoarseClock {
    CoarseClock::start(Duration::from_millis(1)).expect("clock thread")
}

/// A shedder on `clock` whose CPU signal reads 0 ‰, or, `overloaded`, 1000 ‰ with 1000
/// requests held in flight, so that it refuses every request.
pub fn shedder<C: Clock + 'static>(clock: C, overloaded: bool) -> Arc<Shedder<C>> {
    named_shedder(clock, overloaded, None)
}

/// [`shedder`] with a queue gate (5 ms target, 100 ms intervals).
pub fn queued_shedder<C: Clock + 'static>(clock: C, overloaded: bool) -> Arc<Shedder<C>> {
    build_shedder(
        Shedder::builder()
            .clock(clock)
            .queue_gate(admit::signal::queue::QueueGate::default()),
        overloaded,
    )
}

/// [`shedder`], named (for the metrics benchmarks) if `name` is given.
pub fn named_shedder<C: Clock + 'static>(
    clock: C,
    overloaded: bool,
    name: Option<&'static str>,
) -> Arc<Shedder<C>> {
    let builder = Shedder::builder().clock(clock);
    match name {
        Some(name) => build_shedder(builder.name(name), overloaded),
        None => build_shedder(builder, overloaded),
    }
}

/// Builds with a manual CPU signal; if `overloaded`, pushes it into overload for good.
fn build_shedder<C: Clock + 'static>(
    builder: admit::shed::ShedderBuilder<C>,
    overloaded: bool,
) -> Arc<Shedder<C>> {
    let cpu = ManualCpu::new(0);
    let shedder = Arc::new(
        builder
            .cpu(cpu.clone())
            .build()
            .expect("valid configuration"),
    );
    if overloaded {
        // 100 quick passes make the limit small; the other 1000 stay in flight for good.
        let mut in_flight: Vec<_> = (0..1100)
            .map(|_| shedder.allow_owned().expect("a cool CPU admits"))
            .collect();
        for permit in in_flight.drain(..100) {
            permit.pass();
        }
        std::mem::forget(in_flight);
        cpu.set(1000);
        assert!(shedder.allow().is_err(), "the shedder refuses");
    }
    shedder
}

/// A bound of one place, held by the permit returned beside it, and no queue: every request is
/// refused (`bound-full`).
pub fn full_bound() -> (Arc<Bound>, BoundPermit<MonotonicClock>) {
    let bound = Arc::new(
        Bound::builder()
            .floor(1)
            .ceiling(1)
            .queue_capacity(0)
            .build()
            .expect("valid configuration"),
    );
    let Admission::Enter(held) = Bound::admit(&Shared::Arc(bound.clone()), Arrival::new()) else {
        panic!("the first request enters");
    };
    (bound, held)
}
