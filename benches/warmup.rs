//! `WarmUp::try_acquire` against governor's direct `check()` and sentinel-core's warm-up flow
//! rule, in the same groups so the ratio holds on a noisy machine.
//!
//! ```text
//! cargo bench -p admit-benches --bench warmup
//! ```
//!
//! - **mostly admit**: a limit far above what one core can request (10⁹/s), so nearly every call
//!   passes and performs its compare-and-swap.
//! - **mostly reject**: 10/s (admit) and 1/s (governor), so nearly every call is refused.
//! - **steady**: `WarmUp`'s two steady states beside governor, both on a manual clock advanced
//!   before every call: warm and saturated (10⁶/s, 1 µs steps, each request due as it
//!   arrives) and lightly used (100/s, 10 s steps, the bucket full after idling); each on the
//!   curve `WarmUp` was built with and on one put in force by `set_rate`.
//!
//! admit runs both buckets: `WarmUp` (the default, Guava's smooth model, paying now) and
//! `SentinelWarmUp`.
//!
//! sentinel-core (Sentinel's Rust port) is checked the way its API requires: an entry built per
//! call for a named resource and exited when admitted. It reads its own millisecond clock, and
//! without its `async` feature its entries are single-threaded (`Rc`), so it runs in the
//! one-thread groups only.
//!
//! Each limiter runs with each kind of clock, since a clock read is a large share of a decision:
//! the OS monotonic clock (`Instant`, both crates' `MonotonicClock`), a cached clock refreshed by
//! a background thread (admit's `CoarseClock`, governor's `QuantaUpkeepClock`), the TSC through
//! `quanta` (governor's default `QuantaClock`). `benches/clock.rs` measures the clocks alone.
//!
//! The two-thread benches run the same loop on two threads at once against one shared limiter;
//! the reported time is wall time divided by the calls *each* thread made.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use admit::clock::{Clock, ManualClock, MonotonicClock};
use admit::warmup::WarmUp;
use admit::warmup::sentinel::SentinelWarmUp;
use admit_benches::{coarse_clock, on_two_threads};
use criterion::measurement::WallTime;
use criterion::{Bencher, BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use governor::clock::{
    Clock as GovernorClock, FakeRelativeClock, MonotonicClock as GovernorMonotonic, QuantaClock,
    QuantaUpkeepClock,
};
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use sentinel_core::EntryBuilder;
use sentinel_core::base::TrafficType;
use sentinel_core::flow::{CalculateStrategy, ControlStrategy, Rule};

/// Rates for the two scenarios.
const ADMIT_RATE: u32 = 1_000_000_000;
const REJECT_RATE: u32 = 10;

type Governor<C> =
    RateLimiter<NotKeyed, InMemoryState, C, NoOpMiddleware<<C as GovernorClock>::Instant>>;

/// Sentinel's bucket at `rate`, refusing from the first measured call at [`REJECT_RATE`].
fn admit<C: Clock>(rate: u32, clock: C) -> SentinelWarmUp<C> {
    let limiter = SentinelWarmUp::builder(f64::from(rate))
        .warm_up_period(Duration::from_secs(1))
        .clock(clock)
        .build()
        .expect("valid configuration");
    used_up_at_reject_rate(rate, || limiter.try_acquire().is_ok());
    limiter
}

/// The default bucket (Guava's smooth model) at `rate`, likewise.
fn admit_smooth<C: Clock>(rate: u32, clock: C) -> WarmUp<C> {
    let limiter = WarmUp::builder(f64::from(rate))
        .warm_up_period(Duration::from_secs(1))
        .clock(clock)
        .build()
        .expect("valid configuration");
    used_up_at_reject_rate(rate, || limiter.try_acquire().is_ok());
    limiter
}

/// At [`REJECT_RATE`], takes permits until `try_acquire` refuses, so that rejection starts
/// with the first measured call.
fn used_up_at_reject_rate(rate: u32, mut try_acquire: impl FnMut() -> bool) {
    if rate == REJECT_RATE {
        while try_acquire() {}
    }
}

fn governor<C: GovernorClock>(rate: u32, clock: C) -> Governor<C> {
    let per_second = if rate == REJECT_RATE { 1 } else { rate };
    let quota = Quota::per_second(NonZeroU32::new(per_second).expect("non-zero rate"));
    let limiter = RateLimiter::direct_with_clock(quota, clock);
    if rate == REJECT_RATE {
        while limiter.check().is_ok() {}
    }
    limiter
}

/// sentinel-core with one warm-up rule (1 s, factor 3) on `resource`, replacing any other rule:
/// a check that builds an entry and exits it when admitted.
fn sentinel_core(rate: u32, resource: &'static str) -> impl Fn() -> bool {
    sentinel_core::init_default().expect("sentinel-core starts");
    let rule = Rule {
        resource: resource.to_string(),
        threshold: f64::from(rate),
        calculate_strategy: CalculateStrategy::WarmUp,
        control_strategy: ControlStrategy::Reject,
        warm_up_period_sec: 1,
        warm_up_cold_factor: 3,
        ..Rule::default()
    };
    sentinel_core::flow::load_rules(vec![Arc::new(rule)]);
    let check = move || match EntryBuilder::new(resource.to_string())
        .with_traffic_type(TrafficType::Inbound)
        .build()
    {
        Ok(entry) => {
            entry.exit();
            true
        }
        Err(_) => false,
    };
    if rate == REJECT_RATE {
        while check() {}
    }
    check
}

fn quanta_upkeep() -> QuantaUpkeepClock {
    QuantaUpkeepClock::from_interval(Duration::from_millis(1)).expect("upkeep thread")
}

/// Registers every limiter-and-clock pairing in `group`, called from `threads` threads.
fn pairings(group: &mut BenchmarkGroup<'_, WallTime>, rate: u32, threads: usize) {
    macro_rules! bench {
        ($name:expr, $limiter:expr, $call:ident) => {{
            let limiter = $limiter;
            let call = || limiter.$call().is_ok();
            match threads {
                1 => group.bench_function($name, |b| b.iter(|| black_box(call()))),
                _ => group.bench_function($name, |b| {
                    b.iter_custom(|iters| on_two_threads(iters, &call))
                }),
            };
        }};
    }
    bench!(
        "admit Smooth/MonotonicClock",
        admit_smooth(rate, MonotonicClock::new()),
        try_acquire
    );
    bench!(
        "admit Smooth/CoarseClock",
        admit_smooth(rate, coarse_clock()),
        try_acquire
    );
    bench!(
        "admit/MonotonicClock",
        admit(rate, MonotonicClock::new()),
        try_acquire
    );
    bench!(
        "admit/CoarseClock",
        admit(rate, coarse_clock()),
        try_acquire
    );
    bench!(
        "governor/MonotonicClock",
        governor(rate, GovernorMonotonic),
        check
    );
    bench!(
        "governor/QuantaUpkeepClock",
        governor(rate, quanta_upkeep()),
        check
    );
    bench!(
        "governor/QuantaClock (default)",
        governor(rate, QuantaClock::default()),
        check
    );
    if threads == 1 {
        let resource = if rate == REJECT_RATE {
            "reject"
        } else {
            "admit"
        };
        let check = sentinel_core(rate, resource);
        group.bench_function("sentinel-core/its clock", |b| b.iter(|| black_box(check())));
    }
}

/// The two regimes where `WarmUp` steps by prices worked out once per curve, beside governor
/// on the same kind of clock (admit's `ManualClock`, governor's `FakeRelativeClock`), advanced
/// by one step before every call; every call is admitted.
fn steady_states(c: &mut Criterion) {
    let regimes = [
        // Warm, each request due as it arrives: busy and empty.
        ("warm, saturated", 1_000_000, Duration::from_micros(1), true),
        // Each request after 10 s idle: full after idling.
        ("lightly used", 100, Duration::from_secs(10), false),
    ];
    for (label, rate, step, start_warm) in regimes {
        let mut group = c.benchmark_group(format!("warmup/steady/{label}"));
        group.throughput(Throughput::Elements(1));
        // The curve built with, and a replacement by `set_rate` (read out of its lock).
        for (name, replaced) in [
            ("admit Smooth/ManualClock", false),
            ("admit Smooth after set_rate/ManualClock", true),
        ] {
            let smooth = || {
                let clock = ManualClock::new();
                let smooth = WarmUp::builder(f64::from(rate))
                    .warm_up_period(Duration::from_secs(1))
                    .start_warm(start_warm)
                    .clock(clock.clone())
                    .build()
                    .expect("valid configuration");
                if replaced {
                    smooth.set_rate(f64::from(rate)).expect("valid rate");
                }
                move || {
                    clock.advance(step);
                    smooth.try_acquire().is_ok()
                }
            };
            group.bench_function(name, |b| on_fresh_clocks(b, label, smooth));
        }
        let governor = || {
            let fake = FakeRelativeClock::default();
            let quota = Quota::per_second(NonZeroU32::new(rate).expect("non-zero rate"));
            let governor = RateLimiter::direct_with_clock(quota, fake.clone());
            move || {
                fake.advance(step);
                governor.check().is_ok()
            }
        };
        group.bench_function("governor/FakeRelativeClock", |b| {
            on_fresh_clocks(b, label, governor)
        });
        group.finish();
    }
}

/// Times the calls `fresh` makes, with a fresh limiter and clock for each sample, once 1000
/// calls settle it in its steady state: over the billions of calls of a run, a clock stepped
/// 10 s per call would pass `WarmUp`'s 18-year schedule (after 58 million calls).
fn on_fresh_clocks<F: FnMut() -> bool>(b: &mut Bencher<'_>, label: &str, fresh: impl Fn() -> F) {
    b.iter_custom(|iters| {
        let mut call = fresh();
        assert!((0..1000).all(|_| call()), "{label}: refused");
        let start = Instant::now();
        for _ in 0..iters {
            black_box(call());
        }
        start.elapsed()
    });
}

fn benches(c: &mut Criterion) {
    for (scenario, rate) in [("mostly admit", ADMIT_RATE), ("mostly reject", REJECT_RATE)] {
        for (threads, label) in [(1, "1 thread"), (2, "2 threads")] {
            let mut group = c.benchmark_group(format!("warmup/{scenario}/{label}"));
            group.throughput(Throughput::Elements(1));
            pairings(&mut group, rate, threads);
            group.finish();
        }
    }
}

criterion_group!(warmup, benches, steady_states);
criterion_main!(warmup);
