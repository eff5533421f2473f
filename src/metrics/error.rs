//! Why a set of metrics could not be built.

use std::error::Error;
use std::fmt;

/// Why a [`Reporter`](super::Reporter) or a set of metrics could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetricsError {
    /// The limiter has no name: its series would carry no `limiter` label to tell them from
    /// another limiter's. Name it with its builder's `name(..)`.
    Unnamed {
        /// What kind of limiter: `shedder`, `warm-up bucket`, `bound`, `planner`, `throttle`,
        /// `map of throttles` or `retry budget`.
        kind: &'static str,
    },
    /// Two sources of one reporter would publish the same series: two shedders, two warm-up
    /// buckets, two planners, two client throttles (single or maps) or two retry budgets with
    /// the same name, or two drains (whose name is empty).
    DuplicateName {
        /// The metric family the two share, such as `admit_shed`.
        family: &'static str,
        /// The name they share.
        name: String,
    },
}

impl fmt::Display for MetricsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetricsError::Unnamed { kind } => write!(
                f,
                "the {kind} has no name to label its metrics with: give its builder a name(..)"
            ),
            MetricsError::DuplicateName { family, name } => write!(
                f,
                "two sources would publish the {family} metrics labelled {name:?}: names must \
                 differ"
            ),
        }
    }
}

impl Error for MetricsError {}
