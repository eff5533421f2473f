//! Per-request overhead of admit's tower layers over a bare service, in the same groups as
//! tower's `load_shed + concurrency_limit` pair and `little-loadshedder`, so the ratios hold on a
//! noisy machine.
//!
//! ```text
//! cargo bench -p admit-benches --bench layer
//! ```
//!
//! Every entry builds its layered service once. One iteration is one request as a server sends
//! it: `poll_ready` until ready, `call`, then poll the response future to completion. The inner
//! service answers at once (`service_fn` returning a ready future), so the time above `bare` is
//! what the layer costs a request: its readiness work (tower's `ConcurrencyLimit` acquires its
//! semaphore permit in `poll_ready`), its decision in `call`, its response future, and whatever
//! it records when the request completes (admit's shedder completes its permit, the semaphore
//! permits are released, little-loadshedder updates its statistics).
//!
//! - **layer/admit** (1 thread, every request admitted):
//!   - `bare`: the inner service alone;
//!   - `admit ShedLayer (…)`: a shedder whose CPU signal reads 0 ‰, with the OS monotonic clock
//!     or a 1 ms coarse clock; refusals would be boxed errors (the default responder). The
//!     shedder is in an `Arc` (a reference-count increment and decrement per request), or,
//!     `&'static`, leaked at start-up as a process-wide shedder can be;
//!   - `admit WarmUpLayer (…)`: a warm-up bucket at 10⁹ permits/s that starts warm, so every
//!     call takes a permit (a compare-and-swap), with either clock, the default `WarmUp`
//!     (Guava's smooth model), half its burst kept for the critical classes;
//!   - `(…, two classes)`: the layer reads each request's class with `CriticalityFrom`, one
//!     request in five critical and the others sheddable;
//!   - `admit BoundLayer (MonotonicClock)`: a bound of 2^20 places, so every request enters at
//!     once (two atomic read-modify-writes on the count in service, a clock read to start and
//!     one to end its time in service);
//!   - `tower load_shed+concurrency_limit`: `ServiceBuilder::new().load_shed()
//!     .concurrency_limit(2^20)`, the usual tower stack for shedding;
//!   - `little-loadshedder`: its `LoadShed` (EWMA 0.25, 10 ms target latency), whose every
//!     request boxes its future, takes two semaphore permits and locks its statistics twice.
//!   - `admit WarmUpLayer SentinelExact (…)`: the same bucket as a `SentinelWarmUp`.
//!   - `tower-acc Vegas+load_shed`: tower-acc's adaptive `ConcurrencyLimitLayer` with its
//!     default `Vegas` algorithm, which moves the limit with each request's latency, behind
//!     `load_shed` so that a full limit refuses rather than waits.
//! - **layer/oneshot** (1 thread, admitted): as axum and `ServiceExt::oneshot` drive a service
//!   per request: a fresh clone of the layered service, `oneshot(request)`, the future polled
//!   to completion. The clone is part of the cost (an `Arc` increment for admit's layers, a
//!   semaphore handle for tower's pair, several `Arc`s for little-loadshedder). One ShedLayer
//!   entry holds a leaked `&'static` shedder, whose clones and permits count no references.
//! - **layer/refuse** (1 thread, every request refused):
//!   - `admit ShedLayer (boxed error)`: an overloaded shedder (CPU at 1000 ‰, 1000 requests
//!     held in flight) answering with the default responder, a boxed zero-sized error (no
//!     allocation);
//!   - `admit ShedLayer .http()`: the same, answering with a 503 response, its `Retry-After`
//!     header and its `Refused` extension (building and dropping the response's header map and
//!     extensions allocates);
//!   - `admit WarmUpLayer (boxed error)`: a bucket at 10 permits/s (3 while cold) whose window
//!     was drained, so all but about 3 calls a second are refused;
//!   - `admit BoundLayer (boxed error)` and `.http()`: a bound of one place, held, and no queue,
//!     so every request takes the queue's lock and is refused (`bound-full`);
//!   - `tower load_shed+concurrency_limit`: `concurrency_limit(1)`, whose only permit a clone
//!     of the service acquired in `poll_ready` and holds forever, so `poll_ready` finds no
//!     permit (re-polling its queued acquire, which locks the semaphore's waiter list) and
//!     `load_shed` refuses with its boxed zero-sized `Overloaded`.
//! - **layer/metrics** (1 thread, admitted): one `admit ShedLayer` and one `admit WarmUpLayer`
//!   service (`MonotonicClock`, `Arc`) with metrics off, then the same two services after a real
//!   Prometheus recorder (`metrics-exporter-prometheus`) is installed and a `Reporter` over both
//!   limiters publishes every 10 ms from another thread.
//! - **layer/2 threads** (admitted, contention): the admit and tower entries run by two threads
//!   at once, each with its own clone of one service (sharing the one shedder, bucket or
//!   semaphore). The reported time is wall time divided by the requests *each* thread made.
//!
//! # No runtime
//!
//! Futures are polled with a no-op waker, no tokio runtime: none of these layers needs one.
//! admit's futures never wait; tower's `ConcurrencyLimit` uses tokio's `Semaphore` (the `sync`
//! primitives work without a runtime); little-loadshedder's boxed `async` block only awaits that
//! same semaphore and otherwise reads `Instant::now` and locks a `std` `Mutex`. With one thread
//! nothing is ever pending. Under contention a semaphore future can be pending; it is polled
//! again (a waiter assigned its permit completes on the next poll), like a runtime busy-polling
//! a task, so the comparison stays apples to apples without paying a runtime's scheduling cost in
//! any entry.

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::hint::{black_box, spin_loop};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use admit::bound::{Bound, BoundLayer};
use admit::clock::{Clock, MonotonicClock};
use admit::metrics::Reporter;
use admit::middleware::CriticalityFrom;
use admit::shed::ShedLayer;
use admit::warmup::sentinel::SentinelWarmUp;
use admit::warmup::{WarmUp, WarmUpLayer};
use admit_benches::{coarse_clock, full_bound, named_shedder, shedder, two_classes};
use bytes::Bytes;
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use http_body_util::Full;
use little_loadshedder::{LoadShed as LittleLoadShed, LoadShedResponse};
use metrics_exporter_prometheus::PrometheusBuilder;
use tower::load_shed::error::Overloaded;
use tower::util::ServiceFn;
use tower::{Layer, Service, ServiceBuilder, ServiceExt, service_fn};

/// What every request carries, and what the inner service answers.
const REQUEST: u64 = 7;

/// The inner service every entry wraps: always ready, answers with its request.
fn echo() -> ServiceFn<impl Fn(u64) -> Ready<Result<u64, Infallible>> + Clone + Send> {
    service_fn(|request| ready(Ok(request)))
}

/// An inner service answering HTTP responses, for the `.http()` refusal.
fn http_echo()
-> ServiceFn<impl Fn(u64) -> Ready<Result<http::Response<String>, Infallible>> + Clone> {
    service_fn(|_| ready(Ok(http::Response::new(String::new()))))
}

/// One request through `service`: `poll_ready` until ready, `call`, then the response future
/// polled to completion, all with a no-op waker (see the module docs).
fn serve<S: Service<u64>>(service: &mut S, request: u64) -> Result<S::Response, S::Error> {
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        match service.poll_ready(&mut cx) {
            Poll::Ready(Ok(())) => break,
            Poll::Ready(Err(error)) => return Err(error),
            Poll::Pending => spin_loop(),
        }
    }
    let mut future = pin!(service.call(request));
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(output) => return output,
            Poll::Pending => spin_loop(),
        }
    }
}

/// Runs `iters` requests on each of two threads at once, each thread through its own clone of
/// `service`, and returns the wall time: with `iter_custom`, the time per request per thread.
/// (`admit_benches::on_two_threads` shares one `Fn` between the threads; a service needs `&mut`.)
fn on_two_threads<S>(iters: u64, service: &S) -> Duration
where
    S: Service<u64> + Clone + Send,
{
    let start_line = &Barrier::new(3);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            let mut service = service.clone();
            scope.spawn(move || {
                start_line.wait();
                for _ in 0..iters {
                    black_box(serve(&mut service, black_box(REQUEST)).is_ok());
                }
            });
        }
        start_line.wait();
        Instant::now()
    })
    .elapsed()
}

/// `shedder` for the rest of the program, as a process-wide shedder can be.
fn forever<T>(shared: Arc<T>) -> &'static T {
    Box::leak(Box::new(shared))
}

/// A bucket that admits everything these benches can send: 10⁹ permits/s, starting warm, the
/// default `WarmUp` (Guava's smooth model).
fn open_bucket<C: Clock>(clock: C) -> WarmUp<C> {
    WarmUp::builder(1e9)
        .warm_up_period(Duration::from_secs(1))
        .critical_share(0.5)
        .start_warm(true)
        .clock(clock)
        .build()
        .expect("valid configuration")
}

/// [`open_bucket`] as Sentinel's bucket.
fn open_sentinel_bucket<C: Clock>(clock: C) -> SentinelWarmUp<C> {
    SentinelWarmUp::builder(1e9)
        .warm_up_period(Duration::from_secs(1))
        .start_warm(true)
        .clock(clock)
        .build()
        .expect("valid configuration")
}

/// A bound every request these benches send enters at once: 2^20 places.
fn open_bound() -> Bound {
    Bound::builder()
        .floor(1 << 20)
        .build()
        .expect("valid configuration")
}

/// A bucket at 10 permits/s (3 while cold) whose window is used up.
fn drained_bucket() -> WarmUp {
    let bucket = WarmUp::builder(10.0)
        .warm_up_period(Duration::from_secs(1))
        .build()
        .expect("valid configuration");
    while bucket.try_acquire().is_ok() {}
    bucket
}

/// tower's shedding stack with `permits` concurrent requests.
fn tower_pair<S: Service<u64>>(
    inner: S,
    permits: usize,
) -> tower::load_shed::LoadShed<tower::limit::ConcurrencyLimit<S>> {
    ServiceBuilder::new()
        .load_shed()
        .concurrency_limit(permits)
        .service(inner)
}

/// Benchmarks `service` on one thread, after checking with `expected` that it answers a
/// request as the group intends (admitted or refused).
fn one_thread<S: Service<u64>>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    mut service: S,
    expected: impl Fn(Result<S::Response, S::Error>) -> bool,
) {
    assert!(
        expected(serve(&mut service, REQUEST)),
        "{name}: unexpected answer"
    );
    group.bench_function(name, |b| b.iter(|| serve(&mut service, black_box(REQUEST))));
}

/// Benchmarks `service` on two threads, after checking that it admits a request.
fn two_threads<S>(group: &mut BenchmarkGroup<'_, WallTime>, name: &str, service: S)
where
    S: Service<u64> + Clone + Send,
{
    assert!(
        serve(&mut service.clone(), REQUEST).is_ok(),
        "{name}: refused"
    );
    group.bench_function(name, |b| {
        b.iter_custom(|iters| on_two_threads(iters, &service))
    });
}

/// Whether the echo service answered the request.
fn admitted<E>(answer: Result<u64, E>) -> bool {
    matches!(answer, Ok(REQUEST))
}

fn admit_group(group: &mut BenchmarkGroup<'_, WallTime>) {
    one_thread(group, "bare", echo(), admitted);
    one_thread(
        group,
        "admit ShedLayer (MonotonicClock)",
        ShedLayer::new(shedder(MonotonicClock::new(), false)).layer(echo()),
        admitted,
    );
    one_thread(
        group,
        "admit ShedLayer (CoarseClock)",
        ShedLayer::new(shedder(coarse_clock(), false)).layer(echo()),
        admitted,
    );
    one_thread(
        group,
        "admit ShedLayer (MonotonicClock, &'static)",
        ShedLayer::new(forever(shedder(MonotonicClock::new(), false))).layer(echo()),
        admitted,
    );
    one_thread(
        group,
        "admit ShedLayer (CoarseClock, &'static)",
        ShedLayer::new(forever(shedder(coarse_clock(), false))).layer(echo()),
        admitted,
    );
    one_thread(
        group,
        "admit ShedLayer (MonotonicClock, two classes)",
        ShedLayer::new(shedder(MonotonicClock::new(), false))
            .inspect(CriticalityFrom(|_: &u64| two_classes()))
            .layer(echo()),
        admitted,
    );
    one_thread(
        group,
        "admit WarmUpLayer (MonotonicClock)",
        WarmUpLayer::new(open_bucket(MonotonicClock::new())).layer(echo()),
        admitted,
    );
    one_thread(
        group,
        "admit WarmUpLayer (MonotonicClock, two classes)",
        WarmUpLayer::new(open_bucket(MonotonicClock::new()))
            .inspect(CriticalityFrom(|_: &u64| two_classes()))
            .layer(echo()),
        admitted,
    );
    one_thread(
        group,
        "admit WarmUpLayer (CoarseClock)",
        WarmUpLayer::new(open_bucket(coarse_clock())).layer(echo()),
        admitted,
    );
    one_thread(
        group,
        "admit WarmUpLayer SentinelExact (MonotonicClock)",
        WarmUpLayer::new(open_sentinel_bucket(MonotonicClock::new())).layer(echo()),
        admitted,
    );
    one_thread(
        group,
        "admit WarmUpLayer SentinelExact (CoarseClock)",
        WarmUpLayer::new(open_sentinel_bucket(coarse_clock())).layer(echo()),
        admitted,
    );
    one_thread(
        group,
        "admit BoundLayer (MonotonicClock)",
        BoundLayer::new(open_bound()).layer(echo()),
        admitted,
    );
    one_thread(
        group,
        "tower load_shed+concurrency_limit",
        tower_pair(echo(), 1 << 20),
        admitted,
    );
    one_thread(
        group,
        "little-loadshedder",
        LittleLoadShed::new(echo(), 0.25, Duration::from_millis(10)),
        |answer| matches!(answer, Ok(LoadShedResponse::Inner(REQUEST))),
    );
    one_thread(
        group,
        "tower-acc Vegas+load_shed",
        ServiceBuilder::new()
            .load_shed()
            .layer(tower_acc::ConcurrencyLimitLayer::new(
                tower_acc::Vegas::default(),
            ))
            .service(echo()),
        admitted,
    );
}

fn refuse_group(group: &mut BenchmarkGroup<'_, WallTime>) {
    one_thread(
        group,
        "admit ShedLayer (boxed error)",
        ShedLayer::new(shedder(MonotonicClock::new(), true)).layer(echo()),
        |answer| answer.is_err_and(|error| error.is::<admit::respond::Refused>()),
    );
    one_thread(
        group,
        "admit ShedLayer .http()",
        ShedLayer::new(shedder(MonotonicClock::new(), true))
            .http()
            .layer(http_echo()),
        |answer| answer.is_ok_and(|response| response.status() == 503),
    );
    one_thread(
        group,
        "admit WarmUpLayer (boxed error)",
        WarmUpLayer::new(drained_bucket()).layer(echo()),
        |answer| answer.is_err_and(|error| error.is::<admit::respond::Refused>()),
    );
    let (bound, held) = full_bound();
    one_thread(
        group,
        "admit BoundLayer (boxed error)",
        BoundLayer::new(bound.clone()).layer(echo()),
        |answer| answer.is_err_and(|error| error.is::<admit::respond::Refused>()),
    );
    one_thread(
        group,
        "admit BoundLayer .http()",
        BoundLayer::new(bound).http().layer(http_echo()),
        |answer| answer.is_ok_and(|response| response.status() == 503),
    );
    drop(held);
    let refusing = tower_pair(echo(), 1);
    // A clone ready to call holds the only permit, for as long as it lives.
    let mut holder = refusing.clone();
    let mut cx = Context::from_waker(Waker::noop());
    assert!(holder.poll_ready(&mut cx).is_ready());
    one_thread(
        group,
        "tower load_shed+concurrency_limit",
        refusing,
        |answer| answer.is_err_and(|error| error.is::<Overloaded>()),
    );
    // Still holding it through the measurement above.
    drop(holder);
}

fn two_thread_group(group: &mut BenchmarkGroup<'_, WallTime>) {
    two_threads(
        group,
        "admit ShedLayer (MonotonicClock)",
        ShedLayer::new(shedder(MonotonicClock::new(), false)).layer(echo()),
    );
    two_threads(
        group,
        "admit ShedLayer (MonotonicClock, &'static)",
        ShedLayer::new(forever(shedder(MonotonicClock::new(), false))).layer(echo()),
    );
    two_threads(
        group,
        "admit WarmUpLayer (MonotonicClock)",
        WarmUpLayer::new(open_bucket(MonotonicClock::new())).layer(echo()),
    );
    two_threads(
        group,
        "admit BoundLayer (MonotonicClock)",
        BoundLayer::new(open_bound()).layer(echo()),
    );
    two_threads(
        group,
        "tower load_shed+concurrency_limit",
        tower_pair(echo(), 1 << 20),
    );
}

/// Benchmarks `service` as axum and `tower::ServiceExt` drive it per request: a fresh clone,
/// `oneshot(request)`, the future polled to completion.
fn through_oneshot<S>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    service: S,
    expected: impl Fn(Result<S::Response, S::Error>) -> bool,
) where
    S: Service<u64> + Clone,
{
    let request = |service: &S| {
        let mut cx = Context::from_waker(Waker::noop());
        let mut future = pin!(service.clone().oneshot(black_box(REQUEST)));
        loop {
            match future.as_mut().poll(&mut cx) {
                Poll::Ready(output) => return output,
                Poll::Pending => spin_loop(),
            }
        }
    };
    assert!(expected(request(&service)), "{name}: unexpected answer");
    group.bench_function(name, |b| b.iter(|| request(&service)));
}

fn oneshot_group(group: &mut BenchmarkGroup<'_, WallTime>) {
    through_oneshot(group, "bare", echo(), admitted);
    through_oneshot(
        group,
        "admit ShedLayer (default: MonotonicClock)",
        ShedLayer::new(shedder(MonotonicClock::new(), false)).layer(echo()),
        admitted,
    );
    through_oneshot(
        group,
        "admit ShedLayer (CoarseClock::shared)",
        ShedLayer::new(shedder(admit::clock::CoarseClock::shared(), false)).layer(echo()),
        admitted,
    );
    // A `&'static` shedder: no reference count to raise per clone of the service or per permit.
    let leaked: &'static _ = Box::leak(Box::new(
        Arc::into_inner(shedder(admit::clock::CoarseClock::shared(), false))
            .expect("the only handle"),
    ));
    through_oneshot(
        group,
        "admit ShedLayer (&'static, CoarseClock::shared)",
        ShedLayer::new(leaked).layer(echo()),
        admitted,
    );
    through_oneshot(
        group,
        "admit WarmUpLayer (MonotonicClock)",
        WarmUpLayer::new(open_bucket(MonotonicClock::new())).layer(echo()),
        admitted,
    );
    through_oneshot(
        group,
        "tower load_shed+concurrency_limit",
        tower_pair(echo(), 1 << 20),
        admitted,
    );
    through_oneshot(
        group,
        "little-loadshedder",
        LittleLoadShed::new(echo(), 0.25, Duration::from_millis(10)),
        |answer| matches!(answer, Ok(LoadShedResponse::Inner(REQUEST))),
    );
}

/// The same two layered services with metrics off, then with a recorder installed and a
/// reporter publishing both limiters every 10 ms from another thread. The recorder stays
/// installed for the rest of the process, so this group runs last.
fn metrics_group(group: &mut BenchmarkGroup<'_, WallTime>) {
    let shedder = named_shedder(MonotonicClock::new(), false, Some("bench"));
    let mut shed = ShedLayer::new(Arc::clone(&shedder)).layer(echo());
    let bucket = Arc::new(
        WarmUp::builder(1e9)
            .warm_up_period(Duration::from_secs(1))
            .start_warm(true)
            .name("bench")
            .build()
            .expect("valid configuration"),
    );
    let mut warm_up = WarmUpLayer::new(Arc::clone(&bucket)).layer(echo());
    let mut both = |group: &mut BenchmarkGroup<'_, WallTime>, state: &str| {
        assert!(admitted(serve(&mut shed, REQUEST)));
        group.bench_function(format!("admit ShedLayer (metrics {state})"), |b| {
            b.iter(|| serve(&mut shed, black_box(REQUEST)))
        });
        assert!(admitted(serve(&mut warm_up, REQUEST)));
        group.bench_function(format!("admit WarmUpLayer (metrics {state})"), |b| {
            b.iter(|| serve(&mut warm_up, black_box(REQUEST)))
        });
    };
    both(group, "off");

    PrometheusBuilder::new()
        .install_recorder()
        .expect("the first recorder of this process");
    let reporter = Reporter::builder()
        .shedder(shedder)
        .warm_up(bucket)
        .build()
        .expect("named limiters");
    let stop = Arc::new(AtomicBool::new(false));
    let publisher = std::thread::spawn({
        let stop = Arc::clone(&stop);
        move || {
            while !stop.load(Ordering::Relaxed) {
                reporter.report();
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    });
    both(group, "on");
    stop.store(true, Ordering::Relaxed);
    publisher.join().expect("the publisher thread");
}

/// Adds a group's entries.
type Register = fn(&mut BenchmarkGroup<'_, WallTime>);

/// One HTTP request through `service`, as [`serve`] does for `u64`s; the response (and with
/// it a drain's in-flight count) dropped at once.
fn serve_http<S: Service<http::Request<()>>>(service: &mut S) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    while !matches!(service.poll_ready(&mut cx), Poll::Ready(Ok(()))) {
        spin_loop();
    }
    let mut future = pin!(service.call(http::Request::new(())));
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(output) => return output.is_ok(),
            Poll::Pending => spin_loop(),
        }
    }
}

/// `DrainLayer` while serving (counting each request until its response is dropped), beside
/// tower's in-flight counter (`ConcurrencyLimit` with room to spare, under `LoadShed`).
fn drain_group(group: &mut BenchmarkGroup<'_, WallTime>) {
    let http = || {
        service_fn(|_: http::Request<()>| {
            ready(Ok::<_, Infallible>(http::Response::new(Full::new(
                Bytes::from_static(b"ok"),
            ))))
        })
    };
    let mut bare = http();
    group.bench_function("bare", |b| b.iter(|| serve_http(&mut bare)));
    let drain = admit::drain::Drain::default();
    let mut drained = admit::drain::DrainLayer::new(drain).layer(http());
    assert!(serve_http(&mut drained));
    group.bench_function("admit DrainLayer", |b| b.iter(|| serve_http(&mut drained)));
    let mut tower = ServiceBuilder::new()
        .load_shed()
        .concurrency_limit(1 << 20)
        .service(http());
    assert!(serve_http(&mut tower));
    group.bench_function("tower load_shed + concurrency_limit", |b| {
        b.iter(|| serve_http(&mut tower))
    });
}

fn benches(c: &mut Criterion) {
    let groups: [(&str, Register); 6] = [
        ("layer/admit", admit_group),
        ("layer/oneshot", oneshot_group),
        ("layer/refuse", refuse_group),
        ("layer/2 threads", two_thread_group),
        ("layer/metrics", metrics_group),
        ("layer/drain", drain_group),
    ];
    for (name, register) in groups {
        let mut group = c.benchmark_group(name);
        group.throughput(Throughput::Elements(1));
        register(&mut group);
        group.finish();
    }
}

criterion_group!(layer, benches);
criterion_main!(layer);
