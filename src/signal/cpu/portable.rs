//! CPU usage off Linux: the process's own CPU time on other Unix systems, nothing elsewhere.

use super::sample::Sample;
#[cfg(unix)]
use super::sample::SourceKind;

/// The process's CPU time.
#[derive(Debug)]
pub(crate) struct CpuUsageSource {
    #[cfg(unix)]
    limit_cpus: f64,
}

impl CpuUsageSource {
    /// Process CPU time where the platform offers it (Unix) and says how many CPUs there are,
    /// `None` elsewhere.
    pub(crate) fn discover() -> Option<CpuUsageSource> {
        #[cfg(unix)]
        {
            let limit_cpus = std::thread::available_parallelism().ok()?.get() as f64;
            let mut source = CpuUsageSource { limit_cpus };
            source.sample().map(|_| source)
        }
        #[cfg(not(unix))]
        {
            None
        }
    }

    /// The process's CPU time now.
    pub(crate) fn sample(&mut self) -> Option<Sample> {
        #[cfg(unix)]
        {
            use rustix::time::{ClockId, clock_gettime};
            let now = clock_gettime(ClockId::ProcessCPUTime);
            let used_nanos = u64::try_from(now.tv_sec)
                .ok()?
                .checked_mul(1_000_000_000)?
                .checked_add(u64::try_from(now.tv_nsec).ok()?)?;
            Some(Sample {
                kind: SourceKind::ProcessTime,
                used_nanos,
                limit_cpus: self.limit_cpus,
            })
        }
        #[cfg(not(unix))]
        {
            None
        }
    }
}
