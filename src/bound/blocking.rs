//! Blocking work on tokio's pool, measured for the bound.

use std::time::Instant;

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
    tokio::task::spawn_blocking(move || {
        let dispatch = queued.elapsed();
        let (output, wait) = CpuWait::measure(work);
        (output, CpuWait(dispatch.saturating_add(wait.0)))
    })
}
