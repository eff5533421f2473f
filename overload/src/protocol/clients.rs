//! How the storm's clients retry: at once, after a backoff, or as admit's client half does
//! (a throttle, a retry policy on a budget, and a deadline sent with each request).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use admit::client::{DeadlineLayer, RetryBudget, RetryPolicy, Throttle, ThrottleLayer, Throttled};
use admit_loadgen::{
    Backoff, Driver, HttpClient, Outcome, Refusal, Retry, Transport, classify, classify_status,
};
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::time::Instant;
use tower::retry::RetryLayer;
use tower::{Layer, ServiceExt, service_fn};

use crate::BoxError;

/// Every style's most retries after the first attempt (3 attempts in all).
pub(crate) const RETRIES: u32 = 3;
/// The backoff of the `backoff` style: exponential with full jitter, 50 ms to 1 s.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(50), Duration::from_secs(1));

/// How a storm's clients retry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ClientStyle {
    /// Each refusal, timeout or lost request retried at once, up to [`RETRIES`] times.
    Immediate,
    /// The same after an exponential backoff with full jitter ([`BACKOFF`]).
    Backoff,
    /// admit's client: a `Throttle` (over a window of this many seconds, in 20 buckets, or
    /// with its defaults), a `RetryPolicy` on a `RetryBudget` with their defaults, and a
    /// `DeadlineLayer` sending the load generator's deadline.
    Admit(Option<f64>),
}

impl ClientStyle {
    /// The load generator's driver for this style: admit's client retries inside the
    /// transport, so the driver does not.
    pub(crate) fn driver(self, deadline: Duration) -> Result<Driver, BoxError> {
        let driver = Driver::new(deadline);
        Ok(match self {
            ClientStyle::Immediate => driver.retry(Retry::new(RETRIES)),
            ClientStyle::Backoff => driver
                .retry(Retry::new(RETRIES).backoff(Backoff::exponential(BACKOFF.0, BACKOFF.1)?)),
            ClientStyle::Admit(_) => driver,
        })
    }
}

/// `immediate`, `backoff`, `admit` (the throttle's default window) or `admit:<window in s>`.
impl fmt::Display for ClientStyle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientStyle::Immediate => f.write_str("immediate"),
            ClientStyle::Backoff => f.write_str("backoff"),
            ClientStyle::Admit(None) => f.write_str("admit"),
            ClientStyle::Admit(Some(window)) => write!(f, "admit:{window}"),
        }
    }
}

impl FromStr for ClientStyle {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "immediate" => Ok(ClientStyle::Immediate),
            "backoff" => Ok(ClientStyle::Backoff),
            "admit" => Ok(ClientStyle::Admit(None)),
            _ => match text.strip_prefix("admit:").map(str::parse::<f64>) {
                Some(Ok(window)) if (0.1..=3600.0).contains(&window) => {
                    Ok(ClientStyle::Admit(Some(window)))
                }
                _ => Err(format!(
                    "`{text}`: a client style is immediate, backoff, admit or admit:<window s, 0.1 to 3600>"
                )),
            },
        }
    }
}

impl serde::Serialize for ClientStyle {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// When attempts reached the server and when a client refused one itself.
#[derive(Clone, Debug, Default)]
pub(crate) struct Attempts {
    sent: Arc<Mutex<Vec<Instant>>>,
    throttled: Arc<Mutex<Vec<Instant>>>,
}

impl Attempts {
    fn note(log: &Mutex<Vec<Instant>>) {
        log.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Instant::now());
    }

    pub(crate) fn sent(&self) {
        Attempts::note(&self.sent);
    }

    fn throttled(&self) {
        Attempts::note(&self.throttled);
    }

    /// Attempts sent in `[from, until)` s from `start`.
    pub(crate) fn sent_between(&self, start: Instant, from: f64, until: f64) -> usize {
        between(&self.sent, start, from, until)
    }

    /// The last local refusal, s from `start`, if any.
    pub(crate) fn last_throttled(&self, start: Instant) -> Option<f64> {
        let log = self
            .throttled
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        log.iter()
            .map(|at| at.saturating_duration_since(start).as_secs_f64())
            .reduce(f64::max)
    }

    /// Local refusals in `[from, until)` s from `start`.
    pub(crate) fn throttled_between(&self, start: Instant, from: f64, until: f64) -> usize {
        between(&self.throttled, start, from, until)
    }
}

fn between(log: &Mutex<Vec<Instant>>, start: Instant, from: f64, until: f64) -> usize {
    let log = log.lock().unwrap_or_else(PoisonError::into_inner);
    log.iter()
        .map(|at| at.saturating_duration_since(start).as_secs_f64())
        .filter(|at| (from..until).contains(at))
        .count()
}

/// admit's client half around hyper's client: a deadline sent with each request, retries by
/// `RetryPolicy` on a shared `RetryBudget`, and a shared `Throttle` in front of each attempt.
#[derive(Clone, Debug)]
pub(crate) struct AdmitClient {
    client: Client<HttpConnector, Empty<Bytes>>,
    throttle: Arc<Throttle>,
    policy: RetryPolicy,
    deadline: DeadlineLayer,
    attempts: Attempts,
}

impl AdmitClient {
    /// A client whose throttle counts over `window` s (or its default window); requests get
    /// `deadline`.
    pub(crate) fn new(
        window: Option<f64>,
        deadline: Duration,
        attempts: Attempts,
    ) -> Result<AdmitClient, BoxError> {
        let throttle = match window {
            Some(window) => Throttle::builder().window(Duration::from_secs_f64(window), 20),
            None => Throttle::builder(),
        }
        .build()?;
        let budget = RetryBudget::builder().build()?;
        let policy = RetryPolicy::builder(Arc::new(budget))
            .max_attempts(RETRIES + 1)
            .build()?;
        Ok(AdmitClient {
            client: Client::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(5))
                .build_http(),
            throttle: Arc::new(throttle),
            policy,
            deadline: DeadlineLayer::new().with_timeout(deadline),
            attempts,
        })
    }
}

impl Transport<Empty<Bytes>> for AdmitClient {
    async fn send(&self, request: Request<Empty<Bytes>>) -> Outcome {
        let (client, attempts) = (self.client.clone(), self.attempts.clone());
        let wire = service_fn(move |mut request: Request<Empty<Bytes>>| {
            let (client, attempts) = (client.clone(), attempts.clone());
            async move {
                // As a proxy stamps each attempt it forwards: a retry is not a request that
                // queued since the first.
                let stamp = http::HeaderValue::from_str(&crate::request_start())?;
                request.headers_mut().insert("x-request-start", stamp);
                attempts.sent();
                let response = client.request(request).await?;
                let (parts, body) = response.into_parts();
                body.collect().await?;
                Ok::<_, BoxError>(http::Response::from_parts(parts, ()))
            }
        });
        let stack = self.deadline.layer(
            RetryLayer::new(self.policy.clone())
                .layer(ThrottleLayer::new(Arc::clone(&self.throttle)).layer(wire)),
        );
        // Boxed: without the coercion, the compiler does not prove the stack's future `Send`
        // through its error conversions.
        type Answer = Result<http::Response<()>, BoxError>;
        let answer: Pin<Box<dyn Future<Output = Answer> + Send>> = Box::pin(stack.oneshot(request));
        match answer.await {
            Ok(response) => classify_status(response.status(), response.headers()),
            Err(error) if error.is::<Throttled>() => {
                self.attempts.throttled();
                Outcome::Refused(Refusal {
                    status: StatusCode::SERVICE_UNAVAILABLE,
                    retry_after: None,
                    reason: Some("throttled-locally".to_owned()),
                })
            }
            Err(error) => Outcome::Lost(classify(&*error)),
        }
    }
}

/// The plain load generator's client, noting each attempt.
#[derive(Clone, Debug)]
pub(crate) struct PlainClient {
    client: HttpClient<Empty<Bytes>>,
    attempts: Attempts,
}

impl PlainClient {
    fn new(attempts: Attempts) -> PlainClient {
        PlainClient {
            client: HttpClient::new(),
            attempts,
        }
    }
}

impl Transport<Empty<Bytes>> for PlainClient {
    async fn send(&self, request: Request<Empty<Bytes>>) -> Outcome {
        self.attempts.sent();
        self.client.send(request).await
    }
}

/// Either client, as the storm's style says.
#[derive(Clone, Debug)]
pub(crate) enum StyleClient {
    Plain(PlainClient),
    Admit(AdmitClient),
}

impl StyleClient {
    pub(crate) fn new(
        style: ClientStyle,
        deadline: Duration,
        attempts: Attempts,
    ) -> Result<StyleClient, BoxError> {
        Ok(match style {
            ClientStyle::Immediate | ClientStyle::Backoff => {
                StyleClient::Plain(PlainClient::new(attempts))
            }
            ClientStyle::Admit(window) => {
                StyleClient::Admit(AdmitClient::new(window, deadline, attempts)?)
            }
        })
    }
}

impl Transport<Empty<Bytes>> for StyleClient {
    async fn send(&self, request: Request<Empty<Bytes>>) -> Outcome {
        match self {
            StyleClient::Plain(client) => client.send(request).await,
            StyleClient::Admit(client) => client.send(request).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles_read_and_print_back() {
        for text in ["immediate", "backoff", "admit", "admit:1", "admit:0.5"] {
            assert_eq!(text.parse::<ClientStyle>().unwrap().to_string(), text);
        }
        for bad in ["", "admit:", "admit:0", "admit:x", "retry"] {
            assert!(bad.parse::<ClientStyle>().is_err(), "{bad}");
        }
    }
}
