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

/// A reader scanning a bucket while late completions are still landing in it must never see a
/// pass whose latency is missing from the bucket's sum: that would understate `min_rt` (down to
/// 0 in an otherwise empty bucket) and with it the limit.
#[test]
fn a_bucket_never_shows_a_pass_without_its_latency() {
    use std::cell::Cell;

    use admit::clock::Clock;

    const MS: u64 = 1_000_000;
    thread_local! {
        /// A clock reading this thread is stuck at (a stale reading), if any.
        static STUCK: Cell<Option<u64>> = const { Cell::new(None) };
    }
    /// A shared clock that each thread may read late.
    #[derive(Clone)]
    struct LateClock(Arc<AtomicU64>);
    impl Clock for LateClock {
        fn now_nanos(&self) -> u64 {
            STUCK
                .with(Cell::get)
                .unwrap_or_else(|| self.0.load(Ordering::Acquire))
        }
    }

    const ROUNDS: u64 = 300;
    const WRITERS: u64 = 2;
    let now = Arc::new(AtomicU64::new(0));
    let shedder = Arc::new(
        Shedder::builder()
            .clock(LateClock(now.clone()))
            .cpu(ManualCpu::new(0))
            .build()
            .unwrap(),
    );
    let rounds = Arc::new(Barrier::new(WRITERS as usize + 1));
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let (shedder, rounds) = (shedder.clone(), rounds.clone());
            thread::spawn(move || {
                for round in 0..ROUNDS {
                    rounds.wait();
                    // Complete 1000 ms requests into buckets behind the reader's, which are
                    // visible to it.
                    let round_start = (round + 1) * 10_000 * MS;
                    let completed_at = round_start - (writer + 1) * 100 * MS + 50 * MS;
                    for _ in 0..500 {
                        STUCK.with(|t| t.set(Some(completed_at - 1000 * MS)));
                        let permit = shedder.allow().unwrap();
                        STUCK.with(|t| t.set(Some(completed_at)));
                        permit.pass();
                    }
                    STUCK.with(|t| t.set(None));
                    rounds.wait();
                }
            })
        })
        .collect();
    let mut reads = 0;
    for round in 0..ROUNDS {
        now.store((round + 1) * 10_000 * MS, Ordering::Release);
        rounds.wait();
        for _ in 0..200 {
            let snapshot = shedder.snapshot();
            assert_eq!(snapshot.min_rt_ms, 1000, "read {reads}: {snapshot:?}");
            reads += 1;
        }
        rounds.wait();
    }
    writers.into_iter().for_each(|w| w.join().unwrap());
}
