//! `admit-scaler`: a [KEDA](https://keda.sh) external scaler that turns a wait-time service
//! level into replicas with Erlang C.
//!
//! Every evaluation reads the arrival rate λ and the mean service time from Prometheus, finds
//! the fewest servers for which "P(wait ≤ T) ≥ p" holds ([`admit::erlang`]), turns servers into
//! replicas with hysteresis ([`admit::erlang::ReplicaPlanner`]) and answers KEDA over gRPC.
//! The binary is the program; this library is its parts, for the tests.

#![forbid(unsafe_code)]

pub mod proto;
