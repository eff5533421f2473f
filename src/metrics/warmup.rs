//! A warm-up bucket's metrics.

use std::fmt;

use metrics::{Counter, Gauge, SharedString};

use super::names::{self, KIND, LIMITER, OUTCOME};
use super::{MetricsError, Source};
use crate::Shared;
use crate::clock::Clock;
use crate::warmup::WarmUp;
use crate::warmup::sentinel::SentinelWarmUp;

/// The warm-up buckets [`WarmUpMetrics`] publishes: [`WarmUp`] and [`SentinelWarmUp`] (sealed).
pub trait WarmUpBucket: sealed::Bucket + Send + Sync + 'static {}

impl<C: Clock + Send + Sync + 'static> WarmUpBucket for WarmUp<C> {}
impl<C: Clock + Send + Sync + 'static> WarmUpBucket for SentinelWarmUp<C> {}

mod sealed {
    use crate::clock::Clock;
    use crate::warmup::WarmUp;
    use crate::warmup::sentinel::SentinelWarmUp;

    /// What a warm-up bucket reports, from either kind.
    #[derive(Clone, Copy, Debug)]
    pub struct Reading {
        pub(super) admitted: u64,
        pub(super) refused: u64,
        pub(super) offered: u64,
        pub(super) stored: f64,
        pub(super) limit: f64,
        pub(super) full_rate: f64,
        pub(super) progress: f64,
    }

    /// How [`WarmUpMetrics`](super::WarmUpMetrics) reads a bucket; outside the crate, unnameable.
    pub trait Bucket {
        fn bucket_name(&self) -> Option<&str>;
        fn reading(&self) -> Reading;
    }

    /// Both kinds report through the same methods.
    macro_rules! bucket {
        ($kind:ident) => {
            impl<C: Clock> Bucket for $kind<C> {
                fn bucket_name(&self) -> Option<&str> {
                    self.name()
                }

                fn reading(&self) -> Reading {
                    let totals = self.totals();
                    let snapshot = self.snapshot();
                    Reading {
                        admitted: totals.admitted,
                        refused: totals.refused,
                        offered: totals.offered,
                        stored: snapshot.stored_tokens,
                        limit: snapshot.qps_limit,
                        full_rate: self.permits_per_second(),
                        progress: snapshot.progress(),
                    }
                }
            }
        };
    }

    bucket!(WarmUp);
    bucket!(SentinelWarmUp);
}

/// Publishes a warm-up bucket ([`WarmUp`] or [`SentinelWarmUp`]) through the `metrics` facade:
/// its decisions by outcome, the requests offered to it first, the rate in force and the full
/// rate (permits per second), the stored permits and the warm-up progress (see [`names`] for
/// each series).
///
/// The handles are registered with the recorder installed when this is built, labelled
/// `limiter="<the bucket's name>"`; [`report`](Self::report) reads the bucket's totals and
/// snapshot and sets them, allocating nothing. Decisions pay nothing for it.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use admit::metrics::WarmUpMetrics;
/// use admit::warmup::WarmUp;
///
/// let bucket = Arc::new(WarmUp::builder(500.0).name("checkout").build()?);
/// let metrics = WarmUpMetrics::new(Arc::clone(&bucket))?;
/// metrics.report(); // with no recorder installed, this does nothing
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct WarmUpMetrics<B: WarmUpBucket = WarmUp> {
    bucket: Shared<B>,
    admitted: Counter,
    refused: Counter,
    offered: Counter,
    limit: Gauge,
    full_rate: Gauge,
    stored: Gauge,
    progress: Gauge,
}

impl<B: WarmUpBucket> WarmUpMetrics<B> {
    /// Registers the bucket's series with the installed recorder.
    ///
    /// # Errors
    ///
    /// [`MetricsError::Unnamed`] if the bucket has no name.
    pub fn new(bucket: impl Into<Shared<B>>) -> Result<Self, MetricsError> {
        let bucket = bucket.into();
        let name: SharedString = bucket
            .bucket_name()
            .ok_or(MetricsError::Unnamed {
                kind: "warm-up bucket",
            })?
            .to_owned()
            .into();
        super::describe::warm_up();
        let requests = |outcome: &'static str| metrics::counter!(names::WARMUP_REQUESTS, LIMITER => name.clone(), OUTCOME => outcome);
        let gauge = |metric: &'static str| metrics::gauge!(metric, LIMITER => name.clone());
        Ok(WarmUpMetrics {
            admitted: requests("admitted"),
            refused: requests("refused"),
            offered: metrics::counter!(names::OFFERED_REQUESTS, LIMITER => name.clone(),
                KIND => "warmup"),
            limit: gauge(names::WARMUP_LIMIT),
            full_rate: gauge(names::WARMUP_FULL_RATE),
            stored: gauge(names::WARMUP_STORED),
            progress: gauge(names::WARMUP_PROGRESS),
            bucket,
        })
    }

    /// Reads the bucket's totals and snapshot and publishes them.
    pub fn report(&self) {
        let reading = self.bucket.reading();
        self.admitted.absolute(reading.admitted);
        self.refused.absolute(reading.refused);
        self.offered.absolute(reading.offered);
        self.limit.set(reading.limit);
        self.full_rate.set(reading.full_rate);
        self.stored.set(reading.stored);
        self.progress.set(reading.progress);
    }

    /// The bucket this publishes.
    pub fn bucket(&self) -> &Shared<B> {
        &self.bucket
    }
}

impl<B: WarmUpBucket> Source for WarmUpMetrics<B> {
    fn family(&self) -> &'static str {
        "admit_warmup"
    }

    fn name(&self) -> &str {
        self.bucket.bucket_name().unwrap_or_default()
    }

    fn report(&self) {
        WarmUpMetrics::report(self);
    }
}

impl<B: WarmUpBucket> fmt::Debug for WarmUpMetrics<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WarmUpMetrics")
            .field("limiter", &self.bucket.bucket_name())
            .finish_non_exhaustive()
    }
}
