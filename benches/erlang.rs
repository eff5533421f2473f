//! `MMc::min_servers` and a single Erlang C evaluation, against the textbook series they
//! replace (which returns NaN beyond about 710 erlangs), in the same groups.
//!
//! ```text
//! cargo bench -p admit-benches --bench erlang
//! ```
//!
//! The service-level target is 80 % within a hundredth of a service time (`T = 0.01/μ`).

use std::hint::black_box;

use admit::erlang::{MMc, QueueModel, Target};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

const TARGET: Target = Target::ServiceLevel {
    within: 0.01,
    at_least: 0.8,
};

/// Erlang C by the textbook series `Σ_{k<c} aᵏ/k! + aᶜ/c!·c/(c−a)`: what most scalers use.
fn naive_erlang_c(servers: u64, a: f64) -> f64 {
    let (mut term, mut sum) = (1.0f64, 1.0f64);
    for k in 1..servers {
        term *= a / k as f64;
        sum += term;
    }
    let last = term * a / servers as f64 * (servers as f64 / (servers as f64 - a));
    last / (sum + last)
}

/// The fewest servers by walking up from the load, one naive Erlang C per step (`O(c²)`).
fn naive_min_servers(a: f64, within: f64, at_least: f64) -> u64 {
    let mut servers = a.floor() as u64 + 1;
    loop {
        let wait = naive_erlang_c(servers, a);
        let level = 1.0 - wait * (-(servers as f64 - a) * within).exp();
        if level >= at_least || servers > 10 * a as u64 + 100 {
            return servers;
        }
        servers += 1;
    }
}

fn min_servers(c: &mut Criterion) {
    let mut group = c.benchmark_group("erlang/min_servers");
    for a in [100.0, 500.0] {
        let queue = MMc::new(a, 1.0).unwrap();
        group.bench_with_input(BenchmarkId::new("admit", a), &queue, |b, queue| {
            b.iter(|| black_box(queue.min_servers(black_box(TARGET)).unwrap()))
        });
        group.bench_with_input(BenchmarkId::new("naive series", a), &a, |b, &a| {
            b.iter(|| black_box(naive_min_servers(black_box(a), 0.01, 0.8)))
        });
    }
    for a in [1e3, 1e5, 1e6, 1e7] {
        let queue = MMc::new(a, 1.0).unwrap();
        group.bench_with_input(BenchmarkId::new("admit", a), &queue, |b, queue| {
            b.iter(|| black_box(queue.min_servers(black_box(TARGET)).unwrap()))
        });
    }
    group.finish();
}

fn erlang_c(c: &mut Criterion) {
    let mut group = c.benchmark_group("erlang/erlang_c");
    for a in [500.0, 1e6] {
        let queue = MMc::new(a, 1.0).unwrap();
        let servers = (a + 2.0 * a.sqrt()).ceil() as u64;
        group.bench_with_input(BenchmarkId::new("admit", a), &servers, |b, &servers| {
            b.iter(|| black_box(queue.prob_wait(black_box(servers)).unwrap()))
        });
        group.bench_with_input(
            BenchmarkId::new("naive series", a),
            &servers,
            |b, &servers| {
                // NaN from about 710 erlangs: kept to show the cost it would have.
                b.iter(|| black_box(naive_erlang_c(black_box(servers), a)))
            },
        );
    }
    group.finish();
}

criterion_group!(erlang, min_servers, erlang_c);
criterion_main!(erlang);
