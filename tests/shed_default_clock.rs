//! A `Shedder`'s default clock (`CoarseClock::shared`) is started by `build`, so a builder
//! given another clock, or refused, never starts its thread.
//!
//! Alone in its file (and so its own process): it counts the process's threads.
#![cfg(target_os = "linux")]

use admit::clock::{Clock, ManualClock};
use admit::shed::Shedder;
use admit::signal::cpu::ManualCpu;

#[path = "support/clock_threads.rs"]
mod clock_threads;

use clock_threads::{clock_threads, eventually};

/// How many threads the process has now. A thread is listed as soon as it is spawned; its
/// name, which [`clock_threads`] looks for, only once it has started running.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn the_default_clock_starts_at_build_and_only_if_no_other_is_given() {
    assert!(eventually(|| clock_threads() == 0));
    let before = threads();

    // A builder holds no clock until it builds.
    let builder = Shedder::builder().cpu(ManualCpu::new(0));
    assert_eq!(threads(), before, "the builder started the shared clock");
    // Given another clock, it never starts one.
    let manual = builder.clock(ManualClock::new()).build().unwrap();
    assert_eq!(manual.clock().now_nanos(), 0);
    assert_eq!(threads(), before, "a shedder on a manual clock started one");
    // Nor when its settings are refused.
    assert!(
        Shedder::builder()
            .buckets(1)
            .cpu(ManualCpu::new(0))
            .build()
            .is_err()
    );
    assert_eq!(threads(), before, "a refused builder started one");

    // With the default, `build` starts it, and the shedder keeps it.
    let coarse = Shedder::builder().cpu(ManualCpu::new(0)).build().unwrap();
    assert!(
        eventually(|| clock_threads() == 1),
        "no clock thread behind the default"
    );
    assert_eq!(coarse.clock().resolution_nanos(), 1_000_000);
    drop(coarse);
    assert!(eventually(|| clock_threads() == 0), "the clock outlived it");
}
