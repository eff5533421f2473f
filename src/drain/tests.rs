//! The timeline on tokio's paused clock: every transition, the deadline, readiness, sessions'
//! notices and the builder's refusals.

use std::time::Duration;

use tokio::time::{Instant, advance};

use super::*;
use crate::ConfigError;

const DELAY: Duration = Duration::from_secs(5);
const DEADLINE: Duration = Duration::from_secs(25);
const NANO: Duration = Duration::from_nanos(1);

fn drain() -> Drain {
    Drain::builder()
        .propagation_delay(DELAY)
        .deadline(DEADLINE)
        .build()
        .unwrap()
}

/// Whether `future` is ready when polled once now.
fn ready<F: std::future::Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let waker = std::task::Waker::noop();
    match future
        .as_mut()
        .poll(&mut std::task::Context::from_waker(waker))
    {
        std::task::Poll::Ready(output) => Some(output),
        std::task::Poll::Pending => None,
    }
}

#[tokio::test(start_paused = true)]
async fn the_timeline() {
    let drain = drain();
    assert_eq!(drain.phase(), Phase::Serving);
    assert!(drain.is_ready());
    assert!(ready(drain.announced()).is_none());
    assert!(drain.start());
    assert!(!drain.start(), "a second start changes nothing");
    assert_eq!(drain.phase(), Phase::Announced);
    assert!(ready(drain.announced()).is_some());
    let start = Instant::now();
    advance(DELAY - NANO).await;
    assert_eq!(drain.phase(), Phase::Announced);
    assert!(ready(drain.stop_accepting()).is_none());
    let _held = drain.admit().expect("still served while announced");
    advance(NANO).await;
    assert!(ready(drain.stop_accepting()).is_some());
    assert_eq!(drain.phase(), Phase::Draining);
    assert_eq!(drain.admit().unwrap_err(), Phase::Draining);
    assert_eq!(start.elapsed(), DELAY);
}

/// The futures outlive the handle they came from: a handler or a closure can return them.
#[tokio::test(start_paused = true)]
async fn the_futures_do_not_borrow_the_handle() {
    let drain = drain();
    // As a handler captures a handle and returns what it makes of it.
    let handle = drain.clone();
    let futures = move || {
        (
            handle.announced(),
            handle.stop_accepting(),
            handle.finished(),
        )
    };
    let (announced, stop_accepting, finished) = futures();
    assert!(drain.start_now());
    assert!(ready(announced).is_some());
    assert!(ready(stop_accepting).is_some());
    assert_eq!(ready(finished), Some(Outcome::Drained { connections: 0 }));
}

#[tokio::test(start_paused = true)]
async fn stop_accepting_wakes_at_the_end_of_the_delay() {
    let drain = drain();
    drain.start();
    let start = Instant::now();
    drain.stop_accepting().await;
    assert_eq!(start.elapsed(), DELAY);
}

#[tokio::test(start_paused = true)]
async fn start_now_skips_the_delay() {
    let drain = drain();
    assert!(drain.start_now());
    assert!(!drain.start_now());
    // Idle: drained at once.
    assert_eq!(drain.phase(), Phase::Drained);
    assert!(ready(drain.stop_accepting()).is_some());
    assert_eq!(
        ready(drain.finished()),
        Some(Outcome::Drained { connections: 0 })
    );

    // After start, start_now cuts the delay short.
    let drain = drain_with_request();
    drain.0.start();
    advance(Duration::from_secs(1)).await;
    assert!(drain.0.start_now());
    assert_eq!(drain.0.phase(), Phase::Draining);
}

fn drain_with_request() -> (Drain, RequestGuard) {
    let drain = drain();
    let request = drain.admit().unwrap();
    (drain, request)
}

#[tokio::test(start_paused = true)]
async fn drained_when_the_last_request_ends() {
    let (drain, request) = drain_with_request();
    let connection = drain.connection();
    drain.start_now();
    let finished = tokio::spawn({
        let drain = drain.clone();
        async move { (drain.finished().await, Instant::now()) }
    });
    advance(Duration::from_secs(3)).await;
    let released = Instant::now();
    drop(request);
    let (outcome, at) = finished.await.unwrap();
    assert_eq!(outcome, Outcome::Drained { connections: 1 });
    assert_eq!(at, released);
    assert_eq!(drain.phase(), Phase::Drained);
    assert_eq!(drain.admit().unwrap_err(), Phase::Drained);
    drop(connection);
    assert_eq!(
        drain.snapshot(),
        DrainSnapshot {
            phase: Phase::Drained,
            in_flight: 0,
            sessions: 0,
            connections: 0,
            offered: 0
        }
    );
}

#[tokio::test(start_paused = true)]
async fn expired_exactly_at_the_deadline() {
    let (drain, _request) = drain_with_request();
    let _session = drain.session();
    drain.start();
    let start = Instant::now();
    let outcome = drain.finished().await;
    assert_eq!(start.elapsed(), DEADLINE);
    assert_eq!(
        outcome,
        Outcome::Expired {
            in_flight: 1,
            sessions: 1,
            connections: 0
        }
    );
    assert_eq!(drain.phase(), Phase::Expired);
}

#[tokio::test(start_paused = true)]
async fn finished_waits_for_the_start() {
    let drain = drain();
    let finished = tokio::spawn({
        let drain = drain.clone();
        async move { drain.finished().await }
    });
    advance(Duration::from_secs(3600)).await;
    assert!(!finished.is_finished());
    drain.start();
    // Idle: drained when the delay ends.
    let start = Instant::now();
    assert_eq!(finished.await.unwrap(), Outcome::Drained { connections: 0 });
    assert_eq!(start.elapsed(), DELAY);
}

#[tokio::test(start_paused = true)]
async fn readiness_fails_at_the_configured_phase() {
    let drain = drain();
    drain.start();
    assert!(!drain.is_ready());

    let late = Drain::builder()
        .readiness_fails_at(Phase::Draining)
        .build()
        .unwrap();
    let _request = late.admit().unwrap();
    late.start();
    assert!(late.is_ready());
    advance(Duration::from_secs(5)).await;
    assert!(!late.is_ready());
}

#[tokio::test(start_paused = true)]
async fn sessions_are_told_to_reconnect_when_draining() {
    let drain = drain();
    let sessions: Vec<Session> = (0..3).map(|_| drain.session()).collect();
    drain.start();
    for session in &sessions {
        assert!(ready(session.reconnect()).is_none());
    }
    advance(DELAY).await;
    for session in &sessions {
        assert!(ready(session.reconnect()).is_some());
    }
    // Sessions keep the drain open until they close.
    assert_eq!(drain.phase(), Phase::Draining);
    drop(sessions);
    assert_eq!(drain.phase(), Phase::Drained);
}

#[tokio::test(start_paused = true)]
async fn reconnects_spread_over_the_window_reproducibly() {
    let spread = Duration::from_secs(10);
    let make = || Drain::builder().reconnect_spread(spread).build().unwrap();
    let (first, second) = (make(), make());
    let offsets =
        |drain: &Drain| -> Vec<Duration> { (0..100).map(|_| drain.session().offset()).collect() };
    let offsets_first = offsets(&first);
    assert_eq!(offsets_first, offsets(&second));
    assert!(offsets_first.iter().all(|offset| *offset < spread));
    // Evenly spread: every second of the window gets some.
    for second in 0..10 {
        let in_second = offsets_first
            .iter()
            .filter(|offset| offset.as_secs() == second)
            .count();
        assert!((5..=15).contains(&in_second), "{second}: {in_second}");
    }

    let drain = make();
    let session = drain.session();
    let _other = drain.session();
    let other = drain.session();
    drain.start_now();
    let start = Instant::now();
    // tokio's timer counts whole milliseconds, rounding up.
    let on_time = |offset: Duration| {
        let late = start.elapsed() - offset;
        assert!(late < Duration::from_millis(1), "{late:?}");
    };
    session.reconnect().await;
    on_time(session.offset());
    other.reconnect().await;
    on_time(other.offset());
}

#[test]
fn impossible_settings_are_refused() {
    let error = Drain::builder()
        .propagation_delay(Duration::from_secs(30))
        .deadline(Duration::from_secs(30))
        .build()
        .unwrap_err();
    assert!(matches!(error, ConfigError::DeadlineNotAfterDelay { .. }));
    assert_eq!(error.setting(), "deadline");
    let error = Drain::builder()
        .reconnect_spread(Duration::from_secs(20))
        .build()
        .unwrap_err();
    assert_eq!(
        error,
        ConfigError::ReconnectSpreadTooLong {
            reconnect_spread: Duration::from_secs(20),
            window: Duration::from_secs(20),
        }
    );
    assert!(error.to_string().contains("reconnect_spread"));
    let error = Drain::builder()
        .retry_after(Duration::from_millis(500))
        .build()
        .unwrap_err();
    assert_eq!(error.setting(), "retry_after");
    let error = Drain::builder()
        .deadline(Duration::MAX)
        .build()
        .unwrap_err();
    assert!(matches!(
        error,
        ConfigError::DurationTooLong {
            setting: "deadline",
            ..
        }
    ));
    assert!(Drain::builder().build().is_ok());
}

#[test]
fn handles_are_send_sync_and_cheap_to_clone() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<Drain>();
    send_sync::<RequestGuard>();
    send_sync::<Session>();
    send_sync::<ConnectionGuard>();
}

#[tokio::test(start_paused = true)]
async fn an_idle_drain_read_late_is_drained_not_expired() {
    let drain = drain();
    drain.start();
    // Nothing reads the phase until after the deadline.
    advance(DEADLINE + Duration::from_secs(1)).await;
    assert_eq!(drain.phase(), Phase::Drained);
    assert_eq!(
        ready(drain.finished()),
        Some(Outcome::Drained { connections: 0 })
    );
}
