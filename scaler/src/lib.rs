//! `admit-scaler`: a [KEDA](https://keda.sh) external scaler that turns a wait-time service
//! level into replicas with Erlang C.
//!
//! Every evaluation reads the arrival rate λ and the mean service time from Prometheus, finds
//! the fewest servers for which "P(wait ≤ T) ≥ p" holds ([`admit::erlang`]), turns servers into
//! replicas with hysteresis ([`admit::erlang::ReplicaPlanner`]) and answers KEDA over gRPC.
//! So far the library holds the parts: the trigger metadata ([`metadata`]), the Prometheus
//! client ([`prometheus`]), one evaluation ([`decision`]) and the protocol ([`proto`]); the
//! `admit-scaler` binary and its gRPC service come next.

#![forbid(unsafe_code)]

pub mod decision;
pub mod metadata;
pub mod prometheus;
pub mod proto;
