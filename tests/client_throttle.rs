//! Properties of the client throttle on the manual clock: it never refuses while the backend
//! accepts every request, its probability stays in `[0, 1)`, and what it lets through an
//! overloaded backend stays near `k` times what the backend accepts.

use std::time::Duration;

use admit::client::Throttle;
use admit::clock::ManualClock;
use proptest::prelude::*;

/// A window, its buckets and `k` as a user might set them.
fn settings() -> impl Strategy<Value = (Duration, u32, f64)> {
    (
        prop_oneof![Just(1_000u64), 100u64..=120_000],
        1u32..=100,
        prop_oneof![Just(2.0), 1.0f64..4.0],
    )
        .prop_filter_map("buckets of at least 1 ms", |(ms, buckets, k)| {
            (ms / u64::from(buckets) >= 1).then(|| (Duration::from_millis(ms), buckets, k))
        })
}

fn throttle(
    clock: &ManualClock,
    (window, buckets, k): (Duration, u32, f64),
) -> Throttle<ManualClock> {
    Throttle::builder()
        .window(window, buckets)
        .k(k)
        .clock(clock.clone())
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn nothing_is_refused_while_every_request_is_accepted(
        settings in settings(),
        steps in prop::collection::vec((0u64..5_000, 0u32..200, 0u32..50), 1..40),
    ) {
        let clock = ManualClock::new();
        let throttle = throttle(&clock, settings);
        for (pause_ms, sent, in_flight) in steps {
            clock.advance(Duration::from_millis(pause_ms));
            // Some requests still in flight, their answers to come after later ones'.
            for _ in 0..in_flight {
                prop_assert!(throttle.try_send().is_ok());
            }
            for _ in 0..sent {
                prop_assert!(throttle.try_send().is_ok());
                throttle.accepted();
            }
            for _ in 0..in_flight {
                throttle.accepted();
            }
            prop_assert_eq!(throttle.snapshot().probability, 0.0);
        }
    }

    #[test]
    fn the_probability_stays_below_one(
        settings in settings(),
        steps in prop::collection::vec((0u64..5_000, 0u32..300, 0u32..300), 1..40),
    ) {
        let clock = ManualClock::new();
        let throttle = throttle(&clock, settings);
        for (pause_ms, accepted, refused) in steps {
            clock.advance(Duration::from_millis(pause_ms));
            for _ in 0..accepted {
                throttle.accepted();
            }
            for _ in 0..refused {
                if throttle.try_send().is_ok() {
                    throttle.refused();
                }
            }
            let snapshot = throttle.snapshot();
            prop_assert!((0.0..1.0).contains(&snapshot.probability), "{snapshot:?}");
            prop_assert!(snapshot.accepts <= snapshot.requests, "{snapshot:?}");
        }
    }

    #[test]
    fn an_overloaded_backend_is_sent_about_k_times_what_it_accepts(
        // Near 1 what the throttle sends grows by only a factor of k per window, too slowly
        // to settle within the test's 30 s (the guide says so).
        k in 1.5f64..4.0,
        capacity in 5u32..50,
        overload in 2u32..10,
    ) {
        let clock = ManualClock::new();
        let throttle = throttle(&clock, (Duration::from_secs(10), 10, k));
        // Each 100 ms the client tries `overload` times what the backend accepts, or k times
        // more if that is less: the backend accepts `capacity` of what it is sent.
        let tried = capacity * overload.max(k.ceil() as u32 + 1);
        let mut sent_settled = 0;
        for slice in 0..300 {
            let mut sent = 0;
            for _ in 0..tried {
                if throttle.try_send().is_ok() {
                    sent += 1;
                    if sent <= capacity {
                        throttle.accepted();
                    } else {
                        throttle.refused();
                    }
                }
            }
            if slice >= 100 {
                sent_settled += sent;
            }
            clock.advance(Duration::from_millis(100));
        }
        let per_slice = f64::from(sent_settled) / 200.0;
        let expected = k * f64::from(capacity);
        prop_assert!(
            (per_slice - expected).abs() <= 0.15 * expected + 2.0,
            "sent {per_slice} per slice, k × accepted = {expected}"
        );
    }
}
