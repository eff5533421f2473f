//! Metrics: what the limiters count, published through the [`metrics`](https://docs.rs/metrics)
//! facade for Prometheus and the autoscalers that read it.
//!
//! The application installs a recorder (for example `metrics-exporter-prometheus`), then
//! builds a [`Reporter`] over its named limiters. The reporter registers each series once, and
//! [`Reporter::report`] reads the limiters' snapshots and totals and sets the series; call it
//! before rendering a scrape, or run it on a timer with [`Reporter::run`]. Decisions never
//! touch a metric: they pay nothing for it, with or without a recorder.
//!
//! | source | series (see [`names`]) |
//! |---|---|
//! | [`ReporterBuilder::shedder`] | `admit_offered_requests_total{kind="shed"}`, `admit_shed_requests_total{outcome}`, `admit_shed_service_seconds_total`, `admit_shed_requests_in_flight`, `admit_shed_cpu_load_ratio`, `admit_shed_cpu_threshold_ratio`, `admit_shed_shedding`, `admit_shed_max_flight`, `admit_shed_headroom_ratio` |
//! | [`ReporterBuilder::warm_up`], [`ReporterBuilder::sentinel_warm_up`] | `admit_offered_requests_total{kind="warmup"}`, `admit_warmup_requests_total{outcome}`, `admit_warmup_limit_per_second`, `admit_warmup_full_rate_per_second`, `admit_warmup_stored_permits`, `admit_warmup_progress_ratio` |
//! | [`PlanMetrics`] | `admit_plan_servers`, `admit_plan_replicas`, `admit_plan_service_level_ratio`, `admit_plan_mean_wait_seconds`, `admit_plan_occupancy_ratio` |
//! | [`ReporterBuilder::throttle`], [`ReporterBuilder::throttles`] | `admit_client_attempts_total{class}`, `admit_client_throttled_total{class}`, `admit_client_throttle_probability_ratio`, each labelled `client` and `destination` (the first 64 destinations of a map, then `other`) |
//! | [`ReporterBuilder::retry_budget`] | `admit_client_retries_total{class, outcome}`, `admit_client_retry_requests_total{class}`, labelled `client` |
//! | `ReporterBuilder::drain` (`tokio` feature) | `admit_offered_requests_total{kind="drain"}`, `admit_inflight_requests`, `admit_open_connections`, `admit_active_sessions`, `admit_draining` |
//!
//! Every series of a limiter is labelled `limiter="<its name>"` (a plan's, `planner="…"`, a client
//! throttle's or retry budget's, `client="…"`), so a limiter must be named; a drain's series carry
//! no label (one drain per process). Each request is counted in `admit_offered_requests_total`
//! once, by the first admit layer that saw it, so the sum of a service's series is its offered
//! load, whatever the order of the layers. The [guide](crate::guide::metrics) shows the PromQL for
//! each autoscaling input.
//!
//! Other components publish the same way: implement [`Source`] (register handles when built,
//! set them in [`Source::report`]) and add it with [`ReporterBuilder::source`].
//!
//! Without the facade, read the same numbers yourself: `Shedder::snapshot`, `WarmUp::totals`,
//! `WarmUp::snapshot`, `Throttle::totals` and `RetryBudget::totals` are cheap and
//! allocation-free.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use admit::metrics::Reporter;
//! use admit::shed::Shedder;
//! use admit::warmup::WarmUp;
//!
//! // Install the recorder first (e.g. `PrometheusBuilder::new().install_recorder()`).
//! let shedder = Arc::new(Shedder::builder().name("api").build()?);
//! let bucket = Arc::new(WarmUp::builder(500.0).name("api").build()?);
//! let reporter = Reporter::builder()
//!     .shedder(Arc::clone(&shedder))
//!     .warm_up(Arc::clone(&bucket))
//!     .build()?;
//! reporter.report(); // before each scrape, or on a timer
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(all(feature = "tower", feature = "tokio"))]
mod bound;
mod client;
mod describe;
#[cfg(feature = "tokio")]
mod drain;
mod error;
pub mod names;
mod plan;
mod queue;
mod reporter;
mod shed;
mod warmup;

#[cfg(feature = "tokio")]
use self::drain::DrainMetrics;
pub use self::error::MetricsError;
pub use self::plan::PlanMetrics;
pub use self::reporter::{Reporter, ReporterBuilder, Source};
use self::shed::ShedderMetrics;
use self::warmup::WarmUpMetrics;
