//! `admit-scaler`: a [KEDA](https://keda.sh) external scaler that turns a wait-time service
//! level into replicas with Erlang C.
//!
//! Every evaluation reads the arrival rate λ and the mean service time from Prometheus, finds
//! the fewest servers for which "P(wait ≤ T) ≥ p" holds ([`admit::erlang`]), turns servers into
//! replicas with hysteresis ([`admit::erlang::ReplicaPlanner`]) and answers KEDA over gRPC.

#![forbid(unsafe_code)]

mod calendar;
pub mod chart;
pub mod decision;
pub mod excerpt;
pub mod manifest;
mod measure;
pub mod metadata;
pub mod offline;
pub mod prometheus;
pub mod proto;
pub mod service;
pub mod telemetry;
pub mod transport;
