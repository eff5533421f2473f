//! One simulated replica: admit's real warm-up bucket and shedder on the simulation's clock,
//! in front of the replica's CPUs, and the counters Prometheus scrapes from it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use admit::clock::ManualClock;
use admit::shed::{OwnedPermit, Shedder};
use admit::signal::Arrival;
use admit::signal::queue::QueueGate;
use admit::warmup::WarmUp;
use admit_testkit::work::Work;
use rand::SeedableRng;
use rand::rngs::SmallRng;

use super::cpu::Cpu;

/// The queue-wait histogram's upper bounds in seconds, as admit's metrics label them (`le`);
/// one more bucket counts the longer waits.
pub(crate) const WAIT_BOUNDS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// The CPU sampler's tick, and the weight of the last reading in its moving average.
pub(crate) const CPU_TICK: f64 = 0.25;
const CPU_WEIGHT: f64 = 0.05;

/// What a replica is made of, the same for each.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReplicaSpec {
    /// The CPU work of a request.
    pub(crate) work: Work,
    /// The replica's CPU quota, CPUs.
    pub(crate) cpus: f64,
    /// The cores its threads may run on at once.
    pub(crate) cores: f64,
    /// The CFS period.
    pub(crate) period: f64,
    /// The warm-up bucket's full rate, requests per second.
    pub(crate) capacity: f64,
    /// CPU-seconds each admitted request costs besides its work (the HTTP stack, the
    /// runtime, the layers).
    pub(crate) overhead: f64,
}

/// What admission made of a request.
#[derive(Debug)]
pub(crate) enum Admission {
    /// In service.
    Admitted,
    /// Refused, with admit's reason.
    Refused(&'static str),
}

/// The counters and gauges a scrape reads.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Exposed {
    /// `admit_offered_requests_total`: every request that reached the replica.
    pub(crate) offered: f64,
    /// `admit_shed_requests_total{outcome!="dropped"}`: requests the shedder let in and that
    /// finished.
    pub(crate) served: f64,
    /// `container_cpu_usage_seconds_total`.
    pub(crate) cpu_seconds: f64,
    /// `admit_shed_requests_in_flight`.
    pub(crate) in_flight: f64,
    /// `admit_queue_wait_seconds_bucket{source="request"}`, cumulative per bound, and the
    /// count (`+Inf`) last.
    pub(crate) waits: [f64; WAIT_BOUNDS.len() + 1],
}

/// A request in service.
#[derive(Debug)]
struct InService {
    /// The request's index in the run.
    request: u64,
    /// When it reached the replica.
    arrived: f64,
    permit: OwnedPermit<ManualClock>,
}

/// One replica.
#[derive(Debug)]
pub(crate) struct Replica {
    started: f64,
    work: Work,
    overhead: f64,
    cpu: Cpu,
    warm_up: WarmUp<ManualClock>,
    shedder: Arc<Shedder<ManualClock>>,
    /// The shedder's CPU signal, ‰ of the quota, smoothed as the system sampler does.
    load: Arc<AtomicU32>,
    smoothed: f64,
    last_used: f64,
    cpus: f64,
    in_service: Vec<InService>,
    /// Requests that reached it while it was throttled: they wait for its runtime.
    waiting: Vec<(u64, f64)>,
    exposed: Exposed,
    rng: SmallRng,
}

impl Replica {
    /// A replica starting at `now` (the clock reads it), its periods at `phase`, its service
    /// times drawn from `seed`.
    pub(crate) fn start(
        spec: &ReplicaSpec,
        clock: &ManualClock,
        now: f64,
        phase: f64,
        seed: u64,
    ) -> Result<Self, admit::ConfigError> {
        let load = Arc::new(AtomicU32::new(0));
        let signal = Arc::clone(&load);
        let shedder = Shedder::builder()
            .name("work")
            .clock(clock.clone())
            .cpu(move || Some(signal.load(Ordering::Relaxed)))
            .queue_gate(QueueGate::default())
            .build()?;
        let cold = spec.work.cold;
        let warm_up = WarmUp::builder(spec.capacity)
            .name("work")
            .warm_up_period(cold.max(Duration::from_secs(1)))
            .start_warm(cold.is_zero())
            .clock(clock.clone())
            .build()?;
        Ok(Replica {
            started: now,
            work: spec.work,
            overhead: spec.overhead,
            cpu: Cpu::new(spec.cores, spec.cpus, spec.period, phase, now),
            warm_up,
            shedder: Arc::new(shedder),
            load,
            smoothed: 0.0,
            last_used: 0.0,
            cpus: spec.cpus,
            in_service: Vec::new(),
            waiting: Vec::new(),
            exposed: Exposed::default(),
            rng: SmallRng::seed_from_u64(seed),
        })
    }

    /// Requests in service or waiting for the runtime.
    pub(crate) fn busy(&self) -> usize {
        self.in_service.len() + self.waiting.len()
    }

    /// The requests in service or waiting.
    pub(crate) fn requests(&self) -> impl Iterator<Item = u64> + '_ {
        let waiting = self.waiting.iter().map(|&(request, _)| request);
        self.in_service.iter().map(|job| job.request).chain(waiting)
    }

    /// What a scrape reads now.
    pub(crate) fn exposed(&self) -> Exposed {
        Exposed {
            cpu_seconds: self.cpu.used(),
            in_flight: self.in_service.len() as f64,
            ..self.exposed
        }
    }

    /// While the quota is spent: when the replica's runtime runs again.
    pub(crate) fn throttled_until(&self) -> Option<f64> {
        self.cpu.throttled().then(|| self.cpu.period_end())
    }

    /// CPU-seconds used since the start.
    pub(crate) fn cpu_used(&self) -> f64 {
        self.cpu.used()
    }

    /// When the replica next needs [`step`](Self::step) without a new request.
    pub(crate) fn next_event(&self) -> Option<f64> {
        let waiting = (!self.waiting.is_empty()).then(|| self.cpu.period_end());
        match (self.cpu.next_event(), waiting) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Brings the replica to `now` (the clock reads it): finished requests go to `done` as
    /// `(request, arrived, finished)`; requests that waited for a throttled runtime are
    /// admitted or refused (`refused` gets `(request, arrived, reason)`).
    pub(crate) fn step(
        &mut self,
        now: f64,
        done: &mut Vec<(u64, f64, f64)>,
        refused: &mut Vec<(u64, f64, &'static str)>,
    ) {
        let mut finished = Vec::new();
        self.cpu.advance(now, &mut finished);
        for (id, at) in finished {
            if let Some(index) = self.in_service.iter().position(|job| job.request == id) {
                let job = self.in_service.swap_remove(index);
                job.permit.pass();
                self.exposed.served += 1.0;
                done.push((job.request, job.arrived, at));
            }
        }
        if !self.cpu.throttled() && !self.waiting.is_empty() {
            for (request, arrived) in std::mem::take(&mut self.waiting) {
                if let Admission::Refused(reason) = self.admit(now, request, arrived) {
                    refused.push((request, arrived, reason));
                }
            }
        }
    }

    /// A request `request` reaching the replica at `now` (after [`step`](Self::step) to
    /// `now`): `None` while the replica is throttled (its runtime cannot run, so the request
    /// waits; a later step decides it).
    pub(crate) fn arrive(&mut self, now: f64, request: u64) -> Option<Admission> {
        self.exposed.offered += 1.0;
        if self.cpu.throttled() {
            self.waiting.push((request, now));
            return None;
        }
        Some(self.admit(now, request, now))
    }

    /// The layers in the replica's order: the warm-up bucket, then the shedder with the
    /// request's wait.
    fn admit(&mut self, now: f64, request: u64, arrived: f64) -> Admission {
        let wait = now - arrived;
        if self.warm_up.try_acquire().is_err() {
            return Admission::Refused("rate-limit");
        }
        let bucket = WAIT_BOUNDS
            .iter()
            .position(|&bound| wait <= bound)
            .unwrap_or(WAIT_BOUNDS.len());
        for count in &mut self.exposed.waits[bucket..] {
            *count += 1.0;
        }
        let arrival = Arrival::new().with_wait(Duration::from_secs_f64(wait));
        match self.shedder.allow_owned_with(arrival) {
            Ok(permit) => {
                let since_start = Duration::from_secs_f64(now - self.started);
                let work = self.work.iterations(since_start, &mut self.rng) as f64
                    / self.work.iterations_per_ms
                    / 1e3;
                self.cpu.start(request, work + self.overhead);
                self.in_service.push(InService {
                    request,
                    arrived,
                    permit,
                });
                Admission::Admitted
            }
            Err(overloaded) => Admission::Refused(overloaded.reason().as_str()),
        }
    }

    /// The CPU sampler's tick at `now` (after [`step`](Self::step)): utilisation of the quota
    /// over the tick into the moving average the shedder reads.
    pub(crate) fn sample_cpu(&mut self) {
        let used = self.cpu.used();
        let permille = (1000.0 * (used - self.last_used) / (CPU_TICK * self.cpus)).min(1000.0);
        self.last_used = used;
        self.smoothed = self.smoothed * (1.0 - CPU_WEIGHT) + permille * CPU_WEIGHT;
        self.load.store(self.smoothed as u32, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use admit_testkit::work::Distribution;

    use super::*;

    fn replica(clock: &ManualClock) -> Replica {
        let spec = ReplicaSpec {
            work: Work {
                mean: Duration::from_millis(20),
                distribution: Distribution::Bimodal,
                cold_factor: 1.0,
                cold: Duration::ZERO,
                iterations_per_ms: 1e6,
            },
            cpus: 0.25,
            cores: 1.0,
            period: 0.1,
            capacity: 1000.0,
            overhead: 0.0,
        };
        Replica::start(&spec, clock, 0.0, 0.0, 7).unwrap()
    }

    #[test]
    fn a_throttled_replica_takes_requests_when_its_period_ends() {
        let clock = ManualClock::new();
        let mut replica = replica(&clock);
        let (mut done, mut refused) = (Vec::new(), Vec::new());
        // Enough work to spend the 25 ms quota of the first period.
        for request in 0..3 {
            assert!(matches!(
                replica.arrive(0.0, request),
                Some(Admission::Admitted)
            ));
        }
        let spent = replica.next_event().unwrap();
        assert!(spent <= 0.025 + 1e-9, "{spent}");
        clock.set(Duration::from_secs_f64(spent));
        replica.step(spent, &mut done, &mut refused);
        assert_eq!(replica.throttled_until(), Some(0.1));
        // A request now waits for the runtime: not counted in flight, not decided.
        assert!(replica.arrive(0.05, 3).is_none());
        assert_eq!(replica.busy(), 4);
        assert_eq!(replica.exposed().in_flight, 3.0);
        assert_eq!(replica.next_event(), Some(0.1));
        clock.set(Duration::from_millis(100));
        replica.step(0.1, &mut done, &mut refused);
        assert!(refused.is_empty(), "{refused:?}");
        let exposed = replica.exposed();
        assert_eq!(exposed.in_flight + done.len() as f64, 4.0);
        // Its 50 ms wait lands in the `le="0.05"` bucket, the others' zero waits in the first.
        assert_eq!(exposed.waits[0], 3.0);
        assert_eq!(exposed.waits[4], 3.0);
        assert_eq!(exposed.waits[5], 4.0);
        assert_eq!(exposed.offered, 4.0);
        assert!((exposed.cpu_seconds - 0.025).abs() < 1e-9);
    }
}
