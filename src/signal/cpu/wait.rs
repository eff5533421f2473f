//! How long a request's work waited for a CPU it was ready to run on.

use std::time::Duration;

/// How long a request's work was ready to run but waited for a CPU: the processor sharing that
/// stretches every admitted request's latency once more work runs than there are cores.
///
/// A [`Shedder`](crate::shed::Shedder) learns what the service can carry from the latency of
/// its passes; a pass reported with a `CpuWait` teaches it that latency minus the wait
/// ([`Permit::pass_after`](crate::shed::Permit::pass_after)). Through the tower glue, a
/// response carries it as an extension, read by the
/// [`GoZeroHttp`](crate::middleware::classify::GoZeroHttp) and
/// [`GoZeroGrpc`](crate::middleware::classify::GoZeroGrpc) classifiers (chosen by the layers'
/// `.http()` and `.grpc()`).
///
/// Measure it with [`measure`](Self::measure) around CPU-bound work, such as the closure a
/// handler gives to `tokio::task::spawn_blocking`. See the [guide](crate::guide::signals) for
/// when it applies.
///
/// # Example
///
/// ```
/// use admit::signal::cpu::CpuWait;
///
/// let (sum, wait) = CpuWait::measure(|| (0..1000u64).sum::<u64>());
/// assert_eq!(sum, 499_500);
/// // An axum handler returns `(axum::Extension(wait), body)` to report it.
/// # let _ = wait;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CpuWait(pub Duration);

impl CpuWait {
    /// No wait.
    pub const NONE: CpuWait = CpuWait(Duration::ZERO);

    /// Runs `work` on this thread and measures its wall time minus the CPU time this thread
    /// spent on it (`CLOCK_THREAD_CPUTIME_ID`).
    ///
    /// Only the CPU is accounted for: time `work` spends blocked (on I/O, a lock, a sleep)
    /// counts as waiting too, and so lowers the latency the shedder learns. Measure CPU-bound
    /// work only.
    #[cfg(unix)]
    #[cfg_attr(docsrs, doc(cfg(unix)))]
    pub fn measure<T>(work: impl FnOnce() -> T) -> (T, CpuWait) {
        use rustix::time::{ClockId, clock_gettime};

        // The kernel never reports a negative CPU time, the one case `try_from` refuses.
        let cpu = || Duration::try_from(clock_gettime(ClockId::ThreadCPUTime)).unwrap_or_default();
        let (started, cpu_before) = (std::time::Instant::now(), cpu());
        let output = work();
        let (cpu_spent, wall) = (cpu().saturating_sub(cpu_before), started.elapsed());
        (output, CpuWait(wall.saturating_sub(cpu_spent)))
    }
}

#[cfg(all(test, unix, not(admit_loom)))]
mod tests {
    use super::CpuWait;

    /// The wait is at most the wall time around the measurement.
    #[test]
    fn the_wait_is_within_the_wall_time() {
        let started = std::time::Instant::now();
        let ((), wait) = CpuWait::measure(|| {
            std::hint::black_box((0..10_000u64).sum::<u64>());
        });
        assert!(wait.0 <= started.elapsed());
    }
}
