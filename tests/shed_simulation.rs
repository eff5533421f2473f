//! Proof that the shedder saves an overloaded server, without wall-clock timing: a
//! discrete-event simulation on `ManualClock` (`support/server_model.rs`) of a server with
//! `SERVERS` workers and one FIFO queue, Poisson arrivals at three times its capacity,
//! exponential service times, and a CPU signal derived from the workers' utilisation (sampled
//! every 250 ms and smoothed as `SystemCpu` does).
//!
//! The assertions are on model quantities: queue lengths, the waiting time of admitted
//! requests, and goodput (requests completed within a client deadline). Without the shedder
//! the queue grows by the excess arrival rate for as long as the overload lasts and nearly
//! every request misses its deadline; with it the queue, the waits and goodput stay bounded.

use std::time::Duration;

use admit::signal::cpu::Smoothing;
use server_model::{CAPACITY, DEADLINE, Model, Phase, Protection, Second, print};

#[path = "support/random.rs"]
mod random;
#[path = "support/rig.rs"]
mod rig;
#[path = "support/server_model.rs"]
mod server_model;

/// The model without retries: its seconds and when it first refused, in ns.
fn simulate_with(
    phases: &[Phase],
    protection: Protection,
    smoothing: Smoothing,
    seed: u64,
) -> (Vec<Second>, Option<u64>) {
    let model = Model {
        protection,
        smoothing,
        seed,
        retries: 0,
        critical_share: 0.0,
        fixed_cpu: None,
    };
    let run = server_model::simulate(phases, model);
    (run.seconds, run.first_shed)
}

/// [`simulate_with`]: `shed` is the shedder with the CPU signal alone.
fn simulate(phases: &[Phase], shed: bool, smoothing: Smoothing, seed: u64) -> Vec<Second> {
    let protection = if shed {
        Protection::Shedder
    } else {
        Protection::None
    };
    simulate_with(phases, protection, smoothing, seed).0
}

/// Normal load (60 % of capacity) for 10 s, then 3× capacity for 30 s, then normal again.
fn overload() -> [Phase; 3] {
    [
        Phase {
            seconds: 10,
            load: 0.6,
        },
        Phase {
            seconds: 30,
            load: 3.0,
        },
        Phase {
            seconds: 10,
            load: 0.6,
        },
    ]
}

/// Without protection the queue grows by the excess arrivals (2 × capacity per second) for
/// the whole overload, and once the backlog exceeds the deadline almost nothing is useful:
/// goodput collapses, and stays collapsed into the recovery phase while the backlog drains.
#[test]
fn without_the_shedder_the_queue_grows_without_bound() {
    let seconds = simulate(&overload(), false, Smoothing::default(), 7);
    print("unprotected", &seconds);
    let queued_at = |second: usize| seconds[second].queued as f64;
    // Growth of about (3 − 1) × capacity per second through the overload.
    let growth = (queued_at(39) - queued_at(19)) / 20.0;
    assert!(
        growth > 1.8 * CAPACITY,
        "the backlog grew by {growth:.0} per second"
    );
    let overloaded_goodput: u32 = seconds[15..40].iter().map(|s| s.goodput).sum();
    assert!(
        f64::from(overloaded_goodput) < 0.05 * 25.0 * CAPACITY,
        "{overloaded_goodput} useful responses in 25 s of overload"
    );
    let recovery_goodput: u32 = seconds[40..].iter().map(|s| s.goodput).sum();
    assert_eq!(
        recovery_goodput, 0,
        "the backlog outlasts the recovery phase"
    );
}

/// With the shedder and `SystemCpu`'s default smoothing (go-zero's: a time constant of about
/// 5 s), the CPU gate opens only some seconds into the overload. The backlog that built up
/// by then is drained without admitting more (its requests are past their deadline, so
/// goodput is lost for as long as the backlog took to build and drain). From then on the
/// queue stays short, admitted requests wait a bounded time and goodput stays near capacity;
/// after the overload the server serves the offered load again.
#[test]
fn with_the_shedder_waits_and_goodput_stay_bounded() {
    let seconds = simulate(&overload(), true, Smoothing::default(), 7);
    print("with the shedder, default CPU smoothing", &seconds);
    let engaged = engaged(&seconds);
    assert!(engaged <= 18, "engaged in second {engaged}");
    // From then on the backlog never grows.
    for i in engaged..40 {
        assert!(
            seconds[i + 1].queued <= seconds[i].queued + 50,
            "second {}: {:?}",
            i + 1,
            seconds[i + 1]
        );
    }
    // The backlog drains at the capacity: about as long as it took to build, times the
    // excess (2 × capacity) over the capacity.
    let drained = (engaged..40)
        .find(|&i| seconds[i].max_wait_ms < DEADLINE.as_millis() as u64 / 2)
        .expect("the backlog drained");
    assert!(drained <= 34, "drained in second {drained}");
    assert_steady(&seconds[drained + 1..40]);
    assert_recovers(&seconds[42..]);
}

/// A faster CPU signal (a 1 s time constant) opens the gate within a couple of seconds, so
/// the backlog stays small and goodput is lost only briefly.
#[test]
fn a_faster_cpu_signal_shortens_the_transient() {
    let fast = Smoothing::Exponential {
        horizon: Duration::from_secs(1),
    };
    let seconds = simulate(&overload(), true, fast, 7);
    print("with the shedder, 1 s CPU smoothing", &seconds);
    let engaged = engaged(&seconds);
    assert!(engaged <= 12, "engaged in second {engaged}");
    assert_steady(&seconds[18..40]);
    assert_recovers(&seconds[42..]);
}

/// The second the shedder first refused a request, after nothing before the overload.
fn engaged(seconds: &[Second]) -> usize {
    assert!(
        seconds[..10].iter().all(|s| s.shed == 0),
        "nothing shed before"
    );
    (10..40)
        .find(|&i| seconds[i].shed > 0)
        .expect("the shedder engaged")
}

/// Overloaded but protected: a short queue, waits well under the deadline, near the
/// capacity completed in time (the shedder keeps a little headroom: it holds the requests in
/// flight near what the server has proven to carry, which sometimes leaves a worker idle),
/// and the excess shed.
fn assert_steady(seconds: &[Second]) {
    for s in seconds {
        assert!(s.queued < 100, "{s:?}");
        assert!(s.max_wait_ms < DEADLINE.as_millis() as u64 / 2, "{s:?}");
        assert!(f64::from(s.goodput) > 0.75 * CAPACITY, "{s:?}");
        assert!(f64::from(s.shed) > 0.5 * CAPACITY, "{s:?}");
    }
    let goodput: u32 = seconds.iter().map(|s| s.goodput).sum();
    let mean = f64::from(goodput) / seconds.len() as f64;
    assert!(mean > 0.85 * CAPACITY, "mean goodput {mean:.0} per second");
}

/// Back to normal load: (nearly) every arrival is served in time.
fn assert_recovers(seconds: &[Second]) {
    for s in seconds {
        assert!(s.goodput + 5 >= s.arrived * 95 / 100, "{s:?}");
    }
}

/// With a queue gate the shedder sees the queue itself: the requests' waits cross the target
/// within the overload's first interval, and the gate is hot from the next, long before the
/// CPU average would be. Requests that waited too long are dropped from the queue rather than
/// served late, so the queue stays near the target, admitted requests wait milliseconds, and
/// the workers stay busy: goodput at the capacity from the overload's first second on.
#[test]
fn a_queue_gate_engages_within_two_intervals_and_keeps_the_workers_busy() {
    let (seconds, first_shed) =
        simulate_with(&overload(), Protection::QueueGate, Smoothing::default(), 7);
    print("with the shedder and a queue gate", &seconds);
    let first_shed = first_shed.expect("the gate engaged");
    println!("first refusal {:.3} s", first_shed as f64 / 1e9);
    assert!(
        seconds[..10].iter().all(|s| s.shed == 0),
        "nothing shed before the overload"
    );
    // The overload starts at 10 s. Its first interval (to 10.1 s) fills the queue; the next is
    // the first whose every wait exceeds the target; the gate is hot from the third, at 10.2 s.
    assert!(
        (10_200_000_000..10_300_000_000).contains(&first_shed),
        "first refusal at {first_shed} ns"
    );
    // Waits stay far below the 500 ms deadline (a cold interval lets the queue grow for at
    // most an interval), and the queue short.
    let overload = &seconds[10..40];
    for s in overload {
        assert!(s.max_wait_ms <= 150, "{s:?}");
        assert!(s.queued < 100, "{s:?}");
    }
    let goodput: u32 = overload.iter().map(|s| s.goodput).sum();
    let mean = f64::from(goodput) / overload.len() as f64;
    println!("mean goodput {mean:.1} per second, capacity {CAPACITY}");
    assert!(
        mean >= 0.95 * CAPACITY,
        "mean goodput {mean:.0} per second of the overload"
    );
    assert_recovers(&seconds[41..]);
}
