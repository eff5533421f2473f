//! The client throttle's decisions and counts never touch the heap; only `build` does.

use std::time::Duration;

use admit::client::Throttle;
use admit::clock::ManualClock;
use admit_testkit::counting_alloc::{self, allocations_during};

#[global_allocator]
static ALLOCATOR: counting_alloc::CountingAllocator = counting_alloc::CountingAllocator;

#[test]
fn sending_counting_and_refusing_never_allocate() {
    let clock = ManualClock::new();
    let throttle = Throttle::builder()
        .window(Duration::from_secs(1), 10)
        .clock(clock.clone())
        .build()
        .unwrap();
    let mut refused = 0;
    let allocations = allocations_during(|| {
        for slice in 0..100 {
            for _ in 0..100 {
                match throttle.try_send() {
                    // An overload from the 50th slice on: the backend refuses what it gets.
                    Ok(()) if slice < 50 => throttle.accepted(),
                    Ok(()) => throttle.refused(),
                    Err(_) => refused += 1,
                }
            }
            let _ = throttle.snapshot();
            clock.advance(Duration::from_millis(50));
        }
    });
    assert_eq!(allocations, 0);
    // The refusing path ran.
    assert!(refused > 1_000, "{refused}");
}
