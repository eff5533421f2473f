//! The names of the metrics admit publishes, and of their labels.
//!
//! Every series carries the [`LIMITER`] label (the name given to the limiter's builder), for a plan
//! the [`PLANNER`] label, and for a client's throttles and retry budget the [`CLIENT`] label; a
//! drain's carry none (one drain per process) but [`OFFERED_REQUESTS`]' [`KIND`]. Units are in the
//! names: seconds, ratios from 0 to 1, and `_per_second` rates; counters end in `_total`, gauges
//! never do, except [`SHED_SERVICE_SECONDS`] (see there), and a histogram's series end in
//! `_bucket`, `_sum` and `_count`. (A recorder set to append `_total` to every counter, such as
//! `metrics-exporter-prometheus` with its recommended naming, breaks the histogram's names.)

/// Label: the limiter's name.
pub const LIMITER: &str = "limiter";
/// Label: the name given to a client's throttle, map of throttles or retry budget.
pub const CLIENT: &str = "client";
/// Label: the backend a client's throttle counts: a single throttle's name, or a
/// [`Throttles`](crate::client::Throttles) key's `Display` for the first [`MAX_DESTINATIONS`]
/// keys a reporter sees, [`OTHER_DESTINATION`] for the rest.
pub const DESTINATION: &str = "destination";
/// The [`DESTINATION`] of the destinations beyond the first [`MAX_DESTINATIONS`] of a map,
/// summed (a key displayed as `other` shares it).
pub const OTHER_DESTINATION: &str = "other";
/// How many destinations of one map of throttles get a [`DESTINATION`] of their own: a
/// recorder keeps every series it was given, so a map whose keys a caller chooses must not
/// make one per key.
pub const MAX_DESTINATIONS: usize = 64;
/// Label: the planner's name.
pub const PLANNER: &str = "planner";
/// Label: why a request was refused (`cpu`, `cool-off`, `signal`, `queue`, `queue-delay`,
/// `runtime-lag`).
pub const REASON: &str = "reason";
/// Label: where a wait was measured (`request`, `pool`, `probe`).
pub const SOURCE: &str = "source";
/// Label: a histogram bucket's upper bound, in seconds (`+Inf` for the last).
pub const LE: &str = "le";
/// Label: how a request ended (`passed`, `failed`, `dropped` for a shedder; `admitted`,
/// `refused` for a warm-up bucket; for a bound, see [`BOUND_REQUESTS`]; `spent`, `denied` for
/// a retry budget's retries).
pub const OUTCOME: &str = "outcome";
/// Label: a request's [`Criticality`](crate::criticality::Criticality) (`sheddable`,
/// `sheddable_plus`, `critical`, `critical_plus`).
pub const CLASS: &str = "class";
/// Label: why a request-start stamp could not be read (`empty`, `invalid`, `implausible`,
/// `overflow`, `from-future`, `too-old`: [`HeaderError::as_str`](crate::signal::queue::header::HeaderError::as_str)).
pub const ERROR: &str = "error";
/// Label: which kind of admit layer counted an offered request (`shed`, `warmup`, `drain`,
/// `bound`), so
/// that a shedder and a warm-up bucket of one name publish two series.
pub const KIND: &str = "kind";

/// Counter: requests counted by the first admit layer that saw them, admitted or refused, by
/// [`KIND`] and [`LIMITER`] (none for the drain): summed over a service's series, every arrival
/// once, whatever the order of the layers. Its rate is the offered load λ.
pub const OFFERED_REQUESTS: &str = "admit_offered_requests_total";

/// Counter: requests that reached a shedder, by [`OUTCOME`]: `passed` and `failed` when they
/// complete, `dropped` when refused. A layer refusing outside the shedder keeps its refusals out
/// of these: the offered load is [`OFFERED_REQUESTS`].
pub const SHED_REQUESTS: &str = "admit_shed_requests_total";
/// The time the completed (`passed` and `failed`) requests spent between admission and
/// completion, summed, in seconds: monotonic like a counter, but published as a gauge,
/// because the `metrics` facade's counters hold integers. `rate()` reads it as a counter.
pub const SHED_SERVICE_SECONDS: &str = "admit_shed_service_seconds_total";
/// Gauge: requests admitted and not yet completed.
pub const SHED_IN_FLIGHT: &str = "admit_shed_requests_in_flight";
/// Gauge: the CPU load as a share of the CPU limit (0 to 1); absent while the signal has never
/// known it, NaN once it no longer does.
pub const SHED_CPU: &str = "admit_shed_cpu_load_ratio";
/// Gauge: the CPU load at and above which the shedder is hot (0 to 1).
pub const SHED_CPU_THRESHOLD: &str = "admit_shed_cpu_threshold_ratio";
/// Gauge: 1 while the shedder is hot (a signal reports overload, or it is cooling off after a
/// drop), else 0.
pub const SHED_SHEDDING: &str = "admit_shed_shedding";
/// Gauge: the concurrency the service has proven it carries (go-zero's `maxFlight`).
pub const SHED_MAX_FLIGHT: &str = "admit_shed_max_flight";
/// Gauge: the share of `max_flight` admitted now (0.1 to 1 from the CPU; go-zero's overload
/// factor).
pub const SHED_HEADROOM: &str = "admit_shed_headroom_ratio";
/// Counter: requests a shedder decided, by [`CLASS`] and [`OUTCOME`] (`admitted`, `refused`).
/// A request without a class counts as `critical`. Their rate by class is the load each class
/// offers: size a service for the classes it must serve.
pub const SHED_CLASS_REQUESTS: &str = "admit_shed_class_requests_total";
/// Gauge, by [`CLASS`]: 1 for the [marginal class](crate::shed#request-criticality) while the
/// shedder is hot, else 0.
pub const SHED_CUT: &str = "admit_shed_cut";

/// Counter: requests a shedder refused, by [`REASON`]: the breakdown of the `dropped`
/// outcome.
pub const SHED_DROPPED: &str = "admit_shed_dropped_total";

/// Counter: a shedder's waits at or below [`LE`], by [`SOURCE`]: the buckets of a Prometheus
/// histogram (`histogram_quantile` reads them), published as counters.
pub const QUEUE_WAIT_BUCKET: &str = "admit_queue_wait_seconds_bucket";
/// Counter: how many waits [`QUEUE_WAIT_BUCKET`] counted, by [`SOURCE`].
pub const QUEUE_WAIT_COUNT: &str = "admit_queue_wait_seconds_count";
/// The waits summed, in seconds, by [`SOURCE`]: monotonic, published as a gauge (see
/// [`SHED_SERVICE_SECONDS`]).
pub const QUEUE_WAIT_SUM: &str = "admit_queue_wait_seconds_sum";
/// Gauge: 1 while the shedder's queue gate is hot, else 0.
pub const QUEUE_HOT: &str = "admit_queue_hot";
/// Gauge: the shedder's clock-skew floor: how far the service's wall clock is ahead of the
/// proxy that stamps requests (negative: behind), network time included, in seconds. Absent
/// until a stamped request arrived.
pub const QUEUE_CLOCK_OFFSET: &str = "admit_queue_clock_offset_seconds";
/// Counter: request-start stamps the shedder could not read, by [`ERROR`]; such a request's
/// wait is unknown.
pub const QUEUE_HEADER_ERRORS: &str = "admit_queue_header_errors_total";
/// Gauge: the share of requests the runtime lag probe's controller refuses now (0 to 1).
pub const RUNTIME_LAG_DROP: &str = "admit_runtime_lag_drop_ratio";

/// Counter: a warm-up bucket's decisions, by [`OUTCOME`]: `admitted` or `refused`.
pub const WARMUP_REQUESTS: &str = "admit_warmup_requests_total";
/// Gauge: how many requests a bound lets be in service now.
pub const BOUND_LIMIT: &str = "admit_bound_limit";
/// Gauge: requests in service under a bound.
pub const BOUND_IN_SERVICE: &str = "admit_bound_in_service";
/// Gauge: requests waiting in a bound's queue.
pub const BOUND_WAITING: &str = "admit_bound_waiting";
/// Counter: requests that could not enter a bound at once, by [`CLASS`] and [`OUTCOME`]:
/// `waited` as each joins the queue, then how its wait ended (`entered`, `cancelled`,
/// `pushed_out`, `timed_out`, `deadline`), and `full` (refused at once, the queue full) or
/// `deadline` (refused at once, its deadline too near) for those that could not wait.
pub const BOUND_REQUESTS: &str = "admit_bound_requests_total";
/// Gauge: the rate in force, in permits per second.
pub const WARMUP_LIMIT: &str = "admit_warmup_limit_per_second";
/// Gauge: the rate once warm, in permits per second.
pub const WARMUP_FULL_RATE: &str = "admit_warmup_full_rate_per_second";
/// Gauge: the permits stored (a full bucket is cold).
pub const WARMUP_STORED: &str = "admit_warmup_stored_permits";
/// Gauge: warm-up progress, from 0 (cold) to 1 (at the full rate).
pub const WARMUP_PROGRESS: &str = "admit_warmup_progress_ratio";

/// Gauge: the servers (workers) the plan's target needs.
pub const PLAN_SERVERS: &str = "admit_plan_servers";
/// Gauge: the replicas the planner recommends.
pub const PLAN_REPLICAS: &str = "admit_plan_replicas";
/// Gauge: the predicted share of requests that wait at most the target's wait, with the
/// servers planned (only for a service-level target).
pub const PLAN_SERVICE_LEVEL: &str = "admit_plan_service_level_ratio";
/// Gauge: the predicted mean wait in the queue, in seconds, with the servers planned.
pub const PLAN_MEAN_WAIT: &str = "admit_plan_mean_wait_seconds";
/// Gauge: the predicted share of time a server is busy, with the servers planned.
pub const PLAN_OCCUPANCY: &str = "admit_plan_occupancy_ratio";

/// Gauge: requests a drain counts in flight (admitted, response body not ended).
pub const DRAIN_IN_FLIGHT: &str = "admit_inflight_requests";
/// Gauge: connections a drain counts open (tracked ones only).
pub const DRAIN_CONNECTIONS: &str = "admit_open_connections";
/// Gauge: long-lived sessions (WebSockets, streams) a drain counts open: the autoscaling input
/// of services that hold them.
pub const DRAIN_SESSIONS: &str = "admit_active_sessions";
/// Gauge: 1 once the drain is announced (the replica is leaving), else 0: autoscaling queries
/// drop such pods with `unless on(pod) (admit_draining == 1)`.
pub const DRAINING: &str = "admit_draining";

/// Counter: requests a client's throttle was asked to send, the ones it refused locally
/// included, by [`CLIENT`], [`DESTINATION`] and [`CLASS`] (the request's
/// `admit-criticality` header; `critical` without one).
pub const CLIENT_ATTEMPTS: &str = "admit_client_attempts_total";
/// Counter: requests a client's throttle refused locally, never sent, by [`CLIENT`],
/// [`DESTINATION`] and [`CLASS`]. The sent ones are [`CLIENT_ATTEMPTS`] minus these.
pub const CLIENT_THROTTLED: &str = "admit_client_throttled_total";
/// Gauge: the probability a client's throttle refuses the next request (0 to 1), by
/// [`CLIENT`] and [`DESTINATION`]; for [`OTHER_DESTINATION`], the highest of those
/// destinations'; 0 for a destination no longer in its map.
pub const CLIENT_THROTTLE_PROBABILITY: &str = "admit_client_throttle_probability_ratio";
/// Counter: retries a client's retry budget was asked for, by [`CLIENT`], [`CLASS`] and
/// [`OUTCOME`]: `spent` (allowed) or `denied`.
pub const CLIENT_RETRIES: &str = "admit_client_retries_total";
/// Counter: requests deposited in a client's retry budget (each request once, retried or
/// not), by [`CLIENT`] and [`CLASS`]: with [`CLIENT_RETRIES`], the share of requests retried.
pub const CLIENT_RETRY_REQUESTS: &str = "admit_client_retry_requests_total";
