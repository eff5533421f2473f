//! One reading of a CPU usage source, on every platform.

#[cfg(any(target_os = "linux", target_os = "android"))]
use super::linux::SourceKind;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
use super::portable::SourceKind;

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
    /// cpuset size (if readable) and the size of the process's CPU affinity mask; elsewhere the
    /// available parallelism. Always finite and > 0.
    pub(crate) limit_cpus: f64,
}
