//! The reporter: publishes every source it was built with.

use std::fmt;

use super::{MetricsError, ShedderMetrics, WarmUpMetrics};
use crate::Shared;
use crate::clock::Clock;
use crate::shed::Shedder;
use crate::warmup::WarmUp;
use crate::warmup::sentinel::SentinelWarmUp;

/// Something that publishes metrics: it registers its handles when built and sets them in
/// [`report`](Source::report). The shedder's and the warm-up buckets' metrics are sources;
/// implement it to publish your own beside them.
pub trait Source: Send + Sync + fmt::Debug {
    /// The prefix of the series this source publishes, such as `admit_shed`: two sources of
    /// one family must have different names.
    fn family(&self) -> &'static str;
    /// The name that labels this source's series.
    fn name(&self) -> &str;
    /// Reads the source's state and publishes it. Must not block.
    fn report(&self);
}

/// Publishes a set of [sources](Source): [`report`](Self::report) sets every series from the
/// sources' current state. Build one with [`Reporter::builder`] after installing the recorder.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use admit::metrics::{MetricsError, Reporter};
/// use admit::shed::Shedder;
///
/// let a = Arc::new(Shedder::builder().name("search").build()?);
/// let b = Arc::new(Shedder::builder().name("search").build()?);
/// let duplicate = Reporter::builder().shedder(a).shedder(b).build();
/// assert!(matches!(duplicate, Err(MetricsError::DuplicateName { .. })));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Reporter {
    sources: Vec<Box<dyn Source>>,
}

impl Reporter {
    /// Starts a reporter with no sources.
    pub fn builder() -> ReporterBuilder {
        ReporterBuilder {
            sources: Vec::new(),
            error: None,
        }
    }

    /// Publishes every source's current state. Allocates nothing once each series exists.
    pub fn report(&self) {
        for source in &self.sources {
            source.report();
        }
    }

    /// Reports now and then every `every`, on tokio's timer, forever: spawn it
    /// (`tokio::spawn(reporter.run(period))`). A tick missed under load is skipped, not made up.
    ///
    /// # Panics
    ///
    /// If `every` is zero, or outside a tokio runtime with its timer.
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub async fn run(self, every: std::time::Duration) {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            ticks.tick().await;
            self.report();
        }
    }
}

impl fmt::Debug for Reporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reporter")
            .field("sources", &self.sources)
            .finish()
    }
}

/// Builds a [`Reporter`]: each source registers its series as it is added, so install the
/// recorder first. The first error is kept and returned by [`build`](Self::build).
#[must_use = "a builder does nothing until built"]
pub struct ReporterBuilder {
    sources: Vec<Box<dyn Source>>,
    error: Option<MetricsError>,
}

impl ReporterBuilder {
    /// Adds a shedder's series: its request totals by outcome, the requests offered to it
    /// first, service time, requests in flight, CPU load, whether it is shedding, its learned
    /// limit, and with a queue gate its waits and the request-start stamps it could not read
    /// (see [`names`](super::names) for each), labelled `limiter="<the shedder's name>"`. The
    /// CPU series is registered at the first report that knows the load, so it is absent, not
    /// 0, until the load is known, and NaN whenever the load is no longer known; the clock
    /// offset likewise appears with the first stamped request. The shedder must be named.
    pub fn shedder<C: Clock + 'static>(self, shedder: impl Into<Shared<Shedder<C>>>) -> Self {
        self.add(ShedderMetrics::new(shedder))
    }

    /// Adds a [`WarmUp`]'s series: its decisions by outcome, the requests offered to it first,
    /// the rate in force and the full rate (permits per second), the stored permits and the
    /// warm-up progress, labelled `limiter="<the bucket's name>"`. The bucket must be named.
    pub fn warm_up<C: Clock + 'static>(self, bucket: impl Into<Shared<WarmUp<C>>>) -> Self {
        self.add(WarmUpMetrics::new(bucket))
    }

    /// [`warm_up`](Self::warm_up) for a [`SentinelWarmUp`].
    pub fn sentinel_warm_up<C: Clock + 'static>(
        self,
        bucket: impl Into<Shared<SentinelWarmUp<C>>>,
    ) -> Self {
        self.add(WarmUpMetrics::new(bucket))
    }

    /// Adds a [`Bound`](crate::bound::Bound)'s series: its bound, the requests in service and
    /// waiting, the requests offered to it first, and what became of the requests that could
    /// not enter at once, by class and outcome (see [`names`](super::names) for each), labelled
    /// `limiter="<the bound's name>"`. The bound must be named.
    #[cfg(all(feature = "tower", feature = "tokio"))]
    #[cfg_attr(docsrs, doc(cfg(all(feature = "tower", feature = "tokio"))))]
    pub fn bound<C: Clock + 'static>(
        self,
        bound: impl Into<Shared<crate::bound::Bound<C>>>,
    ) -> Self {
        self.add(super::bound::BoundMetrics::new(bound))
    }

    /// Adds a drain's series: requests in flight, open connections, active sessions, whether
    /// the replica is leaving, and the requests offered to its layer first. They carry no label
    /// but the offered requests' `kind="drain"` (one drain per process; Prometheus' target
    /// labels tell the pods apart), so a reporter takes one drain.
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub fn drain(self, drain: crate::drain::Drain) -> Self {
        self.add(Ok(super::DrainMetrics::new(drain)))
    }

    /// Adds a client [`Throttle`](crate::client::Throttle)'s series: the requests it was asked
    /// to send and those it refused locally, by class, and its refusal probability (see
    /// [`names`](super::names) for each), labelled `client` and `destination` both with the
    /// throttle's name. The throttle must be named.
    pub fn throttle<C: Clock + 'static>(
        self,
        throttle: impl Into<Shared<crate::client::Throttle<C>>>,
    ) -> Self {
        self.add(super::client::ThrottleMetrics::new(throttle))
    }

    /// Adds a [`Throttles`](crate::client::Throttles) map's series: those of
    /// [`throttle`](Self::throttle) for each destination, labelled `client="<the map's name>"`
    /// and `destination="<the key's Display>"`.
    ///
    /// Only the first [`MAX_DESTINATIONS`](super::names::MAX_DESTINATIONS) (64) destinations
    /// the reports see get their own label, kept for good (a recorder keeps every series);
    /// later ones are summed into `destination="other"`, whose probability is the highest of
    /// theirs. A destination that leaves the map and returns has a new throttle, counting from
    /// 0: each report adds what every throttle counted since the previous one, and adds the
    /// rest of a throttle's counts at the report that finds it gone, so the counters never go
    /// back. A throttle made and evicted between two reports is not seen. The reports hold the
    /// map's lock while they copy its entries, and remember each destination in the map (at
    /// most its capacity). Publish a map through one reporter only: each adds to the counters.
    /// The map must be named.
    pub fn throttles<K, C>(
        self,
        throttles: impl Into<Shared<crate::client::Throttles<K, C>>>,
    ) -> Self
    where
        K: std::hash::Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
        C: Clock + Clone + 'static,
    {
        self.add(super::client::ThrottlesMetrics::new(throttles))
    }

    /// Adds a client [`RetryBudget`](crate::client::RetryBudget)'s series: the requests
    /// deposited and the retries spent and denied, by class (see [`names`](super::names)),
    /// labelled `client="<the budget's name>"`. The budget must be named.
    pub fn retry_budget<C: Clock + 'static>(
        self,
        budget: impl Into<Shared<crate::client::RetryBudget<C>>>,
    ) -> Self {
        self.add(super::client::RetryBudgetMetrics::new(budget))
    }

    /// Adds a source of your own.
    pub fn source(self, source: impl Source + 'static) -> Self {
        self.add(Ok(source))
    }

    fn add(mut self, source: Result<impl Source + 'static, MetricsError>) -> Self {
        if self.error.is_some() {
            return self;
        }
        match source {
            Ok(source) => {
                let clash = self.sources.iter().any(|known| {
                    known.family() == source.family() && known.name() == source.name()
                });
                if clash {
                    self.error = Some(MetricsError::DuplicateName {
                        family: source.family(),
                        name: source.name().to_owned(),
                    });
                } else {
                    self.sources.push(Box::new(source));
                }
            }
            Err(error) => self.error = Some(error),
        }
        self
    }

    /// The reporter.
    ///
    /// # Errors
    ///
    /// The first error met while adding sources: [`MetricsError::Unnamed`] for a limiter
    /// without a name, [`MetricsError::DuplicateName`] for two sources that would publish the
    /// same series.
    pub fn build(self) -> Result<Reporter, MetricsError> {
        match self.error {
            Some(error) => Err(error),
            None => Ok(Reporter {
                sources: self.sources,
            }),
        }
    }
}

impl fmt::Debug for ReporterBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReporterBuilder")
            .field("sources", &self.sources)
            .field("error", &self.error)
            .finish()
    }
}
