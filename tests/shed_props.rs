//! Properties of the shedder under random traffic on a `ManualClock` and a `ManualCpu`.

use std::time::Duration;

use admit::clock::ManualClock;
use admit::shed::Shedder;
use admit::signal::cpu::ManualCpu;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Step {
    /// Move time on by this many µs.
    Advance(u64),
    /// Set the CPU load.
    Cpu(u32),
    /// Try to admit a request and hold it.
    Allow,
    /// Complete a held request: pass, fail or drop (cancel).
    Complete { which: usize, how: u8 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => prop_oneof![0u64..2_000, 2_000u64..150_000, 1_000_000u64..6_000_000].prop_map(Step::Advance),
        1 => prop_oneof![0u32..900, 900u32..=1000].prop_map(Step::Cpu),
        6 => Just(Step::Allow),
        5 => (any::<usize>(), 0u8..3).prop_map(|(which, how)| Step::Complete { which, how }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A snapshot taken just before `allow` predicts its decision exactly: the cached limit the
    /// decision uses equals the snapshot's fresh scan of the window, and the hot state is the
    /// same. Totals always balance.
    #[test]
    fn snapshots_predict_decisions(
        steps in proptest::collection::vec(step(), 1..600),
        threshold in 500u32..=999,
        buckets in 2u32..=60,
    ) {
        let clock = ManualClock::new();
        let cpu = ManualCpu::new(0);
        let shedder = Shedder::builder()
            .window(Duration::from_millis(u64::from(buckets) * 100))
            .buckets(buckets)
            .cpu_threshold(threshold)
            .clock(clock.clone())
            .cpu(cpu.clone())
            .build()
            .unwrap();
        let mut held = Vec::new();
        let (mut admitted, mut refused) = (0u64, 0u64);
        for step in steps {
            match step {
                Step::Advance(micros) => clock.advance(Duration::from_micros(micros)),
                Step::Cpu(load) => cpu.set(load),
                Step::Allow => {
                    let s = shedder.snapshot();
                    let limit = s.max_flight * s.overload_factor;
                    let predicted = s.hot && s.avg_flying > limit && s.flying as f64 > limit;
                    match shedder.allow() {
                        Ok(permit) => {
                            prop_assert!(!predicted, "admitted, predicted a drop: {:?}", s);
                            held.push(permit);
                            admitted += 1;
                        }
                        Err(_) => {
                            prop_assert!(predicted, "dropped, predicted admission: {:?}", s);
                            refused += 1;
                        }
                    }
                }
                Step::Complete { which, how } if !held.is_empty() => {
                    let permit = held.swap_remove(which % held.len());
                    match how {
                        0 => permit.pass(),
                        1 => permit.fail(),
                        _ => drop(permit),
                    }
                }
                Step::Complete { .. } => {}
            }
            let s = shedder.snapshot();
            prop_assert_eq!(s.flying, held.len() as u64);
            prop_assert_eq!(s.passed + s.failed + s.flying, admitted);
            prop_assert_eq!(s.dropped, refused);
            prop_assert!(s.avg_flying >= 0.0 && s.avg_flying.is_finite());
            prop_assert!((0.1..=1.0).contains(&s.overload_factor));
            prop_assert!(s.max_flight >= 1.0 && s.min_rt_ms >= 1 && s.min_rt_ms <= 1000);
        }
    }
}
