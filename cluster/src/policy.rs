//! The autoscaling policies compared, each as a team would deploy it, with the defaults of the
//! system it stands for: what it reads, and how that becomes a replica count.
//!
//! | policy | reads | target (whose default) |
//! |---|---|---|
//! | [`Kind::Admit`] | admit-scaler over gRPC: the fleet's queue as the proxy balances it, on λ (refusals included, read with its Poisson confidence) and s | 1 per replica (`AverageValue`, the scaler's spec) |
//! | [`Kind::Cpu`] | each replica's cgroup CPU time over the sync period, as metrics-server | 70 % of the request (the usual choice, 70–80 %) |
//! | [`Kind::Concurrency`] | requests in flight, summed over replicas (admit's gauge through Prometheus) | 100 per replica (KEDA http-add-on's `targetPendingRequests`) |
//! | [`Kind::Fixed`] | nothing | the replicas the peak needs at 70 % utilisation |
//! | [`Kind::QueueTime`] | p90 of the request-start wait at the proxy (admit's histogram through Prometheus) | 0.05 s, `AverageValue` (Square's system, as a KEDA Prometheus trigger) |
//! | [`Kind::Sessions`] | sessions per replica: `sum(sessions) / count(pods)` | 500, `AverageValue` (the Phoenix system's ScaledObject) |
//!
//! A [`Policy`] is a kind at a [`Setting`]: its system's default, or the value a team tuned.
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
    /// admit-scaler: queueing on the offered load.
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

/// A policy's setting: what a team tunes.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Setting {
    /// The default of the system the policy stands for (the table above).
    Default,
    /// A value in the kind's unit: admit-scaler's wait threshold and the queue time in
    /// seconds, the CPU target in percent, requests or sessions per replica, replicas.
    Value(f64),
    /// Concurrency per replica derived from a replica's measured capacity: what one replica
    /// keeps in flight at 70 % of it (Little's law).
    Derived,
}

/// A policy at one setting, as `--policies` names it: `kind` or `kind:setting` (`cpu:40`,
/// `concurrency:2`, `concurrency:derived`, `queue-time:25ms`, `sessions:5`, `fixed:3`,
/// `admit:50ms`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Policy {
    /// What it scales on.
    pub kind: Kind,
    /// At which setting.
    pub setting: Setting,
}

impl Policy {
    /// The settings a team would try, as the frontier sweeps them: admit-scaler's wait
    /// thresholds, HPA CPU targets from 40 to 80 %, concurrency per replica from the derived
    /// value up, queue-time p90 targets from 25 to 100 ms, sessions per replica, and fixed
    /// fleets from 3 to 7.
    pub const SWEEP: &'static str = "admit:25ms,admit:50ms,admit:100ms,\
        cpu:40,cpu:50,cpu:60,cpu:70,cpu:80,\
        concurrency:derived,concurrency:1,concurrency:2,concurrency:4,\
        queue-time:25ms,queue-time:50ms,queue-time:100ms,\
        sessions:2,sessions:5,sessions:10,\
        fixed:3,fixed:4,fixed:5,fixed:6,fixed:7";

    /// The policy at its default.
    pub fn default_of(kind: Kind) -> Self {
        Policy {
            kind,
            setting: Setting::Default,
        }
    }

    /// Its name in the report: the kind's, with the setting when it is not the default.
    pub fn name(&self) -> String {
        let value = match self.setting {
            Setting::Default => return self.kind.name().to_owned(),
            Setting::Derived => return "concurrency derived".to_owned(),
            Setting::Value(value) => value,
        };
        let ms = value * 1e3;
        match self.kind {
            Kind::Admit => format!("admit-scaler {ms} ms"),
            Kind::Cpu => format!("HPA CPU {value} %"),
            Kind::Concurrency => format!("concurrency {value}"),
            Kind::Fixed => format!("fixed {value}"),
            Kind::QueueTime => format!("queue time p90 {ms} ms"),
            Kind::Sessions => format!("sessions {value}"),
        }
    }
}

impl std::str::FromStr for Policy {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, String> {
        use clap::ValueEnum as _;
        let (kind, setting) = raw
            .split_once(':')
            .map_or((raw, None), |(k, s)| (k, Some(s)));
        let kind = Kind::from_str(kind, false).map_err(|_| {
            format!(
                "{kind:?} is not a policy: admit, cpu, concurrency, fixed, queue-time, sessions"
            )
        })?;
        let Some(setting) = setting else {
            return Ok(Policy::default_of(kind));
        };
        let number = |unit: &str, valid: fn(f64) -> bool| {
            setting
                .parse::<f64>()
                .ok()
                .filter(|value| value.is_finite() && valid(*value))
                .map(Setting::Value)
                .ok_or_else(|| format!("{raw:?}: the setting must be {unit}"))
        };
        let seconds = || {
            crate::duration::parse_positive(setting)
                .map(|duration| Setting::Value(duration.as_secs_f64()))
                .map_err(|why| format!("{raw:?}: {why}"))
        };
        let setting = match kind {
            Kind::Admit | Kind::QueueTime => seconds()?,
            Kind::Cpu => number("a percentage from 1 to 100", |v| {
                v.fract() == 0.0 && (1.0..=100.0).contains(&v)
            })?,
            Kind::Concurrency if setting == "derived" => Setting::Derived,
            Kind::Concurrency | Kind::Sessions => number("a number above 0", |v| v > 0.0)?,
            Kind::Fixed => number("a whole number of replicas from 1", |v| {
                v.fract() == 0.0 && v >= 1.0 && v <= f64::from(u32::MAX)
            })?,
        };
        Ok(Policy { kind, setting })
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
    fn policies_parse_with_their_settings() {
        let parse = |raw: &str| raw.parse::<Policy>();
        assert_eq!(parse("cpu"), Ok(Policy::default_of(Kind::Cpu)));
        assert_eq!(parse("cpu:40").unwrap().setting, Setting::Value(40.0));
        assert_eq!(
            parse("queue-time:25ms").unwrap().setting,
            Setting::Value(0.025)
        );
        assert_eq!(parse("admit:50ms").unwrap().name(), "admit-scaler 50 ms");
        assert_eq!(
            parse("concurrency:derived").unwrap().setting,
            Setting::Derived
        );
        assert_eq!(parse("fixed:3").unwrap().name(), "fixed 3");
        for bad in [
            "cpu:0",
            "cpu:40.5",
            "cpu:101",
            "fixed:0",
            "fixed:2.5",
            "sessions:-1",
            "admit:50",
            "queue-time:0ms",
            "cpu:derived",
            "sessions:NaN",
            "hpa",
            "cpu:",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let sweep: Vec<Policy> = Policy::SWEEP
            .split(',')
            .map(|raw| raw.trim().parse().unwrap())
            .collect();
        assert_eq!(sweep.len(), 23);
        let names: std::collections::HashSet<String> = sweep.iter().map(Policy::name).collect();
        assert_eq!(names.len(), sweep.len(), "{names:?}");
    }

    #[test]
    fn every_policy_has_a_name() {
        let names: Vec<&str> = Kind::ALL.iter().map(|kind| kind.name()).collect();
        assert_eq!(names.len(), 6);
        assert!(names.iter().all(|name| !name.is_empty()));
    }
}
