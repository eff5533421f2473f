//! `WarmUp::acquire(n).await` on tokio's paused clock: the limiter reads the same virtual time
//! tokio sleeps on, so every wait is exact and nothing really sleeps.

#![cfg(feature = "tokio")]

use std::sync::Arc;
use std::time::Duration;

use admit::warmup::sentinel::SentinelWarmUp;
use admit::warmup::{AcquireError, WarmUp};
use tokio::time::Instant;

#[path = "support/tokio_clock.rs"]
mod tokio_clock;
use tokio_clock::TokioClock;

fn limiter(rate: f64, start_warm: bool) -> Arc<WarmUp<TokioClock>> {
    Arc::new(
        WarmUp::builder(rate)
            .burst(Duration::ZERO) // pacing: exact spacing
            .start_warm(start_warm)
            .warm_up_period(Duration::from_secs(10))
            .clock(TokioClock::now())
            .build()
            .unwrap(),
    )
}

/// Concurrent waiters are served in the order they reserved, 100 ms apart, each woken once.
#[tokio::test(start_paused = true)]
async fn waiters_are_spaced_by_their_reservations() {
    let limiter = limiter(10.0, true);
    let start = Instant::now();
    let tasks: Vec<_> = (0..5)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                limiter.acquire(1).await;
                start.elapsed()
            })
        })
        .collect();
    let mut done = Vec::new();
    for task in tasks {
        done.push(task.await.unwrap());
    }
    done.sort();
    assert_eq!(done, [0, 100, 200, 300, 400].map(Duration::from_millis));
}

/// A cancelled wait keeps its reservation: the next caller waits behind it.
#[tokio::test(start_paused = true)]
async fn a_cancelled_wait_keeps_its_reservation() {
    let limiter = limiter(10.0, true);
    limiter.acquire(1).await;
    let start = Instant::now();
    let cancelled = tokio::time::timeout(Duration::from_millis(10), limiter.acquire(1)).await;
    assert!(cancelled.is_err(), "the wait was cut short");
    limiter.acquire(1).await;
    assert_eq!(start.elapsed(), Duration::from_millis(200));
}

/// Cold, the spacing follows the curve: the first waits are near the cold interval (300 ms).
#[tokio::test(start_paused = true)]
async fn a_cold_limiter_spaces_waiters_by_the_cold_interval() {
    let limiter = limiter(10.0, false);
    let start = Instant::now();
    limiter.acquire(1).await;
    limiter.acquire(1).await;
    let gap = start.elapsed();
    assert!(
        gap > Duration::from_millis(280) && gap <= Duration::from_millis(300),
        "{gap:?}"
    );
}

/// Sentinel's bucket cannot reserve a later window: `acquire` sleeps for each refusal's
/// retry hint and tries again. 3 rps cold admits one request per rolling second.
#[tokio::test(start_paused = true)]
async fn sentinel_acquire_retries_after_the_hint() {
    let limiter = SentinelWarmUp::builder(3.0)
        .clock(TokioClock::now())
        .build()
        .unwrap();
    let start = Instant::now();
    limiter.acquire(1).await.unwrap();
    limiter.acquire(1).await.unwrap();
    assert!(
        start.elapsed() >= Duration::from_millis(500),
        "{:?}",
        start.elapsed()
    );
    assert!(matches!(
        limiter.acquire(100).await,
        Err(AcquireError::ExceedsCapacity { .. })
    ));
}

/// The wait can move between threads: spawn it on a multi-threaded runtime.
#[test]
fn the_wait_is_send() {
    fn send<T: Send>(_: &T) {}
    let limiter = WarmUp::builder(10.0).burst(Duration::ZERO).build().unwrap();
    send(&limiter.acquire(1));
}
