//! A shedder's metrics.

use std::fmt;
use std::sync::OnceLock;

use metrics::{Counter, Gauge, SharedString};

use super::names::{self, CLASS, ERROR, KIND, LIMITER, OUTCOME, REASON};
use super::queue::{GateSeries, ProbeSeries};
use super::{MetricsError, Source};
use crate::Shared;
use crate::clock::Clock;
use crate::criticality::Criticality;
use crate::shed::Shedder;
use crate::signal::Cause;
use crate::signal::queue::header::HeaderError;

/// Publishes a [`Shedder`]'s [snapshot](Shedder::snapshot) through the `metrics` facade (see
/// [`ReporterBuilder::shedder`](super::ReporterBuilder::shedder)).
pub(crate) struct ShedderMetrics<C: Clock + 'static> {
    shedder: Shared<Shedder<C>>,
    passed: Counter,
    failed: Counter,
    dropped: Counter,
    offered: Counter,
    service_seconds: Gauge,
    in_flight: Gauge,
    /// Registered the first time the CPU load is known, so that it is absent until then.
    cpu: OnceLock<Gauge>,
    cpu_threshold: Gauge,
    shedding: Gauge,
    max_flight: Gauge,
    headroom: Gauge,
    dropped_by: [Counter; Cause::COUNT],
    /// Admitted and refused, by class.
    by_class: [(Counter, Counter); Criticality::COUNT],
    /// The cut's gauge, by class.
    cut: [Gauge; Criticality::COUNT],
    /// Registered the first time the offset is known, so that it is absent until then.
    clock_offset: OnceLock<Gauge>,
    /// With a gate, by [`HeaderError::ALL`]'s order.
    header_errors: Option<[Counter; HeaderError::ALL.len()]>,
    gate: Option<GateSeries>,
    probe: Option<ProbeSeries>,
}

impl<C: Clock + 'static> ShedderMetrics<C> {
    /// Registers the shedder's series with the installed recorder.
    ///
    /// # Errors
    ///
    /// [`MetricsError::Unnamed`] if the shedder has no name.
    pub(crate) fn new(shedder: impl Into<Shared<Shedder<C>>>) -> Result<Self, MetricsError> {
        let shedder = shedder.into();
        let name: SharedString = shedder
            .name()
            .ok_or(MetricsError::Unnamed { kind: "shedder" })?
            .to_owned()
            .into();
        super::describe::shedder();
        let requests = |outcome: &'static str| metrics::counter!(names::SHED_REQUESTS, LIMITER => name.clone(), OUTCOME => outcome);
        let gauge = |metric: &'static str| metrics::gauge!(metric, LIMITER => name.clone());
        Ok(ShedderMetrics {
            passed: requests("passed"),
            failed: requests("failed"),
            dropped: requests("dropped"),
            offered: metrics::counter!(names::OFFERED_REQUESTS, LIMITER => name.clone(),
                KIND => "shed"),
            service_seconds: gauge(names::SHED_SERVICE_SECONDS),
            in_flight: gauge(names::SHED_IN_FLIGHT),
            cpu: OnceLock::new(),
            cpu_threshold: gauge(names::SHED_CPU_THRESHOLD),
            shedding: gauge(names::SHED_SHEDDING),
            max_flight: gauge(names::SHED_MAX_FLIGHT),
            headroom: gauge(names::SHED_HEADROOM),
            dropped_by: Cause::ALL.map(|reason| {
                metrics::counter!(names::SHED_DROPPED, LIMITER => name.clone(),
                    REASON => reason.label())
            }),
            by_class: Criticality::ALL.map(|class| {
                let counter = |outcome: &'static str| {
                    metrics::counter!(names::SHED_CLASS_REQUESTS, LIMITER => name.clone(),
                        CLASS => class.as_str(), OUTCOME => outcome)
                };
                (counter("admitted"), counter("refused"))
            }),
            cut: Criticality::ALL.map(|class| {
                metrics::gauge!(names::SHED_CUT, LIMITER => name.clone(), CLASS => class.as_str())
            }),
            clock_offset: OnceLock::new(),
            header_errors: shedder.queue_gate().map(|_| {
                HeaderError::ALL.map(|error| {
                    metrics::counter!(names::QUEUE_HEADER_ERRORS, LIMITER => name.clone(),
                        ERROR => error.as_str())
                })
            }),
            gate: shedder.queue_gate().map(|_| GateSeries::new(&name)),
            probe: shedder.runtime_probe().map(|_| ProbeSeries::new(&name)),
            shedder,
        })
    }

    /// Reads the shedder's snapshot and publishes it.
    pub(crate) fn report(&self) {
        let snapshot = self.shedder.snapshot();
        self.passed.absolute(snapshot.passed);
        self.failed.absolute(snapshot.failed);
        self.dropped.absolute(snapshot.dropped);
        self.offered.absolute(snapshot.offered);
        self.service_seconds
            .set(snapshot.service_time.as_secs_f64());
        self.in_flight.set(snapshot.flying as f64);
        match snapshot.cpu_permille {
            Some(permille) => self
                .cpu
                .get_or_init(|| self.register(names::SHED_CPU))
                .set(f64::from(permille) / 1000.0),
            None => {
                if let Some(cpu) = self.cpu.get() {
                    cpu.set(f64::NAN);
                }
            }
        }
        self.cpu_threshold
            .set(f64::from(snapshot.cpu_threshold) / 1000.0);
        self.shedding.set(if snapshot.hot { 1.0 } else { 0.0 });
        self.max_flight.set(snapshot.max_flight);
        self.headroom.set(snapshot.overload_factor);
        for (counter, (_, count)) in self.dropped_by.iter().zip(self.shedder.dropped_by().iter()) {
            counter.absolute(count);
        }
        for ((admitted, refused), counts) in self.by_class.iter().zip(snapshot.by_class) {
            admitted.absolute(counts.admitted);
            refused.absolute(counts.refused);
        }
        for (gauge, class) in self.cut.iter().zip(Criticality::ALL) {
            gauge.set(if snapshot.cut == Some(class) {
                1.0
            } else {
                0.0
            });
        }
        if let Some(offset) = snapshot.clock_offset_nanos {
            self.clock_offset
                .get_or_init(|| self.register(names::QUEUE_CLOCK_OFFSET))
                .set(offset as f64 / 1e9);
        }
        for (counter, count) in self
            .header_errors
            .iter()
            .flatten()
            .zip(snapshot.header_errors)
        {
            counter.absolute(count);
        }
        let now = self.shedder.clock().now_nanos();
        if let (Some(series), Some(gate)) = (&self.gate, self.shedder.queue_gate()) {
            series.report(gate, now);
        }
        if let (Some(series), Some(probe)) = (&self.probe, self.shedder.runtime_probe()) {
            series.report(probe);
        }
    }

    fn register(&self, metric: &'static str) -> Gauge {
        let name = self.shedder.name().unwrap_or_default().to_owned();
        metrics::gauge!(metric, LIMITER => name)
    }
}

impl<C: Clock + 'static> Source for ShedderMetrics<C> {
    fn family(&self) -> &'static str {
        "admit_shed"
    }

    fn name(&self) -> &str {
        self.shedder.name().unwrap_or_default()
    }

    fn report(&self) {
        ShedderMetrics::report(self);
    }
}

impl<C: Clock + 'static> fmt::Debug for ShedderMetrics<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShedderMetrics")
            .field("limiter", &self.shedder.name())
            .finish_non_exhaustive()
    }
}
