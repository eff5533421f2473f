//! What every policy's run shares: the setup, and how the proxy balances.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use admit_loadgen::{Segment, Trace};
use admit_testkit::haproxy;

use crate::policy::{Kind, Policy, Setting, window};
use crate::replica::Distribution;

/// How the proxy picks a replica for each request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Balance {
    /// Each replica in turn (HAProxy's `roundrobin`, its default): a queue per replica.
    RoundRobin,
    /// The replica with the fewest connections (HAProxy's `leastconn`): closer to one queue for
    /// the fleet, Erlang C's model.
    LeastConn,
}

impl Balance {
    /// admit-scaler's `balancing` for it: a connection per request in flight makes the fewest
    /// connections the fewest requests.
    fn scaler_name(self) -> &'static str {
        match self {
            Balance::RoundRobin => "round-robin",
            Balance::LeastConn => "least-request",
        }
    }
}

impl From<Balance> for haproxy::Balance {
    fn from(balance: Balance) -> Self {
        match balance {
            Balance::RoundRobin => haproxy::Balance::RoundRobin,
            Balance::LeastConn => haproxy::Balance::LeastConn,
        }
    }
}

/// What every policy's run shares.
#[derive(Debug, Clone)]
pub struct Setup {
    /// This executable, whose `replica` command the replicas run.
    pub binary: PathBuf,
    /// The `admit-scaler` executable.
    pub scaler: Option<PathBuf>,
    /// The time-compression factor.
    pub compression: f64,
    /// Each replica's quota, or none.
    pub cpus: Option<f64>,
    /// How the proxy balances.
    pub balance: Balance,
    /// The replicas' work.
    pub work_mean: Duration,
    /// Their distribution.
    pub distribution: Distribution,
    /// Their cold factor.
    pub cold_factor: f64,
    /// Their cold phase, compressed.
    pub cold: Duration,
    /// `burn` iterations per ms.
    pub iterations_per_ms: f64,
    /// Client deadline.
    pub deadline: Duration,
    /// Session clients.
    pub sessions: usize,
    /// Their mean session lifetime.
    pub session_lifetime: Duration,
    /// Replica bounds.
    pub min_replicas: u32,
    /// Replica bounds.
    pub max_replicas: u32,
    /// admit-scaler's target.
    pub wait_threshold: Duration,
    /// admit-scaler's target.
    pub target_sl: f64,
    /// admit-scaler reads λ with its Poisson confidence (`arrivalRateWindowSeconds`).
    pub confidence: bool,
    /// Each replica runs admit's bound (`replica --bound`).
    pub bound: bool,
    /// Seed.
    pub seed: u64,
}

impl Setup {
    /// A request's mean time in service on a replica once warm: its work over the replica's
    /// CPUs.
    pub fn service_time(&self) -> f64 {
        self.work_mean.as_secs_f64() / self.cpus.unwrap_or(1.0)
    }

    /// A replica's capacity once warm: its CPUs over the mean work.
    pub fn replica_capacity(&self) -> f64 {
        self.cpus.unwrap_or(1.0) / self.work_mean.as_secs_f64()
    }

    /// `replica`'s flags, but its name, seed and SIGTERM behaviour.
    pub fn replica_args(&self) -> Vec<String> {
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        let compressed = |d: Duration| d.div_f64(self.compression);
        let mut args = vec![
            "--work-mean".to_owned(),
            format!("{}ms", self.work_mean.as_secs_f64() * 1e3),
            "--distribution".to_owned(),
            clap::ValueEnum::to_possible_value(&self.distribution)
                .map(|v| v.get_name().to_owned())
                .unwrap_or_default(),
            "--cold-factor".to_owned(),
            self.cold_factor.to_string(),
            "--cold".to_owned(),
            ms(self.cold),
            "--iterations-per-ms".to_owned(),
            format!("{:.0}", self.iterations_per_ms),
            "--capacity".to_owned(),
            format!("{:.3}", self.replica_capacity()),
            "--drain-delay".to_owned(),
            ms(compressed(Duration::from_secs(5))),
            "--drain-deadline".to_owned(),
            ms(compressed(Duration::from_secs(25))),
            "--reconnect-spread".to_owned(),
            ms(compressed(Duration::from_secs(10))),
        ];
        if self.bound {
            args.push("--bound".to_owned());
        }
        args
    }

    /// A PromQL rate window of one minute, compressed.
    fn minute(&self) -> String {
        window(Duration::from_secs(60), self.compression)
    }

    /// admit-scaler's metadata: the queries of `deploy/README.md` for a CPU-bound service over
    /// `prometheus`, with `setting` as the wait threshold (by default `wait_threshold`).
    pub fn admit_metadata(&self, prometheus: &str, setting: Setting) -> BTreeMap<String, String> {
        let w = self.minute();
        let wait_threshold = match setting {
            Setting::Value(seconds) => seconds,
            _ => self.wait_threshold.as_secs_f64(),
        };
        [
            ("scalerAddress", "admit-scaler:6000".to_owned()),
            ("prometheusURL", prometheus.to_owned()),
            // Every arrival once, at whichever admit layer saw it first (here the drain's);
            // `and` leaves out a replica that is gone (`deploy/README.md`).
            (
                "arrivalRateQuery",
                format!(
                    "sum(irate(admit_offered_requests_total[{w}]) and admit_offered_requests_total)"
                ),
            ),
            // The handler is CPU-bound: s is CPU time per request over a server's CPUs (one
            // server per replica), as `deploy/README.md` says for such services.
            (
                "serviceTimeQuery",
                format!(
                    "sum(rate(container_cpu_usage_seconds_total{{job=\"cadvisor\"}}[{w}])) / \
                     sum(rate(admit_shed_requests_total{{limiter=\"work\",outcome!=\"dropped\"}}[{w}])) / {}",
                    self.cpus.unwrap_or(1.0)
                ),
            ),
            (
                "waitThresholdSeconds",
                wait_threshold.to_string(),
            ),
            ("targetSL", self.target_sl.to_string()),
            ("balancing", self.balance.scaler_name().to_owned()),
            // `irate` counts the arrivals of one scrape interval.
            (
                "arrivalRateWindowSeconds",
                (15.0 / self.compression).to_string(),
            ),
            ("minReplicas", self.min_replicas.to_string()),
            ("maxReplicas", self.max_replicas.to_string()),
        ]
        .into_iter()
        .filter(|(key, _)| self.confidence || *key != "arrivalRateWindowSeconds")
        .map(|(key, value)| (key.to_owned(), value))
        .collect()
    }

    /// A KEDA Prometheus trigger's query and threshold for `policy` (its setting, or its
    /// system's default).
    pub fn prometheus_trigger(&self, policy: Policy) -> (String, f64) {
        let w = self.minute();
        let (query, default) = match policy.kind {
            Kind::Concurrency => (
                "sum(admit_shed_requests_in_flight{limiter=\"work\"})".to_owned(),
                100.0,
            ),
            Kind::QueueTime => (
                format!(
                    "histogram_quantile(0.9, sum(rate(admit_queue_wait_seconds_bucket{{source=\"request\"}}[{w}])) by (le))"
                ),
                0.05,
            ),
            Kind::Sessions => (
                "sum(admit_active_sessions) / count(up{job=\"admit\"} == 1)".to_owned(),
                500.0,
            ),
            Kind::Admit | Kind::Cpu | Kind::Fixed => (String::new(), 1.0),
        };
        let threshold = match policy.setting {
            Setting::Value(value) => value,
            // What one replica keeps in flight at 70 % of its capacity: λ·s per replica.
            Setting::Derived => 0.7 * self.replica_capacity() * self.service_time(),
            Setting::Default => default,
        };
        (query, threshold)
    }

    /// The fixed policy's replicas: the trace's peak at 70 % of a replica's capacity.
    pub fn fixed_replicas(&self, trace: &Trace) -> u32 {
        let peak = trace
            .segments()
            .iter()
            .map(|segment| match *segment {
                Segment::Constant { rate, .. } => rate,
                Segment::Ramp { from, to, .. } => from.max(to),
            })
            .fold(0.0, f64::max);
        ((peak / (0.7 * self.replica_capacity())).ceil() as u32)
            .clamp(self.min_replicas, self.max_replicas)
    }
}
