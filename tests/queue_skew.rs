//! The queue signal against clock skew, through the HTTP layer: a discrete-event model of a
//! proxy that stamps each request on its own wall clock and queues it (FIFO, at most as many
//! requests at the service at once as it has workers, as HAProxy's `maxconn`), and a service behind
//! `ShedLayer::http().inspect(RequestStart)` whose wall clock is ahead of the proxy's by a
//! skew, steady or stepped. Manual clocks, seeded arrivals: the same run every time.
//!
//! For each skew (−1 s, −100 ms, 0, 30 ms, 100 ms, 1 s) and each 100 ms step (forward,
//! backward, and back to 0 from 100 ms behind): at half the capacity no request is refused
//! 10 s after the skew starts or the step, and at twice the capacity the standing queue is
//! refused within 1 s, and still is 20 s on.

#![cfg(feature = "http")]

#[path = "support/random.rs"]
mod random;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use admit::clock::ManualClock;
use admit::middleware::{AtResponse, RequestStart};
use admit::shed::{ShedLayer, Shedder};
use admit::signal::cpu::ManualCpu;
use admit::signal::queue::QueueGate;
use admit::signal::queue::header::HeaderConfig;
use http::{Request, Response, StatusCode};
use tower::{Layer, Service};

use random::Random;

/// Requests the service serves at once, and the proxy lets through to it.
const WORKERS: usize = 4;
/// Mean service time: the capacity is `WORKERS / SERVICE_MEAN`, 400 per second.
const SERVICE_MEAN: Duration = Duration::from_millis(10);
/// A service so busy it is never idle: 16 workers of 1.6 ms, 10 000 per second, 5 000 offered
/// while calm (8 in flight on average), so that nearly every request arrives within 2 ms of
/// another's end.
const BUSY_WORKERS: usize = 32;
const BUSY_MEAN: Duration = Duration::from_micros(1600);
/// From the proxy to the service, and back.
const NETWORK: Duration = Duration::from_micros(200);
/// The proxy's wall clock at the start: 2023-11-14.
const EPOCH_NS: u64 = 1_700_000_000_000_000_000;
const SEC: u64 = 1_000_000_000;
const MS: i64 = 1_000_000;

/// How far the service's wall clock is ahead of the proxy's (negative: behind), by time.
#[derive(Clone, Copy, Debug)]
struct Skew {
    before: i64,
    /// The step: from `at` ns on, the skew is `after`.
    at: u64,
    after: i64,
}

impl Skew {
    fn steady(skew: i64) -> Skew {
        Skew {
            before: skew,
            at: u64::MAX,
            after: skew,
        }
    }

    fn at(&self, t: u64) -> i64 {
        if t < self.at { self.before } else { self.after }
    }
}

/// One run: `calm` seconds at half the capacity, then `overload` seconds at twice it.
#[derive(Clone, Copy, Debug)]
struct Scenario {
    label: &'static str,
    skew: Skew,
    calm: u64,
    overload: u64,
    /// Requests served at once, and let through by the proxy.
    workers: usize,
    /// The mean service time: the capacity is `workers` over it.
    service_mean: Duration,
    seed: u64,
}

/// What a run saw.
struct Outcome {
    /// When each refusal happened, in ns.
    refused_at: Vec<u64>,
    /// Requests that reached the service, by second.
    arrived: Vec<u32>,
    /// The shedder's clock offset at the end, in ns.
    offset: Option<i64>,
}

impl Outcome {
    fn refused_within(&self, from: u64, until: u64) -> usize {
        self.refused_at
            .iter()
            .filter(|&&at| from <= at && at < until)
            .count()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A client's request reaches the proxy.
    AtProxy,
    /// Request `id` reaches the service.
    AtService(u64),
    /// The service finishes request `id`.
    Done(u64),
    /// An answer reaches the proxy: a slot frees.
    Freed,
}

type Answer = Pin<Box<dyn Future<Output = Result<Response<String>, Infallible>>>>;

fn run(scenario: Scenario) -> Outcome {
    let clock = ManualClock::new();
    let wall = ManualClock::new();
    let shedder = Arc::new(
        Shedder::builder()
            .clock(clock.clone())
            .cpu(ManualCpu::new(0))
            .queue_gate(QueueGate::default())
            .build()
            .unwrap(),
    );
    let start = RequestStart::new(HeaderConfig::default())
        .unwrap()
        .wall_clock(wall.clone());
    // The handler's answer to request `x-id` is ready once the model marks it done.
    let done: Arc<Mutex<HashSet<u64>>> = Arc::default();
    let handler_done = Arc::clone(&done);
    let mut service = ShedLayer::new(Arc::clone(&shedder))
        .http()
        .hold::<AtResponse>()
        .inspect(start)
        .layer(tower::service_fn(move |request: Request<()>| {
            let id: u64 = request.headers()["x-id"].to_str().unwrap().parse().unwrap();
            let done = Arc::clone(&handler_done);
            std::future::poll_fn(move |_| {
                if done.lock().unwrap().contains(&id) {
                    Poll::Ready(Ok::<_, Infallible>(Response::new(String::new())))
                } else {
                    Poll::Pending
                }
            })
        }));
    let mut cx = Context::from_waker(Waker::noop());

    let mut random = Random(scenario.seed);
    let service_mean = scenario.service_mean.as_nanos() as f64;
    let capacity = scenario.workers as f64 * SEC as f64 / service_mean;
    let end = (scenario.calm + scenario.overload) * SEC;
    let mean_gap = |t: u64| {
        let load = if t < scenario.calm * SEC { 0.5 } else { 2.0 };
        SEC as f64 / (capacity * load)
    };
    let network = NETWORK.as_nanos() as u64;

    let mut events: BinaryHeap<Reverse<(u64, Event)>> = BinaryHeap::new();
    events.push(Reverse((random.exponential(mean_gap(0)), Event::AtProxy)));
    // Requests by id: when the proxy stamped them; those waiting at the proxy; the answers
    // pending at the service.
    let mut stamped: Vec<u64> = Vec::new();
    let mut queued: VecDeque<u64> = VecDeque::new();
    let mut at_service = 0;
    let mut pending: HashMap<u64, Answer> = HashMap::new();
    let mut outcome = Outcome {
        refused_at: Vec::new(),
        arrived: vec![0; (end / SEC) as usize],
        offset: None,
    };

    while let Some(Reverse((t, event))) = events.pop() {
        if t >= end {
            break;
        }
        clock.set(Duration::from_nanos(t));
        let service_wall = (EPOCH_NS + t)
            .checked_add_signed(scenario.skew.at(t))
            .unwrap();
        wall.set(Duration::from_nanos(service_wall));
        let send = |events: &mut BinaryHeap<_>, id: u64| {
            events.push(Reverse((t + network, Event::AtService(id))));
        };
        match event {
            Event::AtProxy => {
                let id = stamped.len() as u64;
                stamped.push(t);
                if at_service < scenario.workers {
                    at_service += 1;
                    send(&mut events, id);
                } else {
                    queued.push_back(id);
                }
                events.push(Reverse((
                    t + random.exponential(mean_gap(t)),
                    Event::AtProxy,
                )));
            }
            Event::AtService(id) => {
                outcome.arrived[(t / SEC) as usize] += 1;
                let stamp_us = (EPOCH_NS + stamped[id as usize]) / 1_000;
                let request = Request::get("/")
                    .header("x-request-start", format!("t={stamp_us}"))
                    .header("x-id", id.to_string())
                    .body(())
                    .unwrap();
                assert!(service.poll_ready(&mut cx).is_ready());
                let mut answer: Answer = Box::pin(service.call(request));
                match answer.as_mut().poll(&mut cx) {
                    Poll::Ready(Ok(response)) => {
                        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
                        outcome.refused_at.push(t);
                        events.push(Reverse((t + network, Event::Freed)));
                    }
                    Poll::Ready(Err(never)) => match never {},
                    Poll::Pending => {
                        pending.insert(id, answer);
                        let service_time = random.exponential(service_mean);
                        events.push(Reverse((t + service_time, Event::Done(id))));
                    }
                }
            }
            Event::Done(id) => {
                done.lock().unwrap().insert(id);
                let mut answer = pending.remove(&id).unwrap();
                match answer.as_mut().poll(&mut cx) {
                    Poll::Ready(Ok(response)) => assert_eq!(response.status(), StatusCode::OK),
                    other => panic!("request {id} not answered when done: {other:?}"),
                }
                events.push(Reverse((t + network, Event::Freed)));
            }
            Event::Freed => match queued.pop_front() {
                Some(id) => send(&mut events, id),
                None => at_service -= 1,
            },
        }
    }
    outcome.offset = shedder.snapshot().clock_offset_nanos;
    outcome
}

/// Prints a run's refusals by second, and the shedder's offset at the end.
fn print(scenario: &Scenario, outcome: &Outcome) {
    let by_second: Vec<usize> = (0..outcome.arrived.len() as u64)
        .map(|s| outcome.refused_within(s * SEC, (s + 1) * SEC))
        .collect();
    println!(
        "{:<28} refused per second {:?}; offset at the end {:?} ms",
        scenario.label,
        by_second,
        outcome.offset.map(|offset| offset as f64 / MS as f64)
    );
}

/// Checks a run: nothing refused from `quiet_from` until the overload, the overload refused
/// within 1 s, and every second of it after the first refused some.
fn check(scenario: Scenario, quiet_from: u64) {
    let outcome = run(scenario);
    print(&scenario, &outcome);
    let overload = scenario.calm * SEC;
    assert_eq!(
        outcome.refused_within(quiet_from * SEC, overload),
        0,
        "{}: refusals {} s after the skew started or stepped",
        scenario.label,
        quiet_from
            - if scenario.skew.at == u64::MAX {
                0
            } else {
                scenario.skew.at / SEC
            }
    );
    let first = outcome
        .refused_at
        .iter()
        .find(|&&at| at >= overload)
        .copied();
    let first =
        first.unwrap_or_else(|| panic!("{}: the overload was never refused", scenario.label));
    println!(
        "{:<28} first refusal {:.0} ms into the overload",
        scenario.label,
        (first - overload) as f64 / MS as f64
    );
    assert!(
        first < overload + SEC,
        "{}: the standing queue refused only {} ms after it started",
        scenario.label,
        (first - overload) / MS as u64
    );
    for second in scenario.calm + 1..scenario.calm + scenario.overload {
        assert!(
            outcome.refused_within(second * SEC, (second + 1) * SEC) > 0,
            "{}: nothing refused in second {second} of the overload: the queue was absorbed",
            scenario.label
        );
    }
    // The offset the shedder holds is the skew and the network time, not the queue.
    let expected = scenario.skew.after + NETWORK.as_nanos() as i64;
    let offset = outcome.offset.expect("an offset");
    assert!(
        (offset - expected).abs() < MS,
        "{}: offset {offset} ns, expected {expected} ns",
        scenario.label
    );
}

#[test]
fn a_steady_skew_refuses_nothing_and_a_standing_queue_is_still_refused() {
    for (label, skew) in [
        ("1 s behind", -1000 * MS),
        ("100 ms behind", -100 * MS),
        ("no skew", 0),
        ("30 ms ahead", 30 * MS),
        ("100 ms ahead", 100 * MS),
        ("1 s ahead", 1000 * MS),
    ] {
        let scenario = Scenario {
            label,
            skew: Skew::steady(skew),
            calm: 20,
            overload: 20,
            workers: WORKERS,
            service_mean: SERVICE_MEAN,
            seed: 0x5eed_0001,
        };
        check(scenario, 10);
    }
}

#[test]
fn a_step_of_the_clock_is_absorbed_within_ten_seconds() {
    for (label, before, after) in [
        ("step 100 ms forward", 0, 100 * MS),
        ("step 100 ms back", 0, -100 * MS),
        ("100 ms behind, stepped right", -100 * MS, 0),
    ] {
        let scenario = Scenario {
            label,
            skew: Skew {
                before,
                at: 10 * SEC,
                after,
            },
            calm: 30,
            overload: 20,
            workers: WORKERS,
            service_mean: SERVICE_MEAN,
            seed: 0x5eed_0002,
        };
        check(scenario, 20);
    }
}

/// A service that is never idle while calm learns the offset from its first request and holds
/// it. After a step back, requests below the floor in every lane lower it. After a step
/// forward it refuses everything: once it has admitted nothing for 1 s, its refusals no
/// longer count as activity, and the requests that find nothing in flight teach it the new
/// offset.
#[test]
fn a_busy_service_absorbs_a_step_forward() {
    for (label, before, after) in [
        ("busy, step 100 ms forward", 0, 100 * MS),
        ("busy, step 30 ms forward", -20 * MS, 10 * MS),
        ("busy, step 100 ms back", 0, -100 * MS),
    ] {
        let scenario = Scenario {
            label,
            skew: Skew {
                before,
                at: 2 * SEC,
                after,
            },
            calm: 13,
            overload: 3,
            workers: BUSY_WORKERS,
            service_mean: BUSY_MEAN,
            seed: 0x5eed_0003,
        };
        check(scenario, 12);
    }
}
