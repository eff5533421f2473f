//! The shedder through the overload protocol's two transients, on `ManualClock`
//! (`support/server_model.rs`): a step from half the capacity to four times it, and a retry
//! storm, where every client sends a refused, dropped or late request again up to three times.
//! The assertions are on model quantities: when the shedder engages, the goodput in windows
//! after the step or the storm, and the queue's waits.

use admit::signal::cpu::Smoothing;
use server_model::{CAPACITY, Model, Phase, Protection, Run, print};

#[path = "support/random.rs"]
mod random;
#[path = "support/rig.rs"]
mod rig;
#[path = "support/server_model.rs"]
mod server_model;

const SECOND: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

fn run(phases: &[Phase], protection: Protection, retries: u32) -> Run {
    let model = Model {
        protection,
        smoothing: Smoothing::default(),
        seed: 11,
        retries,
    };
    let run = server_model::simulate(phases, model);
    print(&format!("{protection:?}, {retries} retries"), &run.seconds);
    run
}

/// Half the capacity for 10 s, then four times it for 10 s.
fn step() -> [Phase; 2] {
    [
        Phase {
            seconds: 10,
            load: 0.5,
        },
        Phase {
            seconds: 10,
            load: 4.0,
        },
    ]
}

/// With the queue gate, a 4× step is shed from its third 100 ms interval, and the limit's
/// floor (the throughput before the step × the fastest latency plus the gate's target) keeps
/// the workers busy at once: goodput is at the capacity from 200 ms after the step, within
/// counting noise, and admitted requests wait tens of milliseconds at most once the gate is
/// hot.
#[test]
fn a_step_to_four_times_the_capacity_settles_within_200_ms() {
    let run = run(&step(), Protection::QueueGate, 0);
    let first = run.first_shed.expect("the gate engaged");
    assert!(
        (10 * SECOND..10 * SECOND + 300 * MS).contains(&first),
        "first refusal at {first} ns"
    );
    // Every 500 ms window from 200 ms after the step: 200 answers at the capacity, within
    // three standard deviations (42) of it below.
    for start in (10 * SECOND + 200 * MS..19 * SECOND + 500 * MS).step_by(100 * MS as usize) {
        let rate = run.goodput_rate(start, start + 500 * MS);
        assert!(rate >= 0.79 * CAPACITY, "{rate:.0}/s from {start} ns");
    }
    let settled = run.goodput_rate(10 * SECOND + 200 * MS, 20 * SECOND);
    assert!(settled >= 0.95 * CAPACITY, "{settled:.0}/s after the step");
    for s in &run.seconds[11..] {
        assert!(s.max_wait_ms <= 150, "{s:?}");
    }
}

/// Unprotected, the same step builds a queue of three times the capacity a second, and within
/// a second almost every answer comes after its client gave up.
#[test]
fn unprotected_the_step_collapses_goodput() {
    let run = run(&step(), Protection::None, 0);
    let after = run.goodput_rate(12 * SECOND, 20 * SECOND);
    assert!(after < 0.05 * CAPACITY, "{after:.0}/s");
}

/// The capacity for 10 s, four times it for 10 s, then the capacity again for 15 s, with
/// clients that retry up to three times.
fn storm() -> [Phase; 3] {
    [
        Phase {
            seconds: 10,
            load: 1.0,
        },
        Phase {
            seconds: 10,
            load: 4.0,
        },
        Phase {
            seconds: 15,
            load: 1.0,
        },
    ]
}

/// With the queue gate, the retries of refused requests are refused again at once and cost the
/// workers nothing: goodput holds at the capacity through the storm, and within 2 s of its end
/// it is back where it was before, and stays. (At the capacity, with 10 ms requests and a 5 ms
/// target, the gate refuses a sixth of the requests even before the storm: an M/M/4 queue at
/// that load waits longer than the target.)
#[test]
fn after_a_retry_storm_goodput_comes_back_within_2_s() {
    let run = run(&storm(), Protection::QueueGate, 3);
    let retried: u32 = run.seconds[10..20].iter().map(|s| s.retries).sum();
    assert!(retried > 30_000, "{retried} retries in the storm");
    let during = run.goodput_rate(10 * SECOND, 20 * SECOND);
    assert!(during >= 0.95 * CAPACITY, "{during:.0}/s in the storm");
    let before = run.goodput_rate(2 * SECOND, 10 * SECOND);
    assert!(before >= 0.8 * CAPACITY, "{before:.0}/s before the storm");
    for start in (22..34).map(|s| s * SECOND) {
        let rate = run.goodput_rate(start, start + SECOND);
        assert!(
            rate >= 0.9 * before,
            "{rate:.0}/s from {start} ns, {before:.0}/s before"
        );
    }
}

/// Unprotected, the storm leaves a backlog longer than the deadline, every request behind it
/// is answered late, and its client's retries keep the backlog there: goodput stays collapsed
/// after the overload ends (a metastable failure).
#[test]
fn unprotected_a_retry_storm_stays_collapsed() {
    let run = run(&storm(), Protection::None, 3);
    let after = run.goodput_rate(25 * SECOND, 35 * SECOND);
    assert!(after < 0.05 * CAPACITY, "{after:.0}/s after the storm");
}
