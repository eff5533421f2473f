//! The shedder with a queue gate and a runtime lag probe allocates nothing per decision:
//! admissions that record their waits, refusals for a late request (`QueueDelay`) and for a
//! lagging runtime (`RuntimeLag`).
//!
//! Allocations are counted per thread; one test in this file.

use admit_testkit::counting_alloc::{self, allocations_during};

#[global_allocator]
static ALLOCATOR: counting_alloc::CountingAllocator = counting_alloc::CountingAllocator;

use std::time::Duration;

use admit::clock::ManualClock;
use admit::shed::Shedder;
use admit::signal::Cause;
use admit::signal::cpu::ManualCpu;
use admit::signal::queue::{LagProbe, QueueGate};

const MS: u64 = 1_000_000;

#[test]
fn queue_signals_allocate_nothing_per_decision() {
    let clock = ManualClock::new();
    let probe = LagProbe::default();
    let shedder = Shedder::builder()
        .clock(clock.clone())
        .cpu(ManualCpu::new(0))
        .queue_gate(QueueGate::default())
        .runtime_probe(probe.clone())
        .build()
        .unwrap();
    // The thread's stripe and its random draws, claimed once.
    shedder.allow_after(Duration::ZERO).unwrap().pass();

    let (mut admitted, mut late, mut lagging) = (0u32, 0u32, 0u32);
    let allocations = allocations_during(|| {
        for ms in 1..=3_000u64 {
            clock.set(Duration::from_millis(ms));
            // Waits of 30 ms from 1 s to 2 s: the gate turns hot, and the late requests go.
            let waited = if (1_000..2_000).contains(&ms) { 30 } else { 1 };
            match shedder.allow_after(Duration::from_millis(waited)) {
                Ok(permit) => {
                    permit.pass();
                    admitted += 1;
                }
                Err(refused) => {
                    assert_eq!(refused.reason(), Cause::QueueDelay);
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
    assert!(admitted > 1_000 && late > 500 && lagging == 1_000);
}
