//! A capacity plan's metrics.

use std::fmt;
use std::sync::OnceLock;

use metrics::Gauge;

use super::MetricsError;
use super::names::{self, PLANNER};
use crate::erlang::{Staffed, Target};

/// Publishes the last answer of a capacity plan through the `metrics` facade: the servers the
/// target needs, the replicas recommended, and what the queue is predicted to do with those
/// servers (service level, mean wait, occupancy). See [`names`] for each series.
///
/// A plan is computed by the service when it chooses to, so it is pushed with
/// [`record`](Self::record) rather than read by a [`Reporter`](super::Reporter). Each series is
/// registered the first time it gets a value (with the recorder installed then), so it is
/// absent, not 0, until the first plan. The rates of the [`MMc`](crate::erlang::MMc) are taken
/// to be per second, so waits are in seconds.
///
/// # Example
///
/// ```
/// use admit::erlang::{MMc, Target};
/// use admit::metrics::PlanMetrics;
///
/// let metrics = PlanMetrics::new("checkout")?;
/// let queue = MMc::new(1200.0, 12.5)?; // 1200 requests/s, 80 ms each
/// let target = Target::ServiceLevel { within: 0.05, at_least: 0.95 };
/// let servers = queue.min_servers(target)?;
/// metrics.record(&queue.with_servers(servers)?, target);
/// metrics.record_replicas(servers.div_ceil(8));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PlanMetrics {
    name: String,
    servers: OnceLock<Gauge>,
    replicas: OnceLock<Gauge>,
    service_level: OnceLock<Gauge>,
    mean_wait: OnceLock<Gauge>,
    occupancy: OnceLock<Gauge>,
}

impl PlanMetrics {
    /// Metrics for the plans of `name`, labelled `planner="<name>"`.
    ///
    /// # Errors
    ///
    /// [`MetricsError::Unnamed`] if `name` is empty.
    pub fn new(name: impl Into<String>) -> Result<Self, MetricsError> {
        let name = name.into();
        if name.is_empty() {
            return Err(MetricsError::Unnamed { kind: "planner" });
        }
        super::describe::plan();
        Ok(PlanMetrics {
            name,
            servers: OnceLock::new(),
            replicas: OnceLock::new(),
            service_level: OnceLock::new(),
            mean_wait: OnceLock::new(),
            occupancy: OnceLock::new(),
        })
    }

    /// Publishes a plan: `staffed` is the queue with the servers `target` needs. The service
    /// level is published for a [`Target::ServiceLevel`] only, within its wait bound (and not
    /// for a bound `staffed` refuses, which `min_servers` would have refused first).
    pub fn record(&self, staffed: &Staffed, target: Target) {
        self.set(&self.servers, names::PLAN_SERVERS, staffed.servers() as f64);
        self.set(&self.mean_wait, names::PLAN_MEAN_WAIT, staffed.mean_wait());
        self.set(&self.occupancy, names::PLAN_OCCUPANCY, staffed.occupancy());
        if let Target::ServiceLevel { within, .. } = target
            && let Ok(level) = staffed.service_level(within)
        {
            self.set(&self.service_level, names::PLAN_SERVICE_LEVEL, level);
        }
    }

    /// Publishes the replicas recommended (for example by a
    /// [`ReplicaPlanner`](crate::erlang::ReplicaPlanner)).
    pub fn record_replicas(&self, replicas: u64) {
        self.set(&self.replicas, names::PLAN_REPLICAS, replicas as f64);
    }

    fn set(&self, gauge: &OnceLock<Gauge>, metric: &'static str, value: f64) {
        gauge
            .get_or_init(|| metrics::gauge!(metric, PLANNER => self.name.clone()))
            .set(value);
    }
}

impl fmt::Debug for PlanMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlanMetrics")
            .field("planner", &self.name)
            .finish_non_exhaustive()
    }
}
