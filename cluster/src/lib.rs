//! `admit-cluster`: admit's autoscaling loop on one machine, with real parts.
//!
//! - [`hpa`]: the Horizontal Pod Autoscaler's arithmetic, as Kubernetes computes it: replicas
//!   from an `AverageValue` external metric or from CPU utilisation, with tolerance, the
//!   scale-up and scale-down policies and the stabilisation windows.
//! - [`fleet`]: the replicas, processes in CPU cgroups behind the proxy and scraped by
//!   Prometheus, started and stopped as Kubernetes does.
//! - [`keda`]: KEDA's calls to an external scaler and its conversions of the numbers.
//! - [`policy`]: the autoscaling policies compared, each with its documented defaults.
//! - [`replica`]: the sample service each replica runs.
//! - [`run`]: every policy over one load trace, and [`report`], the comparison, and
//!   [`frontier`], each setting's SLO attainment against its replica-seconds.
//! - [`sim`]: the same loop as a seeded discrete-event simulation, for fleets one machine
//!   cannot run.

pub mod duration;
pub mod fleet;
pub mod frontier;
pub mod hpa;
pub mod keda;
pub mod policy;
pub mod replica;
pub mod report;
pub mod run;
pub mod sim;
