//! Capacity planning with queueing theory: how many servers meet a wait-time target.
//!
//! - [`MMc`]: the M/M/c (Erlang C) queue. Erlang B, and [`min_servers`](MMc::min_servers) for
//!   a service-level or mean-wait [`Target`]; at a number of servers
//!   ([`with_servers`](MMc::with_servers), a [`Staffed`]) Erlang C, the probability and
//!   distribution of waiting, mean waits and queue lengths, occupancy and wait percentiles.
//! - [`ErlangA`]: the M/M/N+M queue, whose customers abandon after an exponential patience.
//! - [`Fleet`]: replicas behind a load balancer, queueing as its [`Balancing`] makes them
//!   (pooled, round-robin, random, least-request).
//! - [`QueueModel`]: what all three answer a planner (service level, the fewest servers for one,
//!   waits, occupancy), so that one staffing code serves any of them.
//! - [`ReplicaPlanner`]: turns server counts into replica counts that do not flap.
//!
//! Feed it the arrival rate and mean service time a
//! [`ShedSnapshot`](crate::shed::ShedSnapshot) measures, or your metrics system's.
//!
//! # Exact at any scale
//!
//! The textbook series `Σ aᵏ/k!` overflows to NaN near `a ≈ 710` erlangs, and `aᶜ/c!` from
//! `c = 171`. Here Erlang B comes from its forward recurrence, started `10√a` servers below the
//! load from its overload asymptote (the error of the start is damped by `e^(−50)` on the way
//! up) and stepped with the exact rates rather than a rounded `λ/μ`; C, `1 − C`, the service
//! level and the mean wait come from forms that never cancel, with the stability margin `cμ − λ`
//! rounded once (`mul_add`). Against high-precision references the results are within 1e-13
//! relative up to ten million erlangs, and a minimum-servers search is one upward pass of
//! `O(√a)` steps. The math allocates nothing. Loads up to 10¹² erlangs are accepted. See the
//! [guide](crate::guide::capacity) for sizing a service with it.
//!
//! Erlang-A sums a series per query. It is accurate to about 1e-13 while there are at least as
//! many servers as the load, and to about 1e-11 in overload. Its work is bounded: a query sums
//! at most [`ErlangA::QUERY_TERMS`] terms and a minimum-servers search, which gallops and
//! bisects (`O(log a)` evaluations), at most [`ErlangA::SEARCH_TERMS`]; beyond them (a deep
//! overload, or customers very patient for the load) it returns [`ErlangError::OutOfRange`].
//!
//! # Example
//!
//! ```
//! use admit::erlang::{MMc, Target};
//!
//! // 1200 requests per second, 80 ms each: 96 erlangs.
//! let api = MMc::new(1200.0, 1.0 / 0.08)?;
//! // 95 % of requests should wait less than 10 ms for a worker.
//! let workers = api.min_servers(Target::ServiceLevel { within: 0.010, at_least: 0.95 })?;
//! let staffed = api.with_servers(workers)?;
//! assert!(staffed.service_level(0.010)? >= 0.95);
//! assert!(api.with_servers(workers - 1)?.service_level(0.010)? < 0.95);
//! println!("{workers} workers, {:.0} % busy", staffed.occupancy() * 100.0);
//! # Ok::<(), admit::erlang::ErlangError>(())
//! ```

mod abandon;
mod error;
mod fleet;
mod loss;
mod mmc;
mod model;
mod planner;
mod round_robin;
#[cfg(all(test, not(admit_loom)))]
mod search_tests;

pub use self::abandon::{ErlangA, ImpatientTarget};
pub use self::error::ErlangError;
pub use self::fleet::{Balancing, Fleet};
pub use self::mmc::{MMc, Staffed, StaffingOptions, Target};
pub use self::model::QueueModel;
pub use self::planner::{PlannerConfig, ReplicaPlanner};
