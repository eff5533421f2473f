//! Counts of outcomes and latencies of OK answers and refusals, per second of a run and in
//! total.

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use crate::outcome::{Lost, Outcome};

/// Significant decimal digits the latency histograms keep: values within 0.1 %.
const SIGNIFICANT_DIGITS: u8 = 3;

/// What became of a set of requests (those due in one second of a run, or in a span of
/// seconds): a count per [`Outcome`], and the latencies of the OK answers and of the refusals.
///
/// Serialises each histogram as a summary (count, p50, p90, p99, p999, max and mean, in µs;
/// the quantiles `null` when it is empty), not as its buckets.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Tally {
    /// Requests due: the sum of the outcome counts below, `ok` to `dropped`.
    pub offered: u64,
    /// [`Outcome::Ok`]: answered with a 2xx within the deadline (goodput).
    pub ok: u64,
    /// [`Outcome::Refused`]: 503 or 429.
    pub refused: u64,
    /// Refusals by their `admit-refusal` reason (those that named one).
    pub refusal_reasons: BTreeMap<String, u64>,
    /// [`Outcome::Status`]: answered with another status.
    pub other_status: u64,
    /// [`Outcome::TimedOut`]: no whole answer within the deadline.
    pub timed_out: u64,
    /// [`Outcome::Lost`]: transport failures, by kind.
    pub lost: LostCounts,
    /// [`Outcome::Dropped`]: not sent for the cap on requests in flight.
    pub dropped: u64,
    /// Retries sent for these requests (not in `offered`, which counts each request once).
    pub retries: u64,
    /// Retries not sent because the retry budget had no room.
    pub retries_denied: u64,
    /// Latencies of the OK answers, in µs (at least 1), from sending the request's first
    /// attempt to reading the last byte of the answer. Auto-resizing, three significant digits.
    #[serde(rename = "latency_us", serialize_with = "latency_summary")]
    pub latency_us: Histogram<u64>,
    /// How long the final refusals took, in µs (at least 1), measured as `latency_us` is: how
    /// fast a refused client knows.
    #[serde(rename = "refusal_us", serialize_with = "latency_summary")]
    pub refusal_us: Histogram<u64>,
}

/// Transport failures by kind ([`Lost`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LostCounts {
    /// [`Lost::ConnectionRefused`].
    pub connection_refused: u64,
    /// [`Lost::Reset`].
    pub reset: u64,
    /// [`Lost::Closed`].
    pub closed: u64,
    /// [`Lost::Other`].
    pub other: u64,
}

impl LostCounts {
    /// Every transport failure.
    pub fn total(&self) -> u64 {
        self.connection_refused + self.reset + self.closed + self.other
    }
}

impl Default for Tally {
    fn default() -> Self {
        Tally::new()
    }
}

impl Tally {
    /// An empty tally.
    pub fn new() -> Tally {
        Tally {
            offered: 0,
            ok: 0,
            refused: 0,
            refusal_reasons: BTreeMap::new(),
            other_status: 0,
            timed_out: 0,
            lost: LostCounts::default(),
            dropped: 0,
            retries: 0,
            retries_denied: 0,
            latency_us: histogram(),
            refusal_us: histogram(),
        }
    }

    /// Counts `outcome` (and one more request offered); an OK answer's or a refusal's `latency`
    /// goes into its histogram.
    pub fn record(&mut self, outcome: &Outcome, latency: Duration) {
        self.offered += 1;
        match outcome {
            Outcome::Ok => {
                self.ok += 1;
                record_latency(&mut self.latency_us, latency);
            }
            Outcome::Refused(refusal) => {
                self.refused += 1;
                record_latency(&mut self.refusal_us, latency);
                if let Some(reason) = &refusal.reason {
                    *self.refusal_reasons.entry(reason.clone()).or_default() += 1;
                }
            }
            Outcome::Status(_) => self.other_status += 1,
            Outcome::TimedOut => self.timed_out += 1,
            Outcome::Lost(lost) => match lost {
                Lost::ConnectionRefused => self.lost.connection_refused += 1,
                Lost::Reset => self.lost.reset += 1,
                Lost::Closed => self.lost.closed += 1,
                Lost::Other => self.lost.other += 1,
            },
            Outcome::Dropped => self.dropped += 1,
        }
    }

    /// Adds `other`'s counts and latencies to these.
    pub fn merge(&mut self, other: &Tally) {
        self.offered += other.offered;
        self.ok += other.ok;
        self.refused += other.refused;
        for (reason, count) in &other.refusal_reasons {
            *self.refusal_reasons.entry(reason.clone()).or_default() += count;
        }
        self.other_status += other.other_status;
        self.timed_out += other.timed_out;
        self.lost.connection_refused += other.lost.connection_refused;
        self.lost.reset += other.lost.reset;
        self.lost.closed += other.lost.closed;
        self.lost.other += other.lost.other;
        self.dropped += other.dropped;
        self.retries += other.retries;
        self.retries_denied += other.retries_denied;
        for (mine, theirs) in [
            (&mut self.latency_us, &other.latency_us),
            (&mut self.refusal_us, &other.refusal_us),
        ] {
            mine.add(theirs)
                .expect("an auto-resizing histogram takes any other's values");
        }
    }

    /// Requests that got no useful answer: timed out, lost, dropped, or answered with a
    /// status other than 2xx, 503 and 429.
    pub fn failed(&self) -> u64 {
        self.timed_out + self.lost.total() + self.dropped + self.other_status
    }

    /// The `q`-quantile (0 to 1) of the OK answers' latencies, or `None` without any.
    pub fn latency_quantile(&self, q: f64) -> Option<Duration> {
        (!self.latency_us.is_empty())
            .then(|| Duration::from_micros(self.latency_us.value_at_quantile(q)))
    }

    /// The median latency of the OK answers.
    pub fn p50(&self) -> Option<Duration> {
        self.latency_quantile(0.5)
    }

    /// The 99th percentile latency of the OK answers.
    pub fn p99(&self) -> Option<Duration> {
        self.latency_quantile(0.99)
    }

    /// The longest latency of an OK answer (to the histogram's precision).
    pub fn max(&self) -> Option<Duration> {
        (!self.latency_us.is_empty()).then(|| Duration::from_micros(self.latency_us.max()))
    }

    /// The `q`-quantile (0 to 1) of how long the refusals took, or `None` without any.
    pub fn refusal_quantile(&self, q: f64) -> Option<Duration> {
        (!self.refusal_us.is_empty())
            .then(|| Duration::from_micros(self.refusal_us.value_at_quantile(q)))
    }
}

/// An empty auto-resizing histogram of µs.
fn histogram() -> Histogram<u64> {
    Histogram::new(SIGNIFICANT_DIGITS)
        .expect("three significant digits are within hdrhistogram's 0..=5")
}

/// Records `latency` in µs, at least 1. `record` grows the histogram as needed; only a value
/// it cannot hold at all is clamped to its highest.
fn record_latency(histogram: &mut Histogram<u64>, latency: Duration) {
    let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
    if histogram.record(micros.max(1)).is_err() {
        histogram.saturating_record(micros);
    }
}

/// The latency histogram as `{count, p50, p90, p99, p999, max, mean}` in µs.
fn latency_summary<S: Serializer>(
    histogram: &Histogram<u64>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let value = |q: f64| (!histogram.is_empty()).then(|| histogram.value_at_quantile(q));
    let mut summary = serializer.serialize_struct("LatencySummary", 7)?;
    summary.serialize_field("count", &histogram.len())?;
    summary.serialize_field("p50", &value(0.5))?;
    summary.serialize_field("p90", &value(0.9))?;
    summary.serialize_field("p99", &value(0.99))?;
    summary.serialize_field("p999", &value(0.999))?;
    summary.serialize_field("max", &(!histogram.is_empty()).then(|| histogram.max()))?;
    summary.serialize_field("mean", &(!histogram.is_empty()).then(|| histogram.mean()))?;
    summary.end()
}

/// A run's tallies: one per second, by the second each request was due in, and their total.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    /// Second `i` of the run: the requests due from `i` s to `i + 1` s.
    pub seconds: Vec<Tally>,
    /// Every request of the run.
    pub total: Tally,
}

impl Report {
    /// The tallies of `seconds` (clamped to the run) added up.
    pub fn span(&self, seconds: Range<usize>) -> Tally {
        let end = seconds.end.min(self.seconds.len());
        let start = seconds.start.min(end);
        let mut total = Tally::new();
        for tally in &self.seconds[start..end] {
            total.merge(tally);
        }
        total
    }
}
