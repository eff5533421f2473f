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

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use admit_testkit::cgroup::Cgroup;
use admit_testkit::haproxy::Haproxy;
use admit_testkit::prometheus::Prometheus;
use rustix::process::{Pid, Signal, kill_process};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::watch;

use crate::replica::OnSigterm;

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
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    pods: BTreeMap<u64, Pod>,
    next: u64,
    events: FleetEvents,
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

/// How a running pod's CPU time is read.
#[derive(Debug, Clone)]
enum CpuMeter {
    Cgroup(Arc<Cgroup>),
    /// `/proc/<pid>/stat`, without cgroups: the process alone.
    Process(u32),
}

impl CpuMeter {
    fn usage(&self) -> Option<Duration> {
        match self {
            CpuMeter::Cgroup(cgroup) => cgroup.cpu_usage(),
            CpuMeter::Process(pid) => process_cpu(*pid),
        }
    }
}

/// A process's user and system time from `/proc/<pid>/stat`, at the usual 100 ticks a second.
fn process_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; the fields after it are plain.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

impl Fleet {
    /// A fleet of no replicas behind `proxy`, scraped by `prometheus`.
    pub fn new(config: FleetConfig, proxy: Arc<Haproxy>, prometheus: Arc<Prometheus>) -> Self {
        Fleet {
            shared: Arc::new(Shared {
                config,
                proxy,
                prometheus,
                state: Mutex::new(State::default()),
            }),
        }
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
                tokio::spawn(run_pod(Arc::clone(&self.shared), id, name, told));
            }
        } else {
            // The ReplicaSet's order: pods not ready before ready ones, newer before older.
            let mut victims: Vec<(bool, Instant, u64)> = state
                .pods
                .iter()
                .filter(|(_, pod)| pod.phase != Phase::Terminating)
                .map(|(&id, pod)| {
                    (
                        pod.phase == Phase::Ready,
                        pod.ready_at.unwrap_or(pod.created),
                        id,
                    )
                })
                .collect();
            victims.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
            for (_, _, id) in victims.into_iter().take((current - replicas) as usize) {
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

    /// Points Prometheus at every pod that listens.
    fn publish_targets(&self) {
        let state = self.state();
        let targets: Vec<(SocketAddr, String)> = state
            .pods
            .values()
            .filter_map(|pod| Some((pod.addr?, pod.name.clone())))
            .collect();
        drop(state);
        let labels: Vec<[(&str, &str); 1]> = targets
            .iter()
            .map(|(_, name)| [("pod", name.as_str())])
            .collect();
        let entries = targets
            .iter()
            .zip(&labels)
            .map(|((addr, _), labels)| (*addr, &labels[..]));
        if let Err(error) = self.prometheus.set_targets(entries) {
            eprintln!("fleet: Prometheus targets: {error}");
        }
    }
}

/// A pod's whole life: pending, started, behind the proxy, told to leave, gone.
async fn run_pod(shared: Arc<Shared>, id: u64, name: String, mut told: watch::Receiver<bool>) {
    let config = &shared.config;
    let leave = |shared: &Shared| {
        shared.state().pods.remove(&id);
        shared.publish_targets();
    };
    // Pending: told to leave before the process starts costs nothing.
    tokio::select! {
        () = tokio::time::sleep(config.start_delay) => {}
        () = told_to_leave(&mut told) => return leave(&shared),
    }
    let started = match start(config, &name, id) {
        Ok(started) => started,
        Err(error) => {
            eprintln!("fleet: {name} did not start: {error}");
            return leave(&shared);
        }
    };
    let (mut child, meter) = started;
    let pid = child.id();
    let stdout = child.stdout.take();
    let addr = match read_address(stdout).await {
        Some(addr) => addr,
        None => {
            eprintln!("fleet: {name} never said where it listens");
            let _ = child.start_kill();
            let _ = child.wait().await;
            return leave(&shared);
        }
    };
    {
        let mut state = shared.state();
        if let Some(pod) = state.pods.get_mut(&id) {
            pod.addr = Some(addr);
            pod.usage = Some(meter);
            if pod.phase == Phase::Pending {
                pod.phase = Phase::Starting;
            }
        }
    }
    shared.publish_targets();
    let added = shared.proxy.add_server(&name, addr).await;
    let behind_proxy = added.is_ok();
    match &added {
        Ok(_) => {
            let mut state = shared.state();
            if let Some(pod) = state.pods.get_mut(&id)
                && pod.phase == Phase::Starting
            {
                pod.phase = Phase::Ready;
                pod.ready_at = Some(Instant::now());
            }
        }
        Err(error) => eprintln!("fleet: the proxy did not add {name}: {error}"),
    }
    // Serving until told to leave, or until the process exits on its own.
    tokio::select! {
        () = told_to_leave(&mut told) => {}
        exited = child.wait() => {
            eprintln!("fleet: {name} exited on its own: {exited:?}");
            shared.state().events.crashed += 1;
            let _ = shared.proxy.remove(&name).await;
            return leave(&shared);
        }
    }
    // Leaving: the signal now, the proxy's endpoint update after the propagation delay.
    if let Some(pid) = pid.and_then(|pid| Pid::from_raw(pid as i32)) {
        let signal = match config.scale_in {
            ScaleIn::Kill => Signal::KILL,
            ScaleIn::Drain | ScaleIn::Graceful => Signal::TERM,
        };
        let _ = kill_process(pid, signal);
    }
    let proxy = Arc::clone(&shared.proxy);
    let (delay, server) = (config.propagation_delay, name.clone());
    let endpoint = tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        if behind_proxy {
            let _ = proxy.drain(&server).await;
        }
    });
    if tokio::time::timeout(config.grace_period, child.wait())
        .await
        .is_err()
    {
        shared.state().events.killed_at_grace += 1;
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    let _ = endpoint.await;
    if behind_proxy && shared.proxy.remove(&name).await.is_err() {
        shared.state().events.unremoved += 1;
    }
    leave(&shared);
}

/// Resolves once the pod is told to leave (or its fleet is gone).
async fn told_to_leave(told: &mut watch::Receiver<bool>) {
    let _ = told.wait_for(|&told| told).await;
}

/// Starts a replica's process, in a CPU cgroup when the fleet has a quota.
fn start(
    config: &FleetConfig,
    name: &str,
    id: u64,
) -> Result<(tokio::process::Child, CpuMeter), String> {
    let on_sigterm = match config.scale_in {
        ScaleIn::Graceful => OnSigterm::Graceful,
        ScaleIn::Drain | ScaleIn::Kill => OnSigterm::Drain,
    };
    let mut args: Vec<String> = vec![
        "replica".to_owned(),
        "--name".to_owned(),
        name.to_owned(),
        "--seed".to_owned(),
        (id + 1).to_string(),
        "--on-sigterm".to_owned(),
        clap::ValueEnum::to_possible_value(&on_sigterm)
            .map(|value| value.get_name().to_owned())
            .unwrap_or_default(),
    ];
    args.extend(config.replica_args.iter().cloned());
    let (command, cgroup) = match config.cpus {
        Some(cpus) => {
            let cgroup = Cgroup::cpu(&format!("admit-cluster-{name}"), cpus)?;
            (
                cgroup.command(&config.binary, &args),
                Some(Arc::new(cgroup)),
            )
        }
        None => {
            let mut command = std::process::Command::new(&config.binary);
            command.args(&args);
            (command, None)
        }
    };
    let mut command = tokio::process::Command::from(command);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|error| format!("spawning {}: {error}", config.binary.display()))?;
    // What a replica says on stderr is a problem: passed on, named.
    if let Some(stderr) = child.stderr.take() {
        let name = name.to_owned();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("{name}: {line}");
            }
        });
    }
    let meter = match (cgroup, child.id()) {
        (Some(cgroup), _) => CpuMeter::Cgroup(cgroup),
        (None, Some(pid)) => CpuMeter::Process(pid),
        (None, None) => return Err("the process exited at once".to_owned()),
    };
    Ok((child, meter))
}

/// The address from the replica's `<name> listening on <addr>` line; the rest of its output is
/// read and dropped, so it never blocks on a full pipe.
async fn read_address(stdout: Option<tokio::process::ChildStdout>) -> Option<SocketAddr> {
    let mut lines = BufReader::new(stdout?).lines();
    let addr = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some((_, addr)) = line.split_once(" listening on ") {
                return addr.trim().parse().ok();
            }
        }
        None
    })
    .await
    .ok()
    .flatten()?;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Some(addr)
}
