//! One policy over the whole trace: the parts started afresh, the controller syncing, the load
//! and the sessions running, and every second recorded.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use admit_loadgen::{Driver, Outcome, Report, Tally, Trace, Transport};
use admit_scaler::prometheus::{ClientOptions, PrometheusClient};
use admit_testkit::haproxy::{self, HaproxyConfig, PROXY_ERROR_HEADER, Timeouts};
use admit_testkit::prometheus;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::watch;
use tokio::time::Instant;

use super::BoxError;
use super::scaler::ScalerProcess;
use super::sessions::{SessionCounts, Sessions};
use super::setup::Setup;
use crate::fleet::{Fleet, FleetConfig, FleetEvents, Phase, ScaleIn};
use crate::hpa::{Hpa, HpaSpec};
use crate::keda::ExternalTrigger;
use crate::policy::{Kind, Policy, Setting, Source};

/// One second of a policy's run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Second {
    /// Seconds since the load started.
    pub t: usize,
    /// The trace's rate at the second's middle, requests per second.
    pub offered_rate: f64,
    /// The requests sent in it, and what became of them.
    pub tally: Tally,
    /// Replicas not terminating (the HPA's current count) at the second's end.
    pub replicas: u32,
    /// Replicas behind the proxy.
    pub ready: u32,
    /// Pods leaving.
    pub terminating: u32,
    /// Whether a request sent in this second could have met a pod's departure: the second
    /// overlaps a departure widened by the client deadline before its signal.
    pub scaling_in: bool,
}

impl Second {
    /// Every second of a run over `trace`: the tallies by the second their requests were
    /// sent, `fleet(t)` the replicas, ready and terminating pods at second `t`'s end, and the
    /// pods' departures (signalled, gone) in seconds, with the clients' `deadline`.
    pub fn all(
        trace: &Trace,
        deadline: Duration,
        tallies: &[Tally],
        fleet: impl Fn(usize) -> (u32, u32, u32),
        departures: &[(f64, f64)],
    ) -> Vec<Second> {
        let deadline = deadline.as_secs_f64();
        tallies
            .iter()
            .enumerate()
            .map(|(t, tally)| {
                let (replicas, ready, terminating) = fleet(t);
                Second {
                    t,
                    offered_rate: trace
                        .rate_at(Duration::from_secs(t as u64) + Duration::from_millis(500)),
                    tally: tally.clone(),
                    replicas,
                    ready,
                    terminating,
                    scaling_in: departures.iter().any(|&(signalled, gone)| {
                        signalled - deadline < t as f64 + 1.0 && gone > t as f64
                    }),
                }
            })
            .collect()
    }
}

/// A policy's run.
#[derive(Debug, serde::Serialize)]
pub struct PolicyRun {
    /// The policy.
    pub policy: Policy,
    /// Its name in the report.
    pub name: String,
    /// How replicas left.
    pub scale_in: ScaleIn,
    /// Every second.
    pub seconds: Vec<Second>,
    /// Every request.
    pub total: Tally,
    /// Sessions.
    pub sessions: SessionCounts,
    /// What happened to pods.
    pub fleet: FleetEvents,
    /// Every pod's departure, in seconds since the load started: from its signal until it was
    /// gone.
    pub departures: Vec<(f64, f64)>,
    /// The controller's syncs.
    pub syncs: Vec<Reconcile>,
    /// Syncs without a metric, and the last reason.
    pub missed_syncs: (u32, String),
}

/// One sync of the controller.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Reconcile {
    /// Seconds since the load started.
    pub t: f64,
    /// The replicas before the sync.
    pub current: u32,
    /// The policy's proposal, before the HPA's behaviour.
    pub proposal: u32,
    /// The replicas the HPA set.
    pub desired: u32,
    /// For admit-scaler, what its latest decision was made of.
    pub scaler: Option<ScalerInputs>,
}

/// admit-scaler's latest decision, from its `/metrics`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct ScalerInputs {
    /// λ, requests per second.
    pub arrival_rate: f64,
    /// The mean service time, s.
    pub service_time: f64,
    /// The fewest servers meeting the target.
    pub required_servers: u64,
}

/// A transport that tells the proxy's own answers (no server for the request) from the
/// replicas': a 5xx carrying [`PROXY_ERROR_HEADER`] is another status, not a refusal.
#[derive(Clone, Debug)]
struct ThroughProxy(Client<HttpConnector, Empty<Bytes>>);

impl Transport<Empty<Bytes>> for ThroughProxy {
    async fn send(&self, request: http::Request<Empty<Bytes>>) -> Outcome {
        let response = match self.0.request(request).await {
            Ok(response) => response,
            Err(error) => return Outcome::Lost(admit_loadgen::classify(&error)),
        };
        let (parts, body) = response.into_parts();
        if let Err(error) = body.collect().await {
            return Outcome::Lost(admit_loadgen::classify(&error));
        }
        if parts.headers.contains_key(PROXY_ERROR_HEADER) {
            return Outcome::Status(parts.status);
        }
        admit_loadgen::classify_status(parts.status, &parts.headers)
    }
}

/// Runs `policy` over `trace`.
pub(super) async fn run(
    setup: &Setup,
    policy: Policy,
    scale_in: ScaleIn,
    trace: &Trace,
) -> Result<PolicyRun, BoxError> {
    let compressed = |d: Duration| d.div_f64(setup.compression);
    let proxy = Arc::new(
        haproxy::launch(HaproxyConfig {
            check_interval: compressed(Duration::from_secs(2)).max(Duration::from_millis(50)),
            rise: 1,
            fall: 2,
            balance: setup.balance.into(),
            // Sessions are held open for minutes without a byte.
            timeouts: Timeouts {
                client: Duration::from_secs(600),
                server: Duration::from_secs(600),
                ..Timeouts::default()
            },
            ..HaproxyConfig::default()
        })
        .await?,
    );
    let prometheus =
        Arc::new(prometheus::start_discovered(compressed(Duration::from_secs(15))).await?);
    let fleet = Fleet::new(
        FleetConfig {
            binary: setup.binary.clone(),
            replica_args: setup.replica_args(),
            cpus: setup.cpus,
            start_delay: compressed(Duration::from_secs(10)),
            propagation_delay: compressed(Duration::from_secs(2)),
            grace_period: compressed(Duration::from_secs(30)),
            scale_in,
        },
        Arc::clone(&proxy),
        Arc::clone(&prometheus),
    )
    .await?;
    let mut scaler = None;
    let source = match policy.kind {
        Kind::Admit => {
            let binary = setup
                .scaler
                .clone()
                .ok_or("no admit-scaler binary: build it (`cargo build --release -p admit-scaler`) or set ADMIT_SCALER")?;
            let interval = compressed(Duration::from_secs(10)).max(Duration::from_millis(100));
            let process = ScalerProcess::start(
                &binary,
                &[
                    "--decision-interval".to_owned(),
                    format!("{}ms", interval.as_millis()),
                    "--allow-prometheus".to_owned(),
                    prometheus.url(),
                ],
            )
            .await?;
            let channel =
                tonic::transport::Channel::from_shared(format!("http://{}", process.grpc))?
                    .connect()
                    .await?;
            let trigger = ExternalTrigger::new(
                channel,
                "cluster",
                "work",
                setup.admit_metadata(&prometheus.url(), policy.setting),
            );
            scaler = Some(process);
            Source::Scaler(trigger)
        }
        Kind::Cpu => Source::Cpu {
            target_percent: match policy.setting {
                Setting::Value(percent) => percent as u32,
                _ => 70,
            },
            request_cpus: setup.cpus.unwrap_or(1.0),
            last: HashMap::new(),
        },
        Kind::Fixed => Source::Fixed(match policy.setting {
            Setting::Value(replicas) => replicas as u32,
            _ => setup.fixed_replicas(trace),
        }),
        Kind::Concurrency | Kind::QueueTime | Kind::Sessions => {
            let (query, threshold) = setup.prometheus_trigger(policy);
            Source::Prometheus {
                client: Box::new(PrometheusClient::new(ClientOptions::default())),
                url: prometheus.url().parse()?,
                query: query.into(),
                threshold,
            }
        }
    };
    let spec = HpaSpec {
        min_replicas: setup.min_replicas,
        max_replicas: setup.max_replicas,
        behavior: crate::hpa::Behavior::default().compressed(setup.compression),
    };
    let initial = match &source {
        Source::Fixed(replicas) => *replicas,
        _ => setup.min_replicas,
    };
    fleet.scale(initial);
    let ready_limit = Instant::now() + Duration::from_secs(60);
    while ready(&fleet) < initial as usize && Instant::now() < ready_limit {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let (stop, stopped) = watch::channel(false);
    let start = Instant::now();
    let syncs = Arc::new(Mutex::new((Vec::new(), 0u32, String::new())));
    let scaler_metrics = scaler
        .as_ref()
        .map(|process| format!("http://{}/metrics", process.http));
    let controller = tokio::spawn(
        Controller {
            source,
            hpa: Hpa::new(spec),
            fleet: fleet.clone(),
            sync: compressed(Duration::from_secs(15)),
            start,
            syncs: Arc::clone(&syncs),
            scaler_metrics,
        }
        .run(stopped.clone()),
    );
    let sessions = Sessions::start(
        format!("{}/session", proxy.url()),
        setup.sessions,
        setup.session_lifetime,
        Duration::from_millis(100),
        setup.seed,
        stopped.clone(),
    );
    // The replicas each second, sampled at its end.
    let replicas_by_second = Arc::new(Mutex::new(BTreeMap::new()));
    let sampler = {
        let (fleet, by_second, mut stopped) = (
            fleet.clone(),
            Arc::clone(&replicas_by_second),
            stopped.clone(),
        );
        tokio::spawn(async move {
            let mut second = 0usize;
            loop {
                tokio::select! {
                    () = tokio::time::sleep_until(start + Duration::from_secs(second as u64 + 1)) => {}
                    _ = stopped.changed() => return,
                }
                let pods = fleet.pods();
                let count = |phase| pods.iter().filter(|pod| pod.phase == phase).count() as u32;
                let sample = (
                    fleet.replicas(),
                    count(Phase::Ready),
                    count(Phase::Terminating),
                );
                lock(&by_second).insert(second, sample);
                second += 1;
            }
        })
    };

    let client = ThroughProxy(Client::builder(TokioExecutor::new()).build_http());
    let url = format!("{}/work", proxy.url());
    let name = policy.name();
    let report: Report = Driver::new(setup.deadline)
        .run(
            &client,
            trace.duration(),
            trace.arrivals(setup.seed),
            |_| {
                http::Request::get(url.as_str())
                    .body(Empty::new())
                    .expect("a valid request")
            },
            |second, tally| {
                // The fleet now: the second just settled ended a moment ago.
                let (replicas, ready) = (fleet.replicas(), self::ready(&fleet));
                println!(
                    "{name:<16} {second:>4} s  offered {:>5}  ok {:>5}  refused {:>4}  failed {:>4}  p99 {:>7}  replicas {replicas:>2} ({ready} ready)",
                    tally.offered,
                    tally.ok,
                    tally.refused,
                    tally.failed(),
                    tally.p99().map_or_else(|| "-".to_owned(), |p| format!("{:.1} ms", p.as_secs_f64() * 1e3)),
                );
            },
        )
        .await;

    let _ = stop.send(true);
    let _ = controller.await;
    let _ = sampler.await;
    let sessions = sessions.finish().await;
    let fleet_events = fleet.events();
    let origin = start.into_std();
    let since = |at: std::time::Instant| {
        at.checked_duration_since(origin)
            .map_or_else(|| -(origin - at).as_secs_f64(), |d| d.as_secs_f64())
    };
    let departures: Vec<(f64, f64)> = fleet
        .departures()
        .iter()
        .map(|departure| (since(departure.signalled), since(departure.gone)))
        .collect();
    fleet.shutdown(Duration::from_secs(30)).await;
    if let Some(scaler) = scaler {
        scaler.stop().await;
    }
    let by_second = lock(&replicas_by_second).clone();
    let seconds = Second::all(
        trace,
        setup.deadline,
        &report.seconds,
        |t| by_second.get(&t).copied().unwrap_or_default(),
        &departures,
    );
    let (syncs, missed, reason) = std::mem::take(&mut *lock(&syncs));
    drop((proxy, prometheus));
    Ok(PolicyRun {
        policy,
        name: name.clone(),
        scale_in,
        seconds,
        total: report.total,
        sessions,
        fleet: fleet_events,
        departures,
        syncs,
        missed_syncs: (missed, reason),
    })
}

/// The syncs so far, and the missed ones with the last reason.
type Syncs = (Vec<Reconcile>, u32, String);

/// The controller: every sync period, the source's proposal through the HPA, and the fleet
/// scaled to it.
struct Controller {
    source: Source,
    hpa: Hpa,
    fleet: Fleet,
    /// The HPA's sync period.
    sync: Duration,
    /// When the load started.
    start: Instant,
    syncs: Arc<Mutex<Syncs>>,
    /// admit-scaler's `/metrics`, to record what each decision was made of.
    scaler_metrics: Option<String>,
}

impl Controller {
    async fn run(mut self, mut stopped: watch::Receiver<bool>) {
        let client: Client<HttpConnector, Empty<Bytes>> =
            Client::builder(TokioExecutor::new()).build_http();
        let tolerance = self.hpa.spec().behavior.tolerance();
        let mut tick = tokio::time::interval(self.sync);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stopped.changed() => return,
            }
            let current = self.fleet.replicas();
            match self.source.proposal(current, &self.fleet, tolerance).await {
                Ok(proposal) => {
                    let now = self.start.elapsed();
                    let desired = self.hpa.sync(now, current, proposal);
                    self.fleet.scale(desired);
                    let scaler = match &self.scaler_metrics {
                        Some(url) => scaler_inputs(&client, url).await,
                        None => None,
                    };
                    lock(&self.syncs).0.push(Reconcile {
                        t: now.as_secs_f64(),
                        current,
                        proposal,
                        desired,
                        scaler,
                    });
                }
                Err(missed) => {
                    let mut syncs = lock(&self.syncs);
                    syncs.1 += 1;
                    syncs.2 = missed.0;
                }
            }
        }
    }
}

/// admit-scaler's latest decision, read from its `/metrics`.
async fn scaler_inputs(
    client: &Client<HttpConnector, Empty<Bytes>>,
    url: &str,
) -> Option<ScalerInputs> {
    let request = http::Request::get(url).body(Empty::new()).ok()?;
    let response = client.request(request).await.ok()?;
    let body = response.into_body().collect().await.ok()?.to_bytes();
    let text = String::from_utf8_lossy(&body);
    let gauge = |name: &str| {
        text.lines()
            .find(|line| line.starts_with(name) && line[name.len()..].starts_with('{'))
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|value| value.parse::<f64>().ok())
    };
    Some(ScalerInputs {
        arrival_rate: gauge("admit_scaler_arrival_rate")?,
        service_time: gauge("admit_scaler_service_time_seconds")?,
        required_servers: gauge("admit_scaler_required_servers")? as u64,
    })
}

fn ready(fleet: &Fleet) -> usize {
    fleet
        .pods()
        .iter()
        .filter(|pod| pod.phase == Phase::Ready)
        .count()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Requests lost: no answer, a broken connection, or the proxy's own answer.
pub fn lost(tally: &Tally) -> u64 {
    tally.lost.total() + tally.other_status + tally.timed_out
}
