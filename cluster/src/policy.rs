//! The autoscaling policies compared, each as a team would deploy it, with the defaults of the
//! system it stands for: what it reads, and how that becomes a replica count.
//!
//! | policy | reads | target (whose default) |
//! |---|---|---|
//! | [`Kind::Admit`] | admit-scaler over gRPC: Erlang C on λ (refusals included) and s | 1 per replica (`AverageValue`, the scaler's spec) |
//! | [`Kind::Cpu`] | each replica's cgroup CPU time over the sync period, as metrics-server | 70 % of the request (the usual choice, 70–80 %) |
//! | [`Kind::Concurrency`] | requests in flight, summed over replicas (admit's gauge through Prometheus) | 100 per replica (KEDA http-add-on's `targetPendingRequests`) |
//! | [`Kind::Fixed`] | nothing | the replicas the peak needs at 70 % utilisation |
//! | [`Kind::QueueTime`] | p90 of the request-start wait at the proxy (admit's histogram through Prometheus) | 0.05 s, `AverageValue` (Square's system, as a KEDA Prometheus trigger) |
//! | [`Kind::Sessions`] | sessions per replica: `sum(sessions) / count(pods)` | 500, `AverageValue` (the Phoenix system's ScaledObject) |
//!
//! Every Prometheus query's rate window is the stated one divided by the time-compression factor.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use admit_scaler::prometheus::PrometheusClient;
use http::Uri;

use crate::fleet::{Fleet, Phase};
use crate::hpa::{PodCpu, Tolerance, average_value_replicas, utilization_replicas};
use crate::keda::{ExternalTrigger, milli};

/// The policies, in the order of the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// admit-scaler: Erlang C on the offered load.
    Admit,
    /// The HPA on CPU utilisation.
    Cpu,
    /// A concurrency target per replica (KEDA http-add-on, Knative).
    Concurrency,
    /// A fixed, over-provisioned count.
    Fixed,
    /// Request queue time at the proxy (Square).
    QueueTime,
    /// Sessions per replica (Phoenix).
    Sessions,
}

impl Kind {
    /// Every policy, in the report's order.
    pub const ALL: [Kind; 6] = [
        Kind::Admit,
        Kind::Cpu,
        Kind::Concurrency,
        Kind::Fixed,
        Kind::QueueTime,
        Kind::Sessions,
    ];

    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Admit => "admit-scaler",
            Kind::Cpu => "HPA CPU 70 %",
            Kind::Concurrency => "concurrency 100",
            Kind::Fixed => "fixed",
            Kind::QueueTime => "queue time p90",
            Kind::Sessions => "sessions 500",
        }
    }
}

/// Where a policy's metric comes from, and its state between syncs.
#[derive(Debug)]
pub enum Source {
    /// admit-scaler, polled as KEDA does.
    Scaler(ExternalTrigger),
    /// The replicas' CPU time, against `target_percent` of `request_cpus`.
    Cpu {
        /// The utilisation target.
        target_percent: u32,
        /// Each replica's CPU request (its quota).
        request_cpus: f64,
        /// The last reading of each pod: when, and its CPU time then.
        last: HashMap<String, (Instant, Duration)>,
    },
    /// A KEDA Prometheus trigger: `query`'s value against `threshold` (`AverageValue`).
    Prometheus {
        /// The client.
        client: Box<PrometheusClient>,
        /// Prometheus' URL.
        url: Uri,
        /// The PromQL.
        query: Arc<str>,
        /// The trigger's threshold.
        threshold: f64,
    },
    /// Always this many.
    Fixed(u32),
}

/// A sync's input that could not be had: the HPA keeps the replicas as they are.
#[derive(Debug)]
pub struct NoMetric(pub String);

impl Source {
    /// The replicas this source asks for with `current` replicas in `fleet`, as the HPA's
    /// replica calculator computes them.
    ///
    /// # Errors
    ///
    /// [`NoMetric`] when the metric cannot be read (the HPA then keeps the current count).
    pub async fn proposal(
        &mut self,
        current: u32,
        fleet: &Fleet,
        tolerance: Tolerance,
    ) -> Result<u32, NoMetric> {
        match self {
            Source::Scaler(trigger) => {
                let reading = trigger.poll().await.map_err(|status| {
                    NoMetric(format!("{:?}: {}", status.code(), status.message()))
                })?;
                Ok(average_value_replicas(
                    current,
                    reading.usage_milli,
                    reading.target_milli,
                    tolerance,
                ))
            }
            Source::Cpu {
                target_percent,
                request_cpus,
                last,
            } => {
                let now = Instant::now();
                let request_milli = (*request_cpus * 1000.0).round() as i64;
                let mut pods = Vec::new();
                let mut seen = HashMap::new();
                for pod in fleet.pods() {
                    if pod.phase == Phase::Terminating {
                        continue;
                    }
                    // metrics-server's sample: CPU time over the window since the last one.
                    let usage_milli = pod.cpu_usage.and_then(|usage| {
                        let (at, before) = last.get(&pod.name).copied()?;
                        let window = now.duration_since(at).as_secs_f64();
                        (window > 0.0).then(|| {
                            (usage.saturating_sub(before).as_secs_f64() / window * 1000.0) as i64
                        })
                    });
                    if let Some(usage) = pod.cpu_usage {
                        seen.insert(pod.name.clone(), (now, usage));
                    }
                    pods.push(PodCpu {
                        ready: pod.phase == Phase::Ready,
                        usage_milli,
                        request_milli,
                    });
                }
                *last = seen;
                utilization_replicas(current, &pods, *target_percent, tolerance)
                    .ok_or_else(|| NoMetric("no ready pod with a CPU sample yet".to_owned()))
            }
            Source::Prometheus {
                client,
                url,
                query,
                threshold,
            } => {
                let answer = client
                    .query(url, query, None)
                    .await
                    .map_err(|error| NoMetric(error.to_string()))?;
                Ok(average_value_replicas(
                    current,
                    milli(answer.sample.value),
                    milli(*threshold),
                    tolerance,
                ))
            }
            Source::Fixed(replicas) => Ok(*replicas),
        }
    }
}

/// A PromQL rate window of `window` (as written for uncompressed time) divided by `factor`,
/// in whole milliseconds: `[6000ms]` for one minute at 10×.
pub fn window(window: Duration, factor: f64) -> String {
    format!(
        "{}ms",
        (window.as_secs_f64() / factor * 1000.0).round().max(1.0) as u64
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_shrink_with_the_factor() {
        assert_eq!(window(Duration::from_secs(60), 10.0), "6000ms");
        assert_eq!(window(Duration::from_secs(60), 1.0), "60000ms");
        assert_eq!(window(Duration::from_millis(1), 10.0), "1ms");
    }

    #[test]
    fn every_policy_has_a_name() {
        let names: Vec<&str> = Kind::ALL.iter().map(|kind| kind.name()).collect();
        assert_eq!(names.len(), 6);
        assert!(names.iter().all(|name| !name.is_empty()));
    }
}
