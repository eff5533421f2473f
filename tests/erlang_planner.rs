//! The replica planner: immediate scale-up, held scale-down, no flapping in the band.

use std::time::Duration;

use admit::erlang::{ErlangError, MMc, PlannerConfig, ReplicaPlanner, Target};
use proptest::prelude::*;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn planner(config: PlannerConfig, replicas: u64) -> ReplicaPlanner {
    ReplicaPlanner::new(config, replicas).unwrap()
}

#[test]
fn a_single_low_sample_does_not_scale_down_before_the_hold_ends() {
    let config = PlannerConfig {
        scale_down_hold: secs(120),
        ..PlannerConfig::default()
    };
    let mut p = planner(config, 1);
    assert_eq!(p.observe(secs(0), 10, 10), 10, "scales up at once");
    // A long quiet period first: the hold is over the recommendations, not since the change.
    for t in (30..=600).step_by(30) {
        assert_eq!(p.observe(secs(t), 10, 10), 10);
    }
    assert_eq!(
        p.observe(secs(630), 2, 2),
        10,
        "one low sample after a quiet period"
    );
    assert_eq!(p.observe(secs(700), 2, 2), 10);
    assert_eq!(
        p.observe(secs(720), 2, 2),
        10,
        "600 s + 120 s hold: still held"
    );
    assert_eq!(
        p.observe(secs(710), 2, 2),
        10,
        "an earlier time counts as the latest"
    );
    assert_eq!(
        p.observe(secs(721), 2, 2),
        2,
        "the high sample has left the window"
    );
}

#[test]
fn a_new_planner_holds_its_starting_count() {
    let config = PlannerConfig {
        scale_down_hold: secs(60),
        ..PlannerConfig::default()
    };
    let mut p = planner(config, 20);
    assert_eq!(
        p.observe(secs(100), 3, 3),
        20,
        "no drop right after a (re)start"
    );
    assert_eq!(p.observe(secs(160), 3, 3), 20);
    assert_eq!(p.observe(secs(161), 3, 3), 3);
}

#[test]
fn scale_down_goes_only_to_the_highest_recent_recommendation() {
    let config = PlannerConfig {
        scale_down_hold: secs(60),
        ..PlannerConfig::default()
    };
    let mut p = planner(config, 20);
    assert_eq!(p.observe(secs(0), 5, 8), 20);
    assert_eq!(p.observe(secs(30), 5, 12), 20);
    assert_eq!(
        p.observe(secs(61), 3, 4),
        12,
        "12 is still within the last 60 s"
    );
    assert_eq!(p.observe(secs(91), 3, 4), 4);
}

#[test]
fn steps_are_bounded_both_ways() {
    let config = PlannerConfig {
        min_step_up: 3,
        max_step_up: 5,
        max_step_down: 2,
        max_replicas: 100,
        scale_down_hold: Duration::ZERO,
        ..PlannerConfig::default()
    };
    let mut p = planner(config, 10);
    assert_eq!(
        p.observe(secs(0), 11, 11),
        13,
        "at least min_step_up: headroom"
    );
    assert_eq!(
        p.observe(secs(1), 40, 40),
        18,
        "at most max_step_up per decision"
    );
    assert_eq!(p.observe(secs(2), 40, 40), 23);
    assert_eq!(
        p.observe(secs(3), 1, 1),
        21,
        "at most max_step_down per decision"
    );
    assert_eq!(p.observe(secs(4), 1, 1), 19);
}

#[test]
fn replicas_are_servers_over_capacity_clamped_to_the_range() {
    let config = PlannerConfig {
        per_replica: 8,
        min_replicas: 2,
        max_replicas: 10,
        scale_down_hold: Duration::ZERO,
        ..PlannerConfig::default()
    };
    let mut p = planner(config, 2);
    assert_eq!(p.observe(secs(0), 17, 17), 3); // ⌈17 / 8⌉
    assert_eq!(p.observe(secs(1), 1000, 1000), 10);
    assert_eq!(p.observe(secs(2), 0, 0), 2);
    // Started above the range: brought back into it at once.
    let mut high = planner(config, 50);
    assert_eq!(high.observe(secs(0), 16, 16), 10);
}

/// The loads the band test wavers between: `low`, and the smallest `high` above it that needs
/// one more server.
fn wavering_loads(target: Target) -> (MMc, MMc) {
    let low = MMc::new(1000.0, 10.0).unwrap(); // 100 erlangs
    let needed = low.min_servers(target).unwrap();
    let high = (1..)
        .map(|step| MMc::new(1000.0 + f64::from(step) * 0.5, 10.0).unwrap())
        .find(|queue| queue.min_servers(target).unwrap() > needed)
        .unwrap();
    (low, high)
}

#[test]
fn a_load_wavering_inside_the_tolerance_band_never_changes_the_output() {
    let target = Target::ServiceLevel {
        within: 0.01,
        at_least: 0.9,
    };
    let (low, high) = wavering_loads(target);
    let config = PlannerConfig {
        tolerance: 0.5,
        scale_down_hold: Duration::ZERO,
        ..PlannerConfig::default()
    };
    let mut p = planner(config, 1);
    let settled = p.plan(secs(0), &high, target).unwrap();
    assert_eq!(settled, high.min_servers(target).unwrap());
    // The premise: the low load needs one server fewer, but not fewer once the band applies.
    assert_eq!(low.min_servers(target).unwrap(), settled - 1);
    for step in 1..=100u64 {
        let queue = if step % 2 == 0 { &high } else { &low };
        assert_eq!(
            p.plan(secs(step), queue, target).unwrap(),
            settled,
            "step {step}"
        );
    }
    // Without a band (and without a hold) the same waver flaps.
    let mut bare = planner(
        PlannerConfig {
            tolerance: 0.0,
            ..config
        },
        1,
    );
    let outputs: Vec<u64> = (0..10u64)
        .map(|step| {
            let queue = if step % 2 == 0 { &high } else { &low };
            bare.plan(secs(step), queue, target).unwrap()
        })
        .collect();
    assert!(
        outputs.windows(2).all(|pair| pair[0] != pair[1]),
        "{outputs:?}"
    );
}

#[test]
fn the_headroom_of_a_minimum_step_is_held() {
    let config = PlannerConfig {
        min_step_up: 5,
        ..PlannerConfig::default()
    };
    let mut p = planner(config, 10);
    assert_eq!(p.observe(secs(0), 11, 11), 15);
    assert_eq!(
        p.observe(secs(15), 11, 11),
        15,
        "not taken back at the next decision"
    );
    assert_eq!(
        p.observe(secs(301), 11, 11),
        11,
        "released once the hold has passed"
    );
}

#[test]
fn a_hold_longer_than_time_itself_does_not_overflow() {
    let config = PlannerConfig {
        scale_down_hold: Duration::MAX,
        ..PlannerConfig::default()
    };
    let mut p = planner(config, 10);
    assert_eq!(p.observe(Duration::MAX, 2, 2), 10);
    assert_eq!(p.observe(Duration::from_secs(5), 2, 2), 10);
}

#[test]
fn plan_checks_its_targets() {
    let mut p = planner(PlannerConfig::default(), 1);
    let queue = MMc::new(10.0, 1.0).unwrap();
    // A 0.99 target with the default 10 % band asks for 0.99909…: still below 1.
    let strict = Target::ServiceLevel {
        within: 0.1,
        at_least: 0.99,
    };
    assert!(p.plan(secs(0), &queue, strict).unwrap() >= 11);
    for at_least in [1.0, 2.0] {
        assert_eq!(
            p.plan(
                secs(0),
                &queue,
                Target::ServiceLevel {
                    within: 0.1,
                    at_least
                }
            ),
            Err(ErlangError::TargetOutOfRange { target: at_least })
        );
    }
    let mean_wait = Target::MeanWait { at_most: 0.05 };
    assert!(p.plan(secs(0), &queue, mean_wait).unwrap() >= 11);
}

#[test]
fn invalid_configurations_are_refused() {
    let defaults = PlannerConfig::default();
    for (field, config) in [
        (
            "per_replica",
            PlannerConfig {
                per_replica: 0,
                ..defaults
            },
        ),
        (
            "max_replicas",
            PlannerConfig {
                min_replicas: 5,
                max_replicas: 4,
                ..defaults
            },
        ),
        (
            "max_replicas",
            PlannerConfig {
                max_replicas: 0,
                min_replicas: 0,
                ..defaults
            },
        ),
        (
            "min_step_up",
            PlannerConfig {
                min_step_up: 0,
                ..defaults
            },
        ),
        (
            "max_step_up",
            PlannerConfig {
                min_step_up: 3,
                max_step_up: 2,
                ..defaults
            },
        ),
        (
            "max_step_down",
            PlannerConfig {
                max_step_down: 0,
                ..defaults
            },
        ),
        (
            "tolerance",
            PlannerConfig {
                tolerance: -0.1,
                ..defaults
            },
        ),
        (
            "tolerance",
            PlannerConfig {
                tolerance: f64::NAN,
                ..defaults
            },
        ),
    ] {
        assert!(
            matches!(ReplicaPlanner::new(config, 1), Err(ErlangError::OutOfRange { field: f, .. }) if f == field),
            "{field}"
        );
    }
}

proptest! {
    /// Whatever the sequence of recommendations: the output stays within [min, max], it scales
    /// down only to what the hold window allows, and it scales up at once.
    #[test]
    fn decisions_respect_range_hold_and_urgency(
        samples in proptest::collection::vec((0u64..30, 0u64..400, 0u64..50), 1..200),
        hold in 0u64..120,
    ) {
        let config = PlannerConfig {
            per_replica: 4,
            min_replicas: 2,
            max_replicas: 60,
            scale_down_hold: secs(hold),
            ..PlannerConfig::default()
        };
        let mut p = planner(config, 2);
        let mut now = 0;
        let mut history: Vec<(u64, u64)> = Vec::new(); // (time, down replicas)
        for (gap, up, extra) in samples {
            now += gap;
            let before = p.replicas();
            let after = p.observe(secs(now), up, up + extra);
            let to_replicas = |servers: u64| servers.div_ceil(4).clamp(2, 60);
            history.push((now, to_replicas(up + extra)));
            prop_assert!((2..=60).contains(&after));
            if to_replicas(up) > before {
                prop_assert!(after >= to_replicas(up), "scale-up waited");
            }
            if after < before {
                let hold_max = history
                    .iter()
                    .filter(|&&(at, _)| at + hold >= now)
                    .map(|&(_, down)| down)
                    .max()
                    .unwrap();
                prop_assert_eq!(after, hold_max, "scaled down past the hold");
            }
        }
    }
}

/// The planner's hold, written plainly: the highest `down` (in replicas) of the last hold
/// period, each scale-up counting as a recommendation too, with nothing forgotten.
struct Unbounded {
    config: PlannerConfig,
    replicas: u64,
    seen: Vec<(Duration, u64)>,
    now: Duration,
}

impl Unbounded {
    fn observe(&mut self, now: Duration, up: u64, down: u64) -> u64 {
        let config = &self.config;
        let replicas_for = |servers: u64| {
            servers
                .div_ceil(config.per_replica)
                .clamp(config.min_replicas, config.max_replicas)
        };
        if self.seen.is_empty() {
            self.seen.push((now, self.replicas));
        }
        self.now = self.now.max(now);
        let (up, down) = (replicas_for(up), replicas_for(down.max(up)));
        self.seen.push((self.now, down));
        let now = self.now;
        let hold = self
            .seen
            .iter()
            .filter(|&&(at, _)| now.saturating_sub(at) <= config.scale_down_hold)
            .map(|&(_, held)| held)
            .max()
            .unwrap_or(down);
        let current = self.replicas;
        self.replicas = if up > current {
            let step = (up - current).clamp(config.min_step_up, config.max_step_up);
            let raised = current.saturating_add(step).min(config.max_replicas);
            self.seen.push((self.now, raised));
            raised
        } else if current > config.max_replicas {
            config.max_replicas
        } else if hold < current {
            hold.max(current.saturating_sub(config.max_step_down))
        } else {
            current
        };
        self.replicas
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// With a bounded memory, the planner is the plain hold as long as it keeps every
    /// recommendation that can still be the highest, and holds at least as high after.
    #[test]
    fn the_bounded_hold_never_scales_down_earlier_than_the_plain_one(
        start in 1u64..2_000,
        steps in proptest::collection::vec((0u64..3_000, 0u64..5, 0u64..40), 1..1_500),
        hold in 0u64..200,
        max_step_down in 1u64..50,
    ) {
        let config = PlannerConfig {
            scale_down_hold: secs(hold),
            max_step_down,
            max_replicas: 5_000,
            ..PlannerConfig::default()
        };
        let mut bounded = planner(config, start);
        let mut plain = Unbounded { config, replicas: start, seen: Vec::new(), now: Duration::ZERO };
        let mut t = 0;
        for (i, (up, extra, dt)) in steps.into_iter().enumerate() {
            // Every other case falls by one each decision, at most a second apart: a run
            // within the hold longer than the bound.
            let falling = start % 2 == 0;
            t += if falling { dt % 2 } else { dt };
            let up = if falling { 3_000u64.saturating_sub(i as u64) } else { up };
            let got = bounded.observe(secs(t), up, up + extra);
            let want = plain.observe(secs(t), up, up + extra);
            prop_assert!(got >= want, "at {t} s: {got} < {want}");
        }
    }
}
