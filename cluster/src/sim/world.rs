//! One policy over a trace in the simulation: events in time order on one clock, the fleet
//! as the real harness runs it, and every request's outcome.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap};
use std::time::Duration;

use admit::clock::ManualClock;
use admit_loadgen::{Outcome, Refusal, Tally, Trace};
use http::StatusCode;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::control::{Control, PodReading};
use super::replica::{Admission, CPU_TICK, Replica, ReplicaSpec};
use super::scrape::{DISCOVERY, Prometheus};
use crate::fleet::{FleetEvents, Phase, ScaleIn, scale_down_order};
use crate::hpa::{Behavior, Hpa, HpaSpec};
use crate::policy::Policy;
use crate::run::{Balance, PolicyRun, Reconcile, Second, SessionCounts, Setup};

/// The periods of the loop, in simulated seconds, as the real harness sets them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Periods {
    /// From a pod's creation to its process serving.
    pub(crate) start_delay: f64,
    /// From a pod's signal until the proxy stops sending it requests.
    pub(crate) propagation: f64,
    /// From the signal until the replica's drain refuses new requests.
    pub(crate) drain_delay: f64,
    /// From the signal until the replica gives up on what is left.
    pub(crate) drain_deadline: f64,
    /// The window over which a draining replica tells its sessions to reconnect.
    pub(crate) reconnect_spread: f64,
    /// From a drained replica's last request until the pod is gone (the process exits, the
    /// proxy forgets it), as measured on the real loop.
    pub(crate) exit: f64,
    /// Prometheus' scrape interval.
    pub(crate) scrape: f64,
    /// The HPA's sync period.
    pub(crate) sync: f64,
    /// admit-scaler's decision interval.
    pub(crate) decision: f64,
    /// The CFS period (not compressed).
    pub(crate) cfs: f64,
}

impl Periods {
    /// The real harness's periods at `compression`.
    pub(crate) fn compressed(compression: f64) -> Self {
        let c = |seconds: f64| seconds / compression;
        Periods {
            start_delay: c(10.0),
            propagation: c(2.0),
            drain_delay: c(5.0),
            drain_deadline: c(25.0),
            reconnect_spread: c(10.0),
            exit: 0.1,
            scrape: c(15.0),
            sync: c(15.0),
            decision: c(10.0).max(0.1),
            cfs: 0.1,
        }
    }
}

/// What the simulation needs besides the setup.
#[derive(Clone, Copy, Debug)]
pub(crate) struct World {
    /// The loop's periods.
    pub(crate) periods: Periods,
    /// The cores a replica's threads may run on at once.
    pub(crate) cores: f64,
    /// CPU-seconds a request costs besides its work.
    pub(crate) overhead: f64,
    /// What the proxy and the network add to every answer's latency.
    pub(crate) proxy_latency: f64,
}

#[derive(Debug, Clone, Copy)]
enum Event {
    Arrival {
        index: u64,
    },
    Replica {
        pod: u64,
        version: u64,
    },
    Second,
    Scrape,
    Discover,
    /// A throttled replica answers a scrape that started at `started`.
    ScrapeAnswer {
        pod: u64,
        started: f64,
    },
    CpuTick,
    Decide,
    Sync,
    PodStart(u64),
    Deregister(u64),
    DrainDelay(u64),
    SessionsMoved(u64),
    DrainDeadline(u64),
}

#[derive(Debug)]
struct Timed {
    at: f64,
    seq: u64,
    event: Event,
}

impl PartialEq for Timed {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Timed {}
impl PartialOrd for Timed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Timed {
    fn cmp(&self, other: &Self) -> Ordering {
        self.at.total_cmp(&other.at).then(self.seq.cmp(&other.seq))
    }
}

#[derive(Debug)]
struct Pod {
    phase: Phase,
    created: f64,
    ready_at: Option<f64>,
    replica: Option<Replica>,
    version: u64,
    signalled: Option<f64>,
    /// The drain refuses new requests.
    refusing: bool,
    /// Its sessions have been told to reconnect, and the process may exit once empty.
    sessions_moved: bool,
}

/// The run's state.
struct Sim<'a> {
    setup: &'a Setup,
    world: World,
    spec: ReplicaSpec,
    clock: ManualClock,
    heap: BinaryHeap<Reverse<Timed>>,
    seq: u64,
    pods: BTreeMap<u64, Pod>,
    next_pod: u64,
    /// Pods the proxy sends requests to, in the order it added them.
    rotation: Vec<u64>,
    cursor: usize,
    rng: SmallRng,
    seconds: Vec<Tally>,
    total: Tally,
    arrivals: BTreeMap<u64, f64>,
    departures: Vec<(f64, f64)>,
    by_second: Vec<(u32, u32, u32)>,
    events: FleetEvents,
    done: Vec<(u64, f64, f64)>,
    refused: Vec<(u64, f64, &'static str)>,
    /// What Prometheus holds.
    prometheus: Prometheus,
}

/// Runs `policy` over `trace` in the simulation.
///
/// # Errors
///
/// admit's limiters or admit-scaler's metadata refused the setup.
pub(crate) fn run(
    setup: &Setup,
    world: World,
    policy: Policy,
    trace: &Trace,
) -> Result<PolicyRun, String> {
    let mut control = Control::new(setup, policy, setup.fixed_replicas(trace))?;
    let spec = ReplicaSpec {
        work: admit_testkit::work::Work {
            mean: setup.work_mean,
            distribution: setup.distribution,
            cold_factor: setup.cold_factor,
            cold: setup.cold,
            // Iterations of a nanosecond: service times to the nanosecond.
            iterations_per_ms: 1e6,
        },
        cpus: setup.cpus.unwrap_or(world.cores),
        cores: world.cores,
        period: world.periods.cfs,
        capacity: setup.replica_capacity(),
        overhead: world.overhead,
    };
    let length = trace.duration().as_secs_f64();
    let seconds =
        trace.duration().as_secs() as usize + usize::from(trace.duration().subsec_nanos() > 0);
    let mut sim = Sim {
        setup,
        world,
        spec,
        clock: ManualClock::new(),
        heap: BinaryHeap::new(),
        seq: 0,
        pods: BTreeMap::new(),
        next_pod: 0,
        rotation: Vec::new(),
        cursor: 0,
        rng: SmallRng::seed_from_u64(setup.seed ^ 0x5eed_f1ee7),
        seconds: vec![Tally::new(); seconds],
        total: Tally::new(),
        arrivals: BTreeMap::new(),
        departures: Vec::new(),
        by_second: Vec::new(),
        events: FleetEvents::default(),
        done: Vec::new(),
        refused: Vec::new(),
        prometheus: Prometheus::new(4.0 * 60.0 / setup.compression),
    };
    let periods = world.periods;
    let behavior = Behavior::default().compressed(setup.compression);
    let tolerance = behavior.tolerance();
    let mut hpa = Hpa::new(HpaSpec {
        min_replicas: setup.min_replicas,
        max_replicas: setup.max_replicas,
        behavior,
    });
    // The initial fleet serves when the load starts, as the real harness waits for it.
    for _ in 0..control.initial(setup.min_replicas) {
        let pod = sim.create(0.0);
        sim.start_pod(pod, 0.0)?;
    }
    let mut arrivals = trace.arrivals(setup.seed);
    if let Some(first) = arrivals.next() {
        sim.arrivals.insert(first.index, first.at.as_secs_f64());
        sim.push(
            first.at.as_secs_f64(),
            Event::Arrival { index: first.index },
        );
    }
    for second in 0..seconds {
        sim.push((second + 1) as f64, Event::Second);
    }
    let phase = sim.rng.random::<f64>();
    sim.push(phase * periods.scrape, Event::Scrape);
    let phase = sim.rng.random::<f64>();
    sim.push(phase * DISCOVERY, Event::Discover);
    sim.push(CPU_TICK, Event::CpuTick);
    let phase = sim.rng.random::<f64>();
    sim.push(phase * periods.decision, Event::Decide);
    sim.push(0.0, Event::Sync);

    let mut syncs = Vec::new();
    let mut missed = 0u32;
    let end = length + setup.deadline.as_secs_f64();

    while let Some(Reverse(Timed { at, event, .. })) = sim.heap.pop() {
        if at > end {
            break;
        }
        sim.clock.set(Duration::from_secs_f64(at));
        match event {
            Event::Arrival { index } => {
                if let Some(next) = arrivals.next() {
                    sim.arrivals.insert(next.index, next.at.as_secs_f64());
                    sim.push(next.at.as_secs_f64(), Event::Arrival { index: next.index });
                }
                sim.arrive(at, index);
            }
            Event::Replica { pod, version } => {
                if sim.pods.get(&pod).is_some_and(|p| p.version == version) {
                    sim.step(pod, at);
                }
            }
            Event::Second => {
                let count = |phase| sim.pods.values().filter(|p| p.phase == phase).count() as u32;
                let sample = (
                    sim.replicas(),
                    count(Phase::Ready),
                    count(Phase::Terminating),
                );
                sim.by_second.push(sample);
            }
            Event::Scrape => {
                let ids: Vec<u64> = sim.pods.keys().copied().collect();
                for pod in ids {
                    sim.step(pod, at);
                    let Some(replica) = sim.pods.get(&pod).and_then(|p| p.replica.as_ref()) else {
                        continue;
                    };
                    sim.prometheus.cadvisor.record(at, pod, replica.exposed());
                    if !sim.prometheus.knows(pod) {
                        continue;
                    }
                    // A throttled replica's runtime answers when its period ends.
                    match replica.throttled_until() {
                        Some(until) => sim.push(until, Event::ScrapeAnswer { pod, started: at }),
                        None => sim.prometheus.admit.record(at, pod, replica.exposed()),
                    }
                }
                sim.push(at + periods.scrape, Event::Scrape);
            }
            Event::ScrapeAnswer { pod, started } => {
                sim.step(pod, at);
                if let Some(replica) = sim.pods.get(&pod).and_then(|p| p.replica.as_ref()) {
                    sim.prometheus.admit.record(started, pod, replica.exposed());
                }
            }
            Event::Discover => {
                let serving = sim
                    .pods
                    .iter()
                    .filter(|(_, pod)| pod.replica.is_some())
                    .map(|(&id, _)| id);
                let serving: Vec<u64> = serving.collect();
                sim.prometheus.discover(serving);
                sim.push(at + DISCOVERY, Event::Discover);
            }
            Event::CpuTick => {
                let ids: Vec<u64> = sim.pods.keys().copied().collect();
                for id in ids {
                    sim.step(id, at);
                    if let Some(replica) = sim.pods.get_mut(&id).and_then(|p| p.replica.as_mut()) {
                        replica.sample_cpu();
                    }
                }
                sim.push(at + CPU_TICK, Event::CpuTick);
            }
            Event::Decide => {
                control.decide(at, &sim.prometheus);
                sim.push(at + periods.decision, Event::Decide);
            }
            Event::Sync => {
                let ids: Vec<u64> = sim.pods.keys().copied().collect();
                for &id in &ids {
                    sim.step(id, at);
                }
                let readings: Vec<PodReading> = sim
                    .pods
                    .iter()
                    .filter(|(_, pod)| pod.phase != Phase::Terminating)
                    .map(|(&id, pod)| PodReading {
                        id,
                        ready: pod.phase == Phase::Ready,
                        cpu_used: pod.replica.as_ref().map(Replica::cpu_used),
                    })
                    .collect();
                let current = sim.replicas();
                match control.proposal(at, current, &readings, &sim.prometheus, tolerance) {
                    Some(proposal) => {
                        let desired = hpa.sync(Duration::from_secs_f64(at), current, proposal);
                        sim.scale(at, desired);
                        syncs.push(Reconcile {
                            t: at,
                            current,
                            proposal,
                            desired,
                            scaler: control.scaler_inputs(),
                        });
                    }
                    None => missed += 1,
                }
                sim.push(at + periods.sync, Event::Sync);
            }
            Event::PodStart(pod) => sim.start_pod(pod, at)?,
            Event::Deregister(pod) => sim.rotation.retain(|&id| id != pod),
            Event::DrainDelay(pod) => {
                if let Some(p) = sim.pods.get_mut(&pod) {
                    p.refusing = true;
                }
            }
            Event::SessionsMoved(pod) => {
                if let Some(p) = sim.pods.get_mut(&pod) {
                    p.sessions_moved = true;
                }
                sim.step(pod, at);
            }
            Event::DrainDeadline(pod) => sim.gone(pod, at, true),
        }
    }
    // What is still out when the clients' deadlines have passed timed out.
    let left: Vec<u64> = sim.arrivals.keys().copied().collect();
    for request in left {
        sim.record(request, Outcome::TimedOut, Duration::ZERO);
    }
    let departures = sim.departures.clone();
    let by_second = &sim.by_second;
    let seconds = Second::all(
        trace,
        setup.deadline,
        &sim.seconds,
        |t| by_second.get(t).copied().unwrap_or_default(),
        &departures,
    );
    Ok(PolicyRun {
        policy,
        name: policy.name(),
        scale_in: ScaleIn::Drain,
        seconds,
        total: sim.total,
        sessions: SessionCounts::default(),
        fleet: sim.events,
        departures,
        syncs,
        missed_syncs: (missed, String::new()),
    })
}

impl Sim<'_> {
    fn push(&mut self, at: f64, event: Event) {
        self.seq += 1;
        self.heap.push(Reverse(Timed {
            at,
            seq: self.seq,
            event,
        }));
    }

    /// Pods not leaving: the HPA's current count.
    fn replicas(&self) -> u32 {
        self.pods
            .values()
            .filter(|pod| pod.phase != Phase::Terminating)
            .count() as u32
    }

    fn create(&mut self, now: f64) -> u64 {
        let id = self.next_pod;
        self.next_pod += 1;
        self.pods.insert(
            id,
            Pod {
                phase: Phase::Pending,
                created: now,
                ready_at: None,
                replica: None,
                version: 0,
                signalled: None,
                refusing: false,
                sessions_moved: false,
            },
        );
        id
    }

    /// The pod's process serves, and the proxy adds it.
    fn start_pod(&mut self, pod: u64, now: f64) -> Result<(), String> {
        let phase = self.rng.random::<f64>() * self.world.periods.cfs;
        let seed = self.setup.seed ^ (pod + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let Some(p) = self.pods.get_mut(&pod) else {
            return Ok(());
        };
        if p.phase != Phase::Pending {
            return Ok(());
        }
        let replica = Replica::start(&self.spec, &self.clock, now, phase, seed)
            .map_err(|error| error.to_string())?;
        p.replica = Some(replica);
        p.phase = Phase::Ready;
        p.ready_at = Some(now);
        self.rotation.push(pod);
        Ok(())
    }

    /// Scales to `desired` as the real fleet does: new pods start after the start delay;
    /// leaving, the unready go first, then the newest.
    fn scale(&mut self, now: f64, desired: u32) {
        let current = self.replicas();
        if desired > current {
            for _ in current..desired {
                let pod = self.create(now);
                self.push(now + self.world.periods.start_delay, Event::PodStart(pod));
            }
            return;
        }
        let pods = self
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
        for id in scale_down_order(pods, (current - desired) as usize) {
            self.signal(id, now);
        }
    }

    /// SIGTERM: a pod without a process goes at once; a replica drains.
    fn signal(&mut self, pod: u64, now: f64) {
        let Some(p) = self.pods.get_mut(&pod) else {
            return;
        };
        p.phase = Phase::Terminating;
        p.signalled = Some(now);
        if p.replica.is_none() {
            self.pods.remove(&pod);
            return;
        }
        let periods = self.world.periods;
        // Its sessions, an even share of them, are told to reconnect evenly over the spread
        // after the delay; the last at m/(m + 1) of it.
        let ready = self.rotation.len().max(1) as f64;
        let sessions = (self.setup.sessions as f64 / ready).round();
        let told = periods.reconnect_spread * sessions / (sessions + 1.0);
        self.push(now + periods.propagation, Event::Deregister(pod));
        self.push(now + periods.drain_delay, Event::DrainDelay(pod));
        let moved = now + periods.drain_delay + told + periods.exit;
        self.push(moved, Event::SessionsMoved(pod));
        self.push(now + periods.drain_deadline, Event::DrainDeadline(pod));
    }

    /// The pod is gone; `expired`: at its drain's deadline, with requests cut.
    fn gone(&mut self, pod: u64, now: f64, expired: bool) {
        let Some(p) = self.pods.remove(&pod) else {
            return;
        };
        self.rotation.retain(|&id| id != pod);
        self.prometheus.forget(pod);
        if let Some(signalled) = p.signalled {
            self.departures.push((signalled, now));
        }
        if expired && let Some(replica) = p.replica {
            self.events.killed_at_grace += u32::from(replica.busy() > 0);
            // The requests still there lose their connection.
            for request in replica.requests() {
                if let Some(arrived) = self.arrivals.get(&request).copied() {
                    let latency = Duration::from_secs_f64(now - arrived);
                    self.record(request, Outcome::Lost(admit_loadgen::Lost::Closed), latency);
                }
            }
        }
    }

    /// A request reaches the proxy.
    fn arrive(&mut self, now: f64, request: u64) {
        let pod = match self.setup.balance {
            _ if self.rotation.is_empty() => None,
            Balance::RoundRobin => {
                self.cursor = (self.cursor + 1) % self.rotation.len();
                Some(self.rotation[self.cursor])
            }
            Balance::LeastConn => self.rotation.iter().copied().min_by_key(|id| {
                self.pods
                    .get(id)
                    .and_then(|pod| pod.replica.as_ref())
                    .map_or(usize::MAX, Replica::busy)
            }),
        };
        let Some(pod) = pod else {
            // The proxy's own answer: no server.
            self.record(
                request,
                Outcome::Status(StatusCode::SERVICE_UNAVAILABLE),
                Duration::ZERO,
            );
            return;
        };
        self.step(pod, now);
        let Some(p) = self.pods.get_mut(&pod) else {
            return;
        };
        if p.refusing {
            self.refuse(request, now, now, "draining");
            return;
        }
        let Some(replica) = p.replica.as_mut() else {
            return;
        };
        if let Some(Admission::Refused(reason)) = replica.arrive(now, request) {
            self.refuse(request, now, now, reason);
        }
        self.reschedule(pod);
    }

    /// Brings pod `pod` to `now` and records what finished.
    fn step(&mut self, pod: u64, now: f64) {
        let (mut done, mut refused) = (
            std::mem::take(&mut self.done),
            std::mem::take(&mut self.refused),
        );
        let leave = match self.pods.get_mut(&pod) {
            Some(Pod {
                replica: Some(replica),
                sessions_moved,
                ..
            }) => {
                replica.step(now, &mut done, &mut refused);
                *sessions_moved && replica.busy() == 0
            }
            _ => false,
        };
        for (request, arrived, finished) in done.drain(..) {
            let latency = finished - arrived + self.world.proxy_latency;
            let outcome = if latency > self.setup.deadline.as_secs_f64() {
                Outcome::TimedOut
            } else {
                Outcome::Ok
            };
            self.record(request, outcome, Duration::from_secs_f64(latency));
        }
        for (request, arrived, reason) in refused.drain(..) {
            self.refuse(request, arrived, now, reason);
        }
        (self.done, self.refused) = (done, refused);
        if leave {
            self.gone(pod, now, false);
        } else {
            self.reschedule(pod);
        }
    }

    fn reschedule(&mut self, pod: u64) {
        let Some(p) = self.pods.get_mut(&pod) else {
            return;
        };
        p.version += 1;
        let version = p.version;
        if let Some(next) = p.replica.as_ref().and_then(Replica::next_event) {
            self.push(next, Event::Replica { pod, version });
        }
    }

    fn refuse(&mut self, request: u64, arrived: f64, now: f64, reason: &str) {
        let refusal = Refusal {
            status: StatusCode::SERVICE_UNAVAILABLE,
            retry_after: None,
            reason: Some(reason.to_owned()),
        };
        let latency = now - arrived + self.world.proxy_latency;
        self.record(
            request,
            Outcome::Refused(refusal),
            Duration::from_secs_f64(latency),
        );
    }

    /// Counts `request`'s outcome in the second it was sent.
    fn record(&mut self, request: u64, outcome: Outcome, latency: Duration) {
        let Some(arrived) = self.arrivals.remove(&request) else {
            return;
        };
        if let Some(tally) = self.seconds.get_mut(arrived as usize) {
            tally.record(&outcome, latency);
        }
        self.total.record(&outcome, latency);
    }
}
