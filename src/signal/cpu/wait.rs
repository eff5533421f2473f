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

    /// Runs `work` on this thread and measures how long it was ready to run but waited for a
    /// CPU.
    ///
    /// On Linux that is the run-queue delay the kernel counts for the thread
    /// (`/proc/thread-self/schedstat`, read before and after through a descriptor the thread
    /// keeps open): time `work` spends blocked (on I/O, a lock, a sleep) does not count.
    /// Elsewhere, or where that file cannot be read, it is the wall time minus the thread's CPU
    /// time (`CLOCK_THREAD_CPUTIME_ID`), which counts blocked time as waiting too: measure
    /// CPU-bound work only there.
    #[cfg(unix)]
    #[cfg_attr(docsrs, doc(cfg(unix)))]
    pub fn measure<T>(work: impl FnOnce() -> T) -> (T, CpuWait) {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Some(before) = schedstat::run_delay() {
            let output = work();
            let after = schedstat::run_delay().unwrap_or(before);
            return (
                output,
                CpuWait(Duration::from_nanos(after.saturating_sub(before))),
            );
        }
        use rustix::time::{ClockId, clock_gettime};

        // The kernel never reports a negative CPU time, the one case `try_from` refuses.
        let cpu = || Duration::try_from(clock_gettime(ClockId::ThreadCPUTime)).unwrap_or_default();
        let (started, cpu_before) = (std::time::Instant::now(), cpu());
        let output = work();
        let (cpu_spent, wall) = (cpu().saturating_sub(cpu_before), started.elapsed());
        (output, CpuWait(wall.saturating_sub(cpu_spent)))
    }
}

/// The thread's run-queue delay from `/proc/thread-self/schedstat`.
#[cfg(any(target_os = "linux", target_os = "android"))]
mod schedstat {
    use std::cell::RefCell;
    use std::fs::File;
    use std::os::unix::fs::FileExt;

    thread_local! {
        /// This thread's schedstat file, opened on first use; `None` if it cannot be.
        static FILE: RefCell<Option<Option<File>>> = const { RefCell::new(None) };
    }

    /// Nanoseconds this thread has spent ready to run but waiting for a CPU, or `None` if the
    /// kernel does not say.
    pub(super) fn run_delay() -> Option<u64> {
        FILE.with(|file| {
            let mut file = file.borrow_mut();
            let file = file
                .get_or_insert_with(|| File::open("/proc/thread-self/schedstat").ok())
                .as_ref()?;
            // Three decimal u64 and two separators: at most 62 bytes.
            let mut buffer = [0u8; 64];
            let read = file.read_at(&mut buffer, 0).ok()?;
            parse(&buffer[..read])
        })
    }

    /// The second field of `cpu_ns run_delay_ns timeslices`.
    fn parse(line: &[u8]) -> Option<u64> {
        let text = std::str::from_utf8(line).ok()?;
        text.split_ascii_whitespace().nth(1)?.parse().ok()
    }

    #[cfg(all(test, not(admit_loom)))]
    mod tests {
        #[test]
        fn the_second_field_is_the_run_delay() {
            assert_eq!(super::parse(b"100074 2500 1\n"), Some(2500));
            assert_eq!(super::parse(b"100074"), None);
            assert_eq!(super::parse(b"1 x 2"), None);
        }
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
