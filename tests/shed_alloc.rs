//! `allow`, `allow_with`, `allow_owned`, `allow_owned_with`, `pass`, `fail`, dropping a permit,
//! refusing and `snapshot` never touch the heap, including with the system CPU signal (read
//! natively and, with the `sysinfo` feature, through sysinfo) and with every request class in
//! use (the cut moving as the CPU heats and cools).
//!
//! Allocations are counted per thread, since the system CPU signal's sampler thread allocates
//! on its own schedule (off the hot path). One test in this file all the same.

use admit::signal::Arrival;
use admit_testkit::counting_alloc;

#[global_allocator]
static ALLOCATOR: counting_alloc::CountingAllocator = counting_alloc::CountingAllocator;

#[path = "support/rig.rs"]
mod rig;

use std::time::Duration;

use admit::clock::MonotonicClock;
use admit::criticality::Criticality;
use admit::shed::Shedder;
use admit::signal::cpu::SystemCpu;
use counting_alloc::allocations_during;
use rig::Rig;

#[test]
fn admitting_completing_and_refusing_never_allocate() {
    let Rig {
        shedder,
        clock,
        cpu,
    } = Rig::new();
    // The system signal's sampler thread allocates on its own thread, not on ours; it is only
    // read here.
    let on = |cpu: SystemCpu| {
        Shedder::builder()
            .clock(MonotonicClock::new())
            .cpu(cpu)
            .build()
            .unwrap()
    };
    #[allow(unused_mut)] // without the `sysinfo` feature
    let mut systems = vec![on(SystemCpu::new())];
    // Through sysinfo, once its sampler has read: the refreshes allocate on that thread.
    #[cfg(feature = "sysinfo")]
    {
        use admit::signal::cpu::CpuSignal;
        let cpu = SystemCpu::sysinfo();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while cpu.load_permille().is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(cpu.load_permille().is_some(), "no sysinfo reading in 10 s");
        systems.push(on(cpu));
    }

    let mut stash = Vec::with_capacity(64);
    let (mut admitted, mut refused) = (0u32, 0u32);
    let allocations = allocations_during(|| {
        for round in 0..2_000u32 {
            // Alternate a cool and a hot CPU across many buckets.
            cpu.set(if round % 200 < 100 { 0 } else { 1000 });
            for i in 0..8u32 {
                // Every class in turn.
                let class = Criticality::ALL[(i as usize * 3 + round as usize) % 4];
                match shedder.allow_with(Arrival::new().with_class(class)) {
                    Ok(permit) if i % 3 == 0 => permit.pass(),
                    Ok(permit) if i % 3 == 1 => permit.fail(),
                    Ok(permit) => drop(permit),
                    Err(overloaded) => {
                        std::hint::black_box(overloaded.retry_after());
                        refused += 1;
                        continue;
                    }
                }
                admitted += 1;
            }
            let owned = if round % 2 == 0 {
                shedder.allow_owned()
            } else {
                let waited = Arrival::new().with_wait(Duration::from_millis(u64::from(round % 50)));
                shedder.allow_owned_with(waited.with_class(Criticality::SheddablePlus))
            };
            match owned {
                Ok(permit) if stash.len() < stash.capacity() => stash.push(permit),
                Ok(permit) => permit.pass(),
                Err(_) => refused += 1,
            }
            if round % 7 == 0 {
                stash.drain(..).for_each(|permit| permit.pass());
            }
            std::hint::black_box(shedder.snapshot());
            clock.advance(Duration::from_millis(13));
        }
        for system in &systems {
            for _ in 0..1_000 {
                if let Ok(permit) = system.allow() {
                    permit.pass();
                }
            }
            std::hint::black_box(system.snapshot());
        }
    });
    assert!(
        admitted > 0 && refused > 0,
        "admitted {admitted}, refused {refused}"
    );
    // The cut saw every class, under pressure and calm.
    let by_class = shedder.snapshot().by_class;
    assert!(
        by_class.iter().all(|class| class.admitted > 0),
        "{by_class:?}"
    );
    assert_eq!(
        allocations, 0,
        "{allocations} heap allocations on the hot path"
    );
}
