//! What one clock read costs: admit's clocks beside `std::time::Instant` and the TSC-based
//! `quanta` clock governor uses by default. The numbers quoted in `admit::clock`'s docs come
//! from here.
//!
//! ```text
//! cargo bench -p admit-benches --bench clock
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use admit::clock::{Clock, CoarseClock, ManualClock, MonotonicClock};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use governor::clock::{Clock as GovernorClock, QuantaClock};

fn clocks(c: &mut Criterion) {
    let mut group = c.benchmark_group("clock/read");
    group.throughput(Throughput::Elements(1));

    let monotonic = MonotonicClock::new();
    group.bench_function("admit/MonotonicClock", |b| {
        b.iter(|| black_box(monotonic.now_nanos()))
    });
    let coarse = CoarseClock::start(Duration::from_millis(1)).expect("clock thread");
    group.bench_function("admit/CoarseClock", |b| {
        b.iter(|| black_box(coarse.now_nanos()))
    });
    let manual = ManualClock::new();
    group.bench_function("admit/ManualClock", |b| {
        b.iter(|| black_box(manual.now_nanos()))
    });
    group.bench_function("std/Instant::now", |b| b.iter(|| black_box(Instant::now())));
    let quanta = QuantaClock::default();
    group.bench_function("governor/QuantaClock", |b| {
        b.iter(|| black_box(quanta.now()))
    });
    group.finish();
}

criterion_group!(clock, clocks);
criterion_main!(clock);
