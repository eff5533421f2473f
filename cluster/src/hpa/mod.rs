//! The Horizontal Pod Autoscaler's arithmetic, as Kubernetes' controller computes it
//! (`pkg/controller/podautoscaler`): a metric's proposal ([`average_value_replicas`],
//! [`utilization_replicas`]), then the behaviour ([`Hpa::sync`]): the stabilisation windows
//! (the lowest recent recommendation bounds a scale-up, the highest a scale-down) and the
//! policies that bound how many replicas one period may add or remove, within the replica
//! bounds.
//!
//! Time is the controller's own (`Duration` since any origin, compressed or not): only
//! differences matter.
//!
//! ```
//! use std::time::Duration;
//! use admit_cluster::hpa::{Hpa, HpaSpec};
//!
//! let mut hpa = Hpa::new(HpaSpec { min_replicas: 1, max_replicas: 100, ..HpaSpec::default() });
//! // From 1 replica, one period adds at most max(4 pods, 100 %): 5.
//! assert_eq!(hpa.sync(Duration::ZERO, 1, 40), 5);
//! // 15 s later another period: at most 10.
//! assert_eq!(hpa.sync(Duration::from_secs(15), 5, 40), 10);
//! // Down only to the highest recommendation of the last 300 s.
//! assert_eq!(hpa.sync(Duration::from_secs(30), 10, 2), 10);
//! ```

mod replicas;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub use self::replicas::{PodCpu, Tolerance, average_value_replicas, utilization_replicas};

/// Which of several policies applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Select {
    /// The one allowing the largest change (Kubernetes' default).
    Max,
    /// The one allowing the smallest change.
    Min,
    /// No change in this direction.
    Disabled,
}

/// A bound on how much one period may change the replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalingPolicy {
    /// At most this many replicas per period.
    Pods {
        /// Replicas.
        value: u32,
        /// The period.
        period: Duration,
    },
    /// At most this percentage of the replicas at the period's start.
    Percent {
        /// Percent.
        value: u32,
        /// The period.
        period: Duration,
    },
}

impl ScalingPolicy {
    fn period(&self) -> Duration {
        match *self {
            ScalingPolicy::Pods { period, .. } | ScalingPolicy::Percent { period, .. } => period,
        }
    }
}

/// One direction's rules.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalingRules {
    /// Recommendations this recent bound the change (the lowest for a scale-up, the highest
    /// for a scale-down).
    pub stabilization_window: Duration,
    /// How the policies combine.
    pub select: Select,
    /// The rate limits.
    pub policies: Vec<ScalingPolicy>,
    /// The tolerance on this side of a usage ratio of 1.
    pub tolerance: f64,
}

/// The HPA's `behavior`.
#[derive(Clone, Debug, PartialEq)]
pub struct Behavior {
    /// Scaling up.
    pub scale_up: ScalingRules,
    /// Scaling down.
    pub scale_down: ScalingRules,
}

impl Behavior {
    /// The tolerances the replica calculator applies.
    pub fn tolerance(&self) -> Tolerance {
        Tolerance {
            up: self.scale_up.tolerance,
            down: self.scale_down.tolerance,
        }
    }
}

impl Default for Behavior {
    /// Kubernetes' defaults: up at once by max(4 pods, 100 %) per 15 s; down only to the
    /// highest recommendation of 300 s, by up to 100 % per 15 s; a tolerance of 10 % each way.
    fn default() -> Self {
        let period = Duration::from_secs(15);
        Behavior {
            scale_up: ScalingRules {
                stabilization_window: Duration::ZERO,
                select: Select::Max,
                policies: vec![
                    ScalingPolicy::Pods { value: 4, period },
                    ScalingPolicy::Percent { value: 100, period },
                ],
                tolerance: 0.1,
            },
            scale_down: ScalingRules {
                stabilization_window: Duration::from_secs(300),
                select: Select::Max,
                policies: vec![ScalingPolicy::Percent { value: 100, period }],
                tolerance: 0.1,
            },
        }
    }
}

impl Behavior {
    /// Every period and window scaled by `1 / factor`: the same controller, `factor` times
    /// faster (a time-compressed run).
    pub fn compressed(&self, factor: f64) -> Behavior {
        let scale = |duration: Duration| duration.div_f64(factor);
        let rules = |rules: &ScalingRules| ScalingRules {
            stabilization_window: scale(rules.stabilization_window),
            policies: rules
                .policies
                .iter()
                .map(|policy| match *policy {
                    ScalingPolicy::Pods { value, period } => ScalingPolicy::Pods {
                        value,
                        period: scale(period),
                    },
                    ScalingPolicy::Percent { value, period } => ScalingPolicy::Percent {
                        value,
                        period: scale(period),
                    },
                })
                .collect(),
            ..rules.clone()
        };
        Behavior {
            scale_up: rules(&self.scale_up),
            scale_down: rules(&self.scale_down),
        }
    }
}

/// An HPA: its replica bounds and behaviour.
#[derive(Clone, Debug, PartialEq)]
pub struct HpaSpec {
    /// The fewest replicas.
    pub min_replicas: u32,
    /// The most replicas.
    pub max_replicas: u32,
    /// How fast it scales.
    pub behavior: Behavior,
}

impl Default for HpaSpec {
    /// 1 to 100 replicas (KEDA's default `maxReplicaCount`), the default behaviour.
    fn default() -> Self {
        HpaSpec {
            min_replicas: 1,
            max_replicas: 100,
            behavior: Behavior::default(),
        }
    }
}

/// One HPA's state between syncs: its recent recommendations and scale events.
#[derive(Clone, Debug)]
pub struct Hpa {
    spec: HpaSpec,
    /// Unstabilised recommendations, oldest first; `None` before the first sync.
    recommendations: Option<Vec<(Duration, u32)>>,
    /// Replicas added and removed, with when.
    ups: Vec<(Duration, u32)>,
    downs: Vec<(Duration, u32)>,
}

impl Hpa {
    /// An HPA that has not synced yet.
    pub fn new(spec: HpaSpec) -> Self {
        Hpa {
            spec,
            recommendations: None,
            ups: Vec::new(),
            downs: Vec::new(),
        }
    }

    /// The spec.
    pub fn spec(&self) -> &HpaSpec {
        &self.spec
    }

    /// One sync at `now` with `current` replicas and the metrics' proposal (the largest of
    /// their replica counts): the replicas to set. Outside the bounds, `current` is brought
    /// within them first, as the controller does.
    pub fn sync(&mut self, now: Duration, current: u32, proposal: u32) -> u32 {
        let (min, max) = (self.spec.min_replicas, self.spec.max_replicas);
        let desired = if current > max {
            max
        } else if current < min {
            min
        } else {
            let stabilized = self.stabilize(now, current, proposal);
            self.limit_rate(now, current, stabilized)
        };
        self.record_event(now, current, desired);
        desired
    }

    /// Bounds `proposal` by the recommendations of the windows, and records it. The first
    /// sync starts the windows with the current count, so a new HPA does not scale down at
    /// once.
    fn stabilize(&mut self, now: Duration, current: u32, proposal: u32) -> u32 {
        let behavior = &self.spec.behavior;
        let recommendations = self
            .recommendations
            .get_or_insert_with(|| vec![(now, current)]);
        let up_cutoff = now.checked_sub(behavior.scale_up.stabilization_window);
        let down_cutoff = now.checked_sub(behavior.scale_down.stabilization_window);
        // Only recommendations strictly after a cutoff count (a window of 0 holds none).
        let after = |at: Duration, cutoff: Option<Duration>| cutoff.is_none_or(|cut| at > cut);
        let mut up = proposal;
        let mut down = proposal;
        for &(at, recommendation) in recommendations.iter() {
            if after(at, up_cutoff) {
                up = up.min(recommendation);
            }
            if after(at, down_cutoff) {
                down = down.max(recommendation);
            }
        }
        recommendations.retain(|&(at, _)| after(at, up_cutoff) || after(at, down_cutoff));
        recommendations.push((now, proposal));
        current.max(up).min(down)
    }

    /// Bounds a change from `current` to `desired` by the policies and the replica bounds.
    fn limit_rate(&self, now: Duration, current: u32, desired: u32) -> u32 {
        let (min, max) = (self.spec.min_replicas, self.spec.max_replicas);
        let behavior = &self.spec.behavior;
        if desired > current {
            let limit = self.up_limit(now, current, &behavior.scale_up).max(current);
            desired.min(max.min(limit))
        } else if desired < current {
            let limit = self
                .down_limit(now, current, &behavior.scale_down)
                .min(current);
            desired.max(min.max(limit))
        } else {
            desired
        }
    }

    /// The replicas at the start of `policy`'s period: `current` less what was added and
    /// plus what was removed within it.
    fn period_start(&self, now: Duration, current: u32, policy: &ScalingPolicy) -> i64 {
        let cutoff = now.checked_sub(policy.period());
        let within = |events: &[(Duration, u32)]| -> i64 {
            events
                .iter()
                .filter(|&&(at, _)| cutoff.is_none_or(|cut| at > cut))
                .map(|&(_, change)| i64::from(change))
                .sum()
        };
        i64::from(current) - within(&self.ups) + within(&self.downs)
    }

    fn up_limit(&self, now: Duration, current: u32, rules: &ScalingRules) -> u32 {
        let proposals = rules.policies.iter().map(|policy| {
            let start = self.period_start(now, current, policy);
            match *policy {
                ScalingPolicy::Pods { value, .. } => start + i64::from(value),
                ScalingPolicy::Percent { value, .. } => {
                    (start as f64 * (1.0 + f64::from(value) / 100.0)).ceil() as i64
                }
            }
        });
        let limit = match rules.select {
            Select::Disabled => return current,
            Select::Max => proposals.max(),
            Select::Min => proposals.min(),
        };
        clamp_u32(limit.unwrap_or(i64::from(current)))
    }

    fn down_limit(&self, now: Duration, current: u32, rules: &ScalingRules) -> u32 {
        let proposals = rules.policies.iter().map(|policy| {
            let start = self.period_start(now, current, policy);
            match *policy {
                ScalingPolicy::Pods { value, .. } => start - i64::from(value),
                ScalingPolicy::Percent { value, .. } => {
                    (start as f64 * (1.0 - f64::from(value) / 100.0)) as i64
                }
            }
        });
        // The largest change down is the smallest count.
        let limit = match rules.select {
            Select::Disabled => return current,
            Select::Max => proposals.min(),
            Select::Min => proposals.max(),
        };
        clamp_u32(limit.unwrap_or(i64::from(current)))
    }

    /// Records a change, and forgets events older than every policy's period.
    fn record_event(&mut self, now: Duration, from: u32, to: u32) {
        let longest = |rules: &ScalingRules| {
            rules
                .policies
                .iter()
                .map(ScalingPolicy::period)
                .max()
                .unwrap_or(Duration::ZERO)
        };
        let keep = |events: &mut Vec<(Duration, u32)>, period: Duration| {
            let cutoff = now.checked_sub(period);
            events.retain(|&(at, _)| cutoff.is_none_or(|cut| at > cut));
        };
        keep(&mut self.ups, longest(&self.spec.behavior.scale_up));
        keep(&mut self.downs, longest(&self.spec.behavior.scale_down));
        if to > from {
            self.ups.push((now, to - from));
        } else if to < from {
            self.downs.push((now, from - to));
        }
    }
}

fn clamp_u32(value: i64) -> u32 {
    value.clamp(0, i64::from(u32::MAX)) as u32
}
