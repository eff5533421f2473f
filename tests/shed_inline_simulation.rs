//! Work done inline, simulated on `ManualClock`: one worker thread runs every task in FIFO
//! order, requests and the runtime lag probe's ticks alike, as a tokio worker does. The backlog
//! waits in that run queue, so a request is admitted or refused only when the worker gets to it
//! and in-flight stays at one: the shedder's concurrency rule cannot see it. The probe's tick
//! waits in the same queue, and its lateness can.
//!
//! Poisson arrivals at three times the capacity, exponential service times (1 ms on average);
//! refusing a request costs the worker 50 µs. The assertions are on model quantities, and the
//! run is deterministic (the probe's draws are seeded).

use std::collections::VecDeque;
use std::time::Duration;

#[path = "support/random.rs"]
mod random;

use admit::clock::ManualClock;
use admit::shed::Shedder;
use admit::signal::cpu::ManualCpu;
use admit::signal::queue::LagProbe;
use random::Random;

const MS: u64 = 1_000_000;
/// Mean service time, and so a capacity of 1000 requests per second.
const SERVICE_NANOS: f64 = 1e6;
const CAPACITY: f64 = 1000.0;
const REFUSAL_NANOS: u64 = 50_000;
const DEADLINE: u64 = 500 * MS;
const TICK: u64 = 10 * MS;

enum Task {
    Request { arrived_at: u64 },
    Tick { deadline: u64 },
}

/// Totals over the overload's seconds after the first.
#[derive(Debug, Default)]
struct Totals {
    arrived: u64,
    goodput: u64,
    refused: u64,
    late: u64,
}

/// 2 s at half the capacity, then 8 s at three times it; with `probe`, the shedder has a
/// runtime lag probe whose ticks the worker runs.
fn simulate(probe: bool) -> Totals {
    let clock = ManualClock::new();
    // Seeded: the probe's random draws, and so the whole run, are the same every time.
    let lag = LagProbe::builder().seed(5).build().unwrap();
    let mut builder = Shedder::builder()
        .clock(clock.clone())
        .cpu(ManualCpu::new(0));
    if probe {
        builder = builder.runtime_probe(lag.clone());
    }
    let shedder = builder.build().unwrap();
    let mut random = Random(11);
    let end = 10_000 * MS;
    let rate = |at: u64| {
        if at < 2_000 * MS {
            0.5 * CAPACITY
        } else {
            3.0 * CAPACITY
        }
    };
    let counted = |at: u64| at >= 3_000 * MS;

    let mut queue: VecDeque<Task> = VecDeque::new();
    let mut next_arrival = random.exponential(1e9 / rate(0));
    let mut next_tick = TICK;
    let mut now = 0;
    let mut totals = Totals::default();
    while now < end {
        // Everything due by now joins the run queue, in time order.
        while next_arrival <= now || (probe && next_tick <= now) {
            if next_arrival <= next_tick || !probe {
                queue.push_back(Task::Request {
                    arrived_at: next_arrival,
                });
                if counted(next_arrival) {
                    totals.arrived += 1;
                }
                next_arrival += random.exponential(1e9 / rate(next_arrival));
            } else {
                queue.push_back(Task::Tick {
                    deadline: next_tick,
                });
                next_tick = u64::MAX; // the probe's next deadline is set when it runs
            }
        }
        let Some(task) = queue.pop_front() else {
            now = next_arrival.min(if probe { next_tick } else { u64::MAX });
            continue;
        };
        clock.set(Duration::from_nanos(now));
        match task {
            Task::Tick { deadline } => {
                lag.tick(deadline, now);
                // The probe's task: the next deadline an interval on, re-anchored when late.
                next_tick = if now - deadline >= TICK {
                    now + TICK
                } else {
                    deadline + TICK
                };
            }
            Task::Request { arrived_at } => match shedder.allow() {
                Ok(permit) => {
                    now += random.exponential(SERVICE_NANOS);
                    clock.set(Duration::from_nanos(now));
                    permit.pass();
                    if counted(arrived_at) && now - arrived_at <= DEADLINE {
                        totals.goodput += 1;
                    } else if counted(arrived_at) {
                        totals.late += 1;
                    }
                }
                Err(_) => {
                    now += REFUSAL_NANOS;
                    if counted(arrived_at) {
                        totals.refused += 1;
                    }
                }
            },
        }
    }
    // What is still queued at the end is late too.
    totals.late += queue
        .iter()
        .filter(|task| matches!(task, Task::Request { arrived_at } if counted(*arrived_at)))
        .count() as u64;
    totals
}

/// Without a probe nothing is refused (in-flight is always one), the run queue grows by the
/// excess, and nearly every request is answered after its client gave up.
#[test]
fn inline_work_without_a_probe_times_out() {
    let totals = simulate(false);
    println!("without a probe: {totals:?}");
    assert_eq!(totals.refused, 0);
    assert!(totals.late * 10 > totals.arrived * 6, "{totals:?}");
}

/// With the probe, its late ticks raise the share refused until the run queue drains: no
/// request waits past its deadline, and the worker keeps serving. The integral controller
/// sheds more than the excess (it stops only once the worker idles now and then), so goodput
/// stays below the capacity.
#[test]
fn the_probe_protects_inline_work() {
    let totals = simulate(true);
    println!("with the probe: {totals:?}");
    let seconds = 7.0;
    let goodput = totals.goodput as f64 / seconds;
    println!("goodput {goodput:.0} per second of {CAPACITY}");
    assert!(totals.late * 100 <= totals.arrived, "{totals:?}");
    assert!(goodput >= 0.6 * CAPACITY, "{totals:?}");
}
