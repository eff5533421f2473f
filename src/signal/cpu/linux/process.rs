//! What the process itself is given and uses: its CPU affinity mask and its own CPU time.

use rustix::process::getpid;
use rustix::thread::sched_getaffinity;
use rustix::time::{ClockId, clock_gettime};

/// This process's CPU time (`CLOCK_PROCESS_CPUTIME_ID`), in nanoseconds.
pub(super) fn process_cpu_nanos() -> u64 {
    let now = clock_gettime(ClockId::ProcessCPUTime);
    // The kernel keeps both fields non-negative and `tv_nsec` below one second.
    u64::try_from(now.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(now.tv_nsec).unwrap_or(0))
}

/// The number of CPUs in this process's affinity mask (of the main thread: the sampler's own
/// thread may have been pinned), or `None` if it cannot be read.
pub(super) fn affinity_cpus() -> Option<u32> {
    let set = sched_getaffinity(Some(getpid())).ok()?;
    Some(set.count()).filter(|&n| n > 0)
}
