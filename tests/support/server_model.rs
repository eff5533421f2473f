//! A discrete-event model of a server on `ManualClock`, for the shedder's simulations: `SERVERS`
//! workers and one FIFO queue, Poisson arrivals following phases of offered load, exponential
//! service times, a CPU signal derived from the workers' utilisation (sampled every 250 ms and
//! smoothed as `SystemCpu` does), and clients that may retry.
//!
//! A client gives up `DEADLINE` after its request (the server, which cannot cancel work, still
//! serves it); with `retries`, a client whose request was refused, dropped or given up on sends
//! it again (1 ms later), up to that many times.
//!
//! Include it with `#[path = "support/server_model.rs"] mod server_model;` beside `random.rs`
//! and `rig.rs`.

#![allow(dead_code, unreachable_pub)]

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use admit::clock::ManualClock;
use admit::criticality::Criticality;
use admit::shed::{Permit, Shedder};
use admit::signal::Arrival;
use admit::signal::cpu::{CpuSignal, ManualCpu, Smoothing};
use admit::signal::queue::{QueueGate, QueueStamp};

use crate::random::Random;
use crate::rig::Rig;

/// Workers: the most requests in service at once.
pub const SERVERS: usize = 4;
/// Mean service time.
pub const SERVICE_MEAN: Duration = Duration::from_millis(10);
/// What the server can complete per second: `SERVERS / SERVICE_MEAN`.
pub const CAPACITY: f64 = SERVERS as f64 / 0.010;
/// A response later than this after its request is useless to the client, who gives up.
pub const DEADLINE: Duration = Duration::from_millis(500);
/// How often the CPU signal is sampled (as `SystemCpu` does).
pub const CPU_TICK: Duration = Duration::from_millis(250);
/// How long a client takes to send a retry.
pub const RETRY_DELAY: Duration = Duration::from_millis(1);

/// One phase of offered load.
pub struct Phase {
    pub seconds: u64,
    /// First attempts per second, as a multiple of `CAPACITY`.
    pub load: f64,
}

/// What happened in one simulated second.
#[derive(Clone, Copy, Debug, Default)]
pub struct Second {
    /// Attempts that arrived, retries included.
    pub arrived: u32,
    /// Of those, retries.
    pub retries: u32,
    pub shed: u32,
    pub completed: u32,
    /// Completed within the deadline.
    pub goodput: u32,
    /// The longest queue wait of a request that started service this second, in ms.
    pub max_wait_ms: u64,
    /// The queue length at the end of the second.
    pub queued: usize,
    /// The CPU signal at the end of the second, in ‰.
    pub cpu: u32,
    /// Of the attempts that arrived, the critical ones (with [`Model::critical_share`]).
    pub critical_arrived: u32,
    /// Of the critical ones, those refused or dropped.
    pub critical_shed: u32,
    /// Of the critical ones, those completed within the deadline.
    pub critical_goodput: u32,
}

/// How the model's server is protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protection {
    None,
    /// Every arrival asks the shedder (the CPU signal alone).
    Shedder,
    /// The shedder with a queue gate (5 ms target, 100 ms intervals): a request taken from the
    /// queue records its wait there (a `QueueStamp`), and one that waited too long while the
    /// gate is hot is dropped instead of served.
    QueueGate,
}

/// A model run's settings.
#[derive(Clone, Copy, Debug)]
pub struct Model {
    pub protection: Protection,
    pub smoothing: Smoothing,
    pub seed: u64,
    /// How many times a client sends a request again (0: never).
    pub retries: u32,
    /// The share of requests that are critical; the others are sheddable. At 0 every request
    /// is of the default class and none is drawn.
    pub critical_share: f64,
    /// A CPU signal held at this reading (‰) instead of the workers' utilisation.
    pub fixed_cpu: Option<u32>,
}

/// What a model run produced.
#[derive(Debug)]
pub struct Run {
    pub seconds: Vec<Second>,
    /// When the first request was refused or dropped, in ns.
    pub first_shed: Option<u64>,
    /// When each response within the deadline completed, in ns, in order.
    pub goodput_at: Vec<u64>,
}

impl Run {
    /// Responses within the deadline per second, over `[from, until)` in ns.
    pub fn goodput_rate(&self, from: u64, until: u64) -> f64 {
        let start = self.goodput_at.partition_point(|&at| at < from);
        let end = self.goodput_at.partition_point(|&at| at < until);
        (end - start) as f64 * 1e9 / (until - from) as f64
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A worker finishes the request in service on it.
    Completion {
        worker: usize,
    },
    /// An attempt arrives: a fresh request (`attempt` 0, which draws the next arrival) or a
    /// retry of request `id`.
    Arrival {
        attempt: u32,
        id: u64,
    },
    /// The client of request `id` gives up on attempt `attempt` if it has no answer yet.
    Timeout {
        id: u64,
        attempt: u32,
    },
    CpuTick,
}

struct Request<'a> {
    id: u64,
    attempt: u32,
    class: Criticality,
    arrived_at: u64,
    permit: Option<Permit<'a, ManualClock>>,
}

/// Runs `phases` through the model.
pub fn simulate(phases: &[Phase], model: Model) -> Run {
    let rig = Rig::new();
    let (clock, cpu) = (rig.clock.clone(), rig.cpu.clone());
    let queued_shedder;
    let shedder: &Shedder<ManualClock> = if model.protection == Protection::QueueGate {
        queued_shedder = Shedder::builder()
            .clock(clock.clone())
            .cpu(cpu.clone())
            .queue_gate(QueueGate::default())
            .build()
            .expect("a valid shedder");
        &queued_shedder
    } else {
        &rig.shedder
    };
    let shed = model.protection != Protection::None;
    let mut first_shed = None;
    let mut goodput_at = Vec::new();
    let mut random = Random(model.seed);
    // The simulated machine's CPU, averaged as the system sampler averages a real one.
    let smoother = ManualCpu::smoothed(model.smoothing);

    let mut events: BinaryHeap<Reverse<(u64, Event)>> = BinaryHeap::new();
    let mut queue: VecDeque<Request<'_>> = VecDeque::new();
    let mut workers: Vec<Option<Request<'_>>> = (0..SERVERS).map(|_| None).collect();
    // Busy worker-nanoseconds since the last CPU tick, and when each busy worker started.
    let mut busy_nanos: u64 = 0;
    let mut busy_since: [u64; SERVERS] = [0; SERVERS];
    let mut last_tick: u64 = 0;
    // Per request: the attempt its client waits for (`None` once it has its last answer).
    let mut waiting_on: Vec<Option<u32>> = Vec::new();
    // Per request: its class.
    let mut classes: Vec<Criticality> = Vec::new();

    let total_seconds: u64 = phases.iter().map(|phase| phase.seconds).sum();
    let end = total_seconds * 1_000_000_000;
    let mut seconds = vec![Second::default(); total_seconds as usize];
    let load_at = |at: u64| {
        let second = at / 1_000_000_000;
        let mut start = 0;
        for phase in phases {
            if second < start + phase.seconds {
                return phase.load;
            }
            start += phase.seconds;
        }
        0.0
    };
    let mean_gap = |at: u64| 1e9 / (CAPACITY * load_at(at));
    let service_mean = SERVICE_MEAN.as_nanos() as f64;
    let deadline = DEADLINE.as_nanos() as u64;
    let retry_delay = RETRY_DELAY.as_nanos() as u64;
    // The attempt `attempt` of request `id` ended without a useful answer: its client retries
    // if it may.
    let retry = |events: &mut BinaryHeap<Reverse<(u64, Event)>>,
                 waiting_on: &mut Vec<Option<u32>>,
                 at: u64,
                 id: u64,
                 attempt: u32| {
        if waiting_on[id as usize] != Some(attempt) {
            return;
        }
        if attempt < model.retries {
            waiting_on[id as usize] = Some(attempt + 1);
            let event = Event::Arrival {
                attempt: attempt + 1,
                id,
            };
            events.push(Reverse((at + retry_delay, event)));
        } else {
            waiting_on[id as usize] = None;
        }
    };

    let first = Event::Arrival { attempt: 0, id: 0 };
    events.push(Reverse((random.exponential(mean_gap(0)), first)));
    events.push(Reverse((CPU_TICK.as_nanos() as u64, Event::CpuTick)));

    while let Some(Reverse((at, event))) = events.pop() {
        if at >= end {
            break;
        }
        clock.set(Duration::from_nanos(at));
        let second = &mut seconds[(at / 1_000_000_000) as usize];
        match event {
            Event::Arrival { attempt, id } => {
                second.arrived += 1;
                let id = if attempt == 0 {
                    waiting_on.push(Some(0));
                    let class = if model.critical_share <= 0.0 {
                        Criticality::default()
                    } else if random.uniform() < model.critical_share {
                        Criticality::Critical
                    } else {
                        Criticality::Sheddable
                    };
                    classes.push(class);
                    let next = Event::Arrival { attempt: 0, id: 0 };
                    events.push(Reverse((at + random.exponential(mean_gap(at)), next)));
                    waiting_on.len() as u64 - 1
                } else {
                    second.retries += 1;
                    id
                };
                let class = classes[id as usize];
                let critical = model.critical_share > 0.0 && class == Criticality::Critical;
                second.critical_arrived += u32::from(critical);
                let permit = if shed {
                    match shedder.allow_with(Arrival::new().with_class(class)) {
                        Ok(permit) => Some(permit),
                        Err(_) => {
                            second.shed += 1;
                            second.critical_shed += u32::from(critical);
                            first_shed.get_or_insert(at);
                            retry(&mut events, &mut waiting_on, at, id, attempt);
                            None
                        }
                    }
                } else {
                    None
                };
                if !shed || permit.is_some() {
                    queue.push_back(Request {
                        id,
                        attempt,
                        class,
                        arrived_at: at,
                        permit,
                    });
                    if model.retries > 0 {
                        events.push(Reverse((at + deadline, Event::Timeout { id, attempt })));
                    }
                }
            }
            Event::Timeout { id, attempt } => {
                retry(&mut events, &mut waiting_on, at, id, attempt);
            }
            Event::Completion { worker } => {
                let request = workers[worker].take().expect("a busy worker");
                busy_nanos += at - busy_since[worker].max(last_tick);
                let latency = at - request.arrived_at;
                second.completed += 1;
                if latency <= deadline {
                    second.goodput += 1;
                    second.critical_goodput += u32::from(
                        model.critical_share > 0.0 && request.class == Criticality::Critical,
                    );
                    goodput_at.push(at);
                    if waiting_on[request.id as usize] == Some(request.attempt) {
                        waiting_on[request.id as usize] = None;
                    }
                }
                if let Some(permit) = request.permit {
                    permit.pass();
                }
            }
            Event::CpuTick => {
                for (worker, request) in workers.iter().enumerate() {
                    if request.is_some() {
                        busy_nanos += at - busy_since[worker].max(last_tick);
                    }
                }
                let window = at - last_tick;
                let raw = (busy_nanos * 1000 / (window * SERVERS as u64)) as u32;
                let smoothed = smoother.sample(raw.min(1000), Duration::from_nanos(window));
                cpu.set(model.fixed_cpu.unwrap_or(smoothed));
                busy_nanos = 0;
                last_tick = at;
                events.push(Reverse((at + CPU_TICK.as_nanos() as u64, Event::CpuTick)));
            }
        }
        // Idle workers take the next queued requests (skipping the ones dropped at start).
        for worker in 0..SERVERS {
            while workers[worker].is_none() {
                let Some(request) = queue.pop_front() else {
                    break;
                };
                let second = &mut seconds[(at / 1_000_000_000) as usize];
                let expired = shedder.queue_gate().is_some_and(|gate| {
                    QueueStamp::at(request.arrived_at)
                        .started(gate, at)
                        .is_err()
                });
                if expired {
                    // Waited too long while the queue is overloaded: dropped, not served.
                    second.shed += 1;
                    second.critical_shed += u32::from(
                        model.critical_share > 0.0 && request.class == Criticality::Critical,
                    );
                    first_shed.get_or_insert(at);
                    if let Some(permit) = request.permit {
                        permit.fail();
                    }
                    retry(
                        &mut events,
                        &mut waiting_on,
                        at,
                        request.id,
                        request.attempt,
                    );
                    continue;
                }
                let wait_ms = (at - request.arrived_at) / 1_000_000;
                second.max_wait_ms = second.max_wait_ms.max(wait_ms);
                busy_since[worker] = at;
                workers[worker] = Some(request);
                events.push(Reverse((
                    at + random.exponential(service_mean),
                    Event::Completion { worker },
                )));
            }
        }
        let second = &mut seconds[(at / 1_000_000_000) as usize];
        second.queued = queue.len();
        second.cpu = cpu.load_permille().unwrap_or(0);
    }
    Run {
        seconds,
        first_shed,
        goodput_at,
    }
}

/// A table of `seconds`, on stdout.
pub fn print(label: &str, seconds: &[Second]) {
    println!(
        "{label}\n second  arrived  retries  shed  completed  goodput  max wait ms  queued  cpu ‰"
    );
    for (i, s) in seconds.iter().enumerate() {
        println!(
            "{i:>7}  {:>7}  {:>7}  {:>4}  {:>9}  {:>7}  {:>11}  {:>6}  {:>5}",
            s.arrived, s.retries, s.shed, s.completed, s.goodput, s.max_wait_ms, s.queued, s.cpu
        );
    }
}
