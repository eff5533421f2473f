//! The replicas: processes of the sample service, each in a CPU cgroup with a quota (a pod with
//! a CPU limit), behind the proxy and scraped by Prometheus, started and stopped in the order
//! Kubernetes does.
//!
//! - **Scale-out**: a pod is pending for the start delay (image pull, process start), then its
//!   process runs; once it listens, Prometheus scrapes it and the proxy adds it, sending it
//!   requests after its first readiness check passes.
//! - **Scale-in**: pods not yet ready go first, then the most recently ready (the ReplicaSet's
//!   order). At once the pod is signalled (SIGTERM, or SIGKILL for [`ScaleIn::Kill`]); the
//!   proxy stops sending it new requests only after the propagation delay, as endpoint removal
//!   reaches proxies while the pod already stops; the grace period ends in SIGKILL. The proxy
//!   removes the server once its connections are gone, and Prometheus stops scraping it.
//! - **CPU**: the `cadvisor` module stands in for the kubelet's cAdvisor endpoint, serving each
//!   running pod's `container_cpu_usage_seconds_total` for Prometheus to scrape.

mod cadvisor;
mod cpu;
mod pod;

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use admit_testkit::haproxy::Haproxy;
use admit_testkit::prometheus::Prometheus;
use tokio::sync::watch;

use self::cpu::CpuMeter;

/// How a replica leaves on scale-in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ScaleIn {
    /// admit's drain: SIGTERM, and the replica keeps serving through the propagation delay,
    /// refuses what still comes, asks sessions to reconnect, and finishes what is in flight.
    Drain,
    /// SIGTERM to a plain server: it stops accepting at once and finishes what is in flight.
    Graceful,
    /// SIGKILL at once.
    Kill,
}

/// How the replicas run.
#[derive(Clone, Debug)]
pub struct FleetConfig {
    /// The `admit-cluster` executable, whose `replica` command each replica runs.
    pub binary: PathBuf,
    /// `replica`'s flags but `--name`, `--seed` and `--on-sigterm`.
    pub replica_args: Vec<String>,
    /// Each replica's CPU quota, in CPUs; `None` runs them without cgroups.
    pub cpus: Option<f64>,
    /// From a pod's creation to its process's start.
    pub start_delay: Duration,
    /// From SIGTERM to the proxy sending the pod no new requests.
    pub propagation_delay: Duration,
    /// From SIGTERM to SIGKILL.
    pub grace_period: Duration,
    /// How replicas leave.
    pub scale_in: ScaleIn,
}

/// Where a pod is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Created; its process has not started or not listened yet.
    Pending,
    /// Listening, not yet sent requests by the proxy.
    Starting,
    /// Behind the proxy.
    Ready,
    /// Told to leave.
    Terminating,
}

/// One pod as the controller and the report see it.
#[derive(Clone, Debug)]
pub struct PodView {
    /// Its name, `r<number>`.
    pub name: String,
    /// Where it is in its life.
    pub phase: Phase,
    /// When it was created, and when it became ready.
    pub created: Instant,
    /// When the proxy started sending it requests.
    pub ready_at: Option<Instant>,
    /// The CPU time its processes have used, if it runs and can be measured.
    pub cpu_usage: Option<Duration>,
}

/// What happened to pods, for the report.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct FleetEvents {
    /// Pods that exited on their own (a crash), not told to.
    pub crashed: u32,
    /// Pods killed at the end of their grace period.
    pub killed_at_grace: u32,
    /// Pods the proxy could not remove in time.
    pub unremoved: u32,
}

/// The first `count` of `pods` (`(id, ready, since)`: ready since, or created) in the
/// ReplicaSet's order for a scale-down: pods not ready before ready ones, newer before older.
pub(crate) fn scale_down_order<T: PartialOrd>(
    pods: impl Iterator<Item = (u64, bool, T)>,
    count: usize,
) -> Vec<u64> {
    let mut pods: Vec<(u64, bool, T)> = pods.collect();
    pods.sort_by(|a, b| {
        a.1.cmp(&b.1)
            .then(b.2.partial_cmp(&a.2).unwrap_or(std::cmp::Ordering::Equal))
    });
    pods.into_iter().take(count).map(|(id, ..)| id).collect()
}

/// The replicas and what they run behind.
#[derive(Debug, Clone)]
pub struct Fleet {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    config: FleetConfig,
    proxy: Arc<Haproxy>,
    prometheus: Arc<Prometheus>,
    /// The cAdvisor stand-in's address, and its server task.
    cadvisor: (SocketAddr, tokio::task::AbortHandle),
    state: Mutex<State>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.cadvisor.1.abort();
    }
}

#[derive(Debug, Default)]
struct State {
    pods: BTreeMap<u64, Pod>,
    next: u64,
    events: FleetEvents,
    departures: Vec<Departure>,
}

/// A pod's departure: from its signal until it was gone (process exited, server removed).
#[derive(Clone, Copy, Debug)]
pub struct Departure {
    /// When the pod was signalled.
    pub signalled: Instant,
    /// When it was gone.
    pub gone: Instant,
}

#[derive(Debug)]
struct Pod {
    name: String,
    phase: Phase,
    created: Instant,
    ready_at: Option<Instant>,
    addr: Option<SocketAddr>,
    usage: Option<CpuMeter>,
    terminate: watch::Sender<bool>,
}

impl Fleet {
    /// A fleet of no replicas behind `proxy`, scraped by `prometheus` (the pods, and the
    /// cAdvisor stand-in this starts on loopback).
    ///
    /// # Errors
    ///
    /// The cAdvisor stand-in cannot listen, or Prometheus' target file cannot be written.
    pub async fn new(
        config: FleetConfig,
        proxy: Arc<Haproxy>,
        prometheus: Arc<Prometheus>,
    ) -> io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new_cyclic(|weak| Shared {
            config,
            proxy,
            prometheus,
            cadvisor: (
                addr,
                tokio::spawn(cadvisor::serve(listener, weak.clone())).abort_handle(),
            ),
            state: Mutex::new(State::default()),
        });
        shared.publish_targets()?;
        Ok(Fleet { shared })
    }

    /// The pods not told to leave: what the HPA reads as the current replicas.
    pub fn replicas(&self) -> u32 {
        let state = self.state();
        state
            .pods
            .values()
            .filter(|pod| pod.phase != Phase::Terminating)
            .count() as u32
    }

    /// Every pod, terminating ones included.
    pub fn pods(&self) -> Vec<PodView> {
        self.state()
            .pods
            .values()
            .map(|pod| PodView {
                name: pod.name.clone(),
                phase: pod.phase,
                created: pod.created,
                ready_at: pod.ready_at,
                cpu_usage: pod.usage.as_ref().and_then(CpuMeter::usage),
            })
            .collect()
    }

    /// What happened to pods so far.
    pub fn events(&self) -> FleetEvents {
        self.state().events.clone()
    }

    /// Every departure of a pod that ran, in the order they ended.
    pub fn departures(&self) -> Vec<Departure> {
        self.state().departures.clone()
    }

    /// Creates or removes pods until `replicas` are not terminating.
    pub fn scale(&self, replicas: u32) {
        let mut state = self.state();
        let current = state
            .pods
            .values()
            .filter(|pod| pod.phase != Phase::Terminating)
            .count() as u32;
        if replicas > current {
            for _ in current..replicas {
                let id = state.next;
                state.next += 1;
                let (terminate, told) = watch::channel(false);
                let name = format!("r{id}");
                state.pods.insert(
                    id,
                    Pod {
                        name: name.clone(),
                        phase: Phase::Pending,
                        created: Instant::now(),
                        ready_at: None,
                        addr: None,
                        usage: None,
                        terminate,
                    },
                );
                tokio::spawn(pod::run(Arc::clone(&self.shared), id, name, told));
            }
        } else {
            let pods = state
                .pods
                .iter()
                .filter(|(_, pod)| pod.phase != Phase::Terminating)
                .map(|(&id, pod)| {
                    (
                        id,
                        pod.phase == Phase::Ready,
                        pod.ready_at.unwrap_or(pod.created),
                    )
                });
            for id in scale_down_order(pods, (current - replicas) as usize) {
                if let Some(pod) = state.pods.get_mut(&id) {
                    pod.phase = Phase::Terminating;
                    pod.terminate.send_replace(true);
                }
            }
        }
    }

    /// Tells every pod to leave and waits, at most `limit`, until they are gone.
    pub async fn shutdown(&self, limit: Duration) {
        self.scale(0);
        let deadline = tokio::time::Instant::now() + limit;
        while !self.state().pods.is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.shared.state()
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Points Prometheus at every pod that listens, and at the cAdvisor stand-in.
    fn publish_targets(&self) -> io::Result<()> {
        let state = self.state();
        let pods: Vec<(SocketAddr, String)> = state
            .pods
            .values()
            .filter_map(|pod| Some((pod.addr?, pod.name.clone())))
            .collect();
        drop(state);
        let labels: Vec<[(&str, &str); 1]> = pods
            .iter()
            .map(|(_, name)| [("pod", name.as_str())])
            .collect();
        let cadvisor = [("job", "cadvisor"), ("__metrics_path__", cadvisor::PATH)];
        let entries = pods
            .iter()
            .zip(&labels)
            .map(|((addr, _), labels)| (*addr, &labels[..]))
            .chain([(self.cadvisor.0, &cadvisor[..])]);
        self.prometheus.set_targets(entries)
    }

    /// [`publish_targets`](Self::publish_targets) as pods come and go; a Prometheus already
    /// stopped (its directory gone at the end of a run) is no news.
    fn republish_targets(&self) {
        match self.publish_targets() {
            Err(error) if error.kind() != io::ErrorKind::NotFound => {
                eprintln!("fleet: Prometheus targets: {error}");
            }
            _ => {}
        }
    }
}
