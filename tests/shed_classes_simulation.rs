//! Request criticality in the server model (`support/server_model.rs`): 20 % critical and 80 %
//! sheddable requests, Poisson arrivals at 2×, 4× and 10× of the capacity, the shedder with
//! its CPU signal held at the threshold, on `ManualClock`. The critical requests keep being
//! served while the sheddable ones take what capacity is left; with every request of one class
//! the shedder refuses as many as without classes.

use admit::signal::cpu::Smoothing;
use server_model::{CAPACITY, Model, Phase, Protection, Second, print};

#[path = "support/random.rs"]
mod random;
#[path = "support/rig.rs"]
mod rig;
#[path = "support/server_model.rs"]
mod server_model;

/// 5 s at half the capacity, then `load` × the capacity for 20 s, with the CPU signal held
/// hot (900 ‰, the threshold): the shedder is under pressure throughout, so the runs show
/// what the classes change in its decisions, not how fast a CPU average turns.
fn run(load: f64, critical_share: f64) -> Vec<Second> {
    let phases = [
        Phase {
            seconds: 5,
            load: 0.5,
        },
        Phase { seconds: 20, load },
    ];
    let model = Model {
        protection: Protection::Shedder,
        smoothing: Smoothing::Raw,
        seed: 7,
        retries: 0,
        critical_share,
        fixed_cpu: Some(900),
    };
    let seconds = server_model::simulate(&phases, model).seconds;
    print(&format!("{load}x, {critical_share} critical"), &seconds);
    seconds
}

/// The seconds summed over: the last 10 of the overload, once the backlog of its start is
/// gone.
const SETTLED: usize = 10;

/// Sums `field` over the last [`SETTLED`] seconds.
fn settled(seconds: &[Second], field: impl Fn(&Second) -> u32) -> f64 {
    let from = seconds.len() - SETTLED;
    seconds[from..]
        .iter()
        .map(|second| f64::from(field(second)))
        .sum()
}

#[test]
fn critical_requests_are_served_through_an_overload_of_sheddable_ones() {
    // The load; the least share of the servable critical requests served in time (they need
    // 0.2 × load of the capacity: 40 % at 2×, 80 % at 4×, twice the capacity at 10×, when at
    // most the capacity can be served); the least goodput against the run without classes.
    // At 4× the critical requests alone keep the workers 80 % busy: the cut stays below them
    // because they are admitted fewer than the shedder has seen complete in a step, and the
    // few of them not served in time waited behind a burst.
    for (load, critical_served, goodput_kept) in
        [(2.0, 0.999, 0.95), (4.0, 0.995, 0.95), (10.0, 0.98, 0.95)]
    {
        let unclassed = settled(&run(load, 0.0), |s| s.goodput) / SETTLED as f64;
        let seconds = run(load, 0.2);
        let arrived = settled(&seconds, |s| s.critical_arrived);
        let shed = settled(&seconds, |s| s.critical_shed);
        let served = settled(&seconds, |s| s.critical_goodput);
        let goodput = settled(&seconds, |s| s.goodput) / SETTLED as f64;
        println!(
            "{load}x: critical {served}/{arrived} served in time, {shed} refused; \
             goodput {goodput:.0}/s ({unclassed:.0}/s without classes) of {CAPACITY}/s"
        );
        let servable = arrived.min(CAPACITY * SETTLED as f64);
        assert!(
            served >= critical_served * servable,
            "{load}x: {served} of {arrived} critical served"
        );
        assert!(
            goodput >= goodput_kept * unclassed,
            "{load}x: goodput {goodput}, {unclassed} without classes"
        );
    }
}

#[test]
fn one_class_is_shed_as_without_classes() {
    // Every request critical (a share of 1 draws a class per request, so the random stream
    // differs from the unclassed run's): at 3x the shedder refuses about two thirds of them,
    // as it refuses unclassed requests.
    let seconds = run(3.0, 1.0);
    let arrived = settled(&seconds, |s| s.critical_arrived);
    let shed = settled(&seconds, |s| s.critical_shed);
    let unclassed = run(3.0, 0.0);
    let unclassed_shed = settled(&unclassed, |s| s.shed) / settled(&unclassed, |s| s.arrived);
    println!("3x, all critical: {shed} of {arrived} refused; unclassed {unclassed_shed:.3}");
    assert!((shed / arrived - unclassed_shed).abs() < 0.05);
}
