//! The system CPU signal on the real machine.
//!
//! `a_cgroup_quota_is_the_scale` needs root and a cgroup hierarchy it can limit a child's CPU
//! in: cgroup v2 with the `cpu` controller, which it enables in the mount's
//! `cgroup.subtree_control` if it is not yet, or else the v1 `cpu` and `cpuacct` hierarchies
//! (see `admit_testkit::cgroup`). It runs this test binary again as a child process inside a
//! fresh cgroup limited to half a CPU (`cpu.max` or `cpu.cfs_quota_us`), where two busy
//! threads must read close to 1000 ‰ (all of the quota) from the signal's source for that
//! version, not 250 ‰ (a quarter of a two-core host).
//! `a_pinned_process_reads_the_load_of_its_own_cpus` and, with the `sysinfo` feature,
//! `sysinfo_reads_what_the_native_reader_reads` need two CPUs.
//!
//! A test that cannot run prints a `SKIPPED:` line with the reason and passes, unless
//! `ADMIT_REQUIRE_CGROUPS` is set (as `.ci/run` does as root), when it fails instead.
#![cfg(target_os = "linux")]

use std::io::{self, Write};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use admit::signal::cpu::{CpuSignal, CpuSource, Smoothing, SystemCpu};
use admit_testkit::cgroup::{self, Version};

/// Polls `f` every 10 ms until it returns `Some`, for at most `limit`.
fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = f() {
            return Some(value);
        }
        if Instant::now() > deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for `cpu`'s first reading and checks that it and the raw one are in range.
fn reads(cpu: &SystemCpu) {
    let load = wait_for(Duration::from_secs(10), || cpu.load_permille())
        .expect("no CPU reading within 10 s");
    assert!(load <= 1000);
    let raw = cpu
        .raw_permille()
        .expect("a raw reading exists once a smoothed one does");
    assert!(raw <= 1000);
}

#[test]
fn the_signal_measures_this_process() {
    let cpu = SystemCpu::new();
    reads(&cpu);
    assert!(
        matches!(
            cpu.source(),
            CpuSource::CgroupV1 | CpuSource::CgroupV2 | CpuSource::ProcessTime
        ),
        "{:?}",
        cpu.source()
    );
    // A handle with other smoothing keeps its own average.
    let go_zero = SystemCpu::with_smoothing(Smoothing::GoZero);
    assert!(wait_for(Duration::from_secs(10), || go_zero.load_permille()).is_some());
}

const CHILD_ENV: &str = "ADMIT_TEST_CGROUP_CHILD";

/// This file's rule for a test that cannot run here: a `SKIPPED:` line on stderr, or a failure
/// where [`cgroup::REQUIRE_ENV`] says the machine must run it.
fn skip(test: &str, why: &str) {
    let require = cgroup::REQUIRE_ENV;
    assert!(
        std::env::var_os(require).is_none(),
        "{test}: {require} is set but {why}"
    );
    // Straight to stderr: the test harness captures `eprintln!` of passing tests.
    let _ = writeln!(
        io::stderr(),
        "SKIPPED: {test}: {why}. Set {require} to fail instead of skipping."
    );
}

#[test]
fn a_cgroup_quota_is_the_scale() {
    let Some(cgroup) = cgroup::require_cpu("a_cgroup_quota_is_the_scale", 0.5) else {
        return;
    };
    let expected_source = match cgroup.version() {
        Version::V2 => "CgroupV2",
        Version::V1 => "CgroupV1",
    };
    let output = cgroup
        .command(
            std::env::current_exe().unwrap(),
            &["--exact", "cgroup_child", "--ignored", "--nocapture"],
        )
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{:?} cgroup\n{stdout}", cgroup.version());
    assert!(
        output.status.success(),
        "the child failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (source, median, share) = reported(&stdout);
    assert_eq!(source, expected_source, "{stdout}");
    // Throttled to its 0.5 CPU quota, the child uses all of it (a share of 500 ‰ of one CPU)
    // unless the host is busy: it reads its share against the quota, about 1000 ‰, where a
    // host-wide measure of 0.5 CPU on this host would read 250 ‰ or less.
    assert!(
        share >= 200,
        "the child got only {share} ‰ of a CPU: the host is too busy to tell"
    );
    let expected = (share * 2).min(1000);
    assert!(
        median.abs_diff(expected) <= 200,
        "median {median} ‰ of the quota with a CPU share of {share} ‰: {stdout}"
    );
}

/// The child of `a_cgroup_quota_is_the_scale`, started inside the cgroup: burns two CPUs' worth
/// and reports eight raw readings. Does nothing when run directly.
#[test]
#[ignore = "run by a_cgroup_quota_is_the_scale in a child process"]
fn cgroup_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let burners: Vec<_> = (0..2).map(|_| burn(stop.clone(), whole())).collect();
    report_raw_readings();
    stop.store(true, Ordering::Relaxed);
    burners.into_iter().for_each(|b| b.join().unwrap());
}

const PINNED_ENV: &str = "ADMIT_TEST_PINNED";

/// Pins a process (or this thread, with `None`) to one CPU.
fn pin(pid: Option<rustix::process::Pid>, cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(pid, &set).unwrap();
}

/// Whether this machine has the two CPUs a pinned child needs; [`skip`]s `test` if not.
fn two_cpus_or_skip(test: &str) -> bool {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        skip(test, &format!("it needs two CPUs and has {cpus}"));
    }
    cpus >= 2
}

#[test]
fn a_pinned_process_reads_the_load_of_its_own_cpus() {
    if !two_cpus_or_skip("a_pinned_process_reads_the_load_of_its_own_cpus") {
        return;
    }
    // A busy neighbour on CPU 1, outside this process.
    let mut neighbour = Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    pin(Some(rustix::process::Pid::from_child(&neighbour)), 1);
    let run = |burn: bool| {
        let output = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "pinned_child", "--ignored", "--nocapture"])
            .env(PINNED_ENV, if burn { "burn" } else { "idle" })
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "the child failed: {stdout}");
        let (source, median, share) = reported(&stdout);
        (source, median, share, stdout)
    };
    let idle = run(false);
    let busy = run(true);
    let _ = neighbour.kill();
    let _ = neighbour.wait();
    // Pinned to CPU 0 of two, the child is measured on its own CPU time: the neighbour's full
    // CPU 1 is not its load, and its own CPU 0 is all of its capacity. So a busy child reads
    // the share of CPU 0 it got: all of it on a quiet machine, less when other processes on the
    // host also run on CPU 0. Measured against both CPUs it would read half its share instead.
    assert_eq!(idle.0, "ProcessTime", "{}", idle.3);
    assert!(
        idle.1 <= 200,
        "an idle pinned process reads {} ‰: {}",
        idle.1,
        idle.3
    );
    assert!(
        busy.2 >= 300,
        "the busy child got only {} ‰ of its CPU: the host is too busy to tell: {}",
        busy.2,
        busy.3
    );
    assert!(
        busy.1.abs_diff(busy.2) <= 150,
        "a busy pinned process reads {} ‰ with a CPU share of {} ‰: {}",
        busy.1,
        busy.2,
        busy.3
    );
}

/// The child of `a_pinned_process_reads_the_load_of_its_own_cpus`: pins itself to CPU 0, idles
/// or keeps that CPU busy, and reports eight raw readings. Does nothing when run directly.
#[test]
#[ignore = "run by a_pinned_process_reads_the_load_of_its_own_cpus in a child process"]
fn pinned_child() {
    let Ok(mode) = std::env::var(PINNED_ENV) else {
        return;
    };
    // As `taskset -c 0` would at launch: the main thread, whose mask the signal reads as the
    // process's, and this (test) thread, whose mask the threads it spawns inherit.
    pin(Some(rustix::process::getpid()), 0);
    pin(None, 0);
    let stop = Arc::new(AtomicBool::new(false));
    let burner = (mode == "burn").then(|| burn(stop.clone(), whole()));
    report_raw_readings();
    stop.store(true, Ordering::Relaxed);
    if let Some(burner) = burner {
        burner.join().unwrap();
    }
}

/// A duty of a whole CPU, for [`burn`].
fn whole() -> Arc<AtomicU32> {
    Arc::new(AtomicU32::new(1000))
}

/// A thread that keeps a CPU busy `duty` ‰ of every 10 ms until `stop`, sleeping the rest.
fn burn(stop: Arc<AtomicBool>, duty: Arc<AtomicU32>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let period = Duration::from_millis(10);
        let mut x = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let start = Instant::now();
            let busy = period * duty.load(Ordering::Relaxed).min(1000) / 1000;
            while start.elapsed() < busy {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            if busy < period {
                thread::sleep(period - busy);
            }
        }
    })
}

/// Prints `READINGS <source> <r1>,…,<r8>`: eight raw readings, one per 250 ms tick; then
/// `SHARE <‰>`: the process's own CPU time over the same span, per second of wall time, in ‰
/// of one CPU.
fn report_raw_readings() {
    let cpu = SystemCpu::with_smoothing(Smoothing::Raw);
    let mut readings = Vec::new();
    let mut share = 0;
    if let Some(first) = wait_for(Duration::from_secs(10), || cpu.load_permille()) {
        readings.push(first);
        let (cpu_start, wall_start) = (process_cpu_time(), Instant::now());
        for _ in 0..7 {
            thread::sleep(Duration::from_millis(250));
            readings.extend(cpu.load_permille());
        }
        let used = process_cpu_time().saturating_sub(cpu_start);
        share = (used.as_secs_f64() / wall_start.elapsed().as_secs_f64() * 1000.0) as u32;
    }
    let readings: Vec<String> = readings.iter().map(u32::to_string).collect();
    println!("READINGS {:?} {}", cpu.source(), readings.join(","));
    println!("SHARE {share}");
}

/// What a child printed (see [`report_raw_readings`]): the signal's source, the median of its
/// readings and its CPU share. The harness may print the test's name on the line of `READINGS`
/// (it does when it runs one test at a time, as in a cgroup of one CPU or less).
fn reported(stdout: &str) -> (String, u32, u32) {
    let after = |key: &str| {
        stdout
            .lines()
            .find_map(|line| Some(line.split_once(key)?.1))
            .unwrap_or_else(|| panic!("the child reported no {key}: {stdout}"))
    };
    let (source, readings) = after("READINGS ").split_once(' ').unwrap();
    let mut readings: Vec<u32> = readings.split(',').map(|r| r.parse().unwrap()).collect();
    readings.sort_unstable();
    let share = after("SHARE ").parse().unwrap();
    (source.to_owned(), readings[readings.len() / 2], share)
}

/// The CPU time this process has used so far.
fn process_cpu_time() -> Duration {
    let time = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(time.tv_sec as u64, time.tv_nsec as u32)
}

#[cfg(feature = "sysinfo")]
#[test]
fn the_sysinfo_signal_measures_this_process() {
    let cpu = SystemCpu::sysinfo();
    reads(&cpu);
    assert_eq!(cpu.source(), CpuSource::Sysinfo);
    // Its own sampler: the native reader's source is not sysinfo.
    assert_ne!(SystemCpu::new().source(), CpuSource::Sysinfo);
}

#[cfg(feature = "sysinfo")]
const TWO_READERS_ENV: &str = "ADMIT_TEST_TWO_READERS";

/// Both readers in one child pinned to CPU 0 of two, so that the native reader measures the
/// process's own CPU time (as sysinfo does) and not the cgroup the test harness shares: burning
/// half a core, then a whole one, the two read within 100 ‰ of each other.
#[cfg(feature = "sysinfo")]
#[test]
fn sysinfo_reads_what_the_native_reader_reads() {
    if !two_cpus_or_skip("sysinfo_reads_what_the_native_reader_reads") {
        return;
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "two_readers_child", "--ignored", "--nocapture"])
        .env(TWO_READERS_ENV, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "the child failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for phase in ["half", "whole"] {
        let line = stdout
            .lines()
            .find_map(|line| line.split_once(&format!("PHASE {phase} ")))
            .unwrap_or_else(|| panic!("no {phase} phase: {stdout}"))
            .1;
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [
            "NATIVE",
            native_source,
            native,
            "SYSINFO",
            sysinfo_source,
            sysinfo,
            "SHARE",
            share,
        ] = fields[..]
        else {
            panic!("a {phase} line out of form: {line}");
        };
        let [native, sysinfo, share]: [u32; 3] =
            [native, sysinfo, share].map(|n| n.parse().unwrap());
        assert_eq!(native_source, "ProcessTime", "{line}");
        assert_eq!(sysinfo_source, "Sysinfo", "{line}");
        assert!(
            share >= 300,
            "the child got only {share} ‰ of its CPU: the host is too busy to tell: {line}"
        );
        assert!(
            native.abs_diff(sysinfo) <= 100,
            "{phase} a core: native {native} ‰, sysinfo {sysinfo} ‰"
        );
        for read in [native, sysinfo] {
            assert!(
                read.abs_diff(share) <= 150,
                "{phase} a core: a reading of {read} ‰ with a CPU share of {share} ‰: {line}"
            );
        }
    }
}

/// The child of `sysinfo_reads_what_the_native_reader_reads`: pins itself to CPU 0, reads both
/// sources unsmoothed while it burns half of it and then all of it, and prints for each phase
/// `PHASE <phase> NATIVE <source> <median> SYSINFO <source> <median> SHARE <‰>`, the medians of
/// eight readings and the process's own CPU time over them in ‰ of one CPU. Does nothing when
/// run directly.
#[cfg(feature = "sysinfo")]
#[test]
#[ignore = "run by sysinfo_reads_what_the_native_reader_reads in a child process"]
fn two_readers_child() {
    if std::env::var_os(TWO_READERS_ENV).is_none() {
        return;
    }
    pin(Some(rustix::process::getpid()), 0);
    pin(None, 0);
    let native = SystemCpu::with_smoothing(Smoothing::Raw);
    let sysinfo = SystemCpu::sysinfo_with_smoothing(Smoothing::Raw);
    let read = || Some((native.load_permille()?, sysinfo.load_permille()?));
    wait_for(Duration::from_secs(10), read).expect("no reading of both within 10 s");
    let stop = Arc::new(AtomicBool::new(false));
    let duty = Arc::new(AtomicU32::new(500));
    let burner = burn(stop.clone(), duty.clone());
    for (phase, permille) in [("half", 500), ("whole", 1000)] {
        duty.store(permille, Ordering::Relaxed);
        // Two ticks, so that every reading is of this phase alone.
        thread::sleep(Duration::from_millis(600));
        let (cpu_start, wall_start) = (process_cpu_time(), Instant::now());
        let (mut natives, mut sysinfos) = (Vec::new(), Vec::new());
        for _ in 0..8 {
            thread::sleep(Duration::from_millis(250));
            let (n, s) = read().expect("a source stopped reading");
            natives.push(n);
            sysinfos.push(s);
        }
        let used = process_cpu_time().saturating_sub(cpu_start);
        let share = (used.as_secs_f64() / wall_start.elapsed().as_secs_f64() * 1000.0) as u32;
        println!(
            "PHASE {phase} NATIVE {:?} {} SYSINFO {:?} {} SHARE {share}",
            native.source(),
            median(&mut natives),
            sysinfo.source(),
            median(&mut sysinfos),
        );
    }
    stop.store(true, Ordering::Relaxed);
    burner.join().unwrap();
}

#[cfg(feature = "sysinfo")]
fn median(readings: &mut [u32]) -> u32 {
    readings.sort_unstable();
    readings[readings.len() / 2]
}
