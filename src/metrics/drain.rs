//! A drain's metrics.

use std::fmt;

use metrics::{Counter, Gauge};

use super::Source;
use super::names::{self, KIND};
use crate::drain::{Drain, Phase};

/// Publishes a [`Drain`]'s [snapshot](Drain::snapshot) through the `metrics` facade (see
/// [`ReporterBuilder::drain`](super::ReporterBuilder::drain)).
pub(crate) struct DrainMetrics {
    drain: Drain,
    in_flight: Gauge,
    connections: Gauge,
    sessions: Gauge,
    draining: Gauge,
    offered: Counter,
}

impl DrainMetrics {
    /// Registers the drain's series with the installed recorder.
    pub(crate) fn new(drain: Drain) -> Self {
        super::describe::drain();
        DrainMetrics {
            drain,
            in_flight: metrics::gauge!(names::DRAIN_IN_FLIGHT),
            connections: metrics::gauge!(names::DRAIN_CONNECTIONS),
            sessions: metrics::gauge!(names::DRAIN_SESSIONS),
            draining: metrics::gauge!(names::DRAINING),
            offered: metrics::counter!(names::OFFERED_REQUESTS, KIND => "drain"),
        }
    }

    /// Reads the drain's snapshot and publishes it.
    pub(crate) fn report(&self) {
        let snapshot = self.drain.snapshot();
        self.in_flight.set(snapshot.in_flight as f64);
        self.connections.set(snapshot.connections as f64);
        self.sessions.set(snapshot.sessions as f64);
        let draining = snapshot.phase >= Phase::Announced;
        self.draining.set(if draining { 1.0 } else { 0.0 });
        self.offered.absolute(snapshot.offered);
    }
}

impl Source for DrainMetrics {
    fn family(&self) -> &'static str {
        "admit_drain"
    }

    /// Empty: the drain's series carry no label.
    fn name(&self) -> &str {
        ""
    }

    fn report(&self) {
        DrainMetrics::report(self);
    }
}

impl fmt::Debug for DrainMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DrainMetrics")
            .field("snapshot", &self.drain.snapshot())
            .finish_non_exhaustive()
    }
}
