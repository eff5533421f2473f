//! The process's CPU time read through `sysinfo`: the reader on Windows, and one on every
//! platform sysinfo supports.

use std::num::NonZero;

use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

use super::sample::{Sample, SourceKind};

/// This process, as sysinfo sees it.
#[derive(Debug)]
pub(crate) struct SysinfoSource {
    system: System,
    pid: Pid,
}

impl SysinfoSource {
    /// A source that has taken one reading, or `None` where sysinfo cannot read this process.
    pub(crate) fn discover() -> Option<SysinfoSource> {
        let pid = sysinfo::get_current_pid().ok()?;
        let system = System::new().ok()?;
        let mut source = SysinfoSource { system, pid };
        source.sample().map(|_| source)
    }

    /// The process's CPU time now, against the CPUs it may use; `None` if the refresh fails or
    /// the CPUs are not known. Allocates (sysinfo keeps the process in a map and copies the pid list it is given).
    pub(crate) fn sample(&mut self) -> Option<Sample> {
        let refreshed = self.system.refresh_processes_specifics(
            ProcessesToUpdate::Some(&[self.pid]),
            false,
            ProcessRefreshKind::nothing().with_cpu(),
        );
        if refreshed == 0 {
            return None;
        }
        let cpu_millis = self.system.process(self.pid)?.accumulated_cpu_time();
        let cpus = std::thread::available_parallelism().ok()?;
        Some(sample_of(cpu_millis, cpus))
    }
}

/// sysinfo's reading as a [`Sample`]: its accumulated CPU time (CPU-milliseconds) against the
/// available parallelism.
fn sample_of(cpu_millis: u64, cpus: NonZero<usize>) -> Sample {
    Sample {
        kind: SourceKind::Sysinfo,
        used_nanos: cpu_millis.saturating_mul(1_000_000),
        limit_cpus: cpus.get() as f64,
    }
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use super::super::sampler::utilisation_permille;
    use super::*;

    /// ‰ between two of sysinfo's readings `wall_ms` apart, as the sampler computes it.
    fn permille(before_ms: u64, after_ms: u64, wall_ms: u64, cpus: usize) -> f64 {
        let (before, after) = (
            sample_of(before_ms, NonZero::new(cpus).unwrap()),
            sample_of(after_ms, NonZero::new(cpus).unwrap()),
        );
        assert_eq!(before.kind, SourceKind::Sysinfo);
        utilisation_permille(
            after.used_nanos - before.used_nanos,
            wall_ms * 1_000_000,
            after.limit_cpus,
        )
    }

    #[test]
    fn cpu_milliseconds_over_wall_time_and_cpus() {
        // Half a core over 250 ms, of one CPU and of two.
        assert_eq!(permille(1_000, 1_125, 250, 1), 500.0);
        assert_eq!(permille(1_000, 1_125, 250, 2), 250.0);
        // Two busy cores of two.
        assert_eq!(permille(0, 500, 250, 2), 1000.0);
        // More than the CPUs allow (a reading's jitter) is capped.
        assert_eq!(permille(0, 300, 250, 1), 1000.0);
        // An idle process.
        assert_eq!(permille(7, 7, 250, 4), 0.0);
        // Linux counts in ticks of 10 ms: one tick over 250 ms of one CPU is 40 ‰.
        assert_eq!(permille(0, 10, 250, 1), 40.0);
    }

    #[test]
    fn milliseconds_become_nanoseconds_without_wrapping() {
        let one = NonZero::new(1).unwrap();
        assert_eq!(sample_of(3, one).used_nanos, 3_000_000);
        // Centuries of CPU time saturate instead of wrapping.
        assert_eq!(sample_of(u64::MAX, one).used_nanos, u64::MAX);
    }
}
