//! Bounded waits: every await on the network, and every wait for a condition, fails the test
//! after a limit instead of hanging the run. The limits guard against hangs; they are not
//! timing assertions.

use std::future::Future;
use std::time::Duration;

/// The longest any single network operation may take before the test fails.
pub const NET_TIMEOUT: Duration = Duration::from_secs(10);

/// How long [`eventually`] polls before giving up: long enough for a condition that takes a
/// second alone to hold while every test binary of the workspace runs at once.
pub const POLL_LIMIT: Duration = Duration::from_secs(20);

/// Awaits `future`, failing the test if it takes longer than [`NET_TIMEOUT`].
///
/// # Panics
///
/// If `future` has no result within [`NET_TIMEOUT`], or outside a tokio runtime with its timer.
pub async fn bounded<F: Future>(what: &str, future: F) -> F::Output {
    match tokio::time::timeout(NET_TIMEOUT, future).await {
        Ok(output) => output,
        Err(_) => panic!("{what}: no result within {NET_TIMEOUT:?}"),
    }
}

/// Polls `condition` every 10 ms until it holds, failing the test after [`POLL_LIMIT`] with
/// `describe()`'s account of the state.
///
/// # Panics
///
/// If `condition` still does not hold after [`POLL_LIMIT`], or outside a tokio runtime with
/// its timer.
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

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[tokio::test]
    async fn bounded_passes_on_a_ready_future() {
        assert_eq!(bounded("a ready future", async { 7 }).await, 7);
    }

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "never ready: no result within 10s")]
    async fn bounded_fails_a_future_that_outlasts_the_timeout() {
        bounded("never ready", std::future::pending::<()>()).await;
    }

    #[tokio::test(start_paused = true)]
    async fn eventually_returns_once_the_condition_holds() {
        let polls = Cell::new(0);
        let start = tokio::time::Instant::now();
        eventually(
            "the third poll",
            || {
                polls.set(polls.get() + 1);
                polls.get() == 3
            },
            || format!("{} polls", polls.get()),
        )
        .await;
        assert_eq!(polls.get(), 3, "no poll after the condition held");
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(20),
            "two 10 ms pauses"
        );
    }

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "never true: still false after 20s; checked 2001 times")]
    async fn eventually_fails_with_the_description_after_the_limit() {
        let polls = Cell::new(0);
        eventually(
            "never true",
            || {
                polls.set(polls.get() + 1);
                false
            },
            || format!("checked {} times", polls.get()),
        )
        .await;
    }
}
