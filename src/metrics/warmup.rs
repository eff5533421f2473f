//! A warm-up bucket's metrics.

use std::fmt;

use metrics::{Counter, Gauge, SharedString};

use super::names::{self, KIND, LIMITER, OUTCOME};
use super::{MetricsError, Source};
use crate::Shared;
use crate::clock::Clock;
use crate::warmup::WarmUp;
use crate::warmup::sentinel::SentinelWarmUp;

/// What a warm-up bucket reports, from either kind.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reading {
    admitted: u64,
    refused: u64,
    offered: u64,
    stored: f64,
    limit: f64,
    full_rate: f64,
    progress: f64,
}

/// How [`WarmUpMetrics`] reads a bucket: [`WarmUp`] and [`SentinelWarmUp`].
pub(crate) trait Bucket: Send + Sync + 'static {
    fn bucket_name(&self) -> Option<&str>;
    fn reading(&self) -> Reading;
}

/// Both kinds report through the same methods.
macro_rules! bucket {
    ($kind:ident) => {
        impl<C: Clock + Send + Sync + 'static> Bucket for $kind<C> {
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

/// Publishes a warm-up bucket ([`WarmUp`] or [`SentinelWarmUp`]) through the `metrics` facade:
/// its decisions by outcome, the requests offered to it first, the rate in force and the full
/// rate (permits per second), the stored permits and the warm-up progress (see [`names`] for
/// each series), labelled `limiter="<the bucket's name>"`.
pub(crate) struct WarmUpMetrics<B: Bucket> {
    bucket: Shared<B>,
    admitted: Counter,
    refused: Counter,
    offered: Counter,
    limit: Gauge,
    full_rate: Gauge,
    stored: Gauge,
    progress: Gauge,
}

impl<B: Bucket> WarmUpMetrics<B> {
    /// Registers the bucket's series with the installed recorder.
    ///
    /// # Errors
    ///
    /// [`MetricsError::Unnamed`] if the bucket has no name.
    pub(crate) fn new(bucket: impl Into<Shared<B>>) -> Result<Self, MetricsError> {
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
    pub(crate) fn report(&self) {
        let reading = self.bucket.reading();
        self.admitted.absolute(reading.admitted);
        self.refused.absolute(reading.refused);
        self.offered.absolute(reading.offered);
        self.limit.set(reading.limit);
        self.full_rate.set(reading.full_rate);
        self.stored.set(reading.stored);
        self.progress.set(reading.progress);
    }
}

impl<B: Bucket> Source for WarmUpMetrics<B> {
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

impl<B: Bucket> fmt::Debug for WarmUpMetrics<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WarmUpMetrics")
            .field("limiter", &self.bucket.bucket_name())
            .finish_non_exhaustive()
    }
}
