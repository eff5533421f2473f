//! `RetryPolicy` under tower's `Retry`, on tokio's paused clock: what is retried and what is
//! not, the server's hint honoured, the attempts capped, and the budget bounding a storm.

#![cfg(feature = "retry")]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use admit::client::{RetryBudget, RetryPolicy};
use tokio::time::Instant;
use tower::retry::RetryLayer;
use tower::{BoxError, Layer, ServiceExt, service_fn};

type Answer = Result<http::Response<()>, BoxError>;

/// A response with `status` and `headers`.
fn reply(status: u16, headers: &[(&'static str, &'static str)]) -> Answer {
    let mut response = http::Response::builder().status(status);
    for (name, value) in headers {
        response = response.header(*name, *value);
    }
    Ok(response.body(()).unwrap())
}

/// admit's refusal: nothing was processed; retry after `seconds`.
fn admit_503(seconds: &'static str) -> Answer {
    reply(
        503,
        &[("admit-refusal", "rate-limit"), ("retry-after", seconds)],
    )
}

/// Sends one `method` request through a retrying client whose backend answers with
/// `backend(attempt)`; the final answer, the attempts made and the time taken.
async fn send(
    budget: &Arc<RetryBudget>,
    method: http::Method,
    backend: impl Fn(usize) -> Answer + Clone + Send + 'static,
) -> (Answer, usize, Duration) {
    let attempts = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&attempts);
    let service = service_fn(move |_: http::Request<()>| {
        let attempt = counter.fetch_add(1, Ordering::SeqCst);
        let answer = backend(attempt);
        async move { answer }
    });
    let policy = RetryPolicy::builder(Arc::clone(budget)).build().unwrap();
    let client = RetryLayer::new(policy).layer(service);
    let request = http::Request::builder().method(method).body(()).unwrap();
    let started = Instant::now();
    let answer = client.oneshot(request).await;
    (answer, attempts.load(Ordering::SeqCst), started.elapsed())
}

fn budget() -> Arc<RetryBudget> {
    Arc::new(RetryBudget::builder().build().unwrap())
}

#[tokio::test(start_paused = true)]
async fn an_admit_refusal_is_retried_after_its_hint_even_for_a_post() {
    let budget = budget();
    let (answer, attempts, took) = send(&budget, http::Method::POST, |attempt| match attempt {
        0 => admit_503("2"),
        _ => reply(200, &[]),
    })
    .await;
    assert_eq!(answer.unwrap().status(), 200);
    assert_eq!(attempts, 2);
    assert!(took >= Duration::from_secs(2), "{took:?}");
    // Refused every time: three attempts, then the last refusal is the answer.
    let (answer, attempts, took) = send(&budget, http::Method::POST, |_| admit_503("1")).await;
    assert_eq!(answer.unwrap().status(), 503);
    assert_eq!(attempts, 3);
    assert!(took >= Duration::from_secs(2), "{took:?}");
}

#[tokio::test(start_paused = true)]
async fn a_plain_503_is_retried_only_when_the_method_is_idempotent() {
    let budget = budget();
    let plain = |_| reply(503, &[]);
    assert_eq!(send(&budget, http::Method::POST, plain).await.1, 1);
    let (_, attempts, took) = send(&budget, http::Method::GET, plain).await;
    assert_eq!(attempts, 3);
    // The backoff alone: 25–50 ms, then 50–100 ms.
    assert!(
        took >= Duration::from_millis(75) && took < Duration::from_millis(150),
        "{took:?}"
    );
    // A 429 too.
    assert_eq!(
        send(&budget, http::Method::PUT, |_| reply(429, &[]))
            .await
            .1,
        3
    );
}

#[tokio::test(start_paused = true)]
async fn the_backends_own_errors_are_final_and_lost_answers_retried_when_idempotent() {
    let budget = budget();
    for method in [http::Method::GET, http::Method::POST] {
        assert_eq!(send(&budget, method, |_| reply(500, &[])).await.1, 1);
    }
    let lost = |_| -> Answer { Err("connection reset".into()) };
    assert_eq!(send(&budget, http::Method::GET, lost).await.1, 3);
    assert_eq!(send(&budget, http::Method::POST, lost).await.1, 1);
}

#[tokio::test(start_paused = true)]
async fn grpc_pushback_is_honoured_and_a_negative_one_ends_the_retries() {
    let budget = budget();
    let exhausted = |pushback: &'static str| {
        move |attempt: usize| match attempt {
            0 => reply(
                200,
                &[
                    ("grpc-status", "8"),
                    ("admit-refusal", "queue-delay"),
                    ("grpc-retry-pushback-ms", pushback),
                ],
            ),
            _ => reply(200, &[("grpc-status", "0")]),
        }
    };
    let (answer, attempts, took) = send(&budget, http::Method::POST, exhausted("300")).await;
    assert_eq!(attempts, 2);
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert_eq!(answer.unwrap().headers()["grpc-status"], "0");
    assert_eq!(
        send(&budget, http::Method::POST, exhausted("-1")).await.1,
        1
    );
    // UNAVAILABLE from admit is retried too; without `admit-refusal` a POST is not.
    let unavailable = |_| reply(200, &[("grpc-status", "14"), ("admit-refusal", "draining")]);
    assert_eq!(send(&budget, http::Method::POST, unavailable).await.1, 3);
    let plain = |_| reply(200, &[("grpc-status", "14")]);
    assert_eq!(send(&budget, http::Method::POST, plain).await.1, 1);
}

#[tokio::test(start_paused = true)]
async fn the_budget_bounds_a_storm() {
    // 10 % of the requests, no floor: 200 requests refused every time make 20 retries.
    let budget = Arc::new(
        RetryBudget::builder()
            .ratio(0.1)
            .floor_per_second(0.0)
            .build()
            .unwrap(),
    );
    let mut attempts = 0;
    for _ in 0..200 {
        attempts += send(&budget, http::Method::POST, |_| admit_503("0"))
            .await
            .1;
    }
    assert_eq!(attempts, 220);
    let snapshot = budget.snapshot();
    assert_eq!((snapshot.requests, snapshot.retries), (200, 20));
}

#[tokio::test(start_paused = true)]
async fn an_attempt_the_throttle_refuses_is_not_retried() {
    use admit::client::{Throttle, ThrottleLayer, Throttled};

    let budget = budget();
    let throttle = Arc::new(Throttle::builder().build().unwrap());
    let attempts = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&attempts);
    let backend = service_fn(move |_: http::Request<()>| {
        counter.fetch_add(1, Ordering::SeqCst);
        async { admit_503("0") }
    });
    let policy = RetryPolicy::builder(Arc::clone(&budget)).build().unwrap();
    let client =
        RetryLayer::new(policy).layer(ThrottleLayer::new(Arc::clone(&throttle)).layer(backend));
    let mut throttled = 0u64;
    for _ in 0..200 {
        let request = http::Request::get("/").body(()).unwrap();
        if let Err(error) = client.clone().oneshot(request).await {
            assert!(error.is::<Throttled>(), "{error}");
            throttled += 1;
        }
    }
    assert_eq!(budget.snapshot().requests, 200);
    assert!(throttled > 100, "{throttled}");
    // Each attempt the throttle refused ended its request: the throttle counted the attempts
    // sent and one refusal per throttled request, none retried.
    let sent = attempts.load(Ordering::SeqCst) as u64;
    assert_eq!(throttle.snapshot().requests, sent + throttled);
}
