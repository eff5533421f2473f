//! One evaluation: from the measured arrival rate and service time to a replica count.
//!
//! The pipeline of one [`Evaluator::decide`]:
//!
//! 1. λ is a rate: a failed query is an error, and so is λ < 0. λ = 0 is *idle*: the target
//!    is inactive, and the service-time query may then be empty or NaN (an idle `sum/count`
//!    ratio is 0/0; [`MeasurementError::is_idle`]); its other failures are still errors.
//! 2. The service time `s` must be positive. The queue is the fleet as its `balancing` spreads
//!    requests, with μ = 1/s ([`Fleet`]: Erlang C pooled, one queue per replica behind
//!    round-robin or random, least-request's approximation), or Erlang A (pooled) with
//!    abandonment rate 1/patience when the user gave a patience, asked through admit's
//!    [`QueueModel`] either way. An offered load λ·s above [`MAX_OFFERED_LOAD`] is out of
//!    range.
//! 3. The servers the target needs (`up`) and those a target stricter by the tolerance needs
//!    (`down`) go through admit's [`ReplicaPlanner`]: immediate scale-up with its step limits,
//!    scale-down held and stepped. Idle, both are 0, so the planner falls to `minReplicas` once
//!    its hold allows. When a search cannot answer within the model's budget but the need
//!    provably exceeds `maxReplicas` (Erlang C needs more servers than the load, Erlang A at
//!    least `targetSL` times it), the decision publishes the cap, [`Decision::capped`], with
//!    that lower bound as the servers required.
//!    With `arrivalRateWindowSeconds` (the window `w` λ is counted over), λ is read with its
//!    Poisson confidence, `λ ∓ z·√(λ/w)` ([`CONFIDENCE_DEVIATIONS`] = 2): the planner scales up
//!    only when the band's low end needs more replicas than it has, and then to what λ needs;
//!    `down` is staffed for the band's high end. A steady load whose noise crosses a replica
//!    threshold then moves nothing, where a real step (many deviations) scales at once.
//! 4. A planner is made at the first decision, starting at that decision's replicas (the
//!    current count is unknown), so a restarted scaler never scales down at once.
//! 5. The planner steps only once every search has answered: a failed decision leaves it as
//!    it was. The service level predicted at the replicas comes after, and never fails the
//!    decision: one the model cannot make within its budget (Erlang A deep in overload, at the
//!    cap) is unknown ([`Decision::predicted_service_level`] is `None`).
//!
//! A decision's work is bounded whatever the metadata: its Erlang B walks by
//! [`MAX_OFFERED_LOAD`], Erlang A's series by admit's budgets (at most
//! [`ErlangA::SEARCH_TERMS`] terms for each search, [`ErlangA::QUERY_TERMS`] for the service
//! level at the replicas), beyond which it fails with [`DecisionError::Erlang`].
//!
//! This is the scaler's pure core: it knows the queueing math and the trigger's configuration,
//! not where the numbers come from nor how a failure reaches KEDA. A failed measurement is any
//! [`MeasurementError`] (the scaler's are Prometheus query errors), carried through as is; the
//! gRPC service maps each failure to its code.

use std::sync::Arc;
use std::time::Duration;

use admit::erlang::{ErlangA, ErlangError, Fleet, QueueModel, ReplicaPlanner};

use crate::excerpt::excerpt;
use crate::metadata::ScalerConfig;

/// What the two queries gave, in the model's units: λ in requests per second, the mean
/// service time in seconds; `E` is why a query gave no number.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured<E> {
    /// The arrival rate λ (requests per second), or why it is not known.
    pub arrival_rate: Result<f64, E>,
    /// The mean service time (seconds), or why it is not known.
    pub service_time: Result<f64, E>,
}

/// Why a measurement has no number, as far as a decision asks: the decision carries the
/// failure through otherwise untouched ([`DecisionError::Query`]).
pub trait MeasurementError {
    /// Whether this is what an idle service reports for its service time: no series yet, or
    /// the 0/0 (NaN) of a ratio over a window without requests. Idle (λ = 0), the decision
    /// goes on without a service time; busy, it fails with this error.
    fn is_idle(&self) -> bool;

    /// A short label for the `kind` of the scaler's error counter.
    fn kind(&self) -> &'static str;
}

/// One evaluation's answer: what KEDA is told and why.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    /// λ, requests per second.
    pub arrival_rate: f64,
    /// The mean service time in seconds; `None` while idle without one.
    pub service_time: Option<f64>,
    /// The offered load λ·s, in erlangs (0 while idle).
    pub offered_load: f64,
    /// The fewest servers that meet the target, in whole replicas (Erlang A: any count); when
    /// the model could not find them within its budget but they exceed `maxReplicas`
    /// (`capped`), a lower bound on them.
    pub required_servers: u64,
    /// The fewest servers that meet the target made stricter by the tolerance, at the high end
    /// of λ's confidence band when `arrivalRateWindowSeconds` is set.
    pub required_servers_strict: u64,
    /// The replicas to run: the planner's answer, published as the metric value.
    pub replicas: u64,
    /// The target needs more than `maxReplicas`: `replicas` is the cap.
    pub capped: bool,
    /// The service level the model predicts at `replicas`: 0 if the queue would never empty,
    /// `None` if the model cannot estimate it within its budget (Erlang A deep in overload).
    pub predicted_service_level: Option<f64>,
    /// λ > `activationArrivalRate`: what `IsActive` answers.
    pub active: bool,
}

/// Why an evaluation failed, `E` being why a measurement did.
#[derive(Clone, Debug, PartialEq)]
pub enum DecisionError<E> {
    /// A query failed or gave no usable number.
    Query(E),
    /// A query gave a number outside the model's domain (λ < 0, service time ≤ 0).
    Domain {
        /// The PromQL text (the configuration's own, shared).
        query: Arc<str>,
        /// The value it gave.
        value: f64,
        /// What the value must be.
        expected: &'static str,
    },
    /// The queueing model cannot answer: an offered load beyond [`MAX_OFFERED_LOAD`], no server
    /// count within its search range, or Erlang A work beyond its budget (see
    /// [`ErlangA`]).
    Erlang(ErlangError),
}

impl<E: MeasurementError> DecisionError<E> {
    /// A short label for the `kind` of the scaler's error counter: the measurement's own
    /// ([`MeasurementError::kind`]), `out_of_domain` or `model`.
    pub fn kind(&self) -> &'static str {
        match self {
            DecisionError::Query(error) => error.kind(),
            DecisionError::Domain { .. } => "out_of_domain",
            DecisionError::Erlang(_) => "model",
        }
    }
}

impl<E: std::fmt::Display> std::fmt::Display for DecisionError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecisionError::Query(error) => error.fmt(f),
            DecisionError::Domain {
                query,
                value,
                expected,
            } => write!(
                f,
                "query \"{}\" gave {value}: expected {expected}",
                excerpt(query)
            ),
            DecisionError::Erlang(error) => {
                write!(f, "the queueing model: {error}")?;
                match error {
                    ErlangError::OutOfRange {
                        field: "abandon_rate",
                        ..
                    } => f.write_str(
                        " (patienceSeconds is too long for this load: Erlang A would work past \
                         its budget)",
                    ),
                    ErlangError::OutOfRange {
                        field: "offered_load",
                        ..
                    } => f.write_str(" (λ·s above 10¹⁰ erlangs, or beyond the model's budget)"),
                    _ => Ok(()),
                }
            }
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for DecisionError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DecisionError::Query(error) => Some(error),
            DecisionError::Erlang(error) => Some(error),
            DecisionError::Domain { .. } => None,
        }
    }
}

impl<E> From<ErlangError> for DecisionError<E> {
    fn from(error: ErlangError) -> Self {
        DecisionError::Erlang(error)
    }
}

/// The largest offered load a decision staffs, in erlangs; beyond it the decision fails with
/// [`ErlangError::OutOfRange`] for `offered_load`. Its Erlang B walks cost `O(√a)` steps each:
/// about `10√a` warm-up and the distance to the answer for each of the searches (two, three
/// with `arrivalRateWindowSeconds`), and for the service level at the replicas up to `50√a`
/// (B vanishes about `38√a` above the load). A fleet's search adds `O(log n)` evaluations to
/// the pooled one: least-request's walk Erlang B each, round-robin's sum
/// `concurrencyPerReplica` terms. Ten billion erlangs keeps a decision within its time budget,
/// where admit's limit, 10¹², would take several times it.
pub const MAX_OFFERED_LOAD: f64 = 1e10;

/// The queue the measurements describe: the [`Fleet`] of the configured balancing with
/// μ = 1/s, or Erlang A with θ = 1/patience when the user gave a patience (pooled: the metadata
/// refuses another balancing with it); an offered load above [`MAX_OFFERED_LOAD`] is out of
/// range.
fn model(
    config: &ScalerConfig,
    arrival_rate: f64,
    service_time: f64,
) -> Result<Box<dyn QueueModel>, ErlangError> {
    let service_rate = 1.0 / service_time;
    let queue: Box<dyn QueueModel> = match config.patience {
        None => Box::new(Fleet::new(
            arrival_rate,
            service_rate,
            config.concurrency_per_replica,
            config.balancing,
        )?),
        Some(patience) => Box::new(ErlangA::new(
            arrival_rate,
            service_rate,
            1.0 / patience.as_secs_f64(),
        )?),
    };
    let load = queue.offered_load();
    if load > MAX_OFFERED_LOAD {
        return Err(ErlangError::OutOfRange {
            field: "offered_load",
            value: load,
        });
    }
    Ok(queue)
}

/// How many standard deviations of λ's Poisson noise the confidence band spans.
pub const CONFIDENCE_DEVIATIONS: f64 = 2.0;

/// λ's confidence band `(low, high)`: `λ ∓ z·√(λ/w)` for arrivals counted over a window `w`
/// (`arrivalRateWindowSeconds`), z = [`CONFIDENCE_DEVIATIONS`], the low end at least 0; `(λ, λ)`
/// without a window.
fn confidence(config: &ScalerConfig, arrival_rate: f64) -> (f64, f64) {
    match config.arrival_rate_window {
        Some(window) => {
            let deviation = CONFIDENCE_DEVIATIONS * (arrival_rate / window.as_secs_f64()).sqrt();
            (
                (arrival_rate - deviation).max(0.0),
                arrival_rate + deviation,
            )
        }
        None => (arrival_rate, arrival_rate),
    }
}

/// A value of the queue at a server count, `None` where the queue never empties.
fn stable(value: Result<f64, ErlangError>) -> Result<Option<f64>, ErlangError> {
    match value {
        Err(ErlangError::Unstable { .. }) => Ok(None),
        value => value.map(Some),
    }
}

/// The fewest servers for which `queue` serves a fraction `at_least` within `within`, or, when
/// the search fails (past Erlang A's budget, say) but a lower bound on them already exceeds
/// `max_servers`, that bound: the need is above the cap whatever it is exactly.
fn required_servers(
    queue: &dyn QueueModel,
    patient: bool,
    within: f64,
    at_least: f64,
    max_servers: u64,
) -> Result<u64, ErlangError> {
    match queue.min_servers_for_service_level(within, at_least) {
        Ok(servers) => Ok(servers),
        Err(error) => {
            let load = queue.offered_load();
            // Erlang C is stable only above the load; Erlang A serves at most `N·μ` of `λ`,
            // so a fraction `at_least` needs `N ≥ at_least · a`.
            let bound = if patient {
                (load.floor() as u64).saturating_add(1)
            } else {
                ((at_least * load).ceil() as u64).max(1)
            };
            if bound > max_servers {
                Ok(bound)
            } else {
                Err(error)
            }
        }
    }
}

/// One row of the table around a decision ([`Decision::table`]): the queue at a server count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Row {
    /// Servers (concurrent requests in service).
    pub servers: u64,
    /// The replicas that hold them: `servers / concurrencyPerReplica`, rounded up.
    pub replicas: u64,
    /// P(wait ≤ T) (Erlang A: served within T); `None` where the queue never empties.
    pub service_level: Option<f64>,
    /// P(wait > 0); `None` where the queue never empties.
    pub prob_wait: Option<f64>,
    /// The mean wait in seconds; `None` where the queue never empties.
    pub mean_wait: Option<f64>,
    /// The servers' busy fraction; `None` where the queue never empties.
    pub occupancy: Option<f64>,
}

impl Decision {
    /// The queue at server counts around the answer: whole replicas from `span` below the
    /// required servers to `span` above (at least one server), at `config`'s per-replica
    /// concurrency. Empty while idle. Each row's four queries are bounded as a decision's
    /// service level is.
    ///
    /// # Errors
    ///
    /// The model's, as in [`Evaluator::decide`] ([`DecisionError::Erlang`]).
    pub fn table(&self, config: &ScalerConfig, span: u64) -> Result<Vec<Row>, ErlangError> {
        let Some(service_time) = self.service_time.filter(|_| self.arrival_rate > 0.0) else {
            return Ok(Vec::new());
        };
        let queue = model(config, self.arrival_rate, service_time)?;
        let per_replica = config.concurrency_per_replica;
        let needed = self.required_servers.div_ceil(per_replica).max(1);
        let first = needed.saturating_sub(span).max(1);
        let last = needed.saturating_add(span);
        let within = config.wait_threshold_seconds;
        (first..=last)
            .map(|replicas| {
                let servers = replicas.saturating_mul(per_replica);
                Ok(Row {
                    servers,
                    replicas,
                    service_level: stable(queue.service_level(servers, within))?,
                    prob_wait: stable(queue.prob_wait(servers))?,
                    mean_wait: stable(queue.mean_wait(servers))?,
                    occupancy: stable(queue.occupancy(servers))?,
                })
            })
            .collect()
    }
}

/// The decisions of one ScaledObject trigger: its configuration (shared with whoever else
/// holds it) and its planner.
#[derive(Debug)]
pub struct Evaluator {
    config: Arc<ScalerConfig>,
    planner: Option<ReplicaPlanner>,
}

impl Evaluator {
    /// An evaluator that has made no decision yet.
    pub fn new(config: impl Into<Arc<ScalerConfig>>) -> Self {
        Evaluator {
            config: config.into(),
            planner: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ScalerConfig {
        &self.config
    }

    /// One decision at `now` (any monotonic time base; only differences matter).
    ///
    /// # Errors
    ///
    /// [`DecisionError`]: a failed query (for the service time, unless idle), a value outside
    /// the model's domain, or the model's own limits short of the cap. A failed decision
    /// leaves the planner as it was.
    pub fn decide<E: MeasurementError>(
        &mut self,
        now: Duration,
        measured: Measured<E>,
    ) -> Result<Decision, DecisionError<E>> {
        decide(&self.config, &mut self.planner, now, measured)
    }
}

/// [`Evaluator::decide`] for a caller that keeps the configuration itself: one decision for
/// `config` at `now`, with `planner` (made at the first decision, stepped only by a whole
/// one). The gRPC service's registry keeps only the planner, and decides with the caller's
/// configuration, identical to the one it was made for.
pub(crate) fn decide<E: MeasurementError>(
    config: &ScalerConfig,
    planner: &mut Option<ReplicaPlanner>,
    now: Duration,
    measured: Measured<E>,
) -> Result<Decision, DecisionError<E>> {
    let arrival_rate = measured.arrival_rate.map_err(DecisionError::Query)?;
    if arrival_rate < 0.0 {
        return Err(DecisionError::Domain {
            query: Arc::clone(&config.arrival_rate_query),
            value: arrival_rate,
            expected: "a rate of at least 0 per second",
        });
    }
    let idle = arrival_rate == 0.0;
    let service_time = match measured.service_time {
        Ok(seconds) if seconds > 0.0 => Some(seconds),
        Ok(seconds) if !idle => {
            return Err(DecisionError::Domain {
                query: Arc::clone(&config.service_time_query),
                value: seconds,
                expected: "a mean service time above 0 seconds",
            });
        }
        // Idle: a zero, empty or NaN service time is what an idle service reports.
        Ok(_) => None,
        Err(error) if idle && error.is_idle() => None,
        Err(error) => return Err(DecisionError::Query(error)),
    };

    let within = config.wait_threshold_seconds;
    let planner_config = config.planner_config();
    let per_replica = config.concurrency_per_replica;
    let max_servers = config.max_replicas.saturating_mul(per_replica);
    let stricter = planner_config.stricter_service_level(config.target_sl);
    let patient = config.patience.is_none();
    let (queue, up, down, up_low) = match service_time {
        Some(seconds) if !idle => {
            let queue = model(config, arrival_rate, seconds)?;
            let up = required_servers(&*queue, patient, within, config.target_sl, max_servers)?;
            let (low, high) = confidence(config, arrival_rate);
            let (down, up_low) = if low == arrival_rate {
                let down = required_servers(&*queue, patient, within, stricter, max_servers)?;
                (down, up)
            } else {
                let high = model(config, high, seconds)?;
                let down = required_servers(&*high, patient, within, stricter, max_servers)?;
                let up_low = if low > 0.0 {
                    let low = model(config, low, seconds)?;
                    required_servers(&*low, patient, within, config.target_sl, max_servers)?
                } else {
                    0
                };
                (down, up_low)
            };
            (Some(queue), up, down, up_low)
        }
        _ => (None, 0, 0, 0),
    };

    let needed = up.div_ceil(per_replica);
    // Nothing fails past this point: the planner steps only for a decision that is made.
    let stepped = match planner {
        Some(planner) => planner,
        empty => {
            let start = needed.clamp(planner_config.min_replicas, planner_config.max_replicas);
            empty.insert(ReplicaPlanner::new(planner_config, start)?)
        }
    };
    // Up only when even λ's lower bound needs more replicas, then to what λ needs.
    let current = stepped.replicas();
    let trigger = if up_low.div_ceil(per_replica) > current {
        up
    } else {
        up_low
    };
    let replicas = stepped.observe(now, trigger, down.max(up));
    let predicted_service_level = match &queue {
        // 0 where the queue would never empty; unknown past the model's budget.
        Some(queue) => match queue.service_level(replicas.saturating_mul(per_replica), within) {
            Ok(level) => Some(level),
            Err(ErlangError::Unstable { .. }) => Some(0.0),
            Err(_) => None,
        },
        None => Some(1.0),
    };
    Ok(Decision {
        arrival_rate,
        service_time,
        offered_load: queue.as_ref().map_or(0.0, |queue| queue.offered_load()),
        required_servers: up,
        required_servers_strict: down.max(up),
        replicas,
        capped: needed > config.max_replicas,
        predicted_service_level,
        active: arrival_rate > config.activation_arrival_rate,
    })
}
