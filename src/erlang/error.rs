//! Why a capacity computation was refused.

use std::error::Error;
use std::fmt;

/// A queueing computation could not be carried out.
///
/// Inputs are checked in a fixed order: finiteness first, then sign and range, then stability.
/// No computation in [`erlang`](super) returns NaN, a silently clamped value or a probability
/// outside `[0, 1]`: it returns one of these instead.
///
/// # Example
///
/// ```
/// use admit::erlang::{ErlangError, MMc};
///
/// let queue = MMc::new(10.0, 1.0)?;
/// assert_eq!(queue.with_servers(10), Err(ErlangError::Unstable { rho: 1.0 }));
/// assert!(matches!(MMc::new(f64::NAN, 1.0), Err(ErlangError::NonFinite { field: "arrival_rate" })));
/// # Ok::<(), ErlangError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum ErlangError {
    /// `field` is NaN or infinite (an infinite wait time included).
    NonFinite {
        /// The input's name.
        field: &'static str,
    },
    /// `field` is negative (−0.0 counts as 0).
    Negative {
        /// The input's name.
        field: &'static str,
    },
    /// A rate that must be positive (`service_rate`, `abandon_rate`) is zero or negative.
    NonPositiveRate {
        /// The input's name.
        field: &'static str,
    },
    /// The number of servers is 0.
    ZeroServers,
    /// The queue never empties: the arrival rate is at least the total service rate
    /// (`λ ≥ c·μ`, equality included), so waits grow without bound. `rho` is `λ / (c·μ)`.
    Unstable {
        /// The occupancy `λ / (c·μ)`, at least 1.
        rho: f64,
    },
    /// A probability target (a service level or a percentile) is outside `[0, 1)`. A target of
    /// 1 cannot be met by any finite number of servers with a finite wait.
    TargetOutOfRange {
        /// The target that was given.
        target: f64,
    },
    /// An option is outside its range (see the option's documentation).
    OutOfRange {
        /// The option's name.
        field: &'static str,
        /// The value that was given.
        value: f64,
    },
    /// No number of servers up to `max_servers` meets the target.
    Unreachable {
        /// The largest number of servers that was tried.
        max_servers: u64,
    },
}

impl fmt::Display for ErlangError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErlangError::NonFinite { field } => write!(f, "`{field}` must be finite"),
            ErlangError::Negative { field } => write!(f, "`{field}` must not be negative"),
            ErlangError::NonPositiveRate { field } => {
                write!(f, "`{field}` must be greater than zero")
            }
            ErlangError::ZeroServers => f.write_str("the number of servers must be at least 1"),
            ErlangError::Unstable { rho } => write!(
                f,
                "unstable: the arrival rate is at least the service capacity (occupancy {rho})"
            ),
            ErlangError::TargetOutOfRange { target } => {
                write!(f, "target {target} must be in [0, 1)")
            }
            ErlangError::OutOfRange { field, value } => {
                write!(f, "`{field}` ({value}) is out of range")
            }
            ErlangError::Unreachable { max_servers } => {
                write!(
                    f,
                    "no number of servers up to {max_servers} meets the target"
                )
            }
        }
    }
}

impl Error for ErlangError {}
