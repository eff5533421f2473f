//! `try_acquire`, `try_acquire_with`, `try_acquire_n`, `reserve` and `snapshot` never touch the
//! heap, in both buckets: admitted, rejected, across window and second boundaries (where
//! Sentinel's token sync and window sealing run), and when the smooth bucket marks unmet
//! demand.
//!
//! Allocations are counted per thread, so the test harness's own threads cannot disturb the
//! count; one test in this file all the same.

use admit::signal::Arrival;
use admit_testkit::counting_alloc;

#[global_allocator]
static ALLOCATOR: counting_alloc::CountingAllocator = counting_alloc::CountingAllocator;

use std::time::Duration;

use admit::clock::{ManualClock, MonotonicClock};
use admit::warmup::sentinel::SentinelWarmUp;
use admit::warmup::{Payment, WarmUp};
use counting_alloc::allocations_during;

#[test]
fn deciding_and_observing_never_allocate() {
    let clock = ManualClock::new();
    let limiter = SentinelWarmUp::builder(10.0)
        .clock(clock.clone())
        .build()
        .unwrap();
    let smooth = |payment| {
        WarmUp::builder(10.0)
            .payment(payment)
            .critical_share(0.5)
            .clock(clock.clone())
            .build()
            .unwrap()
    };
    let (pay_now, pay_later) = (smooth(Payment::Now), smooth(Payment::Later));
    let real = WarmUp::builder(1e6)
        .clock(MonotonicClock::new())
        .build()
        .unwrap();

    let mut admitted = 0u32;
    let mut rejected = 0u32;
    let mut capacity_errors = 0u32;
    let allocations = allocations_during(|| {
        // 20 simulated seconds at one attempt per millisecond: the first call of every second
        // syncs the tokens, the first of every half second seals a window, and most calls are
        // rejected.
        for ms in 0..20_000u32 {
            match limiter.try_acquire() {
                Ok(()) => admitted += 1,
                Err(e) => {
                    std::hint::black_box(e.retry_after());
                    rejected += 1;
                }
            }
            if ms % 7 == 0 {
                match limiter.try_acquire_n(2) {
                    Ok(()) => admitted += 2,
                    Err(e) => {
                        std::hint::black_box(e.retry_after());
                        rejected += 1;
                    }
                }
                if limiter.try_acquire_n(11).is_err() {
                    capacity_errors += 1;
                }
            }
            std::hint::black_box(limiter.snapshot());
            for smooth in [&pay_now, &pay_later] {
                match smooth.try_acquire() {
                    Ok(()) => admitted += 1,
                    Err(e) => {
                        std::hint::black_box(e.retry_after());
                        rejected += 1;
                    }
                }
                if ms % 3 == 0 {
                    let class = admit::criticality::Criticality::ALL[ms as usize % 4];
                    std::hint::black_box(
                        smooth
                            .try_acquire_with(Arrival::new().with_class(class))
                            .is_ok(),
                    );
                }
                if ms % 100 == 0 {
                    std::hint::black_box(smooth.reserve(3, Duration::from_millis(50)).is_ok());
                }
                std::hint::black_box(smooth.snapshot());
            }
            clock.advance(Duration::from_millis(1));
        }
        for _ in 0..10_000 {
            std::hint::black_box(real.try_acquire().is_ok());
        }
        std::hint::black_box(real.snapshot());
    });

    assert!(admitted > 0 && rejected > 0 && capacity_errors > 0);
    assert_eq!(
        allocations, 0,
        "{allocations} heap allocations on the hot path"
    );
}
