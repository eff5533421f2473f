//! The HPA's arithmetic against the reference table (`scaler.md` §3) and Kubernetes' rules.

use std::time::Duration;

use super::*;

const UP_EXACT: Tolerance = Tolerance { up: 0.0, down: 0.1 };

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn average_value_against_the_reference_table() {
    // (metric, target, current, desired with tolerance 0.1, desired with scaleUp.tolerance 0);
    // values in milli-units, as KEDA publishes them (2.0006 is published as 2.001).
    let rows: [(i64, i64, u32, u32, u32); 12] = [
        (54_000, 1_000, 50, 50, 54),
        (55_000, 1_000, 50, 50, 55),
        (56_000, 1_000, 50, 56, 56),
        (45_000, 1_000, 50, 50, 50),
        (44_000, 1_000, 50, 44, 44),
        (100_000, 8_000, 10, 13, 13),
        (100_000, 8_000, 12, 12, 13),
        (100_000, 8_000, 13, 13, 13),
        (1_050, 1_000, 1, 1, 2),
        (2_001, 1_000, 2, 2, 3),
        (100_086_000, 1_000, 91_000, 91_000, 100_086),
        // No usage at all: zero replicas asked for (the bounds decide).
        (0, 1_000, 3, 0, 0),
    ];
    for (usage, target, current, default, exact) in rows {
        assert_eq!(
            average_value_replicas(current, usage, target, Tolerance::DEFAULT),
            default,
            "{usage}/{target} at {current}"
        );
        assert_eq!(
            average_value_replicas(current, usage, target, UP_EXACT),
            exact,
            "{usage}/{target} at {current}, scaleUp.tolerance 0"
        );
    }
}

fn pod(ready: bool, usage: Option<i64>) -> PodCpu {
    PodCpu {
        ready,
        usage_milli: usage,
        request_milli: 1000,
    }
}

#[test]
fn utilization_of_ready_pods() {
    let t = Tolerance::DEFAULT;
    // 2 × 90 % against 70 %: 128 % of the target (whole percent: 90 / 70).
    assert_eq!(
        utilization_replicas(2, &[pod(true, Some(900)); 2], 70, t),
        Some(3)
    );
    // 75 % against 70 %: within 10 %.
    assert_eq!(
        utilization_replicas(2, &[pod(true, Some(750)); 2], 70, t),
        Some(2)
    );
    // 10 % against 70 %: ⌈4 × 10 / 70⌉ = 1.
    assert_eq!(
        utilization_replicas(4, &[pod(true, Some(100)); 4], 70, t),
        Some(1)
    );
    // metrics-server reports whole percent: 699 m of 1000 m is 69 %, not 69.9 %.
    assert_eq!(
        utilization_replicas(1, &[pod(true, Some(1_449))], 70, UP_EXACT),
        Some(3)
    );
    assert_eq!(utilization_replicas(2, &[pod(true, None); 2], 70, t), None);
    assert_eq!(
        utilization_replicas(2, &[pod(false, Some(900)); 2], 70, t),
        None
    );
}

#[test]
fn unready_pods_count_as_idle_on_a_scale_up() {
    let t = Tolerance::DEFAULT;
    // Two ready pods at 100 %, one unready: on their own ⌈2 × 100 / 70⌉ = 3 (+1), but the
    // unready pod counts as 0 %: 200 / 3 = 66 % → within tolerance of 70 % → keep 3.
    let pods = [
        pod(true, Some(1000)),
        pod(true, Some(1000)),
        pod(false, None),
    ];
    assert_eq!(utilization_replicas(3, &pods, 70, t), Some(3));
    // Two ready pods at 140 %: 280 / 3 = 93 % → ⌈3 × 93 / 70⌉ = 4.
    let pods = [
        pod(true, Some(1400)),
        pod(true, Some(1400)),
        pod(false, None),
    ];
    assert_eq!(utilization_replicas(3, &pods, 70, t), Some(4));
    // Scaling down, unready pods are left out: 2 × 10 % → 1.
    let pods = [pod(true, Some(100)), pod(true, Some(100)), pod(false, None)];
    assert_eq!(utilization_replicas(3, &pods, 70, t), Some(1));
}

#[test]
fn pods_without_a_sample_damp_the_change() {
    let t = Tolerance::DEFAULT;
    // Scaling up, a missing pod counts as 0 %: 140 / 2 = 70 % → keep.
    let pods = [pod(true, Some(1400)), pod(true, None)];
    assert_eq!(utilization_replicas(2, &pods, 70, t), Some(2));
    // Scaling down, it counts as 100 % (the target, if higher): 110 / 2 = 55 % → ⌈2 × 55 / 70⌉
    // = 2: no change.
    let pods = [pod(true, Some(100)), pod(true, None)];
    assert_eq!(utilization_replicas(2, &pods, 70, t), Some(2));
    // Three at 10 % and one missing: 130 / 4 = 32 % → ⌈4 × 32 / 70⌉ = 2.
    let pods = [
        pod(true, Some(100)),
        pod(true, Some(100)),
        pod(true, Some(100)),
        pod(true, None),
    ];
    assert_eq!(utilization_replicas(4, &pods, 70, t), Some(2));
}

#[test]
fn scale_up_is_bounded_by_four_pods_or_a_doubling_per_period() {
    let mut hpa = Hpa::new(HpaSpec::default());
    let mut replicas = 1;
    let mut seen = Vec::new();
    for period in 0..5 {
        replicas = hpa.sync(secs(15 * period), replicas, 100);
        seen.push(replicas);
    }
    assert_eq!(seen, [5, 10, 20, 40, 80]);
    // Within one period, two syncs share its allowance.
    let mut hpa = Hpa::new(HpaSpec::default());
    assert_eq!(hpa.sync(secs(0), 10, 100), 20);
    assert_eq!(hpa.sync(secs(5), 20, 100), 20);
    assert_eq!(hpa.sync(secs(15), 20, 100), 40);
    // Never past max.
    let mut hpa = Hpa::new(HpaSpec {
        max_replicas: 7,
        ..HpaSpec::default()
    });
    assert_eq!(hpa.sync(secs(0), 1, 100), 5);
    assert_eq!(hpa.sync(secs(15), 5, 100), 7);
}

#[test]
fn scale_down_waits_for_the_window() {
    let mut hpa = Hpa::new(HpaSpec::default());
    assert_eq!(hpa.sync(secs(0), 10, 10), 10);
    // The load falls: the highest recommendation of the last 300 s holds.
    assert_eq!(hpa.sync(secs(15), 10, 3), 10);
    assert_eq!(hpa.sync(secs(299), 10, 3), 10);
    // Only recommendations strictly younger than the window count: the 10 at t = 0 is out
    // at 300 s.
    assert_eq!(hpa.sync(secs(300), 10, 3), 3);
    // And never below min.
    let mut hpa = Hpa::new(HpaSpec {
        min_replicas: 2,
        ..HpaSpec::default()
    });
    assert_eq!(hpa.sync(secs(0), 4, 0), 4);
    assert_eq!(hpa.sync(secs(400), 4, 0), 2);
}

#[test]
fn a_pods_policy_steps_down_per_period() {
    let mut spec = HpaSpec::default();
    spec.behavior.scale_down = ScalingRules {
        stabilization_window: Duration::ZERO,
        select: Select::Max,
        policies: vec![ScalingPolicy::Pods {
            value: 2,
            period: secs(60),
        }],
        tolerance: 0.1,
    };
    let mut hpa = Hpa::new(spec);
    assert_eq!(hpa.sync(secs(0), 10, 1), 8);
    assert_eq!(hpa.sync(secs(30), 8, 1), 8, "the period's 2 are spent");
    assert_eq!(hpa.sync(secs(61), 8, 1), 6);
}

#[test]
fn select_min_and_disabled() {
    let mut spec = HpaSpec::default();
    spec.behavior.scale_up.select = Select::Min;
    let mut hpa = Hpa::new(spec.clone());
    // min(1 + 4, 2 × 1) = 2.
    assert_eq!(hpa.sync(secs(0), 1, 100), 2);
    spec.behavior.scale_up.select = Select::Disabled;
    let mut hpa = Hpa::new(spec);
    assert_eq!(hpa.sync(secs(0), 3, 100), 3);
}

#[test]
fn outside_the_bounds_the_count_is_brought_within() {
    let mut hpa = Hpa::new(HpaSpec {
        min_replicas: 2,
        max_replicas: 6,
        ..HpaSpec::default()
    });
    assert_eq!(hpa.sync(secs(0), 9, 9), 6);
    assert_eq!(hpa.sync(secs(1), 1, 1), 2);
}

#[test]
fn a_compressed_behaviour_runs_the_same_sequence_faster() {
    let spec = HpaSpec {
        behavior: Behavior::default().compressed(10.0),
        ..HpaSpec::default()
    };
    let mut hpa = Hpa::new(spec);
    let mut replicas = 1;
    for (at, expected) in [(0, 5), (1_500, 10), (3_000, 20)] {
        replicas = hpa.sync(Duration::from_millis(at), replicas, 100);
        assert_eq!(replicas, expected);
    }
    assert_eq!(hpa.sync(Duration::from_millis(3_100), 20, 1), 20);
    assert_eq!(hpa.sync(Duration::from_millis(33_001), 20, 1), 1);
}
