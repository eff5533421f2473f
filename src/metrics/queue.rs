//! A shedder's queue-time series: the waits its gate and probe saw, the gate's state, the
//! probe's drop share.

use std::time::Duration;

use metrics::{Counter, Gauge, SharedString};

use super::names::{self, LE, LIMITER, SOURCE};
use crate::signal::queue::{BOUNDS_NANOS, QueueGate, QueueState, WaitSource, Waits};

/// One source's wait histogram: a counter per `le` bucket, the count and the sum.
pub(super) struct WaitSeries {
    source: WaitSource,
    buckets: Vec<Counter>,
    count: Counter,
    sum: Gauge,
}

impl WaitSeries {
    pub(super) fn new(limiter: &SharedString, source: WaitSource) -> Self {
        let bucket = |le: String| {
            metrics::counter!(names::QUEUE_WAIT_BUCKET, LIMITER => limiter.clone(),
                SOURCE => source.as_str(), LE => le)
        };
        let mut buckets: Vec<Counter> = BOUNDS_NANOS
            .iter()
            .map(|&bound| bucket(Duration::from_nanos(bound).as_secs_f64().to_string()))
            .collect();
        buckets.push(bucket("+Inf".to_owned()));
        WaitSeries {
            source,
            buckets,
            count: metrics::counter!(names::QUEUE_WAIT_COUNT, LIMITER => limiter.clone(),
                SOURCE => source.as_str()),
            sum: metrics::gauge!(names::QUEUE_WAIT_SUM, LIMITER => limiter.clone(),
                SOURCE => source.as_str()),
        }
    }

    pub(super) fn report(&self, waits: &Waits) {
        for (counter, (_, total)) in self.buckets.iter().zip(waits.cumulative()) {
            counter.absolute(total);
        }
        if let Some(infinite) = self.buckets.last() {
            infinite.absolute(waits.count());
        }
        self.count.absolute(waits.count());
        self.sum.set(waits.sum().as_secs_f64());
    }

    pub(super) fn source(&self) -> WaitSource {
        self.source
    }
}

/// The gate's series: the request and pool waits, and whether it is hot.
pub(super) struct GateSeries {
    waits: [WaitSeries; 2],
    hot: Gauge,
}

impl GateSeries {
    pub(super) fn new(limiter: &SharedString) -> Self {
        GateSeries {
            waits: [
                WaitSeries::new(limiter, WaitSource::Request),
                WaitSeries::new(limiter, WaitSource::Pool),
            ],
            hot: metrics::gauge!(names::QUEUE_HOT, LIMITER => limiter.clone()),
        }
    }

    pub(super) fn report(&self, gate: &QueueGate, now_ns: u64) {
        for series in &self.waits {
            series.report(&gate.waits(series.source()));
        }
        let hot = gate.state(now_ns) == QueueState::Hot;
        self.hot.set(if hot { 1.0 } else { 0.0 });
    }
}
