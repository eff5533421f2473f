//! A shedder's queue-time series: the waits its gate and probe saw, the gate's state, the
//! probe's drop share.

use std::time::Duration;

use metrics::{Counter, Gauge, SharedString};

use super::names::{self, LE, LIMITER, SOURCE};
use crate::signal::queue::{BOUNDS_NANOS, LagProbe, QueueGate, Waits};

/// One source's wait histogram: a counter per `le` bucket, the count and the sum.
struct WaitSeries {
    buckets: Vec<Counter>,
    count: Counter,
    sum: Gauge,
}

impl WaitSeries {
    /// The series of the waits from `source`: `request`, `pool` or `probe`.
    fn new(limiter: &SharedString, source: &'static str) -> Self {
        let bucket = |le: String| {
            metrics::counter!(names::QUEUE_WAIT_BUCKET, LIMITER => limiter.clone(),
                SOURCE => source, LE => le)
        };
        let mut buckets: Vec<Counter> = BOUNDS_NANOS
            .iter()
            .map(|&bound| bucket(Duration::from_nanos(bound).as_secs_f64().to_string()))
            .collect();
        buckets.push(bucket("+Inf".to_owned()));
        WaitSeries {
            buckets,
            count: metrics::counter!(names::QUEUE_WAIT_COUNT, LIMITER => limiter.clone(),
                SOURCE => source),
            sum: metrics::gauge!(names::QUEUE_WAIT_SUM, LIMITER => limiter.clone(),
                SOURCE => source),
        }
    }

    fn report(&self, waits: &Waits) {
        for (counter, (_, total)) in self.buckets.iter().zip(waits.cumulative()) {
            counter.absolute(total);
        }
        if let Some(infinite) = self.buckets.last() {
            infinite.absolute(waits.count());
        }
        self.count.absolute(waits.count());
        self.sum.set(waits.sum().as_secs_f64());
    }
}

/// The gate's series: the request and pool waits, and whether it is hot.
pub(super) struct GateSeries {
    request: WaitSeries,
    pool: WaitSeries,
    hot: Gauge,
}

impl GateSeries {
    pub(super) fn new(limiter: &SharedString) -> Self {
        GateSeries {
            request: WaitSeries::new(limiter, "request"),
            pool: WaitSeries::new(limiter, "pool"),
            hot: metrics::gauge!(names::QUEUE_HOT, LIMITER => limiter.clone()),
        }
    }

    pub(super) fn report(&self, gate: &QueueGate, now_ns: u64) {
        let snapshot = gate.snapshot(now_ns);
        self.request.report(&snapshot.request);
        self.pool.report(&snapshot.pool);
        self.hot.set(if snapshot.hot { 1.0 } else { 0.0 });
    }
}

/// The probe's series: its ticks' lateness and its drop share.
pub(super) struct ProbeSeries {
    lateness: WaitSeries,
    drop: Gauge,
}

impl ProbeSeries {
    pub(super) fn new(limiter: &SharedString) -> Self {
        ProbeSeries {
            lateness: WaitSeries::new(limiter, "probe"),
            drop: metrics::gauge!(names::RUNTIME_LAG_DROP, LIMITER => limiter.clone()),
        }
    }

    pub(super) fn report(&self, probe: &LagProbe) {
        let snapshot = probe.snapshot();
        self.lateness.report(&snapshot.lateness);
        self.drop.set(f64::from(snapshot.drop_ppm) / 1e6);
    }
}
