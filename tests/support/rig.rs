//! A shedder on a manual clock and a manual CPU signal, which a test can push into overload and
//! back: the fixture of the shedder and layer tests.
//!
//! Include it with `#[path = "support/rig.rs"] mod rig;`.

// Each test file uses its own subset.
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::time::Duration;

use admit::clock::ManualClock;
use admit::shed::{OwnedPermit, Shedder};
use admit::signal::cpu::ManualCpu;

/// The shedder every test drives: manual time, manual CPU.
pub type TestShedder = Shedder<ManualClock>;

/// A shedder with its manual clock and CPU (clones share their state with the shedder's).
pub struct Rig {
    pub shedder: Arc<TestShedder>,
    pub clock: ManualClock,
    pub cpu: ManualCpu,
}

impl Rig {
    /// A cool shedder (CPU 0 ‰) whose clock never moves unless the test moves it.
    pub fn new() -> Self {
        Rig::build(None)
    }

    /// [`Rig::new`] with a named shedder, for the metrics tests.
    pub fn named(name: &'static str) -> Self {
        Rig::build(Some(name))
    }

    fn build(name: Option<&'static str>) -> Self {
        let clock = ManualClock::new();
        let cpu = ManualCpu::new(0);
        let mut builder = Shedder::builder().clock(clock.clone()).cpu(cpu.clone());
        if let Some(name) = name {
            builder = builder.name(name);
        }
        let shedder = builder.build().expect("a valid shedder configuration");
        Rig {
            shedder: Arc::new(shedder),
            clock,
            cpu,
        }
    }

    /// Puts the shedder into overload: 20 requests admitted directly, 5 of them passed (so the
    /// smoothed in-flight count rises well above the limit of 1 that an empty window at
    /// 1000 ‰ allows), then the CPU pinned at 1000 ‰. The 15 permits returned must stay alive
    /// for as long as the overload should last.
    ///
    /// Adds 5 to `passed` and leaves 15 in flight.
    pub fn force_overload(&self) -> Vec<OwnedPermit<ManualClock>> {
        let mut held: Vec<_> = (0..20)
            .map(|i| {
                self.shedder
                    .allow_owned()
                    .unwrap_or_else(|e| panic!("priming request {i} refused: {e}"))
            })
            .collect();
        for permit in held.drain(..5) {
            permit.pass();
        }
        self.cpu.set(1000);
        let snapshot = self.shedder.snapshot();
        let limit = snapshot.max_flight * snapshot.overload_factor;
        assert!(snapshot.hot, "the CPU at 1000 ‰ must be hot: {snapshot:?}");
        assert!(
            snapshot.avg_flying > limit && snapshot.flying as f64 > limit,
            "priming must leave both the smoothed and the current in-flight count above the \
             limit {limit}: {snapshot:?}"
        );
        held
    }

    /// Ends the overload without releasing the held permits: the CPU drops to 0 ‰ and the
    /// shedder's clock moves past the 1 s cool-off.
    pub fn cool_down(&self) {
        self.cpu.set(0);
        self.clock.advance(Duration::from_secs(2));
    }
}
