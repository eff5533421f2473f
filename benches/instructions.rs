//! Instructions per decision, counted by callgrind: repeatable where wall-clock timings are noisy.
//!
//! ```text
//! benches/callgrind.sh
//! ```
//!
//! `instructions <limiter> <admit|reject> <calls>` makes `calls` decisions with one limiter:
//!
//! | limiter | one call |
//! |---|---|
//! | `sentinel` | `SentinelWarmUp::try_acquire` |
//! | `smooth` | `WarmUp::try_acquire` (the default, Guava's smooth bucket), warm, one 1 µs clock advance per call: admitting at 10⁶/s, each request due as it arrives |
//! | `smooth-cold` | the same, cold on a clock that never moves: admitting at 10⁹/s within the burst, each request spending a stored permit |
//! | `governor` | governor's `check` |
//! | `shed` | the shedder's `allow`, and `pass` when admitted |
//! | `shed-layer`, `warmup-layer`, `tower-pair` | one request through `ShedLayer`, `WarmUpLayer` (boxed-error refusals) or tower's `load_shed` + `concurrency_limit`, over a `u64` echo that answers at once |
//! | `drain-layer` | one HTTP request through `DrainLayer` (`503` refusals) over a service answering an empty response at once |
//!
//! The script runs it under `valgrind --tool=callgrind` with two call counts and divides the
//! difference in instructions by the difference in calls, which cancels start-up and set-up.
//!
//! Both limiters read a manual clock (admit's `ManualClock`, governor's `FakeRelativeClock`), so
//! the count is the decision alone: under valgrind a real clock read is an emulated system call
//! and a clock-refreshing thread adds its own instructions, neither of which says anything about
//! a native run.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

use std::convert::Infallible;
use std::future::{Future, ready};
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use admit::clock::ManualClock;
use admit::drain::{Drain, DrainLayer};
use admit::shed::{OwnedPermit, ShedLayer, Shedder};
use admit::signal::cpu::ManualCpu;
use admit::warmup::sentinel::SentinelWarmUp;
use admit::warmup::{WarmUp, WarmUpLayer};
use governor::clock::FakeRelativeClock;
use governor::{Quota, RateLimiter};
use tower::{Layer, Service, ServiceBuilder, service_fn};

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

/// The smooth bucket schedules each permit to the nanosecond: the warm runs advance the manual
/// clock by [`TICK`] before each call (one atomic add, counted with the decision), each request
/// due as it arrives when admitting (10⁶/s).
const TICK: Duration = Duration::from_micros(1);

/// `WarmUp::try_acquire`: warm, the clock advanced by [`TICK`] before each call; or cold on a
/// clock that never moves, so that every admission spends a stored permit within the burst.
fn run_smooth(rate: f64, warm: bool, calls: u64) -> u64 {
    let clock = ManualClock::new();
    let limiter = WarmUp::builder(rate)
        .clock(clock.clone())
        .start_warm(warm)
        .build()
        .expect("valid configuration");
    (0..calls)
        .map(|_| {
            if warm {
                clock.advance(TICK);
            }
            u64::from(black_box(limiter.try_acquire().is_ok()))
        })
        .sum()
}

/// A shedder on a manual clock and CPU, and, when `overloaded`, what makes it refuse (as the
/// layer benchmark's refusing shedder: a small limit, 1000 requests in flight, a hot CPU). Keep
/// the permits until the run ends.
fn shedder(overloaded: bool) -> (Arc<Shedder<ManualClock>>, Vec<OwnedPermit<ManualClock>>) {
    let cpu = ManualCpu::new(0);
    let shedder = Arc::new(
        Shedder::builder()
            .clock(ManualClock::new())
            .cpu(cpu.clone())
            .build()
            .expect("valid configuration"),
    );
    let mut held = Vec::new();
    if overloaded {
        held.extend((0..1100).map(|_| shedder.allow_owned().expect("a cool CPU admits")));
        for permit in held.drain(..100) {
            permit.pass();
        }
        cpu.set(1000);
    }
    (shedder, held)
}

fn run_shed(overloaded: bool, calls: u64) -> u64 {
    let (shedder, _held) = shedder(overloaded);
    (0..calls)
        .map(|_| match black_box(shedder.allow()) {
            Ok(permit) => {
                permit.pass();
                1
            }
            Err(_) => 0,
        })
        .sum()
}

fn run_governor(rate: u32, calls: u64) -> u64 {
    let quota = Quota::per_second(NonZeroU32::new(rate).expect("non-zero rate"));
    let limiter = RateLimiter::direct_with_clock(quota, FakeRelativeClock::default());
    (0..calls)
        .map(|_| u64::from(black_box(limiter.check().is_ok())))
        .sum()
}

/// The inner service of the shed and warm-up layers and tower's pair, as in the `layer`
/// benchmark: answers a `u64` with itself, at once. Refusals are the layers' default boxed
/// errors.
fn echo() -> impl Service<u64, Response = u64, Error = Infallible> + Clone {
    service_fn(|request: u64| ready(Ok::<_, Infallible>(request)))
}

/// The drain layer's inner service: an empty HTTP response, at once.
fn http_inner()
-> impl Service<http::Request<()>, Response = http::Response<()>, Error = Infallible> + Clone {
    service_fn(|_: http::Request<()>| ready(Ok::<_, Infallible>(http::Response::new(()))))
}

/// `calls` requests made by `request` through `service`, each driven to its answer with a
/// no-op waker; how many `admitted` counts as admitted.
fn run_service<S: Service<R>, R>(
    service: &mut S,
    calls: u64,
    request: impl Fn() -> R,
    admitted: impl Fn(S::Response) -> bool,
) -> u64 {
    let mut cx = Context::from_waker(Waker::noop());
    (0..calls)
        .map(|_| {
            if !matches!(service.poll_ready(&mut cx), Poll::Ready(Ok(()))) {
                return 0;
            }
            let mut future = pin!(service.call(request()));
            match future.as_mut().poll(&mut cx) {
                Poll::Ready(Ok(response)) => u64::from(admitted(black_box(response))),
                _ => 0,
            }
        })
        .sum()
}

fn run_echo<S: Service<u64, Response = u64>>(service: &mut S, calls: u64) -> u64 {
    run_service(service, calls, || black_box(7), |response| response == 7)
}

fn run_shed_layer(overloaded: bool, calls: u64) -> u64 {
    let (shedder, _held) = shedder(overloaded);
    run_echo(&mut ShedLayer::new(shedder).layer(echo()), calls)
}

fn run_warm_up_layer(rate: f64, calls: u64) -> u64 {
    let clock = ManualClock::new();
    let bucket = Arc::new(
        WarmUp::builder(rate)
            .clock(clock.clone())
            .start_warm(true)
            .build()
            .expect("valid configuration"),
    );
    let mut service = WarmUpLayer::new(bucket).layer(echo());
    (0..calls)
        .map(|_| {
            clock.advance(TICK);
            run_echo(&mut service, 1)
        })
        .sum()
}

fn run_drain_layer(draining: bool, calls: u64) -> u64 {
    let drain = Drain::default();
    if draining {
        drain.start_now();
    }
    let mut service = DrainLayer::new(drain).layer(http_inner());
    run_service(
        &mut service,
        calls,
        || http::Request::new(()),
        |response| response.status() == 200,
    )
}

fn run_tower_pair(refusing: bool, calls: u64) -> u64 {
    let permits = if refusing { 0 } else { 1 << 20 };
    let mut service = ServiceBuilder::new()
        .load_shed()
        .concurrency_limit(permits)
        .service(echo());
    run_echo(&mut service, calls)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [limiter, scenario, calls] = args.as_slice() else {
        eprintln!(
            "usage: instructions <sentinel|smooth|smooth-cold|governor|shed|shed-layer|warmup-layer|drain-layer|tower-pair> <admit|reject> <calls>"
        );
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
    let reject = scenario == "reject";
    // Warm, one request per 1 µs tick: each due as it arrives (10⁶/s), or refused (10/s).
    let smooth_rate = if reject { 10.0 } else { 1e6 };
    let admitted = match limiter.as_str() {
        "sentinel" => run_admit(admit_rate, calls),
        "smooth" => run_smooth(smooth_rate, true, calls),
        "smooth-cold" => run_smooth(admit_rate, false, calls),
        "governor" => run_governor(governor_rate, calls),
        "shed" => run_shed(reject, calls),
        "shed-layer" => run_shed_layer(reject, calls),
        "warmup-layer" => run_warm_up_layer(smooth_rate, calls),
        "drain-layer" => run_drain_layer(reject, calls),
        "tower-pair" => run_tower_pair(reject, calls),
        other => panic!("unknown limiter {other}"),
    };
    println!("{limiter} {scenario}: {admitted} of {calls} admitted");
}
