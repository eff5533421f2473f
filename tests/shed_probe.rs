//! The shedder with a runtime lag probe: its controller's share and its heartbeat refuse
//! requests whatever the concurrency (`Cause::RuntimeLag`), and a probe ticking on
//! time refuses none. The probe's ticks are driven by hand on a manual clock.

use std::time::Duration;

use admit::clock::{Clock, ManualClock};
use admit::shed::Shedder;
use admit::signal::cpu::ManualCpu;
use admit::signal::queue::LagProbe;
use admit::signal::{Cause, OverloadSignal, Pressure};

const MS: u64 = 1_000_000;

#[test]
fn the_probe_sheds_while_the_runtime_lags() {
    let clock = ManualClock::new();
    let probe = LagProbe::default(); // ticks every 10 ms, 5 ms target
    let shedder = Shedder::builder()
        .clock(clock.clone())
        .cpu(ManualCpu::new(0))
        .runtime_probe(probe.clone())
        .build()
        .unwrap();
    // A probe that never ticked is cold.
    shedder.allow().unwrap().pass();

    // Twenty ticks each 22 ms late: the controller's share climbs to every request (in steps
    // of 5 %: one step short, a thousand refusals in a row would have a chance of 0.95¹⁰⁰⁰).
    let mut now = 1_000 * MS;
    for _ in 0..20 {
        now += 32 * MS;
        clock.set(Duration::from_nanos(now));
        probe.tick(now - 22 * MS, now);
    }
    for _ in 0..1_000 {
        let refused = shedder.allow().unwrap_err();
        assert_eq!(refused.reason(), Cause::RuntimeLag);
        assert_eq!(refused.retry_after(), Duration::from_millis(10));
    }
    let snapshot = shedder.snapshot();
    assert_eq!(snapshot.cause, Some(Cause::RuntimeLag));
    assert!(snapshot.hot);

    // A hundred ticks on time bring the share back to nothing.
    for _ in 0..100 {
        now += 10 * MS;
        clock.set(Duration::from_nanos(now));
        probe.tick(now, now);
    }
    assert_eq!(
        probe.pressure(now),
        Pressure::CALM,
        "no share, no missed heartbeat"
    );
    for _ in 0..50 {
        shedder.allow().unwrap().pass();
    }

    // The probe misses its heartbeat (its last tick over 10 + 4·5 ms ago): every request is
    // refused until it ticks again.
    clock.set(Duration::from_nanos(now + 31 * MS));
    assert_eq!(
        probe.pressure(clock.now_nanos()).cause(),
        Some(Cause::RuntimeLag)
    );
    assert_eq!(shedder.allow().unwrap_err().reason(), Cause::RuntimeLag);
    // It ticks, 21 ms late: only the controller's share (one late tick: 5 %) may refuse now.
    probe.tick(now + 10 * MS, now + 31 * MS);
    assert_eq!(
        probe.pressure(now + 31 * MS).cause(),
        Some(Cause::RuntimeLag),
        "a share to drop"
    );
    let snapshot = shedder.snapshot();
    assert_eq!(snapshot.dropped, 1_001);
}
