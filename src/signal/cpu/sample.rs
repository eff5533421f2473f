//! One reading of a CPU usage source, on every platform.

/// What a source measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// Off Unix no process time is measured (and without sysinfo nothing is).
#[cfg_attr(not(unix), allow(dead_code))]
pub(crate) enum SourceKind {
    /// The unified (v2) cgroup hierarchy: `cpu.stat` `usage_usec`.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    CgroupV2,
    /// A v1 `cpuacct` hierarchy: `cpuacct.usage`.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    CgroupV1,
    /// This process only: `CLOCK_PROCESS_CPUTIME_ID`. No quota is known; the limit is the size of
    /// the affinity mask (on Linux) or the available parallelism.
    ProcessTime,
    /// This process only, through sysinfo (`Process::accumulated_cpu_time`, in ms). The limit is
    /// the available parallelism.
    #[cfg(any(windows, feature = "sysinfo"))]
    Sysinfo,
}

/// One reading.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Sample {
    /// What this reading measured: the source's kind, or `SourceKind::ProcessTime` for a
    /// cgroup source while the process's affinity mask covers fewer CPUs than the cgroup may use
    /// (the cgroup's usage on the other CPUs is none of this process's load). Readings of
    /// different kinds cannot be subtracted from each other.
    pub(crate) kind: SourceKind,
    /// Cumulative CPU time used by what is measured, in nanoseconds (monotone; arbitrary origin).
    pub(crate) used_nanos: u64,
    /// CPUs available right now. On Linux, the minimum of the tightest CFS quota on the
    /// cgroup's path up to its hierarchy root (quota / period; unlimited if none), the cgroup's
    /// cpuset size (if readable) and the size of the process's CPU affinity mask; elsewhere, and
    /// through sysinfo, the available parallelism. Always finite and > 0.
    pub(crate) limit_cpus: f64,
}
