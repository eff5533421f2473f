//! The runtime lag probe: the reference vectors of its controller and heartbeat, its builder,
//! the per-thread draw, the lateness the metrics read, and its task on tokio's paused timer.

use std::time::Duration;

use super::{LagProbe, NEVER};
use crate::ConfigError;
use crate::signal::{OverloadSignal, Pressure};
use crate::sync::Ordering;

const MS: u64 = 1_000_000;

/// A lateness or a time given in (possibly fractional) milliseconds, in ns.
fn ms(value: f64) -> u64 {
    (value * 1e6).round() as u64
}

/// [`LagProbe::should_drop`] with the draw given: `u` in `0..1_000_000` drops iff `u` is below
/// the drop probability (a larger `u` never drops but on the heartbeat).
fn should_drop_with(probe: &LagProbe, now_ns: u64, u: u32) -> bool {
    probe.decide(now_ns, || u)
}

/// The clock reading of the last tick (or of the task's start); `None` while no task runs the
/// probe and it was never ticked.
fn last_tick(probe: &LagProbe) -> Option<u64> {
    let last = probe.state.last_tick.load(Ordering::Relaxed);
    (last != NEVER).then_some(last)
}

/// The probe's target.
fn target(probe: &LagProbe) -> Duration {
    Duration::from_nanos(probe.state.target_ns)
}

/// Ticks due every 10 ms from 10 ms, each `lateness` ms late; the drop probability after each.
fn run_ticks(probe: &LagProbe, lateness: &[f64]) -> Vec<u32> {
    lateness
        .iter()
        .enumerate()
        .map(|(i, &late)| {
            let deadline = 10 * MS * (i as u64 + 1);
            assert_eq!(probe.tick(deadline, deadline + ms(late)), ms(late));
            probe.drop_ppm()
        })
        .collect()
}

#[test]
fn the_integral_controller_follows_the_reference_sequence() {
    let probe = LagProbe::default();
    let lateness = [1.2, 1.8, 6.0, 22.0, 22.0, 22.0, 5.0, 5.1, 1.0, 1.0, 1.0];
    assert_eq!(
        run_ticks(&probe, &lateness),
        [
            0, 0, 50_000, 100_000, 150_000, 200_000, 190_000, 240_000, 230_000, 220_000, 210_000
        ]
    );
}

#[test]
fn the_drop_probability_saturates_and_decays() {
    let probe = LagProbe::default();
    let mut lateness = vec![22.0; 21];
    lateness.extend([1.0; 3]);
    let p = run_ticks(&probe, &lateness);
    assert_eq!(p[19], 1_000_000, "20 late ticks from 0");
    assert_eq!(p[20], 1_000_000, "clamped");
    assert_eq!(p[23], 970_000, "then 3 good ones");

    let cold = LagProbe::default();
    assert_eq!(run_ticks(&cold, &[0.0, 1.0]), [0, 0], "clamped at 0");
}

#[test]
fn a_draw_below_the_probability_drops() {
    let probe = LagProbe::default();
    run_ticks(&probe, &[22.0; 3]);
    assert_eq!(probe.drop_ppm(), 150_000);
    let now = ms(55.0); // the last tick was at 52 ms: the heartbeat is fine
    assert!(!probe.heartbeat_hot(now));
    assert!(should_drop_with(&probe, now, 149_999));
    assert!(!should_drop_with(&probe, now, 150_000));
    assert!(should_drop_with(&probe, now, 0));
    assert!(!should_drop_with(&probe, now, u32::MAX), "out of range");
}

#[test]
fn the_heartbeat_is_missed_after_four_targets() {
    let probe = LagProbe::default();
    probe.tick(ms(1000.0), ms(1000.0));
    assert_eq!(last_tick(&probe), Some(ms(1000.0)));
    assert_eq!(probe.lag_now(ms(1005.0)), 0);
    assert_eq!(probe.lag_now(ms(1012.0)), ms(2.0));
    assert!(!probe.heartbeat_hot(ms(1012.0)));
    assert_eq!(probe.lag_now(ms(1030.0)), ms(20.0));
    assert!(
        !probe.heartbeat_hot(ms(1030.0)),
        "20 ms is not above 4 × 5 ms"
    );
    assert_eq!(probe.lag_now(ms(1031.0)), ms(21.0));
    assert!(probe.heartbeat_hot(ms(1031.0)));
    // Stalled whatever the draw, with a drop probability of 0.
    assert_eq!(probe.drop_ppm(), 0);
    assert!(should_drop_with(&probe, ms(1031.0), u32::MAX));
    assert!(probe.should_drop(ms(1031.0)));
    // An earlier reading on a lagging thread: no lag.
    assert_eq!(probe.lag_now(ms(990.0)), 0);
    // It ticks again, 21 ms late: only the controller's share may drop now, one late tick's.
    probe.tick(ms(1010.0), ms(1031.0));
    assert_eq!(probe.drop_ppm(), 50_000);
    assert!(!probe.heartbeat_hot(ms(1031.0)));
    assert!(!should_drop_with(&probe, ms(1031.0), 50_000));
    assert!(should_drop_with(&probe, ms(1031.0), 49_999));
}

/// The readings: calm while the probe keeps up, overloaded with the tick interval as the retry
/// hint while it drops a share or missed its heartbeat; a request it drops is refused.
#[test]
fn the_probe_reads_runtime_lag_with_its_interval_as_the_hint() {
    let probe = LagProbe::builder()
        .interval(Duration::from_millis(20))
        .build()
        .unwrap();
    let lagging = Pressure::overloaded(crate::signal::Cause::RuntimeLag)
        .with_retry_after(Duration::from_millis(20));
    probe.tick(ms(20.0), ms(21.0));
    assert_eq!(probe.pressure(ms(25.0)), Pressure::CALM);
    assert_eq!(
        probe.pressure(ms(62.0)),
        lagging,
        "the heartbeat: 21 ms overdue"
    );
    probe.tick(ms(40.0), ms(46.0));
    assert_eq!(probe.drop_ppm(), 50_000);
    assert_eq!(probe.pressure(ms(50.0)), lagging, "a share to drop");
    let seeded = LagProbe::builder().seed(7).build().unwrap();
    for tick in 1..=20 {
        seeded.tick(10 * MS * tick, 10 * MS * tick + 22 * MS);
    }
    let refused = seeded.assess(&crate::signal::Arrival::new().at(225 * MS));
    assert!(refused.refuses());
    assert_eq!(refused.retry_after(), Some(Duration::from_millis(10)));
}

#[test]
fn a_fresh_probe_is_cold() {
    let probe = LagProbe::default();
    assert_eq!(last_tick(&probe), None);
    assert_eq!(probe.drop_ppm(), 0);
    for now in [0, ms(31.0), u64::MAX - 1, u64::MAX] {
        assert_eq!(probe.lag_now(now), 0);
        assert!(!probe.heartbeat_hot(now));
        assert_eq!(probe.pressure(now), Pressure::CALM);
        assert!(!should_drop_with(&probe, now, 0));
        assert!(!probe.should_drop(now));
    }
}

/// The metrics read every tick's lateness, as a histogram, and the drop probability.
#[cfg(feature = "metrics")]
#[test]
fn every_lateness_lands_in_the_histogram() {
    let probe = LagProbe::default();
    // Nine ticks 6 ms late, then ten on time.
    for tick in 1..=9 {
        probe.tick(ms(10.0) * tick, ms(10.0) * tick + ms(6.0));
    }
    for tick in 10..=19 {
        probe.tick(ms(10.0) * tick, ms(10.0) * tick);
    }
    let snapshot = probe.snapshot();
    let lateness = snapshot.lateness;
    assert_eq!(lateness.count(), 19);
    let cumulative = lateness.cumulative();
    assert_eq!(cumulative[0], (Duration::from_millis(1), 10), "on time");
    assert_eq!(cumulative[2], (Duration::from_millis(5), 10));
    assert_eq!(cumulative[3], (Duration::from_millis(10), 19), "6 ms late");
    assert_eq!(lateness.sum(), Duration::from_millis(54));
    assert_eq!(snapshot.drop_ppm, 350_000);
}

#[test]
fn the_builder_checks_its_settings() {
    let probe = LagProbe::default();
    assert_eq!(probe.state.interval_ns, 10 * 1_000_000);
    assert_eq!(target(&probe), Duration::from_millis(5));

    let built = LagProbe::builder()
        .interval(Duration::from_millis(20))
        .target(Duration::from_millis(8))
        .build()
        .expect("valid settings");
    assert_eq!(built.state.interval_ns, 20 * 1_000_000);
    assert_eq!(target(&built), Duration::from_millis(8));
    let long = LagProbe::builder()
        .target(Duration::from_millis(100))
        .build()
        .expect("a target longer than the interval");
    assert_eq!(target(&long), Duration::from_millis(100));

    let interval = |d: Duration| LagProbe::builder().interval(d).build().unwrap_err();
    for bad in [Duration::ZERO, Duration::from_micros(999)] {
        let err = interval(bad);
        assert_eq!(
            err,
            ConfigError::DurationTooShort {
                setting: "interval",
                value: bad,
                min: Duration::from_millis(1)
            }
        );
        assert_eq!(err.setting(), "interval");
    }
    assert!(
        LagProbe::builder()
            .interval(Duration::from_millis(1))
            .build()
            .is_ok(),
        "tokio's timer resolution"
    );

    let err = LagProbe::builder()
        .target(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        ConfigError::DurationTooShort {
            setting: "target",
            value: Duration::ZERO,
            min: Duration::from_nanos(1)
        }
    );
    assert_eq!(err.setting(), "target");
    let err = LagProbe::builder().target(Duration::from_nanos(1)).build();
    assert!(err.is_ok(), "any lateness is late");

    for setting in ["interval", "target"] {
        let builder = LagProbe::builder();
        let builder = match setting {
            "interval" => builder.interval(Duration::MAX),
            _ => builder.target(Duration::MAX),
        };
        let err = builder.build().unwrap_err();
        assert_eq!(
            err,
            ConfigError::DurationTooLong {
                setting,
                value: Duration::MAX
            }
        );
    }
}

#[test]
fn the_drop_frequency_follows_the_probability() {
    const DECISIONS: u32 = 100_000;
    let probe = LagProbe::default();
    let now = ms(55.0);
    assert_eq!((0..DECISIONS).filter(|_| probe.should_drop(now)).count(), 0);
    run_ticks(&probe, &[22.0; 5]);
    assert_eq!(probe.drop_ppm(), 250_000);
    let now = ms(75.0);
    assert!(!probe.heartbeat_hot(now), "every drop is the draw's");
    let dropped = (0..DECISIONS).filter(|_| probe.should_drop(now)).count();
    // Binomial: standard deviation √(10⁵ · 0.25 · 0.75) ≈ 137.
    assert!((24_000..=26_000).contains(&dropped), "{dropped}");
}

/// The task, on tokio's paused timer.
#[cfg(feature = "tokio")]
mod task {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    use super::{LagProbe, MS, last_tick, should_drop_with};
    use crate::clock::Clock;

    /// A clock on tokio's (paused) time, from its creation, that a test can also move ahead on its
    /// own (a thread descheduled between the wake-up and the clock read).
    #[derive(Clone, Debug)]
    struct TokioClock {
        start: tokio::time::Instant,
        ahead: Arc<AtomicU64>,
    }

    impl TokioClock {
        fn new() -> Self {
            TokioClock {
                start: tokio::time::Instant::now(),
                ahead: Arc::new(AtomicU64::new(0)),
            }
        }

        fn leap(&self, by: Duration) {
            self.ahead
                .fetch_add(by.as_nanos() as u64, Ordering::Relaxed);
        }

        /// Sleeps until `at` of tokio's time since the clock's creation.
        async fn sleep_until(&self, at: Duration) {
            tokio::time::sleep_until(self.start + at).await;
        }
    }

    impl Clock for TokioClock {
        fn now_nanos(&self) -> u64 {
            self.start.elapsed().as_nanos() as u64 + self.ahead.load(Ordering::Relaxed)
        }
    }

    fn at(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[tokio::test(start_paused = true)]
    async fn the_task_ticks_every_interval_until_the_last_handle_is_dropped() {
        let clock = TokioClock::new();
        let probe = LagProbe::default();
        let task = tokio::spawn(probe.run(clock.clone()));
        assert_eq!(last_tick(&probe), Some(0), "armed by `run`");
        for tick in 1..=25 {
            clock.sleep_until(at(10 * tick + 5)).await;
            assert_eq!(last_tick(&probe), Some(10 * tick * MS));
            assert_eq!(probe.drop_ppm(), 0);
            assert!(!probe.heartbeat_hot(clock.now_nanos()));
            assert!(!should_drop_with(&probe, clock.now_nanos(), 0));
        }
        #[cfg(feature = "metrics")]
        {
            let lateness = probe.snapshot().lateness;
            assert_eq!(lateness.count(), 25);
            assert_eq!(lateness.cumulative()[0].1, 25, "every tick on time");
        }

        // A clone keeps the task going.
        let clone = probe.clone();
        drop(probe);
        clock.sleep_until(at(265)).await;
        assert_eq!(last_tick(&clone), Some(260 * MS));
        assert!(!task.is_finished());

        // The last one ends it at its next tick.
        drop(clone);
        tokio::time::timeout(Duration::from_millis(10), task)
            .await
            .expect("the task ended within a tick")
            .expect("the task did not panic");
    }

    /// The task outlives the handle it came from: a closure can return it.
    #[tokio::test(start_paused = true)]
    async fn the_task_does_not_borrow_the_probe() {
        let clock = TokioClock::new();
        let probe = LagProbe::default();
        let handle = probe.clone();
        let start = move |clock| handle.run(clock);
        let _task = tokio::spawn(start(clock.clone()));
        clock.sleep_until(at(15)).await;
        assert_eq!(last_tick(&probe), Some(10 * MS));
    }

    #[tokio::test(start_paused = true)]
    async fn missed_ticks_are_not_made_up() {
        let clock = TokioClock::new();
        let probe = LagProbe::default();
        let _task = tokio::spawn(probe.run(clock.clone()));
        clock.sleep_until(at(15)).await;
        assert_eq!(last_tick(&probe), Some(10 * MS));
        // The clock reads 50 ms now: the probe missed its heartbeat (30 ms overdue).
        clock.leap(at(35));
        assert_eq!(probe.lag_now(clock.now_nanos()), 30 * MS);
        assert!(probe.heartbeat_hot(clock.now_nanos()));
        assert!(should_drop_with(&probe, clock.now_nanos(), u32::MAX));
        // The tick due at 20 ms ran at 55 ms: once, 35 ms late; the next is due at 65 ms, not at
        // 30, 40 and 50 ms in a burst.
        clock.sleep_until(at(25)).await;
        assert_eq!(last_tick(&probe), Some(55 * MS));
        assert_eq!(probe.drop_ppm(), 50_000);
        assert!(!should_drop_with(&probe, clock.now_nanos(), u32::MAX));
        clock.sleep_until(at(35)).await;
        assert_eq!(last_tick(&probe), Some(65 * MS));
        assert_eq!(probe.drop_ppm(), 40_000);
    }

    #[tokio::test(start_paused = true)]
    async fn one_task_per_probe_and_a_stopped_task_leaves_it_cold() {
        let clock = TokioClock::new();
        let probe = LagProbe::default();
        let task = tokio::spawn(probe.run(clock.clone()));
        clock.sleep_until(at(15)).await;
        assert_eq!(last_tick(&probe), Some(10 * MS));

        // A second task ends at once and changes nothing.
        probe.run(clock.clone()).await;
        assert_eq!(last_tick(&probe), Some(10 * MS));

        // The runtime lags (driven by hand between the task's ticks), then the task is aborted.
        probe.tick(10 * MS, 40 * MS);
        assert_eq!(probe.drop_ppm(), 50_000);
        task.abort();
        assert!(task.await.expect_err("aborted").is_cancelled());
        assert_eq!(last_tick(&probe), None);
        assert_eq!(probe.drop_ppm(), 0);
        assert!(!probe.heartbeat_hot(u64::MAX));

        // Another task takes over.
        let _task = tokio::spawn(probe.run(clock.clone()));
        assert_eq!(last_tick(&probe), Some(15 * MS));
        clock.sleep_until(at(30)).await;
        assert_eq!(last_tick(&probe), Some(25 * MS));
    }
}
