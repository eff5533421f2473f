//! The client's per-request costs on one thread, each reading the real monotonic clock as in
//! use: a throttle's decision and its count of the answer, healthy and refusing, and a retry
//! budget's deposit and withdrawal beside tower's `TpsBudget`, the peer tower's `retry`
//! offers (which reads tokio's `Instant`).
//!
//! ```text
//! cargo bench -p admit-benches --bench client
//! ```

use std::hint::black_box;
use std::time::Duration;

use admit::client::{RetryBudget, Throttle};
use criterion::{Criterion, criterion_group, criterion_main};
use tower::retry::budget::{Budget, TpsBudget};

fn throttle(c: &mut Criterion) {
    let mut group = c.benchmark_group("client/throttle");
    let healthy = Throttle::builder().build().unwrap();
    group.bench_function("sent and accepted", |b| {
        b.iter(|| {
            if black_box(&healthy).try_send().is_ok() {
                healthy.accepted();
            }
        })
    });
    // A backend that has refused everything: nearly every decision refuses.
    let refusing = Throttle::builder().build().unwrap();
    for _ in 0..10_000 {
        refusing.refused();
    }
    group.bench_function("refused here", |b| {
        b.iter(|| {
            if black_box(&refusing).try_send().is_ok() {
                refusing.refused();
            }
        })
    });
    group.finish();
}

fn budget(c: &mut Criterion) {
    let mut group = c.benchmark_group("client/retry_budget");
    // The same budget: 10 % of the requests, a floor of 1 per second, over 10 s.
    let admit = RetryBudget::builder()
        .ratio(0.1)
        .floor_per_second(1.0)
        .window(Duration::from_secs(10), 10)
        .build()
        .unwrap();
    group.bench_function("admit deposit and withdraw", |b| {
        b.iter(|| {
            black_box(&admit).deposit();
            black_box(admit.try_withdraw())
        })
    });
    let tower = TpsBudget::new(Duration::from_secs(10), 1, 0.1);
    group.bench_function("tower TpsBudget deposit and withdraw", |b| {
        b.iter(|| {
            black_box(&tower).deposit();
            black_box(tower.withdraw())
        })
    });
    group.finish();
}

criterion_group!(benches, throttle, budget);
criterion_main!(benches);
