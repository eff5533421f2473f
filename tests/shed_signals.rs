//! Overload signals beside the CPU: a signal added with `ShedderBuilder::signal` makes the
//! shedder hot exactly as a hot CPU does, its headroom scales the limit, and its name is the
//! refusal's reason. With the CPU alone the decision is go-zero's (the parity suites).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use admit::ConfigError;
use admit::clock::ManualClock;
use admit::shed::Shedder;
use admit::signal::cpu::ManualCpu;
use admit::signal::{Cause, OverloadSignal, Pressure};

/// A signal a test switches on and off, with a headroom in thousandths.
#[derive(Debug, Default)]
struct Switch {
    on: AtomicBool,
    headroom_milli: AtomicU64,
    calls: AtomicU64,
}

impl OverloadSignal for Switch {
    fn pressure(&self, _now_nanos: u64) -> Pressure {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let headroom = self.headroom_milli.load(Ordering::Relaxed) as f64 / 1000.0;
        if self.on.load(Ordering::Relaxed) {
            Pressure::overloaded(Cause::Custom("switch")).with_headroom(headroom)
        } else {
            Pressure::CALM.with_headroom(headroom)
        }
    }
}

fn shedder(switch: &Arc<Switch>, cpu: &ManualCpu, clock: &ManualClock) -> Shedder<ManualClock> {
    switch.headroom_milli.store(1000, Ordering::Relaxed);
    Shedder::builder()
        .clock(clock.clone())
        .cpu(cpu.clone())
        .signal(Arc::clone(switch))
        .build()
        .unwrap()
}

/// 20 admitted, 5 passed: 15 in flight, and the smoothed count well above an empty window's
/// limit (10 at full headroom).
fn crowd(shedder: &Shedder<ManualClock>) -> Vec<admit::shed::Permit<'_, ManualClock>> {
    let mut held: Vec<_> = (0..20).map(|_| shedder.allow().unwrap()).collect();
    for permit in held.drain(..5) {
        permit.pass();
    }
    held
}

#[test]
fn a_hot_signal_sheds_as_a_hot_cpu_does_and_names_the_reason() {
    let (switch, cpu, clock) = (
        Arc::new(Switch::default()),
        ManualCpu::new(0),
        ManualClock::new(),
    );
    let shedder = shedder(&switch, &cpu, &clock);
    let held = crowd(&shedder);
    // Cool CPU, calm signal: nothing is shed, whatever the concurrency.
    drop(shedder.allow().unwrap());
    assert!(!shedder.snapshot().hot);

    // Hot, with the headroom of a saturated CPU (0.1): a limit of 1 against ~6.9 in flight on
    // average and 15 now.
    switch.on.store(true, Ordering::Relaxed);
    switch.headroom_milli.store(100, Ordering::Relaxed);
    let snapshot = shedder.snapshot();
    assert!(snapshot.hot, "{snapshot:?}");
    assert_eq!(snapshot.cause, Some(Cause::Custom("switch")));
    assert_eq!(snapshot.cpu_permille, Some(0));
    let refused = shedder.allow().unwrap_err();
    assert_eq!(refused.reason(), Cause::Custom("switch"));
    assert_eq!(refused.to_string(), "service overloaded: switch");
    assert_eq!(shedder.snapshot().dropped, 1);

    // The signal calms down: go-zero's cool-off keeps the shedder hot for 1 s after the last
    // hot reading, then it admits again.
    switch.on.store(false, Ordering::Relaxed);
    assert_eq!(shedder.allow().unwrap_err().reason(), Cause::CoolOff);
    clock.advance(Duration::from_millis(1001));
    drop(shedder.allow().unwrap());
    drop(held);
}

#[test]
fn the_cpu_names_the_cause_when_both_are_hot() {
    let (switch, cpu, clock) = (
        Arc::new(Switch::default()),
        ManualCpu::new(0),
        ManualClock::new(),
    );
    let shedder = shedder(&switch, &cpu, &clock);
    let _held = crowd(&shedder);
    switch.on.store(true, Ordering::Relaxed);
    switch.headroom_milli.store(100, Ordering::Relaxed);
    cpu.set(1000);
    assert_eq!(shedder.allow().unwrap_err().reason(), Cause::Cpu);
}

#[test]
fn the_smallest_headroom_scales_the_limit() {
    let (switch, cpu, clock) = (
        Arc::new(Switch::default()),
        ManualCpu::new(950),
        ManualClock::new(),
    );
    let shedder = shedder(&switch, &cpu, &clock);
    // CPU at 950 ‰: go-zero's factor is 0.5.
    assert_eq!(shedder.snapshot().overload_factor, 0.5);
    switch.headroom_milli.store(200, Ordering::Relaxed);
    assert_eq!(shedder.snapshot().overload_factor, 0.2);
    switch.headroom_milli.store(900, Ordering::Relaxed);
    assert_eq!(shedder.snapshot().overload_factor, 0.5);
}

#[test]
fn every_decision_consults_every_signal() {
    let (switch, cpu, clock) = (
        Arc::new(Switch::default()),
        ManualCpu::new(0),
        ManualClock::new(),
    );
    let shedder = shedder(&switch, &cpu, &clock);
    let before = switch.calls.load(Ordering::Relaxed);
    for _ in 0..10 {
        shedder.allow().unwrap().pass();
    }
    assert_eq!(switch.calls.load(Ordering::Relaxed) - before, 10);
}

/// A signal that refuses outright refuses whatever the concurrency, names the refusal and
/// arms the cool-off, as the queue gate's refusal of a late request does.
#[test]
fn a_signal_may_refuse_a_request_outright() {
    let refusing = Arc::new(AtomicBool::new(true));
    let flag = Arc::clone(&refusing);
    let clock = ManualClock::new();
    let shedder = Shedder::builder()
        .clock(clock.clone())
        .cpu(ManualCpu::new(0))
        .signal(move |_now: u64| {
            if flag.load(Ordering::Relaxed) {
                Pressure::refuse(Cause::Custom("maintenance"))
            } else {
                Pressure::CALM
            }
        })
        .build()
        .unwrap();
    let refused = shedder.allow().unwrap_err();
    assert_eq!(refused.reason(), Cause::Custom("maintenance"));
    assert_eq!(
        shedder.snapshot().flying,
        0,
        "refused with nothing in flight"
    );
    assert_eq!(shedder.snapshot().cause, Some(Cause::Custom("maintenance")));
    refusing.store(false, Ordering::Relaxed);
    // Nothing in flight: the cool-off alone refuses nothing.
    shedder.allow().unwrap().pass();
    assert!(shedder.snapshot().hot, "cooling off");
    clock.advance(Duration::from_secs(2));
    assert!(!shedder.snapshot().hot);
}

#[test]
fn pressure_readings_combine_and_clamp() {
    let hot = Pressure::overloaded(Cause::Cpu).with_headroom(0.4);
    let calm = Pressure::CALM.with_headroom(0.7);
    assert_eq!(calm.and(hot).cause(), Some(Cause::Cpu));
    assert_eq!(calm.and(hot).headroom(), 0.4);
    assert_eq!(hot.and(calm).headroom(), 0.4);
    assert_eq!(Pressure::CALM.with_headroom(7.0).headroom(), 1.0);
    assert_eq!(Pressure::CALM.with_headroom(-1.0).headroom(), 0.0);
    assert_eq!(
        calm.with_headroom(f64::NAN).headroom(),
        0.0,
        "NaN fails closed"
    );
    assert_eq!(Cause::Custom("queue").to_string(), "queue");
    assert_eq!(Cause::Cpu.to_string(), "cpu");
}

#[test]
fn a_shedder_carries_its_name() {
    let shedder = Shedder::builder()
        .cpu(ManualCpu::new(0))
        .name("checkout")
        .build()
        .unwrap();
    assert!(format!("{shedder:?}").contains(r#"name: Some("checkout")"#));
    let unnamed = Shedder::builder().cpu(ManualCpu::new(0)).build().unwrap();
    assert!(format!("{unnamed:?}").contains("name: None"));
    let owned = String::from("search");
    let named = Shedder::builder()
        .cpu(ManualCpu::new(0))
        .name(owned)
        .build()
        .unwrap();
    assert!(format!("{named:?}").contains(r#"name: Some("search")"#));
}

#[test]
fn an_empty_name_is_a_typed_error() {
    let err = Shedder::builder()
        .cpu(ManualCpu::new(0))
        .name("")
        .build()
        .unwrap_err();
    assert_eq!(err, ConfigError::EmptyName);
    assert_eq!(err.setting(), "name");
}

/// A signal of your own sees each request's class, wait and clock reading as the shedder
/// decides, and its retry hint and limit floor reach the decision: here it refuses sheddable
/// requests during a drill, hinting 250 ms, and floors the limit so that a hot CPU's headroom
/// does not lower it.
#[test]
fn a_custom_signal_reads_the_request_and_its_hint_and_floor_count() {
    use admit::criticality::Criticality;
    use admit::signal::Arrival;

    #[derive(Debug, Default)]
    struct Drill {
        seen: std::sync::Mutex<Vec<Arrival>>,
    }
    impl OverloadSignal for Drill {
        fn pressure(&self, _now_nanos: u64) -> Pressure {
            Pressure::CALM.with_limit_floor(Duration::from_millis(50))
        }
        fn assess(&self, arrival: &Arrival) -> Pressure {
            let mut seen = self.seen.lock().unwrap();
            seen.push(*arrival);
            if arrival.class() == Some(Criticality::Sheddable) {
                Pressure::refuse(Cause::Custom("drill"))
                    .with_retry_after(Duration::from_millis(250))
            } else {
                self.pressure(arrival.now_nanos())
            }
        }
    }

    let clock = ManualClock::new();
    clock.set(Duration::from_millis(1234));
    let drill = Arc::new(Drill::default());
    let shedder = Shedder::builder()
        .clock(clock.clone())
        .cpu(ManualCpu::new(999))
        .signal(Arc::clone(&drill))
        .build()
        .unwrap();
    let sheddable = Arrival::new()
        .with_class(Criticality::Sheddable)
        .with_wait(Duration::from_millis(3));
    let refused = shedder.allow_with(sheddable).unwrap_err();
    assert_eq!(refused.reason(), Cause::Custom("drill"));
    assert_eq!(refused.retry_after(), Duration::from_millis(250));
    let critical = shedder.allow_with(Arrival::new()).unwrap();
    let now = 1_234_000_000;
    assert_eq!(
        *drill.seen.lock().unwrap(),
        [sheddable.at(now), Arrival::new().at(now)]
    );
    // The CPU at 999 ‰ would scale the empty window's limit (10) down to 1; the floor keeps it.
    let snapshot = shedder.snapshot();
    assert_eq!((snapshot.max_flight, snapshot.overload_factor), (10.0, 1.0));
    critical.pass();

    // Twenty admitted and one completed: 19 in flight, smoothed to 1.9, over the CPU's scaled
    // limit of 1 and under the floored limit of 10.
    let without = Shedder::builder()
        .clock(clock.clone())
        .cpu(ManualCpu::new(999))
        .build()
        .unwrap();
    for (shedder, floored) in [(&shedder, true), (&without, false)] {
        let mut held: Vec<_> = (0..20).map(|_| shedder.allow().unwrap()).collect();
        held.pop().unwrap().pass();
        let next = shedder.allow();
        assert_eq!(next.is_ok(), floored, "floored: {floored}");
        if let Err(refused) = next {
            assert_eq!(refused.reason(), Cause::Cpu);
        }
    }
}
