//! The runtime lag probe: the reference vectors of its controller and heartbeat, its builder,
//! the per-thread draw, and its task on tokio's paused timer.

use std::time::Duration;

use super::probe::LagVerdict;
use super::{IntervalWaits, LagProbe, QueueState};
use crate::ConfigError;

const MS: u64 = 1_000_000;

/// A lateness or a time given in (possibly fractional) milliseconds, in ns.
fn ms(value: f64) -> u64 {
    (value * 1e6).round() as u64
}

/// Whether the probe's lateness gate is hot at `now_ns`.
fn lateness_hot(probe: &LagProbe, now_ns: u64) -> bool {
    probe.gate().state(now_ns) == QueueState::Hot
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
    assert_eq!(
        probe.should_drop_with(now, 149_999),
        Some(LagVerdict::Lagging)
    );
    assert_eq!(probe.should_drop_with(now, 150_000), None);
    assert_eq!(probe.should_drop_with(now, 0), Some(LagVerdict::Lagging));
    assert_eq!(probe.should_drop_with(now, u32::MAX), None, "out of range");
}

#[test]
fn the_heartbeat_is_missed_after_four_targets() {
    let probe = LagProbe::default();
    probe.tick(ms(1000.0), ms(1000.0));
    assert_eq!(probe.last_tick(), Some(ms(1000.0)));
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
    assert_eq!(
        probe.should_drop_with(ms(1031.0), u32::MAX),
        Some(LagVerdict::Stalled)
    );
    assert_eq!(probe.should_drop(ms(1031.0)), Some(LagVerdict::Stalled));
    // An earlier reading on a lagging thread: no lag.
    assert_eq!(probe.lag_now(ms(990.0)), 0);
}

#[test]
fn a_fresh_probe_is_cold() {
    let probe = LagProbe::default();
    assert_eq!(probe.last_tick(), None);
    assert_eq!(probe.drop_ppm(), 0);
    for now in [0, ms(31.0), u64::MAX - 1, u64::MAX] {
        assert_eq!(probe.lag_now(now), 0);
        assert!(!probe.heartbeat_hot(now));
        assert!(!lateness_hot(&probe, now));
        assert_eq!(probe.should_drop_with(now, 0), None);
        assert_eq!(probe.should_drop(now), None);
    }
}

#[test]
fn every_lateness_lands_in_the_gate() {
    let probe = LagProbe::default();
    // Ticks 6 ms late all through the gate interval [0, 100 ms), then on time.
    for tick in 1..=9 {
        probe.tick(ms(10.0) * tick, ms(10.0) * tick + ms(6.0));
    }
    assert_eq!(
        probe.gate().interval_waits(ms(96.0)),
        Some(IntervalWaits {
            recorded: 9,
            above_target: 9
        })
    );
    for tick in 10..=19 {
        probe.tick(ms(10.0) * tick, ms(10.0) * tick);
    }
    assert!(lateness_hot(&probe, ms(190.0)));
    probe.tick(ms(200.0), ms(200.0));
    assert!(!lateness_hot(&probe, ms(200.0)));
    assert_eq!(probe.gate().target(), probe.target());
    assert_eq!(probe.gate().interval(), Duration::from_millis(100));
}

#[test]
fn the_builder_checks_its_settings() {
    let probe = LagProbe::default();
    assert_eq!(probe.interval(), Duration::from_millis(10));
    assert_eq!(probe.target(), Duration::from_millis(5));

    let built = LagProbe::builder()
        .interval(Duration::from_millis(20))
        .target(Duration::from_millis(8))
        .gate_interval(Duration::from_millis(200))
        .build()
        .expect("valid settings");
    assert_eq!(built.interval(), Duration::from_millis(20));
    assert_eq!(built.target(), Duration::from_millis(8));
    assert_eq!(built.gate().interval(), Duration::from_millis(200));

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

    let target = |d: Duration| LagProbe::builder().target(d).build().unwrap_err();
    for bad in [Duration::ZERO, Duration::from_millis(100)] {
        assert!(matches!(
            target(bad),
            ConfigError::QueueTargetOutOfRange { target, .. } if target == bad
        ));
    }

    let err = LagProbe::builder()
        .interval(Duration::MAX)
        .build()
        .unwrap_err();
    assert_eq!(err.setting(), "interval");
    assert!(matches!(err, ConfigError::DurationTooLong { .. }));
    let err = LagProbe::builder()
        .gate_interval(Duration::MAX)
        .build()
        .unwrap_err();
    assert_eq!(err.setting(), "gate_interval");
}

#[test]
fn the_drop_frequency_follows_the_probability() {
    const DECISIONS: u32 = 100_000;
    let probe = LagProbe::default();
    let now = ms(55.0);
    assert_eq!(
        (0..DECISIONS)
            .filter(|_| probe.should_drop(now).is_some())
            .count(),
        0
    );
    run_ticks(&probe, &[22.0; 5]);
    assert_eq!(probe.drop_ppm(), 250_000);
    let now = ms(75.0);
    let dropped = (0..DECISIONS)
        .filter(|_| probe.should_drop(now) == Some(LagVerdict::Lagging))
        .count();
    // Binomial: standard deviation √(10⁵ · 0.25 · 0.75) ≈ 137.
    assert!((24_000..=26_000).contains(&dropped), "{dropped}");
}

/// The task, on tokio's paused timer.
#[cfg(feature = "tokio")]
mod task {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    use super::{LagProbe, LagVerdict, MS, lateness_hot};
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
        assert_eq!(probe.last_tick(), Some(0), "armed by `run`");
        for tick in 1..=25 {
            clock.sleep_until(at(10 * tick + 5)).await;
            assert_eq!(probe.last_tick(), Some(10 * tick * MS));
            assert_eq!(probe.drop_ppm(), 0);
            assert!(!probe.heartbeat_hot(clock.now_nanos()));
            assert_eq!(probe.should_drop_with(clock.now_nanos(), 0), None);
        }
        let waits = probe.gate().interval_waits(clock.now_nanos()).unwrap();
        assert_eq!(waits.above_target, 0, "{waits:?}");
        assert!(!lateness_hot(&probe, clock.now_nanos()));

        // A clone keeps the task going.
        let clone = probe.clone();
        drop(probe);
        clock.sleep_until(at(265)).await;
        assert_eq!(clone.last_tick(), Some(260 * MS));
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
        assert_eq!(probe.last_tick(), Some(10 * MS));
    }

    #[tokio::test(start_paused = true)]
    async fn missed_ticks_are_not_made_up() {
        let clock = TokioClock::new();
        let probe = LagProbe::default();
        let _task = tokio::spawn(probe.run(clock.clone()));
        clock.sleep_until(at(15)).await;
        assert_eq!(probe.last_tick(), Some(10 * MS));
        // The clock reads 50 ms now: the probe missed its heartbeat (30 ms overdue).
        clock.leap(at(35));
        assert_eq!(probe.lag_now(clock.now_nanos()), 30 * MS);
        assert_eq!(
            probe.should_drop_with(clock.now_nanos(), u32::MAX),
            Some(LagVerdict::Stalled)
        );
        // The tick due at 20 ms ran at 55 ms: once, 35 ms late; the next is due at 65 ms, not at
        // 30, 40 and 50 ms in a burst.
        clock.sleep_until(at(25)).await;
        assert_eq!(probe.last_tick(), Some(55 * MS));
        assert_eq!(probe.drop_ppm(), 50_000);
        assert_eq!(probe.should_drop_with(clock.now_nanos(), u32::MAX), None);
        clock.sleep_until(at(35)).await;
        assert_eq!(probe.last_tick(), Some(65 * MS));
        assert_eq!(probe.drop_ppm(), 40_000);
    }

    #[tokio::test(start_paused = true)]
    async fn one_task_per_probe_and_a_stopped_task_leaves_it_cold() {
        let clock = TokioClock::new();
        let probe = LagProbe::default();
        let task = tokio::spawn(probe.run(clock.clone()));
        clock.sleep_until(at(15)).await;
        assert_eq!(probe.last_tick(), Some(10 * MS));

        // A second task ends at once and changes nothing.
        probe.run(clock.clone()).await;
        assert_eq!(probe.last_tick(), Some(10 * MS));

        // The runtime lags (driven by hand between the task's ticks), then the task is aborted.
        probe.tick(10 * MS, 40 * MS);
        assert_eq!(probe.drop_ppm(), 50_000);
        task.abort();
        assert!(task.await.expect_err("aborted").is_cancelled());
        assert_eq!(probe.last_tick(), None);
        assert_eq!(probe.drop_ppm(), 0);
        assert!(!probe.heartbeat_hot(u64::MAX));

        // Another task takes over.
        let _task = tokio::spawn(probe.run(clock.clone()));
        assert_eq!(probe.last_tick(), Some(15 * MS));
        clock.sleep_until(at(30)).await;
        assert_eq!(probe.last_tick(), Some(25 * MS));
    }
}
