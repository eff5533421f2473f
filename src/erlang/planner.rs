//! Turning server counts into stable replica counts.

use std::collections::VecDeque;
use std::time::Duration;

use super::{ErlangError, MMc, Target};

/// How a [`ReplicaPlanner`] converts servers to replicas and damps changes.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::erlang::PlannerConfig;
///
/// let config = PlannerConfig {
///     per_replica: 8,
///     max_replicas: 50,
///     scale_down_hold: Duration::from_secs(120),
///     ..PlannerConfig::default()
/// };
/// assert_eq!(config.min_replicas, 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlannerConfig {
    /// Servers (concurrent requests) one replica provides: replicas = ⌈servers / per_replica⌉.
    /// At least 1. Default 1.
    pub per_replica: u64,
    /// The fewest replicas ever recommended. Default 1.
    pub min_replicas: u64,
    /// The most replicas ever recommended (at least `min_replicas` and 1). Default 1000.
    pub max_replicas: u64,
    /// Scaling up adds at least this many replicas (headroom), bounded by `max_replicas`. At
    /// least 1. Default 1.
    pub min_step_up: u64,
    /// Scaling up adds at most this many replicas per decision (at least `min_step_up`).
    /// Default: unlimited.
    pub max_step_up: u64,
    /// Scaling down removes at most this many replicas per decision. At least 1. Default:
    /// unlimited.
    pub max_step_down: u64,
    /// Scaling down goes no lower than the highest recommendation of this recent period
    /// (Kubernetes' HPA default is 300 s). Default 300 s.
    pub scale_down_hold: Duration,
    /// The tolerance band of [`ReplicaPlanner::plan`], relative: replicas are added above the
    /// count the target needs, and removed only below the count that a target stricter by
    /// `1 + tolerance` needs (a fraction waiting too long of `(1 − at_least) / (1 + tolerance)`,
    /// a mean wait of `at_most / (1 + tolerance)`). At least 0. Default 0.1.
    pub tolerance: f64,
}

impl Default for PlannerConfig {
    fn default() -> Self {
        PlannerConfig {
            per_replica: 1,
            min_replicas: 1,
            max_replicas: 1000,
            min_step_up: 1,
            max_step_up: u64::MAX,
            max_step_down: u64::MAX,
            scale_down_hold: Duration::from_secs(300),
            tolerance: 0.1,
        }
    }
}

impl PlannerConfig {
    fn validate(&self) -> Result<(), ErlangError> {
        let checks: [(&'static str, u64, bool); 5] = [
            ("per_replica", self.per_replica, self.per_replica >= 1),
            (
                "max_replicas",
                self.max_replicas,
                self.max_replicas >= self.min_replicas.max(1),
            ),
            ("min_step_up", self.min_step_up, self.min_step_up >= 1),
            (
                "max_step_up",
                self.max_step_up,
                self.max_step_up >= self.min_step_up,
            ),
            ("max_step_down", self.max_step_down, self.max_step_down >= 1),
        ];
        for (field, value, valid) in checks {
            if !valid {
                return Err(ErlangError::OutOfRange {
                    field,
                    value: value as f64,
                });
            }
        }
        if !(self.tolerance.is_finite() && self.tolerance >= 0.0) {
            return Err(ErlangError::OutOfRange {
                field: "tolerance",
                value: self.tolerance,
            });
        }
        Ok(())
    }

    /// The service level `at_least` made stricter by the [`tolerance`](Self::tolerance): the
    /// fraction that may wait too long, `1 − at_least`, divided by `1 + tolerance`. What
    /// [`ReplicaPlanner::plan`] staffs its `down` recommendation for; give it to
    /// [`ReplicaPlanner::observe`] when staffing another model.
    ///
    /// ```
    /// use admit::erlang::PlannerConfig;
    ///
    /// let config = PlannerConfig { tolerance: 1.0, ..PlannerConfig::default() };
    /// assert_eq!(config.stricter_service_level(0.8), 0.9);
    /// ```
    pub fn stricter_service_level(&self, at_least: f64) -> f64 {
        1.0 - (1.0 - at_least) / (1.0 + self.tolerance)
    }

    fn replicas_for(&self, servers: u64) -> u64 {
        servers
            .div_ceil(self.per_replica)
            .clamp(self.min_replicas, self.max_replicas)
    }
}

/// Turns required server counts into a replica count that does not flap.
///
/// Each decision takes two recommendations, in servers: `up`, what the target needs now, and
/// `down`, what a slightly stricter target needs (so `down ≥ up`). The planner then
///
/// 1. **scales up at once** when `up` needs more replicas than it has, by at least
///    `min_step_up` and at most `max_step_up`, up to `max_replicas`;
/// 2. **scales down only to the highest `down` of the last `scale_down_hold`**, by at most
///    `max_step_down` per decision: one quiet sample never removes replicas, and the hold is
///    measured over the recommendations, not from the last change;
/// 3. otherwise **keeps its count**. Between `up` and `down` lies a dead band, and scaling up
///    also enters the new count into the hold window (so the `min_step_up` headroom is kept
///    for a hold period): a load that wavers around a threshold does not make the output
///    oscillate. How wide the band is in servers depends on `tolerance` and the load; at a
///    zero-width band the hold window alone damps changes.
///
/// Its memory is bounded: the hold window keeps at most [`MAX_HELD`](Self::MAX_HELD)
/// recommendations (only those that can still be its highest: each lower than the one before).
/// Past that, a lower recommendation extends the hold of the last one kept instead: the planner
/// never scales down earlier than the hold says, and after a long fall may scale down later.
///
/// Time is an argument, so the planner is deterministic; it only needs to be non-decreasing
/// (an earlier time counts as the latest one seen). Step limits apply per decision: make one
/// per period (for KEDA, per polling interval). Nothing is clamped before the first decision:
/// [`replicas`](Self::replicas) returns the starting count until then.
///
/// # Kubernetes
///
/// Publish either the replica count with a target of 1, or the server count `c` with a target
/// of `per_replica` (the HPA then computes `⌈c / per_replica⌉`, and the planner's hysteresis is
/// in server units). Mind two HPA behaviours: its default 10 % tolerance ignores a desired
/// change within ±10 % of the current count (set `behavior.scaleUp.tolerance: 0` where
/// available), and its own default 300 s scale-down stabilisation adds to `scale_down_hold`
/// (disable one or accept the longer of the two).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::erlang::{MMc, PlannerConfig, ReplicaPlanner, Target};
///
/// let config = PlannerConfig { per_replica: 8, max_replicas: 100, ..PlannerConfig::default() };
/// let mut planner = ReplicaPlanner::new(config, 1)?;
/// let target = Target::ServiceLevel { within: 0.05, at_least: 0.95 };
///
/// // 1200 req/s at 80 ms each: 96 erlangs.
/// let busy = MMc::new(1200.0, 12.5)?;
/// let replicas = planner.plan(Duration::from_secs(0), &busy, target)?;
/// assert_eq!(replicas, 13); // 100 workers
///
/// // One quiet minute later: still held up by the busy sample (hold: 300 s).
/// let quiet = MMc::new(300.0, 12.5)?;
/// assert_eq!(planner.plan(Duration::from_secs(60), &quiet, target)?, 13);
/// // Once the busy sample has left the hold window, it scales down.
/// assert_eq!(planner.plan(Duration::from_secs(361), &quiet, target)?, 4); // 28 workers
/// # Ok::<(), admit::erlang::ErlangError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ReplicaPlanner {
    config: PlannerConfig,
    replicas: u64,
    now: Duration,
    /// `(time, down recommendation)` over the hold window, with strictly decreasing
    /// recommendations: the front is the window's maximum.
    recent: VecDeque<(Duration, u64)>,
    /// No decision made yet.
    fresh: bool,
}

impl ReplicaPlanner {
    /// The most recommendations the hold window keeps: 256, 4 KiB.
    pub const MAX_HELD: usize = 256;

    /// A planner currently at `replicas`.
    ///
    /// The starting count counts as a recommendation made at the first decision, so a new
    /// planner (a restarted scaler, say) does not scale down within its first hold period.
    ///
    /// # Errors
    ///
    /// [`OutOfRange`](ErlangError::OutOfRange) naming the first invalid setting of `config`.
    pub fn new(config: PlannerConfig, replicas: u64) -> Result<Self, ErlangError> {
        config.validate()?;
        Ok(ReplicaPlanner {
            config,
            replicas,
            now: Duration::ZERO,
            recent: VecDeque::new(),
            fresh: true,
        })
    }

    /// The current recommendation.
    pub fn replicas(&self) -> u64 {
        self.replicas
    }

    /// One decision at time `now` from two server counts: `up_servers` (what the target needs)
    /// and `down_servers` (what a stricter target needs; taken as at least `up_servers`).
    /// Returns the new replica count.
    pub fn observe(&mut self, now: Duration, up_servers: u64, down_servers: u64) -> u64 {
        let config = &self.config;
        self.now = self.now.max(now);
        let up = config.replicas_for(up_servers);
        let down = config.replicas_for(down_servers.max(up_servers));
        if self.fresh {
            self.fresh = false;
            self.recent.push_back((self.now, self.replicas));
        }

        self.remember(down);
        let hold_period = self.config.scale_down_hold;
        let now = self.now;
        while self
            .recent
            .front()
            .is_some_and(|&(at, _)| now.saturating_sub(at) > hold_period)
        {
            self.recent.pop_front();
        }
        let hold = self.recent.front().map_or(down, |&(_, held)| held);
        let config = &self.config;

        let current = self.replicas;
        self.replicas = if up > current {
            let step = (up - current).clamp(config.min_step_up, config.max_step_up);
            let raised = current.saturating_add(step).min(config.max_replicas);
            // The headroom counts as a recommendation: it is not taken back at once.
            self.remember(raised);
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

    /// Enters a recommendation made now into the hold window, which keeps only the ones that
    /// can still be its maximum (strictly decreasing from the front), at most
    /// [`MAX_HELD`](Self::MAX_HELD) of them: when it is full, the last one, higher than this
    /// one, is held from now instead, which keeps this one's hold too.
    fn remember(&mut self, replicas: u64) {
        while self
            .recent
            .back()
            .is_some_and(|&(_, held)| held <= replicas)
        {
            self.recent.pop_back();
        }
        if self.recent.len() >= Self::MAX_HELD
            && let Some(last) = self.recent.back_mut()
        {
            last.0 = self.now;
        } else {
            self.recent.push_back((self.now, replicas));
        }
    }

    /// One decision at time `now` for `queue` and `target`: the servers `target` needs, and
    /// those the target made stricter by [`PlannerConfig::tolerance`] needs, through
    /// [`observe`](Self::observe).
    ///
    /// # Errors
    ///
    /// Any error of [`MMc::min_servers`].
    pub fn plan(&mut self, now: Duration, queue: &MMc, target: Target) -> Result<u64, ErlangError> {
        let up = queue.min_servers(target)?;
        let stricter = match target {
            Target::ServiceLevel { within, at_least } => Target::ServiceLevel {
                within,
                at_least: self.config.stricter_service_level(at_least),
            },
            Target::MeanWait { at_most } => Target::MeanWait {
                at_most: at_most / (1.0 + self.config.tolerance),
            },
        };
        let down = queue.min_servers(stricter)?;
        Ok(self.observe(now, up, down))
    }
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use std::time::Duration;

    use super::{PlannerConfig, ReplicaPlanner};

    /// A load that falls at every decision for longer than the hold: without the bound the
    /// window would keep one recommendation per decision.
    #[test]
    fn the_hold_window_is_bounded_whatever_the_fall() {
        let config = PlannerConfig {
            scale_down_hold: Duration::from_secs(3_600),
            max_replicas: 1_000_000,
            ..PlannerConfig::default()
        };
        let mut planner = ReplicaPlanner::new(config, 1).unwrap();
        planner.observe(Duration::ZERO, 100_000, 100_000);
        for i in 1..=36_000u64 {
            let replicas =
                planner.observe(Duration::from_millis(100 * i), 100_000 - i, 100_000 - i);
            assert!(planner.recent.len() <= ReplicaPlanner::MAX_HELD);
            assert_eq!(replicas, 100_000, "held at {i}");
        }
        assert_eq!(planner.recent.len(), ReplicaPlanner::MAX_HELD);
    }
}
