//! `admit-scaler`: a [KEDA](https://keda.sh) external scaler that turns a wait-time service
//! level into replicas with Erlang C.
//!
//! Every evaluation reads the arrival rate λ and the mean service time from Prometheus, finds
//! the fewest servers for which "P(wait ≤ T) ≥ p" holds ([`admit::erlang`]), turns servers into
//! replicas with hysteresis ([`admit::erlang::ReplicaPlanner`]) and answers KEDA over gRPC.
//!
//! The serving core, each module using only those listed before it:
//!
//! - [`excerpt`]: how messages quote outside text.
//! - [`metadata`]: a trigger's metadata parsed into its configuration, and the key that names
//!   a trigger.
//! - [`decision`]: the pure core, from λ and the service time to replicas; it knows the
//!   queueing math and the trigger's configuration, not Prometheus nor gRPC.
//! - [`prometheus`]: the instant-query client, with every failure typed.
//! - [`telemetry`]: the scaler's own metrics.
//! - [`service`]: the gRPC service KEDA calls ([`proto`] is its generated protocol),
//!   per-trigger state, and the one table from a failure to its gRPC code
//!   ([`service::code`]).
//! - [`transport`]: the gRPC and HTTP servers, TLS.
//!
//! [`tools`] holds what the operator's commands (`check`, `plan`, `replay`) use besides: the
//! manifest reader, offline evaluations and the chart.

#![forbid(unsafe_code)]

pub mod decision;
pub mod excerpt;
mod measure;
pub mod metadata;
pub mod prometheus;
pub mod proto;
pub mod service;
pub mod telemetry;
pub mod tools;
pub mod transport;
