//! A bound's metrics.

use std::fmt;

use metrics::{Counter, Gauge, SharedString};

use super::names::{self, CLASS, KIND, LIMITER, OUTCOME};
use super::{MetricsError, Source};
use crate::Shared;
use crate::bound::{Bound, WaitCounts};
use crate::clock::Clock;
use crate::criticality::Criticality;

/// How to read one outcome's count from [`WaitCounts`].
type Read = fn(&WaitCounts) -> u64;

/// The outcomes [`names::BOUND_REQUESTS`] counts, with how to read each.
const OUTCOMES: [(&str, Read); 7] = [
    ("waited", |counts| counts.waited),
    ("entered", |counts| counts.entered),
    ("cancelled", |counts| counts.cancelled),
    ("full", |counts| counts.full),
    ("pushed_out", |counts| counts.pushed_out),
    ("timed_out", |counts| counts.timed_out),
    ("deadline", |counts| counts.deadline),
];

/// Publishes a [`Bound`]'s [snapshot](Bound::snapshot) through the `metrics` facade (see
/// [`ReporterBuilder::bound`](super::ReporterBuilder::bound)), labelled
/// `limiter="<the bound's name>"`.
pub(crate) struct BoundMetrics<C: Clock + 'static> {
    bound: Shared<Bound<C>>,
    limit: Gauge,
    in_service: Gauge,
    waiting: Gauge,
    offered: Counter,
    /// By class, then by [`OUTCOMES`].
    requests: [[Counter; OUTCOMES.len()]; Criticality::COUNT],
}

impl<C: Clock + 'static> BoundMetrics<C> {
    /// Registers the bound's series with the installed recorder.
    ///
    /// # Errors
    ///
    /// [`MetricsError::Unnamed`] if the bound has no name.
    pub(crate) fn new(bound: impl Into<Shared<Bound<C>>>) -> Result<Self, MetricsError> {
        let bound = bound.into();
        let name: SharedString = bound
            .name()
            .ok_or(MetricsError::Unnamed { kind: "bound" })?
            .to_owned()
            .into();
        super::describe::bound();
        let gauge = |metric: &'static str| metrics::gauge!(metric, LIMITER => name.clone());
        Ok(BoundMetrics {
            limit: gauge(names::BOUND_LIMIT),
            in_service: gauge(names::BOUND_IN_SERVICE),
            waiting: gauge(names::BOUND_WAITING),
            offered: metrics::counter!(names::OFFERED_REQUESTS, LIMITER => name.clone(),
                KIND => "bound"),
            requests: std::array::from_fn(|class| {
                std::array::from_fn(|outcome| {
                    metrics::counter!(names::BOUND_REQUESTS, LIMITER => name.clone(),
                        CLASS => Criticality::ALL[class].as_str(), OUTCOME => OUTCOMES[outcome].0)
                })
            }),
            bound,
        })
    }

    /// Reads the bound's snapshot and publishes it.
    pub(crate) fn report(&self) {
        let snapshot = self.bound.snapshot();
        self.limit.set(snapshot.limit as f64);
        self.in_service.set(snapshot.in_service as f64);
        self.waiting.set(snapshot.waiting as f64);
        self.offered.absolute(snapshot.offered);
        for (counters, counts) in self.requests.iter().zip(&snapshot.classes) {
            for (counter, (_, read)) in counters.iter().zip(OUTCOMES) {
                counter.absolute(read(counts));
            }
        }
    }
}

impl<C: Clock + 'static> Source for BoundMetrics<C> {
    fn family(&self) -> &'static str {
        "admit_bound"
    }

    fn name(&self) -> &str {
        self.bound.name().unwrap_or_default()
    }

    fn report(&self) {
        BoundMetrics::report(self);
    }
}

impl<C: Clock + 'static> fmt::Debug for BoundMetrics<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoundMetrics")
            .field("limiter", &self.bound.name())
            .finish_non_exhaustive()
    }
}
