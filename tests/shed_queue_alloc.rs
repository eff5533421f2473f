//! The shedder with a queue gate and a runtime lag probe allocates nothing per decision:
//! admissions that record their waits, measured or from a proxy's stamp (through the skew
//! floor, directly and through the layer's `RequestStart`), refusals for a late request
//! (`QueueDelay`) and for a lagging runtime (`RuntimeLag`).
//!
//! Allocations are counted per thread; one test in this file.

use admit::signal::Arrival;
use admit_testkit::counting_alloc::{self, allocations_during};

#[global_allocator]
static ALLOCATOR: counting_alloc::CountingAllocator = counting_alloc::CountingAllocator;

use std::convert::Infallible;
use std::future::ready;
use std::sync::Arc;
use std::time::Duration;

use admit::clock::ManualClock;
use admit::middleware::RequestStart;
use admit::shed::{ShedLayer, Shedder};
use admit::signal::Cause;
use admit::signal::cpu::ManualCpu;
use admit::signal::queue::header::HeaderConfig;
use admit::signal::queue::{LagProbe, QueueGate};
use admit_testkit::poll::call_now;
use tower::Layer;

const MS: u64 = 1_000_000;

#[test]
fn queue_signals_allocate_nothing_per_decision() {
    let clock = ManualClock::new();
    let probe = LagProbe::default();
    let wall = ManualClock::new();
    let shedder = Arc::new(
        Shedder::builder()
            .clock(clock.clone())
            .cpu(ManualCpu::new(0))
            .queue_gate(QueueGate::default())
            .runtime_probe(probe.clone())
            .build()
            .unwrap(),
    );
    // Refusals as the boxed, zero-sized error: an HTTP refusal's headers are a response's own.
    let mut layered = ShedLayer::new(Arc::clone(&shedder))
        .inspect(
            RequestStart::new(HeaderConfig::default())
                .unwrap()
                .wall_clock(wall.clone()),
        )
        .layer(tower::service_fn(|_: http::Request<()>| {
            ready(Ok::<_, Infallible>(http::Response::new(())))
        }));
    // The requests the layer reads, made before counting: each stamped 7 ms before the wall
    // clock's reading at its millisecond (the offset the first one finds, as the service is
    // idle), and the ones from 1 s to 2 s 30 ms earlier still.
    let epoch_ms = 1_700_000_000_000u64;
    let requests: Vec<http::Request<()>> = (1..=3_000u64)
        .map(|ms| {
            let waited = if (1_000..2_000).contains(&ms) { 30 } else { 0 };
            http::Request::get("/")
                .header("x-request-start", (epoch_ms + ms - 7 - waited).to_string())
                .body(())
                .unwrap()
        })
        .collect();
    // The thread's stripe and its random draws, claimed once; a request held in flight, so
    // that the stamped requests below find the service busy.
    shedder
        .allow_with(Arrival::new().with_wait(Duration::ZERO))
        .unwrap()
        .pass();
    let busy = shedder.allow().unwrap();

    let (mut admitted, mut late, mut lagging) = (0u32, 0u32, 0u32);
    let allocations = allocations_during(|| {
        for (ms, request) in (1..=3_000u64).zip(requests) {
            clock.set(Duration::from_millis(ms));
            wall.set(Duration::from_millis(epoch_ms + ms));
            // Waits of 30 ms from 1 s to 2 s: the gate turns hot, and the late requests go.
            // Each millisecond a measured wait, a stamp's age, and a stamped request through
            // the layer.
            let waited = if (1_000..2_000).contains(&ms) { 30 } else { 1 };
            let stamped = (7 + waited) as i64 * MS as i64;
            for decided in [
                shedder
                    .allow_with(Arrival::new().with_wait(Duration::from_millis(waited)))
                    .map(drop),
                shedder
                    .allow_with(Arrival::new().with_stamp_age(Ok(stamped)))
                    .map(drop),
            ] {
                match decided {
                    Ok(()) => admitted += 1,
                    Err(refused) => {
                        assert_eq!(refused.reason(), Cause::QueueDelay);
                        late += 1;
                    }
                }
            }
            match call_now(&mut layered, request) {
                Ok(_) => admitted += 1,
                Err(refused) => {
                    assert!(refused.is::<admit::respond::Refused>());
                    late += 1;
                }
            }
        }
        // The probe ticks late until it refuses everything.
        let mut now = 3_000 * MS;
        for _ in 0..25 {
            now += 32 * MS;
            probe.tick(now - 22 * MS, now);
        }
        clock.set(Duration::from_nanos(now));
        for _ in 0..1_000 {
            let refused = shedder.allow().unwrap_err();
            assert_eq!(refused.reason(), Cause::RuntimeLag);
            lagging += 1;
        }
    });
    assert_eq!(
        allocations, 0,
        "{allocations} allocations for {admitted} admitted, {late} late and {lagging} lagging"
    );
    assert!(admitted > 3_000 && late > 1_500 && lagging == 1_000);
    // The floor is the offset the first stamped request found, not the 30 ms waits.
    assert_eq!(shedder.snapshot().clock_offset_nanos, Some(7 * MS as i64));
    busy.pass();
}
