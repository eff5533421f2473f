//! Instructions per decision, counted by callgrind: repeatable where wall-clock timings are noisy.
//!
//! ```text
//! benches/callgrind.sh
//! ```
//!
//! `instructions <admit|governor|shed> <admit|reject> <calls>` makes `calls` decisions with one
//! limiter (`shed`: the shedder's `allow`, and `pass` when admitted); the script runs it under `valgrind --tool=callgrind` with two call counts and divides
//! the difference in instructions by the difference in calls, which cancels start-up and set-up.
//!
//! Both limiters read a manual clock (admit's `ManualClock`, governor's `FakeRelativeClock`), so
//! the count is the decision alone: under valgrind a real clock read is an emulated system call
//! and a clock-refreshing thread adds its own instructions, neither of which says anything about
//! a native run.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

use admit::clock::ManualClock;
use admit::shed::Shedder;
use admit::signal::cpu::ManualCpu;
use admit::warmup::sentinel::SentinelWarmUp;
use governor::clock::FakeRelativeClock;
use governor::{Quota, RateLimiter};

fn run_admit(rate: f64, calls: u64) -> u64 {
    let limiter = SentinelWarmUp::builder(rate)
        .warm_up_period(Duration::from_secs(1))
        .clock(ManualClock::new())
        .build()
        .expect("valid configuration");
    (0..calls)
        .map(|_| u64::from(black_box(limiter.try_acquire().is_ok())))
        .sum()
}

fn run_shed(overloaded: bool, calls: u64) -> u64 {
    let cpu = ManualCpu::new(0);
    let shedder = Shedder::builder()
        .clock(ManualClock::new())
        .cpu(cpu.clone())
        .build()
        .expect("valid configuration");
    let mut held = Vec::new();
    if overloaded {
        // As the layer benchmark's refusing shedder: a small limit, 1000 requests in flight.
        held.extend((0..1100).map(|_| shedder.allow().expect("a cool CPU admits")));
        for permit in held.drain(..100) {
            permit.pass();
        }
        cpu.set(1000);
    }
    let admitted = (0..calls)
        .map(|_| match black_box(shedder.allow()) {
            Ok(permit) => {
                permit.pass();
                1
            }
            Err(_) => 0,
        })
        .sum();
    drop(held);
    admitted
}

fn run_governor(rate: u32, calls: u64) -> u64 {
    let quota = Quota::per_second(NonZeroU32::new(rate).expect("non-zero rate"));
    let limiter = RateLimiter::direct_with_clock(quota, FakeRelativeClock::default());
    (0..calls)
        .map(|_| u64::from(black_box(limiter.check().is_ok())))
        .sum()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [limiter, scenario, calls] = args.as_slice() else {
        eprintln!("usage: instructions <admit|governor|shed> <admit|reject> <calls>");
        std::process::exit(2);
    };
    let calls: u64 = calls.parse().expect("calls must be a number");
    // The clock never moves: 10⁹/s leaves room for every call; 10/s (governor: 1/s) for the
    // first few only.
    let (admit_rate, governor_rate) = match scenario.as_str() {
        "admit" => (1e9, 1_000_000_000),
        "reject" => (10.0, 1),
        other => panic!("unknown scenario {other}"),
    };
    let admitted = match limiter.as_str() {
        "admit" => run_admit(admit_rate, calls),
        "governor" => run_governor(governor_rate, calls),
        "shed" => run_shed(scenario == "reject", calls),
        other => panic!("unknown limiter {other}"),
    };
    println!("{limiter} {scenario}: {admitted} of {calls} admitted");
}
