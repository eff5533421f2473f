//! Many threads admitting, completing and being refused at once: every permit is accounted for,
//! and nothing is left in flight.

#[path = "support/rig.rs"]
mod rig;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use admit::clock::MonotonicClock;
use admit::shed::Shedder;
use admit::signal::cpu::ManualCpu;
use rig::Rig;

#[derive(Default)]
struct Tally {
    admitted: AtomicU64,
    passed: AtomicU64,
    failed: AtomicU64,
    refused: AtomicU64,
}

#[test]
fn racing_admissions_and_completions_balance_exactly() {
    const THREADS: u64 = 4;
    const CALLS: u64 = 50_000;
    let Rig {
        shedder,
        clock,
        cpu,
    } = Rig::new();
    let tally = Arc::new(Tally::default());
    let done = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(THREADS as usize + 2)); // workers, weather, us

    // Time moves while the workers run (buckets roll over under them).
    let weather = {
        let (clock, done, start) = (clock.clone(), done.clone(), start.clone());
        thread::spawn(move || {
            start.wait();
            while !done.load(Ordering::Acquire) {
                clock.advance(Duration::from_micros(250));
                thread::yield_now();
            }
        })
    };
    let workers: Vec<_> = (0..THREADS)
        .map(|worker| {
            let (shedder, tally, start) = (shedder.clone(), tally.clone(), start.clone());
            let cpu = cpu.clone();
            thread::spawn(move || {
                start.wait();
                let mut held = Vec::new();
                for i in 0..CALLS {
                    // The CPU flips between cool and hot as the workers go.
                    if i % 1000 == 0 {
                        cpu.set(if (i / 1000) % 2 == 0 { 400 } else { 1000 });
                    }
                    match shedder.allow_owned() {
                        Ok(permit) => {
                            tally.admitted.fetch_add(1, Ordering::Relaxed);
                            held.push((permit, (i + worker) % 10));
                        }
                        Err(_) => {
                            tally.refused.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    // Keep up to 16 requests in flight per worker, completing them in turn:
                    // mostly passes, some failures, some cancellations.
                    if held.len() > 16 || (i % 5 == 0 && !held.is_empty()) {
                        let (permit, kind) = held.swap_remove(0);
                        match kind {
                            0 => {
                                permit.fail();
                                tally.failed.fetch_add(1, Ordering::Relaxed);
                            }
                            1 => {
                                drop(permit);
                                tally.failed.fetch_add(1, Ordering::Relaxed);
                            }
                            _ => {
                                permit.pass();
                                tally.passed.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                }
                for (permit, _) in held {
                    permit.pass();
                    tally.passed.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    start.wait();
    workers.into_iter().for_each(|w| w.join().unwrap());
    done.store(true, Ordering::Release);
    weather.join().unwrap();

    let snapshot = shedder.snapshot();
    let admitted = tally.admitted.load(Ordering::Relaxed);
    let refused = tally.refused.load(Ordering::Relaxed);
    assert_eq!(admitted + refused, THREADS * CALLS);
    assert!(
        admitted > 0 && refused > 0,
        "admitted {admitted}, refused {refused}"
    );
    assert_eq!(snapshot.flying, 0);
    assert_eq!(snapshot.passed, tally.passed.load(Ordering::Relaxed));
    assert_eq!(snapshot.failed, tally.failed.load(Ordering::Relaxed));
    assert_eq!(snapshot.passed + snapshot.failed, admitted);
    assert_eq!(snapshot.dropped, refused);
    assert!(snapshot.avg_flying.is_finite() && snapshot.avg_flying >= 0.0);
}

/// go-zero's `TestAdaptiveShedder`, as a smoke test on a real clock: 100 threads × 30 calls
/// with up to 4 ms of work and 1 % failures, CPU threshold 100 ‰, 50 ms buckets.
#[test]
fn go_zeros_adaptive_shedder_smoke_test() {
    let shedder = Arc::new(
        Shedder::builder()
            .window(Duration::from_millis(500))
            .buckets(10)
            .cpu_threshold(100)
            .clock(MonotonicClock::new())
            .cpu(ManualCpu::new(150))
            .build()
            .unwrap(),
    );
    let workers: Vec<_> = (0..100u64)
        .map(|worker| {
            let shedder = shedder.clone();
            thread::spawn(move || {
                for call in 0..30u64 {
                    let Ok(permit) = shedder.allow() else {
                        continue;
                    };
                    let work = Duration::from_micros((worker * 31 + call * 17) % 4000);
                    thread::sleep(work);
                    if (worker * 30 + call) % 100 == 0 {
                        permit.fail();
                    } else {
                        permit.pass();
                    }
                }
            })
        })
        .collect();
    workers.into_iter().for_each(|w| w.join().unwrap());
    let snapshot = shedder.snapshot();
    assert_eq!(snapshot.flying, 0);
    assert_eq!(snapshot.passed + snapshot.failed + snapshot.dropped, 3000);
}

/// Readers opening new buckets while completions are landing must never split a pass from its
/// latency: a bucket showing a pass without its latency would understate `min_rt` (down to 0 in
/// a bucket of one pass) and with it the limit. Every request here takes exactly 500 ms, so every
/// bucket's mean is 500 ms: `min_rt` is 500 once passes are visible, and never less.
#[test]
fn a_bucket_never_shows_a_pass_without_its_latency() {
    use std::cell::Cell;

    use admit::clock::Clock;

    const MS: u64 = 1_000_000;
    thread_local! {
        /// The reading this thread's clock gives, if set.
        static READING: Cell<Option<u64>> = const { Cell::new(None) };
    }
    /// A shared clock each thread may pin to a reading of its own.
    #[derive(Clone)]
    struct PinnedClock(Arc<AtomicU64>);
    impl Clock for PinnedClock {
        fn now_nanos(&self) -> u64 {
            READING
                .with(Cell::get)
                .unwrap_or_else(|| self.0.load(Ordering::Acquire))
        }
    }

    /// Buckets opened at most, and how many showing passes are enough.
    const BUCKETS: u64 = 100_000;
    const ENOUGH: u64 = 2000;
    let now = Arc::new(AtomicU64::new(1000 * MS));
    let shedder = Arc::new(
        Shedder::builder()
            .clock(PinnedClock(now.clone()))
            .cpu(ManualCpu::new(0))
            .build()
            .unwrap(),
    );
    let done = Arc::new(AtomicBool::new(false));
    // Writers that have completed a request: the readings start once both have.
    let running = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..2)
        .map(|_| {
            let (shedder, now, done, running) =
                (shedder.clone(), now.clone(), done.clone(), running.clone());
            thread::spawn(move || {
                let mut completed = 0u64;
                while !done.load(Ordering::Acquire) {
                    let at = now.load(Ordering::Acquire);
                    READING.with(|r| r.set(Some(at - 500 * MS)));
                    let permit = shedder.allow().unwrap();
                    READING.with(|r| r.set(Some(at)));
                    permit.pass();
                    if completed == 0 {
                        running.fetch_add(1, Ordering::AcqRel);
                    }
                    completed += 1;
                }
                completed
            })
        })
        .collect();
    while running.load(Ordering::Acquire) < 2 {
        thread::yield_now();
    }
    let mut seen = 0;
    for bucket in 11..=BUCKETS {
        // Each reading opens a new bucket, racing the completions landing meanwhile.
        now.store(bucket * 100 * MS, Ordering::Release);
        let snapshot = shedder.snapshot();
        if snapshot.min_rt_ms != 1000 {
            assert_eq!(snapshot.min_rt_ms, 500, "bucket {bucket}: {snapshot:?}");
            assert_eq!(snapshot.mean_service_time_ms, Some(500.0), "{snapshot:?}");
            seen += 1;
            if seen == ENOUGH {
                break;
            }
        }
    }
    done.store(true, Ordering::Release);
    let completed: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(
        completed > 0 && seen > 0,
        "{completed} completed, {seen} read"
    );
}
