//! The replica calculator: what one metric asks for, before the behaviour's windows and rates
//! (Kubernetes' `replica_calculator.go`).

/// How far the usage ratio may stray from 1 before the replicas change: within
/// `[1 − down, 1 + up]` (inclusive) the current count stands.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Above 1: the scale-up side.
    pub up: f64,
    /// Below 1: the scale-down side.
    pub down: f64,
}

impl Tolerance {
    /// Kubernetes' default, 10 % each way.
    pub const DEFAULT: Tolerance = Tolerance { up: 0.1, down: 0.1 };

    fn within(&self, ratio: f64) -> bool {
        (1.0 - self.down..=1.0 + self.up).contains(&ratio)
    }
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance::DEFAULT
    }
}

/// An external metric with an `AverageValue` target (KEDA's default): the replicas for a
/// metric whose total is `usage_milli` against `target_milli` per replica, both in milli-units
/// as the HPA reads quantities, with `current` replicas.
///
/// `usage / (target × current)` within the tolerance keeps `current`; otherwise
/// `⌈usage / target⌉`.
///
/// ```
/// use admit_cluster::hpa::{Tolerance, average_value_replicas};
///
/// // 55 against a target of 1 with 50 replicas: a ratio of exactly 1.1 stands.
/// assert_eq!(average_value_replicas(50, 55_000, 1_000, Tolerance::DEFAULT), 50);
/// assert_eq!(average_value_replicas(50, 56_000, 1_000, Tolerance::DEFAULT), 56);
/// ```
pub fn average_value_replicas(
    current: u32,
    usage_milli: i64,
    target_milli: i64,
    tolerance: Tolerance,
) -> u32 {
    if target_milli <= 0 {
        return current;
    }
    let ratio = usage_milli as f64 / (target_milli as f64 * f64::from(current));
    if current > 0 && tolerance.within(ratio) {
        return current;
    }
    ceil_u32(usage_milli as f64 / target_milli as f64)
}

/// One pod as the resource metric sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodCpu {
    /// Whether the pod is ready; an unready one is left out of the average.
    pub ready: bool,
    /// Its CPU usage in millicores, if metrics-server has a sample.
    pub usage_milli: Option<i64>,
    /// Its CPU request in millicores.
    pub request_milli: i64,
}

/// CPU utilisation against `target_percent` of the request (`Resource` metric, `Utilization`
/// target), with `current` replicas and these `pods`: Kubernetes' rules for unready pods
/// (counted at 0 % on a scale-up, left out otherwise) and pods without a sample (0 % on a
/// scale-up, 100 % on a scale-down). `None` when no ready pod has a sample.
///
/// ```
/// use admit_cluster::hpa::{PodCpu, Tolerance, utilization_replicas};
///
/// let busy = PodCpu { ready: true, usage_milli: Some(900), request_milli: 1000 };
/// // Two pods at 90 % against a target of 70 %: ⌈2 × 90 / 70⌉ = 3.
/// assert_eq!(utilization_replicas(2, &[busy, busy], 70, Tolerance::DEFAULT), Some(3));
/// ```
pub fn utilization_replicas(
    current: u32,
    pods: &[PodCpu],
    target_percent: u32,
    tolerance: Tolerance,
) -> Option<u32> {
    let target = i64::from(target_percent.max(1));
    let measured: Vec<(i64, i64)> = pods
        .iter()
        .filter(|pod| pod.ready)
        .filter_map(|pod| Some((pod.usage_milli?, pod.request_milli)))
        .collect();
    let ready = measured.len();
    if ready == 0 {
        return None;
    }
    let ratio = usage_ratio(&measured, target)?;
    let unready = pods.iter().filter(|pod| !pod.ready).count();
    let missing: Vec<i64> = pods
        .iter()
        .filter(|pod| pod.ready && pod.usage_milli.is_none())
        .map(|pod| pod.request_milli)
        .collect();
    let up_with_unready = unready > 0 && ratio > 1.0;
    if !up_with_unready && missing.is_empty() {
        if tolerance.within(ratio) {
            return Some(current);
        }
        return Some(ceil_u32(ratio * ready as f64));
    }
    // Fill in the pods without a usable sample, then decide again.
    let mut filled = measured;
    if ratio < 1.0 {
        let fallback = target.max(100);
        filled.extend(
            missing
                .iter()
                .map(|&request| (request * fallback / 100, request)),
        );
    } else if ratio > 1.0 {
        filled.extend(missing.iter().map(|&request| (0, request)));
    }
    if up_with_unready {
        filled.extend(
            pods.iter()
                .filter(|pod| !pod.ready)
                .map(|pod| (0, pod.request_milli)),
        );
    }
    let new_ratio = usage_ratio(&filled, target)?;
    let flipped = (ratio < 1.0 && new_ratio > 1.0) || (ratio > 1.0 && new_ratio < 1.0);
    if tolerance.within(new_ratio) || flipped {
        return Some(current);
    }
    let replicas = ceil_u32(new_ratio * filled.len() as f64);
    if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) {
        return Some(current);
    }
    Some(replicas)
}

/// The utilisation, in whole percent as metrics-server reports it, over `target` percent.
fn usage_ratio(pods: &[(i64, i64)], target: i64) -> Option<f64> {
    let (usage, requests) = pods.iter().fold((0i64, 0i64), |(u, r), &(usage, request)| {
        (u + usage, r + request)
    });
    if requests <= 0 {
        return None;
    }
    let percent = usage * 100 / requests;
    Some(percent as f64 / target as f64)
}

/// `⌈x⌉` as a replica count, saturating at `u32::MAX` and at 0 below.
fn ceil_u32(x: f64) -> u32 {
    let ceiled = x.ceil();
    if ceiled.is_nan() || ceiled <= 0.0 {
        0
    } else if ceiled >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        ceiled as u32
    }
}
