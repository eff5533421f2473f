//! Goodput over time, by when answers arrive: what the step response and the retry storm are
//! judged on, at a finer grain than the load generator's per-second tallies.

use admit_loadgen::{Outcome, Transport};
use bytes::Bytes;
use http::Request;
use http_body_util::Empty;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// A storm's or a step's client, noting when each OK answer arrived and how long it took.
#[derive(Clone, Debug)]
pub(crate) struct Recording<T> {
    client: T,
    /// When each OK answer arrived, and how long its attempt took.
    answers: Arc<Mutex<Vec<(Instant, Duration)>>>,
}

/// An OK answer: when it arrived and how long its attempt took, s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Answer {
    pub(crate) at: f64,
    pub(crate) latency: f64,
}

impl<T> Recording<T> {
    pub(crate) fn new(client: T) -> Recording<T> {
        Recording {
            client,
            answers: Arc::default(),
        }
    }

    /// The OK answers so far, timed from `start`, in the order they arrived.
    pub(crate) fn answers(&self, start: Instant) -> Vec<Answer> {
        self.answers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|&(at, latency)| Answer {
                at: at.saturating_duration_since(start).as_secs_f64(),
                latency: latency.as_secs_f64(),
            })
            .collect()
    }
}

impl<T: Transport<Empty<Bytes>>> Transport<Empty<Bytes>> for Recording<T> {
    async fn send(&self, request: Request<Empty<Bytes>>) -> Outcome {
        let sent = Instant::now();
        let outcome = self.client.send(request).await;
        if outcome == Outcome::Ok {
            let now = Instant::now();
            self.answers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((now, now - sent));
        }
        outcome
    }
}

/// OK answers over time: their arrival times and latencies, in arrival order.
#[derive(Clone, Debug)]
pub(crate) struct Timeline {
    answers: Vec<Answer>,
}

/// The grain of the searches below, s.
const STEP: f64 = 0.01;

impl Timeline {
    /// The timeline of `answers` (sorted here by arrival).
    pub(crate) fn new(mut answers: Vec<Answer>) -> Timeline {
        answers.sort_by(|a, b| a.at.total_cmp(&b.at));
        Timeline { answers }
    }

    /// The answers that arrived in `[from, until)`.
    fn within(&self, from: f64, until: f64) -> &[Answer] {
        let start = self.answers.partition_point(|a| a.at < from);
        let end = self.answers.partition_point(|a| a.at < until);
        &self.answers[start..end.max(start)]
    }

    /// Goodput over `[from, until)`, per second.
    pub(crate) fn rate(&self, from: f64, until: f64) -> f64 {
        self.within(from, until).len() as f64 / (until - from)
    }

    /// The `q`-quantile of the latencies of the answers in `[from, until)`, s.
    pub(crate) fn latency_quantile(&self, from: f64, until: f64, q: f64) -> Option<f64> {
        let mut latencies: Vec<f64> = self.within(from, until).iter().map(|a| a.latency).collect();
        if latencies.is_empty() {
            return None;
        }
        latencies.sort_by(f64::total_cmp);
        let rank = ((q * latencies.len() as f64).ceil() as usize).clamp(1, latencies.len());
        Some(latencies[rank - 1])
    }

    /// Goodput per `bin` from 0 to `until`: `(bin middle, per second)`.
    pub(crate) fn bins(&self, bin: f64, until: f64) -> Vec<(f64, f64)> {
        let count = (until / bin).floor() as usize;
        (0..count)
            .map(|i| {
                let from = i as f64 * bin;
                (from + bin / 2.0, self.rate(from, from + bin))
            })
            .collect()
    }

    /// How long after `from` until `holds` is true of every window of `window` seconds that
    /// starts within the next `hold` seconds (searched on a 10 ms grain, windows ending by
    /// `until`); `None` if it never is.
    pub(crate) fn first_holding(
        &self,
        from: f64,
        until: f64,
        window: f64,
        hold: f64,
        holds: impl Fn(f64, f64) -> bool,
    ) -> Option<f64> {
        let steps = |span: f64| (span / STEP).round() as usize;
        let last_start = until - window - hold;
        let mut good_since: Option<usize> = None;
        // Window starts from `from` to `until − window`; the first run of good ones spanning
        // `hold` wins.
        for i in 0..=steps(until - window - from) {
            let start = from + i as f64 * STEP;
            if holds(start, start + window) {
                let since = *good_since.get_or_insert(i);
                if i - since >= steps(hold) {
                    return Some(since as f64 * STEP);
                }
            } else {
                good_since = None;
                if start > last_start {
                    break;
                }
            }
        }
        None
    }

    /// How long after `from` goodput settles: every `window` starting in the following `hold`
    /// has a rate within `tolerance` of the rate over `[until − 3 s, until)` (the settled
    /// value), or within three standard deviations of Poisson counting noise if that is
    /// wider. Returns the time and the band used, as a share of the settled value.
    pub(crate) fn settle(
        &self,
        from: f64,
        until: f64,
        window: f64,
        hold: f64,
        tolerance: f64,
    ) -> (Option<f64>, f64) {
        let settled = self.rate((until - 3.0).max(from), until);
        let band = (tolerance * settled).max(3.0 * (settled * window).sqrt() / window);
        let time = self.first_holding(from, until, window, hold, |start, end| {
            (self.rate(start, end) - settled).abs() <= band
        });
        (time, band / settled.max(f64::MIN_POSITIVE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers at `rate` per second, evenly spaced over `[from, until)`, each taking `latency`.
    fn even(rate: f64, from: f64, until: f64, latency: f64) -> Vec<Answer> {
        let n = ((until - from) * rate).round() as usize;
        (0..n)
            .map(|i| Answer {
                at: from + (i as f64 + 0.5) / rate,
                latency,
            })
            .collect()
    }

    #[test]
    fn rates_and_quantiles_count_the_answers_in_a_span() {
        let timeline = Timeline::new(even(100.0, 0.0, 2.0, 0.004));
        assert_eq!(timeline.rate(0.0, 1.0), 100.0);
        assert_eq!(timeline.rate(0.5, 1.5), 100.0);
        assert_eq!(timeline.latency_quantile(0.0, 1.0, 0.99), Some(0.004));
        assert_eq!(timeline.latency_quantile(5.0, 6.0, 0.99), None);
        let bins = timeline.bins(0.5, 2.0);
        assert_eq!(bins.len(), 4);
        assert!(bins.iter().all(|&(_, rate)| rate == 100.0), "{bins:?}");
    }

    #[test]
    fn a_step_settles_when_the_rate_reaches_its_last_value() {
        // 500/s until 5 s, 200/s for 0.3 s after the step (a dip), then 1000/s.
        let mut answers = even(500.0, 0.0, 5.0, 0.001);
        answers.extend(even(200.0, 5.0, 5.3, 0.001));
        answers.extend(even(1000.0, 5.3, 11.0, 0.001));
        let timeline = Timeline::new(answers);
        let (time, band) = timeline.settle(5.0, 11.0, 0.25, 1.0, 0.05);
        // The first window wholly after the dip starts at 5.3 s; the band is the noise's
        // (3·√250/0.25 = 190/s, 19 %), wider than 5 %.
        let time = time.expect("settles");
        assert!((0.25..=0.3).contains(&time), "{time}");
        assert!((band - 0.19).abs() < 0.01, "{band}");
    }

    #[test]
    fn a_rate_that_never_holds_never_settles() {
        // Alternating 0.5 s of 2000/s and of nothing.
        let answers = (0..20)
            .flat_map(|i| even(2000.0, f64::from(i), f64::from(i) + 0.5, 0.001))
            .collect();
        let timeline = Timeline::new(answers);
        let (time, _) = timeline.settle(0.0, 20.0, 0.25, 1.0, 0.05);
        assert_eq!(time, None);
    }

    #[test]
    fn first_holding_needs_the_whole_hold() {
        let timeline = Timeline::new(even(100.0, 0.0, 3.0, 0.001));
        // Good everywhere: at once.
        assert_eq!(
            timeline.first_holding(0.0, 3.0, 0.5, 1.0, |_, _| true),
            Some(0.0)
        );
        // Good only from 1 s on, and there is room for the hold: 1 s.
        let time = timeline.first_holding(0.0, 3.0, 0.5, 1.0, |start, _| start >= 1.0 - 1e-9);
        assert!((time.unwrap() - 1.0).abs() < 1e-9, "{time:?}");
        // Good only from 2 s on: no room for a 1 s hold before 3 s.
        assert_eq!(
            timeline.first_holding(0.0, 3.0, 0.5, 1.0, |start, _| start >= 2.0),
            None
        );
    }
}
