//! One policy over a trace in the simulation: events in time order on one clock, the fleet
//! as the real harness runs it, and every request's outcome.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap};
use std::time::Duration;

use admit::clock::ManualClock;
use admit_loadgen::{Arrivals, Outcome, Tally, Trace};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::control::{Control, PodReading};
use super::replica::{CPU_TICK, Replica, ReplicaSpec};
use super::scrape::{DISCOVERY, Prometheus};
use crate::fleet::{FleetEvents, Phase, ScaleIn};
use crate::hpa::{Behavior, Hpa, HpaSpec, Tolerance};
use crate::policy::Policy;
use crate::run::{PolicyRun, Reconcile, Second, SessionCounts, Setup};

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

/// What happens at a time.
#[derive(Debug, Clone, Copy)]
pub(super) enum Event {
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

/// A pod in the simulation.
#[derive(Debug)]
pub(super) struct Pod {
    pub(super) phase: Phase,
    pub(super) created: f64,
    pub(super) ready_at: Option<f64>,
    /// Its process, once started.
    pub(super) replica: Option<Replica>,
    /// Its scheduled step is current only at this version.
    pub(super) version: u64,
    pub(super) signalled: Option<f64>,
    /// The drain refuses new requests.
    pub(super) refusing: bool,
    /// Its sessions have been told to reconnect, and the process may exit once empty.
    pub(super) sessions_moved: bool,
}

/// The run's state.
pub(super) struct Sim<'a> {
    pub(super) setup: &'a Setup,
    pub(super) world: World,
    pub(super) spec: ReplicaSpec,
    pub(super) clock: ManualClock,
    heap: BinaryHeap<Reverse<Timed>>,
    seq: u64,
    pub(super) pods: BTreeMap<u64, Pod>,
    pub(super) next_pod: u64,
    /// Pods the proxy sends requests to, in the order it added them.
    pub(super) rotation: Vec<u64>,
    pub(super) cursor: usize,
    pub(super) rng: SmallRng,
    /// The requests sent in each second, and what became of them.
    pub(super) seconds: Vec<Tally>,
    pub(super) total: Tally,
    /// The arrivals still to come, the next one scheduled.
    pending: Arrivals,
    /// When each request still unanswered was sent.
    pub(super) arrivals: BTreeMap<u64, f64>,
    /// Every pod's departure: signalled, gone.
    pub(super) departures: Vec<(f64, f64)>,
    by_second: Vec<(u32, u32, u32)>,
    pub(super) events: FleetEvents,
    /// Scratch space for what a replica's step finished and refused.
    pub(super) done: Vec<(u64, f64, f64)>,
    pub(super) refused: Vec<(u64, f64, &'static str)>,
    /// What Prometheus holds.
    pub(super) prometheus: Prometheus,
    control: Control,
    hpa: Hpa,
    tolerance: Tolerance,
    syncs: Vec<Reconcile>,
    missed: u32,
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
    let control = Control::new(setup, policy, setup.fixed_replicas(trace))?;
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
    let seconds =
        trace.duration().as_secs() as usize + usize::from(trace.duration().subsec_nanos() > 0);
    let behavior = Behavior::default().compressed(setup.compression);
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
        pending: trace.arrivals(setup.seed),
        arrivals: BTreeMap::new(),
        departures: Vec::new(),
        by_second: Vec::new(),
        events: FleetEvents::default(),
        done: Vec::new(),
        refused: Vec::new(),
        prometheus: Prometheus::new(4.0 * 60.0 / setup.compression),
        tolerance: behavior.tolerance(),
        hpa: Hpa::new(HpaSpec {
            min_replicas: setup.min_replicas,
            max_replicas: setup.max_replicas,
            behavior,
        }),
        control,
        syncs: Vec::new(),
        missed: 0,
    };
    // The initial fleet serves when the load starts, as the real harness waits for it.
    for _ in 0..sim.control.initial(setup.min_replicas) {
        let pod = sim.create(0.0);
        sim.start_pod(pod, 0.0)?;
    }
    sim.schedule_next_arrival();
    for second in 0..seconds {
        sim.push((second + 1) as f64, Event::Second);
    }
    let periods = world.periods;
    let phase = sim.rng.random::<f64>();
    sim.push(phase * periods.scrape, Event::Scrape);
    let phase = sim.rng.random::<f64>();
    sim.push(phase * DISCOVERY, Event::Discover);
    sim.push(CPU_TICK, Event::CpuTick);
    let phase = sim.rng.random::<f64>();
    sim.push(phase * periods.decision, Event::Decide);
    sim.push(0.0, Event::Sync);

    let end = trace.duration().as_secs_f64() + setup.deadline.as_secs_f64();
    while let Some(Reverse(Timed { at, event, .. })) = sim.heap.pop() {
        if at > end {
            break;
        }
        sim.clock.set(Duration::from_secs_f64(at));
        sim.handle(at, event)?;
    }
    Ok(sim.finish(policy, trace))
}

impl Sim<'_> {
    pub(super) fn push(&mut self, at: f64, event: Event) {
        self.seq += 1;
        self.heap.push(Reverse(Timed {
            at,
            seq: self.seq,
            event,
        }));
    }

    fn schedule_next_arrival(&mut self) {
        if let Some(next) = self.pending.next() {
            let at = next.at.as_secs_f64();
            self.arrivals.insert(next.index, at);
            self.push(at, Event::Arrival { index: next.index });
        }
    }

    /// Brings every pod to `now`.
    fn step_all(&mut self, now: f64) {
        let ids: Vec<u64> = self.pods.keys().copied().collect();
        for pod in ids {
            self.step(pod, now);
        }
    }

    fn handle(&mut self, at: f64, event: Event) -> Result<(), String> {
        let periods = self.world.periods;
        match event {
            Event::Arrival { index } => {
                self.schedule_next_arrival();
                self.arrive(at, index);
            }
            Event::Replica { pod, version } => {
                if self.pods.get(&pod).is_some_and(|p| p.version == version) {
                    self.step(pod, at);
                }
            }
            Event::Second => {
                let count = |phase| self.pods.values().filter(|p| p.phase == phase).count() as u32;
                let sample = (
                    self.replicas(),
                    count(Phase::Ready),
                    count(Phase::Terminating),
                );
                self.by_second.push(sample);
            }
            Event::Scrape => {
                self.scrape(at);
                self.push(at + periods.scrape, Event::Scrape);
            }
            Event::ScrapeAnswer { pod, started } => {
                self.step(pod, at);
                if let Some(replica) = self.pods.get(&pod).and_then(|p| p.replica.as_ref()) {
                    self.prometheus
                        .admit
                        .record(started, pod, replica.exposed());
                }
            }
            Event::Discover => {
                let serving: Vec<u64> = self
                    .pods
                    .iter()
                    .filter(|(_, pod)| pod.replica.is_some())
                    .map(|(&id, _)| id)
                    .collect();
                self.prometheus.discover(serving);
                self.push(at + DISCOVERY, Event::Discover);
            }
            Event::CpuTick => {
                self.step_all(at);
                for pod in self.pods.values_mut() {
                    if let Some(replica) = pod.replica.as_mut() {
                        replica.sample_cpu();
                    }
                }
                self.push(at + CPU_TICK, Event::CpuTick);
            }
            Event::Decide => {
                self.control.decide(at, &self.prometheus);
                self.push(at + periods.decision, Event::Decide);
            }
            Event::Sync => {
                self.sync(at);
                self.push(at + periods.sync, Event::Sync);
            }
            Event::PodStart(pod) => self.start_pod(pod, at)?,
            Event::Deregister(pod) => self.rotation.retain(|&id| id != pod),
            Event::DrainDelay(pod) => {
                if let Some(p) = self.pods.get_mut(&pod) {
                    p.refusing = true;
                }
            }
            Event::SessionsMoved(pod) => {
                if let Some(p) = self.pods.get_mut(&pod) {
                    p.sessions_moved = true;
                }
                self.step(pod, at);
            }
            Event::DrainDeadline(pod) => self.gone(pod, at, true),
        }
        Ok(())
    }

    /// A scrape at `now`: cAdvisor reads every pod; the replicas' own targets, once
    /// discovered, answer when their runtime runs.
    fn scrape(&mut self, now: f64) {
        self.step_all(now);
        let ids: Vec<u64> = self.pods.keys().copied().collect();
        for pod in ids {
            let Some(replica) = self.pods.get(&pod).and_then(|p| p.replica.as_ref()) else {
                continue;
            };
            let exposed = replica.exposed();
            let throttled = replica.throttled_until();
            self.prometheus.cadvisor.record(now, pod, exposed);
            if !self.prometheus.knows(pod) {
                continue;
            }
            match throttled {
                Some(until) => self.push(until, Event::ScrapeAnswer { pod, started: now }),
                None => self.prometheus.admit.record(now, pod, exposed),
            }
        }
    }

    /// The HPA's sync at `now`: the policy's proposal, the HPA's answer, the fleet scaled.
    fn sync(&mut self, now: f64) {
        self.step_all(now);
        let readings: Vec<PodReading> = self
            .pods
            .iter()
            .filter(|(_, pod)| pod.phase != Phase::Terminating)
            .map(|(&id, pod)| PodReading {
                id,
                ready: pod.phase == Phase::Ready,
                cpu_used: pod.replica.as_ref().map(Replica::cpu_used),
            })
            .collect();
        let current = self.replicas();
        let proposal =
            self.control
                .proposal(now, current, &readings, &self.prometheus, self.tolerance);
        let Some(proposal) = proposal else {
            self.missed += 1;
            return;
        };
        let desired = self
            .hpa
            .sync(Duration::from_secs_f64(now), current, proposal);
        self.scale(now, desired);
        self.syncs.push(Reconcile {
            t: now,
            current,
            proposal,
            desired,
            scaler: self.control.scaler_inputs(),
        });
    }

    /// The run: what is still out when the clients' deadlines have passed timed out.
    fn finish(mut self, policy: Policy, trace: &Trace) -> PolicyRun {
        let left: Vec<u64> = self.arrivals.keys().copied().collect();
        for request in left {
            self.record(request, Outcome::TimedOut, Duration::ZERO);
        }
        let by_second = &self.by_second;
        let seconds = Second::all(
            trace,
            self.setup.deadline,
            &self.seconds,
            |t| by_second.get(t).copied().unwrap_or_default(),
            &self.departures,
        );
        PolicyRun {
            policy,
            name: policy.name(),
            scale_in: ScaleIn::Drain,
            seconds,
            total: self.total,
            sessions: SessionCounts::default(),
            fleet: self.events,
            departures: self.departures,
            syncs: self.syncs,
            missed_syncs: (self.missed, String::new()),
        }
    }
}
