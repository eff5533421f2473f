//! Instructions per decision, counted by callgrind: repeatable where wall-clock timings are noisy.
//!
//! ```text
//! benches/callgrind.sh
//! ```
//!
//! `instructions <limiter> <scenario> <calls>` makes `calls` decisions in one row:
//!
//! | limiter | scenario | one call |
//! |---|---|---|
//! | `sentinel` | `admit`, `reject` | `SentinelWarmUp::try_acquire` on a clock that never moves: 10⁹/s, or 10/s (refused after the first few) |
//! | `smooth` | `saturated` | `WarmUp::try_acquire` (the default, Guava's smooth bucket), warm, one 1 µs clock advance per call: admitting at 10⁶/s, each request due as it arrives |
//! | `smooth` | `light` | the same, cold (full), one 100 ms advance per call at 100/s: lightly used, a tenth of the rate, the stored permits refilled between calls |
//! | `smooth` | `saturated-set-rate`, `light-set-rate` | the same two, built at half the rate and put at the rate by one `set_rate` before the first call |
//! | `smooth` | `reject` | as `saturated` at 10/s: refused |
//! | `smooth` | `cold-ramp`, `cold-reject` | cold on a clock that never moves: admitting at 10⁹/s within the burst, each request spending a stored permit; or refused at 10/s |
//! | `governor` | `admit`, `reject` | governor's `check` on a clock that never moves: 10⁹/s, or 1/s |
//! | `governor` | `saturated`, `light`, `stepped-reject` | the same with the clock advanced as in `smooth`'s rows: 10⁶/s and 1 µs, 100/s and 100 ms, 10/s and 1 µs |
//! | `shed` | `admit`, `reject` | the shedder's `allow`, and `pass` when admitted |
//! | `shed-layer`, `warmup-layer`, `tower-pair` | `admit`, `reject` | one request through `ShedLayer`, `WarmUpLayer` (boxed-error refusals; saturated at 10⁶/s, or 10/s) or tower's `load_shed` + `concurrency_limit`, over a `u64` echo that answers at once |
//! | `shed-http` | `admit` | one HTTP request through `ShedLayer::http()`, whose permit ends with the response body: a service answering a static two-byte body at once, the body read to its end |
//! | `drain-layer` | `admit`, `reject` | one HTTP request through `DrainLayer` (`503` refusals) over a service answering an empty response at once |
//! | `bound-layer` | `admit`, `reject` | one request through `BoundLayer` (boxed-error refusals): a bound of one place, each request entering and ending before the next, or the place held and no queue, each refused |
//!
//! The script runs it under `valgrind --tool=callgrind` with two call counts and divides the
//! difference in instructions by the difference in calls, which cancels start-up and set-up.
//! With `--check` (run by `.ci/run`) it fails when a row rises more than its margin above the
//! ceiling committed in `benches/callgrind-ceilings.txt` (see `benches/README.md`).
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

use admit::Shared;
use admit::bound::{Bound, BoundLayer};
use admit::clock::ManualClock;
use admit::drain::{Drain, DrainLayer};
use admit::middleware::{Admission, Limiter};
use admit::shed::{OwnedPermit, ShedLayer, Shedder};
use admit::signal::Arrival;
use admit::signal::cpu::ManualCpu;
use admit::warmup::sentinel::SentinelWarmUp;
use admit::warmup::{WarmUp, WarmUpLayer};
use admit_testkit::poll::read_body_now;
use bytes::Bytes;
use governor::clock::FakeRelativeClock;
use governor::{Quota, RateLimiter};
use http_body_util::Full;
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

/// The smooth bucket schedules each permit to the nanosecond: the saturated runs advance the
/// manual clock by [`TICK`] before each call (one atomic add, counted with the decision), each
/// request due as it arrives when admitting (10⁶/s).
const TICK: Duration = Duration::from_micros(1);

/// The lightly used runs' step: one call per 100 ms at 100/s, a tenth of the rate.
const LIGHT_STEP: Duration = Duration::from_millis(100);

/// One `WarmUp` run: how it is built and how the clock moves between calls.
#[derive(Clone, Copy)]
struct Smooth {
    /// The rate the bucket runs at while measured.
    rate: f64,
    /// How far the manual clock advances before each call; none when zero (a clock that never
    /// moves, and no advance counted).
    step: Duration,
    /// Built warm (an empty bucket) rather than cold (a full one).
    start_warm: bool,
    /// Built at half the rate and put at `rate` by one `set_rate` before the first call, so
    /// that the curve in force is a replacement (read out of its lock).
    set_rate: bool,
}

impl Smooth {
    /// The same run at `rate`.
    const fn at(self, rate: f64) -> Self {
        Self { rate, ..self }
    }

    /// The same run on a curve put in force by `set_rate`.
    const fn after_set_rate(self) -> Self {
        Self {
            set_rate: true,
            ..self
        }
    }
}

/// `WarmUp::try_acquire` as `run` says, with the builder's defaults otherwise.
fn run_smooth(run: Smooth, calls: u64) -> u64 {
    let clock = ManualClock::new();
    let built_at = run.rate / if run.set_rate { 2.0 } else { 1.0 };
    let limiter = WarmUp::builder(built_at)
        .clock(clock.clone())
        .start_warm(run.start_warm)
        .build()
        .expect("valid configuration");
    if run.set_rate {
        limiter.set_rate(run.rate).expect("valid rate");
    }
    let moving = !run.step.is_zero();
    (0..calls)
        .map(|_| {
            if moving {
                clock.advance(run.step);
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

/// governor's `check` at `rate` per second on its `FakeRelativeClock`, advanced by `step`
/// before each call (none when zero), as [`run_smooth`] moves admit's.
fn run_governor(rate: u32, step: Duration, calls: u64) -> u64 {
    let quota = Quota::per_second(NonZeroU32::new(rate).expect("non-zero rate"));
    let clock = FakeRelativeClock::default();
    let limiter = RateLimiter::direct_with_clock(quota, clock.clone());
    let moving = !step.is_zero();
    (0..calls)
        .map(|_| {
            if moving {
                clock.advance(step);
            }
            u64::from(black_box(limiter.check().is_ok()))
        })
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
-> impl Service<http::Request<()>, Response = http::Response<Full<Bytes>>, Error = Infallible> + Clone
{
    service_fn(|_: http::Request<()>| {
        ready(Ok::<_, Infallible>(http::Response::new(Full::new(
            Bytes::from_static(b"ok"),
        ))))
    })
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

/// One request after another through `BoundLayer`: with room, each enters at once and ends;
/// full (one place, held, and no queue), each is refused.
fn run_bound_layer(full: bool, calls: u64) -> u64 {
    let bound = Arc::new(
        Bound::builder()
            .floor(1)
            .ceiling(1)
            .queue_capacity(0)
            .clock(ManualClock::new())
            .build()
            .expect("valid configuration"),
    );
    let held = full.then(
        || match Bound::admit(&Shared::Arc(bound.clone()), Arrival::new()) {
            Admission::Enter(permit) => permit,
            _ => panic!("the first request enters"),
        },
    );
    let admitted = run_echo(&mut BoundLayer::new(bound).layer(echo()), calls);
    drop(held);
    admitted
}

fn run_shed_http(calls: u64) -> u64 {
    let (shedder, _held) = shedder(false);
    let inner = service_fn(|_: http::Request<()>| {
        ready(Ok::<_, Infallible>(http::Response::new(Full::new(
            Bytes::from_static(b"ok"),
        ))))
    });
    let mut service = ShedLayer::new(shedder).http().layer(inner);
    run_service(
        &mut service,
        calls,
        || http::Request::new(()),
        |response| {
            let admitted = response.status() == 200;
            read_body_now(response.into_body());
            admitted
        },
    )
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

/// Warm and saturated: 10⁶/s, a request each [`TICK`], each due as it arrives.
const SATURATED: Smooth = Smooth {
    rate: 1e6,
    step: TICK,
    start_warm: true,
    set_rate: false,
};

/// Lightly used: 100/s, a request each [`LIGHT_STEP`]; built cold (full), refilled between calls.
const LIGHT: Smooth = Smooth {
    rate: 100.0,
    step: LIGHT_STEP,
    start_warm: false,
    set_rate: false,
};

/// Cold on a clock that never moves: at 10⁹/s each admission spends a stored permit within
/// the burst; at 10/s every call after the first few is refused.
const COLD: Smooth = Smooth {
    rate: 1e9,
    step: Duration::ZERO,
    start_warm: false,
    set_rate: false,
};

/// Makes `calls` decisions in the row `limiter scenario` (see the table above); how many were
/// admitted, or `None` for an unknown row.
fn run(limiter: &str, scenario: &str, calls: u64) -> Option<u64> {
    let reject = scenario == "reject";
    Some(match (limiter, scenario) {
        // The clock never moves: 10⁹/s leaves room for every call; 10/s (governor: 1/s) for
        // the first few only.
        ("sentinel", "admit") => run_admit(1e9, calls),
        ("sentinel", "reject") => run_admit(10.0, calls),
        ("governor", "admit") => run_governor(1_000_000_000, Duration::ZERO, calls),
        ("governor", "reject") => run_governor(1, Duration::ZERO, calls),
        ("smooth", "cold-ramp") => run_smooth(COLD, calls),
        ("smooth", "cold-reject") => run_smooth(COLD.at(10.0), calls),
        // The clock moves before each call.
        ("smooth", "saturated") => run_smooth(SATURATED, calls),
        ("smooth", "saturated-set-rate") => run_smooth(SATURATED.after_set_rate(), calls),
        ("smooth", "light") => run_smooth(LIGHT, calls),
        ("smooth", "light-set-rate") => run_smooth(LIGHT.after_set_rate(), calls),
        ("smooth", "reject") => run_smooth(SATURATED.at(10.0), calls),
        ("governor", "saturated") => run_governor(1_000_000, TICK, calls),
        ("governor", "light") => run_governor(100, LIGHT_STEP, calls),
        ("governor", "stepped-reject") => run_governor(10, TICK, calls),
        // The shedder and the layers: admitting, or refusing every call.
        ("shed", "admit" | "reject") => run_shed(reject, calls),
        ("shed-layer", "admit" | "reject") => run_shed_layer(reject, calls),
        ("shed-http", "admit") => run_shed_http(calls),
        // As the saturated bucket: 10⁶/s (admitting) or 10/s (refusing), 1 µs steps.
        ("warmup-layer", "admit" | "reject") => {
            run_warm_up_layer(if reject { 10.0 } else { 1e6 }, calls)
        }
        ("drain-layer", "admit" | "reject") => run_drain_layer(reject, calls),
        ("tower-pair", "admit" | "reject") => run_tower_pair(reject, calls),
        ("bound-layer", "admit" | "reject") => run_bound_layer(reject, calls),
        _ => return None,
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [limiter, scenario, calls] = args.as_slice() else {
        eprintln!(
            "usage: instructions <limiter> <scenario> <calls> (the rows: benches/callgrind.sh)"
        );
        std::process::exit(2);
    };
    let calls: u64 = calls.parse().expect("calls must be a number");
    let Some(admitted) = run(limiter, scenario, calls) else {
        eprintln!(
            "instructions: unknown row `{limiter} {scenario}` (the rows: benches/callgrind.sh)"
        );
        std::process::exit(2);
    };
    println!("{limiter} {scenario}: {admitted} of {calls} admitted");
}
