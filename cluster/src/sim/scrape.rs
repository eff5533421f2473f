//! Prometheus as the policies read it: each replica's series scraped at an interval, and the
//! functions of the harness's queries over them (`rate` with its extrapolation, `irate`, a
//! sum, and `histogram_quantile`), evaluated at a time on what was scraped by then.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::replica::{Exposed, WAIT_BOUNDS};

/// How often Prometheus' discovery manager hands new targets to the scrapers (its own
/// period, whatever the scrape interval).
pub(crate) const DISCOVERY: f64 = 5.0;

/// The two jobs the policies read: the replicas' own `/metrics`, scraped once discovered,
/// and cAdvisor's CPU series for every pod, scraped from one target that lists them all.
#[derive(Debug)]
pub(crate) struct Prometheus {
    /// The replicas' series (`job="admit"`).
    pub(crate) admit: Scraped,
    /// cAdvisor's (`job="cadvisor"`).
    pub(crate) cadvisor: Scraped,
    /// The replicas the scrapers know of.
    discovered: BTreeSet<u64>,
}

impl Prometheus {
    /// Keeping `keep` seconds of samples.
    pub(crate) fn new(keep: f64) -> Self {
        Prometheus {
            admit: Scraped::new(keep),
            cadvisor: Scraped::new(keep),
            discovered: BTreeSet::new(),
        }
    }

    /// The discovery manager's update: the scrapers now know of `pods`.
    pub(crate) fn discover(&mut self, pods: impl IntoIterator<Item = u64>) {
        self.discovered = pods.into_iter().collect();
    }

    /// Whether the scrapers know of `pod`.
    pub(crate) fn knows(&self, pod: u64) -> bool {
        self.discovered.contains(&pod)
    }

    /// `pod` is gone: its scrapes fail and cAdvisor stops listing it.
    pub(crate) fn forget(&mut self, pod: u64) {
        self.admit.forget(pod);
        self.cadvisor.forget(pod);
    }
}

/// One target's samples, oldest first.
#[derive(Debug, Default)]
struct Series {
    samples: VecDeque<(f64, Exposed)>,
    /// The target is gone: its last scrape failed, so instant queries leave it out (a stale
    /// marker), while range functions still use its samples within their window.
    stale: bool,
}

/// Which series a sum takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Targets {
    /// Every series with samples in the range, a gone target's too (a range function's).
    All,
    /// The series of targets still up (a range function `and` the instant series).
    Up,
}

/// What Prometheus holds.
#[derive(Debug)]
pub(crate) struct Scraped {
    /// By pod.
    targets: BTreeMap<u64, Series>,
    /// Samples older than this before the latest are forgotten.
    keep: f64,
}

impl Scraped {
    /// Keeping `keep` seconds of samples.
    pub(crate) fn new(keep: f64) -> Self {
        Scraped {
            targets: BTreeMap::new(),
            keep,
        }
    }

    /// `pod`'s sample from the scrape that started at `at` (its answer may come later: the
    /// sample carries the scrape's start, as Prometheus stamps it).
    pub(crate) fn record(&mut self, at: f64, pod: u64, exposed: Exposed) {
        let keep = self.keep;
        self.targets
            .retain(|_, series| series.samples.back().is_some_and(|&(t, _)| t >= at - keep));
        let series = self.targets.entry(pod).or_default();
        series.stale = false;
        series.samples.push_back((at, exposed));
        while series
            .samples
            .front()
            .is_some_and(|&(t, _)| t < at - self.keep)
        {
            series.samples.pop_front();
        }
    }

    /// `pod`'s target is gone: its series end.
    pub(crate) fn forget(&mut self, pod: u64) {
        if let Some(series) = self.targets.get_mut(&pod) {
            series.stale = true;
        }
    }

    /// Targets up: `count(up == 1)`.
    pub(crate) fn up(&self) -> usize {
        self.targets.values().filter(|series| !series.stale).count()
    }

    /// `sum(irate(metric[window]) and metric)` at `now`: the series of targets still up only
    /// (a gone target's last samples stay in the range, but its stale marker ends the instant
    /// series); `None` without such a series with two samples.
    pub(crate) fn sum_irate(
        &self,
        now: f64,
        window: f64,
        metric: fn(&Exposed) -> f64,
    ) -> Option<f64> {
        self.sum(now, window, Targets::Up, |samples| {
            let [.., (t1, a), (t2, b)] = samples else {
                return None;
            };
            Some((metric(b) - metric(a)) / (t2 - t1))
        })
    }

    /// `sum(rate(metric[window]))` at `now`, extrapolated as Prometheus does.
    pub(crate) fn sum_rate(
        &self,
        now: f64,
        window: f64,
        metric: impl Fn(&Exposed) -> f64,
    ) -> Option<f64> {
        self.sum(now, window, Targets::All, |samples| {
            extrapolated_rate(now, window, samples, &metric)
        })
    }

    /// `sum(gauge)` at `now`: the latest sample of each series.
    pub(crate) fn sum_gauge(&self, metric: fn(&Exposed) -> f64) -> Option<f64> {
        let values: Vec<f64> = self
            .targets
            .values()
            .filter(|series| !series.stale)
            .filter_map(|series| series.samples.back().map(|(_, e)| metric(e)))
            .collect();
        (!values.is_empty()).then(|| values.iter().sum())
    }

    /// `histogram_quantile(q, sum(rate(waits_bucket[window])) by (le))` at `now`: `None`
    /// without series, NaN without observations.
    pub(crate) fn wait_quantile(&self, now: f64, window: f64, q: f64) -> Option<f64> {
        let mut buckets = [0.0; WAIT_BOUNDS.len() + 1];
        for (i, bucket) in buckets.iter_mut().enumerate() {
            *bucket = self.sum_rate(now, window, |e: &Exposed| e.waits[i])?;
        }
        Some(histogram_quantile(q, &buckets))
    }

    /// The sum of `each` over the samples of `targets` within `window` before `now`.
    fn sum(
        &self,
        now: f64,
        window: f64,
        targets: Targets,
        each: impl Fn(&[(f64, Exposed)]) -> Option<f64>,
    ) -> Option<f64> {
        let mut total = None;
        let series = self.targets.values();
        for series in series.filter(|series| targets == Targets::All || !series.stale) {
            let within: Vec<(f64, Exposed)> = series
                .samples
                .iter()
                .filter(|&&(t, _)| t > now - window && t <= now)
                .copied()
                .collect();
            if let Some(value) = each(&within) {
                *total.get_or_insert(0.0) += value;
            }
        }
        total
    }
}

/// Prometheus' `rate` of one counter series at `now` over `window`: the increase between the
/// first and last samples, extrapolated towards the window's edges (by at most half an
/// interval beyond the samples, and never below zero), per second.
fn extrapolated_rate(
    now: f64,
    window: f64,
    samples: &[(f64, Exposed)],
    metric: impl Fn(&Exposed) -> f64,
) -> Option<f64> {
    let [(first_t, first), .., (last_t, last)] = samples else {
        return None;
    };
    let (first_v, last_v) = (metric(first), metric(last));
    let delta = last_v - first_v;
    let sampled = last_t - first_t;
    if sampled <= 0.0 {
        return None;
    }
    let average = sampled / (samples.len() - 1) as f64;
    let mut to_start = first_t - (now - window);
    let to_end = now - last_t;
    if delta > 0.0 && first_v >= 0.0 {
        to_start = to_start.min(sampled * first_v / delta);
    }
    let threshold = average * 1.1;
    let extend = |gap: f64| if gap < threshold { gap } else { average / 2.0 };
    let span = sampled + extend(to_start) + extend(to_end);
    Some(delta * span / sampled / window)
}

/// Prometheus' `histogram_quantile` over cumulative `buckets` at [`WAIT_BOUNDS`] and `+Inf`:
/// linear within the bucket the rank falls in (from 0 for the first), the highest finite bound
/// if it falls in `+Inf`; NaN without observations.
fn histogram_quantile(q: f64, buckets: &[f64; WAIT_BOUNDS.len() + 1]) -> f64 {
    let count = buckets[WAIT_BOUNDS.len()];
    if count <= 0.0 {
        return f64::NAN;
    }
    let rank = q * count;
    let Some(b) = buckets.iter().position(|&c| c >= rank) else {
        return WAIT_BOUNDS[WAIT_BOUNDS.len() - 1];
    };
    if b == WAIT_BOUNDS.len() {
        return WAIT_BOUNDS[b - 1];
    }
    let (lower, below) = if b == 0 {
        (0.0, 0.0)
    } else {
        (WAIT_BOUNDS[b - 1], buckets[b - 1])
    };
    let within = buckets[b] - below;
    if within <= 0.0 {
        return WAIT_BOUNDS[b];
    }
    lower + (WAIT_BOUNDS[b] - lower) * (rank - below) / within
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offered(value: f64) -> Exposed {
        Exposed {
            offered: value,
            ..Exposed::default()
        }
    }

    #[test]
    fn irate_takes_the_last_two_samples_of_the_targets_up() {
        let mut scraped = Scraped::new(60.0);
        for (t, v) in [(0.0, 0.0), (1.5, 30.0), (3.0, 90.0)] {
            scraped.record(t, 1, offered(v));
        }
        let irate = scraped.sum_irate(3.0, 6.0, |e| e.offered).unwrap();
        assert!((irate - 40.0).abs() < 1e-9);
        // A second target with one sample adds nothing yet.
        scraped.record(4.5, 1, offered(120.0));
        scraped.record(4.5, 2, offered(5.0));
        assert!((scraped.sum_irate(4.5, 6.0, |e| e.offered).unwrap() - 20.0).abs() < 1e-9);
        assert_eq!(scraped.up(), 2);
        // Target 1 is gone: its samples are still within the range, but its stale marker
        // ends its instant series, so `and` leaves it out.
        scraped.forget(1);
        assert_eq!(scraped.up(), 1);
        scraped.record(6.0, 2, offered(20.0));
        let irate = scraped.sum_irate(6.0, 6.0, |e| e.offered).unwrap();
        assert!((irate - 10.0).abs() < 1e-9, "{irate}");
    }

    #[test]
    fn rate_extrapolates_to_the_window() {
        let mut scraped = Scraped::new(60.0);
        for (t, v) in [(0.0, 100.0), (1.0, 110.0), (2.0, 120.0)] {
            scraped.record(t, 1, offered(v));
        }
        // A 6 s window ending at 5 s: the first sample is 1 s from its start (within 1.1
        // intervals: extended all the way), the last 3 s from its end (half an interval).
        let rate = scraped.sum_rate(5.0, 6.0, |e| e.offered).unwrap();
        assert!((rate - 20.0 * 3.5 / 2.0 / 6.0).abs() < 1e-9, "{rate}");
        // Never extended to before the counter's zero.
        let mut young = Scraped::new(60.0);
        for (t, v) in [(3.0, 5.0), (4.0, 15.0)] {
            young.record(t, 1, offered(v));
        }
        let rate = young.sum_rate(4.0, 6.0, |e| e.offered).unwrap();
        assert!((rate - 10.0 * 1.5 / 1.0 / 6.0).abs() < 1e-9, "{rate}");
    }

    #[test]
    fn quantiles_interpolate_within_a_bucket() {
        let mut buckets = [0.0; WAIT_BOUNDS.len() + 1];
        // 10 waits ≤ 1 ms, 10 more ≤ 2.5 ms.
        for (i, bucket) in buckets.iter_mut().enumerate() {
            *bucket = if i == 0 { 10.0 } else { 20.0 };
        }
        assert!((histogram_quantile(0.5, &buckets) - 0.001).abs() < 1e-12);
        assert!((histogram_quantile(0.75, &buckets) - 0.00175).abs() < 1e-12);
        assert!(histogram_quantile(0.9, &[0.0; 13]).is_nan());
    }
}
