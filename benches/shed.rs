//! `Shedder::allow` + `Permit::pass` against tokio's `Semaphore`, the primitive behind tower's
//! `ConcurrencyLimit` (acquire a permit, release it on completion), in the same groups.
//!
//! ```text
//! cargo bench -p admit-benches --bench shed
//! ```
//!
//! - **not overloaded**: the CPU signal reads 0 ‰, so every request is admitted and completed.
//!   The semaphore has permits to spare.
//! - **overloaded**: the CPU reads 1000 ‰ and many requests are in flight, so every request is
//!   refused. The semaphore has no permit left.
//!
//! `admit, two classes/…` is the same shedder called with `allow_with` and a class, one call in five
//! critical and the others sheddable: the decision with two classes in use. Overloaded, the
//! sheddable calls are refused and the critical ones served (they are admitted no faster than
//! they complete, so they fit), so that row is four refusals and an admission in five calls.
//!
//! `admit+queue/…` is the same shedder with a queue gate attached (5 ms target, 100 ms
//! intervals), called with `allow_with` and a 2 ms wait: each admission also records its wait.
//!
//! The two-thread benches run the same loop on two threads at once against one shared shedder;
//! the reported time is wall time divided by the calls each thread made.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use admit::clock::MonotonicClock;
use admit::signal::Arrival;
use admit_benches::{coarse_clock, on_two_threads, queued_shedder, shedder, two_classes};
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use tokio::sync::Semaphore;

fn semaphore(overloaded: bool) -> Arc<Semaphore> {
    Arc::new(Semaphore::new(if overloaded { 0 } else { 1 << 20 }))
}

fn register(group: &mut BenchmarkGroup<'_, WallTime>, overloaded: bool, threads: usize) {
    macro_rules! bench {
        ($name:expr, $call:expr) => {{
            let call = $call;
            match threads {
                1 => group.bench_function($name, |b| b.iter(|| black_box(call()))),
                _ => group.bench_function($name, |b| {
                    b.iter_custom(|iters| on_two_threads(iters, &call))
                }),
            };
        }};
    }
    let monotonic = shedder(MonotonicClock::new(), overloaded);
    bench!("admit/MonotonicClock", || match monotonic.allow() {
        Ok(permit) => {
            permit.pass();
            true
        }
        Err(_) => false,
    });
    let classed = shedder(MonotonicClock::new(), overloaded);
    bench!("admit, two classes/MonotonicClock", || match classed
        .allow_with(Arrival::new().with_class(two_classes()))
    {
        Ok(permit) => {
            permit.pass();
            true
        }
        Err(_) => false,
    });
    let cached = shedder(coarse_clock(), overloaded);
    bench!("admit/CoarseClock", || match cached.allow() {
        Ok(permit) => {
            permit.pass();
            true
        }
        Err(_) => false,
    });
    let queued = queued_shedder(MonotonicClock::new(), overloaded);
    bench!("admit+queue/MonotonicClock", || match queued
        .allow_with(Arrival::new().with_wait(Duration::from_millis(2)))
    {
        Ok(permit) => {
            permit.pass();
            true
        }
        Err(_) => false,
    });
    let limit = semaphore(overloaded);
    bench!("tokio/Semaphore", || limit.try_acquire().is_ok());
}

fn benches(c: &mut Criterion) {
    for (scenario, overloaded) in [("not overloaded", false), ("overloaded", true)] {
        for (threads, label) in [(1, "1 thread"), (2, "2 threads")] {
            let mut group = c.benchmark_group(format!("shed/{scenario}/{label}"));
            group.throughput(Throughput::Elements(1));
            register(&mut group, overloaded, threads);
            group.finish();
        }
    }
}

criterion_group!(shed, benches);
criterion_main!(shed);
