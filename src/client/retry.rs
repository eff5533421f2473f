//! A tower retry policy that cannot storm: only what may be sent again, after the server's
//! hint, a few attempts at most, within a budget shared by the client.

use std::sync::Arc;
use std::time::Duration;

use http::Method;

use super::draw::Draws;
use super::{DeadlineExceeded, RetryBudget, Throttled, answer, time_left};
use crate::ConfigError;
use crate::clock::{Clock, MonotonicClock};
use crate::criticality::Criticality;
use crate::respond::{BoxError, REFUSAL_HEADER};

const DEFAULT_ATTEMPTS: u32 = 3;
const MAX_ATTEMPTS: u32 = 10;
const DEFAULT_BACKOFF: Duration = Duration::from_millis(50);
const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(1);
/// gRPC's pushback metadata: how long to wait before retrying, in ms; negative: do not.
const PUSHBACK: &str = "grpc-retry-pushback-ms";

/// A [`tower::retry::Policy`] for HTTP and gRPC clients that retries only what may be sent
/// again, no sooner than the server asked, at most a few times, within a [`RetryBudget`]
/// shared by the client.
///
/// An answer is retried when it refuses for overload or unavailability (a 503 or 429, gRPC
/// `RESOURCE_EXHAUSTED` or `UNAVAILABLE` in a trailers-only answer) and either:
///
/// - it carries [`admit-refusal`](crate::respond::REFUSAL_HEADER): admit refused it before the service ran any
///   of it, so nothing was done; or
/// - the request's method is idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE), so doing it
///   twice does no harm.
///
/// A failure without an answer (the inner service's error) is retried for idempotent methods
/// only: the request may have been processed. Any other answer is final, errors of the
/// backend's own included, and so is an attempt a [`ThrottleLayer`](super::ThrottleLayer)
/// inside refused ([`Throttled`]): the backend is overloaded, and the budget is not spent on it.
///
/// The inner service's error is a [`BoxError`], as tower's layers make it (a
/// [`ThrottleLayer`](super::ThrottleLayer) inside does; otherwise `map_err(Into::into)`).
///
/// Each retry waits for the server's hint (`Retry-After` in seconds, or
/// `grpc-retry-pushback-ms`; a negative pushback means the server asks for no retry) or the
/// backoff, whichever is longer; the backoff doubles from its base with each attempt, up to
/// its most, each wait drawn between half and all of it. A request is sent at most
/// `max_attempts` times, and a retry is made only if the budget has one.
///
/// The budget's [totals](RetryBudget::totals) count each request as the class its
/// [`admit-criticality`](crate::criticality::CRITICALITY_HEADER) header claims (`critical`
/// without one).
///
/// tower's `Retry` clones the policy for each request: the budget is shared, the attempt
/// count is the request's. The request's body must be `Clone` (`Full<Bytes>`, `()`): a
/// streamed body cannot be sent twice.
///
/// ```
/// use std::sync::Arc;
/// use admit::client::{RetryBudget, RetryPolicy};
/// use tower::ServiceBuilder;
/// use tower::retry::RetryLayer;
///
/// # fn main() -> Result<(), admit::ConfigError> {
/// let budget = Arc::new(RetryBudget::builder().build()?);
/// let layer = ServiceBuilder::new().layer(RetryLayer::new(RetryPolicy::builder(budget).build()?));
/// # let _ = layer;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct RetryPolicy<C = MonotonicClock> {
    budget: Arc<RetryBudget<C>>,
    draws: Arc<Draws>,
    max_attempts: u32,
    backoff: Duration,
    max_backoff: Duration,
    /// This request's attempts so far.
    attempts: u32,
    /// This request's deadline on the budget's clock, from the time left it carried.
    deadline_nanos: Option<u64>,
    /// This request's class, as its header claims: what the budget counts it as.
    class: Criticality,
}

impl<C> Clone for RetryPolicy<C> {
    fn clone(&self) -> Self {
        RetryPolicy {
            budget: Arc::clone(&self.budget),
            draws: Arc::clone(&self.draws),
            max_attempts: self.max_attempts,
            backoff: self.backoff,
            max_backoff: self.max_backoff,
            attempts: self.attempts,
            deadline_nanos: self.deadline_nanos,
            class: self.class,
        }
    }
}

impl<C: Clock> RetryPolicy<C> {
    /// A builder spending from `budget`: 3 attempts, a backoff from 50 ms to 1 s.
    pub fn builder(budget: Arc<RetryBudget<C>>) -> RetryPolicyBuilder<C> {
        RetryPolicyBuilder {
            budget,
            max_attempts: DEFAULT_ATTEMPTS,
            backoff: DEFAULT_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
        }
    }

    /// The wait before attempt `attempts + 1`: the backoff, drawn, or the server's hint if
    /// longer.
    fn wait(&self, hint: Option<Duration>) -> Duration {
        let doublings = self.attempts.saturating_sub(1).min(31);
        let backoff = self
            .backoff
            .saturating_mul(1 << doublings)
            .min(self.max_backoff);
        // At most the backoff itself, which a product rounded up past `Duration::MAX` is not.
        let drawn =
            Duration::try_from_secs_f64(backoff.as_secs_f64() * (0.5 + 0.5 * self.draws.next()))
                .map_or(backoff, |drawn| drawn.min(backoff));
        hint.map_or(drawn, |hint| hint.max(drawn))
    }
}

/// Configures a [`RetryPolicy`]; [`build`](Self::build) checks the settings.
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct RetryPolicyBuilder<C> {
    budget: Arc<RetryBudget<C>>,
    max_attempts: u32,
    backoff: Duration,
    max_backoff: Duration,
}

impl<C: Clock> RetryPolicyBuilder<C> {
    /// How many times a request may be sent, the first included (default 3, as the SRE book
    /// advises; 1 to 10).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// The first retry's backoff, and the most any retry's may grow to (default 50 ms and
    /// 1 s).
    pub fn backoff(mut self, first: Duration, most: Duration) -> Self {
        self.backoff = first;
        self.max_backoff = most;
        self
    }

    /// The policy.
    ///
    /// # Errors
    ///
    /// - [`ConfigError::AttemptsOutOfRange`]: `max_attempts` is not 1 to 10;
    /// - [`ConfigError::DurationTooShort`]: the first backoff is zero, or the most is below
    ///   it.
    pub fn build(self) -> Result<RetryPolicy<C>, ConfigError> {
        if !(1..=MAX_ATTEMPTS).contains(&self.max_attempts) {
            return Err(ConfigError::AttemptsOutOfRange {
                attempts: self.max_attempts,
                max: MAX_ATTEMPTS,
            });
        }
        if self.backoff.is_zero() {
            return Err(ConfigError::DurationTooShort {
                setting: "backoff",
                value: self.backoff,
                min: Duration::from_nanos(1),
            });
        }
        if self.max_backoff < self.backoff {
            return Err(ConfigError::DurationTooShort {
                setting: "max_backoff",
                value: self.max_backoff,
                min: self.backoff,
            });
        }
        Ok(RetryPolicy {
            budget: self.budget,
            draws: Arc::new(Draws::seeded()),
            max_attempts: self.max_attempts,
            backoff: self.backoff,
            max_backoff: self.max_backoff,
            attempts: 1,
            deadline_nanos: None,
            class: Criticality::Critical,
        })
    }
}

impl<C, B, RB> tower::retry::Policy<http::Request<B>, http::Response<RB>, BoxError>
    for RetryPolicy<C>
where
    C: Clock,
    B: Clone,
{
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        request: &mut http::Request<B>,
        result: &mut Result<http::Response<RB>, BoxError>,
    ) -> Option<tokio::time::Sleep> {
        if self.attempts == 1 {
            // The request counts once, when its first attempt ends.
            self.budget.deposit_as(self.class);
        }
        let idempotent = is_idempotent(request.method());
        let hint = match result {
            Ok(response) => retry_hint(response, idempotent)?,
            // Refused here: the backend is overloaded, and the attempt was not sent.
            Err(error) if error.is::<Throttled>() || error.is::<DeadlineExceeded>() => return None,
            Err(_) if idempotent => None,
            Err(_) => return None,
        };
        if self.attempts >= self.max_attempts {
            return None;
        }
        let wait = self.wait(hint);
        // The time left once the wait is over, if the request has a deadline.
        let left = match self.deadline_nanos {
            None => None,
            Some(deadline) => {
                let sent = self
                    .budget
                    .now_nanos()
                    .saturating_add(crate::clock::saturating_nanos(wait));
                match deadline.checked_sub(sent) {
                    Some(left) if left > 0 => Some(Duration::from_nanos(left)),
                    _ => return None,
                }
            }
        };
        if !self.budget.try_withdraw_as(self.class) {
            return None;
        }
        if let Some(left) = left {
            time_left::write(request.headers_mut(), left);
        }
        self.attempts += 1;
        Some(tokio::time::sleep(wait))
    }

    fn clone_request(&mut self, request: &http::Request<B>) -> Option<http::Request<B>> {
        if self.attempts == 1 {
            // Before the first attempt: its class, and its deadline, the time left it carries
            // from now.
            self.class = super::layer::request_class(request.headers());
            self.deadline_nanos = time_left::carried(request.headers()).map(|left| {
                let left = crate::clock::saturating_nanos(left);
                self.budget.now_nanos().saturating_add(left)
            });
        }
        Some(request.clone())
    }
}

/// RFC 9110's idempotent methods.
fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

/// For an answer that may be retried, the server's hint (`Some(None)`: none given); `None`
/// for an answer that is final.
fn retry_hint<B>(response: &http::Response<B>, idempotent: bool) -> Option<Option<Duration>> {
    if !answer::is_refusal(response) || !(answer::processed_nothing(response) || idempotent) {
        return None;
    }
    let headers = response.headers();
    if headers
        .get(REFUSAL_HEADER)
        .is_some_and(|why| why.as_bytes() == b"deadline")
    {
        // Sent again, it would find even less time.
        return None;
    }
    if let Some(pushback) = headers.get(PUSHBACK) {
        // A negative or unreadable pushback: the server asks for no retry.
        let ms = pushback.to_str().ok()?.trim().parse::<u64>().ok()?;
        return Some(Some(Duration::from_millis(ms)));
    }
    let after = headers
        .get(http::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok()?.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    Some(after)
}
