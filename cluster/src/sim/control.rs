//! The policies in the simulation: what each reads, as the real loop reads it, and the
//! replicas it proposes at each HPA sync (the HPA's own arithmetic, [`crate::hpa`]).
//!
//! The Prometheus policies evaluate the harness's queries
//! ([`Setup::prometheus_trigger`](crate::run::Setup::prometheus_trigger)) by their meaning
//! over the simulated scrapes; admit-scaler's decisions are its own
//! ([`admit_scaler::decision::Evaluator`]) on its metadata
//! ([`Setup::admit_metadata`](crate::run::Setup::admit_metadata)) with λ and s read as its two
//! queries read them.

use std::collections::HashMap;
use std::fmt;

use admit_scaler::decision::{Decision, Evaluator, Measured, MeasurementError};
use admit_scaler::metadata::ScalerConfig;

use super::scrape::Prometheus;
use crate::hpa::{PodCpu, Tolerance, average_value_replicas, utilization_replicas};
use crate::policy::{Kind, Policy, Setting};
use crate::run::{ScalerInputs, Setup};

/// Why a query gave no number: no series, or NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NoSeries(pub(crate) &'static str);

impl fmt::Display for NoSeries {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl MeasurementError for NoSeries {
    fn is_idle(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        "no_series"
    }
}

/// A pod as the controllers see it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PodReading {
    /// Its id.
    pub(crate) id: u64,
    /// Behind the proxy.
    pub(crate) ready: bool,
    /// CPU-seconds used, once its process runs.
    pub(crate) cpu_used: Option<f64>,
}

/// What a policy reads between syncs.
#[derive(Debug)]
pub(crate) enum Control {
    /// admit-scaler: its evaluator, deciding at its interval; KEDA reads the latest decision.
    Scaler {
        evaluator: Box<Evaluator>,
        /// The rate window of the two queries, s.
        window: f64,
        /// The quota, CPUs (the service-time query's divisor).
        cpus: f64,
        /// The latest decision.
        latest: Option<Decision>,
    },
    /// The HPA on CPU: each pod's CPU over the time since the last sync.
    Cpu {
        target_percent: u32,
        request_milli: i64,
        last: HashMap<u64, (f64, f64)>,
    },
    /// In flight per replica, `AverageValue`.
    InFlight { threshold: f64 },
    /// The p90 of the waits at the replicas, `AverageValue`.
    QueueTime { threshold: f64, window: f64 },
    /// Sessions per replica up, `AverageValue`.
    Sessions { threshold: f64, sessions: f64 },
    /// Always this many.
    Fixed(u32),
}

impl Control {
    /// `policy`'s control for `setup` with the trace's fixed count `fixed`.
    ///
    /// # Errors
    ///
    /// admit-scaler's metadata refused (a setting out of its range).
    pub(crate) fn new(setup: &Setup, policy: Policy, fixed: u32) -> Result<Self, String> {
        let minute = 60.0 / setup.compression;
        Ok(match policy.kind {
            Kind::Admit => {
                let metadata = setup.admit_metadata("http://127.0.0.1:9090", policy.setting);
                let config = ScalerConfig::from_metadata(&metadata).map_err(|e| e.to_string())?;
                Control::Scaler {
                    evaluator: Box::new(Evaluator::new(config)),
                    window: minute,
                    cpus: setup.cpus.unwrap_or(1.0),
                    latest: None,
                }
            }
            Kind::Cpu => Control::Cpu {
                target_percent: match policy.setting {
                    Setting::Value(percent) => percent as u32,
                    _ => 70,
                },
                request_milli: (setup.cpus.unwrap_or(1.0) * 1000.0).round() as i64,
                last: HashMap::new(),
            },
            Kind::Fixed => Control::Fixed(match policy.setting {
                Setting::Value(replicas) => replicas as u32,
                _ => fixed,
            }),
            Kind::Concurrency => Control::InFlight {
                threshold: setup.prometheus_trigger(policy).1,
            },
            Kind::QueueTime => Control::QueueTime {
                threshold: setup.prometheus_trigger(policy).1,
                window: minute,
            },
            Kind::Sessions => Control::Sessions {
                threshold: setup.prometheus_trigger(policy).1,
                sessions: setup.sessions as f64,
            },
        })
    }

    /// The replicas the fleet starts with.
    pub(crate) fn initial(&self, min_replicas: u32) -> u32 {
        match self {
            Control::Fixed(replicas) => *replicas,
            _ => min_replicas,
        }
    }

    /// admit-scaler's decision at `now` on what `prometheus` holds (others: nothing).
    pub(crate) fn decide(&mut self, now: f64, prometheus: &Prometheus) {
        let Control::Scaler {
            evaluator,
            window,
            cpus,
            latest,
        } = self
        else {
            return;
        };
        let no_series = NoSeries("the query returned no series");
        let arrival_rate = prometheus
            .admit
            .sum_irate(now, *window, |e| e.offered)
            .ok_or(no_series);
        let cpu = prometheus
            .cadvisor
            .sum_rate(now, *window, |e| e.cpu_seconds);
        let served = prometheus.admit.sum_rate(now, *window, |e| e.served);
        let service_time = match (cpu, served) {
            (Some(cpu), Some(served)) => Ok(cpu / served / *cpus),
            _ => Err(no_series),
        };
        let measured = Measured {
            arrival_rate,
            service_time,
        };
        let at = std::time::Duration::from_secs_f64(now);
        if let Ok(decision) = evaluator.decide(at, measured) {
            *latest = Some(decision);
        }
    }

    /// What admit-scaler's latest decision was made of.
    pub(crate) fn scaler_inputs(&self) -> Option<ScalerInputs> {
        let Control::Scaler {
            latest: Some(decision),
            ..
        } = self
        else {
            return None;
        };
        Some(ScalerInputs {
            arrival_rate: decision.arrival_rate,
            service_time: decision.service_time.unwrap_or(0.0),
            required_servers: decision.required_servers,
        })
    }

    /// The proposal at an HPA sync at `now` with `current` replicas: `None` when the metric
    /// cannot be read (the HPA keeps the count).
    pub(crate) fn proposal(
        &mut self,
        now: f64,
        current: u32,
        pods: &[PodReading],
        prometheus: &Prometheus,
        tolerance: Tolerance,
    ) -> Option<u32> {
        let average = |value: f64, threshold: f64| {
            (value.is_finite()).then(|| {
                average_value_replicas(
                    current,
                    crate::keda::milli(value),
                    crate::keda::milli(threshold),
                    tolerance,
                )
            })
        };
        let scraped = &prometheus.admit;
        match self {
            Control::Scaler { latest, .. } => average(latest.as_ref()?.replicas as f64, 1.0),
            Control::Cpu {
                target_percent,
                request_milli,
                last,
            } => {
                let mut readings = Vec::new();
                let mut seen = HashMap::new();
                for pod in pods {
                    let usage_milli = pod.cpu_used.and_then(|used| {
                        let (at, before) = last.get(&pod.id).copied()?;
                        (now > at).then(|| ((used - before) / (now - at) * 1000.0) as i64)
                    });
                    if let Some(used) = pod.cpu_used {
                        seen.insert(pod.id, (now, used));
                    }
                    readings.push(PodCpu {
                        ready: pod.ready,
                        usage_milli,
                        request_milli: *request_milli,
                    });
                }
                *last = seen;
                utilization_replicas(current, &readings, *target_percent, tolerance)
            }
            Control::InFlight { threshold } => {
                average(scraped.sum_gauge(|e| e.in_flight)?, *threshold)
            }
            Control::QueueTime { threshold, window } => {
                average(scraped.wait_quantile(now, *window, 0.9)?, *threshold)
            }
            Control::Sessions {
                threshold,
                sessions,
            } => {
                let up = scraped.up();
                (up > 0).then_some(())?;
                average(*sessions / up as f64, *threshold)
            }
            Control::Fixed(replicas) => Some(*replicas),
        }
    }
}
