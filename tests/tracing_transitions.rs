//! The `tracing` events: one per state transition (shedding started and stopped, a warm-up
//! bucket reaching its full rate and falling back after idle time), never one per request.

#![cfg(feature = "tracing")]

#[path = "support/random.rs"]
mod random;
#[path = "support/rig.rs"]
mod rig;

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use admit::clock::ManualClock;
use admit::warmup::WarmUp;
use admit::warmup::sentinel::SentinelWarmUp;
use rig::Rig;

/// The formatted events, one line each.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl io::Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Lines {
    fn take(&self) -> Vec<String> {
        let bytes = std::mem::take(&mut *self.0.lock().unwrap());
        String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// Runs `body` with a subscriber that writes every event at `INFO` and above to the result.
fn capture(body: impl FnOnce(&Lines)) {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .without_time()
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || body(&lines));
}

#[test]
fn shedding_logs_its_start_and_stop_once() {
    capture(|lines| {
        let rig = Rig::named("api");
        let held = rig.force_overload();
        let refused = (0..500).filter(|_| rig.shedder.allow().is_err()).count();
        assert_eq!(refused, 500);
        let events = lines.take();
        assert_eq!(events.len(), 1, "{events:#?}");
        assert!(events[0].contains("WARN"), "{}", events[0]);
        assert!(events[0].contains("shedding started"), "{}", events[0]);
        assert!(events[0].contains("limiter=\"api\""), "{}", events[0]);
        assert!(events[0].contains("reason=cpu"), "{}", events[0]);

        rig.cool_down();
        for _ in 0..100 {
            rig.shedder.allow().unwrap().pass();
        }
        let events = lines.take();
        assert_eq!(events.len(), 1, "{events:#?}");
        assert!(events[0].contains("shedding stopped"), "{}", events[0]);
        assert!(events[0].contains("dropped_total=500"), "{}", events[0]);
        drop(held);
    });
}

/// Ten seconds of a request every millisecond (a bucket of 100 per second, warming up over
/// 2 s, is warm well within that): exactly one event, that `limiter` reached its full rate.
fn saturate_until_warm(clock: &ManualClock, lines: &Lines, limiter: &str, try_acquire: impl Fn()) {
    for _ in 0..10_000 {
        clock.advance(Duration::from_millis(1));
        try_acquire();
    }
    let events = lines.take();
    assert_eq!(events.len(), 1, "{events:#?}");
    assert!(
        events[0].contains("warm-up reached its full rate"),
        "{}",
        events[0]
    );
    assert!(
        events[0].contains(&format!("limiter=\"{limiter}\"")),
        "{}",
        events[0]
    );
}

#[test]
fn a_warm_up_logs_reaching_its_full_rate_and_falling_back() {
    capture(|lines| {
        let clock = ManualClock::new();
        let bucket = WarmUp::builder(100.0)
            .name("edge")
            .warm_up_period(Duration::from_secs(2))
            .clock(clock.clone())
            .build()
            .unwrap();
        saturate_until_warm(&clock, lines, "edge", || {
            let _ = bucket.try_acquire();
        });
        // A minute idle refills the bucket: the next admission finds it below its full rate.
        clock.advance(Duration::from_secs(60));
        for _ in 0..10 {
            let _ = bucket.try_acquire();
        }
        let events = lines.take();
        assert_eq!(events.len(), 1, "{events:#?}");
        assert!(events[0].contains("fell back"), "{}", events[0]);
    });
}

#[test]
fn a_sentinel_bucket_logs_reaching_its_full_rate() {
    capture(|lines| {
        let clock = ManualClock::new();
        let bucket = SentinelWarmUp::builder(100.0)
            .name("exact")
            .warm_up_period(Duration::from_secs(2))
            .clock(clock.clone())
            .build()
            .unwrap();
        saturate_until_warm(&clock, lines, "exact", || {
            let _ = bucket.try_acquire();
        });
    });
}

/// Steady Poisson loads below, at and above the full rate of a 200 per second bucket (warm-up
/// 10 s, factor 3), each for a minute from cold and from warm: each logs at most the two
/// transitions, not one per request. Without hysteresis, 80 per second logged 503 events from
/// cold and 374 from warm: its level hovers at the warning level.
#[test]
fn steady_loads_log_transitions_not_requests() {
    for start_warm in [false, true] {
        for per_second in [80u32, 100, 150, 200, 400] {
            capture(|lines| {
                let clock = ManualClock::new();
                let bucket = WarmUp::builder(200.0)
                    .start_warm(start_warm)
                    .clock(clock.clone())
                    .build()
                    .unwrap();
                // Poisson arrivals.
                let mut random = random::Random(u64::from(per_second));
                let mean = 1e9 / f64::from(per_second);
                let mut admitted = 0;
                for _ in 0..60 * per_second {
                    clock.advance(Duration::from_nanos(random.exponential(mean)));
                    admitted += u32::from(bucket.try_acquire().is_ok());
                }
                let events = lines.take();
                assert!(
                    events.len() <= 2,
                    "{per_second}/s from {}, {admitted} admitted: {} events: {events:#?}",
                    if start_warm { "warm" } else { "cold" },
                    events.len()
                );
            });
        }
    }
}
