//! The clocks: manual time is shared and exact; real clocks are monotonic and advance.

use std::sync::Arc;
use std::time::{Duration, Instant};

use admit::clock::{Clock, CoarseClock, ManualClock, MonotonicClock};

#[test]
fn manual_clock_starts_at_zero_and_clones_share_time() {
    let clock = ManualClock::new();
    let other = clock.clone();
    assert_eq!(clock.now_nanos(), 0);
    clock.advance(Duration::from_nanos(7));
    other.advance(Duration::from_millis(2));
    assert_eq!(clock.now_nanos(), 2_000_007);
    assert_eq!(other.now(), Duration::from_nanos(2_000_007));
    other.set(Duration::from_secs(3));
    assert_eq!(clock.now(), Duration::from_secs(3));
    assert_eq!(ManualClock::default().now_nanos(), 0);
}

#[test]
fn manual_clock_saturates_instead_of_wrapping() {
    let clock = ManualClock::new();
    clock.set(Duration::MAX);
    assert_eq!(clock.now_nanos(), u64::MAX);
    clock.set(Duration::from_nanos(u64::MAX - 1));
    clock.advance(Duration::from_secs(1));
    assert_eq!(clock.now_nanos(), u64::MAX);
}

#[test]
fn manual_clock_advances_are_not_lost_between_threads() {
    let clock = ManualClock::new();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let clock = clock.clone();
            std::thread::spawn(move || {
                for _ in 0..10_000 {
                    clock.advance(Duration::from_nanos(1));
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(clock.now_nanos(), 40_000);
}

#[test]
fn monotonic_clock_counts_from_its_creation() {
    let before = Instant::now();
    let clock = MonotonicClock::new();
    let copy = clock;
    let mut last = clock.now_nanos();
    for _ in 0..10_000 {
        let now = clock.now_nanos();
        assert!(now >= last);
        last = now;
    }
    // It reads the same clock as `Instant`: no more time has passed than `Instant` saw.
    assert!(Duration::from_nanos(last) <= before.elapsed());
    assert!(copy.now_nanos() >= last, "copies share the origin");
    assert!(MonotonicClock::default().now_nanos() <= clock.now_nanos());
}

#[test]
fn clocks_can_be_shared_by_reference_arc_and_box() {
    let clock = ManualClock::new();
    clock.set(Duration::from_nanos(42));
    fn read(clock: impl Clock) -> u64 {
        clock.now_nanos()
    }
    let by_dyn_ref: &dyn Clock = &clock;
    let by_arc: Arc<dyn Clock> = Arc::new(clock.clone());
    let by_box: Box<dyn Clock> = Box::new(clock.clone());
    assert_eq!(read(&clock), 42);
    assert_eq!(read(by_dyn_ref), 42);
    assert_eq!(read(by_arc), 42);
    assert_eq!(read(by_box), 42);
}

#[test]
fn coarse_clock_refuses_a_zero_resolution() {
    let err = CoarseClock::start(Duration::ZERO).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn coarse_clock_advances_monotonically() {
    let clock = CoarseClock::start(Duration::from_millis(1)).unwrap();
    assert_eq!(clock.resolution_nanos(), 1_000_000);
    let start = clock.now_nanos();
    let mut last = start;
    // Bounded wait for the refreshing thread, without asserting how fast it is.
    let deadline = Instant::now() + Duration::from_secs(10);
    while last == start && Instant::now() < deadline {
        std::thread::yield_now();
        let now = clock.now_nanos();
        assert!(now >= last);
        last = now;
    }
    assert!(last > start, "the coarse clock never advanced");
    assert!(clock.clone().now_nanos() >= last);
}
