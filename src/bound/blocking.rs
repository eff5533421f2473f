//! Blocking work on tokio's pool, measured for the bound.

use std::time::Instant;

use crate::criticality::Criticality;
use crate::signal::cpu::CpuWait;

/// Runs `work` on tokio's blocking pool, as `tokio::task::spawn_blocking` does, and measures how
/// long it waited for a CPU: from the call until a pool thread started it, plus the time that
/// thread was ready to run but waited during it ([`CpuWait::measure`]).
///
/// Return the wait with the response, as an extension (`axum::Extension(wait)`): the layers'
/// `.http()` and `.grpc()` classifiers read it, and a [`Bound`](super::Bound) learns from it how
/// contended the cores are.
///
/// # Example
///
/// ```
/// use admit::bound::spawn_blocking;
/// use axum::Extension;
///
/// async fn handler() -> (Extension<admit::signal::cpu::CpuWait>, String) {
///     match spawn_blocking(|| (0..1000u64).sum::<u64>()).await {
///         Ok((sum, wait)) => (Extension(wait), sum.to_string()),
///         Err(panicked) => (Extension(Default::default()), panicked.to_string()),
///     }
/// }
/// # let _ = handler;
/// ```
///
/// # Panics
///
/// Outside a tokio runtime, as `tokio::task::spawn_blocking` does.
#[cfg(unix)]
#[cfg_attr(docsrs, doc(cfg(unix)))]
pub fn spawn_blocking<F, T>(work: F) -> tokio::task::JoinHandle<(T, CpuWait)>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let queued = Instant::now();
    tokio::task::spawn_blocking(move || run_measured(queued, work))
}

/// Runs `work` on this thread; its wait for a CPU is the time since `queued` plus what the
/// thread waited while running it.
#[cfg(unix)]
fn run_measured<T>(queued: Instant, work: impl FnOnce() -> T) -> (T, CpuWait) {
    let dispatch = queued.elapsed();
    let (output, wait) = CpuWait::measure(work);
    (output, CpuWait(dispatch.saturating_add(wait.0)))
}

/// Runs `work` as [`spawn_blocking`] does for a request of `class`: a class below
/// [`Critical`](Criticality::Critical) runs on a thread of its own at the lowest scheduling
/// priority (nice 19, on Linux), so that the cores go to the critical classes' work first
/// (the kernel weighs a nice-19 thread at 15 against 1024 for nice 0), even when it is already
/// running.
///
/// Opt-in, and only for the lower classes: the critical classes' work runs on tokio's pool
/// as [`spawn_blocking`] runs it. A low thread's priority cannot be raised again without
/// privileges, so each such job starts a thread (tens of µs) that ends with it, while a pool
/// thread waits for it; if the thread cannot be started, or its priority cannot be lowered, the
/// job runs at normal priority on the pool thread. Elsewhere than Linux the priority is left
/// as it is.
///
/// # Example
///
/// ```
/// use admit::bound::spawn_blocking_as;
/// use admit::criticality::Criticality;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tokio::task::JoinError> {
/// let (sum, _wait) =
///     spawn_blocking_as(Criticality::Sheddable, || (0..1000u64).sum::<u64>()).await?;
/// assert_eq!(sum, 499_500);
/// # Ok(())
/// # }
/// ```
///
/// # Panics
///
/// Outside a tokio runtime, as `tokio::task::spawn_blocking` does. A panic in `work` comes out
/// of the handle as tokio's `JoinError`, as with [`spawn_blocking`].
#[cfg(unix)]
#[cfg_attr(docsrs, doc(cfg(unix)))]
pub fn spawn_blocking_as<F, T>(class: Criticality, work: F) -> tokio::task::JoinHandle<(T, CpuWait)>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    if class >= Criticality::Critical {
        return spawn_blocking(work);
    }
    let queued = Instant::now();
    tokio::task::spawn_blocking(move || {
        let work = std::sync::Mutex::new(Some(work));
        let take = || {
            work.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take()
        };
        let low = std::thread::scope(|scope| {
            let started = std::thread::Builder::new()
                .name("admit-low-priority".to_owned())
                .spawn_scoped(scope, || {
                    lower_this_thread();
                    take().map(|work| run_measured(queued, work))
                });
            match started.map(std::thread::ScopedJoinHandle::join) {
                Ok(Ok(done)) => done,
                Ok(Err(panic)) => std::panic::resume_unwind(panic),
                Err(_) => None,
            }
        });
        low.unwrap_or_else(|| {
            // No thread could be started: the work runs here, at normal priority.
            run_measured(queued, take().expect("the work runs once"))
        })
    })
}

/// Lowers the calling thread to the lowest priority (nice 19), where the kernel supports it
/// per thread; a refusal leaves it as it was.
#[cfg(unix)]
fn lower_this_thread() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), LOWEST);
    }
}

/// The lowest scheduling priority, as a nice value.
#[cfg(any(target_os = "linux", target_os = "android"))]
const LOWEST: i32 = 19;

#[cfg(all(test, any(target_os = "linux", target_os = "android"), not(admit_loom)))]
mod tests {
    use super::*;

    /// This thread's nice value.
    fn nice() -> i32 {
        rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap()
    }

    #[tokio::test]
    async fn lower_classes_run_at_the_lowest_priority_and_the_critical_ones_as_they_are() {
        let normal = nice();
        let (low, _) = spawn_blocking_as(Criticality::Sheddable, nice)
            .await
            .unwrap();
        assert_eq!(low, LOWEST);
        let (critical, _) = spawn_blocking_as(Criticality::Critical, nice)
            .await
            .unwrap();
        assert_eq!(critical, normal);
        // The pool thread that waited for the low one kept its priority.
        let (after, _) = spawn_blocking(nice).await.unwrap();
        assert_eq!(after, normal);
    }

    #[tokio::test]
    async fn a_panic_in_low_priority_work_comes_out_of_the_handle() {
        let job = spawn_blocking_as(Criticality::SheddablePlus, || panic!("the work failed"));
        assert!(job.await.unwrap_err().is_panic());
    }
}
