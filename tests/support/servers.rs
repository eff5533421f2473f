//! Helpers shared by the end-to-end layer tests (`tests/layer_axum.rs`, `tests/layer_tonic.rs`):
//! bounded waits so that no network await can hang a test run.

// Each test file uses its own subset.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

/// The longest any single network operation may take before the test fails (not a timing
/// assertion: only a guard against hangs).
pub const NET_TIMEOUT: Duration = Duration::from_secs(10);

/// How long [`eventually`] polls before giving up.
pub const POLL_LIMIT: Duration = Duration::from_secs(5);

/// Awaits `future`, failing the test if it takes longer than [`NET_TIMEOUT`].
pub async fn bounded<F: Future>(what: &str, future: F) -> F::Output {
    match tokio::time::timeout(NET_TIMEOUT, future).await {
        Ok(output) => output,
        Err(_) => panic!("{what}: no result within {NET_TIMEOUT:?}"),
    }
}

/// Polls `condition` every 10 ms until it holds, failing the test after [`POLL_LIMIT`] with
/// `describe()`'s account of the state.
pub async fn eventually(
    what: &str,
    mut condition: impl FnMut() -> bool,
    describe: impl Fn() -> String,
) {
    let deadline = tokio::time::Instant::now() + POLL_LIMIT;
    while !condition() {
        if tokio::time::Instant::now() >= deadline {
            panic!("{what}: still false after {POLL_LIMIT:?}; {}", describe());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
